/* rdzv/backend_store.c — the rendezvous over the job store (c10d and static): one agent hosts the
 * store server with the coordinator beside it, fed by the server's observer; every agent, the
 * host's own over loopback, talks to it as an ordinary store client (the async client), on one
 * connection: a WAIT goes out together with the GET of its key (the store answers both in one
 * write), while records and heartbeats are SETs that the store applies at once behind it.
 * Protocol: rdzv/rendezvous.h.
 *
 * The agent is a member (rdzv/member.h: the states, the records, the reports, the lifetime) and
 * this file its transport: STARTING is the connection and the store's list of runs, JOINING a
 * WAIT on the assignment, RUNNING a WAIT on the round's end, or, for a member its assignment
 * puts under a relay, the end from its parent and a GET of it with each heartbeat
 * (rdzv/relay.h); heartbeats throughout. Every
 * request it makes gets its callback exactly once, and the agent stays allocated until every one
 * has come back and every handle is closed (`pending`, `handles`). The hosting agent runs the
 * coordinator on its loop (rdzv/host.h) with the store server as the sink of its writes. */
#include "rdzv/member.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podrun/store.h"
#include "rdzv/store/aclient.h"
#include "rdzv/coordinator.h"
#include "rdzv/host.h"
#include "rdzv/relay_udp.h"
#include "rdzv/store/server.h"
#include "rdzv/status.h"

#define GUEST_CHECK_MS 5000   /* holds_this_run's bound */

typedef struct store_agent {
    rdzv_member_t m;            /* first: it is a member (member.h); m.port: the store's */
    char *endpoint_host;
    char connect_host[RDZV_NAME_MAX];
    auth_key_t token;           /* p.token points here when the job has one */

    /* host side (m.server: the job store this agent hosts) */
    host_t host;                /* the coordinator on this loop (host.h) */

    /* agent side */
    store_aclient_t *conn;
    int ready;
    char *stranger;             /* the store is another run's: the line that says so */
    uv_timer_t hb_timer;
    int ping_out;               /* a PING (or a fed node's GET of the end) asks the host for a
                                   sign of life */
    relay_udp_t *relay;         /* the round's end from a parent, on to the children (relay.h);
                                   NULL: this node waits on the store itself */
    int fed;                    /* this round's end comes from a relay, not from a WAIT */
    int end_taken;              /* the last round whose end this node took (relay or store) */
    /* the restart through the tree (relay.h) */
    char *last_assign;          /* the last assignment, for an in-place go */
    size_t last_len;
    char *join_val;             /* the join sent up, for a direct join if no go comes */
    size_t join_len;
    int tree_wait;              /* the join went up the tree; the go has not come */
    int go_get;                 /* the WAIT on the assignment also reads the next round's go */
    int gather_seq;
    uv_timer_t tree_timer;      /* one heartbeat period after the join went up */
    uint64_t ping_sent, hb_tick; /* loop times (ms) */
    double started;

    /* what /metrics and `podrun status` see */
    unsigned long heartbeats, heartbeat_misses;
    uv_timer_t state_timer;     /* host: the job's state record, every heartbeat period */
    int pub_round, pub_phase;   /* ... and at once when the round or its phase changed */
} store_agent_t;

static const rdzv_transport_t store_transport;

/* ---- lifetime ---- */

/* What the member does not free itself (member.h, release). */
static void store_release(rdzv_member_t *m)
{
    store_agent_t *a = (store_agent_t *)m;
    host_free(&a->host);
    free(a->stranger);
    free(a->endpoint_host);
    free(a->last_assign);
    free(a->join_val);
}

/* Every request gets a callback exactly once; `pending` keeps the agent alive until then. */
static int req_begin(store_agent_t *a, int rc)
{
    if (rc == 0)
        a->m.pending++;
    return rc;
}

/* Returns 1 if the agent is being torn down and the reply should be ignored. */
static int req_end(store_agent_t *a)
{
    a->m.pending--;
    if (a->m.closing) {
        member_maybe_free(&a->m);
        return 1;
    }
    return 0;
}

/* The heartbeats stop with the waiting (member.h, halt). */
static void store_halt(rdzv_member_t *m)
{
    uv_timer_stop(&((store_agent_t *)m)->hb_timer);
    uv_timer_stop(&((store_agent_t *)m)->tree_timer);
}

/* ---- host side: the coordinator next to the store ---- */

static void publish_state(store_agent_t *a);

static void on_host_closed(void *arg)
{
    store_agent_t *a = arg;
    a->m.handles--;
    member_maybe_free(&a->m);
}

/* Closing, second stage: the timers and (on the host) the server go; the member finishes. */
static void on_relay_closed(void *arg)
{
    store_agent_t *a = arg;
    a->m.handles--;
    member_maybe_free(&a->m);
}

