/* rdzv/etcd_leader.c — coordinating the job through etcd (the design: backend_etcd.c's top).
 * The agent that holds P leader reads the job at one revision (the job lease, the state, every
 * agent's records), resumes the coordinator from the state, feeds it what the records say
 * happened, then watches the records; the coordinator's writes go out in order, one transaction
 * at a time, each holding only while this agent still holds the leader key, the state first. */
#include "rdzv/backend_etcd_int.h"
#include "rdzv/status.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void q_run(etcd_agent_t *a);

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
void etcd_leader_stop(etcd_agent_t *a)
{
    if (!a->leading && !a->host.coord && !a->nodes)
        return;
    a->leading = a->lead_ready = a->cleaning = 0;
    etcd_call_cancel(a->lcall);
    a->lcall = NULL;
    etcd_call_cancel(a->jka_call);
    a->jka_call = NULL;
    etcd_call_cancel(a->view_call);
    a->view_call = NULL;
    a->view_over = 0;
    etcd_watch_cancel(a->lwatch);
    a->lwatch = NULL;
    host_stop(&a->host);
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
void etcd_leader_fail(etcd_agent_t *a, const char *what, const char *why)
{
    char line[RDZV_LINE_MAX];
    sfmt(line, sizeof line, "rendezvous '%s': %s: %s", a->m.run_id, what, why);
    member_progress(&a->m, "%s", line);
    etcd_leader_stop(a);
    etcd_agent_fail(a, PODRUN_ESTORELOST, line);
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
    etcd_agent_close_finish(a);
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
        etcd_leader_fail(a, "etcd refused the job's records", r->error);
        return;
    }
    if (!r->succeeded) {
        member_progress(&a->m, "rendezvous '%s': %s no longer holds the leader key; another node "
                    "coordinates the job", a->m.run_id, a->m.name);
        etcd_leader_stop(a);
        if (a->flushing)
            etcd_agent_close_finish(a);
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
            etcd_agent_close_finish(a);
        return;
    }
    q_run(a);
    if (a->flushing && !a->q_head && !a->lcall)
        etcd_agent_close_finish(a);
}

/* Sends the head of the queue, if nothing is in flight: one transaction that holds only while
 * this agent's leader key is the one it created. */
