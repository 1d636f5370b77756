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
 *   P view                 the job lease       the job's state for `podrun status`
 *                                              (rdzv/status.h), every keep_alive_interval
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
 *    store backend; an elastic job's membership change is not). A node cut off may still run
 *    its workers: it stops them itself once twice the ttl has passed since the last renewal
 *    etcd answered was sent (on_fence_timer); its lease cannot have ended before one ttl, so
 *    the next round closes only after the fence: a ttl + --term-timeout + 1 s from the lease's
 *    end as the leader hears of it (etcd_leader.c).
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
 *    resume from the revision after the last event they delivered. Nothing else notices. A
 *    member that holds its connections but answers nothing (frozen, or cut off from its peers
 *    while a request waits for their quorum) is left once an attempt has had no byte for a
 *    keep-alive try's share of the lease (ttl / keep_alive_max_attempt): a lease renewal sent
 *    to it still reaches another member in time.
 *  - etcd as a whole is unreachable, slow or failing: every request is retried (the endpoints in
 *    turn, then a backoff to 1 s) and the workers run on; after 1 s a progress line says what
 *    fails. An agent that runs workers stops them once its lease has gone unrenewed for twice
 *    its ttl (as above: it cannot tell etcd out of everyone's reach from out of its own alone);
 *    one without workers gives up once nothing has been answered for read_timeout (60 s). Both are
 *    lost() with PODRUN_ESTORELOST, the store-lost exit code. The leases run on etcd's leader's
 *    clock: a restarted etcd (or a newly elected raft leader) gives each a full ttl again, but
 *    a frozen etcd, or one this agent cannot reach, lets them run out; an agent that reaches
 *    etcd again and finds its lease gone was counted as lost by the job, and exits the same
 *    way.
 *  - A watch's revision was compacted away: the agent reads what it may have missed (its join's
 *    answer, its round's end, the leader key) and watches again; a leader rebuilds from P state
 *    as at a takeover.
 *  - An answer that is not etcd's (a proxy's page, garbage, an oversized one) is a failed
 *    attempt on that endpoint, parsed by rdzv/etcd/json.c which takes any bytes.
 */
#include "rdzv/backend_etcd_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const rdzv_transport_t etcd_transport;

/* ---- lifetime ---- */

/* What the member does not free itself (member.h, release). */
static void etcd_release(rdzv_member_t *m)
{
    etcd_agent_t *a = (etcd_agent_t *)m;
    etcd_leader_stop(a);
    host_free(&a->host);
    free(a->cacert);
    free(a->cert);
    free(a->key);
}

/* This node is out of the job: tell the launcher once. A node already on its way out (finished,
 * told to exit, leaving, closing) is not told. */
void etcd_agent_fail(etcd_agent_t *a, int err, const char *why)
{
    if (!member_done_anyway(&a->m))
        member_fail(&a->m, err, why);
}

/* ---- keys ---- */