static void close_handles(store_agent_t *a)
{
    uv_close((uv_handle_t *)&a->hb_timer, member_on_handle_closed);
    uv_close((uv_handle_t *)&a->tree_timer, member_on_handle_closed);
    if (a->relay) {
        a->m.handles++;
        relay_udp_close(a->relay, on_relay_closed, a);
        a->relay = NULL;
    }
    if (a->host.coord) {
        if (host_close(&a->host, on_host_closed, a))
            a->m.handles++;
        uv_close((uv_handle_t *)&a->state_timer, member_on_handle_closed);
    }
    member_close_handles(&a->m);
}

/* The coordinator's writes of one pass (host.h, apply), in order, in-process: they wake the
 * remote WAITs; the workers' fresh namespace too. A write the store cannot take (out of memory)
 * would leave agents waiting for an answer that never comes, so this agent gives up instead:
 * with it goes the store, which every agent notices at once. */
static void store_apply(void *arg, const coord_action_t *w, size_t n, int over)
{
    store_agent_t *a = arg;
    char lost_key[256] = "";
    int lost = 0;
    for (size_t i = 0; i < n; i++) {
        const coord_action_t *act = &w[i];
        if (act->kind == COORD_SET) {
            int r = store_server_set(a->m.server, act->key, strlen(act->key), act->val,
                                     act->vlen);
            if (r < 0 && !lost) {
                lost = r;
                sfmt(lost_key, sizeof lost_key, "%s", act->key);
            }
        } else if (act->kind == COORD_DELETE) {
            store_server_delete(a->m.server, act->key, strlen(act->key));
        } else if (act->kind == COORD_DELETE_WORKERS) {
            store_server_delete_except(a->m.server, act->key);
        }
    }
    if (over)
        return; /* store_closed follows */
    coord_info_t info;
    coord_info(a->host.coord, &info);
    if (info.round != a->pub_round || info.phase != a->pub_phase)
        publish_state(a);
    if (lost) {
        /* an answer or a decision the agents wait for is missing: rather than leave them
         * waiting, this agent goes, and with it the store, which every agent notices */
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': could not record %s in the job store: %s",
             a->m.run_id, lost_key, podrun_strerror(lost));
        member_progress(&a->m, "%s", why);
        member_fail(&a->m, PODRUN_ESTORELOST, why);
    }
}

static void store_log(void *arg, const char *line)
{
    store_agent_t *a = arg;
    member_progress(&a->m, "%s", line);
}

/* The coordinator is done: every other agent is gone, or close_timeout passed. */
static void store_closed(void *arg)
{
    store_agent_t *a = arg;
    if (a->m.closing == 1)
        close_handles(a);
}

static const host_sink_t store_sink = {store_apply, store_log, store_closed};

/* Every observed key is a record an agent writes for the coordinator alone (join, heartbeat,
 * failure, done, leave): the coordinator reads it in-process and, by returning 1, lets the key
 * space drop it at once. */
static int on_observed_write(void *arg, uint64_t conn, const char *key, size_t klen,
                             const char *val, size_t vlen)
{
    store_agent_t *a = arg;
    if (a->m.closing == 2)
        return 0;
    coord_on_write(a->host.coord, conn, key, klen, val, vlen, podrun_time_epoch());
    host_run(&a->host);
    return 1;
}

/* A connection that wrote records closed: the coordinator decides whether its node is lost. */
static void on_observed_close(void *arg, uint64_t conn, int err)
{
    store_agent_t *a = arg;
    if (a->m.closing == 2)
        return;
    char why[96];
    sfmt(why, sizeof why, "unreachable, nothing acknowledged for %g s",
         a->m.p.keep_alive_interval * a->m.p.keep_alive_max_attempt);
    coord_on_close(a->host.coord, conn, err == UV_ETIMEDOUT ? why : NULL, podrun_time_epoch());
    host_run(&a->host);
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
    /* keys hold the id escaped (rdzv_run_prefix): compared so, named as the flag gave it */
    const char *own = a->m.prefix + pl;
    if ((size_t)rl == a->m.plen - pl - 1 && memcmp(run, own, (size_t)rl) == 0)
        return;
    char id[RDZV_RUN_ID_MAX + 1];
    int n = 0;
    for (int i = 0; i < rl && i < RDZV_RUN_ID_MAX; i++) {
        if (run[i] < 0x21 || run[i] > 0x7e)
            return; /* not a run id a flag gives: the general reason, with the key escaped */
        bool esc = run[i] == '%' && i + 2 < rl;
        if (esc && run[i + 1] == '2' && (run[i + 2] == 'F' || run[i + 2] == '5'))
            id[n++] = run[i + 2] == 'F' ? '/' : '%', i += 2;
        else
            id[n++] = run[i];
    }
    id[n] = '\0';
    sfmt(why, cap, "a node of run '%s' reached this job store, which belongs to run '%s'; "
         "give every node the same --rdzv-id (PET_RDZV_ID)", id, a->m.run_id);
}

/* Over the wire, the only keys under "podrun/" a client writes are agents' records and the
 * keys the agents' preflight check exchanges ("podrun/<run>/pf/", launcher/preflight: the
 * coordinator never reads them); the rest (assignments, ends of rounds, the status line) are the
 * coordinator's, written in-process. */
