/* tests/bench/rdzv_loadgen.c — K simulated rendezvous agents against one real hosting podrun.
 *
 * Plays K-1 agents (the hosting podrun agent is the K-th) over real TCP connections from one
 * epoll loop per thread (--threads T: thread t plays the agents of the source addresses
 * i % T == t), each from a source address of its own among 127.0.0.2-251, speaking exactly what
 * rdzv/backend_store.c sends: one connection per agent, the same requests in the same writes and
 * the same keys, with the records encoded by rdzv/records.c and the requests by rdzv/store/wire.c.
 * Each agent joins, heartbeats every heartbeat period (rdzv_heartbeat_ms: keep_alive_interval,
 * longer in a job of more than RDZV_HEARTBEAT_RATE agents), waits for its assignment and for the
 * end of its round, reports done or a failure, and rejoins after a restart decision, as the real
 * agent does once its workers are gone (a simulated agent has none, so it rejoins at once).
 * The round's end goes through the relay tree as between real agents (rdzv/relay.h): each
 * agent's join names a relay port (one UDP socket per source address, shared by that address's
 * agents: a datagram names its receiver's node rank), a root WAITs on the end, a fed agent takes
 * it from its parent's datagram or from its heartbeat's GET, and each sends it on to the children
 * its assignment names before it does anything else; with --no-relay no agent offers a port, so
 * every one WAITs on the store as before the tree.
 *
 * One run:
 *   1. every agent connects and joins: `round` is the time from the last join written until every
 *      agent has read its assignment;
 *   2. `--steady S` seconds of heartbeats: the host's CPU share and RSS (from /proc/PID);
 *   3. `--spares M` more agents join the running round (they wait for room): whether the running
 *      round noticed, and the host's CPU share again with them waiting;
 *   4. `--hold H` failures whose rejoins wait until the push has reached every agent: the push
 *      alone, and the host's CPU time for it (/proc/PID/schedstat); then
 *      `--rounds R` failures, one at a time: one agent reports a failure of its worker and every
 *      agent rejoins after the decision: per round the failure push (report -> each agent's WAIT
 *      on the round's end woken, and -> the decision read), the restart (report -> every agent
 *      holding its next assignment) and the messages each agent sent and received;
 *      every `--sample N` rounds the host's key count, RSS and descriptors (the soak);
 *   5. every agent reports done and the host's worker exits 0: the job finishes.
 * Prints one JSON object on stdout; progress on stderr. The phases, the report and main are in
 * loadgen_phases.c; the clock, timers, /proc readers and relay sockets in loadgen_util.c.
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
#include <pthread.h>
#include <sched.h>
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
#include "rdzv/relay.h"
#include "rdzv/rendezvous.h"
#include "rdzv/store/wire.h"
#include "tests/bench/loadgen_util.h"

#include "tests/bench/loadgen.h"

/* ---- options and the agents (loadgen.h) ---- */

struct loadgen_opts O = {.k = 1024, .interval = 1, .progress = 5, .steady = 5, .host = "127.0.0.1",
                         .sample = 0, .burst = 512, .threads = 1};
agent_t *agents;
int n_members;       /* agents [0, n_members) are round 0's members; the rest spares */
int n_agents;        /* simulated: K-1 members + spares */
_Thread_local int epfd, my_thread;
static _Thread_local int connecting;   /* this thread's connects in flight */
static _Thread_local int next_connect; /* the next agent this thread looks at to connect */
static _Thread_local unsigned short rnd[3]; /* this thread's nrand48 state */
char prefix[128];
_Atomic int connected;
_Atomic int connect_limit;
conn_t probe;
int64_t probe_keys = -1;
_Atomic long errors;
int *by_rank;
_Atomic int holding;
_Atomic int release_gen, done_gen;
_Atomic long relayed, polled, relay_sent, relay_lost, relay_bad;
_Atomic long tree_joined, gathers, go_relayed, go_read, tree_fallbacks;
_Atomic uint64_t t_last_gather, t_first_go;
char first_error[256];

void error_once(const agent_t *a, const char *what)
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
    buf_append(&c->obuf, &c->olen, &c->ocap, p, len);
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

static _Thread_local wire_buf_t wb;

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

/* The WAIT + GET of the k-th assign key; with go_get, the next round's go read between them
 * (a root of the tree, or an agent that gave up on its parent). */
