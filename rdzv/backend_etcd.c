/* rdzv/backend_etcd.c — the rendezvous on etcd: the contract of rdzv/rendezvous.h with the job's
 * state in etcd, so that no agent holds it alone and losing any one node — whichever — is an
 * ordinary lost node, never a lost store.
 *
 * ## Design: a leader elected through etcd runs the coordinator
 *
 * The decisions are the pure coordinator's (rdzv/coordinator.h), exactly as with the store
 * backend: one agent runs it, and every agent talks to it through records. Here the records are
 * etcd keys, the coordinating agent is whichever holds etcd's leader key, and the coordinator's
 * inputs come from an etcd watch instead of the store's observer. Everything the coordinator
 * decides is written to etcd in transactions that hold only while the writer still holds the
 * leader key, together with the job's state (round, phase, restarts used, the members of the
 * round with their ranks); a new leader reads that state and resumes the coordinator where the
 * last one left off (coord_resume), then feeds it what happened meanwhile.
 *
 * Keys (P = "podrun/<run_id>/"), each with the lease it lives as long as:
 *   P n/<id>/alive         the agent's lease   the agent is alive (its lease: keep_alive_interval
 *                                              x keep_alive_max_attempt, at least 2 s)
 *   P n/<id>/join/<k>      the agent's lease   the k-th join: node descriptor + store_port
 *   P n/<id>/fail/<R>      the agent's lease   its first worker failure in round R
 *   P n/<id>/done/<R>      the agent's lease   every worker of round R exited 0
 *   P n/<id>/leave         the agent's lease   it is going away (SIGTERM)
 *   P n/<id>/peer/<R>      the agent's lease   another node of round R is gone, as its
 *                                              discovery saw it (a Kubernetes pod deleted)
 *   P n/<id>/assign/<k>    the agent's lease   the coordinator's answer to join k
 *   P leader               the leader's lease  the agent that coordinates (its id)
 *   P state                the job lease       the job's state (rdzv/etcd_state.h)
 *   P r/<R>/end            the job lease       how round R ended (the decision, or finished)
 *   P status               the job lease       the open round's progress line
 *   P job                  the job lease       the job lease's id
 * The job lease is granted by the first leader (ttl: close_timeout, at least 3 lease ttls) and
 * kept alive by whoever leads, so the job's keys outlive any one agent but not the job: when the
 * job is over, the last leader deletes P once every other agent has gone (bounded by
 * close_timeout, as the store host waits), and if the whole job is killed they expire with the
 * job lease. Each agent revokes its own lease when it closes, which removes its keys at once.
 *
 * An agent, whatever its role: grants its lease and keeps it alive every keep_alive_interval;
 * watches its own assign keys, P r/ and P leader on one stream; then, in one transaction, puts
 * its alive and join keys and creates P leader if it does not exist (the election). The answer
 * to its join, the end of its round and the loss of the leader are pushed to it by the watch;
 * its reports are puts. When P leader is deleted (the leader's lease ended), every agent that is
 * still in the job tries to create it; one succeeds and takes over.
 *
 * The leader, besides: reads P job, P state and every record under P n/ in one transaction at
 * one revision, resumes the coordinator from the state, feeds it the records not yet answered,
 * tells it which members have no alive key (lost), and watches P n/ from the next revision: a
 * put of a join, fail, done or leave record is the coordinator's write input, the deletion of an
 * alive key its close input (the coordinator's own heartbeat sweep is off: etcd's lease expiry
 * is the liveness). Its outputs are queued and written in order, one transaction at a time
 * (chunks under etcd's default limit of 128 operations, the state first): an end record can
 * never overtake the assignments of its round. Each assignment names node rank 0 of its round,
 * whose own store (every agent listens on one, --master-port or a free port) serves the workers
 * of that round as MASTER_ADDR:MASTER_PORT; each agent empties its store when it is assigned, so
 * every attempt starts with a fresh namespace.
 *
 * ## Failure cases
 *  - A node is lost (crash, SIGKILL, cut off): its lease expires after its ttl, its keys go, the
 *    leader sees the alive key deleted: a lost member, a restart round (counted as with the
 *    store backend; an elastic job's membership change is not).
 *  - The leader is lost: the same, and the leader key goes with its lease. The next leader
 *    resumes from P state: in a running round the old leader's node has no alive key, so the
 *    round stops for it and restarts without it. The new coordinator's join timeout starts at
 *    the takeover. What the old leader had read but not yet written is read again from the
 *    records, which outlive it unless their own agent is gone too (then that agent is lost,
 *    which stops the round all the same, with "lost" as the reason instead of its report).
 *  - The leader stops leading without losing its lease (its transaction's comparison failed:
 *    someone deleted its key): it drops the coordinator and follows whoever leads.
 *  - A round's close is written in several transactions (more than ~120 nodes) and the leader
 *    dies between them: the state went first, so the next leader has the round's members and
 *    writes every alive member's assignment again (an agent takes only the first).
 *  - An etcd member is lost: requests and watch streams move to the next endpoint, watches
 *    resume from the revision after the last event they delivered. Nothing else notices.
 *  - etcd as a whole is unreachable, slow or failing: every request is retried (the endpoints in
 *    turn, then a backoff to 1 s) and the workers run on; after 1 s a progress line says what
 *    fails, and once nothing has been answered for read_timeout (60 s) the agent gives up:
 *    lost() with PODRUN_ESTORELOST, the store-lost exit code. Leases do not expire while etcd is
 *    down; an agent that reaches etcd again in time and finds its lease gone was counted as lost
 *    by the job, and exits the same way.
 *  - A watch's revision was compacted away: the agent reads what it may have missed (its join's
 *    answer, its round's end, the leader key) and watches again; a leader rebuilds from P state
 *    as at a takeover.
 *  - An answer that is not etcd's (a proxy's page, garbage, an oversized one) is a failed
 *    attempt on that endpoint, parsed by rdzv/etcd_json.c which takes any bytes.
 */
#include "rdzv/backend.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/coordinator.h"
#include "rdzv/etcd/client.h"
#include "rdzv/etcd/json.h"
#include "rdzv/etcd/state.h"
#include "rdzv/records.h"
#include "rdzv/store/server.h"
#include "rdzv/base/u64map.h"

#define TXN_MAX_PUTS 120              /* etcd's default --max-txn-ops is 128 */
#define SWEEP_OFF (365.0 * 24 * 3600) /* the coordinator's silence sweep: leases do that here */
#define CLOSE_BOUND_MS 2000           /* the last words of a closing agent */
#define KEY_MAX 320

enum agent_state {
    AS_STARTING, /* lease, watch, then the join */
    AS_JOINING,  /* join sent, waiting for its answer */
    AS_RUNNING,  /* assigned, waiting for the end of the round */
    AS_STOPPED,  /* the round stopped; rejoin or exit is up to the launcher */
    AS_FINISHED,
    AS_DEAD,     /* lost() was called */
};

/* The watchers of an agent's stream, and the leader's own. */
enum { W_ASSIGN = 1, W_END, W_LEADER, W_RECORDS };

/* The leader's view of one agent, from its keys. */
typedef struct lnode {
    char id[17];
    uint64_t idn;
    int64_t lease;
    int sport;
    int join_k, answered_k; /* latest join seen; latest join with an answer in etcd */
    int has_desc, alive;
    rdzv_desc_rec_t d;
} lnode_t;

/* A write of the leader: puts (or, for the job's last write, the deletion of every key). */
typedef struct wput {
    char *key, *val;
    size_t klen, vlen;
    int64_t lease;
} wput_t;

typedef struct wbatch {
    struct wbatch *next;
    wput_t *puts;
    size_t n, cap;
    int cleanup;  /* delete P and everything under it */
    int job_only; /* every lease replaced by the job lease (an agent's lease had expired) */
} wbatch_t;

/* A record read at a takeover. */
typedef struct snaprec {
    char *key, *val;
    size_t klen, vlen;
    int64_t lease;
} snaprec_t;

typedef struct etcd_agent {
    rdzv_agent_t base; /* first: the API hands out &base */
    uv_loop_t *loop;
    rdzv_params_t p;
    char *run_id, *local_addr, *expected, *cacert, *cert, *key;
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX], hostname[RDZV_NAME_MAX];
    char domain[RDZV_NAME_MAX]; /* NVLink domain, "" none */
    int nproc, service;   /* service: a node of parameter servers (rendezvous.h) */
    rdzv_callbacks_t cb;
    void *arg;
    char id[17];
    uint64_t idn;
    char prefix[256];
    size_t plen;
    etcd_endpoint_t ep[ETCD_MAX_ENDPOINTS];
    int n_ep;
    etcd_client_t *etcd;
    store_server_t *server;
    uint16_t sport;

    /* this node in the job */
    int state, join_k, round, node_rank, stop_action;
    int64_t lease;
    int ttl;
    etcd_watch_t *watch;
    int created;
    etcd_call_t *ka_call, *jka_call, *hello_call, *status_call, *campaign_call, *sync_call;
    int end_round; /* the latest end record seen (it may come before this node's assignment) */
    char *end_val;
    size_t end_len;
    int leaving, closing, flushing, revoking;
    int64_t said_failing;     /* when the last "etcd is not answering" line went out */
    char endpoint[300];       /* the member this node talks to, as last said */
    uv_timer_t ka_timer, prog_timer, defer_timer, close_timer;
    void (*leave_sent)(void *);
    void *leave_arg;

    /* coordinating */
    int leading, lead_ready, cleaning;
    int64_t lead_rev, job_lease;
    coord_t *coord;
    uv_timer_t ctimer[COORD_T_COUNT];
    etcd_watch_t *lwatch;
    etcd_call_t *lcall; /* the leader's one request in flight: a takeover step or a write */
    wbatch_t *q_head, *q_tail;
    lnode_t **nodes;
    size_t n_nodes, cap_nodes;
    u64map_t by_id;
    etcd_state_t st; /* the state as last written; st.members owned */
    int st_valid;
    snaprec_t *snap;
    size_t n_snap;
    char *snap_state;
    size_t snap_state_len;
    int64_t snap_rev;

    int handles;
    void (*closed)(void *);
    void *closed_arg;
} etcd_agent_t;