static int may_write(void *arg, const char *key, size_t klen, char *why, size_t cap)
{
    store_agent_t *a = arg;
    const char *prefix = a->m.prefix;
    size_t n = a->m.plen;
    if (klen > n + 3 && memcmp(key, prefix, n) == 0 && memcmp(key + n, "pf/", 3) == 0)
        return 1;
    if (rdzv_agent_record_key(key, klen, prefix))
        return 1;
    stranger_why(a, key, klen, why, cap);
    return 0;
}

/* The job's state record (rdzv/status.h) for `podrun status`: written in-process, like the
 * coordinator's own keys, so readers anywhere see the round, the nodes and their last heartbeat
 * at most one heartbeat period old. O(nodes) per write; the value is bounded by the store's
 * value limit (nodes beyond it are counted, not listed). */
static void publish_state(store_agent_t *a)
{
    if (!a->host.coord || !a->m.server || a->m.closing == 2)
        return;
    coord_info_t info;
    coord_info(a->host.coord, &info);
    size_t cap = (size_t)info.members + (size_t)info.joined + (size_t)info.waiting + 64;
    rdzv_status_node_t *nodes = malloc(cap * sizeof *nodes);
    if (!nodes)
        return;
    rdzv_status_t st;
    coord_state(a->host.coord, podrun_time_epoch(), &st, nodes, cap);
    a->pub_round = info.round;
    a->pub_phase = info.phase;
    char *text = NULL;
    long len = rdzv_status_encode(&st, 4u << 20, &text);
    if (len >= 0) {
        char key[320];
        sfmt(key, sizeof key, "%s%s", a->m.prefix, RDZV_STATUS_KEY);
        store_server_set(a->m.server, key, strlen(key), text, (size_t)len);
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
    podrun_log_t log = {member_on_store_log, &a->m};
    int rc = store_server_start(a->m.loop, a->m.local_addr, a->m.p.endpoint_port, NULL, &log,
                                &a->m.server);
    if (rc < 0)
        return rc;
    a->m.port = store_server_port(a->m.server);
    coord_params_t cp = host_coord_params(&a->m.p);
    cp.store_host = a->endpoint_host;
    cp.store_port = a->m.port;
    cp.host_id = a->m.id;   /* this agent's exit ends the store: it is never left out */
    /* a node cut off finds out within a window of our finding out (its heartbeat's TCP timeout
     * against ours), then stops its workers in its grace; 1 s for the SIGKILL and the reaping */
    cp.fence =
        a->m.p.keep_alive_interval * a->m.p.keep_alive_max_attempt + a->m.p.stop_grace + 1;
    a->host.coord = coord_new(&cp, podrun_time_epoch());
    if (!a->host.coord) {
        store_server_close(a->m.server, NULL, NULL);
        a->m.server = NULL;
        return -EINVAL;
    }
    host_init(&a->host, a->m.loop, &store_sink, a);
    store_server_observe(a->m.server, coord_observe_prefix(a->host.coord), on_observed_write,
                         on_observed_close, a);
    store_server_guard(a->m.server, a->m.p.token, may_write, a);
    store_server_allow(a->m.server, a->m.p.allow);
    store_server_liveness(a->m.server, (unsigned)(a->m.p.keep_alive_interval *
                                                a->m.p.keep_alive_max_attempt * 1000),
                          (unsigned)rdzv_heartbeat_ms(&a->m.p));
    host_run(&a->host);
    /* who can be asked about: `podrun status HOST:PORT` starts from this list */
    char runs[RDZV_NAME_MAX + 2];
    sfmt(runs, sizeof runs, "%s\n", a->m.run_id);
    store_server_set(a->m.server, RDZV_RUNS_KEY, strlen(RDZV_RUNS_KEY), runs, strlen(runs));
    member_timer_init(&a->m, &a->state_timer);
    uv_timer_start(&a->state_timer, on_state_timer, 0, rdzv_heartbeat_ms(&a->m.p));
    /* the host's own agent reaches the store over loopback */
    sfmt(a->connect_host, sizeof a->connect_host, "%s",
             a->m.local_addr && *a->m.local_addr ? a->m.local_addr : "127.0.0.1");
    return 0;
}

/* ---- agent side ---- */

/* The heartbeat window W (keep_alive_interval x keep_alive_max_attempt) and the hang bound H
 * (RDZV_HANG_FACTOR x W), in ms: see "Liveness" in rdzv/rendezvous.h. */
static uint64_t window_ms(const store_agent_t *a)
{
    return (uint64_t)(a->m.p.keep_alive_interval * a->m.p.keep_alive_max_attempt * 1000);
}

static uint64_t hang_ms(const store_agent_t *a)
{
    return RDZV_HANG_FACTOR * window_ms(a);
}

/* How long the host may be quiet before this agent asks with a PING: W, or the heartbeat period
 * where a large job's is longer (Liveness). */
static uint64_t quiet_ms(const store_agent_t *a)
{
    uint64_t w = window_ms(a), hb = rdzv_heartbeat_ms(&a->m.p);
    return hb > w ? hb : w;
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
 * both together (rdzv/store/server.c). on_waited runs when the key exists, on_value with its value. */
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

/* Round `round`'s end record, from the store or from this node's relay parent: the children
 * get it first (relay_udp_forward sends once per round), then the launcher (ending, then the
 * record itself), once. `ending`: the launcher has not been told yet. */
static void take_end(store_agent_t *a, int round, const char *val, size_t len, int ending)
{
    if (a->relay)
        relay_udp_forward(a->relay, round, val, len);
    if (a->end_taken == round || round != a->m.round || a->m.state != MS_RUNNING)
        return;
    a->end_taken = round;
    if (ending)
        member_on_ending(&a->m, round);
    member_on_end(&a->m, round, val, len);
}

/* The relay socket took this round's end from the parent (and sent it on). */
static void on_relayed(void *arg, int round, const char *body, size_t blen)
{
    store_agent_t *a = arg;
    if (a->m.closing)
        return;
    take_end(a, round, body, blen, 1);
}

/* The answer to a fed node's GET of the round's end with its heartbeat: the host's sign of life,
 * and the decision if the relay did not bring it (its parent died, stalled or lost it). */
static void on_end_polled(store_aclient_t *c, int status, const char *val, size_t len,
                          int64_t num, void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0)
        return;
    a->ping_out = 0;
    if (len == 0 || a->m.state != MS_RUNNING || a->end_taken == a->m.round)
        return;
    member_progress(&a->m, "rendezvous '%s' round %d: the round's end came from the job store "
                    "with this node's heartbeat, before its relay sent it", a->m.run_id,
                    a->m.round);
    take_end(a, a->m.round, val, len, 1);
}

/* The value of the running round's end record (member_on_end reads it). */
static void on_end_value(store_aclient_t *c, int status, const char *val, size_t len,
                         int64_t num, void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || a->m.state != MS_RUNNING)
        return;
    take_end(a, a->m.round, val, len, 0);
}

