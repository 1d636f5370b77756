/* rdzv/backend_store.c — the rendezvous over the job store (c10d and static): one agent hosts the
 * store server with the coordinator beside it, fed by the server's observer; every agent, the
 * host's own over loopback, talks to it as an ordinary store client (the async client), on one
 * connection: a WAIT goes out together with the GET of its key (the store answers both in one
 * write), while records and heartbeats are SETs that the store applies at once behind it.
 * Protocol: rdzv/rendezvous.h.
 *
 * The agent side is a small state machine: CONNECTING -> JOINING (join sent, WAIT on the
 * assignment) -> RUNNING (WAIT on the round's end) -> STOPPED (the launcher restarts or exits)
 * or FINISHED; DEAD once lost() was called. Every request it makes gets its callback exactly
 * once, and the agent stays allocated until every one has come back and every handle is
 * closed (`pending`, `handles`). */
#include "rdzv/backend.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podrun/store.h"
#include "rdzv/acl.h"
#include "rdzv/aclient.h"
#include "rdzv/coordinator.h"
#include "rdzv/server.h"
#include "rdzv/state.h"

#define GUEST_CHECK_MS 5000   /* holds_this_run's bound */

enum agent_state {
    AS_CONNECTING,
    AS_JOINING,  /* join sent, waiting for the assignment */
    AS_RUNNING,  /* assigned, waiting for the end of the round */
    AS_STOPPED,  /* the round stopped; rejoin or exit is up to the launcher */
    AS_FINISHED,
    AS_DEAD,     /* lost() was called */
};

typedef struct store_agent {
    rdzv_agent_t base;          /* first: the API hands out &base */
    uv_loop_t *loop;
    rdzv_params_t p;
    char *run_id, *endpoint_host, *local_addr, *expected;
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX], hostname[RDZV_NAME_MAX];
    char domain[RDZV_NAME_MAX]; /* NVLink domain, "" none */
    int nproc, service;
    rdzv_callbacks_t cb;
    void *arg;
    char id[17];
    char prefix[256];
    char connect_host[RDZV_NAME_MAX];
    uint16_t port;
    auth_key_t token;           /* p.token points here when the job has one */

    /* host side */
    store_server_t *server;
    coord_t *coord;
    uv_timer_t ctimer[COORD_T_COUNT];

    /* agent side */
    store_aclient_t *conn;
    int ready;
    int state, join_k, round, node_rank;
    int stop_action; /* of the last decision */
    int leaving, closing;
    char *stranger;             /* the store is another run's: the line that says so */
    uv_timer_t hb_timer, prog_timer, defer_timer;
    int ping_out;               /* a PING asks the host for a sign of life */
    uint64_t ping_sent, hb_tick; /* loop times (ms) */
    double started;
    void (*leave_sent)(void *);
    void *leave_arg;

    /* what /metrics and `podrun status` see */
    unsigned long heartbeats, heartbeat_misses;
    rdzv_health_t health_sent;  /* the health check's state as last recorded in the store */
    double health_unsent;       /* epoch s of a check with no news since, for the next
                                   heartbeat to carry; 0: none */
    uv_timer_t state_timer;     /* host: the job's state record, every keep_alive_interval */
    int pub_round, pub_phase;   /* ... and at once when the round or its phase changed */

    /* lifetime: open handles and requests still owed a callback */
    int handles, pending;
    void (*closed)(void *);
    void *closed_arg;
} store_agent_t;

/* ---- lifetime ---- */

/* The last step of a close: frees the agent, then runs `closed` (the caller may free what it
 * gave us as arg from there). */
static void agent_free(store_agent_t *a)
{
    void (*closed)(void *) = a->closed;
    void *arg = a->closed_arg;
    coord_free(a->coord);
    free(a->run_id);
    free(a->stranger);
    free(a->endpoint_host);
    free(a->local_addr);
    free(a->expected);
    free(a);
    if (closed)
        closed(arg);
}

/* Frees the agent once it is closing and nothing can call back into it any more: every handle
 * closed, every request answered, the server gone. Called from each of those ends. */
static void maybe_free(store_agent_t *a)
{
    if (a->closing == 2 && a->handles == 0 && a->pending == 0 && !a->server)
        agent_free(a);
}

static void on_handle_closed(uv_handle_t *h)
{
    store_agent_t *a = h->data;
    a->handles--;
    maybe_free(a);
}

static void timer_init(store_agent_t *a, uv_timer_t *t)
{
    uv_timer_init(a->loop, t);
    t->data = a;
    a->handles++;
}

/* Every request gets a callback exactly once; `pending` keeps the agent alive until then. */
static int req_begin(store_agent_t *a, int rc)
{
    if (rc == 0)
        a->pending++;
    return rc;
}

/* Returns 1 if the agent is being torn down and the reply should be ignored. */
static int req_end(store_agent_t *a)
{
    a->pending--;
    if (a->closing) {
        maybe_free(a);
        return 1;
    }
    return 0;
}

static void stop_timers(store_agent_t *a)
{
    uv_timer_stop(&a->hb_timer);
    uv_timer_stop(&a->prog_timer);
}

/* This node is out of the job: tell the launcher once. */
static void agent_fail(store_agent_t *a, int err, const char *why)
{
    if (a->state == AS_DEAD || a->closing)
        return;
    a->state = AS_DEAD;
    stop_timers(a);
    if (a->cb.lost)
        a->cb.lost(a->arg, err, why);
}

static void progress(store_agent_t *a, const char *line)
{
    if (a->cb.progress)
        a->cb.progress(a->arg, line);
}

/* ---- host side: the coordinator next to the store ---- */

static void run_actions(store_agent_t *a);
static void publish_state(store_agent_t *a);

static void on_server_closed(void *arg)
{
    store_agent_t *a = arg;
    a->server = NULL;
    maybe_free(a);
}