/* ---- lifetime ---- */

static void lead_stop(etcd_agent_t *a);

static void agent_free(etcd_agent_t *a)
{
    void (*closed)(void *) = a->closed;
    void *arg = a->closed_arg;
    lead_stop(a);
    free(a->end_val);
    free(a->run_id);
    free(a->local_addr);
    free(a->expected);
    free(a->cacert);
    free(a->cert);
    free(a->key);
    free(a);
    if (closed)
        closed(arg);
}

static void maybe_free(etcd_agent_t *a)
{
    if (a->closing == 2 && a->handles == 0 && !a->server)
        agent_free(a);
}

static void on_handle_closed(uv_handle_t *h)
{
    etcd_agent_t *a = h->data;
    a->handles--;
    maybe_free(a);
}

static void on_server_closed(void *arg)
{
    etcd_agent_t *a = arg;
    a->server = NULL;
    maybe_free(a);
}

static void timer_init(etcd_agent_t *a, uv_timer_t *t)
{
    uv_timer_init(a->loop, t);
    t->data = a;
    a->handles++;
}

static void progress(etcd_agent_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(etcd_agent_t *a, const char *fmt, ...)
{
    char line[RDZV_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (a->cb.progress)
        a->cb.progress(a->arg, line);
}

/* This node is out of the job: tell the launcher once. A node already on its way out (finished,
 * told to exit, leaving, closing) is not told. */
static void agent_fail(etcd_agent_t *a, int err, const char *why)
{
    if (a->state == AS_DEAD || a->closing || a->leaving || a->state == AS_FINISHED ||
        (a->state == AS_STOPPED && a->stop_action == RDZV_EXIT))
        return;
    a->state = AS_DEAD;
    uv_timer_stop(&a->prog_timer);
    if (a->cb.lost)
        a->cb.lost(a->arg, err, why);
}

/* ---- keys ---- */

static void pkey(const etcd_agent_t *a, char *out, size_t cap, const char *rest)
{
    sfmt(out, cap, "%s%s", a->prefix, rest);
}

/* Parses "<P>n/<16 hex>/<what>[/<num>]". 0, or -1 for any other key. */
static int parse_node_key(const etcd_agent_t *a, const char *key, size_t klen, char ids[17],
                          uint64_t *idn, char *what, size_t wcap, long *num)
{
    size_t pl = a->plen + 2;
    if (klen < pl + 18 || memcmp(key, a->prefix, a->plen) != 0 ||
        memcmp(key + a->plen, "n/", 2) != 0 || key[pl + 16] != '/')
        return -1;
    memcpy(ids, key + pl, 16);
    ids[16] = '\0';
    char *end;
    *idn = strtoull(ids, &end, 16);
    if (*end || *idn == 0)
        return -1;
    const char *rest = key + pl + 17;
    size_t rl = klen - pl - 17;
    const char *slash = memchr(rest, '/', rl);
    size_t wl = slash ? (size_t)(slash - rest) : rl;
    if (wl == 0 || wl >= wcap)
        return -1;
    memcpy(what, rest, wl);
    what[wl] = '\0';
    *num = -1;
    if (slash) {
        char digits[16];
        size_t dl = rl - wl - 1;
        if (dl == 0 || dl >= sizeof digits)
            return -1;
        memcpy(digits, slash + 1, dl);
        digits[dl] = '\0';
        if (podrun_parse_int(digits, 0, 1L << 30, num))
            return -1;
    }
    return 0;
}

/* ---- small etcd helpers ---- */

static void on_ignored(void *arg, int status, const etcd_resp_t *r)
{
    (void)arg, (void)status, (void)r;
}

static etcd_op_t op_put(const char *key, const char *val, size_t vlen, int64_t lease)
{
    return (etcd_op_t){ETCD_OP_PUT, key, strlen(key), NULL, 0, val, vlen, lease};
}

static etcd_op_t op_range(const char *key, const char *end)
{
    return (etcd_op_t){ETCD_OP_RANGE, key, strlen(key), end, end ? strlen(end) : 0, NULL, 0, 0};
}

static etcd_cmp_t cmp_create(const char *key, int64_t rev)
{
    return (etcd_cmp_t){key, strlen(key), ETCD_CMP_CREATE, rev, NULL, 0};
}

/* A fire-and-forget put with this node's lease (its records: the client retries until etcd
 * takes it, or the agent closes). */
static int put_record(etcd_agent_t *a, const char *key, const char *val, size_t vlen,
                      etcd_call_cb cb)
{
    etcd_op_t op = op_put(key, val, vlen, a->lease);
    return etcd_call(a->etcd, "kv/put", etcd_req_op(&op), 0, cb ? cb : on_ignored, a, NULL);
}

/* ================================================================================================
 * The coordinating side
 * ============================================================================================== */

static void lead_actions(etcd_agent_t *a);
static void q_run(etcd_agent_t *a);
static void campaign(etcd_agent_t *a);
static void close_finish(etcd_agent_t *a);

static lnode_t *lnode_get(etcd_agent_t *a, const char *ids, uint64_t idn)
{
    int i = u64map_get(&a->by_id, idn);
    if (i >= 0)
        return a->nodes[i];
    if (a->n_nodes == a->cap_nodes) {
        size_t nc = a->cap_nodes ? 2 * a->cap_nodes : 64;
        lnode_t **nn = realloc(a->nodes, nc * sizeof *nn);
        if (!nn)
            return NULL;
        a->nodes = nn;
        a->cap_nodes = nc;
    }
    lnode_t *n = calloc(1, sizeof *n);
    if (!n || u64map_reserve(&a->by_id) < 0) {
        free(n);
        return NULL;
    }
    memcpy(n->id, ids, 17);
    n->idn = idn;
    n->join_k = n->answered_k = -1;
    u64map_put(&a->by_id, idn, (int)a->n_nodes);
    a->nodes[a->n_nodes++] = n;
    return n;
}

/* What a join record says besides the descriptor: the agent's store port. */
static void lnode_join(lnode_t *n, int k, const char *val, size_t vlen, int64_t lease)
{
    if (k < n->join_k)
        return;
    n->join_k = k;
    if (lease)
        n->lease = lease;
    if (rdzv_desc_decode(val, vlen, &n->d) == 0)
        n->has_desc = 1;
    long long port = kv_get_int(val, vlen, "store_port", 0);
    n->sport = port > 0 && port < 65536 ? (int)port : 0;
}

static void wbatch_free(wbatch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->puts[i].key);
        free(b->puts[i].val);
    }
    free(b->puts);
    free(b);
}

static void snap_free(etcd_agent_t *a)
{
    for (size_t i = 0; i < a->n_snap; i++) {
        free(a->snap[i].key);
        free(a->snap[i].val);
    }
    free(a->snap);
    a->snap = NULL;
    a->n_snap = 0;
    free(a->snap_state);
    a->snap_state = NULL;
}

/* This agent no longer coordinates: everything the role held goes. It stays an agent. */
static void lead_stop(etcd_agent_t *a)
{
    if (!a->leading && !a->coord && !a->nodes)
        return;
    a->leading = a->lead_ready = a->cleaning = 0;
    etcd_call_cancel(a->lcall);
    a->lcall = NULL;
    etcd_call_cancel(a->jka_call);
    a->jka_call = NULL;
    etcd_watch_cancel(a->lwatch);
    a->lwatch = NULL;
    if (!a->closing || a->closing == 1)
        for (int i = 0; i < COORD_T_COUNT; i++)
            uv_timer_stop(&a->ctimer[i]);
    coord_free(a->coord);
    a->coord = NULL;
    while (a->q_head) {
        wbatch_t *b = a->q_head;
        a->q_head = b->next;
        wbatch_free(b);
    }
    a->q_tail = NULL;
    for (size_t i = 0; i < a->n_nodes; i++)
        free(a->nodes[i]);
    free(a->nodes);
    a->nodes = NULL;
    a->n_nodes = a->cap_nodes = 0;
    u64map_free(&a->by_id);
    memset(&a->by_id, 0, sizeof a->by_id);
    etcd_state_free(&a->st);
    a->st_valid = 0;
    snap_free(a);
    a->job_lease = 0;
}

/* A leader's request was refused for good, or it cannot continue: this node gives up (its lease
 * ends when it closes, and with it the leader key, so another node takes over). */
static void lead_fail(etcd_agent_t *a, const char *what, const char *why)
{
    char line[RDZV_LINE_MAX];
    sfmt(line, sizeof line, "rendezvous '%s': %s: %s", a->run_id, what, why);
    progress(a, "%s", line);
    lead_stop(a);
    agent_fail(a, PODRUN_ESTORELOST, line);
}

/* ---- the write queue ---- */

