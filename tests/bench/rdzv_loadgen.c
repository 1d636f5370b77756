/* tests/bench/rdzv_loadgen.c — K simulated rendezvous agents against one real hosting podrun.
 *
 * Plays K-1 agents (the hosting podrun agent is the K-th) over real TCP connections from one
 * epoll loop, each from a source address of its own among 127.0.0.2-251, speaking exactly what
 * rdzv/backend_store.c sends: one connection per agent, the same requests in the same writes and
 * the same keys, with the records encoded by rdzv/records.c and the requests by rdzv/store/wire.c.
 * Each agent joins, heartbeats every heartbeat period (rdzv_heartbeat_ms: keep_alive_interval,
 * longer in a job of more than RDZV_HEARTBEAT_RATE agents), waits for its assignment and for the
 * end of its round, reports done or a failure, and rejoins after a restart decision, as the real
 * agent does once its workers are gone (a simulated agent has none, so it rejoins at once).
 *
 * One run:
 *   1. every agent connects and joins: `round` is the time from the last join written until every
 *      agent has read its assignment;
 *   2. `--steady S` seconds of heartbeats: the host's CPU share and RSS (from /proc/PID);
 *   3. `--spares M` more agents join the running round (they wait for room): whether the running
 *      round noticed, and the host's CPU share again with them waiting;
 *   4. `--rounds R` failures, one at a time: one agent reports a failure of its worker and every
 *      agent rejoins after the decision: per round the failure push (report -> each agent's WAIT
 *      on the round's end woken, and -> the decision read), the restart (report -> every agent
 *      holding its next assignment) and the messages each agent sent and received;
 *      every `--sample N` rounds the host's key count, RSS and descriptors (the soak);
 *   5. every agent reports done and the host's worker exits 0: the job finishes.
 * Prints one JSON object on stdout; progress on stderr.
 *
 * The host is started by the driver (tests/bench/scale_bench.py) with the same --nnodes K and
 * this program as its worker: `rdzv_loadgen --worker FILE` runs until SIGTERM or until FILE
 * exists, then exits 0. Timestamps are taken when this process reads a reply, so every latency
 * includes this process's own queueing: on one machine it is an upper bound of what K agents on
 * K machines would see. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdzv/records.h"
#include "rdzv/rendezvous.h"
#include "rdzv/store/wire.h"

/* ---- options ---- */

static struct {
    int k, spares, rounds, sample;
    double steady, interval, progress;
    char host[64];
    int port;
    int host_pid;
    char run_id[64], done_file[512];
    int burst;
} O = {.k = 1024, .interval = 1, .progress = 5, .steady = 5, .host = "127.0.0.1", .sample = 0,
       .burst = 512};

/* ---- clock ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "rdzv_loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- connections ---- */

/* What the reply at the head of a connection's queue answers. */
enum exp_kind { E_HELLO, E_PING, E_STATUS, E_WAIT, E_GET_ASSIGN, E_GET_END, E_NUMKEYS, E_CANCEL };
enum { AGENT, PROBE };
#define EXP_MAX 32

struct agent;

typedef struct conn {
    int fd;
    struct agent *a;
    unsigned char which, up;
    unsigned char exp[EXP_MAX];
    unsigned ehead, en;
    char *rbuf;
    size_t rlen, rcap;
    char *obuf;
    size_t olen, ocap;
    uint32_t nonce;
} conn_t;

enum agent_state { A_NEW, A_CONNECTING, A_JOINING, A_RUNNING, A_STOPPED, A_FINISHED, A_OUT };

typedef struct agent {
    int idx;
    char ids[17], name[32], addr[32];
    conn_t c;
    int state, spare;
    int join_k, round, node_rank, rank_base;
    int ping_out;
    uint32_t ping_nonce;
    uint64_t ping_sent, last_heard;
    uint64_t t_join, t_assigned, t_woken, t_decided;
    int assigned_round;  /* round of the latest assignment read, -1 none */
    int woken_round;     /* round whose end woke this agent, -1 none */
    uint64_t sent, recv; /* messages: requests written, replies read */
} agent_t;

static agent_t *agents;
static int n_members;       /* agents [0, n_members) are round 0's members; the rest spares */
static int n_agents;        /* simulated: K-1 members + spares */
static int epfd;
static char prefix[128];
static int connecting;      /* connects in flight */
static int next_connect;    /* next agent to connect */
static int connect_limit;   /* agents [0, connect_limit) may connect */
static conn_t probe;        /* GETNUMKEYS for the soak */
static int64_t probe_keys = -1;
static long errors;
static char first_error[256];

static void error_once(const agent_t *a, const char *what)
{
    if (!errors++)
        sfmt(first_error, sizeof first_error, "agent %d: %s", a ? a->idx : -1, what);
}