static void wait_assign(agent_t *a)
{
    char key[256];
    node_key(a, key, sizeof key, "assign", a->join_k);
    if (!a->go_get) {
        send_wait_get(a, key, E_GET_ASSIGN);
        return;
    }
    char go[256];
    const char *keys[] = {key};
    sfmt(go, sizeof go, "%sr/%d/go", prefix, a->round + 1);
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, WIRE_WAIT) || wire_put_keys(&wb, keys, 1) ||
        wire_put_op(&wb, WIRE_V2, WIRE_GET) || wire_put_str(&wb, go, strlen(go)) ||
        wire_put_op(&wb, WIRE_V2, WIRE_GET) || wire_put_str(&wb, key, strlen(key)))
        die("encode");
    conn_write(&a->c, wb.p, wb.len);
    expect(&a->c, E_WAIT);
    expect(&a->c, E_GET_GO);
    expect(&a->c, E_GET_ASSIGN);
    a->sent += 3;
    wb.len = 0;
}

static int join_record(const agent_t *a, char *val, size_t cap)
{
    rdzv_desc_rec_t d;
    memset(&d, 0, sizeof d);
    sfmt(d.name, sizeof d.name, "%s", a->name);
    sfmt(d.addr, sizeof d.addr, "%s", a->addr);
    sfmt(d.host, sizeof d.host, "loadgen");
    d.nproc = 1;
    d.want_rank = -1;
    d.pid = (int)getpid();
    d.relay_port = O.no_relay ? 0 : relay_sock_port(a->idx % RELAY_ADDRS);
    return rdzv_desc_encode(&d, val, cap);
}

/* JOINING: the k-th join record and the WAIT + GET of the k-th assign key. */
void send_join(agent_t *a)
{
    char key[256], val[1024];
    int len = join_record(a, val, sizeof val);
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
    uint32_t nonce = (uint32_t)nrand48(rnd);
    a->ping_nonce = (nonce & ~0xFFu) | (2 + nonce % 254);
    wb.len = 0;
    if (wire_put_op(&wb, WIRE_V2, WIRE_PING) || wire_put_u32(&wb, a->ping_nonce))
        die("encode");
    send_req(&a->c, &wb, E_PING);
    a->ping_out = 1;
    a->ping_sent = now_ns();
}

/* Whether a fed agent's heartbeat asks the store for its round's end: not yet taken. */
static int polling(const agent_t *a)
{
    return a->fed && a->state == A_RUNNING && a->woken_round != a->round;
}

/* A fed agent's heartbeat asks for its round's end (the real agent's GET in place of a PING). */
static void send_poll(agent_t *a)
{
    char key[256];
    sfmt(key, sizeof key, "%sr/%d/end", prefix, a->round);
    req_key(WIRE_GET, key);
    send_req(&a->c, &wb, E_POLL);
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

void send_fail(agent_t *a)
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

void send_done(agent_t *a)
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

/* ---- timers: heartbeats and progress lines (loadgen_util.h's heap) ---- */

enum { T_HB, T_PROG, T_GATHER, T_TREE };

static void flush_held(agent_t *a);
static void tree_fallback(agent_t *a);

/* the heartbeat period of a job of K agents, as the real agent computes it (main) */
uint64_t hb_ns;
_Atomic int *assigned_in, *woken_in;
int rounds_cap;

/* The real agent's progress timer: 1 s after it starts joining, then every progress interval,
 * a GET of the coordinator's status line while it waits. `gen` is the join it belongs to. */
void start_progress(agent_t *a)
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
        else if (!a->ping_out && polling(a))
            send_poll(a);
        else if (!a->ping_out && now - since >= quiet)
            send_ping(a);
        heap_push(t->at + hb_ns, a->idx, T_HB, 0);
    } else if (t->kind == T_GATHER) {
        if (a->gather_armed && t->gen == a->join_k)
            flush_held(a);
    } else if (t->kind == T_TREE) {
        if (a->tree_wait && a->state == A_JOINING && t->gen == a->join_k)
            tree_fallback(a);
    } else if (a->state == A_JOINING && t->gen == a->join_k && !a->tree_wait) {
        send_status(a);
        heap_push(t->at + ns(O.progress), a->idx, T_PROG, t->gen);
    }
}

/* ---- replies ---- */