static wbatch_t *wbatch_new(void)
{
    return calloc(1, sizeof(wbatch_t));
}

static int wbatch_put(wbatch_t *b, const char *key, const char *val, size_t vlen, int64_t lease)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 16;
        wput_t *np = realloc(b->puts, nc * sizeof *np);
        if (!np)
            return -ENOMEM;
        b->puts = np;
        b->cap = nc;
    }
    wput_t *p = &b->puts[b->n];
    p->klen = strlen(key);
    p->key = strdup(key);
    p->val = malloc(vlen + 1);
    if (!p->key || !p->val) {
        free(p->key);
        free(p->val);
        return -ENOMEM;
    }
    memcpy(p->val, val, vlen);
    p->val[vlen] = '\0';
    p->vlen = vlen;
    p->lease = lease;
    b->n++;
    return 0;
}

/* Appends b to the queue in transactions of at most TXN_MAX_PUTS puts, in order. */
static void q_push(etcd_agent_t *a, wbatch_t *b)
{
    if (!b->n && !b->cleanup) {
        wbatch_free(b);
        return;
    }
    while (b) {
        wbatch_t *rest = NULL;
        if (b->n > TXN_MAX_PUTS && (rest = wbatch_new())) {
            rest->puts = malloc((b->n - TXN_MAX_PUTS) * sizeof *rest->puts);
            if (rest->puts) {
                rest->n = rest->cap = b->n - TXN_MAX_PUTS;
                memcpy(rest->puts, b->puts + TXN_MAX_PUTS, rest->n * sizeof *rest->puts);
                b->n = TXN_MAX_PUTS;
            } else {
                free(rest);
                rest = NULL;
            }
        }
        if (a->q_tail)
            a->q_tail->next = b;
        else
            a->q_head = b;
        a->q_tail = b;
        b = rest;
    }
    q_run(a);
}

static void on_job_revoked(void *arg, int status, const etcd_resp_t *r)
{
    (void)status, (void)r;
    etcd_agent_t *a = arg;
    a->lcall = NULL;
    a->job_lease = 0;
    close_finish(a);
}

/* The head of the queue was written (or refused). In order: the next one. */
static void on_written(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->lcall = NULL;
    wbatch_t *b = a->q_head;
    if (!a->leading || !b)
        return;
    if (status != 0) {
        /* an agent's lease ended between its record and our answer: answer under the job's */
        if (status == 1 && r->code == 5 && !b->job_only && !b->cleanup) {
            b->job_only = 1;
            q_run(a);
            return;
        }
        lead_fail(a, "etcd refused the job's records", r->error);
        return;
    }
    if (!r->succeeded) {
        progress(a, "rendezvous '%s': %s no longer holds the leader key; another node "
                    "coordinates the job", a->run_id, a->name);
        lead_stop(a);
        if (a->flushing)
            close_finish(a);
        return;
    }
    a->q_head = b->next;
    if (!a->q_head)
        a->q_tail = NULL;
    int cleanup = b->cleanup;
    wbatch_free(b);
    if (cleanup) {
        /* the job's keys are gone; its lease goes too, and this agent finishes closing */
        char *body = etcd_req_lease_id(a->job_lease);
        if (etcd_call(a->etcd, "lease/revoke", body, ETCD_CALL_ONCE, on_job_revoked, a,
                      &a->lcall) < 0)
            close_finish(a);
        return;
    }
    q_run(a);
    if (a->flushing && !a->q_head && !a->lcall)
        close_finish(a);
}

/* Sends the head of the queue, if nothing is in flight: one transaction that holds only while
 * this agent's leader key is the one it created. */
static void q_run(etcd_agent_t *a)
{
    wbatch_t *b = a->q_head;
    if (a->lcall || !b || !a->leading)
        return;
    char lkey[KEY_MAX];
    pkey(a, lkey, sizeof lkey, "leader");
    etcd_cmp_t cmp = cmp_create(lkey, a->lead_rev);
    char *body;
    if (b->cleanup) {
        char end[256];
        size_t el = etcd_prefix_end(a->prefix, a->plen, end);
        etcd_op_t del = {ETCD_OP_DELETE, a->prefix, a->plen, end, el, NULL, 0, 0};
        body = etcd_req_txn(&cmp, 1, &del, 1, NULL, 0);
    } else {
        etcd_op_t *ops = malloc(b->n * sizeof *ops);
        body = NULL;
        if (ops) {
            for (size_t i = 0; i < b->n; i++)
                ops[i] = (etcd_op_t){ETCD_OP_PUT, b->puts[i].key, b->puts[i].klen, NULL, 0,
                                     b->puts[i].val, b->puts[i].vlen,
                                     b->job_only ? a->job_lease : b->puts[i].lease};
            body = etcd_req_txn(&cmp, 1, ops, b->n, NULL, 0);
            free(ops);
        }
    }
    int rc = etcd_call(a->etcd, "kv/txn", body, 0, on_written, a, &a->lcall);
    if (rc < 0)
        lead_fail(a, "could not write the job's records to etcd", podrun_strerror(rc));
}

/* ---- the coordinator's actions ---- */

static void on_ctimer(uv_timer_t *t)
{
    etcd_agent_t *a = t->data;
    if (!a->coord)
        return;
    coord_on_timer(a->coord, (int)(t - a->ctimer), podrun_time_epoch());
    lead_actions(a);
}

/* The node an assign key is for, and the join it answers. NULL for other keys. */
static lnode_t *assign_target(etcd_agent_t *a, const char *key, long *k)
{
    char ids[17], what[16];
    uint64_t idn;
    if (parse_node_key(a, key, strlen(key), ids, &idn, what, sizeof what, k) < 0 ||
        strcmp(what, "assign") != 0 || *k < 0)
        return NULL;
    return lnode_get(a, ids, idn);
}

/* Node rank 0 of the round a batch closes: its store serves the round's workers. */
static lnode_t *rank0_of(etcd_agent_t *a, const coord_action_t *acts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (acts[i].kind != COORD_SET)
            continue;
        long k;
        lnode_t *t = assign_target(a, acts[i].key, &k);
        rdzv_assignment_t as;
        char host[RDZV_NAME_MAX], err[32], text[64];
        if (t && rdzv_assign_decode(acts[i].val, acts[i].vlen, &as, host, sizeof host, err,
                                    sizeof err, text, sizeof text) == 0 &&
            !err[0] && as.node_rank == 0)
            return t;
    }
    return NULL;
}

static int grow_members(etcd_member_t **m, int n, int *cap)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? 2 * *cap : 16;
    etcd_member_t *nm = realloc(*m, (size_t)nc * sizeof *nm);
    if (!nm)
        return -ENOMEM;
    *m = nm;
    *cap = nc;
    return 0;
}

/* An assignment as the coordinator made it, with the store of the round's node rank 0 filled
 * in, as a put for the target's lease; a member of the new round for the state. */
static int apply_assign(etcd_agent_t *a, wbatch_t *b, const coord_action_t *act, lnode_t *t,
                        long k, const lnode_t *r0, etcd_state_t *ns, int *mcap)
{
    rdzv_assignment_t as;
    char host[RDZV_NAME_MAX], err[32], text[RDZV_LINE_MAX], val[1024];
    int64_t lease = t->lease ? t->lease : a->job_lease;
    if (rdzv_assign_decode(act->val, act->vlen, &as, host, sizeof host, err, sizeof err, text,
                           sizeof text) < 0 || err[0])
        return wbatch_put(b, act->key, act->val, act->vlen, lease);
    as.store_host = r0 ? (r0->d.addr[0] ? r0->d.addr : r0->d.name) : "";
    as.store_port = (uint16_t)(r0 ? r0->sport : 0);
    int len = rdzv_assign_encode(&as, val, sizeof val);
    if (len < 0)
        return len;
    if (grow_members(&ns->members, ns->n_members, mcap) == 0) {
        etcd_member_t *m = &ns->members[ns->n_members++];
        memset(m, 0, sizeof *m);
        memcpy(m->id, t->id, 17);
        m->d = t->d;
        m->node_rank = as.node_rank;
        m->rank_base = as.rank_base;
        m->join_k = (int)k;
        ns->nnodes = as.nnodes;
        ns->world_size = as.world_size;
        sfmt(ns->store_host, sizeof ns->store_host, "%s", as.store_host);
        ns->store_port = as.store_port;
    }
    t->answered_k = (int)k;
    return wbatch_put(b, act->key, val, (size_t)len, lease);
}

/* The job's state after this batch; written first when it changed. */
static void state_update(etcd_agent_t *a, wbatch_t *b, etcd_state_t *ns)
{
    coord_info_t info;
    coord_info(a->coord, &info);
    int new_members = ns->n_members > 0;
    if (a->st_valid && !new_members && a->st.round == info.round && a->st.phase == info.phase &&
        a->st.restarts == info.restarts_used && (info.phase != COORD_OVER ||
        strcmp(a->st.over_kind, info.over_kind) == 0)) {
        etcd_state_free(ns);
        return;
    }
    if (!new_members) { /* the members stay those of the last round closed */
        etcd_state_free(ns);
        *ns = a->st;
        a->st.members = NULL;
        a->st.n_members = 0;
    }
    etcd_state_free(&a->st);
    a->st = *ns;
    a->st.round = info.round;
    a->st.phase = info.phase;
    a->st.restarts = info.restarts_used;
    sfmt(a->st.over_kind, sizeof a->st.over_kind, "%s", info.over_kind);
    sfmt(a->st.over_text, sizeof a->st.over_text, "%s", info.over_text);
    a->st_valid = 1;
    char *val;
    size_t len;
    if (etcd_state_encode(&a->st, &val, &len) < 0)
        return;
    char key[KEY_MAX];
    pkey(a, key, sizeof key, "state");
    /* first: a round's close may take several transactions, and the state must lead them */
    if (wbatch_put(b, key, val, len, a->job_lease) == 0) {
        wput_t st = b->puts[b->n - 1];
        memmove(b->puts + 1, b->puts, (b->n - 1) * sizeof *b->puts);
        b->puts[0] = st;
    }
    free(val);
}