static void set_events(conn_t *c, uint32_t ev)
{
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &e) < 0)
        die("epoll_ctl");
}

/* Writes what the socket takes; the rest waits for EPOLLOUT. */
static void conn_write(conn_t *c, const char *p, size_t len)
{
    if (c->olen == 0) {
        ssize_t w = write(c->fd, p, len);
        if (w < 0 && errno != EAGAIN) {
            error_once(c->a, "write failed");
            return;
        }
        if (w < 0)
            w = 0;
        p += w;
        len -= (size_t)w;
        if (len == 0)
            return;
        set_events(c, EPOLLIN | EPOLLOUT);
    }
    if (c->olen + len > c->ocap) {
        c->ocap = (c->olen + len) * 2;
        c->obuf = realloc(c->obuf, c->ocap);
        if (!c->obuf)
            die("realloc");
    }
    memcpy(c->obuf + c->olen, p, len);
    c->olen += len;
}

static void flush_out(conn_t *c)
{
    ssize_t w = write(c->fd, c->obuf, c->olen);
    if (w < 0 && errno != EAGAIN) {
        error_once(c->a, "write failed");
        return;
    }
    if (w > 0) {
        memmove(c->obuf, c->obuf + w, c->olen - (size_t)w);
        c->olen -= (size_t)w;
    }
    if (c->olen == 0)
        set_events(c, EPOLLIN);
}

static void expect(conn_t *c, int kind)
{
    if (c->en == EXP_MAX) {
        error_once(c->a, "too many replies outstanding");
        return;
    }
    c->exp[(c->ehead + c->en++) % EXP_MAX] = (unsigned char)kind;
}

/* Sends one encoded request; `reply` is what its reply answers, or -1 for none (SET). */
static void send_req(conn_t *c, wire_buf_t *b, int reply)
{
    conn_write(c, b->p, b->len);
    if (reply >= 0)
        expect(c, reply);
    if (c->a)
        c->a->sent++;
    b->len = 0;
}

static wire_buf_t wb;

static void req_key(wire_op_t op, const char *key)
{
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, op) || wire_put_str(&wb, key, strlen(key)))
        die("encode");
}

static void send_set(agent_t *a, const char *key, const char *val, size_t len)
{
    req_key(WIRE_SET, key);
    if (wire_put_str(&wb, val, len))
        die("encode");
    send_req(&a->c, &wb, -1);
}

/* A WAIT on key and the GET that reads it, in one write (the store answers both together). */
static void send_wait_get(agent_t *a, const char *key, int get)
{
    const char *keys[] = {key};
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, WIRE_WAIT) || wire_put_keys(&wb, keys, 1))
        die("encode");
    if (wire_put_op(&wb, WIRE_V2, WIRE_GET) || wire_put_str(&wb, key, strlen(key)))
        die("encode");
    conn_write(&a->c, wb.p, wb.len);
    expect(&a->c, E_WAIT);
    expect(&a->c, get);
    a->sent += 2;
    wb.len = 0;
}

static void node_key(const agent_t *a, char *out, size_t cap, const char *what, int num)
{
    rdzv_node_key(out, cap, prefix, a->ids, what, num);
}

/* ---- the agent's protocol (rdzv/backend_store.c) ---- */

static void wait_assign(agent_t *a)
{
    char key[256];
    node_key(a, key, sizeof key, "assign", a->join_k);
    send_wait_get(a, key, E_GET_ASSIGN);
}

/* JOINING: the k-th join record and the WAIT + GET of the k-th assign key. */
static void send_join(agent_t *a)
{
    rdzv_desc_rec_t d;
    memset(&d, 0, sizeof d);
    sfmt(d.name, sizeof d.name, "%s", a->name);
    sfmt(d.addr, sizeof d.addr, "%s", a->addr);
    sfmt(d.host, sizeof d.host, "loadgen");
    d.nproc = 1;
    d.want_rank = -1;
    d.pid = (int)getpid();
    char key[256], val[1024];
    int len = rdzv_desc_encode(&d, val, sizeof val);
    node_key(a, key, sizeof key, "join", a->join_k);
    send_set(a, key, val, (size_t)len);
    wait_assign(a);
    a->state = A_JOINING;
    a->t_join = now_ns();
}

/* The heartbeat: a SET of the hb key, no answer. */
static void send_hb(agent_t *a)
{
    char key[256];
    node_key(a, key, sizeof key, "hb", -1);
    send_set(a, key, "", 0);
}

/* A PING whose echo cannot be taken for a WAIT's answer (its first byte is >= 2). */
static void send_ping(agent_t *a)
{
    uint32_t nonce = (uint32_t)lrand48();
    a->ping_nonce = (nonce & ~0xFFu) | (2 + nonce % 254);
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, WIRE_PING) || wire_put_u32(&wb, a->ping_nonce))
        die("encode");
    send_req(&a->c, &wb, E_PING);
    a->ping_out = 1;
    a->ping_sent = now_ns();
}