/* Closing, second stage: the timers and (on the host) the server go; maybe_free finishes. */
static void close_handles(store_agent_t *a)
{
    uv_timer_t *ts[] = {&a->hb_timer, &a->prog_timer, &a->defer_timer};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        uv_close((uv_handle_t *)ts[i], on_handle_closed);
    if (a->coord) {
        for (int i = 0; i < COORD_T_COUNT; i++)
            uv_close((uv_handle_t *)&a->ctimer[i], on_handle_closed);
        uv_close((uv_handle_t *)&a->state_timer, on_handle_closed);
    }
    a->closing = 2;
    if (a->server)
        store_server_close(a->server, on_server_closed, a);
    else
        maybe_free(a);
}

/* One of the coordinator's timers, armed by run_actions, fired: its input, then its actions. */
static void on_ctimer(uv_timer_t *t)
{
    store_agent_t *a = t->data;
    int id = (int)(t - a->ctimer);
    coord_on_timer(a->coord, id, podrun_time_epoch());
    run_actions(a);
}

/* Applies the coordinator's actions in order: in-process writes that wake the remote WAITs,
 * timers, log lines, the workers' fresh namespace, and the final "closed". A write the store
 * cannot take (out of memory) would leave agents waiting for an answer that never comes, so this
 * agent gives up instead: with it goes the store, which every agent notices at once. */
static void run_actions(store_agent_t *a)
{
    coord_action_t act;
    char lost_key[256] = "";
    int lost = 0;
    while (coord_next_action(a->coord, &act)) {
        switch (act.kind) {
        case COORD_SET: {
            int r = store_server_set(a->server, act.key, strlen(act.key), act.val, act.vlen);
            if (r < 0 && !lost) {
                lost = r;
                sfmt(lost_key, sizeof lost_key, "%s", act.key);
            }
            break;
        }
        case COORD_TIMER:
            if (act.at < 0) {
                uv_timer_stop(&a->ctimer[act.timer]);
            } else {
                double d = (act.at - podrun_time_epoch()) * 1000.0;
                uv_timer_start(&a->ctimer[act.timer], on_ctimer, d > 0 ? (uint64_t)d + 1 : 0, 0);
            }
            break;
        case COORD_LOG:
            progress(a, act.val);
            break;
        case COORD_DELETE:
            store_server_delete(a->server, act.key, strlen(act.key));
            break;
        case COORD_DELETE_WORKERS:
            store_server_delete_except(a->server, act.key);
            break;
        case COORD_CLOSED:
            if (a->closing == 1)
                close_handles(a);
            return;
        default:
            break;
        }
    }
    coord_info_t info;
    coord_info(a->coord, &info);
    if (info.round != a->pub_round || info.phase != a->pub_phase)
        publish_state(a);
    if (lost) {
        /* an answer or a decision the agents wait for is missing: rather than leave them
         * waiting, this agent goes, and with it the store, which every agent notices */
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': could not record %s in the job store: %s",
             a->run_id, lost_key, podrun_strerror(lost));
        progress(a, why);
        agent_fail(a, PODRUN_ESTORELOST, why);
    }
}

/* Every observed key is a record an agent writes for the coordinator alone (join, heartbeat,
 * failure, done, leave): the coordinator reads it in-process and, by returning 1, lets the key
 * space drop it at once. */
static int on_observed_write(void *arg, uint64_t conn, const char *key, size_t klen,
                             const char *val, size_t vlen)
{
    store_agent_t *a = arg;
    if (a->closing == 2)
        return 0;
    coord_on_write(a->coord, conn, key, klen, val, vlen, podrun_time_epoch());
    run_actions(a);
    return 1;
}

/* A connection that wrote records closed: the coordinator decides whether its node is lost. */
static void on_observed_close(void *arg, uint64_t conn, int err)
{
    store_agent_t *a = arg;
    if (a->closing == 2)
        return;
    char why[96];
    sfmt(why, sizeof why, "unreachable, nothing acknowledged for %g s",
         a->p.keep_alive_interval * a->p.keep_alive_max_attempt);
    coord_on_close(a->coord, conn, err == UV_ETIMEDOUT ? why : NULL, podrun_time_epoch());
    run_actions(a);
}

static void on_store_log(void *arg, const char *line)
{
    store_agent_t *a = arg;
    if (a->cb.store_log)
        a->cb.store_log(a->arg, line);
}

/* A write under "podrun/<run>/n/" of another run is a node started with another --rdzv-id:
 * the refusal names that run and this one (the peer's address is in the same line). */
static void stranger_why(const store_agent_t *a, const char *key, size_t klen, char *why,
                         size_t cap)
{
    const size_t pl = sizeof "podrun/" - 1;
    const char *run = key + pl, *end = key + klen;
    const char *slash = klen > pl ? memchr(run, '/', (size_t)(end - run)) : NULL;
    if (!slash || slash == run || (size_t)(end - slash) < 3 || memcmp(slash, "/n/", 3) != 0)
        return;
    int rl = (int)(slash - run);
    if ((size_t)rl == strlen(a->run_id) && memcmp(run, a->run_id, (size_t)rl) == 0)
        return;
    for (int i = 0; i < rl; i++)
        if (run[i] < 0x21 || run[i] > 0x7e)
            return; /* not a run id a flag gives: the general reason, with the key escaped */
    sfmt(why, cap, "a node of run '%.*s' reached this job store, which belongs to run '%s'; "
         "give every node the same --rdzv-id (PET_RDZV_ID)", rl < 200 ? rl : 200, run, a->run_id);
}

/* Over the wire, the only keys under "podrun/" a client writes are agents' records and the
 * keys the agents' preflight check exchanges ("podrun/<run>/pf/", launcher/preflight: the
 * coordinator never reads them); the rest (assignments, ends of rounds, the status line) are the
 * coordinator's, written in-process. */