/* Applies the coordinator's actions in order: its writes become one queued batch (the
 * assignments naming their round's store), its timers uv timers, its lines progress lines; the
 * workers' fresh namespace is each agent's own business here (it empties its store when
 * assigned); "closed" ends the job's keys. */
static void lead_actions(etcd_agent_t *a)
{
    coord_action_t act, *acts = NULL;
    size_t n = 0, cap = 0;
    if (!a->coord)
        return;
    while (coord_next_action(a->coord, &act)) {
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            coord_action_t *na = realloc(acts, nc * sizeof *na);
            if (!na)
                break;
            acts = na;
            cap = nc;
        }
        acts[n++] = act;
    }
    wbatch_t *b = wbatch_new();
    if (!b) {
        free(acts);
        lead_fail(a, "cannot coordinate the job", "out of memory");
        return;
    }
    lnode_t *r0 = rank0_of(a, acts, n);
    etcd_state_t ns;
    memset(&ns, 0, sizeof ns);
    int mcap = 0, closed = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const coord_action_t *x = &acts[i];
        long k;
        lnode_t *t;
        switch (x->kind) {
        case COORD_SET:
            if ((t = assign_target(a, x->key, &k)))
                bad |= apply_assign(a, b, x, t, k, r0, &ns, &mcap) < 0;
            else
                bad |= wbatch_put(b, x->key, x->val, x->vlen, a->job_lease) < 0;
            break;
        case COORD_TIMER:
            if (x->at < 0) {
                uv_timer_stop(&a->ctimer[x->timer]);
            } else {
                double d = (x->at - podrun_time_epoch()) * 1000.0;
                if (d > 4e9)
                    d = 4e9;
                uv_timer_start(&a->ctimer[x->timer], on_ctimer, d > 0 ? (uint64_t)d + 1 : 0, 0);
            }
            break;
        case COORD_LOG:
            progress(a, "%s", x->val);
            break;
        case COORD_CLOSED:
            closed = 1;
            break;
        default: /* COORD_DELETE_WORKERS: every agent empties its own store when assigned */
            break;
        }
    }
    free(acts);
    if (r0 && !r0->sport)
        progress(a, "rendezvous '%s': node rank 0 (%s) did not say where its store listens",
                 a->run_id, r0->d.name);
    if (bad) {
        etcd_state_free(&ns);
        wbatch_free(b);
        lead_fail(a, "cannot coordinate the job", "out of memory");
        return;
    }
    state_update(a, b, &ns);
    if (closed) {
        wbatch_t *c = wbatch_new();
        if (c) {
            c->cleanup = 1;
            q_push(a, b);
            b = c;
        }
    }
    q_push(a, b);
}

/* ---- feeding the coordinator ---- */

static void feed_write(etcd_agent_t *a, uint64_t idn, const char *key, size_t klen,
                       const char *val, size_t vlen)
{
    if (!a->coord)
        return;
    coord_on_write(a->coord, idn, key, klen, val, vlen, podrun_time_epoch());
    lead_actions(a);
}

/* An agent's alive key is gone: its lease expired (or was revoked before it said anything). */
static void feed_close(etcd_agent_t *a, uint64_t idn)
{
    if (!a->coord)
        return;
    coord_on_lost(a->coord, idn, "agent lost: its etcd lease ended", podrun_time_epoch());
    lead_actions(a);
}

/* One record under P n/ as the coordinator sees it: joins, reports and leaves are writes, the
 * deletion of an alive key is the agent's connection closing. Answers (ours) are skipped. */
static void lead_record(etcd_agent_t *a, const etcd_kv_t *kv, int deleted)
{
    char ids[17], what[16];
    uint64_t idn;
    long num;
    if (parse_node_key(a, kv->key, kv->klen, ids, &idn, what, sizeof what, &num) < 0)
        return;
    lnode_t *n = lnode_get(a, ids, idn);
    if (!n)
        return;
    if (strcmp(what, "alive") == 0) {
        n->alive = !deleted;
        if (!deleted && kv->lease)
            n->lease = kv->lease;
        if (deleted)
            feed_close(a, idn);
        return;
    }
    if (deleted || strcmp(what, "assign") == 0)
        return;
    if (strcmp(what, "join") == 0) {
        if (num < 0)
            return;
        lnode_join(n, (int)num, kv->value, kv->vlen, kv->lease);
    }
    feed_write(a, idn, kv->key, kv->klen, kv->value, kv->vlen);
}

static void on_lead_watch(void *arg, const etcd_resp_t *m)
{
    etcd_agent_t *a = arg;
    if (!a->lead_ready)
        return;
    if (m->canceled) {
        /* the revision to go on from was compacted away: start over from the state in etcd */
        progress(a, "rendezvous '%s': etcd compacted the records' history; reading the job's "
                    "state again", a->run_id);
        lead_stop(a);
        campaign(a);
        return;
    }
    for (size_t i = 0; i < m->n && a->lead_ready; i++)
        lead_record(a, &m->kvs[i], m->kvs[i].op == 1);
}

/* ---- taking over ---- */

static coord_member_t *resume_members(const etcd_state_t *st)
{
    coord_member_t *cm = calloc(st->n_members ? (size_t)st->n_members : 1, sizeof *cm);
    if (!cm)
        return NULL;
    for (int i = 0; i < st->n_members; i++) {
        cm[i].id = st->members[i].id;
        cm[i].d = st->members[i].d;
        cm[i].node_rank = st->members[i].node_rank;
    }
    return cm;
}

/* A running round's assignments again, for its live members: a close cut short between two
 * transactions leaves some unwritten (an agent takes only the first answer to its join). */
static void reput_assignments(etcd_agent_t *a)
{
    wbatch_t *b = wbatch_new();
    if (!b)
        return;
    for (int i = 0; i < a->st.n_members; i++) {
        const etcd_member_t *m = &a->st.members[i];
        uint64_t idn = strtoull(m->id, NULL, 16);
        int ix = u64map_get(&a->by_id, idn);
        lnode_t *n = ix >= 0 ? a->nodes[ix] : NULL;
        if (!n || !n->alive || n->join_k != m->join_k)
            continue;
        n->answered_k = m->join_k; /* answered now: not a join for the coordinator */
        rdzv_assignment_t as = {a->st.round,     m->node_rank,     a->st.nnodes,
                                m->rank_base,    a->st.world_size, a->st.restarts,
                                a->st.store_host, (uint16_t)a->st.store_port};
        char key[KEY_MAX], val[1024];
        rdzv_node_key(key, sizeof key, a->prefix, m->id, "assign", m->join_k);
        int len = rdzv_assign_encode(&as, val, sizeof val);
        if (len >= 0)
            wbatch_put(b, key, val, (size_t)len, n->lease ? n->lease : a->job_lease);
    }
    q_push(a, b);
}

/* The coordinator, resumed from the state read at the takeover; then what the records say
 * happened: joins not yet answered, reports, leaves, and members whose lease is gone. Then the
 * watch on the records, from the revision after the snapshot. */