/* The progress line while joining: CANCEL_WAIT, GET status, then WAIT + GET assign again. */
static void send_status(agent_t *a)
{
    char key[256];
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, WIRE_CANCEL_WAIT))
        die("encode");
    send_req(&a->c, &wb, E_CANCEL);
    sfmt(key, sizeof key, "%sstatus", prefix);
    req_key(WIRE_GET, key);
    send_req(&a->c, &wb, E_STATUS);
    wait_assign(a);
}

static void send_fail(agent_t *a)
{
    rdzv_failure_t f;
    rdzv_failure_init(&f);
    sfmt(f.node_name, sizeof f.node_name, "%s", a->name);
    sfmt(f.host, sizeof f.host, "%s", a->addr);
    f.node_rank = a->node_rank;
    f.rank = a->rank_base;
    f.local_rank = 0;
    f.exit_code = 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    f.time = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    sfmt(f.reason, sizeof f.reason, "exit code 1");
    char key[256], val[2048];
    int len = rdzv_failure_encode(&f, val, sizeof val);
    node_key(a, key, sizeof key, "fail", a->round);
    send_set(a, key, val, (size_t)len);
}

static void send_done(agent_t *a)
{
    char key[256];
    node_key(a, key, sizeof key, "done", a->round);
    send_set(a, key, "1", 1);
}

/* The expected replies: a FIFO, but the echo of a PING may overtake a WAIT (rdzv/store/aclient.c),
 * and one WAIT_CANCELED answers a WAIT and the CANCEL_WAIT behind it. */
static int exp_at(const conn_t *c, unsigned i)
{
    return c->exp[(c->ehead + i) % EXP_MAX];
}

static void exp_remove(conn_t *c, unsigned i)
{
    for (unsigned j = i; j + 1 < c->en; j++)
        c->exp[(c->ehead + j) % EXP_MAX] = c->exp[(c->ehead + j + 1) % EXP_MAX];
    c->en--;
}

/* ---- timers: heartbeats and progress lines, in a binary heap ---- */

typedef struct tmr {
    uint64_t at;
    int agent, kind, gen;
} tmr_t;
enum { T_HB, T_PROG };
static tmr_t *heap;
static size_t heap_n, heap_cap;