/* The round's end record exists; its value follows in the same reply. Tell the launcher now
 * (ending) so it can stop the workers before the record is parsed, whatever it says. */
static void on_end_waited(store_aclient_t *c, int status, const char *val, size_t len,
                          int64_t num, void *arg)
{
    (void)c, (void)val, (void)len, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || a->m.state != MS_RUNNING)
        return;
    member_on_ending(&a->m, a->m.round);
}

/* The answer to this node's join (member_on_assign reads it). An empty value is the answer to a
 * GET whose WAIT was cancelled for a progress line: the real one follows. */
static void on_assign_value(store_aclient_t *c, int status, const char *val, size_t len,
                            int64_t num, void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0)
        return;
    member_on_assign(&a->m, val, len);
}

/* Assigned (member.h, assigned): a fed node takes the round's end from its relay parent (and
 * asks the store with each heartbeat); any other waits on it with a WAIT and its GET. Either
 * sends it on to the children its assignment names. */
/* *dst becomes a copy of val[0..len) (kept as it was without memory): 0 or -ENOMEM. */
static int keep_copy(char **dst, size_t *dlen, const char *val, size_t len)
{
    char *keep = malloc(len ? len : 1);
    if (!keep)
        return -ENOMEM;
    memcpy(keep, val, len);
    free(*dst);
    *dst = keep;
    *dlen = len;
    return 0;
}

static int store_assigned(rdzv_member_t *m, const char *val, size_t len)
{
    store_agent_t *a = (store_agent_t *)m;
    uv_timer_stop(&a->tree_timer);
    a->tree_wait = a->go_get = 0;
    keep_copy(&a->last_assign, &a->last_len, val, len);
    relay_links_t l;
    relay_links_take(val, len, &l);
    a->fed = a->relay && l.fed;
    if (a->relay)
        relay_udp_links(a->relay, a->m.round, a->m.node_rank, &l);
    if (a->fed)
        return 0;
    char key[320];
    sfmt(key, sizeof key, "%sr/%d/end", a->m.prefix, a->m.round);
    return wait_and_get(a, key, on_end_waited, on_end_value);
}

/* What the join record says besides the descriptor: where this node takes relayed ends. */
static void store_join_extra(rdzv_member_t *m, kvbuf_t *b)
{
    store_agent_t *a = (store_agent_t *)m;
    if (a->relay)
        kv_add_int(b, "relay", relay_udp_port(a->relay));
}

/* The WAIT on the assign key was answered (the value follows) or cancelled for a progress line:
 * nothing to do either way. */
static void on_assign_waited(store_aclient_t *c, int status, const char *val, size_t len,
                             int64_t num, void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    req_end(arg);
}

static void on_go(void *arg, const char *body, size_t blen);

/* The next round's go, read with the assignment (relay.h): sent on down the tree. */
static void on_go_value(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                        void *arg)
{
    (void)c, (void)num;
    store_agent_t *a = arg;
    if (req_end(a) || status < 0 || len == 0)
        return;
    on_go(a, val, len);
}