static void lead_resume(etcd_agent_t *a)
{
    double now = podrun_time_epoch();
    coord_params_t cp = {
        .run_id = a->run_id,
        .min_nodes = a->p.min_nodes,
        .max_nodes = a->p.max_nodes,
        .segment_size = a->p.segment_size,
        .max_restarts = a->p.max_restarts,
        .join_timeout = a->p.join_timeout,
        .last_call_timeout = a->p.last_call_timeout,
        .close_timeout = a->p.close_timeout,
        .keep_alive_interval = SWEEP_OFF,
        .keep_alive_max_attempt = 1,
        .progress_interval = a->p.progress_interval,
        .store_host = "",
        .store_port = 0,
        .expected = a->expected,
    };
    a->coord = coord_new(&cp, now);
    if (!a->coord) {
        lead_fail(a, "cannot coordinate the job", "out of memory");
        return;
    }
    /* the agents as their keys say */
    for (size_t i = 0; i < a->n_snap; i++) {
        const snaprec_t *s = &a->snap[i];
        char ids[17], what[16];
        uint64_t idn;
        long num;
        lnode_t *n;
        if (parse_node_key(a, s->key, s->klen, ids, &idn, what, sizeof what, &num) < 0 ||
            !(n = lnode_get(a, ids, idn)))
            continue;
        if (strcmp(what, "alive") == 0) {
            n->alive = 1;
            n->lease = s->lease;
        } else if (strcmp(what, "join") == 0 && num >= 0) {
            lnode_join(n, (int)num, s->val, s->vlen, s->lease);
        } else if (strcmp(what, "assign") == 0 && num > n->answered_k) {
            n->answered_k = (int)num;
        }
    }
    etcd_state_t st;
    int have = a->snap_state &&
               etcd_state_decode(a->snap_state, a->snap_state_len, &st) == 0;
    if (a->snap_state && !have)
        progress(a, "rendezvous '%s': the job's state in etcd is unreadable; starting it anew",
                 a->run_id);
    if (have) {
        coord_member_t *cm = resume_members(&st);
        coord_resume_t rs = {st.round, st.phase, st.restarts, cm, st.n_members,
                             st.over_kind, st.over_text};
        int r = cm ? coord_resume(a->coord, &rs, now) : -ENOMEM;
        free(cm);
        if (r < 0) {
            progress(a, "rendezvous '%s': cannot resume the job's state (%s); starting it anew",
                     a->run_id, podrun_strerror(r));
            etcd_state_free(&st);
            coord_free(a->coord);
            a->coord = coord_new(&cp, now);
            if (!a->coord) {
                lead_fail(a, "cannot coordinate the job", "out of memory");
                return;
            }
        } else {
            a->st = st;
            a->st_valid = 1;
            progress(a, "rendezvous '%s': %s coordinates the job from round %d (%s, %d restart%s "
                        "used)", a->run_id, a->name, st.round,
                     st.phase == ETCD_PHASE_OPEN ? "open" : st.phase == ETCD_PHASE_RUNNING
                                                                ? "running" : "over",
                     st.restarts, st.restarts == 1 ? "" : "s");
            if (st.phase == ETCD_PHASE_RUNNING)
                reput_assignments(a);
        }
    }
    lead_actions(a);
    /* joins without an answer first, then what members reported, then the members gone */
    for (int pass = 0; pass < 2 && a->coord; pass++) {
        for (size_t i = 0; i < a->n_snap && a->coord; i++) {
            const snaprec_t *s = &a->snap[i];
            char ids[17], what[16];
            uint64_t idn;
            long num;
            if (parse_node_key(a, s->key, s->klen, ids, &idn, what, sizeof what, &num) < 0)
                continue;
            int ix = u64map_get(&a->by_id, idn);
            const lnode_t *n = ix >= 0 ? a->nodes[ix] : NULL;
            int is_join = strcmp(what, "join") == 0;
            if (pass == 0 && is_join && n && num == n->join_k && n->answered_k < num)
                feed_write(a, idn, s->key, s->klen, s->val, s->vlen);
            else if (pass == 1 && (strcmp(what, "fail") == 0 || strcmp(what, "done") == 0 ||
                                   strcmp(what, "leave") == 0 || strcmp(what, "peer") == 0))
                feed_write(a, idn, s->key, s->klen, s->val, s->vlen);
        }
    }
    for (int i = 0; a->coord && a->st_valid && i < a->st.n_members; i++) {
        uint64_t idn = strtoull(a->st.members[i].id, NULL, 16);
        int ix = u64map_get(&a->by_id, idn);
        if (ix < 0 || !a->nodes[ix]->alive)
            feed_close(a, idn);
    }
    if (!a->coord || !a->leading)
        return;
    char key[KEY_MAX], end[KEY_MAX];
    pkey(a, key, sizeof key, "n/");
    size_t el = etcd_prefix_end(key, strlen(key), end);
    etcd_watch_spec_t w = {key, strlen(key), end, el, a->snap_rev + 1, W_RECORDS};
    snap_free(a);
    int rc = etcd_watch_start(a->etcd, &w, 1, on_lead_watch, a, &a->lwatch);
    if (rc < 0) {
        lead_fail(a, "cannot watch the job's records in etcd", podrun_strerror(rc));
        return;
    }
    a->lead_ready = 1;
}

static void on_job_put(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->lcall = NULL;
    if (!a->leading)
        return;
    if (status != 0) {
        lead_fail(a, "etcd refused the job's lease key", r->error);
        return;
    }
    if (!r->succeeded) {
        lead_stop(a);
        return;
    }
    lead_resume(a);
}

/* The job lease exists now: its id goes under P job (while this agent leads). */
static void on_job_granted(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->lcall = NULL;
    if (!a->leading)
        return;
    if (status != 0 || r->id == 0) {
        lead_fail(a, "etcd refused the job's lease", status ? r->error : "no lease id");
        return;
    }
    a->job_lease = r->id;
    char lkey[KEY_MAX], jkey[KEY_MAX], val[32];
    pkey(a, lkey, sizeof lkey, "leader");
    pkey(a, jkey, sizeof jkey, "job");
    sfmt(val, sizeof val, "%" PRId64, a->job_lease);
    etcd_cmp_t cmp = cmp_create(lkey, a->lead_rev);
    etcd_op_t put = op_put(jkey, val, strlen(val), a->job_lease);
    int rc = etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, &put, 1, NULL, 0), 0, on_job_put,
                       a, &a->lcall);
    if (rc < 0)
        lead_fail(a, "cannot write the job's lease key", podrun_strerror(rc));
}

static int snap_add(etcd_agent_t *a, const etcd_kv_t *kv, size_t *cap)
{
    if (a->n_snap == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        snaprec_t *ns = realloc(a->snap, nc * sizeof *ns);
        if (!ns)
            return -ENOMEM;
        a->snap = ns;
        *cap = nc;
    }
    snaprec_t *s = &a->snap[a->n_snap];
    s->key = malloc(kv->klen + 1);
    s->val = malloc(kv->vlen + 1);
    if (!s->key || !s->val) {
        free(s->key);
        free(s->val);
        return -ENOMEM;
    }
    memcpy(s->key, kv->key, kv->klen + 1);
    memcpy(s->val, kv->value, kv->vlen + 1);
    s->klen = kv->klen;
    s->vlen = kv->vlen;
    s->lease = kv->lease;
    a->n_snap++;
    return 0;
}

/* The job as etcd has it, at one revision: the job lease, the state and every agent's records.
 * Without a job lease this is a new job: the lease comes first. */
static void on_snapshot(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->lcall = NULL;
    if (!a->leading)
        return;
    if (status != 0) {
        lead_fail(a, "cannot read the job's state from etcd", r->error);
        return;
    }
    if (!r->succeeded) { /* the leader key is no longer ours */
        lead_stop(a);
        return;
    }
    size_t cap = 0;
    int64_t job = 0;
    for (size_t i = 0; i < r->n; i++) {
        const etcd_kv_t *kv = &r->kvs[i];
        if (kv->op == 0) {
            char *end;
            long long v = strtoll(kv->value, &end, 10);
            job = *end || v <= 0 ? 0 : v;
        } else if (kv->op == 1) {
            free(a->snap_state);
            a->snap_state = malloc(kv->vlen + 1);
            if (a->snap_state) {
                memcpy(a->snap_state, kv->value, kv->vlen + 1);
                a->snap_state_len = kv->vlen;
            }
        } else if (snap_add(a, kv, &cap) < 0) {
            lead_fail(a, "cannot read the job's state from etcd", "out of memory");
            return;
        }
    }
    a->snap_rev = r->revision;
    if (job) {
        a->job_lease = job;
        lead_resume(a);
        return;
    }
    int64_t ttl = (int64_t)a->p.close_timeout;
    if (ttl < 3 * a->ttl)
        ttl = 3 * a->ttl;
    if (ttl < 10)
        ttl = 10;
    int rc = etcd_call(a->etcd, "lease/grant", etcd_req_lease_grant(ttl), 0, on_job_granted, a,
                       &a->lcall);
    if (rc < 0)
        lead_fail(a, "cannot ask etcd for the job's lease", podrun_strerror(rc));
}

/* This agent holds the leader key (created at revision rev): it reads the job and coordinates. */
static void lead_start(etcd_agent_t *a, int64_t rev)
{
    if (a->leading || a->closing)
        return;
    a->leading = 1;
    a->lead_rev = rev;
    char lkey[KEY_MAX], jkey[KEY_MAX], skey[KEY_MAX], nkey[KEY_MAX], nend[KEY_MAX];
    pkey(a, lkey, sizeof lkey, "leader");
    pkey(a, jkey, sizeof jkey, "job");
    pkey(a, skey, sizeof skey, "state");
    pkey(a, nkey, sizeof nkey, "n/");
    size_t el = etcd_prefix_end(nkey, strlen(nkey), nend);
    nend[el] = '\0';
    etcd_cmp_t cmp = cmp_create(lkey, rev);
    etcd_op_t ops[] = {op_range(jkey, NULL), op_range(skey, NULL), op_range(nkey, nend)};
    int rc = etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, ops, 3, NULL, 0), 0, on_snapshot,
                       a, &a->lcall);
    if (rc < 0)
        lead_fail(a, "cannot read the job's state from etcd", podrun_strerror(rc));
}

/* ================================================================================================
 * The agent side
 * ============================================================================================== */

/* Whether this node still takes part in choosing who coordinates. */
static int in_job(const etcd_agent_t *a)
{
    return !a->closing && !a->leaving && a->lease && a->state != AS_FINISHED &&
           a->state != AS_DEAD && !(a->state == AS_STOPPED && a->stop_action == RDZV_EXIT);
}

/* The leader part of an answer to an election transaction: ours (created now, or found with our
 * id after a retry) or someone else's; no leader at all means trying again. */
static void election_result(etcd_agent_t *a, const etcd_resp_t *r, int range_op)
{
    if (r->succeeded) {
        lead_start(a, r->revision);
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        const etcd_kv_t *kv = &r->kvs[i];
        if (kv->op != range_op)
            continue;
        if (kv->vlen == 16 && memcmp(kv->value, a->id, 16) == 0)
            lead_start(a, kv->create_rev);
        return;
    }
    campaign(a); /* the key went between the comparison and the read */
}