static void heap_push(uint64_t at, int agent, int kind, int gen)
{
    if (heap_n == heap_cap) {
        heap_cap = heap_cap ? 2 * heap_cap : 1024;
        heap = realloc(heap, heap_cap * sizeof *heap);
        if (!heap)
            die("realloc");
    }
    size_t i = heap_n++;
    heap[i] = (tmr_t){at, agent, kind, gen};
    while (i > 0 && heap[(i - 1) / 2].at > heap[i].at) {
        tmr_t t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static tmr_t heap_pop(void)
{
    tmr_t top = heap[0];
    heap[0] = heap[--heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_n && heap[l].at < heap[m].at)
            m = l;
        if (r < heap_n && heap[r].at < heap[m].at)
            m = r;
        if (m == i)
            break;
        tmr_t t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
    return top;
}

static uint64_t ns(double s)
{
    return (uint64_t)(s * 1e9);
}

/* the heartbeat period of a job of K agents, as the real agent computes it (main) */
static uint64_t hb_ns;

/* The real agent's progress timer: 1 s after it starts joining, then every progress interval,
 * a GET of the coordinator's status line while it waits. `gen` is the join it belongs to. */
static void start_progress(agent_t *a)
{
    double first = O.progress < 1 ? O.progress : 1;
    heap_push(now_ns() + ns(first), a->idx, T_PROG, a->join_k);
}

static void on_tick(const tmr_t *t)
{
    agent_t *a = &agents[t->agent];
    if (a->state == A_OUT || a->state == A_FINISHED)
        return;
    if (t->kind == T_HB) {
        /* the heartbeat; after a window of quiet from the host (or a heartbeat period, where
         * that is longer), a PING; a PING unanswered for the hang bound (10 windows) is what
         * makes the real agent give up: an error here */
        uint64_t now = now_ns(), w = ns(3 * O.interval), quiet = w > hb_ns ? w : hb_ns;
        uint64_t since = a->last_heard > a->ping_sent ? a->last_heard : a->ping_sent;
        send_hb(a);
        if (a->ping_out && now - since >= 10 * w)
            error_once(a, "the host did not answer for the hang bound");
        else if (!a->ping_out && now - since >= quiet)
            send_ping(a);
        heap_push(t->at + hb_ns, a->idx, T_HB, 0);
    } else if (a->state == A_JOINING && t->gen == a->join_k) {
        send_status(a);
        heap_push(t->at + ns(O.progress), a->idx, T_PROG, t->gen);
    }
}

/* ---- replies ---- */

static void on_assign(agent_t *a, const char *val, size_t len)
{
    if (len == 0 || a->state != A_JOINING)
        return; /* the GET behind a WAIT cancelled for a progress line, or already assigned */
    rdzv_assignment_t as;
    char host[RDZV_NAME_MAX], err[32], text[RDZV_LINE_MAX];
    if (rdzv_assign_decode(val, len, &as, host, sizeof host, err, sizeof err, text,
                           sizeof text) < 0) {
        error_once(a, "unreadable assignment");
        a->state = A_OUT;
        return;
    }
    if (err[0]) {
        if (strcmp(err, "finished") == 0) {
            a->state = A_FINISHED;
        } else {
            char why[400];
            sfmt(why, sizeof why, "assignment error %s: %s", err, text);
            error_once(a, why);
            a->state = A_OUT;
        }
        return;
    }
    a->state = A_RUNNING;
    a->round = as.round;
    a->node_rank = as.node_rank;
    a->rank_base = as.rank_base;
    a->assigned_round = as.round;
    a->t_assigned = now_ns();
    char key[256];
    sfmt(key, sizeof key, "%sr/%d/end", prefix, a->round);
    send_wait_get(a, key, E_GET_END);
}

static void on_end(agent_t *a, const char *val, size_t len)
{
    static rdzv_failure_t failures[RDZV_MAX_FAILURES];
    rdzv_decision_t d;
    int r = rdzv_end_decode(val, len, &d, failures);
    a->t_decided = now_ns();
    if (r < 0) {
        error_once(a, "unreadable end record");
        a->state = A_OUT;
    } else if (r == 1) {
        a->state = A_FINISHED;
    } else if (d.action == RDZV_RESTART) {
        a->join_k++;
        send_join(a);
        start_progress(a);
    } else {
        a->state = A_STOPPED;
    }
}

/* A WAIT woke: its value follows in the same reply. The end of a round is where the real agent
 * stops its workers (ending), so that is the push's arrival. */
static void on_woken(agent_t *a)
{
    if (a->state == A_RUNNING && a->woken_round != a->round) {
        a->t_woken = now_ns();
        a->woken_round = a->round;
    }
}

static void on_hello(conn_t *c)
{
    c->up = 1;
    agent_t *a = c->a;
    if (!a || a->state != A_CONNECTING)
        return;
    connecting--;
    send_join(a);
    start_progress(a);
    /* heartbeats from now on, at a random phase as agents started at different times */
    a->ping_sent = now_ns();
    send_hb(a);
    heap_push(now_ns() + (uint64_t)(drand48() * hb_ns), a->idx, T_HB, 0);
}

static wire_reply_shape_t shape_of(int kind)
{
    switch (kind) {
    case E_HELLO: case E_PING: return WIRE_R_U32;
    case E_NUMKEYS: return WIRE_R_I64;
    case E_WAIT: case E_CANCEL: return WIRE_R_U8;
    default: return WIRE_R_VEC;
    }
}

static void on_reply(conn_t *c, int kind, const wire_reply_t *r)
{
    agent_t *a = c->a;
    if (a)
        a->recv++;
    switch (kind) {
    case E_HELLO:
        if (r->u32 != c->nonce)
            error_once(a, "bad hello");
        on_hello(c);
        break;
    case E_PING:
        if (r->u32 != a->ping_nonce)
            error_once(a, "bad PING echo");
        a->ping_out = 0;
        break;
    case E_STATUS:
    case E_CANCEL:
        break;
    case E_WAIT:
        /* the GET sent with it is next: only a WAIT on the round's end is the push (one on an
         * assign key re-sent after a progress line may wake after the assignment was read) */
        if (r->u8 == WIRE_STOP_WAITING && c->en > 0 && exp_at(c, 0) == E_GET_END)
            on_woken(a);
        break;
    case E_GET_ASSIGN:
        on_assign(a, r->val.p, r->val.len);
        break;
    case E_GET_END:
        on_end(a, r->val.p, r->val.len);
        break;
    case E_NUMKEYS:
        probe_keys = r->num;
        break;
    }
}

static void on_readable(conn_t *c)
{
    for (;;) {
        if (c->rcap - c->rlen < 4096) {
            c->rcap = c->rcap ? 2 * c->rcap : 8192;
            c->rbuf = realloc(c->rbuf, c->rcap);
            if (!c->rbuf)
                die("realloc");
        }
        ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            if (c->a && c->a->state != A_FINISHED && c->a->state != A_STOPPED)
                error_once(c->a, "the host closed the connection");
            epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->fd = -1;
            if (c->a)
                c->a->state = A_OUT;
            return;
        }
        if (n < 0)
            break;
        c->rlen += (size_t)n;
        if ((size_t)n < c->rcap - c->rlen + (size_t)n)
            break;
    }
    if (c->a)
        c->a->last_heard = now_ns();
    size_t off = 0;
    while (c->en > 0 && off < c->rlen) {
        unsigned at = 0;
        int kind = exp_at(c, 0);
        if (kind == E_WAIT && (unsigned char)c->rbuf[off] > WIRE_WAIT_CANCELED) {
            while (at < c->en && exp_at(c, at) != E_PING) /* a PING's echo overtakes it */
                at++;
            if (at == c->en) {
                error_once(c->a, "unexpected bytes ahead of a WAIT's answer");
                break;
            }
            kind = E_PING;
        }
        wire_reply_t r;
        size_t need = 0;
        ssize_t used = wire_reply_parse(shape_of(kind), 0, c->rbuf + off, c->rlen - off,
                                        &wire_reply_limits, &r, &need);
        if (used < 0) {
            error_once(c->a, "unreadable reply");
            break;
        }
        if (used == 0)
            break;
        off += (size_t)used;
        if (at == 0) {
            c->ehead = (c->ehead + 1) % EXP_MAX;
            c->en--;
        } else {
            exp_remove(c, at);
        }
        if (kind == E_WAIT && r.u8 == WIRE_WAIT_CANCELED) {
            unsigned k = 0; /* the CANCEL_WAIT behind it is answered by the same byte */
            while (k < c->en && exp_at(c, k) != E_CANCEL)
                k++;
            if (k < c->en)
                exp_remove(c, k);
        }
        on_reply(c, kind, &r);
    }
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
}

/* ---- connecting ---- */

static void hello(conn_t *c)
{
    wb.len = 0;
    c->nonce = (uint32_t)lrand48();
    if (wire_put_op(&wb, WIRE_V2, WIRE_VALIDATE) || wire_put_u32(&wb, WIRE_MAGIC) ||
        wire_put_op(&wb, WIRE_V2, WIRE_PING) || wire_put_u32(&wb, c->nonce))
        die("encode");
    send_req(c, &wb, E_HELLO);
}

/* A non-blocking connect from `src` (NULL: any). */
static void conn_open(conn_t *c, agent_t *a, int which, const char *src)
{
    memset(c, 0, sizeof *c);
    c->a = a;
    c->which = (unsigned char)which;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket (raise the descriptor limit?)");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (src) {
        setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &sa.sin_addr);
        if (bind(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            die("bind");
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)O.port)};
    inet_pton(AF_INET, O.host, &to.sin_addr);
    struct epoll_event e = {.events = EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &e) < 0)
        die("epoll_ctl");
    if (connect(c->fd, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS)
        die("connect");
}