/* The relay links of an assignment (rdzv/relay.h), as the real agent takes them. */
static void take_links(agent_t *a, const char *val, size_t len)
{
    static _Thread_local relay_links_t l;
    relay_links_take(val, len, &l);
    a->fed = l.fed;
    a->parent_rank = l.parent.node_rank;
    a->parent_sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(l.parent.port)};
    if (l.fed && inet_pton(AF_INET, l.parent.addr, &a->parent_sa.sin_addr) != 1)
        a->fed = 0;
    if (l.n > a->ch_cap) {
        a->ch_cap = l.n;
        a->ch = realloc(a->ch, (size_t)a->ch_cap * sizeof *a->ch);
        if (!a->ch)
            die("realloc");
    }
    a->nch = 0;
    for (int i = 0; i < l.n; i++) {
        struct child *c = &a->ch[a->nch];
        c->rank = l.child[i].node_rank;
        c->sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(l.child[i].port)};
        a->nch += inet_pton(AF_INET, l.child[i].addr, &c->sa.sin_addr) == 1;
    }
    if (a->node_rank < O.k + O.spares)
        by_rank[a->node_rank] = a->idx;
}

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
    a->tree_wait = a->go_get = a->self_in = a->children_in = a->direct = a->gather_armed = 0;
    a->held_len = 0;
    if (!O.no_relay) {
        a->last = realloc(a->last, len);
        if (!a->last)
            die("realloc");
        memcpy(a->last, val, len);
        a->last_len = len;
    }
    a->round = as.round;
    a->node_rank = as.node_rank;
    a->rank_base = as.rank_base;
    a->assigned_round = as.round;
    a->t_assigned = now_ns();
    if (as.round < rounds_cap)
        assigned_in[as.round]++;
    take_links(a, val, len);
    if (a->fed)
        return; /* its parent sends it the end; its heartbeat asks the store too */
    char key[256];
    sfmt(key, sizeof key, "%sr/%d/end", prefix, a->round);
    send_wait_get(a, key, E_GET_END);
}

/* Every agent of a round reads the same end record: it is decoded once per distinct record.
 * Real agents decode it on machines of their own, at once; one process playing them all would
 * otherwise spend the push decoding 16k copies one after another, which is no part of the
 * push. */
static int end_decode(const char *val, size_t len, rdzv_decision_t *d)
{
    static _Thread_local rdzv_failure_t failures[RDZV_MAX_FAILURES];
    static _Thread_local char *last;
    static _Thread_local size_t last_len;
    static _Thread_local rdzv_decision_t last_d;
    static _Thread_local int last_r;
    if (last && len == last_len && memcmp(val, last, len) == 0) {
        *d = last_d;
        return last_r;
    }
    last_r = rdzv_end_decode(val, len, &last_d, failures);
    free(last);
    last = malloc(len ? len : 1);
    if (!last)
        die("malloc");
    memcpy(last, val, len);
    last_len = len;
    *d = last_d;
    return last_r;
}

static void on_end(agent_t *a, const char *val, size_t len)
{
    rdzv_decision_t d;
    int r = end_decode(val, len, &d);
    a->t_decided = now_ns();
    if (r < 0) {
        error_once(a, "unreadable end record");
        a->state = A_OUT;
    } else if (r == 1) {
        a->state = A_FINISHED;
    } else if (d.action == RDZV_RESTART && holding) {
        a->rejoin_held = 1;
    } else if (d.action == RDZV_RESTART) {
        rejoin(a);
    } else {
        a->state = A_STOPPED;
    }
}

static void on_woken(agent_t *a);

/* The round's end, from the store (a root's GET, a fed agent's heartbeat poll) or from the
 * parent's datagram: the children first, as the real agent does, then the agent itself. */
static void take_end(agent_t *a, const char *val, size_t len)
{
    static _Thread_local char msg[RELAY_DGRAM_MAX];
    if (a->relay_round != a->round) {
        a->relay_round = a->round;
        for (int i = 0; i < a->nch; i++) {
            int n = relay_kmsg_encode(NULL, O.run_id, RELAY_END, a->round, a->ch[i].rank, val,
                                      len, msg, sizeof msg);
            if (n < 0)
                break;
            if (relay_sock_send(a->idx % RELAY_ADDRS, &a->ch[i].sa, msg, (size_t)n) == 0)
                relay_sent++;
            else
                relay_lost++;
        }
    }
    on_woken(a);
    on_end(a, val, len);
}

/* ---- the restart through the tree (rdzv/relay.h, as rdzv/relay_udp.c does it) ---- */

static void hold(agent_t *a, const char *p, size_t len)
{
    buf_append(&a->held, &a->held_len, &a->held_cap, p, len);
}

/* The held joins go up to the parent in one datagram, or to the store in one gather record. */
static void flush_held(agent_t *a)
{
    static _Thread_local char msg[RELAY_DGRAM_MAX];
    a->gather_armed = 0;
    if (a->held_len == 0)
        return;
    if (a->fed && !a->direct) {
        int n = relay_kmsg_encode(NULL, O.run_id, RELAY_JOINS, a->round, a->parent_rank, a->held,
                                  a->held_len, msg, sizeof msg);
        if (n < 0)
            error_once(a, "a subtree's joins do not fit one datagram");
        else if (relay_sock_send(a->idx % RELAY_ADDRS, &a->parent_sa, msg, (size_t)n) == 0)
            relay_sent++;
        else
            relay_lost++;
    } else {
        char key[256];
        node_key(a, key, sizeof key, "gather", a->gather_seq++);
        send_set(a, key, a->held, a->held_len);
        gathers++;
        t_last_gather = now_ns();
    }
    a->held_len = 0;
}