/* Parses "<P>n/<16 hex>/<what>[/<num>]". 0, or -1 for any other key. */
int etcd_agent_parse_key(const etcd_agent_t *a, const char *key, size_t klen, char ids[17],
                          uint64_t *idn, char *what, size_t wcap, long *num)
{
    size_t pl = a->m.plen + 2;
    if (klen < pl + 18 || memcmp(key, a->m.prefix, a->m.plen) != 0 ||
        memcmp(key + a->m.plen, "n/", 2) != 0 || key[pl + 16] != '/')
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

/* A fire-and-forget put with this node's lease (its records: the client retries until etcd
 * takes it, or the agent closes). */
static int put_record(etcd_agent_t *a, const char *key, const char *val, size_t vlen,
                      etcd_call_cb cb)
{
    etcd_op_t op = etcd_agent_op_put(key, val, vlen, a->lease);
    return etcd_call(a->etcd, "kv/put", etcd_req_op(&op), 0, cb ? cb : etcd_agent_ignored, a, NULL);
}

/* ================================================================================================
 * The agent side
 * ============================================================================================== */

/* Whether this node still takes part in choosing who coordinates. */
static int in_job(const etcd_agent_t *a)
{
    return !a->m.closing && !a->m.leaving && a->lease && a->m.state != MS_FINISHED &&
           a->m.state != MS_DEAD && !(a->m.state == MS_STOPPED && a->m.stop_action == RDZV_EXIT);
}

/* The leader part of an answer to an election transaction: ours (created now, or found with our
 * id after a retry) or someone else's; no leader at all means trying again. */
static void election_result(etcd_agent_t *a, const etcd_resp_t *r, int range_op)
{
    if (r->succeeded) {
        etcd_leader_start(a, r->revision);
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        const etcd_kv_t *kv = &r->kvs[i];
        if (kv->op != range_op)
            continue;
        if (kv->vlen == 16 && memcmp(kv->value, a->m.id, 16) == 0)
            etcd_leader_start(a, kv->create_rev);
        return;
    }
    etcd_agent_campaign(a); /* the key went between the comparison and the read */
}

/* etcd expired this node's lease while it was out of reach: the job has counted it as lost.
 * One sentence for it, whichever request finds out (the keep-alive, or a bid to coordinate once
 * every lease went, the leader's with them). */
static void lease_expired(etcd_agent_t *a)
{
    char why[RDZV_LINE_MAX];
    sfmt(why, sizeof why, "rendezvous '%s': this node's etcd lease has expired (etcd was out "
         "of reach for longer than its %d s): the job has counted it as lost", a->m.run_id,
         a->ttl);
    etcd_leader_stop(a);
    etcd_agent_fail(a, PODRUN_ESTORELOST, why);
}

static void on_campaign(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->campaign_call = NULL;
    if (!in_job(a))
        return;
    if (status != 0 && strstr(r->error, "lease not found")) {
        lease_expired(a);
    } else if (status != 0) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': etcd refused this node's bid to coordinate: %s",
             a->m.run_id, r->error);
        etcd_agent_fail(a, PODRUN_ESTORELOST, why);
    } else {
        election_result(a, r, 0);
    }
}

/* Tries to become the leader: creates P leader with this agent's lease unless it exists. */
void etcd_agent_campaign(etcd_agent_t *a)
{
    if (a->campaign_call || a->leading || !in_job(a))
        return;
    char lkey[KEY_MAX];
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    etcd_cmp_t cmp = etcd_agent_cmp_create(lkey, 0);
    etcd_op_t ok = etcd_agent_op_put(lkey, a->m.id, 16, a->lease),
              fail = etcd_agent_op_range(lkey, NULL);
    etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, &ok, 1, &fail, 1), 0, on_campaign, a,
              &a->campaign_call);
}

/* An answer to one of this node's joins (member_on_assign reads it). */
static void on_assign_kv(etcd_agent_t *a, const etcd_kv_t *kv)
{
    char ids[17], what[16];
    uint64_t idn;
    long k;
    if (kv->op == 1 || a->m.state != MS_JOINING ||
        etcd_agent_parse_key(a, kv->key, kv->klen, ids, &idn, what, sizeof what, &k) < 0 ||
        idn != a->idn || strcmp(what, "assign") != 0 || k != a->m.join_k)
        return;
    member_on_assign(&a->m, kv->value, kv->vlen);
}

/* Assigned (member.h, assigned): a fresh namespace for this attempt's workers, should this
 * node's store serve them. */
static int etcd_assigned(rdzv_member_t *m, const char *val, size_t len)
{
    (void)val, (void)len;
    store_server_delete_except(m->server, "podrun/");
    return 0;
}

/* A round's end record (member_on_end keeps the latest: it may come before the assignment). */
static void on_end_kv(etcd_agent_t *a, const etcd_kv_t *kv)
{
    char rest[64];
    size_t rl = kv->klen - a->m.plen;
    long r;
    if (kv->op == 1 || kv->klen <= a->m.plen + 2 || rl >= sizeof rest)
        return;
    memcpy(rest, kv->key + a->m.plen, rl);
    rest[rl] = '\0';
    char *slash = strchr(rest + 2, '/');
    if (strncmp(rest, "r/", 2) != 0 || !slash || strcmp(slash, "/end") != 0)
        return;
    *slash = '\0';
    if (podrun_parse_int(rest + 2, 0, 1L << 30, &r) < 0)
        return;
    member_on_end(&a->m, (int)r, kv->value, kv->vlen);
}