static void on_campaign(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->campaign_call = NULL;
    if (!in_job(a))
        return;
    if (status != 0) {
        agent_fail(a, PODRUN_ESTORELOST, r->error);
        return;
    }
    election_result(a, r, 0);
}

/* Tries to become the leader: creates P leader with this agent's lease unless it exists. */
static void campaign(etcd_agent_t *a)
{
    if (a->campaign_call || a->leading || !in_job(a))
        return;
    char lkey[KEY_MAX];
    pkey(a, lkey, sizeof lkey, "leader");
    etcd_cmp_t cmp = cmp_create(lkey, 0);
    etcd_op_t ok = op_put(lkey, a->id, 16, a->lease), fail = op_range(lkey, NULL);
    etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, &ok, 1, &fail, 1), 0, on_campaign, a,
              &a->campaign_call);
}

/* The end record of the running round: finished, or the job's stop decision. */
static void process_end(etcd_agent_t *a, const char *val, size_t len)
{
    rdzv_failure_t failures[RDZV_MAX_FAILURES];
    rdzv_decision_t d;
    int r = rdzv_end_decode(val, len, &d, failures);
    if (r < 0) {
        agent_fail(a, PODRUN_ESTORELOST, "unreadable end-of-round record in etcd");
        return;
    }
    if (r == 1) {
        a->state = AS_FINISHED;
        uv_timer_stop(&a->prog_timer);
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

/* An answer to one of this node's joins: an assignment (start the workers: RUNNING) or an error
 * that ends this node's part ("finished" is not one). */
static void on_assign_kv(etcd_agent_t *a, const etcd_kv_t *kv)
{
    char ids[17], what[16];
    uint64_t idn;
    long k;
    if (kv->op == 1 || a->state != AS_JOINING ||
        parse_node_key(a, kv->key, kv->klen, ids, &idn, what, sizeof what, &k) < 0 ||
        idn != a->idn || strcmp(what, "assign") != 0 || k != a->join_k)
        return;
    rdzv_assignment_t as;
    char host[RDZV_NAME_MAX], err[32], text[RDZV_LINE_MAX];
    if (rdzv_assign_decode(kv->value, kv->vlen, &as, host, sizeof host, err, sizeof err, text,
                           sizeof text) < 0) {
        agent_fail(a, PODRUN_ESTORELOST, "unreadable assignment in etcd");
        return;
    }
    if (err[0]) {
        if (strcmp(err, "finished") == 0) {
            a->state = AS_FINISHED;
            uv_timer_stop(&a->prog_timer);
            progress(a, "%s", text);
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
    /* a fresh namespace for this attempt's workers, should this node's store serve them */
    store_server_delete_except(a->server, "podrun/");
    if (a->cb.assigned)
        a->cb.assigned(a->arg, &as);
    if (a->state == AS_RUNNING && a->end_round == a->round && a->end_val)
        process_end(a, a->end_val, a->end_len);
}

/* A round's end record. The latest is kept: it may arrive before this node's assignment. */
static void on_end_kv(etcd_agent_t *a, const etcd_kv_t *kv)
{
    char rest[64];
    size_t rl = kv->klen - a->plen;
    long r;
    if (kv->op == 1 || kv->klen <= a->plen + 2 || rl >= sizeof rest)
        return;
    memcpy(rest, kv->key + a->plen, rl);
    rest[rl] = '\0';
    char *slash = strchr(rest + 2, '/');
    if (strncmp(rest, "r/", 2) != 0 || !slash || strcmp(slash, "/end") != 0)
        return;
    *slash = '\0';
    if (podrun_parse_int(rest + 2, 0, 1L << 30, &r) < 0 || r < a->end_round)
        return;
    char *v = malloc(kv->vlen + 1);
    if (!v)
        return;
    memcpy(v, kv->value, kv->vlen + 1);
    free(a->end_val);
    a->end_val = v;
    a->end_len = kv->vlen;
    a->end_round = (int)r;
    if (a->state == AS_RUNNING && (int)r == a->round)
        process_end(a, v, kv->vlen);
}

static void start_watch(etcd_agent_t *a);

/* What the watch may have missed while its history was compacted: the answer to this node's
 * join, its round's end, the leader key. Read like watch events, after watching again. */
static void on_sync(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->sync_call = NULL;
    if (a->closing || status != 0)
        return;
    int leader = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->kvs[i].op == 0)
            on_assign_kv(a, &r->kvs[i]);
        else if (r->kvs[i].op == 1)
            on_end_kv(a, &r->kvs[i]);
        else
            leader = 1;
    }
    if (!leader)
        campaign(a);
}

static void resync(etcd_agent_t *a)
{
    progress(a, "rendezvous '%s': etcd compacted the history this node was watching; reading "
                "it again", a->run_id);
    etcd_watch_cancel(a->watch);
    a->watch = NULL;
    a->created = 0;
    start_watch(a);
    char akey[KEY_MAX], ekey[KEY_MAX], lkey[KEY_MAX];
    rdzv_node_key(akey, sizeof akey, a->prefix, a->id, "assign", a->join_k);
    sfmt(ekey, sizeof ekey, "%sr/%d/end", a->prefix, a->round);
    pkey(a, lkey, sizeof lkey, "leader");
    etcd_op_t ops[] = {op_range(akey, NULL), op_range(ekey, NULL), op_range(lkey, NULL)};
    etcd_call_cancel(a->sync_call);
    etcd_call(a->etcd, "kv/txn", etcd_req_txn(NULL, 0, ops, 3, NULL, 0), 0, on_sync, a,
              &a->sync_call);
}

static void send_hello(etcd_agent_t *a);

/* This node's stream: answers to its joins, round ends, the leader key. */
static void on_agent_watch(void *arg, const etcd_resp_t *m)
{
    etcd_agent_t *a = arg;
    if (a->closing)
        return;
    if (m->canceled) {
        resync(a);
        return;
    }
    if (m->created) {
        if (m->watch_id > 0 && m->watch_id < 8)
            a->created |= 1 << m->watch_id;
        int all = 1 << W_ASSIGN | 1 << W_END | 1 << W_LEADER;
        if ((a->created & all) == all && a->state == AS_STARTING)
            send_hello(a);
        return;
    }
    for (size_t i = 0; i < m->n && !a->closing; i++) {
        const etcd_kv_t *kv = &m->kvs[i];
        if (m->watch_id == W_ASSIGN)
            on_assign_kv(a, kv);
        else if (m->watch_id == W_END)
            on_end_kv(a, kv);
        else if (m->watch_id == W_LEADER && kv->op == 1)
            campaign(a);
    }
}

static void start_watch(etcd_agent_t *a)
{
    char akey[KEY_MAX], aend[KEY_MAX], rkey[KEY_MAX], rend[KEY_MAX], lkey[KEY_MAX];
    rdzv_node_key(akey, sizeof akey, a->prefix, a->id, "assign", -1);
    sfmt(akey + strlen(akey), sizeof akey - strlen(akey), "/");
    size_t ael = etcd_prefix_end(akey, strlen(akey), aend);
    pkey(a, rkey, sizeof rkey, "r/");
    size_t rel = etcd_prefix_end(rkey, strlen(rkey), rend);
    pkey(a, lkey, sizeof lkey, "leader");
    etcd_watch_spec_t w[] = {
        {akey, strlen(akey), aend, ael, 0, W_ASSIGN},
        {rkey, strlen(rkey), rend, rel, 0, W_END},
        {lkey, strlen(lkey), NULL, 0, 0, W_LEADER},
    };
    int rc = etcd_watch_start(a->etcd, w, 3, on_agent_watch, a, &a->watch);
    if (rc < 0)
        agent_fail(a, PODRUN_ESTORELOST, "cannot watch etcd");
}

/* The join record's value: the descriptor and where this node's store listens. */
static int join_value(etcd_agent_t *a, char *val, size_t cap)
{
    rdzv_desc_rec_t d;
    memset(&d, 0, sizeof d);
    sfmt(d.name, sizeof d.name, "%s", a->name);
    sfmt(d.addr, sizeof d.addr, "%s", a->addr);
    sfmt(d.host, sizeof d.host, "%s", a->hostname);
    d.nproc = a->nproc;
    d.service = a->service;
    sfmt(d.domain, sizeof d.domain, "%s", a->domain);
    d.want_rank = a->p.want_rank;
    d.pid = (int)getpid();
    int len = rdzv_desc_encode(&d, val, cap);
    if (len < 0)
        return len;
    kvbuf_t b = {val, cap, (size_t)len, 0};
    kv_add_int(&b, "store_port", a->sport);
    return b.overflow ? -ENOSPC : (int)b.len;
}

static void on_hello(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->hello_call = NULL;
    if (a->closing)
        return;
    if (status != 0) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': etcd refused this node's join: %s", a->run_id,
             r->error);
        agent_fail(a, PODRUN_ESTORELOST, why);
        return;
    }
    if (in_job(a))
        election_result(a, r, 2);
}

/* The first words of this node, in one transaction: its alive key, its join and — if nobody
 * coordinates yet — the leader key. */