/* The k-th assign key: a WAIT on it and its GET (and, for a node that rejoins through the tree
 * but joined the store itself, the next round's go, set before any assignment). An agent never
 * names a round: the coordinator puts it where it fits. */
static int wait_assign(store_agent_t *a)
{
    char key[320];
    member_key(&a->m, key, sizeof key, "assign", a->m.join_k);
    if (!a->go_get)
        return wait_and_get(a, key, on_assign_waited, on_assign_value);
    char go[320];
    const char *keys[] = {key};
    sfmt(go, sizeof go, "%sr/%d/go", a->m.prefix, a->m.round + 1);
    if (req_begin(a, store_aclient_wait(a->conn, keys, 1, -1, on_assign_waited, a)) < 0 ||
        req_begin(a, store_aclient_get(a->conn, go, on_go_value, a)) < 0 ||
        req_begin(a, store_aclient_get(a->conn, key, on_assign_value, a)) < 0)
        return -1;
    return 0;
}

/* A round's go (relay.h), from the parent or the store: the children get it, then this node's
 * assignment is its last one moved to the new round (in place), or is read from the store. */
static void on_go(void *arg, const char *body, size_t blen)
{
    store_agent_t *a = arg;
    int round, count, inplace;
    if (a->m.closing || a->m.state != MS_JOINING ||
        relay_go_decode(body, blen, &round, &count, &inplace) < 0 || round != a->m.round + 1)
        return;
    if (a->relay)
        relay_udp_go(a->relay, body, blen);
    int was_waiting = a->tree_wait;
    uv_timer_stop(&a->tree_timer);
    a->tree_wait = 0;
    char val[512 + RELAY_LINKS_MAX];
    int n = inplace && a->last_assign ? relay_assign_inplace(a->last_assign, a->last_len, round,
                                                             count, val, sizeof val)
                                      : -EINVAL;
    if (n > 0)
        member_on_assign(&a->m, val, (size_t)n);
    else if (was_waiting && wait_assign(a) < 0)
        member_fail(&a->m, PODRUN_ESTORELOST, "could not wait on the job store");
}

/* Joins of this node's subtree that reached it, for the store: one record (relay.h). */
static void on_gather(void *arg, const char *entries, size_t len)
{
    store_agent_t *a = arg;
    char key[320];
    member_key(&a->m, key, sizeof key, "gather", a->gather_seq++);
    send_set(a, key, entries, len);
}

/* No go one heartbeat period after the join went up: the parent died, stalled or lost it, or the
 * round is slow to close. The same join goes to the store (the coordinator takes it once), and
 * what this node holds of its subtree's joins too. */
static void on_tree_timer(uv_timer_t *t)
{
    store_agent_t *a = t->data;
    if (!a->tree_wait || a->m.state != MS_JOINING || a->m.closing)
        return;
    a->tree_wait = 0;
    a->go_get = 1;
    member_progress(&a->m, "rendezvous '%s': the go of round %d did not come through this "
                    "node's relay within %.3g s; joining the job store directly", a->m.run_id,
                    a->m.round + 1, (double)rdzv_heartbeat_ms(&a->m.p) / 1000);
    relay_udp_direct(a->relay);
    char key[320];
    member_key(&a->m, key, sizeof key, "join", a->m.join_k);
    if (send_set(a, key, a->join_val, a->join_len) < 0 || wait_assign(a) < 0)
        member_fail(&a->m, PODRUN_ESTORELOST, "could not send the join to the job store");
}

/* JOINING: the k-th join record, and the WAIT + GET of the k-th assign key, in one write
 * (member.h, join). After a restart a member of the stopped round's tree sends it up to its
 * parent instead, or, as a root, joins the store itself and writes its subtree's joins there
 * (relay.h). */
/* A fed member's join, up to its parent (kept for the store, should no go come): 0, or -ENOMEM
 * (it joins the store itself). */
static int join_up(store_agent_t *a, const char *val, size_t len)
{
    char *entry = malloc(len + 64);
    int n = entry ? relay_entry_put(entry, len + 64, a->m.id, a->m.join_k, val, len) : -ENOMEM;
    int rc = -ENOMEM;
    if (n > 0 && keep_copy(&a->join_val, &a->join_len, val, len) == 0) {
        relay_udp_rejoin(a->relay, entry, (size_t)n);
        a->tree_wait = 1;
        uv_timer_start(&a->tree_timer, on_tree_timer, rdzv_heartbeat_ms(&a->m.p), 0);
        rc = 0;
    }
    free(entry);
    return rc;
}