static int may_write(void *arg, const char *key, size_t klen, char *why, size_t cap)
{
    store_agent_t *a = arg;
    char prefix[300];
    sfmt(prefix, sizeof prefix, "podrun/%s/", a->run_id);
    size_t n = strlen(prefix);
    if (klen > n + 3 && memcmp(key, prefix, n) == 0 && memcmp(key + n, "pf/", 3) == 0)
        return 1;
    if (rdzv_agent_record_key(key, klen, prefix))
        return 1;
    stranger_why(a, key, klen, why, cap);
    return 0;
}

/* The job's state record (rdzv/state.h) for `podrun status`: written in-process, like the
 * coordinator's own keys, so readers anywhere see the round, the nodes and their last heartbeat
 * at most keep_alive_interval old. O(nodes) per write; the value is bounded by the store's
 * value limit (nodes beyond it are counted, not listed). */
static void publish_state(store_agent_t *a)
{
    if (!a->coord || !a->server || a->closing == 2)
        return;
    coord_info_t info;
    coord_info(a->coord, &info);
    size_t cap = (size_t)info.members + (size_t)info.joined + (size_t)info.waiting + 64;
    rdzv_state_node_t *nodes = malloc(cap * sizeof *nodes);
    if (!nodes)
        return;
    rdzv_state_t st;
    coord_state(a->coord, podrun_time_epoch(), &st, nodes, cap);
    a->pub_round = info.round;
    a->pub_phase = info.phase;
    char *text = NULL;
    long len = rdzv_state_encode(&st, 4u << 20, &text);
    if (len >= 0) {
        char key[320];
        sfmt(key, sizeof key, "%s%s", a->prefix, RDZV_STATE_KEY);
        store_server_set(a->server, key, strlen(key), text, (size_t)len);
    }
    free(text);
    free(nodes);
}

static void on_state_timer(uv_timer_t *t)
{
    publish_state(t->data);
}

/* The host's part of starting: bind the store, start the coordinator with its timers and let it
 * see every record write; this agent then joins over loopback like any other. */
static int host_start(store_agent_t *a)
{
    podrun_log_t log = {on_store_log, a};
    int rc = store_server_start(a->loop, a->local_addr, a->p.endpoint_port, NULL, &log,
                                &a->server);
    if (rc < 0)
        return rc;
    a->port = store_server_port(a->server);
    coord_params_t cp = {
        .run_id = a->run_id,
        .min_nodes = a->p.min_nodes,
        .max_nodes = a->p.max_nodes,
        .segment_size = a->p.segment_size,
        .max_restarts = a->p.max_restarts,
        .join_timeout = a->p.join_timeout,
        .last_call_timeout = a->p.last_call_timeout,
        .close_timeout = a->p.close_timeout,
        .keep_alive_interval = a->p.keep_alive_interval,
        .keep_alive_max_attempt = a->p.keep_alive_max_attempt,
        .progress_interval = a->p.progress_interval,
        .store_host = a->endpoint_host,
        .store_port = a->port,
        .expected = a->expected,
    };
    a->coord = coord_new(&cp, podrun_time_epoch());
    if (!a->coord) {
        store_server_close(a->server, NULL, NULL);
        a->server = NULL;
        return -EINVAL;
    }
    for (int i = 0; i < COORD_T_COUNT; i++)
        timer_init(a, &a->ctimer[i]);
    store_server_observe(a->server, coord_observe_prefix(a->coord), on_observed_write,
                         on_observed_close, a);
    store_server_guard(a->server, a->p.token, may_write, a);
    store_server_allow(a->server, a->p.allow);
    store_server_liveness(a->server, (unsigned)(a->p.keep_alive_interval *
                                                a->p.keep_alive_max_attempt * 1000));
    run_actions(a);
    /* who can be asked about: `podrun status HOST:PORT` starts from this list */
    char runs[RDZV_NAME_MAX + 2];
    sfmt(runs, sizeof runs, "%s\n", a->run_id);
    store_server_set(a->server, RDZV_RUNS_KEY, strlen(RDZV_RUNS_KEY), runs, strlen(runs));
    timer_init(a, &a->state_timer);
    uint64_t every = (uint64_t)(a->p.keep_alive_interval * 1000);
    uv_timer_start(&a->state_timer, on_state_timer, 0, every ? every : 1000);
    /* the host's own agent reaches the store over loopback */
    sfmt(a->connect_host, sizeof a->connect_host, "%s",
             a->local_addr && *a->local_addr ? a->local_addr : "127.0.0.1");
    return 0;
}

/* ---- agent side ---- */

/* The heartbeat window W (keep_alive_interval x keep_alive_max_attempt) and the hang bound H
 * (RDZV_HANG_FACTOR x W), in ms: see "Liveness" in rdzv/rendezvous.h. */
static uint64_t window_ms(const store_agent_t *a)
{
    return (uint64_t)(a->p.keep_alive_interval * a->p.keep_alive_max_attempt * 1000);
}

static uint64_t hang_ms(const store_agent_t *a)
{
    return RDZV_HANG_FACTOR * window_ms(a);
}

static void key_of(store_agent_t *a, char *out, size_t cap, const char *what, int num)
{
    rdzv_node_key(out, cap, a->prefix, a->id, what, num);
}

static void on_written(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                       void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    req_end(arg);
}

static int send_set(store_agent_t *a, const char *key, const char *val, size_t len)
{
    if (!a->conn || !a->ready)
        return -ENOTCONN;
    return req_begin(a, store_aclient_set(a->conn, key, val, len, on_written, a));
}

/* A WAIT on `key` and, in the same write, the GET that reads it once it exists: the store answers
 * both together (rdzv/server.c). on_waited runs when the key exists, on_value with its value. */
static int wait_and_get(store_agent_t *a, const char *key, store_reply_cb on_waited,
                        store_reply_cb on_value)
{
    const char *keys[] = {key};
    if (req_begin(a, store_aclient_wait(a->conn, keys, 1, -1, on_waited, a)) < 0)
        return -1;
    if (req_begin(a, store_aclient_get(a->conn, key, on_value, a)) < 0)
        return -1;
    return 0;
}