/* The connect finished (EPOLLOUT while not up): say hello or fail. */
static void on_connected(conn_t *c)
{
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err) {
        errno = err;
        die("connect to the host");
    }
    set_events(c, EPOLLIN);
    c->up = 2; /* connected, hello out */
    hello(c);
}

static void connect_more(void)
{
    while (next_connect < connect_limit && connecting < O.burst) {
        agent_t *a = &agents[next_connect++];
        a->state = A_CONNECTING;
        conn_open(&a->c, a, AGENT, a->addr);
        connecting++;
    }
}

/* ---- the loop ---- */

static void poll_once(int timeout_ms)
{
    struct epoll_event ev[1024];
    uint64_t t = now_ns();
    while (heap_n && heap[0].at <= t) {
        tmr_t tm = heap_pop();
        on_tick(&tm);
    }
    if (heap_n) {
        int64_t d = (int64_t)(heap[0].at - t) / 1000000;
        if (d < timeout_ms)
            timeout_ms = d < 0 ? 0 : (int)d;
    }
    int n = epoll_wait(epfd, ev, 1024, timeout_ms);
    for (int i = 0; i < n; i++) {
        conn_t *c = ev[i].data.ptr;
        if (c->fd < 0)
            continue;
        if ((ev[i].events & EPOLLOUT) && c->up == 0) {
            on_connected(c);
            continue;
        }
        if ((ev[i].events & EPOLLOUT) && c->olen)
            flush_out(c);
        if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            on_readable(c);
    }
    connect_more();
}

/* Runs the loop until pred() holds or `secs` pass; 0 when it held. */
static int run_until(int (*pred)(void), double secs)
{
    uint64_t end = now_ns() + ns(secs);
    while (!pred()) {
        if (now_ns() > end || errors)
            return -1;
        poll_once(10);
    }
    return 0;
}

static void run_for(double secs)
{
    uint64_t end = now_ns() + ns(secs);
    while (now_ns() < end)
        poll_once(10);
}

/* ---- the host, from /proc ---- */

static double host_cpu_s(void)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", O.host_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long host_status_kib(const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", O.host_pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f)
        return -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = atol(line + fl + 1);
    fclose(f);
    return v;
}