static void send_hello(etcd_agent_t *a)
{
    char lkey[KEY_MAX], alive[KEY_MAX], jkey[KEY_MAX], val[1024];
    pkey(a, lkey, sizeof lkey, "leader");
    rdzv_node_key(alive, sizeof alive, a->prefix, a->id, "alive", -1);
    rdzv_node_key(jkey, sizeof jkey, a->prefix, a->id, "join", a->join_k);
    int len = join_value(a, val, sizeof val);
    if (len < 0) {
        agent_fail(a, PODRUN_ESTORELOST, "this node's descriptor does not fit a record");
        return;
    }
    a->state = AS_JOINING;
    etcd_cmp_t cmp = cmp_create(lkey, 0);
    etcd_op_t ok[] = {op_put(lkey, a->id, 16, a->lease),
                      op_put(alive, a->name, strlen(a->name), a->lease),
                      op_put(jkey, val, (size_t)len, a->lease)};
    etcd_op_t fail[] = {ok[1], ok[2], op_range(lkey, NULL)};
    int rc = etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, ok, 3, fail, 3), 0, on_hello, a,
                       &a->hello_call);
    if (rc < 0)
        agent_fail(a, PODRUN_ESTORELOST, "cannot send the join to etcd");
}

/* While etcd does not answer, in any state: what fails and how long this node goes on trying,
 * after 1 s and then every progress_interval. */
static void say_failing(etcd_agent_t *a, int64_t failing, const char *why)
{
    int64_t now = podrun_time_mono_ms();
    if (failing < 1000) {
        a->said_failing = 0;
        return;
    }
    if (a->said_failing && now - a->said_failing < (int64_t)(a->p.progress_interval * 1000))
        return;
    a->said_failing = now;
    char left[32];
    podrun_format_duration(a->p.read_timeout - (double)failing / 1000, left, sizeof left);
    progress(a, "rendezvous '%s': etcd is not answering (%s); retrying for %s more", a->run_id,
             why, left);
}

static void on_ka(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->ka_call = NULL;
    if (a->closing)
        return;
    if (status != 0 || r->ttl <= 0) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': this node's etcd lease has expired (etcd was out "
             "of reach for longer than its %d s): the job has counted it as lost", a->run_id,
             a->ttl);
        lead_stop(a);
        agent_fail(a, PODRUN_ESTORELOST, why);
    }
}

static void on_jka(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->jka_call = NULL;
    if (a->leading && (status != 0 || r->ttl <= 0))
        lead_fail(a, "the job's keys in etcd have expired", "its lease is gone");
}

/* Every keep_alive_interval: this node's lease (and the job's, while it leads) is renewed, and
 * etcd's health checked: nothing answered for read_timeout ends this node's part. */
static void on_ka_timer(uv_timer_t *t)
{
    etcd_agent_t *a = t->data;
    char why[320];
    int64_t failing = etcd_client_failing_ms(a->etcd, why, sizeof why);
    say_failing(a, failing, why);
    const char *ep = etcd_client_endpoint(a->etcd);
    if (strcmp(ep, a->endpoint) != 0 && !failing) {
        /* a member failed and another answers: worth one line, nothing else changes */
        if (a->endpoint[0])
            progress(a, "rendezvous '%s': going on with etcd at %s (%s)", a->run_id, ep,
                     etcd_client_last_error(a->etcd));
        sfmt(a->endpoint, sizeof a->endpoint, "%s", ep);
    }
    if (failing > (int64_t)(a->p.read_timeout * 1000) && !a->closing) {
        char line[RDZV_LINE_MAX], took[32];
        podrun_format_duration(a->p.read_timeout, took, sizeof took);
        sfmt(line, sizeof line, "rendezvous '%s': etcd did not answer for %s (%s); this node "
             "gives up", a->run_id, took, why);
        lead_stop(a);
        agent_fail(a, PODRUN_ESTORELOST, line);
        return;
    }
    if (a->lease && !a->ka_call)
        etcd_call(a->etcd, "lease/keepalive", etcd_req_lease_id(a->lease), 0, on_ka, a,
                  &a->ka_call);
    if (a->leading && a->job_lease && !a->jka_call)
        etcd_call(a->etcd, "lease/keepalive", etcd_req_lease_id(a->job_lease), 0, on_jka, a,
                  &a->jka_call);
}

static void on_granted(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->hello_call = NULL;
    if (a->closing)
        return;
    if (status != 0 || r->id == 0) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': etcd refused a lease: %s", a->run_id,
             status ? r->error : "no lease id");
        agent_fail(a, PODRUN_ESTORELOST, why);
        return;
    }
    a->lease = r->id;
    if (r->ttl > 0)
        a->ttl = (int)r->ttl;
    start_watch(a);
}

static void on_status(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->status_call = NULL;
    if (a->closing || status != 0 || a->state != AS_JOINING || a->leading || r->n == 0)
        return;
    progress(a, "%.*s", (int)(r->kvs[0].vlen < RDZV_LINE_MAX ? r->kvs[0].vlen : RDZV_LINE_MAX - 1),
             r->kvs[0].value);
}

/* A progress line while waiting: the coordinator's status while joining (the leader has the
 * coordinator's own lines); while etcd does not answer, say_failing speaks instead. */
static void on_prog_timer(uv_timer_t *t)
{
    etcd_agent_t *a = t->data;
    if (etcd_client_failing_ms(a->etcd, NULL, 0) >= 1000)
        return;
    if (a->state == AS_STARTING) {
        progress(a, "rendezvous '%s': waiting for etcd at %s", a->run_id,
                 etcd_client_endpoint(a->etcd));
    } else if (a->state == AS_JOINING && !a->leading && !a->status_call) {
        char key[KEY_MAX];
        pkey(a, key, sizeof key, "status");
        etcd_op_t op = op_range(key, NULL);
        etcd_call(a->etcd, "kv/range", etcd_req_op(&op), 0, on_status, a, &a->status_call);
    }
}

static void start_progress(etcd_agent_t *a)
{
    uint64_t pi = (uint64_t)(a->p.progress_interval * 1000);
    uv_timer_start(&a->prog_timer, on_prog_timer, pi < 1000 ? pi : 1000, pi);
}

static void on_store_log(void *arg, const char *line)
{
    etcd_agent_t *a = arg;
    if (a->cb.store_log)
        a->cb.store_log(a->arg, line);
}