/* The end record of the running round: finished, or the job's stop decision (this node's own
 * first record, if any, is found for the launcher's exit code). An unreadable record leaves
 * nothing to act on: this node is out (store lost). */
static void on_end_value(store_aclient_t *c, int status, const char *val, size_t len,
                         int64_t num, void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || a->state != AS_RUNNING)
        return;
    rdzv_failure_t failures[RDZV_MAX_FAILURES];
    rdzv_decision_t d;
    int r = rdzv_end_decode(val, len, &d, failures);
    if (r < 0) {
        agent_fail(a, PODRUN_ESTORELOST, "unreadable end-of-round record from the job store");
        return;
    }
    if (r == 1) {
        a->state = AS_FINISHED;
        stop_timers(a);
        if (a->cb.finished)
            a->cb.finished(a->arg);
        return;
    }
    for (int i = 0; i < d.n; i++)
        if (failures[i].node_rank == a->node_rank && strcmp(failures[i].node_name, a->name) == 0) {
            d.own = i;
            break;
        }
    a->state = AS_STOPPED;
    a->stop_action = d.action;
    if (a->cb.stopped)
        a->cb.stopped(a->arg, &d);
}

/* The round's end record exists; its value follows in the same reply. Tell the launcher now
 * (ending) so it can stop the workers before the record is parsed, whatever it says. */
static void on_end_waited(store_aclient_t *c, int status, const char *val, size_t len,
                          int64_t num, void *arg)
{
    (void)c, (void)val, (void)len, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || a->state != AS_RUNNING)
        return;
    if (a->cb.ending)
        a->cb.ending(a->arg, a->round);
}

/* The answer to this node's join: an assignment (RUNNING: wait for the round's end, then start
 * the workers through assigned()) or an error that ends this node's part in the job ("finished"
 * is not one: the job is done and this node exits 0 with it). An empty value is the answer to a
 * GET whose WAIT was cancelled for a progress line: the real one follows. */
static void on_assign_value(store_aclient_t *c, int status, const char *val, size_t len,
                            int64_t num, void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || a->state != AS_JOINING || len == 0)
        return;
    rdzv_assignment_t as;
    char host[RDZV_NAME_MAX], err[32], text[RDZV_LINE_MAX];
    if (rdzv_assign_decode(val, len, &as, host, sizeof host, err, sizeof err, text,
                           sizeof text) < 0) {
        agent_fail(a, PODRUN_ESTORELOST, "unreadable assignment from the job store");
        return;
    }
    if (err[0]) {
        if (strcmp(err, "finished") == 0) {
            a->state = AS_FINISHED;
            stop_timers(a);
            progress(a, text);
            if (a->cb.finished)
                a->cb.finished(a->arg);
        } else {
            agent_fail(a,
                       strcmp(err, "timeout") == 0    ? PODRUN_EJOINTIMEOUT
                       : strcmp(err, "rejected") == 0 ? PODRUN_EREJECTED
                                                      : PODRUN_EENDED,
                       text);
        }
        return;
    }
    a->state = AS_RUNNING;
    a->round = as.round;
    a->node_rank = as.node_rank;
    uv_timer_stop(&a->prog_timer);
    char key[320];
    sfmt(key, sizeof key, "%sr/%d/end", a->prefix, a->round);
    if (wait_and_get(a, key, on_end_waited, on_end_value) < 0) {
        agent_fail(a, PODRUN_ESTORELOST, "could not wait on the job store");
        return;
    }
    if (a->cb.assigned)
        a->cb.assigned(a->arg, &as);
}

/* The WAIT on the assign key was answered (the value follows) or cancelled for a progress line:
 * nothing to do either way. */
static void on_assign_waited(store_aclient_t *c, int status, const char *val, size_t len,
                             int64_t num, void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    req_end(arg);
}

/* The k-th assign key: a WAIT on it and its GET. An agent never names a round: the coordinator
 * puts it where it fits. */
static int wait_assign(store_agent_t *a)
{
    char key[320];
    key_of(a, key, sizeof key, "assign", a->join_k);
    return wait_and_get(a, key, on_assign_waited, on_assign_value);
}

/* JOINING: the k-th join record, and the WAIT + GET of the k-th assign key, in one write. */
static void send_join(store_agent_t *a)
{
    rdzv_desc_rec_t d;
    char key[320], val[1024];
    memset(&d, 0, sizeof d);
    sfmt(d.name, sizeof d.name, "%s", a->name);
    sfmt(d.addr, sizeof d.addr, "%s", a->addr);
    sfmt(d.host, sizeof d.host, "%s", a->hostname);
    d.nproc = a->nproc;
    d.service = a->service;
    sfmt(d.domain, sizeof d.domain, "%s", a->domain);
    d.want_rank = a->p.want_rank;
    d.pid = (int)getpid();
    int len = rdzv_desc_encode(&d, val, sizeof val);
    a->state = AS_JOINING;
    key_of(a, key, sizeof key, "join", a->join_k);
    if (len < 0 || send_set(a, key, val, (size_t)len) < 0 || wait_assign(a) < 0)
        agent_fail(a, PODRUN_ESTORELOST, "could not send the join to the job store");
}

/* The echo of the PING that asked the host for a sign of life. */
static void on_pong(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                    void *arg)
{
    (void)c, (void)val, (void)len, (void)num;
    store_agent_t *a = arg;
    if (req_end(a))
        return;
    if (status == 0)
        a->ping_out = 0;
}

/* Every keep_alive_interval: this node's heartbeat (a SET of its hb key; no answer, so the host
 * pays one read for it), and the check on the host (rendezvous.h, "Liveness"): any byte from it
 * is a sign of life; after a window W of quiet a PING asks for one; a PING unanswered for the
 * hang bound H, with nothing else heard either, means the host is hung. A dead host or a cut
 * network is the kernel's to notice (the connection fails after W without acknowledgements). */