static void start_watch(etcd_agent_t *a);

/* What the watch may have missed while its history was compacted: the answer to this node's
 * join, its round's end, the leader key. Read like watch events, after watching again. */
static void on_sync(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->sync_call = NULL;
    if (a->m.closing || status != 0)
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
        etcd_agent_campaign(a);
}

static void resync(etcd_agent_t *a)
{
    member_progress(&a->m, "rendezvous '%s': etcd compacted the history this node was watching; reading "
                "it again", a->m.run_id);
    etcd_watch_cancel(a->watch);
    a->watch = NULL;
    a->created = 0;
    start_watch(a);
    char akey[KEY_MAX], ekey[KEY_MAX], lkey[KEY_MAX];
    rdzv_node_key(akey, sizeof akey, a->m.prefix, a->m.id, "assign", a->m.join_k);
    sfmt(ekey, sizeof ekey, "%sr/%d/end", a->m.prefix, a->m.round);
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    etcd_op_t ops[] = {etcd_agent_op_range(akey, NULL), etcd_agent_op_range(ekey, NULL),
                       etcd_agent_op_range(lkey, NULL)};
    etcd_call_cancel(a->sync_call);
    etcd_call(a->etcd, "kv/txn", etcd_req_txn(NULL, 0, ops, 3, NULL, 0), 0, on_sync, a,
              &a->sync_call);
}

/* This node's stream: answers to its joins, round ends, the leader key. */
static void on_agent_watch(void *arg, const etcd_resp_t *m)
{
    etcd_agent_t *a = arg;
    if (a->m.closing)
        return;
    if (m->canceled) {
        resync(a);
        return;
    }
    if (m->created) {
        if (m->watch_id > 0 && m->watch_id < 8)
            a->created |= 1 << m->watch_id;
        int all = 1 << W_ASSIGN | 1 << W_END | 1 << W_LEADER;
        if ((a->created & all) == all && a->m.state == MS_STARTING)
            member_join(&a->m);
        return;
    }
    for (size_t i = 0; i < m->n && !a->m.closing; i++) {
        const etcd_kv_t *kv = &m->kvs[i];
        if (m->watch_id == W_ASSIGN)
            on_assign_kv(a, kv);
        else if (m->watch_id == W_END)
            on_end_kv(a, kv);
        else if (m->watch_id == W_LEADER && kv->op == 1)
            etcd_agent_campaign(a);
    }
}

static void start_watch(etcd_agent_t *a)
{
    char akey[KEY_MAX], aend[KEY_MAX], rkey[KEY_MAX], rend[KEY_MAX], lkey[KEY_MAX];
    rdzv_node_key(akey, sizeof akey, a->m.prefix, a->m.id, "assign", -1);
    sfmt(akey + strlen(akey), sizeof akey - strlen(akey), "/");
    size_t ael = etcd_prefix_end(akey, strlen(akey), aend);
    etcd_agent_key(a, rkey, sizeof rkey, "r/");
    size_t rel = etcd_prefix_end(rkey, strlen(rkey), rend);
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    etcd_watch_spec_t w[] = {
        {akey, strlen(akey), aend, ael, 0, W_ASSIGN},
        {rkey, strlen(rkey), rend, rel, 0, W_END},
        {lkey, strlen(lkey), NULL, 0, 0, W_LEADER},
    };
    int rc = etcd_watch_start(a->etcd, w, 3, on_agent_watch, a, &a->watch);
    if (rc < 0)
        etcd_agent_fail(a, PODRUN_ESTORELOST, "cannot watch etcd");
}

/* What the join record says besides the descriptor: where this node's store listens. */
static void etcd_join_extra(rdzv_member_t *m, kvbuf_t *b)
{
    kv_add_int(b, "store_port", m->port);
}