static void maybe_flush(agent_t *a)
{
    if (!a->self_in)
        return;
    if (a->children_in >= a->nch) {
        flush_held(a);
    } else if (!a->gather_armed) {
        a->gather_armed = 1;
        heap_push(now_ns() + (uint64_t)RELAY_GATHER_MS * 1000000, a->idx, T_GATHER, a->join_k);
    }
}

/* A member of the stopped round's tree: a fed one sends its join up; a root joins the store,
 * reading the go with its assignment, and writes its subtree's joins there. */
void rejoin(agent_t *a)
{
    a->join_k++;
    int in_tree = !O.no_relay && a->last && (a->fed || a->nch > 0);
    if (in_tree && a->fed) {
        char val[1024], entry[1200];
        int len = join_record(a, val, sizeof val);
        int n = relay_entry_put(entry, sizeof entry, a->ids, a->join_k, val, (size_t)len);
        hold(a, entry, (size_t)n);
        a->self_in = 1;
        a->tree_wait = 1;
        a->state = A_JOINING;
        a->t_join = now_ns();
        tree_joined++;
        heap_push(now_ns() + hb_ns, a->idx, T_TREE, a->join_k);
        maybe_flush(a);
        return;
    }
    if (in_tree) {
        a->self_in = a->direct = a->go_get = 1;
        maybe_flush(a);
    }
    send_join(a);
    start_progress(a);
}

/* No go a heartbeat period after the join went up: the same join to the store. */
static void tree_fallback(agent_t *a)
{
    tree_fallbacks++;
    a->tree_wait = 0;
    a->go_get = a->direct = 1;
    flush_held(a);
    char key[256], val[1024];
    int len = join_record(a, val, sizeof val);
    node_key(a, key, sizeof key, "join", a->join_k);
    send_set(a, key, val, (size_t)len);
    wait_assign(a);
    start_progress(a);
}

/* The next round's go, from the parent or the store: on to the children, then the assignment
 * (in place: the last one moved to the new round; else read from the store). */
static void take_go(agent_t *a, const char *body, size_t blen)
{
    static _Thread_local char msg[RELAY_DGRAM_MAX];
    int round, count, inplace;
    if (a->state != A_JOINING || a->go_round == a->round ||
        relay_go_decode(body, blen, &round, &count, &inplace) < 0 || round != a->round + 1)
        return;
    a->go_round = a->round;
    for (int i = 0; i < a->nch; i++) {
        int n = relay_kmsg_encode(NULL, O.run_id, RELAY_GO, a->round, a->ch[i].rank, body, blen,
                                  msg, sizeof msg);
        if (n >= 0 && relay_sock_send(a->idx % RELAY_ADDRS, &a->ch[i].sa, msg, (size_t)n) == 0)
            relay_sent++;
        else
            relay_lost++;
    }
    int was_waiting = a->tree_wait;
    a->tree_wait = 0;
    char val[512 + RELAY_LINKS_MAX];
    int n = inplace ? relay_assign_inplace(a->last, a->last_len, round, count, val, sizeof val)
                    : -1;
    if (n > 0)
        on_assign(a, val, (size_t)n);
    else if (was_waiting)
        wait_assign(a);
}

/* The datagrams waiting on relay socket idx: each for the agent of the node rank it names. */
static void on_relay_readable(int idx)
{
    static _Thread_local char buf[RELAY_DGRAM_MAX + 1];
    long n;
    while ((n = relay_sock_recv(idx, buf, sizeof buf)) >= 0) {
        int kind, round, to;
        const char *body;
        size_t blen;
        agent_t *a = NULL;
        if (relay_kmsg_decode(NULL, O.run_id, buf, (size_t)n, &kind, &round, &to, &body,
                              &blen) == 0 &&
            to < O.k + O.spares && by_rank[to] >= 0)
            a = &agents[by_rank[to]];
        if (a && a->node_rank == to && a->round == round && kind == RELAY_JOINS) {
            hold(a, body, blen);
            a->children_in++;
            maybe_flush(a);
            continue;
        }
        if (a && a->node_rank == to && a->round == round && kind == RELAY_GO) {
            if (a->state == A_JOINING && a->go_round != a->round)
                go_relayed++;
            take_go(a, body, blen);
            continue;
        }
        if (!a || kind != RELAY_END || a->node_rank != to || a->round != round || !polling(a)) {
            relay_bad++;
            continue;
        }
        relayed++;
        take_end(a, body, blen);
    }
}