static void on_hb_timer(uv_timer_t *t)
{
    store_agent_t *a = t->data;
    uint64_t now = uv_now(a->loop), heard = store_aclient_last_heard(a->conn);
    /* A tick this late means this loop itself stalled: timers run before I/O, so the answer may
     * be waiting unread. The question out gets a fresh window instead of a verdict. */
    int late = a->hb_tick > 0 && now - a->hb_tick > (uint64_t)(2000 * a->p.keep_alive_interval);
    a->hb_tick = now;
    if (late)
        a->ping_sent = now;
    char key[320];
    key_of(a, key, sizeof key, "hb", -1);
    char val[64];
    int vl = a->health_unsent > 0 ? rdzv_health_ago_encode(a->health_unsent, podrun_time_epoch(),
                                                           val, sizeof val)
                                  : 0;
    if (send_set(a, key, val, vl > 0 ? (size_t)vl : 0) == 0)
        a->health_unsent = 0;
    a->heartbeats++;
    uint64_t since = heard > a->ping_sent ? heard : a->ping_sent;
    if (a->ping_out && !late)
        a->heartbeat_misses++;   /* /metrics: a tick with the store silent and asked */
    if (a->ping_out && now - since >= hang_ms(a)) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why,
             "the job store at %s:%u did not answer for %g s though its connection stayed open "
             "(the store host is hung or stopped)",
             a->connect_host, a->port, (double)hang_ms(a) / 1000);
        agent_fail(a, PODRUN_ESTORESILENT, why);
        return;
    }
    if (!a->ping_out && now - (heard > a->ping_sent ? heard : a->ping_sent) >= window_ms(a) &&
        req_begin(a, store_aclient_ping(a->conn, on_pong, a)) == 0) {
        a->ping_out = 1;
        a->ping_sent = now;
    }
}

/* The coordinator's status line, for this waiting node's own log. */
static void on_status(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                      void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || len == 0 || a->state != AS_JOINING)
        return;
    char line[RDZV_LINE_MAX];
    size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, val, n);
    line[n] = '\0';
    progress(a, line);
}

static void on_cancelled(store_aclient_t *c, int status, const char *val, size_t len,
                         int64_t num, void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    req_end(arg);
}

/* A progress line while waiting: for the store itself while connecting, the coordinator's
 * status while joining (the host sees the coordinator's own lines). The status is read behind a
 * CANCEL_WAIT, since a GET behind the WAIT would only be answered with the assignment; the
 * WAIT and GET of the assign key go out again right after it. */
static void on_prog_timer(uv_timer_t *t)
{
    store_agent_t *a = t->data;
    if (a->state == AS_CONNECTING) {
        char line[RDZV_LINE_MAX], left[32];
        podrun_format_duration(a->started + a->p.join_timeout - podrun_time_epoch(), left, sizeof left);
        int hello = store_aclient_hello_error(a->conn);
        if (hello == PODRUN_EREFUSED) {
            sfmt(line, sizeof line,
                 "rendezvous '%s': the job store at %s:%u refused this node's address %s: it is "
                 "not in the store's allow-list (--store-allow on the hosting node); retrying "
                 "(%s left)", a->run_id, a->connect_host, a->port,
                 a->local_addr ? a->local_addr : "(no --local-addr)", left);
            progress(a, line);
            return;
        }
        sfmt(line, sizeof line,
                 "rendezvous '%s': waiting for the job store at %s:%u (%s left)%s%s%s", a->run_id,
                 a->connect_host, a->port, left,
                 hello ? "; a program there accepts connections but does not answer as a job "
                         "store (" : "", hello ? podrun_strerror(hello) : "",
                 hello ? "): the port is taken on that machine; give another one" : "");
        progress(a, line);
    } else if (a->state == AS_JOINING && !a->server && a->ready) {
        char key[320];
        sfmt(key, sizeof key, "%sstatus", a->prefix);
        if (req_begin(a, store_aclient_cancel_wait(a->conn, on_cancelled, a)) < 0 ||
            req_begin(a, store_aclient_get(a->conn, key, on_status, a)) < 0 || wait_assign(a) < 0)
            agent_fail(a, PODRUN_ESTORELOST, "could not wait on the job store");
    }
}

/* The first progress line after 1 s (or progress_interval if shorter), then every
 * progress_interval. */
static void start_progress(store_agent_t *a)
{
    uint64_t pi = (uint64_t)(a->p.progress_interval * 1000);
    uv_timer_start(&a->prog_timer, on_prog_timer, pi < 1000 ? pi : 1000, pi);
}

/* The connection to the store dropped. Unless this node is on its way out anyway (closing,
 * leaving, finished, or told to exit), it has lost the job: the host went away, or (ETIMEDOUT)
 * nothing this node sent was acknowledged for a window W. */
static void on_conn_lost(store_aclient_t *c, int status, void *arg)
{
    (void)c;
    store_agent_t *a = arg;
    a->ready = 0;
    if (a->closing || a->leaving || a->state == AS_FINISHED ||
        (a->state == AS_STOPPED && a->stop_action == RDZV_EXIT))
        return;
    char why[RDZV_LINE_MAX];
    if (status == UV_ETIMEDOUT)
        sfmt(why, sizeof why,
             "the job store at %s:%u is unreachable: nothing this node sent was acknowledged for "
             "%g s",
             a->connect_host, a->port, (double)window_ms(a) / 1000);
    else
        sfmt(why, sizeof why, "lost the connection to the job store at %s:%u", a->connect_host,
             a->port);
    agent_fail(a, PODRUN_ESTORELOST, why);
}

/* The join of a node of another run was written: the store's host refuses it and names this
 * node in its log; this node stops, with the line that says why. */
static void on_stranger_join_written(store_aclient_t *c, int status, const char *val, size_t len,
                                     int64_t num, void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    store_agent_t *a = arg;
    if (req_end(a))
        return;
    agent_fail(a, PODRUN_ERUNID, a->stranger);
}