static int store_join(rdzv_member_t *m, const char *key, const char *val, size_t len)
{
    store_agent_t *a = (store_agent_t *)m;
    if (a->relay && a->m.join_k > 0 && a->last_assign && relay_udp_in_tree(a->relay, a->m.round)) {
        if (a->fed && join_up(a, val, len) == 0)
            return 0;
        if (!a->fed) {
            relay_udp_rejoin(a->relay, NULL, 0);
            a->go_get = 1;
        }
    }
    int rc = send_set(a, key, val, len);
    return rc < 0 ? rc : wait_assign(a) < 0 ? -ENOTCONN : 0;
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

/* Every heartbeat period (rdzv_heartbeat_ms): this node's heartbeat (a SET of its hb key; no
 * answer, so the host pays one read for it), and the check on the host (rendezvous.h,
 * "Liveness"): any byte from it is a sign of life; after quiet_ms of quiet a PING asks for one;
 * a PING unanswered for the hang bound H, with nothing else heard either, means the host is hung.
 * A dead host or a cut network is the kernel's to notice (the connection fails after W without
 * acknowledgements). */
static void on_hb_timer(uv_timer_t *t)
{
    store_agent_t *a = t->data;
    uint64_t now = uv_now(a->m.loop), heard = store_aclient_last_heard(a->conn);
    /* A tick this late means this loop itself stalled: timers run before I/O, so the answer may
     * be waiting unread. The question out gets a fresh window instead of a verdict. */
    int late = a->hb_tick > 0 && now - a->hb_tick > 2 * rdzv_heartbeat_ms(&a->m.p);
    a->hb_tick = now;
    if (late)
        a->ping_sent = now;
    char key[320];
    member_key(&a->m, key, sizeof key, "hb", -1);
    /* the time of a health check that found no news rides on the heartbeat (member.h) */
    char val[64];
    double unsent = a->m.health_unsent;
    int vl = unsent > 0 ? rdzv_health_ago_encode(unsent, podrun_time_epoch(), val, sizeof val) : 0;
    if (send_set(a, key, val, vl > 0 ? (size_t)vl : 0) == 0)
        a->m.health_unsent = 0;
    a->heartbeats++;
    uint64_t since = heard > a->ping_sent ? heard : a->ping_sent;
    if (a->ping_out && !late)
        a->heartbeat_misses++;   /* /metrics: a tick with the store silent and asked */
    if (a->ping_out && now - since >= hang_ms(a)) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why,
             "the job store at %s:%u did not answer for %g s though its connection stayed open "
             "(the store host is hung or stopped)",
             a->connect_host, a->m.port, (double)hang_ms(a) / 1000);
        member_fail(&a->m, PODRUN_ESTORESILENT, why);
        return;
    }
    if (a->fed && a->m.state == MS_RUNNING && a->end_taken != a->m.round) {
        /* no WAIT stands for the round's end: the heartbeat asks for it (relay.h) */
        char end[320];
        sfmt(end, sizeof end, "%sr/%d/end", a->m.prefix, a->m.round);
        if (!a->ping_out && req_begin(a, store_aclient_get(a->conn, end, on_end_polled, a)) == 0)
            a->ping_out = 1, a->ping_sent = now;
        return;
    }
    if (!a->ping_out && now - (heard > a->ping_sent ? heard : a->ping_sent) >= quiet_ms(a) &&
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
    if (req_end(a) || status < 0 || len == 0 || a->m.state != MS_JOINING)
        return;
    char line[RDZV_LINE_MAX];
    size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, val, n);
    line[n] = '\0';
    member_progress(&a->m, "%s", line);
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
static void store_tick(rdzv_member_t *m)
{
    store_agent_t *a = (store_agent_t *)m;
    if (a->m.state == MS_STARTING) {
        char line[RDZV_LINE_MAX], left[32];
        podrun_format_duration(a->started + a->m.p.join_timeout - podrun_time_epoch(), left, sizeof left);
        int hello = store_aclient_hello_error(a->conn);
        if (hello == PODRUN_EREFUSED) {
            sfmt(line, sizeof line,
                 "rendezvous '%s': the job store at %s:%u refused this node's address %s: it is "
                 "not in the store's allow-list (--store-allow on the hosting node); retrying "
                 "(%s left)", a->m.run_id, a->connect_host, a->m.port,
                 a->m.local_addr ? a->m.local_addr : "(no --local-addr)", left);
            member_progress(&a->m, "%s", line);
            return;
        }
        sfmt(line, sizeof line,
                 "rendezvous '%s': waiting for the job store at %s:%u (%s left)%s%s%s", a->m.run_id,
                 a->connect_host, a->m.port, left,
                 hello ? "; a program there accepts connections but does not answer as a job "
                         "store (" : "", hello ? podrun_strerror(hello) : "",
                 hello ? "): the port is taken on that machine; give another one" : "");
        member_progress(&a->m, "%s", line);
    } else if (a->m.state == MS_JOINING && !a->m.server && a->ready && !a->tree_wait) {
        /* (a join that went up the tree has no WAIT on the store to cancel: a WAIT put out
         * again here would have the host write this node its assignment after all) */
        char key[320];
        sfmt(key, sizeof key, "%sstatus", a->m.prefix);
        if (req_begin(a, store_aclient_cancel_wait(a->conn, on_cancelled, a)) < 0 ||
            req_begin(a, store_aclient_get(a->conn, key, on_status, a)) < 0 || wait_assign(a) < 0)
            member_fail(&a->m, PODRUN_ESTORELOST, "could not wait on the job store");
    }
}