static int copy_str(char **dst, const char *src)
{
    *dst = NULL;
    if (!src || !*src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

/* The lease's ttl: keep_alive_interval x keep_alive_max_attempt, rounded up, at least 2 s
 * (etcd's own floor with its default timings). */
static int lease_ttl(const rdzv_params_t *p)
{
    double s = p->keep_alive_interval * p->keep_alive_max_attempt;
    int ttl = (int)s;
    if (ttl < s)
        ttl++;
    return ttl < 2 ? 2 : ttl;
}

static void etcd_close(rdzv_agent_t *base, void (*closed)(void *), void *arg);

/* Starts an agent: this node's store listens now (so a taken port is this call's error), the
 * lease is asked for, and the rest follows from the loop (on_granted, the watch, the join). */
static int etcd_start(uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                      const rdzv_callbacks_t *cb, void *arg, rdzv_agent_t **out)
{
    if (!p->endpoints || !*p->endpoints)
        return -EINVAL;
    etcd_agent_t *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->base.backend = &rdzv_backend_etcd;
    a->loop = loop;
    a->p = *p;
    a->cb = *cb;
    a->arg = arg;
    a->nproc = self->nproc;
    a->service = self->service;
    sfmt(a->domain, sizeof a->domain, "%s", self->domain ? self->domain : "");
    a->node_rank = -1;
    a->end_round = -1;
    a->closing = 2; /* until started: agent_free alone */
    if (copy_str(&a->run_id, p->run_id) || copy_str(&a->local_addr, p->local_addr) ||
        copy_str(&a->expected, p->expected) || copy_str(&a->cacert, p->etcd_cacert) ||
        copy_str(&a->cert, p->etcd_cert) || copy_str(&a->key, p->etcd_key)) {
        agent_free(a);
        return -ENOMEM;
    }
    a->p.run_id = a->run_id;
    char err[256];
    a->n_ep = etcd_endpoints_parse(p->endpoints, a->cacert || a->cert, a->ep, ETCD_MAX_ENDPOINTS,
                                   err, sizeof err);
    if (a->n_ep < 0) {
        agent_free(a);
        return -EINVAL;
    }
    podrun_hostname(a->hostname, sizeof a->hostname);
    sfmt(a->name, sizeof a->name, "%s", self->name && *self->name ? self->name : a->hostname);
    sfmt(a->addr, sizeof a->addr, "%s",
         self->addr && *self->addr ? self->addr : a->local_addr ? a->local_addr : a->name);
    podrun_random_id(a->id, 16);
    a->idn = strtoull(a->id, NULL, 16);
    sfmt(a->prefix, sizeof a->prefix, "podrun/%s/", a->run_id);
    a->plen = strlen(a->prefix);
    a->ttl = lease_ttl(&a->p);

    podrun_log_t log = {on_store_log, a};
    int rc = store_server_start(loop, a->local_addr, p->store_port, NULL, &log, &a->server);
    if (rc < 0) {
        a->server = NULL;
        agent_free(a);
        return rc;
    }
    a->sport = store_server_port(a->server);
    store_server_allow(a->server, p->allow); /* the workers' store: the same sources */
    double tmo = a->ttl < a->p.read_timeout ? a->ttl : a->p.read_timeout;
    etcd_client_conf_t conf = {
        .endpoints = a->ep,
        .n_endpoints = a->n_ep,
        .first = (int)(a->idn % (uint64_t)a->n_ep),
        .cacert = a->cacert,
        .cert = a->cert,
        .key = a->key,
        .timeout_ms = tmo < 1 ? 1000 : (int)(tmo * 1000),
    };
    rc = etcd_client_new(loop, &conf, &a->etcd);
    if (rc < 0) {
        store_server_close(a->server, NULL, NULL);
        a->server = NULL;
        agent_free(a);
        return rc;
    }
    /* the member this node starts with: a switch away from it, however early, is said */
    sfmt(a->endpoint, sizeof a->endpoint, "%s", etcd_client_endpoint(a->etcd));
    a->closing = 0;
    timer_init(a, &a->ka_timer);
    timer_init(a, &a->prog_timer);
    timer_init(a, &a->defer_timer);
    timer_init(a, &a->close_timer);
    for (int i = 0; i < COORD_T_COUNT; i++)
        timer_init(a, &a->ctimer[i]);
    rc = etcd_call(a->etcd, "lease/grant", etcd_req_lease_grant(a->ttl), 0, on_granted, a,
                   &a->hello_call);
    if (rc < 0) {
        etcd_close(&a->base, NULL, NULL);
        return rc;
    }
    /* the keep-alive tick also bounds how long etcd may fail, from the very start */
    uint64_t ms = (uint64_t)(a->p.keep_alive_interval * 1000);
    uv_timer_start(&a->ka_timer, on_ka_timer, ms, ms);
    start_progress(a);
    *out = &a->base;
    return 0;
}

/* The record goes out with this node's lease; its name, address and the time fill what the
 * caller left out. Only while a round runs or has just stopped. */
static int etcd_report_failure(rdzv_agent_t *base, const rdzv_failure_t *f)
{
    etcd_agent_t *a = (etcd_agent_t *)base;
    if (a->state != AS_RUNNING && a->state != AS_STOPPED)
        return -EINVAL;
    char key[KEY_MAX], val[2048];
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
    rdzv_node_key(key, sizeof key, a->prefix, a->id, "fail", a->round);
    return put_record(a, key, val, (size_t)len, NULL);
}

static int etcd_report_done(rdzv_agent_t *base)
{
    etcd_agent_t *a = (etcd_agent_t *)base;
    if (a->state != AS_RUNNING)
        return -EINVAL;
    char key[KEY_MAX];
    rdzv_node_key(key, sizeof key, a->prefix, a->id, "done", a->round);
    return put_record(a, key, "1", 1, NULL);
}

/* Another node of the running round is gone as this node's discovery saw it: a record with this
 * node's lease, which the coordinator matches against the round's members (as with c10d). */
static int etcd_report_peer_lost(rdzv_agent_t *base, const char *name, const char *addr,
                                 const char *reason)
{
    etcd_agent_t *a = (etcd_agent_t *)base;
    if (a->state != AS_RUNNING)
        return -EINVAL;
    char key[KEY_MAX], val[1024];
    kvbuf_t b;
    kv_init(&b, val, sizeof val);
    kv_add(&b, "name", name, RDZV_NAME_MAX - 1);
    kv_add(&b, "addr", addr, RDZV_NAME_MAX - 1);
    kv_add(&b, "reason", reason, RDZV_REASON_MAX - 1);
    rdzv_node_key(key, sizeof key, a->prefix, a->id, "peer", a->round);
    return put_record(a, key, val, b.len, NULL);
}

static void leave_done(etcd_agent_t *a)
{
    void (*sent)(void *) = a->leave_sent;
    a->leave_sent = NULL;
    if (sent)
        sent(a->leave_arg);
}

static void on_left(void *arg, int status, const etcd_resp_t *r)
{
    (void)status, (void)r;
    leave_done(arg);
}

static void on_defer(uv_timer_t *t)
{
    leave_done(t->data);
}

/* The leave record goes out if this node has a lease to write it with; `sent` runs once etcd
 * has it, or from the loop at once when it cannot be written (never from inside this call). */
static int etcd_leave(rdzv_agent_t *base, const char *reason, void (*sent)(void *), void *arg)
{
    etcd_agent_t *a = (etcd_agent_t *)base;
    if (a->leaving || a->closing)
        return -EALREADY;
    a->leaving = 1;
    a->leave_sent = sent;
    a->leave_arg = arg;
    char key[KEY_MAX], val[RDZV_REASON_MAX];
    sfmt(val, sizeof val, "%s", reason ? reason : "shutting down");
    rdzv_node_key(key, sizeof key, a->prefix, a->id, "leave", -1);
    if (a->lease && a->state != AS_DEAD && put_record(a, key, val, strlen(val), on_left) == 0)
        return 0;
    uv_timer_start(&a->defer_timer, on_defer, 0, 0);
    return 0;
}

/* The next join (k+1) of a stopped agent: a fresh answer key. */
static int etcd_rejoin(rdzv_agent_t *base)
{
    etcd_agent_t *a = (etcd_agent_t *)base;
    if (a->state != AS_STOPPED || a->stop_action != RDZV_RESTART || a->closing || a->leaving)
        return -EINVAL;
    char key[KEY_MAX], val[1024];
    int len = join_value(a, val, sizeof val);
    if (len < 0)
        return len;
    a->join_k++;
    a->state = AS_JOINING;
    rdzv_node_key(key, sizeof key, a->prefix, a->id, "join", a->join_k);
    return put_record(a, key, val, (size_t)len, NULL);
}

/* ---- closing ---- */

/* The end: no more callbacks from etcd; the store and the timers close; the agent is freed and
 * `closed` runs once they have. */
static void teardown(etcd_agent_t *a)
{
    if (a->closing == 2)
        return;
    lead_stop(a);
    a->closing = 2;
    etcd_client_close(a->etcd);
    a->etcd = NULL;
    uv_timer_t *ts[] = {&a->ka_timer, &a->prog_timer, &a->defer_timer, &a->close_timer};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        uv_close((uv_handle_t *)ts[i], on_handle_closed);
    for (int i = 0; i < COORD_T_COUNT; i++)
        uv_close((uv_handle_t *)&a->ctimer[i], on_handle_closed);
    if (a->server)
        store_server_close(a->server, on_server_closed, a);
    else
        maybe_free(a);
}

/* The bound on a closing step ran out: waiting for the others or for the queue ends with the
 * lease's revocation, which itself ends with the teardown. */
static void on_close_timer(uv_timer_t *t)
{
    etcd_agent_t *a = t->data;
    if (a->closing == 1 && !a->revoking)
        close_finish(a);
    else
        teardown(a);
}

static void on_revoked(void *arg, int status, const etcd_resp_t *r)
{
    (void)status, (void)r;
    teardown(arg);
}

/* The last step: this node's lease is revoked, which removes its keys (and the leader key, if
 * it led) at once; bounded by CLOSE_BOUND_MS whatever etcd does. */
static void close_finish(etcd_agent_t *a)
{
    if (a->closing != 1 || a->revoking)
        return;
    a->flushing = 0;
    a->revoking = 1;
    lead_stop(a);
    uv_timer_stop(&a->ka_timer);
    uv_timer_stop(&a->prog_timer);
    etcd_call_cancel(a->ka_call);
    a->ka_call = NULL;
    if (!a->lease) {
        teardown(a);
        return;
    }
    uv_timer_start(&a->close_timer, on_close_timer, CLOSE_BOUND_MS, 0);
    if (etcd_call(a->etcd, "lease/revoke", etcd_req_lease_id(a->lease), ETCD_CALL_ONCE,
                  on_revoked, a, NULL) < 0)
        teardown(a);
}

/* Closes the agent. A leader whose job is over first waits (bounded by close_timeout) until
 * every other agent is gone, then removes the job's keys; a leader of a job that goes on writes
 * what it has queued (bounded) and lets another node take over. Then this node's lease goes. */
static void etcd_close(rdzv_agent_t *base, void (*closed)(void *), void *arg)
{
    etcd_agent_t *a = (etcd_agent_t *)base;
    if (a->closing)
        return;
    a->closing = 1;
    a->closed = closed;
    a->closed_arg = arg;
    uv_timer_stop(&a->prog_timer);
    uv_timer_stop(&a->defer_timer);
    etcd_watch_cancel(a->watch);
    a->watch = NULL;
    coord_info_t info;
    if (a->lead_ready && a->coord && (coord_info(a->coord, &info), info.phase == COORD_OVER) &&
        a->state != AS_DEAD) {
        a->cleaning = 1;
        uv_timer_start(&a->close_timer, on_close_timer,
                       (uint64_t)(a->p.close_timeout * 1000) + CLOSE_BOUND_MS, 0);
        feed_close(a, a->idn);
        coord_shutdown(a->coord, podrun_time_epoch());
        lead_actions(a); /* COORD_CLOSED queues the removal of the job's keys */
        return;
    }
    if (a->leading && (a->q_head || a->lcall) && a->state != AS_DEAD) {
        a->flushing = 1;
        uv_timer_start(&a->close_timer, on_close_timer, CLOSE_BOUND_MS, 0);
        return;
    }
    close_finish(a);
}

static uint16_t etcd_store_port(const rdzv_agent_t *base)
{
    return ((const etcd_agent_t *)base)->sport;
}

const rdzv_backend_t rdzv_backend_etcd = {
    .name = "etcd",
    .start = etcd_start,
    .report_failure = etcd_report_failure,
    .report_done = etcd_report_done,
    .report_peer_lost = etcd_report_peer_lost,
    .leave = etcd_leave,
    .rejoin = etcd_rejoin,
    .close = etcd_close,
    .store_port = etcd_store_port,
};