static long host_fds(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", O.host_pid);
    DIR *d = opendir(path);
    long n = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* This process's own CPU seconds: on one machine the load generator's time is part of every
 * latency, so the JSON says how much of it there was. */
static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static int probe_answered(void)
{
    return probe_keys >= 0;
}

/* The host's key count, asked with GETNUMKEYS on a connection of its own. */
static long host_keys(void)
{
    if (!probe.up) {
        conn_open(&probe, NULL, PROBE, NULL);
        while (probe.up != 1 && !errors)
            poll_once(10);
    }
    probe_keys = -1;
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, WIRE_GETNUMKEYS))
        die("encode");
    send_req(&probe, &wb, E_NUMKEYS);
    run_until(probe_answered, 10);
    return (long)probe_keys;
}

/* ---- phases ---- */


static int all_joined_sent(void)
{
    return next_connect >= connect_limit && connecting == 0;
}

static int want_round;
static int all_assigned(void)
{
    for (int i = 0; i < n_members; i++)
        if (agents[i].state != A_OUT && agents[i].assigned_round < want_round)
            return 0;
    return 1;
}

static int members_assigned_count(int round)
{
    int n = 0;
    for (int i = 0; i < n_agents; i++)
        n += agents[i].assigned_round >= round && agents[i].state == A_RUNNING;
    return n;
}