/* The connection to the store dropped. Unless this node is on its way out anyway (closing,
 * leaving, finished, or told to exit), it has lost the job: the host went away, or (ETIMEDOUT)
 * nothing this node sent was acknowledged for a window W. */
static void on_conn_lost(store_aclient_t *c, int status, void *arg)
{
    (void)c;
    store_agent_t *a = arg;
    a->ready = 0;
    if (member_done_anyway(&a->m))
        return;
    char why[RDZV_LINE_MAX];
    if (status == UV_ETIMEDOUT)
        sfmt(why, sizeof why,
             "the job store at %s:%u is unreachable: nothing this node sent was acknowledged for "
             "%g s",
             a->connect_host, a->m.port, (double)window_ms(a) / 1000);
    else
        sfmt(why, sizeof why, "lost the connection to the job store at %s:%u", a->connect_host,
             a->m.port);
    member_fail(&a->m, PODRUN_ESTORELOST, why);
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
    member_fail(&a->m, PODRUN_ERUNID, a->stranger);
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
    if (req_end(a) || status < 0 || a->m.state != MS_STARTING)
        return; /* a lost connection is said by on_conn_lost */
    if (!runs_name(val, len, a->m.run_id)) {
        char line[RDZV_LINE_MAX];
        const char *nl = memchr(val, '\n', len);
        int n = (int)(nl ? (size_t)(nl - val) : len);
        sfmt(line, sizeof line, "rendezvous '%s': the job store at %s:%u belongs to run '%.*s', "
             "this agent's run id is '%s'; give every node the same --rdzv-id (PET_RDZV_ID)",
             a->m.run_id, a->connect_host, a->m.port, n < 200 ? n : 200, val, a->m.run_id);
        a->stranger = strdup(line);
        a->m.state = MS_JOINING;
        char key[320];
        member_key(&a->m, key, sizeof key, "join", a->m.join_k);
        if (!a->stranger || req_begin(a, store_aclient_set(a->conn, key, "", 0,
                                                           on_stranger_join_written, a)) < 0)
            member_fail(&a->m, PODRUN_ERUNID, a->stranger ? a->stranger : line);
        return;
    }
    member_join(&a->m);
    a->ping_sent = uv_now(a->m.loop);
    uv_timer_start(&a->hb_timer, on_hb_timer, 0, rdzv_heartbeat_ms(&a->m.p));
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
                 a->m.run_id, a->connect_host, a->m.port, podrun_strerror(status));
            member_fail(&a->m, PODRUN_EREJECTED, why);
            return;
        }
        podrun_format_duration(a->m.p.join_timeout, took, sizeof took);
        sfmt(why, sizeof why,
             "rendezvous '%s': could not reach the job store at %s:%u within %s: %s", a->m.run_id,
             a->connect_host, a->m.port, took, podrun_strerror(status));
        member_fail(&a->m, PODRUN_EJOINTIMEOUT, why);
        return;
    }
    store_aclient_on_lost(c, on_conn_lost, a);
    store_aclient_liveness(c, (unsigned)window_ms(a), (unsigned)rdzv_heartbeat_ms(&a->m.p));
    a->ready = 1;
    if (a->m.state == MS_STARTING &&
        req_begin(a, store_aclient_get(c, RDZV_RUNS_KEY, on_runs, a)) < 0)
        member_fail(&a->m, PODRUN_ESTORELOST, "could not ask the job store which run it serves");
}

/* How often a joining agent tries the store host: every RDZV_JOIN_RETRY_MS, jittered, so it
 * is in within one interval of the host listening; in a job of more than 1024 nodes slower, so
 * the whole job makes at most about RDZV_JOIN_RETRY_RATE attempts per second (Joining). */
static unsigned join_retry_ms(int max_nodes)
{
    double ms = 1000.0 * max_nodes / RDZV_JOIN_RETRY_RATE;
    return ms < RDZV_JOIN_RETRY_MS ? RDZV_JOIN_RETRY_MS : ms > 2000 ? 2000 : (unsigned)ms;
}

/* The port this agent meant to host on is taken: is it this run's job store? Asked once, at
 * start, with a bound (a program that accepts and never answers costs GUEST_CHECK_MS). A store
 * that wants a token does not show its runs to this check; the taken port stays the error. */