/* Whether the store's list of runs (one per line) names this node's; an empty list is a store
 * that keeps none (not a podrun host): the join decides. */
static int runs_name(const char *runs, size_t len, const char *run_id)
{
    size_t rl = strlen(run_id);
    if (len == 0)
        return 1;
    for (const char *p = runs, *end = runs + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        if (n == rl && memcmp(p, run_id, rl) == 0)
            return 1;
        p += n + 1;
    }
    return 0;
}

/* The store says which runs it serves. This node's: the join goes out and the heartbeats start.
 * Another's: the nodes were given different --rdzv-id values, which no retry mends. */
static void on_runs(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                    void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || a->state != AS_CONNECTING)
        return; /* a lost connection is said by on_conn_lost */
    if (!runs_name(val, len, a->run_id)) {
        char line[RDZV_LINE_MAX];
        const char *nl = memchr(val, '\n', len);
        int n = (int)(nl ? (size_t)(nl - val) : len);
        sfmt(line, sizeof line, "rendezvous '%s': the job store at %s:%u belongs to run '%.*s', "
             "this agent's run id is '%s'; give every node the same --rdzv-id (PET_RDZV_ID)",
             a->run_id, a->connect_host, a->port, n < 200 ? n : 200, val, a->run_id);
        a->stranger = strdup(line);
        a->state = AS_JOINING;
        char key[320];
        key_of(a, key, sizeof key, "join", a->join_k);
        if (!a->stranger || req_begin(a, store_aclient_set(a->conn, key, "", 0,
                                                           on_stranger_join_written, a)) < 0)
            agent_fail(a, PODRUN_ERUNID, a->stranger ? a->stranger : line);
        return;
    }
    send_join(a);
    a->ping_sent = uv_now(a->loop);
    uv_timer_start(&a->hb_timer, on_hb_timer, 0, (uint64_t)(a->p.keep_alive_interval * 1000));
}

/* The connection is up (or gave up at join_timeout: this node could not reach the store): the
 * kernel watches it from now on; the store is asked which run it serves before the join. */
static void on_connected(store_aclient_t *c, int status, void *arg)
{
    /* not counted in `pending`: a client closed while connecting never calls back */
    store_agent_t *a = arg;
    if (status < 0) {
        a->conn = NULL;
        char why[RDZV_LINE_MAX], took[32];
        if (status == PODRUN_EAUTH || status == PODRUN_EAUTHOPEN || status == PODRUN_EAUTHNEEDED) {
            sfmt(why, sizeof why,
                 "rendezvous '%s': the job store at %s:%u refused this node: %s; give every node "
                 "the same --rdzv-token-file or PODRUN_RDZV_TOKEN",
                 a->run_id, a->connect_host, a->port, podrun_strerror(status));
            agent_fail(a, PODRUN_EREJECTED, why);
            return;
        }
        podrun_format_duration(a->p.join_timeout, took, sizeof took);
        sfmt(why, sizeof why,
             "rendezvous '%s': could not reach the job store at %s:%u within %s: %s", a->run_id,
             a->connect_host, a->port, took, podrun_strerror(status));
        agent_fail(a, PODRUN_EJOINTIMEOUT, why);
        return;
    }
    store_aclient_on_lost(c, on_conn_lost, a);
    store_aclient_liveness(c, (unsigned)window_ms(a));
    a->ready = 1;
    if (a->state == AS_CONNECTING &&
        req_begin(a, store_aclient_get(c, RDZV_RUNS_KEY, on_runs, a)) < 0)
        agent_fail(a, PODRUN_ESTORELOST, "could not ask the job store which run it serves");
}

/* How often a joining agent tries the store host: every RDZV_JOIN_RETRY_MS, jittered, so it
 * is in within one interval of the host listening; in a job of more than 1024 nodes slower, so
 * the whole job makes at most about RDZV_JOIN_RETRY_RATE attempts per second (Joining). */
static unsigned join_retry_ms(int max_nodes)
{
    double ms = 1000.0 * max_nodes / RDZV_JOIN_RETRY_RATE;
    return ms < RDZV_JOIN_RETRY_MS ? RDZV_JOIN_RETRY_MS : ms > 2000 ? 2000 : (unsigned)ms;
}