static void on_hello(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->hello_call = NULL;
    if (a->m.closing)
        return;
    if (status != 0) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': etcd refused this node's join: %s", a->m.run_id,
             r->error);
        etcd_agent_fail(a, PODRUN_ESTORELOST, why);
        return;
    }
    if (in_job(a))
        election_result(a, r, 2);
}

/* The first words of this node, in one transaction: its alive key, its join and — if nobody
 * coordinates yet — the leader key. A later join is a record like the others (member.h, join). */
static int etcd_join(rdzv_member_t *m, const char *jkey, const char *val, size_t len)
{
    etcd_agent_t *a = (etcd_agent_t *)m;
    if (m->join_k > 0)
        return put_record(a, jkey, val, len, NULL);
    char lkey[KEY_MAX], alive[KEY_MAX];
    etcd_agent_key(a, lkey, sizeof lkey, "leader");
    member_key(m, alive, sizeof alive, "alive", -1);
    etcd_cmp_t cmp = etcd_agent_cmp_create(lkey, 0);
    etcd_op_t ok[] = {etcd_agent_op_put(lkey, m->id, 16, a->lease),
                      etcd_agent_op_put(alive, m->name, strlen(m->name), a->lease),
                      etcd_agent_op_put(jkey, val, len, a->lease)};
    etcd_op_t fail[] = {ok[1], ok[2], etcd_agent_op_range(lkey, NULL)};
    return etcd_call(a->etcd, "kv/txn", etcd_req_txn(&cmp, 1, ok, 3, fail, 3), 0, on_hello, a,
                     &a->hello_call);
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
    if (a->said_failing && now - a->said_failing < (int64_t)(a->m.p.progress_interval * 1000))
        return;
    a->said_failing = now;
    char left[32];
    podrun_format_duration(a->m.p.read_timeout - (double)failing / 1000, left, sizeof left);
    member_progress(&a->m, "rendezvous '%s': etcd is not answering (%s); retrying for %s more", a->m.run_id,
             why, left);
}

static void on_fence_timer(uv_timer_t *t);

/* etcd answered a renewal (or the grant) sent at `sent`: the lease lasts a ttl from then at
 * least, so this node's workers may run until then (and etcd_agent_late_s more) and the time to
 * stop them moves there. */
static void lease_renewed(etcd_agent_t *a, uint64_t sent)
{
    if (sent < a->renewed)
        return;
    a->renewed = sent;
    uint64_t until = sent + (uint64_t)((a->ttl + etcd_agent_late_s(a)) * 1000),
             now = uv_now(a->m.loop);
    uv_timer_start(&a->fence_timer, on_fence_timer, until > now ? until - now : 0, 0);
}

/* A ttl and etcd_agent_late_s have passed since the last renewal etcd answered was sent. etcd
 * may have let the lease go, and then the job counts this node as lost and gives its ranks to
 * others once the fence has passed (etcd_leader.c). Whether etcd is out of everyone's reach or
 * of this node's alone cannot be told from here, so a node that runs workers stops them now, as
 * a store's cut-off node does, with the same code. A node with no workers holds no ranks: it
 * looks again a keep-alive interval later, and until then etcd's answer decides (its lease, or
 * read_timeout). */
static void on_fence_timer(uv_timer_t *t)
{
    etcd_agent_t *a = t->data;
    if (a->m.closing || !a->lease || a->m.state == MS_DEAD || a->m.state == MS_FINISHED)
        return;
    if (a->m.state != MS_RUNNING) {
        uv_timer_start(&a->fence_timer, on_fence_timer,
                       (uint64_t)(a->m.p.keep_alive_interval * 1000), 0);
        return;
    }
    char why[RDZV_LINE_MAX], err[320], took[32];
    etcd_client_failing_ms(a->etcd, err, sizeof err);
    podrun_format_duration(a->ttl + etcd_agent_late_s(a), took, sizeof took);
    sfmt(why, sizeof why, "rendezvous '%s': etcd has not renewed this node's lease for %s (its "
         "ttl: %d s): the job may count it as lost, so it stops its workers (%s)", a->m.run_id,
         took, a->ttl, err[0] ? err : "no answer");
    etcd_leader_stop(a);
    etcd_agent_fail(a, PODRUN_ESTORELOST, why);
}