static void q_run(etcd_agent_t *a)
{
    wbatch_t *b = a->q_head;
    if (a->lcall || !b || !a->leading)
        return;
    char lkey[KEY_MAX];
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    etcd_cmp_t cmp = etcd_agent_cmp_create(lkey, a->lead_rev);
    char *body;
    if (b->cleanup) {
        char end[256];
        size_t el = etcd_prefix_end(a->m.prefix, a->m.plen, end);
        etcd_op_t del = {ETCD_OP_DELETE, a->m.prefix, a->m.plen, end, el, NULL, 0, 0};
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
        etcd_leader_fail(a, "could not write the job's records to etcd", podrun_strerror(rc));
}

/* ---- the coordinator's actions ---- */

/* The node an assign key is for, and the join it answers. NULL for other keys. */
static lnode_t *assign_target(etcd_agent_t *a, const char *key, long *k)
{
    char ids[17], what[16];
    uint64_t idn;
    if (etcd_agent_parse_key(a, key, strlen(key), ids, &idn, what, sizeof what, k) < 0 ||
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
    coord_info(a->host.coord, &info);
    int new_members = ns->n_members > 0;
    if (a->st_valid && !new_members && a->st.round == info.round && a->st.phase == info.phase &&
        a->st.restarts == info.restarts_used && a->st.n_bad == info.n_bad &&
        memcmp(a->st.bad, info.bad, (size_t)info.n_bad * sizeof *info.bad) == 0 &&
        (info.phase != COORD_OVER ||
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
    a->st.n_bad = info.n_bad;
    memcpy(a->st.bad, info.bad, (size_t)info.n_bad * sizeof *info.bad);
    sfmt(a->st.over_kind, sizeof a->st.over_kind, "%s", info.over_kind);
    sfmt(a->st.over_text, sizeof a->st.over_text, "%s", info.over_text);
    a->st_valid = 1;
    char *val;
    size_t len;
    if (etcd_state_encode(&a->st, &val, &len) < 0)
        return;
    char key[KEY_MAX];
    etcd_agent_key(a, key, sizeof key, "state");
    /* first: a round's close may take several transactions, and the state must lead them */
    if (wbatch_put(b, key, val, len, a->job_lease) == 0) {
        wput_t st = b->puts[b->n - 1];
        memmove(b->puts + 1, b->puts, (b->n - 1) * sizeof *b->puts);
        b->puts[0] = st;
    }
    free(val);
}

static void on_view_written(void *arg, int status, const etcd_resp_t *r)
{
    (void)status, (void)r;   /* the next keep_alive_interval writes it again */
    ((etcd_agent_t *)arg)->view_call = NULL;
}

/* The job's state record (rdzv/status.h) for `podrun status`, under P view with the job lease,
 * as the store host keeps it under P state: the round, the nodes with their ranks and health
 * checks, the restarts, the last root cause. A node whose lease is alive has its heartbeat now:
 * here etcd's lease is the heartbeat, which the coordinator does not see. One write in flight;
 * a failed one waits for the next keep_alive_interval. */
static void publish_view(etcd_agent_t *a)
{
    if (!a->lead_ready || !a->host.coord || !a->job_lease || a->view_call || a->view_over)
        return;
    double now = podrun_time_epoch();
    char key[KEY_MAX];
    coord_info_t info;
    coord_info(a->host.coord, &info);
    /* a write makes its node connected again: not once the job is over, when the close counts
     * the agents out (its own first) */
    for (size_t i = 0; i < a->n_nodes && info.phase != COORD_OVER && !a->cleaning; i++) {
        const lnode_t *n = a->nodes[i];
        if (!n->alive || !n->has_desc)
            continue;
        sfmt(key, sizeof key, "%sn/%s/hb", a->m.prefix, n->id);
        coord_on_write(a->host.coord, n->idn, key, strlen(key), NULL, 0, now);
    }
    size_t cap = (size_t)info.members + (size_t)info.joined + (size_t)info.waiting + 64;
    rdzv_status_node_t *nodes = malloc(cap * sizeof *nodes);
    if (!nodes)
        return;
    rdzv_status_t st;
    coord_state(a->host.coord, now, &st, nodes, cap);
    a->view_round = info.round;
    a->view_phase = info.phase;
    char *text = NULL;
    long len = rdzv_status_encode(&st, 1u << 20, &text);   /* etcd takes requests to 1.5 MiB */
    free(nodes);
    if (len < 0)
        return;
    etcd_agent_key(a, key, sizeof key, RDZV_ETCD_STATUS_KEY);
    etcd_op_t op = etcd_agent_op_put(key, text, (size_t)len, a->job_lease);
    etcd_call(a->etcd, "kv/put", etcd_req_op(&op), 0, on_view_written, a, &a->view_call);
    free(text);
}

/* The coordinator's writes of one pass (host.h, apply) become one queued batch, the
 * assignments naming their round's store; the workers' fresh namespace is each agent's own
 * business here (it empties its store when assigned). */
static void lead_apply(void *arg, const coord_action_t *acts, size_t n, int over)
{
    (void)over;
    etcd_agent_t *a = arg;
    wbatch_t *b = wbatch_new();
    if (!b) {
        etcd_leader_fail(a, "cannot coordinate the job", "out of memory");
        return;
    }
    lnode_t *r0 = rank0_of(a, acts, n);
    etcd_state_t ns;
    memset(&ns, 0, sizeof ns);
    int mcap = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const coord_action_t *x = &acts[i];
        long k;
        lnode_t *t;
        if (x->kind != COORD_SET)
            continue; /* COORD_DELETE_WORKERS: every agent empties its own store when assigned */
        if ((t = assign_target(a, x->key, &k)))
            bad |= apply_assign(a, b, x, t, k, r0, &ns, &mcap) < 0;
        else
            bad |= wbatch_put(b, x->key, x->val, x->vlen, a->job_lease) < 0;
    }
    if (r0 && !r0->sport)
        member_progress(&a->m, "rendezvous '%s': node rank 0 (%s) did not say where its store "
                        "listens", a->m.run_id, r0->d.name);
    if (bad) {
        etcd_state_free(&ns);
        wbatch_free(b);
        etcd_leader_fail(a, "cannot coordinate the job", "out of memory");
        return;
    }
    state_update(a, b, &ns);
    q_push(a, b);
    if (a->st.round != a->view_round || a->st.phase != a->view_phase)
        publish_view(a);
}

static void lead_log(void *arg, const char *line)
{
    etcd_agent_t *a = arg;
    member_progress(&a->m, "%s", line);
}

/* The job is over and every other agent gone: its keys go, after what is queued. */
static void lead_closed(void *arg)
{
    etcd_agent_t *a = arg;
    a->view_over = 1;   /* a view written now would outlive the job's other keys */
    etcd_call_cancel(a->view_call);
    a->view_call = NULL;
    wbatch_t *c = wbatch_new();
    if (c) {
        c->cleanup = 1;
        q_push(a, c);
    }
}

static const host_sink_t lead_sink = {lead_apply, lead_log, lead_closed};

/* ---- feeding the coordinator ---- */

static void feed_write(etcd_agent_t *a, uint64_t idn, const char *key, size_t klen,
                       const char *val, size_t vlen)
{
    if (!a->host.coord)
        return;
    coord_on_write(a->host.coord, idn, key, klen, val, vlen, podrun_time_epoch());
    host_run(&a->host);
}

/* An agent's alive key is gone: its lease expired (or was revoked before it said anything). */
void etcd_leader_lost(etcd_agent_t *a, uint64_t idn)
{
    if (!a->host.coord)
        return;
    coord_on_lost(a->host.coord, idn, "agent lost: its etcd lease ended", podrun_time_epoch());
    host_run(&a->host);
}

/* One record under P n/ as the coordinator sees it: joins, reports and leaves are writes, the
 * deletion of an alive key is the agent's connection closing. Answers (ours) are skipped. */
static void lead_record(etcd_agent_t *a, const etcd_kv_t *kv, int deleted)
{
    char ids[17], what[16];
    uint64_t idn;
    long num;
    if (etcd_agent_parse_key(a, kv->key, kv->klen, ids, &idn, what, sizeof what, &num) < 0)
        return;
    /* A leader that closes counts itself out first (etcd_close). Its own records that the
     * watch brings after that were written before it closed; counted, one would make its node
     * connected again, and the close would wait close_timeout for a lease that goes only once
     * the close is over. */
    if (a->cleaning && idn == a->idn)
        return;
    lnode_t *n = lnode_get(a, ids, idn);
    if (!n)
        return;
    if (strcmp(what, "alive") == 0) {
        n->alive = !deleted;
        if (!deleted && kv->lease)
            n->lease = kv->lease;
        if (deleted)
            etcd_leader_lost(a, idn);
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
        member_progress(&a->m, "rendezvous '%s': etcd compacted the records' history; reading the job's "
                    "state again", a->m.run_id);
        etcd_leader_stop(a);
        etcd_agent_campaign(a);
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
        rdzv_node_key(key, sizeof key, a->m.prefix, m->id, "assign", m->join_k);
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
    coord_params_t cp = host_coord_params(&a->m.p);
    cp.keep_alive_interval = SWEEP_OFF; /* leases are the liveness here */
    cp.keep_alive_max_attempt = 1;
    /* a node whose lease ended may be cut off, not dead: it starts to stop its workers
     * etcd_agent_late_s after a ttl has passed since its last renewal (backend_etcd.c,
     * on_fence_timer), and the lease cannot have ended before that ttl; the stop takes
     * --term-timeout, and 1 s more for the SIGKILL and the reaping. Counted from when this
     * coordinator hears of the end (a watch event, a takeover), which is later still. */
    cp.fence = etcd_agent_late_s(a) + a->m.p.stop_grace + 1;
    cp.store_host = "";
    a->host.coord = coord_new(&cp, now);
    if (!a->host.coord) {
        etcd_leader_fail(a, "cannot coordinate the job", "out of memory");
        return;
    }
    /* the agents as their keys say */
    for (size_t i = 0; i < a->n_snap; i++) {
        const snaprec_t *s = &a->snap[i];
        char ids[17], what[16];
        uint64_t idn;
        long num;
        lnode_t *n;
        if (etcd_agent_parse_key(a, s->key, s->klen, ids, &idn, what, sizeof what, &num) < 0 ||
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
        member_progress(&a->m, "rendezvous '%s': the job's state in etcd is unreadable; starting it anew",
                 a->m.run_id);
    if (have) {
        coord_member_t *cm = resume_members(&st);
        coord_resume_t rs = {st.round, st.phase, st.restarts, cm, st.n_members,
                             st.over_kind, st.over_text, st.bad, st.n_bad};
        int r = cm ? coord_resume(a->host.coord, &rs, now) : -ENOMEM;
        free(cm);
        if (r < 0) {
            member_progress(&a->m, "rendezvous '%s': cannot resume the job's state (%s); starting it anew",
                     a->m.run_id, podrun_strerror(r));
            etcd_state_free(&st);
            coord_free(a->host.coord);
            a->host.coord = coord_new(&cp, now);
            if (!a->host.coord) {
                etcd_leader_fail(a, "cannot coordinate the job", "out of memory");
                return;
            }
        } else {
            a->st = st;
            a->st_valid = 1;
            member_progress(&a->m, "rendezvous '%s': %s coordinates the job from round %d (%s, %d restart%s "
                        "used)", a->m.run_id, a->m.name, st.round,
                     st.phase == ETCD_PHASE_OPEN ? "open" : st.phase == ETCD_PHASE_RUNNING
                                                                ? "running" : "over",
                     st.restarts, st.restarts == 1 ? "" : "s");
            if (st.phase == ETCD_PHASE_RUNNING)
                reput_assignments(a);
        }
    }
    host_run(&a->host);
    /* joins without an answer first, then what members reported, then the members gone */
    for (int pass = 0; pass < 2 && a->host.coord; pass++) {
        for (size_t i = 0; i < a->n_snap && a->host.coord; i++) {
            const snaprec_t *s = &a->snap[i];
            char ids[17], what[16];
            uint64_t idn;
            long num;
            if (etcd_agent_parse_key(a, s->key, s->klen, ids, &idn, what, sizeof what, &num) < 0)
                continue;
            int ix = u64map_get(&a->by_id, idn);
            const lnode_t *n = ix >= 0 ? a->nodes[ix] : NULL;
            int is_join = strcmp(what, "join") == 0;
            if (pass == 0 && is_join && n && num == n->join_k && n->answered_k < num)
                feed_write(a, idn, s->key, s->klen, s->val, s->vlen);
            else if (pass == 1 && (strcmp(what, "fail") == 0 || strcmp(what, "done") == 0 ||
                                   strcmp(what, "leave") == 0 || strcmp(what, "peer") == 0 ||
                                   strcmp(what, "health") == 0))
                feed_write(a, idn, s->key, s->klen, s->val, s->vlen);
        }
    }
    for (int i = 0; a->host.coord && a->st_valid && i < a->st.n_members; i++) {
        uint64_t idn = strtoull(a->st.members[i].id, NULL, 16);
        int ix = u64map_get(&a->by_id, idn);
        if (ix < 0 || !a->nodes[ix]->alive)
            etcd_leader_lost(a, idn);
    }
    if (!a->host.coord || !a->leading)
        return;
    char key[KEY_MAX], end[KEY_MAX];
    etcd_agent_key(a, key, sizeof key, "n/");
    size_t el = etcd_prefix_end(key, strlen(key), end);
    etcd_watch_spec_t w = {key, strlen(key), end, el, a->snap_rev + 1, W_RECORDS};
    snap_free(a);
    int rc = etcd_watch_start(a->etcd, &w, 1, on_lead_watch, a, &a->lwatch);
    if (rc < 0) {
        etcd_leader_fail(a, "cannot watch the job's records in etcd", podrun_strerror(rc));
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
        etcd_leader_fail(a, "etcd refused the job's lease key", r->error);
        return;
    }
    if (!r->succeeded) {
        etcd_leader_stop(a);
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
        etcd_leader_fail(a, "etcd refused the job's lease", status ? r->error : "no lease id");
        return;
    }
    a->job_lease = r->id;
    char lkey[KEY_MAX], jkey[KEY_MAX], val[32];
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    etcd_agent_key(a, jkey, sizeof jkey, "job");
    sfmt(val, sizeof val, "%" PRId64, a->job_lease);
    etcd_cmp_t cmp = etcd_agent_cmp_create(lkey, a->lead_rev);
    etcd_op_t put = etcd_agent_op_put(jkey, val, strlen(val), a->job_lease);
    int rc = etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, &put, 1, NULL, 0), 0, on_job_put,
                       a, &a->lcall);
    if (rc < 0)
        etcd_leader_fail(a, "cannot write the job's lease key", podrun_strerror(rc));
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
        etcd_leader_fail(a, "cannot read the job's state from etcd", r->error);
        return;
    }
    if (!r->succeeded) { /* the leader key is no longer ours */
        etcd_leader_stop(a);
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
            etcd_leader_fail(a, "cannot read the job's state from etcd", "out of memory");
            return;
        }
    }
    a->snap_rev = r->revision;
    if (job) {
        a->job_lease = job;
        lead_resume(a);
        return;
    }
    int64_t ttl = (int64_t)a->m.p.close_timeout;
    if (ttl < 3 * a->ttl)
        ttl = 3 * a->ttl;
    if (ttl < 10)
        ttl = 10;
    int rc = etcd_call(a->etcd, "lease/grant", etcd_req_lease_grant(ttl), 0, on_job_granted, a,
                       &a->lcall);
    if (rc < 0)
        etcd_leader_fail(a, "cannot ask etcd for the job's lease", podrun_strerror(rc));
}

/* This agent holds the leader key (created at revision rev): it reads the job and coordinates. */
void etcd_leader_start(etcd_agent_t *a, int64_t rev)
{
    if (a->leading || a->m.closing)
        return;
    a->leading = 1;
    a->lead_rev = rev;
    char lkey[KEY_MAX], jkey[KEY_MAX], skey[KEY_MAX], nkey[KEY_MAX], nend[KEY_MAX];
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    etcd_agent_key(a, jkey, sizeof jkey, "job");
    etcd_agent_key(a, skey, sizeof skey, "state");
    etcd_agent_key(a, nkey, sizeof nkey, "n/");
    size_t el = etcd_prefix_end(nkey, strlen(nkey), nend);
    nend[el] = '\0';
    etcd_cmp_t cmp = etcd_agent_cmp_create(lkey, rev);
    etcd_op_t ops[] = {etcd_agent_op_range(jkey, NULL), etcd_agent_op_range(skey, NULL),
                       etcd_agent_op_range(nkey, nend)};
    int rc = etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, ops, 3, NULL, 0), ETCD_CALL_BULK,
                       on_snapshot, a, &a->lcall);
    if (rc < 0)
        etcd_leader_fail(a, "cannot read the job's state from etcd", podrun_strerror(rc));
}

static void on_jka(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->jka_call = NULL;
    if (a->leading && (status != 0 || r->ttl <= 0))
        etcd_leader_fail(a, "the job's keys in etcd have expired", "its lease is gone");
}

void etcd_leader_keepalive(etcd_agent_t *a)
{
    if (a->leading && a->job_lease && !a->jka_call)
        etcd_call(a->etcd, "lease/keepalive", etcd_req_lease_id(a->job_lease), 0, on_jka, a,
                  &a->jka_call);
    publish_view(a);
}

void etcd_leader_init(etcd_agent_t *a)
{
    host_init(&a->host, a->m.loop, &lead_sink, a);
}