static int holds_this_run(const store_agent_t *a)
{
    podrun_store_t *s;
    const char *key = RDZV_RUNS_KEY;
    char *val = NULL;
    size_t len = 0;
    if (podrun_store_connect(a->connect_host, a->m.port, GUEST_CHECK_MS, &s) < 0)
        return 0;
    int ok = podrun_store_check(s, &key, 1) == 1 && podrun_store_get(s, key, &val, &len) == 0 &&
             len > 0 && runs_name(val, len, a->m.run_id);
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
    if (member_init(&a->m, &rdzv_backend_store, &store_transport, loop, p, self, cb, arg) < 0 ||
        (p->endpoint_host && *p->endpoint_host && !(a->endpoint_host = strdup(p->endpoint_host)))) {
        member_free(&a->m);
        return -ENOMEM;
    }
    if (p->token) {
        a->token = *p->token;
        a->m.p.token = &a->token;
    }
    a->started = podrun_time_epoch();
    a->m.port = p->endpoint_port;
    sfmt(a->connect_host, sizeof a->connect_host, "%s",
             a->endpoint_host ? a->endpoint_host : "127.0.0.1");

    if (p->is_host) {
        int rc = host_start(a);
        /* torchrun's rule: hosting that was only inferred yields to another agent of the same
         * run on this machine, which bound the port first */
        if (rc == UV_EADDRINUSE && p->is_host == RDZV_HOST_INFERRED && holds_this_run(a)) {
            member_progress(&a->m, "joining the job store that another agent of this run "
                                   "hosts on this machine");
            rc = 0;
        }
        if (rc < 0) {
            member_free(&a->m);
            return rc;
        }
    }
    member_timer_init(&a->m, &a->hb_timer);
    member_timer_init(&a->m, &a->tree_timer);
    member_timers_init(&a->m);
    a->end_taken = -1;
    /* where this node takes relayed ends: its advertised address (a name, or an address that is
     * not this machine's, leaves it out of the tree: it waits on the store itself) */
    if (relay_udp_open(loop, a->m.addr, a->m.p.token, a->m.run_id, on_relayed, a, &a->relay) < 0)
        a->relay = NULL;
    else
        relay_udp_on_restart(a->relay, on_gather, on_go, a);
    int ms = (int)(a->m.p.join_timeout * 1000);
    int rc = store_aclient_connect(loop, a->connect_host, a->m.port, ms, on_connected, a, &a->conn);
    if (rc == 0) {
        store_aclient_auth(a->conn, a->m.p.token);
        /* from the advertised address: the one an allow-list lets in */
        store_aclient_source(a->conn, a->m.local_addr);
    }
    if (rc < 0) {
        member_close(&a->m.base, NULL, NULL);
        return rc;
    }
    store_aclient_retry_every(a->conn, join_retry_ms(a->m.p.max_nodes));
    member_start_progress(&a->m);
    *out = &a->m.base;
    return 0;
}

static void on_leave_written(store_aclient_t *c, int status, const char *val, size_t len,
                             int64_t num, void *arg)
{
    (void)c, (void)status, (void)val, (void)len, (void)num;
    store_agent_t *a = arg;
    a->m.pending--;
    member_leave_sent(&a->m);
}

/* One of this node's records on the connection (member.h, put); the leave's with a callback. */
static int store_put(rdzv_member_t *m, const char *key, const char *val, size_t len, int ack)
{
    store_agent_t *a = (store_agent_t *)m;
    if (!ack)
        return send_set(a, key, val, len);
    if (!a->conn || !a->ready)
        return -ENOTCONN;
    return req_begin(a, store_aclient_set(a->conn, key, val, len, on_leave_written, a));
}

/* Closes the connection (member_close ran). The host then keeps the store up until every other
 * agent is gone or close_timeout passed (COORD_CLOSED), so nobody sees a reset at the end. */
static void store_close(rdzv_member_t *m)
{
    store_agent_t *a = (store_agent_t *)m;
    store_aclient_t *c = a->conn;
    a->conn = NULL;
    a->ready = 0;
    if (c)
        store_aclient_close(c);
    if (a->host.coord) {
        coord_shutdown(a->host.coord, podrun_time_epoch());
        host_run(&a->host); /* closes the handles on COORD_CLOSED */
    } else {
        close_handles(a);
    }
}

static void store_stats(const rdzv_agent_t *base, rdzv_stats_t *out)
{
    const store_agent_t *a = (const store_agent_t *)base;
    out->heartbeats = a->heartbeats;
    out->heartbeat_misses = a->heartbeat_misses;
    if (!a->m.server || !a->host.coord)
        return;
    out->hosting = 1;
    out->silent_nodes = coord_silent_nodes(a->host.coord);
    store_server_stats_t st;
    store_server_stats(a->m.server, &st);
    out->store_connections = st.connections;
    out->store_accepted = st.accepted;
    memcpy(out->store_ops, st.ops, sizeof out->store_ops);
    out->store_keys = st.keys;
    out->store_bytes = st.bytes;
}

static const rdzv_transport_t store_transport = {
    .what = "the job store",
    .put = store_put,             /* a SET on the connection */
    .join = store_join,           /* the join's SET, then WAIT + GET of its assign key */
    .join_extra = store_join_extra, /* the relay port */
    .assigned = store_assigned,   /* WAIT + GET of the round's end, or its relay */
    .tick = store_tick,           /* waiting for the store, or the coordinator's status */
    .halt = store_halt,           /* the heartbeats stop */
    .close = store_close,         /* the connection; the host's coordinator winds down */
    .release = store_release,
};

const rdzv_backend_t rdzv_backend_store = {
    .name = "store",
    .start = store_start,
    MEMBER_ENTRIES, /* reports, leave, rejoin, close, store_port: member.h */
    .stats = store_stats,
};