static void on_ka(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->ka_call = NULL;
    if (a->m.closing)
        return;
    if (status != 0 || r->ttl <= 0)
        lease_expired(a);
    else
        lease_renewed(a, r->sent_ms);
}

/* The time of a health check that found no news (member.h): the store's heartbeat carries it;
 * here a lease keepalive carries nothing, so it is put as P n/<id>/hb, at most every
 * ETCD_HEALTH_TICKS keep-alive intervals: a large job's checks do not become etcd's load. */
static void put_health_time(etcd_agent_t *a)
{
    if (++a->hb_ticks < ETCD_HEALTH_TICKS || a->m.health_unsent <= 0 || !a->lease ||
        a->m.closing)
        return;
    char key[320], val[64];
    int vl = rdzv_health_ago_encode(a->m.health_unsent, podrun_time_epoch(), val, sizeof val);
    member_key(&a->m, key, sizeof key, "hb", -1);
    if (vl > 0 && put_record(a, key, val, (size_t)vl, NULL) == 0) {
        a->m.health_unsent = 0;
        a->hb_ticks = 0;
    }
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
            member_progress(&a->m, "rendezvous '%s': going on with etcd at %s (%s)", a->m.run_id, ep,
                     etcd_client_last_error(a->etcd));
        sfmt(a->endpoint, sizeof a->endpoint, "%s", ep);
    }
    if (failing > (int64_t)(a->m.p.read_timeout * 1000) && !a->m.closing) {
        char line[RDZV_LINE_MAX], took[32];
        podrun_format_duration(a->m.p.read_timeout, took, sizeof took);
        sfmt(line, sizeof line, "rendezvous '%s': etcd did not answer for %s (%s); this node "
             "gives up", a->m.run_id, took, why);
        etcd_leader_stop(a);
        etcd_agent_fail(a, PODRUN_ESTORELOST, line);
        return;
    }
    if (a->lease && !a->ka_call)
        etcd_call(a->etcd, "lease/keepalive", etcd_req_lease_id(a->lease), 0, on_ka, a,
                  &a->ka_call);
    put_health_time(a);
    etcd_leader_keepalive(a);
}

static void on_granted(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->hello_call = NULL;
    if (a->m.closing)
        return;
    if (status != 0 || r->id == 0) {
        char why[RDZV_LINE_MAX];
        sfmt(why, sizeof why, "rendezvous '%s': etcd refused a lease: %s", a->m.run_id,
             status ? r->error : "no lease id");
        etcd_agent_fail(a, PODRUN_ESTORELOST, why);
        return;
    }
    a->lease = r->id;
    if (r->ttl > 0)
        a->ttl = (int)r->ttl;
    lease_renewed(a, r->sent_ms);
    start_watch(a);
}

static void on_status(void *arg, int status, const etcd_resp_t *r)
{
    etcd_agent_t *a = arg;
    a->status_call = NULL;
    if (a->m.closing || status != 0 || a->m.state != MS_JOINING || a->leading || r->n == 0)
        return;
    member_progress(&a->m, "%.*s", (int)(r->kvs[0].vlen < RDZV_LINE_MAX ? r->kvs[0].vlen : RDZV_LINE_MAX - 1),
             r->kvs[0].value);
}

/* A progress line while waiting: the coordinator's status while joining (the leader has the
 * coordinator's own lines); while etcd does not answer, say_failing speaks instead. */