/* A WAIT woke: its value follows in the same reply. The end of a round is where the real agent
 * stops its workers (ending), so that is the push's arrival. */
static void on_woken(agent_t *a)
{
    if (a->state == A_RUNNING && a->woken_round != a->round) {
        a->t_woken = now_ns();
        a->woken_round = a->round;
        if (a->round < rounds_cap)
            woken_in[a->round]++;
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
    connected++;
    start_progress(a);
    /* heartbeats from now on, at a random phase as agents started at different times */
    a->ping_sent = now_ns();
    send_hb(a);
    heap_push(now_ns() + (uint64_t)(erand48(rnd) * hb_ns), a->idx, T_HB, 0);
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
    case E_GET_GO:
        if (r->val.len > 0 && a->state == A_JOINING && a->go_round != a->round) {
            if (!t_first_go)
                t_first_go = now_ns();
            go_read++;
        }
        if (r->val.len > 0)
            take_go(a, r->val.p, r->val.len);
        break;
    case E_GET_END:
        take_end(a, r->val.p, r->val.len);
        break;
    case E_POLL:
        a->ping_out = 0;
        if (r->val.len > 0 && polling(a)) {
            polled++;
            take_end(a, r->val.p, r->val.len);
        }
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
    c->nonce = (uint32_t)nrand48(rnd);
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

int mine(const agent_t *a)
{
    return (a->idx % RELAY_ADDRS) % O.threads == my_thread;
}

static void connect_more(void)
{
    int limit = connect_limit;
    while (next_connect < limit && connecting < O.burst) {
        agent_t *a = &agents[next_connect++];
        if (!mine(a))
            continue;
        a->state = A_CONNECTING;
        conn_open(&a->c, a, AGENT, a->addr);
        connecting++;
    }
}

/* What thread 0 asked of every thread since this one last looked: held rejoins out, every
 * running agent done. */
static void take_requests(void)
{
    static _Thread_local int released, done;
    int g = release_gen, d = done_gen;
    if (g != released) {
        released = g;
        for (int i = 0; i < n_agents; i++)
            if (agents[i].rejoin_held && mine(&agents[i])) {
                agents[i].rejoin_held = 0;
                rejoin(&agents[i]);
            }
    }
    if (d != done) {
        done = d;
        for (int i = 0; i < n_agents; i++)
            if (agents[i].state == A_RUNNING && mine(&agents[i]))
                send_done(&agents[i]);
    }
}

/* ---- the loop ---- */

void poll_once(int timeout_ms)
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
        if (ev[i].data.u64 & RELAY_TAG) {
            on_relay_readable((int)(ev[i].data.u64 & ~RELAY_TAG));
            continue;
        }
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
    take_requests();
    connect_more();
}

/* ---- threads ---- */

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* not allowed: unpinned */
}

static void thread_setup(int t)
{
    my_thread = t;
    rnd[0] = (unsigned short)t;
    rnd[1] = (unsigned short)now_ns();
    rnd[2] = (unsigned short)getpid();
    if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        die("epoll_create1");
    relay_socks_watch(epfd, t, O.threads);
    if (O.threads > 1)
        pin(t % 2);
    /* CPU 1 is the host's: a thread there takes what the host leaves (the host's agent would
     * have a machine of its own), at the lowest priority */
    if (t % 2 == 1)
        (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
}

static void *thread_main(void *arg)
{
    thread_setup((int)(intptr_t)arg);
    for (;;)
        poll_once(10);
    return NULL;
}

void threads_start(void)
{
    thread_setup(0);
    for (int t = 1; t < O.threads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, thread_main, (void *)(intptr_t)t) != 0)
            die("pthread_create");
        pthread_detach(th);
    }
}

/* Runs the loop until pred() holds or `secs` pass; 0 when it held. */
int run_until(int (*pred)(void), double secs)
{
    uint64_t end = now_ns() + ns(secs);
    while (!pred()) {
        if (now_ns() > end || errors)
            return -1;
        poll_once(10);
    }
    return 0;
}

void run_for(double secs)
{
    uint64_t end = now_ns() + ns(secs);
    while (now_ns() < end)
        poll_once(10);
}

/* ---- the host, from /proc ---- */

static int probe_answered(void)
{
    return probe_keys >= 0;
}

/* The host's key count, asked with GETNUMKEYS on a connection of its own. */
long host_keys(void)
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