static int copy_str(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

static void store_close(rdzv_agent_t *base, void (*closed)(void *), void *arg);

/* The port this agent meant to host on is taken: is it this run's job store? Asked once, at
 * start, with a bound (a program that accepts and never answers costs GUEST_CHECK_MS). A store
 * that wants a token does not show its runs to this check; the taken port stays the error. */
static int holds_this_run(const store_agent_t *a)
{
    podrun_store_t *s;
    const char *key = RDZV_RUNS_KEY;
    char *val = NULL;
    size_t len = 0;
    if (podrun_store_connect(a->connect_host, a->port, GUEST_CHECK_MS, &s) < 0)
        return 0;
    int ok = podrun_store_check(s, &key, 1) == 1 && podrun_store_get(s, key, &val, &len) == 0 &&
             len > 0 && runs_name(val, len, a->run_id);
    free(val);
    podrun_store_close(s);
    return ok;
}

/* Starts an agent: the host binds the store now (so a taken port is this call's error) and
 * starts the coordinator; then both connections are made, retried until join_timeout, and the
 * join goes out once both are up (on_connected). A node that does not host needs the store's
 * endpoint. */
static int store_start(uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                       const rdzv_callbacks_t *cb, void *arg, rdzv_agent_t **out)
{
    if (!p->is_host && (!p->endpoint_host || !*p->endpoint_host || !p->endpoint_port))
        return -EINVAL;
    store_agent_t *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->base.backend = &rdzv_backend_store;
    a->loop = loop;
    a->p = *p;
    if (p->token) {
        a->token = *p->token;
        a->p.token = &a->token;
    }
    a->cb = *cb;
    a->arg = arg;
    a->nproc = self->nproc;
    a->service = self->service;
    sfmt(a->domain, sizeof a->domain, "%s", self->domain ? self->domain : "");
    a->node_rank = -1;
    a->started = podrun_time_epoch();
    if (copy_str(&a->run_id, p->run_id) || copy_str(&a->endpoint_host, p->endpoint_host) ||
        copy_str(&a->local_addr, p->local_addr && *p->local_addr ? p->local_addr : NULL) ||
        copy_str(&a->expected, p->expected)) {
        a->closing = 2;
        agent_free(a);
        return -ENOMEM;
    }
    podrun_hostname(a->hostname, sizeof a->hostname);
    sfmt(a->name, sizeof a->name, "%s",
             self->name && *self->name ? self->name : a->hostname);
    sfmt(a->addr, sizeof a->addr, "%s",
             self->addr && *self->addr ? self->addr : a->local_addr ? a->local_addr : a->name);
    podrun_random_id(a->id, 16);
    sfmt(a->prefix, sizeof a->prefix, "podrun/%s/", a->run_id);
    a->port = p->endpoint_port;
    sfmt(a->connect_host, sizeof a->connect_host, "%s",
             a->endpoint_host ? a->endpoint_host : "127.0.0.1");

    if (p->is_host) {
        int rc = host_start(a);
        /* torchrun's rule: hosting that was only inferred yields to another agent of the same
         * run on this machine, which bound the port first */
        if (rc == UV_EADDRINUSE && p->is_host == RDZV_HOST_INFERRED && holds_this_run(a)) {
            progress(a, "joining the job store that another agent of this run hosts on this "
                        "machine");
            rc = 0;
        }
        if (rc < 0) {
            a->closing = 2;
            agent_free(a);
            return rc;
        }
    }
    timer_init(a, &a->hb_timer);
    timer_init(a, &a->prog_timer);
    timer_init(a, &a->defer_timer);
    int ms = (int)(a->p.join_timeout * 1000);
    int rc = store_aclient_connect(loop, a->connect_host, a->port, ms, on_connected, a, &a->conn);
    if (rc == 0) {
        store_aclient_auth(a->conn, a->p.token);
        /* from the advertised address: the one an allow-list lets in */
        store_aclient_source(a->conn, a->local_addr);
    }
    if (rc < 0) {
        store_close(&a->base, NULL, NULL);
        return rc;
    }
    store_aclient_retry_every(a->conn, join_retry_ms(a->p.max_nodes));
    start_progress(a);
    *out = &a->base;
    return 0;
}

/* The record goes out on the connection; the node's own name, address and the time fill
 * what the caller left out. Only while a round runs or has just stopped. */
static int store_report_failure(rdzv_agent_t *base, const rdzv_failure_t *f)
{
    store_agent_t *a = (store_agent_t *)base;
    if (a->state != AS_RUNNING && a->state != AS_STOPPED)
        return -EINVAL;
    char key[320], val[2048];
    rdzv_failure_t g = *f;
    if (!g.node_name[0])
        sfmt(g.node_name, sizeof g.node_name, "%s", a->name);
    if (!g.host[0])
        sfmt(g.host, sizeof g.host, "%s", a->addr);
    if (g.time <= 0)
        g.time = podrun_time_epoch();
    int len = rdzv_failure_encode(&g, val, sizeof val);
    if (len < 0)
        return len;
    key_of(a, key, sizeof key, "fail", a->round);
    return send_set(a, key, val, (size_t)len);
}

static int store_report_done(rdzv_agent_t *base)
{
    store_agent_t *a = (store_agent_t *)base;
    if (a->state != AS_RUNNING)
        return -EINVAL;
    char key[320];
    key_of(a, key, sizeof key, "done", a->round);
    return send_set(a, key, "1", 1);
}

/* The record names the lost node by what it joined with; the coordinator matches it against
 * the members of the round this agent runs in, so a report that arrives after that round is
 * over changes nothing. */
static int store_report_peer_lost(rdzv_agent_t *base, const char *name, const char *addr,
                                  const char *reason)
{
    store_agent_t *a = (store_agent_t *)base;
    if (a->state != AS_RUNNING)
        return -EINVAL;
    char key[320], val[1024];
    kvbuf_t b;
    kv_init(&b, val, sizeof val);
    kv_add(&b, "name", name, RDZV_NAME_MAX - 1);
    kv_add(&b, "addr", addr, RDZV_NAME_MAX - 1);
    kv_add(&b, "reason", reason, RDZV_REASON_MAX - 1);
    key_of(a, key, sizeof key, "peer", a->round);
    return send_set(a, key, val, b.len);
}

/* A new state, interval or finding is a record; a check that found what the last one did
 * leaves only its time for the next heartbeat (rendezvous.h: a healthy job writes no more than
 * its heartbeats however often it checks). */
static int store_report_health(rdzv_agent_t *base, const rdzv_health_t *h)
{
    store_agent_t *a = (store_agent_t *)base;
    const rdzv_health_t *o = &a->health_sent;
    if (h->state == o->state && h->interval == o->interval && strcmp(h->why, o->why) == 0) {
        a->health_unsent = h->checked;
        return 0;
    }
    char key[320], val[512];
    int len = rdzv_health_encode(h, podrun_time_epoch(), val, sizeof val);
    if (len < 0)
        return len;
    key_of(a, key, sizeof key, "health", -1);
    int r = send_set(a, key, val, (size_t)len);
    if (r == 0) {
        a->health_sent = *h;
        a->health_unsent = 0;
    }
    return r;
}

/* Runs the leave's `sent` callback, once. */
static void leave_done(store_agent_t *a)
{
    void (*sent)(void *) = a->leave_sent;
    a->leave_sent = NULL;
    if (sent)
        sent(a->leave_arg);
}

static void on_leave_written(store_aclient_t *c, int status, const char *val, size_t len,
                             int64_t num, void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    store_agent_t *a = arg;
    a->pending--;
    leave_done(a);
    maybe_free(a);
}

static void on_defer(uv_timer_t *t)
{
    leave_done(t->data);
}

/* The leave record goes out if there is a connection to send it on; `sent` runs once it is
 * written, or from the loop at once when it cannot be (never from inside this call). */
static int store_leave(rdzv_agent_t *base, const char *reason, void (*sent)(void *), void *arg)
{
    store_agent_t *a = (store_agent_t *)base;
    if (a->leaving || a->closing)
        return -EALREADY;
    a->leaving = 1;
    a->leave_sent = sent;
    a->leave_arg = arg;
    stop_timers(a);
    char key[320], val[RDZV_REASON_MAX];
    sfmt(val, sizeof val, "%s", reason ? reason : "shutting down");
    key_of(a, key, sizeof key, "leave", -1);
    if (a->conn && a->ready &&
        req_begin(a, store_aclient_set(a->conn, key, val, strlen(val), on_leave_written, a)) == 0)
        return 0;
    uv_timer_start(&a->defer_timer, on_defer, 0, 0);
    return 0;
}

/* The next join (k+1) of a stopped agent: a fresh assign key, so no answer to the last join can
 * be read as this one's. */
static int store_rejoin(rdzv_agent_t *base)
{
    store_agent_t *a = (store_agent_t *)base;
    if (a->state != AS_STOPPED || a->stop_action != RDZV_RESTART || a->closing || a->leaving)
        return -EINVAL;
    a->join_k++;
    send_join(a);
    if (a->state == AS_JOINING)
        start_progress(a);
    return a->state == AS_JOINING ? 0 : -ENOTCONN;
}

/* Closes the connection. The host then keeps the store up until every other agent is gone or
 * close_timeout passed (COORD_CLOSED), so nobody sees a reset at the end; `closed` runs once
 * everything is freed. */
static void store_close(rdzv_agent_t *base, void (*closed)(void *), void *arg)
{
    store_agent_t *a = (store_agent_t *)base;
    if (a->closing)
        return;
    a->closing = 1;
    a->closed = closed;
    a->closed_arg = arg;
    stop_timers(a);
    uv_timer_stop(&a->defer_timer);
    store_aclient_t *c = a->conn;
    a->conn = NULL;
    a->ready = 0;
    if (c)
        store_aclient_close(c);
    if (a->coord) {
        coord_shutdown(a->coord, podrun_time_epoch());
        run_actions(a); /* closes the handles on COORD_CLOSED */
    } else {
        close_handles(a);
    }
}

static uint16_t store_port(const rdzv_agent_t *base)
{
    return ((const store_agent_t *)base)->port;
}

static void store_stats(const rdzv_agent_t *base, rdzv_stats_t *out)
{
    const store_agent_t *a = (const store_agent_t *)base;
    out->heartbeats = a->heartbeats;
    out->heartbeat_misses = a->heartbeat_misses;
    if (!a->server || !a->coord)
        return;
    out->hosting = 1;
    out->silent_nodes = coord_silent_nodes(a->coord);
    store_server_stats_t st;
    store_server_stats(a->server, &st);
    out->store_connections = st.connections;
    out->store_accepted = st.accepted;
    memcpy(out->store_ops, st.ops, sizeof out->store_ops);
    out->store_keys = st.keys;
    out->store_bytes = st.bytes;
}

/* ---- who hosts ---- */

static int addr_parse(const char *text, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (uv_ip4_addr(text, 0, (struct sockaddr_in *)ss) == 0)
        return 0;
    return uv_ip6_addr(text, 0, (struct sockaddr_in6 *)ss);
}

/* Does address sa stand for this node: local_addr itself when one is given (agents sharing a
 * machine each have their own), else loopback or any interface's address. */
static int addr_is_self(const struct sockaddr *sa, const char *local_addr)
{
    if (local_addr) {
        struct sockaddr_storage la;
        return addr_parse(local_addr, &la) == 0 &&
               acl_same_ip(sa, (const struct sockaddr *)&la);
    }
    return store_aclient_is_local(sa);
}

/* This machine's host name, short or full, either way round ("node-1" and "node-1.example"). */
static int is_own_name(const char *name)
{
    char hn[256];
    if (strcmp(name, "localhost") == 0)
        return 1;
    if (podrun_hostname(hn, sizeof hn) < 0 || !hn[0])
        return 0;
    size_t el = strlen(name), hl = strlen(hn);
    if (strcmp(name, hn) == 0)
        return 1;
    if (el < hl && strncmp(hn, name, el) == 0 && hn[el] == '.')
        return 1;
    return hl < el && strncmp(name, hn, hl) == 0 && name[hl] == '.';
}

int rdzv_endpoint_is_local(const char *endpoint_host, const char *local_addr)
{
    if (!endpoint_host || !*endpoint_host)
        return 0;
    if (local_addr && !*local_addr)
        local_addr = NULL;
    if (local_addr && strcmp(endpoint_host, local_addr) == 0)
        return 1;
    struct sockaddr_storage ss;
    if (addr_parse(endpoint_host, &ss) == 0)
        return addr_is_self((const struct sockaddr *)&ss, local_addr);
    if (!local_addr && is_own_name(endpoint_host))
        return 1;
    /* a name: what it resolves to (once, at start; torchrun asks the resolver too) */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(endpoint_host, NULL, &hints, &res) != 0)
        return 0;
    int found = 0;
    for (struct addrinfo *ai = res; ai && !found; ai = ai->ai_next)
        found = (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
                addr_is_self(ai->ai_addr, local_addr);
    freeaddrinfo(res);
    return found;
}

const rdzv_backend_t rdzv_backend_store = {
    .name = "store",
    .start = store_start,
    .report_failure = store_report_failure,
    .report_done = store_report_done,
    .report_peer_lost = store_report_peer_lost,
    .report_health = store_report_health,
    .leave = store_leave,
    .rejoin = store_rejoin,
    .close = store_close,
    .store_port = store_port,
    .stats = store_stats,
};