static void etcd_tick(rdzv_member_t *m)
{
    etcd_agent_t *a = (etcd_agent_t *)m;
    if (etcd_client_failing_ms(a->etcd, NULL, 0) >= 1000)
        return;
    if (a->m.state == MS_STARTING) {
        member_progress(&a->m, "rendezvous '%s': waiting for etcd at %s", a->m.run_id,
                 etcd_client_endpoint(a->etcd));
    } else if (a->m.state == MS_JOINING && !a->leading && !a->status_call) {
        char key[KEY_MAX];
        etcd_agent_key(a, key, sizeof key, "status");
        etcd_op_t op = etcd_agent_op_range(key, NULL);
        etcd_call(a->etcd, "kv/range", etcd_req_op(&op), 0, on_status, a, &a->status_call);
    }
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
    if (member_init(&a->m, &rdzv_backend_etcd, &etcd_transport, loop, p, self, cb, arg) < 0 ||
        member_copy_str(&a->cacert, p->etcd_cacert) || member_copy_str(&a->cert, p->etcd_cert) ||
        member_copy_str(&a->key, p->etcd_key)) {
        member_free(&a->m);
        return -ENOMEM;
    }
    char err[256];
    a->n_ep = etcd_endpoints_parse(p->endpoints, a->cacert || a->cert, a->ep, ETCD_MAX_ENDPOINTS,
                                   err, sizeof err);
    if (a->n_ep < 0) {
        member_free(&a->m);
        return -EINVAL;
    }
    a->idn = strtoull(a->m.id, NULL, 16);
    a->ttl = lease_ttl(&a->m.p);

    podrun_log_t log = {member_on_store_log, &a->m};
    int rc = store_server_start(loop, a->m.local_addr, p->store_port, NULL, &log, &a->m.server);
    if (rc < 0) {
        a->m.server = NULL;
        member_free(&a->m);
        return rc;
    }
    a->m.port = store_server_port(a->m.server);
    store_server_allow(a->m.server, p->allow); /* the workers' store: the same sources */
    double tmo = a->ttl < a->m.p.read_timeout ? a->ttl : a->m.p.read_timeout;
    /* A member that stops answering (frozen, partitioned from its peers) must be left while
     * the lease still has time for keep_alive_max_attempt tries on the others; a silence as
     * long as the lease would leave none. Bytes that keep coming are not silence, and the one
     * answer etcd may take long to start, the leader's read of every record, is exempt
     * (ETCD_CALL_BULK): the bound on the whole attempt stays the lease. */
    int tries = a->m.p.keep_alive_max_attempt > 1 ? a->m.p.keep_alive_max_attempt : 1;
    etcd_client_conf_t conf = {
        .endpoints = a->ep,
        .n_endpoints = a->n_ep,
        .first = (int)(a->idn % (uint64_t)a->n_ep),
        .cacert = a->cacert,
        .cert = a->cert,
        .key = a->key,
        .timeout_ms = tmo < 1 ? 1000 : (int)(tmo * 1000),
        .idle_ms = a->ttl * 1000 / tries,
    };
    rc = etcd_client_new(loop, &conf, &a->etcd);
    if (rc < 0) {
        store_server_close(a->m.server, NULL, NULL);
        a->m.server = NULL;
        member_free(&a->m);
        return rc;
    }
    /* the member this node starts with: a switch away from it, however early, is said */
    sfmt(a->endpoint, sizeof a->endpoint, "%s", etcd_client_endpoint(a->etcd));
    member_timer_init(&a->m, &a->ka_timer);
    member_timers_init(&a->m);
    member_timer_init(&a->m, &a->close_timer);
    member_timer_init(&a->m, &a->fence_timer);
    etcd_leader_init(a);
    rc = etcd_call(a->etcd, "lease/grant", etcd_req_lease_grant(a->ttl), 0, on_granted, a,
                   &a->hello_call);
    if (rc < 0) {
        member_close(&a->m.base, NULL, NULL);
        return rc;
    }
    /* the keep-alive tick also bounds how long etcd may fail, from the very start */
    uint64_t ms = (uint64_t)(a->m.p.keep_alive_interval * 1000);
    uv_timer_start(&a->ka_timer, on_ka_timer, ms, ms);
    member_start_progress(&a->m);
    *out = &a->m.base;
    return 0;
}