static int all_over(void)
{
    for (int i = 0; i < n_agents; i++)
        if (agents[i].state != A_FINISHED && agents[i].state != A_OUT &&
            agents[i].state != A_STOPPED)
            return 0;
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(uint64_t *v, int n, double p)
{
    if (n == 0)
        return -1;
    int i = (int)ceil(p * n) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return (double)v[i] / 1e6;
}

/* The median of v[0..n) (sorts v); -1 for none. */
static double median_of(double *v, int n)
{
    if (n <= 0)
        return -1;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

/* Everything a run prints. */
static struct {
    double join_s, round_s, round0_msgs, cpu, spare_cpu;
    double round_host_cpu, round_self_cpu; /* CPU seconds of the failure rounds, all together */
    long rss, hwm, spare_rss;
    int disturbed, rounds, finished;
    double *push50, *push99, *pushmax, *dec99, *restart, *msgs;
} res = {.join_s = -1, .round_s = -1, .cpu = -1, .spare_cpu = -1, .rss = -1, .hwm = -1,
         .spare_rss = -1};

static int sampled;

static void sample(int round)
{
    long keys = host_keys();
    printf("%s{\"round\": %d, \"keys\": %ld, \"rss_kib\": %ld, \"fds\": %ld}",
           sampled++ ? ", " : "\"soak\": [", round, keys, host_status_kib("VmRSS"), host_fds());
    fflush(stdout);
}

/* 1. every member connects and joins; the round's time from the last join. */
static int phase_join(void)
{
    uint64_t t0 = now_ns();
    connect_limit = n_members;
    if (run_until(all_joined_sent, 120) < 0)
        return -1;
    uint64_t t_last_join = 0, t_all = 0;
    for (int i = 0; i < n_members; i++)
        if (agents[i].t_join > t_last_join)
            t_last_join = agents[i].t_join;
    want_round = 0;
    if (run_until(all_assigned, 120) < 0)
        return -1;
    uint64_t s = 0;
    for (int i = 0; i < n_members; i++) {
        if (agents[i].t_assigned > t_all)
            t_all = agents[i].t_assigned;
        s += agents[i].sent + agents[i].recv;
    }
    res.round_s = (double)(t_all - t_last_join) / 1e9;
    res.join_s = (double)(t_last_join - t0) / 1e9;
    res.round0_msgs = (double)s / n_members;
    fprintf(stderr, "k=%d: joined in %.3f s, round %.3f s after the last join\n", O.k,
            res.join_s, res.round_s);
    return 0;
}

/* 2. heartbeats only: the host's CPU share and memory. */
static void phase_steady(void)
{
    double c0 = host_cpu_s();
    run_for(O.steady);
    res.cpu = (host_cpu_s() - c0) / O.steady;
    res.rss = host_status_kib("VmRSS");
    res.hwm = host_status_kib("VmHWM");
    fprintf(stderr, "k=%d: steady %.1f s: host CPU %.1f %% of one core, RSS %ld KiB\n", O.k,
            O.steady, 100 * res.cpu, res.rss);
}

/* 3. spares join the running round: nobody of the round may notice. */
static int phase_spares(void)
{
    connect_limit = n_agents;
    if (run_until(all_joined_sent, 120) < 0)
        return -1;
    run_for(1);
    double s0 = host_cpu_s();
    run_for(O.steady);
    res.spare_cpu = (host_cpu_s() - s0) / O.steady;
    res.spare_rss = host_status_kib("VmRSS");
    for (int i = 0; i < n_members; i++)
        res.disturbed += agents[i].woken_round >= 0 || agents[i].assigned_round != 0;
    fprintf(stderr, "k=%d: +%d spares: host CPU %.1f %% of one core, RSS %ld KiB, %d members "
                    "disturbed\n",
            O.k, O.spares, 100 * res.spare_cpu, res.spare_rss, res.disturbed);
    return 0;
}

/* One failure in the running round and the restart after it; 0, or -1 if it did not restart. */
static int one_failure(int r, uint64_t *lat, uint64_t *lat2)
{
    int round = -1, f = -1;
    for (int i = 0; i < n_agents; i++)
        if (agents[i].state == A_RUNNING && agents[i].round > round)
            round = agents[i].round;
    for (int j = 0; j < n_agents && f < 0; j++) {
        int i = (int)((r * 7919L + j) % n_agents);
        if (agents[i].state == A_RUNNING && agents[i].round == round)
            f = i;
    }
    if (f < 0) {
        error_once(NULL, "no running member to fail");
        return -1;
    }
    int members = members_assigned_count(round), have;
    uint64_t m0 = 0, m1 = 0, tmax = 0;
    for (int i = 0; i < n_agents; i++)
        m0 += agents[i].sent + agents[i].recv;
    uint64_t tf = now_ns(), end = tf + ns(60);
    send_fail(&agents[f]);
    /* every member of `round` ends up in round+1 (or waiting for room in it) */
    while ((have = members_assigned_count(round + 1)) < members && !errors && now_ns() < end)
        poll_once(10);
    if (have < members)
        return -1;
    int n = 0;
    for (int i = 0; i < n_agents; i++) {
        agent_t *a = &agents[i];
        if (a->woken_round == round && a->t_woken >= tf) {
            lat[n] = a->t_woken - tf;
            lat2[n++] = a->t_decided - tf;
        }
        if (a->assigned_round == round + 1 && a->t_assigned > tmax)
            tmax = a->t_assigned;
        m1 += a->sent + a->recv;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    qsort(lat2, (size_t)n, sizeof *lat2, cmp_u64);
    res.push50[r] = pct_ms(lat, n, 0.5);
    res.push99[r] = pct_ms(lat, n, 0.99);
    res.pushmax[r] = pct_ms(lat, n, 1.0);
    res.dec99[r] = pct_ms(lat2, n, 0.99);
    res.restart[r] = (double)(tmax - tf) / 1e6;
    res.msgs[r] = (double)(m1 - m0) / members;
    if (O.rounds <= 20 || r % 100 == 0)
        fprintf(stderr, "k=%d round %d: push p50 %.1f p99 %.1f max %.1f ms, decision p99 %.1f "
                        "ms, restart %.1f ms, %.1f messages per agent\n",
                O.k, round, res.push50[r], res.push99[r], res.pushmax[r], res.dec99[r],
                res.restart[r], res.msgs[r]);
    return 0;
}

/* 4. failures, one at a time; the soak's samples every O.sample rounds. */
static void phase_failures(void)
{
    size_t n = (size_t)O.rounds + 1;
    res.push50 = calloc(n, sizeof(double));
    res.push99 = calloc(n, sizeof(double));
    res.pushmax = calloc(n, sizeof(double));
    res.dec99 = calloc(n, sizeof(double));
    res.restart = calloc(n, sizeof(double));
    res.msgs = calloc(n, sizeof(double));
    uint64_t *lat = malloc((size_t)n_agents * sizeof *lat),
             *lat2 = malloc((size_t)n_agents * sizeof *lat2);
    if (O.sample)
        sample(0);
    double h0 = host_cpu_s(), s0 = self_cpu_s();
    for (int r = 0; r < O.rounds; r++) {
        if (one_failure(r, lat, lat2) < 0)
            break;
        res.rounds = r + 1;
        if (O.sample && (r + 1) % O.sample == 0)
            sample(r + 1);
    }
    res.round_host_cpu = host_cpu_s() - h0;
    res.round_self_cpu = self_cpu_s() - s0;
    if (O.sample)
        printf("], ");
    free(lat);
    free(lat2);
}

/* 5. every member reports done and the host's worker exits 0: the job finishes. */
static void phase_done(void)
{
    for (int i = 0; i < n_agents; i++)
        if (agents[i].state == A_RUNNING)
            send_done(&agents[i]);
    if (O.done_file[0]) {
        FILE *df = fopen(O.done_file, "w");
        if (df)
            fclose(df);
    }
    res.finished = run_until(all_over, 60) == 0;
}

static void report(void)
{
    int n = res.rounds;
    printf("\"k\": %d, \"heartbeat_s\": %.3f, \"spares\": %d, \"join_s\": %.4f, \"round_s\": %.4f, "
           "\"round0_msgs_per_agent\": %.2f, \"steady_s\": %.1f, \"host_cpu\": %.4f, "
           "\"host_rss_kib\": %ld, \"host_hwm_kib\": %ld, \"spare_cpu\": %.4f, "
           "\"spare_rss_kib\": %ld, \"disturbed\": %d, \"rounds\": %d, \"push_p50_ms\": %.2f, "
           "\"push_p99_ms\": %.2f, \"push_max_ms\": %.2f, \"decision_p99_ms\": %.2f, "
           "\"restart_ms\": %.2f, \"msgs_per_agent_round\": %.2f, \"finished\": %d, "
           "\"rounds_host_cpu_s\": %.3f, \"rounds_loadgen_cpu_s\": %.3f, "
           "\"errors\": %ld, \"first_error\": \"%s\"}\n",
           O.k, (double)hb_ns / 1e9, O.spares, res.join_s, res.round_s, res.round0_msgs, O.steady, res.cpu, res.rss,
           res.hwm, res.spare_cpu, res.spare_rss, res.disturbed, n,
           n ? median_of(res.push50, n) : -1, n ? median_of(res.push99, n) : -1,
           n ? median_of(res.pushmax, n) : -1, n ? median_of(res.dec99, n) : -1,
           n ? median_of(res.restart, n) : -1, n ? median_of(res.msgs, n) : -1, res.finished,
           res.round_host_cpu, res.round_self_cpu, errors, first_error);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: rdzv_loadgen --port P --run-id ID --host-pid PID --k K [--spares M] "
            "[--rounds R] [--steady S] [--interval S] [--sample N] [--done-file FILE]\n"
            "       rdzv_loadgen --worker FILE\n");
    exit(2);
}

/* The host's worker: runs until SIGTERM or until FILE exists, then exits 0. */
static int worker(const char *file)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct timespec d = {0, 20 * 1000000};
    for (;;) {
        if (sigtimedwait(&set, NULL, &d) == SIGTERM || access(file, F_OK) == 0)
            return 0;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", 1, 0, 'p'},     {"run-id", 1, 0, 'r'},   {"host-pid", 1, 0, 'H'},
        {"k", 1, 0, 'k'},        {"spares", 1, 0, 's'},   {"rounds", 1, 0, 'R'},
        {"steady", 1, 0, 'S'},   {"interval", 1, 0, 'i'}, {"sample", 1, 0, 'N'},
        {"done-file", 1, 0, 'd'}, {"worker", 1, 0, 'w'},  {"host", 1, 0, 'h'},
        {"burst", 1, 0, 'b'},    {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'p': O.port = atoi(optarg); break;
        case 'r': snprintf(O.run_id, sizeof O.run_id, "%s", optarg); break;
        case 'H': O.host_pid = atoi(optarg); break;
        case 'k': O.k = atoi(optarg); break;
        case 's': O.spares = atoi(optarg); break;
        case 'R': O.rounds = atoi(optarg); break;
        case 'S': O.steady = atof(optarg); break;
        case 'i': O.interval = atof(optarg); break;
        case 'N': O.sample = atoi(optarg); break;
        case 'd': snprintf(O.done_file, sizeof O.done_file, "%s", optarg); break;
        case 'w': return worker(optarg);
        case 'h': snprintf(O.host, sizeof O.host, "%s", optarg); break;
        case 'b': O.burst = atoi(optarg); break;
        default: usage();
        }
    }
    if (!O.port || !O.run_id[0] || !O.host_pid || O.k < 2 || O.spares < 0 || O.rounds < 0)
        usage();
    rdzv_params_t hp;
    rdzv_params_default(&hp);
    hp.keep_alive_interval = O.interval;
    hp.min_nodes = hp.max_nodes = O.k;
    hb_ns = rdzv_heartbeat_ms(&hp) * 1000000;
    signal(SIGPIPE, SIG_IGN);
    srand48((long)now_ns());
    snprintf(prefix, sizeof prefix, "podrun/%s/", O.run_id);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    n_members = O.k - 1;
    n_agents = n_members + O.spares;
    agents = calloc((size_t)n_agents, sizeof *agents);
    if (epfd < 0 || !agents)
        die("setup");
    for (int i = 0; i < n_agents; i++) {
        agent_t *a = &agents[i];
        a->idx = i;
        a->spare = i >= n_members;
        a->assigned_round = a->woken_round = -1;
        podrun_random_id(a->ids, 16);
        snprintf(a->name, sizeof a->name, "sim-%d", i);
        snprintf(a->addr, sizeof a->addr, "127.0.0.%d", 2 + i % 250);
        a->c.fd = -1;
    }
    printf("{");
    if (phase_join() == 0) {
        phase_steady();
        if (O.spares == 0 || phase_spares() == 0) {
            phase_failures();
            phase_done();
        }
    }
    report();
    return errors ? 1 : 0;
}