/* One of this node's records, with its lease (member.h, put). A node out of the job (no lease,
 * or lost) writes nothing more. */
static void on_left(void *arg, int status, const etcd_resp_t *r)
{
    (void)status, (void)r;
    member_leave_sent(arg);
}

static int etcd_put(rdzv_member_t *m, const char *key, const char *val, size_t len, int ack)
{
    etcd_agent_t *a = (etcd_agent_t *)m;
    if (!a->lease || m->state == MS_DEAD)
        return -ENOTCONN;
    return put_record(a, key, val, len, ack ? on_left : NULL);
}

/* ---- closing ---- */

static void on_host_closed(void *arg)
{
    etcd_agent_t *a = arg;
    a->m.handles--;
    member_maybe_free(&a->m);
}

/* The end: no more callbacks from etcd; the store and the timers close; the agent is freed and
 * `closed` runs once they have. */
static void teardown(etcd_agent_t *a)
{
    if (a->m.closing == 2)
        return;
    etcd_leader_stop(a);
    a->m.closing = 2;
    etcd_client_close(a->etcd);
    a->etcd = NULL;
    uv_close((uv_handle_t *)&a->ka_timer, member_on_handle_closed);
    uv_close((uv_handle_t *)&a->close_timer, member_on_handle_closed);
    uv_close((uv_handle_t *)&a->fence_timer, member_on_handle_closed);
    if (host_close(&a->host, on_host_closed, a))
        a->m.handles++;
    member_close_handles(&a->m);
}

/* The bound on a closing step ran out: waiting for the others or for the queue ends with the
 * lease's revocation, which itself ends with the teardown. */
static void on_close_timer(uv_timer_t *t)
{
    etcd_agent_t *a = t->data;
    if (a->m.closing == 1 && !a->revoking)
        etcd_agent_close_finish(a);
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
void etcd_agent_close_finish(etcd_agent_t *a)
{
    if (a->m.closing != 1 || a->revoking)
        return;
    a->flushing = 0;
    a->revoking = 1;
    etcd_leader_stop(a);
    uv_timer_stop(&a->ka_timer);
    uv_timer_stop(&a->fence_timer);
    uv_timer_stop(&a->m.prog_timer);
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
static void etcd_close(rdzv_member_t *m)
{
    etcd_agent_t *a = (etcd_agent_t *)m;
    etcd_watch_cancel(a->watch);
    a->watch = NULL;
    coord_info_t info;
    if (a->lead_ready && a->host.coord && (coord_info(a->host.coord, &info), info.phase == COORD_OVER) &&
        a->m.state != MS_DEAD) {
        a->cleaning = 1;
        uv_timer_start(&a->close_timer, on_close_timer,
                       (uint64_t)(a->m.p.close_timeout * 1000) + CLOSE_BOUND_MS, 0);
        etcd_leader_lost(a, a->idn);
        coord_shutdown(a->host.coord, podrun_time_epoch());
        host_run(&a->host); /* COORD_CLOSED queues the removal of the job's keys */
        return;
    }
    if (a->leading && (a->q_head || a->lcall) && a->m.state != MS_DEAD) {
        a->flushing = 1;
        uv_timer_start(&a->close_timer, on_close_timer, CLOSE_BOUND_MS, 0);
        return;
    }
    etcd_agent_close_finish(a);
}

static const rdzv_transport_t etcd_transport = {
    .what = "etcd",
    .put = etcd_put,               /* a put with this node's lease */
    .join = etcd_join,             /* the first: alive + join + election in one txn */
    .join_extra = etcd_join_extra, /* store_port */
    .assigned = etcd_assigned,     /* this node's store emptied for the workers */
    .tick = etcd_tick,             /* waiting for etcd, or the coordinator's status */
    .close = etcd_close,           /* the leader's last writes, then the lease's revocation */
    .release = etcd_release,
};

const rdzv_backend_t rdzv_backend_etcd = {
    .name = "etcd",
    .start = etcd_start,
    MEMBER_ENTRIES, /* reports, leave, rejoin, close, store_port: member.h */
};
