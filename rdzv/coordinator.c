/* rdzv/coordinator.c — the rendezvous coordinator: the action queue, the inputs and the timers.
 * The rounds themselves: coordinator_round.c. Protocol: rdzv/rendezvous.h. No I/O here: every
 * effect is an action in the queue.
 *
 * Inputs come one at a time (a write, a close, a timer) and each runs to the end: every counter
 * below is consistent again before the input returns, which is what lets the host's loop drain
 * the actions and apply them in order. The round's life: OPEN (joins counted;
 * round_check_close decides) -> RUNNING (round_close gave out ranks; a stop reason arms DECIDE)
 * -> coord_round_decide() sets the end record and opens the next round at once, or the job goes OVER
 * (round_go_over answers everyone still waiting). */
#include "rdzv/coordinator_int.h"
#include "rdzv/relay.h"

#include "rdzv/ranks.h"
#include "rdzv/records.h"
#include "rdzv/status.h"
#include "rdzv/base/u64map.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- action queue ---- */

/* Forgets the previous input's actions: their strings were promised only until this input. */
void coord_q_reset(coord_t *c)
{
    for (size_t i = 0; i < c->q_len; i++) {
        free(c->q[i].key);
        free(c->q[i].val);
    }
    c->q_len = c->q_pos = 0;
    if (c->q_cap > 256) { /* a burst (a round closing on 1000 nodes) is not kept for life */
        free(c->q);
        c->q = NULL;
        c->q_cap = 0;
    }
}

/* A zeroed action at the end of the queue; NULL without memory, and that action is lost (a lost
 * line costs nothing; a lost set is what coord_round_decide()'s and round_close's callers retry on their
 * timers). */
action_store_t *coord_q_push(coord_t *c, int kind)
{
    if (c->q_len == c->q_cap) {
        size_t nc = c->q_cap ? c->q_cap * 2 : 64;
        action_store_t *nq = realloc(c->q, nc * sizeof *nq);
        if (!nq)
            return NULL;
        c->q = nq;
        c->q_cap = nc;
    }
    action_store_t *s = &c->q[c->q_len++];
    memset(s, 0, sizeof *s);
    s->a.kind = kind;
    return s;
}

/* Queues "set key to val"; both are copied, the callers' buffers live on their stacks. */
void coord_act_set(coord_t *c, const char *key, const char *val, size_t vlen)
{
    action_store_t *s = coord_q_push(c, COORD_SET);
    if (!s)
        return;
    s->key = strdup(key);
    s->val = malloc(vlen + 1);
    if (!s->key || !s->val) {
        free(s->key);
        free(s->val);
        c->q_len--;
        return;
    }
    memcpy(s->val, val, vlen);
    s->val[vlen] = '\0';
    s->a.key = s->key;
    s->a.val = s->val;
    s->a.vlen = vlen;
}

/* Queues "delete key". */
void coord_act_delete(coord_t *c, const char *key)
{
    action_store_t *s = coord_q_push(c, COORD_DELETE);
    if (!s)
        return;
    s->key = strdup(key);
    if (!s->key) {
        c->q_len--;
        return;
    }
    s->a.key = s->key;
}

/* Queues "arm `timer` for `at`" (epoch seconds; < 0: stop it). One host timer per kind. */
void coord_act_timer(coord_t *c, int timer, double at)
{
    action_store_t *s = coord_q_push(c, COORD_TIMER);
    if (s) {
        s->a.timer = timer;
        s->a.at = at;
    }
}

/* Queues one line for the host's log. */
void coord_act_log(coord_t *c, const char *fmt, ...)
{
    char line[RDZV_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    action_store_t *s = coord_q_push(c, COORD_LOG);
    if (!s)
        return;
    s->val = strdup(line);
    if (!s->val) {
        c->q_len--;
        return;
    }
    s->a.val = s->val;
    s->a.vlen = strlen(line);
}

int coord_next_action(coord_t *c, coord_action_t *a)
{
    if (c->q_pos >= c->q_len)
        return 0;
    *a = c->q[c->q_pos++].a;
    return 1;
}

/* ---- helpers ---- */

/* How lines name a node: its name, else its address, else its id (it wrote before joining). */
const char *coord_node_label(const cnode_t *n)
{
    return n->d.name[0] ? n->d.name : n->d.addr[0] ? n->d.addr : n->ids;
}

void coord_node_key(const coord_t *c, char *out, size_t cap, const cnode_t *n, const char *what,
              int num)
{
    rdzv_node_key(out, cap, c->prefix, n->ids, what, num);
}

/* Answers n's latest join with an error kind ("timeout", "rejected", "ended", "finished") and a
 * text: the agent's WAIT on that join's assign key wakes with it. */
void coord_answer_error(coord_t *c, cnode_t *n, const char *kind, const char *text)
{
    char key[256], val[RDZV_LINE_MAX + 64];
    coord_node_key(c, key, sizeof key, n, "assign", n->join_k);
    int len = rdzv_assign_error_encode(kind, text, val, sizeof val);
    if (len >= 0)
        coord_act_set(c, key, val, (size_t)len);
    n->assign_k = n->join_k;
}

/* The answer to n's previous join is no longer needed once the agent joined again (it read that
 * answer, or gave up on it) or its connection closed: its assign key goes. */
static void forget_answer(coord_t *c, cnode_t *n)
{
    if (n->assign_k < 0)
        return;
    char key[256];
    coord_node_key(c, key, sizeof key, n, "assign", n->assign_k);
    coord_act_delete(c, key);
    n->assign_k = -1;
}

int coord_exp_find(const coord_t *c, const char *name)
{
    for (int i = 0; i < c->n_exp; i++)
        if (strcmp(c->exp_names[i], name) == 0)
            return i;
    return -1;
}

/* The progress line of the open round: who joined and who is still missing. The missing are
 * named when the nodes to expect are known (last round's members, or `expected` in round 0),
 * given as node ranks when every joined node of a fixed-size job named its rank, else counted.
 * The target is what closes the round: MAX in a fixed-size job, everyone expected when that is
 * known, else MIN. `timed_out` phrases the line as the round's final word. */

static void progress_line(coord_t *c, double now, int timed_out, char *out, size_t cap)
{
    char missing[512] = "", joined[512] = "", left[32];
    textlist_t lm = {missing, sizeof missing, 0, 0, 8}, lj = {joined, sizeof joined, 0, 0, 8};
    int target, all_ranked = c->joined > 0;

    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_JOINED) {
            textlist_add(&lj, coord_node_label(n));
            if (n->d.want_rank < 0)
                all_ranked = 0;
        } else if (n->state == NS_STOPPED && c->expect_known) {
            textlist_add(&lm, coord_node_label(n));
        }
    }
    for (int i = 0; i < c->n_exp && c->round == 0; i++)
        if (!c->exp_joined[i])
            textlist_add(&lm, c->exp_names[i]);
    if (c->p.min_nodes == c->p.max_nodes)
        target = c->p.max_nodes;
    else if (c->expect_known)
        target = c->joined + c->expected_missing;
    else
        target = c->p.min_nodes;
    if (target > c->p.max_nodes)
        target = c->p.max_nodes;
    if (lm.items == 0 && c->joined < target) {
        if (all_ranked && c->p.min_nodes == c->p.max_nodes) {
            for (int r = 0; r < c->p.max_nodes; r++)
                if (c->rank_owner[r] < 0) {
                    char s[32];
                    sfmt(s, sizeof s, "node rank %d", r);
                    textlist_add(&lm, s);
                }
        } else {
            sfmt(missing, sizeof missing, "%d more node%s", target - c->joined,
                     target - c->joined == 1 ? "" : "s");
        }
    }
    textlist_end(&lm);
    textlist_end(&lj);
    if (!joined[0])
        sfmt(joined, sizeof joined, "none");
    podrun_format_duration(c->join_deadline - now, left, sizeof left);

    if (timed_out) {
        char took[32];
        podrun_format_duration(c->p.join_timeout, took, sizeof took);
        sfmt(out, cap,
                 "rendezvous '%s' round %d timed out after %s: %d/%d nodes joined, still "
                 "waiting for %s (joined: %s)",
                 c->run_id, c->round, took, c->joined, target, missing, joined);
    } else if (c->joined >= c->p.min_nodes && c->joined < target) {
        sfmt(out, cap,
                 "rendezvous '%s' round %d: %d/%d nodes joined (min %d), waiting for %s "
                 "(joined so far: %s; %s left)",
                 c->run_id, c->round, c->joined, target, c->p.min_nodes, missing, joined, left);
    } else if (c->joined >= c->p.min_nodes) {
        char lc[32];
        podrun_format_duration(c->p.last_call_timeout, lc, sizeof lc);
        sfmt(out, cap,
                 "rendezvous '%s' round %d: %d nodes joined (min %d, max %d), last call of %s "
                 "for more (joined so far: %s)",
                 c->run_id, c->round, c->joined, c->p.min_nodes, c->p.max_nodes, lc, joined);
    } else {
        sfmt(out, cap,
                 "rendezvous '%s' round %d: %d/%d nodes joined, waiting for %s (joined so far: "
                 "%s; %s left)",
                 c->run_id, c->round, c->joined, target, missing, joined, left);
    }
    if (c->p.segment_size > 1) {
        size_t used = strlen(out);
        sfmt(out + used, cap - used, "; %d of them in whole segments of %d", coord_round_ready_nodes(c),
             c->p.segment_size);
    }
}

/* Publishes the open round's state under P status: waiting agents on other nodes cannot see the
 * coordinator, so they read this for their own progress lines. */
void coord_set_status(coord_t *c, const char *line)
{
    char key[256];
    sfmt(key, sizeof key, "%sstatus", c->prefix);
    coord_act_set(c, key, line, strlen(line));
}

/* The node behind a write: found by its id, created at its first write. An id belongs to the
 * connection that first used it and a connection to one id, so a second agent reusing either is
 * ignored rather than believed. NULL for those, and without memory. */
cnode_t *coord_node_for(coord_t *c, uint64_t conn, uint64_t id, const char *ids, int *idx,
                  double now)
{
    int i = u64map_get(&c->by_id, id);
    if (i >= 0) {
        cnode_t *n = c->nodes[i];
        if (n->conn != conn)
            return NULL; /* someone else's id: ignore */
        *idx = i;
        return n;
    }
    if (u64map_get(&c->by_conn, conn) >= 0)
        return NULL; /* one agent per connection */
    if (c->n_nodes == c->cap_nodes) {
        size_t nc = c->cap_nodes ? c->cap_nodes * 2 : 64;
        cnode_t **nn = realloc(c->nodes, nc * sizeof *nn);
        if (!nn)
            return NULL;
        c->nodes = nn;
        c->cap_nodes = nc;
    }
    cnode_t *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->d.name = n->d.addr = n->d.host = "";
    n->id = id;
    n->conn = conn;
    memcpy(n->ids, ids, 16);
    n->state = NS_NEW;
    n->connected = 1;
    n->node_rank = -1;
    n->exp_idx = -1;
    n->assign_k = -1;
    n->last_seen = now;
    i = (int)c->n_nodes;
    /* both maps or neither: an index in one without the node would be read out of bounds */
    if (u64map_reserve(&c->by_id) < 0 || u64map_reserve(&c->by_conn) < 0) {
        free(n);
        return NULL;
    }
    u64map_put(&c->by_id, id, i);
    u64map_put(&c->by_conn, conn, i);
    c->nodes[c->n_nodes++] = n;
    c->connected++;
    *idx = i;
    return n;
}

/* Keeps the descriptor, its strings in one allocation (see cdesc_t). */
int coord_node_set_desc(cnode_t *n, const rdzv_desc_rec_t *d)
{
    size_t ln = strlen(d->name) + 1, la = strlen(d->addr) + 1, lh = strlen(d->host) + 1;
    size_t ld = strlen(d->domain) + 1;
    char *s = malloc(ln + la + lh + ld);
    if (!s)
        return -ENOMEM;
    memcpy(s, d->name, ln);
    memcpy(s + ln, d->addr, la);
    memcpy(s + ln + la, d->host, lh);
    memcpy(s + ln + la + lh, d->domain, ld);
    free(n->strs);
    n->strs = s;
    n->d.name = s;
    n->d.addr = s + ln;
    n->d.host = s + ln + la;
    n->d.domain = s + ln + la + lh;
    n->d.nproc = d->nproc;
    n->d.want_rank = d->want_rank;
    n->d.pid = d->pid;
    n->d.service = d->service;
    n->d.progress = d->has_progress ? d->progress : -1;
    n->d.relay_port = relay_addr_numeric(d->addr) ? d->relay_port : 0;
    return 0;
}

/* With segments: would the waiting nodes and the members make a larger round (a new whole
 * segment) than the running one? */
static int seg_grows(coord_t *c)
{
    return coord_round_seg_pick(c, NS_MEMBER, NS_WAITING, 0) > c->members;
}

/* A node's k-th join. Admitted to the open round; queued for the next while one runs (an elastic
 * job with room restarts for it now); answered at once when the job is over or the node is a
 * member of the running round. Every answer goes to the key of this k, so an answer to an
 * earlier join can never be taken for this one. A repeated join changes nothing. */
void coord_on_join(coord_t *c, cnode_t *n, int idx, int k, const char *val, size_t vlen,
             double now)
{
    rdzv_desc_rec_t d;
    if (k != n->assign_k)
        forget_answer(c, n);
    n->join_k = k;
    if (rdzv_desc_decode(val, vlen, &d) < 0) {
        coord_answer_error(c, n, "rejected", "unreadable node descriptor");
        return;
    }
    if (n->state == NS_JOINED || n->state == NS_WAITING)
        return; /* a repeated join changes nothing but the key it is answered on */
    if (n->state == NS_MEMBER && c->phase == COORD_RUNNING && k == n->assign_k) {
        /* the same join again, from a node whose join also came up the relay tree: its answer
         * stands, written now if the round closed in place without it */
        if (n->assign_pending)
            coord_round_write_assignments(c, 1, now);
        return;
    }
    if (n->state == NS_MEMBER && c->phase == COORD_RUNNING) {
        coord_answer_error(c, n, "rejected", "joined again while its round is running");
        return;
    }
    if (coord_node_set_desc(n, &d) < 0) {
        coord_answer_error(c, n, "rejected", "the job store host is out of memory");
        return;
    }
    if (c->phase == COORD_OVER) {
        coord_answer_error(c, n, c->over_kind, c->over_text);
        n->state = NS_GONE;
        return;
    }
    if (n->state == NS_GONE || n->state == NS_MEMBER)
        n->state = NS_NEW;
    if (coord_badnodes_refuse(c, n, idx, now))
        return;
    if (c->phase == COORD_OPEN) {
        if (coord_round_admit(c, n, idx, now) == 0)
            coord_round_check_close(c, now);
        return;
    }
    /* running: wait for the next round; an elastic job with room restarts for it now */
    n->state = NS_WAITING;
    c->waiting++;
    if (c->elastic && !c->stopped &&
        (c->p.segment_size > 1 ? seg_grows(c) : c->members + c->waiting <= c->p.max_nodes)) {
        char why[RDZV_REASON_MAX];
        sfmt(why, sizeof why, "membership change: %.100s joined", coord_node_label(n));
        coord_round_stop(c, FK_JOINED, NULL, why, now);
    } else {
        coord_act_log(c, "rendezvous '%s': %s waits for the next round (round %d is running with %d "
                   "of at most %d nodes)",
                c->run_id, coord_node_label(n), c->round, c->members, c->p.max_nodes);
    }
}

/* Every worker of member n exited 0 in round r. Once every member that is not a service node is
 * done the job has finished: P r/<R>/end says so (the service nodes stop their workers when they
 * read it) and later joiners are told "finished". */
static void on_done(coord_t *c, cnode_t *n, int r)
{
    if (n->state != NS_MEMBER || c->phase != COORD_RUNNING || r != c->round || n->done)
        return;
    n->done = 1;
    if (n->d.service)
        return;   /* counted among c->services already */
    if (++c->done < c->members - c->services || c->stopped)
        return;
    char key[256], val[64];
    sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round);
    int len = rdzv_end_encode(NULL, val, sizeof val);
    if (len >= 0)
        coord_act_set(c, key, val, (size_t)len);
    c->finished = 1;
    char text[256];
    if (c->services)
        sfmt(text, sizeof text, "job '%s' finished: all %d nodes done in round %d (%d service "
             "node%s to stop)", c->run_id, c->members - c->services, c->round, c->services,
             c->services == 1 ? "" : "s");
    else
        sfmt(text, sizeof text, "job '%s' finished: all %d nodes done in round %d", c->run_id,
             c->members, c->round);
    coord_act_log(c, "%s", text);
    coord_round_go_over(c, "finished", text);
}

/* A member's first worker failure in round r: a stop reason. What the record leaves out (host,
 * name, time) is filled from what the coordinator knows; the node rank is always its own. */
static void on_fail(coord_t *c, cnode_t *n, int r, const char *val, size_t vlen, double now)
{
    if (n->state != NS_MEMBER || r != c->round)
        return;
    rdzv_failure_t f;
    rdzv_failure_decode(val, vlen, &f);
    if (!f.host[0])
        sfmt(f.host, sizeof f.host, "%s", n->d.addr);
    if (!f.node_name[0])
        sfmt(f.node_name, sizeof f.node_name, "%s", coord_node_label(n));
    f.node_rank = n->node_rank;
    if (!f.reason[0])
        sfmt(f.reason, sizeof f.reason, "failed");
    if (f.time <= 0)
        f.time = now;
    char why[RDZV_REASON_MAX];
    coord_round_fail_summary(&f, why, sizeof why);
    coord_round_stop(c, FK_WORKER, &f, why, now);
}

/* A member's report that another node of round r is gone as its discovery saw it: the node
 * that joined with that name (or, failing that, that address) is treated exactly as if its
 * connection had closed. Only members of the running round r are touched, so a late report
 * cannot hit a node that joined later under the same name. */
static void on_peer(coord_t *c, cnode_t *n, int r, const char *val, size_t vlen, double now)
{
    if (n->state != NS_MEMBER || c->phase != COORD_RUNNING || r != c->round)
        return;
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX], reason[RDZV_REASON_MAX];
    if (kv_get(val, vlen, "name", name, sizeof name) < 0)
        name[0] = '\0';
    if (kv_get(val, vlen, "addr", addr, sizeof addr) < 0)
        addr[0] = '\0';
    if (kv_get(val, vlen, "reason", reason, sizeof reason) < 0 || !reason[0])
        sfmt(reason, sizeof reason, "gone");
    int found = -1;
    for (int pass = 0; pass < 2 && found < 0; pass++) {
        const char *want = pass ? addr : name;
        for (size_t i = 0; want[0] && i < c->n_nodes && found < 0; i++) {
            const cnode_t *m = c->nodes[i];
            if (m != n && m->state == NS_MEMBER && !strcmp(pass ? m->d.addr : m->d.name, want))
                found = (int)i;
        }
    }
    if (found < 0)
        return;
    char why[RDZV_REASON_MAX];
    sfmt(why, sizeof why, "agent lost: %.60s (seen by %.40s)", reason, coord_node_label(n));
    coord_round_node_gone(c, c->nodes[found], found, FK_LOST, why, now);
}

/* A node's health-check record: kept for `podrun status`, decides nothing (a failed check
 * also sends a failure record or a leave, which do). */
static void on_health(cnode_t *n, const char *val, size_t vlen, double now)
{
    rdzv_health_t h;
    if (rdzv_health_decode(val, vlen, now, &h) < 0)
        return;
    free(n->health_why);
    n->health_why = NULL;
    if (h.state == RDZV_HEALTH_FAILED && (n->health_why = strdup(h.why)) == NULL)
        h.state = RDZV_HEALTH_NONE;   /* without memory: not shown, rather than shown wrong */
    n->health = h.state;
    n->health_interval = (float)h.interval;
    n->health_checked = h.checked;
}

/* The joins of a relay's subtree, written by the node that took them to the store (relay.h):
 * each one as that node's own join would be. Only a member of the stopped round, expected back,
 * with a join it has not sent yet: a gather cannot join a stranger or take a node out of a round
 * it is in. What is not taken here, its node sends to the store itself a heartbeat period on. */
static void on_gather(coord_t *c, const char *val, size_t vlen, double now)
{
    const char *p = val, *end = val + vlen, *rec;
    uint64_t id;
    int k;
    size_t len;
    while (p < end && relay_entry_next(&p, end, &id, &k, &rec, &len) == 0) {
        int idx = u64map_get(&c->by_id, id);
        if (idx < 0)
            continue;
        cnode_t *n = c->nodes[idx];
        if (n->state != NS_STOPPED || k <= n->join_k || c->phase != COORD_OPEN)
            continue;
        n->last_seen = now;
        c->tree_joins++; /* before the join: it may be the one that closes the round */
        n->via_tree = 1;
        coord_on_join(c, n, idx, k, rec, len, now);
    }
}

/* Parses "<prefix><16 hex id>/<what>[/<num>]" and hands the record to its handler; any other key
 * under the prefix is ignored (noise, or an agent of another version). Every write proves its
 * node alive, including a node dropped as silent that turns out not to be. */
void coord_on_write(coord_t *c, uint64_t conn, const char *key, size_t klen, const char *val,
                    size_t vlen, double now)
{
    coord_q_reset(c);
    size_t pl = strlen(c->observe_prefix);
    if (klen <= pl + 17 || memcmp(key, c->observe_prefix, pl) != 0 || key[pl + 16] != '/')
        return;
    char ids[17], rest[64];
    memcpy(ids, key + pl, 16);
    ids[16] = '\0';
    char *end;
    uint64_t id = strtoull(ids, &end, 16);
    if (*end || id == 0 || klen - pl - 17 >= sizeof rest)
        return;
    memcpy(rest, key + pl + 17, klen - pl - 17);
    rest[klen - pl - 17] = '\0';

    char *slash = strchr(rest, '/');
    long num = -1;
    if (slash) {
        *slash = '\0';
        num = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || num < 0 || num > (1L << 30))
            return;
    }
    enum { OP_HB, OP_JOIN, OP_DONE, OP_FAIL, OP_LEAVE, OP_PEER, OP_HEALTH, OP_GATHER, OP_COUNT };
    static const char *const ops[OP_COUNT] = {"hb",   "join",   "done",  "fail",
                                              "leave", "peer", "health", "gather"};
    int op = 0;
    while (op < OP_COUNT && strcmp(rest, ops[op]) != 0)
        op++;
    if (op == OP_COUNT)
        return;
    int idx;
    cnode_t *n = coord_node_for(c, conn, id, ids, &idx, now);
    if (!n)
        return;
    n->last_seen = now;
    /* a write proves the connection open, also for a node dropped as silent that came back:
     * its close must count again */
    if (!n->connected) {
        n->connected = 1;
        c->connected++;
    }
    switch (op) {
    case OP_JOIN:
        if (num >= 0) {
            n->via_tree = 0; /* it waits on its assign key: no later than the go */
            coord_on_join(c, n, idx, (int)num, val, vlen, now);
        }
        break;
    case OP_DONE:
        if (num >= 0)
            on_done(c, n, (int)num);
        break;
    case OP_FAIL:
        if (num >= 0)
            on_fail(c, n, (int)num, val, vlen, now);
        break;
    case OP_PEER:
        if (num >= 0)
            on_peer(c, n, (int)num, val, vlen, now);
        break;
    case OP_LEAVE:
        if (n->state != NS_GONE) {
            char why[RDZV_REASON_MAX], r[RDZV_REASON_MAX - 12];   /* after "agent left: " */
            size_t l = vlen < sizeof r - 1 ? vlen : sizeof r - 1;
            memcpy(r, val ? val : "", val ? l : 0);
            r[val ? l : 0] = '\0';
            sfmt(why, sizeof why, "agent left: %s", r[0] ? r : "shutting down");
            coord_round_node_gone(c, n, idx, FK_LEFT, why, now);
        }
        break;
    case OP_HEALTH:
        on_health(n, val, vlen, now);
        break;
    case OP_GATHER:
        on_gather(c, val, vlen, now);
        break;
    default: /* a heartbeat: last_seen, and the time of a health check that found no news */
        if (vlen && n->health >= RDZV_HEALTH_WAITING) {
            double t = rdzv_health_ago_decode(val, vlen, now);
            if (t > 0)
                n->health_checked = t;
        }
        break;
    }
}

/* Shutting down and no agent is connected any more: COORD_CLOSED, once. */
void coord_maybe_closed(coord_t *c)
{
    if (c->closing && !c->closed_sent && c->connected <= 0) {
        c->closed_sent = 1;
        coord_act_timer(c, COORD_T_CLOSE, -1);
        coord_q_push(c, COORD_CLOSED);
    }
}

/* Forgets the nodes that are gone and whose connection closed: nothing can refer to them any
 * more (a later write from the same id would be a new connection, hence a new node). Keeps the
 * order of the others, which is the order waiting nodes are admitted in, and renumbers what
 * holds an index (the two maps, rank_owner). O(N), run when at least half of the nodes are such,
 * so O(1) per node gone. */
static void compact_nodes(coord_t *c)
{
    int keep = 0;
    u64map_t by_id = {0}, by_conn = {0};
    int *renum = malloc(c->n_nodes * sizeof *renum);
    int ok = renum != NULL;
    for (size_t i = 0; ok && i < c->n_nodes; i++) {
        const cnode_t *n = c->nodes[i];
        renum[i] = n->state == NS_GONE && !n->connected ? -1 : keep++;
        if (renum[i] >= 0)
            ok = u64map_put(&by_id, n->id, renum[i]) == 0 &&
                 u64map_put(&by_conn, n->conn, renum[i]) == 0;
    }
    if (!ok) { /* without memory the nodes stay, and the next close tries again */
        u64map_free(&by_id);
        u64map_free(&by_conn);
        free(renum);
        return;
    }
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (renum[i] >= 0) {
            c->nodes[renum[i]] = c->nodes[i];
        } else {
            free(c->nodes[i]->strs);
            free(c->nodes[i]->health_why);
            free(c->nodes[i]);
        }
    }
    for (int r = 0; r < c->p.max_nodes; r++)
        if (c->rank_owner[r] >= 0)
            c->rank_owner[r] = renum[c->rank_owner[r]];
    free(renum);
    c->n_nodes = (size_t)keep;
    u64map_free(&c->by_id);
    u64map_free(&c->by_conn);
    c->by_id = by_id;
    c->by_conn = by_conn;
}

static void lost(coord_t *c, uint64_t conn, int kind, const char *why, double now);

/* A node's connection closed (`why` says how, NULL: closed). A node still part of the job is
 * lost; a member of a finished or ended job just went home. */
void coord_on_close(coord_t *c, uint64_t conn, const char *why, double now)
{
    char reason[RDZV_REASON_MAX];
    sfmt(reason, sizeof reason, "agent lost: %s", why ? why : "connection closed");
    /* a closed connection is an agent gone, and its workers with it (parent-death signal); one
     * that timed out may be an agent cut off, whose workers run until it finds out */
    lost(c, conn, why ? FK_UNREACHABLE : FK_LOST, reason, now);
}

/* A node lost without a closed connection (its etcd lease ended): it may be alive. */
void coord_on_lost(coord_t *c, uint64_t conn, const char *why, double now)
{
    lost(c, conn, FK_UNREACHABLE, why, now);
}

static void lost(coord_t *c, uint64_t conn, int kind, const char *why, double now)
{
    coord_q_reset(c);
    int idx = u64map_get(&c->by_conn, conn);
    if (idx < 0)
        return;
    cnode_t *n = c->nodes[idx];
    if (!n->connected)
        return;
    n->connected = 0;
    c->connected--;
    if (n->state != NS_GONE && !(n->state == NS_MEMBER && c->phase == COORD_OVER))
        coord_round_node_gone(c, n, idx, kind, why, now);
    forget_answer(c, n);
    coord_maybe_closed(c);
    /* in a job that is over nobody comes back: the nodes go with the coordinator */
    if (c->phase != COORD_OVER && c->n_nodes - (size_t)c->connected > c->n_nodes / 2 + 16)
        compact_nodes(c);
}

/* Every keep_alive_interval: a node that has sent nothing for the hang bound H (RDZV_HANG_FACTOR
 * x keep_alive_interval x keep_alive_max_attempt) is gone. Its connection is still open and its
 * machine still acknowledges (else the kernel would have closed it after one window: a cut
 * network or a dead machine is a closed connection, see rendezvous.h "Liveness"), so it is hung
 * or stopped; a node that is only slow has H to say something. A late sweep restarts everyone's
 * clock instead: this loop was stalled, not every node. */
static void sweep(coord_t *c, double now)
{
    double limit = RDZV_HANG_FACTOR * c->p.keep_alive_interval * c->p.keep_alive_max_attempt;
    /* a late sweep means this loop was stalled, not that every node went silent */
    if (now - c->last_sweep > 2 * c->p.keep_alive_interval) {
        for (size_t i = 0; i < c->n_nodes; i++)
            c->nodes[i]->last_seen = now;
    }
    c->last_sweep = now;
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (!n->connected || n->state == NS_GONE || n->state == NS_NEW)
            continue;
        if (n->state == NS_MEMBER && (n->done || c->phase == COORD_OVER))
            continue;
        if (now - n->last_seen > limit) {
            char why[64];
            sfmt(why, sizeof why, "node silent for %g s", limit);
            c->silent_nodes++;
            coord_round_node_gone(c, n, (int)i, FK_SILENT, why, now);
        }
    }
    coord_act_timer(c, COORD_T_SWEEP, now + c->p.keep_alive_interval);
}

/* One of the timers the host armed on our word. A timer that fires after the state it was for
 * has passed (the round closed, the job ended) does nothing. */
void coord_on_timer(coord_t *c, int timer, double now)
{
    coord_q_reset(c);
    char line[RDZV_LINE_MAX];
    switch (timer) {
    case COORD_T_JOIN:
        if (c->phase != COORD_OPEN)
            break;
        if (coord_round_ready_nodes(c) >= c->p.min_nodes) {
            coord_round_close(c, now);
        } else {
            progress_line(c, now, 1, line, sizeof line);
            coord_act_log(c, "%s", line);
            coord_round_go_over(c, "timeout", line);
        }
        break;
    case COORD_T_LAST_CALL:
        c->last_call_armed = 0;
        if (c->phase == COORD_OPEN && coord_round_ready_nodes(c) >= c->p.min_nodes)
            coord_round_close(c, now);
        break;
    case COORD_T_SWEEP:
        sweep(c, now);
        break;
    case COORD_T_DECIDE:
        coord_round_decide(c, now);
        break;
    case COORD_T_ASSIGN:
        if (c->phase == COORD_RUNNING)
            coord_round_write_assignments(c, 1, now);
        break;
    case COORD_T_FENCE:
        if (c->phase == COORD_OPEN && c->close_deferred &&
            coord_round_ready_nodes(c) >= c->p.min_nodes)
            coord_round_close(c, now);
        break;
    case COORD_T_PROGRESS:
        if (c->phase != COORD_OPEN)
            break;
        progress_line(c, now, 0, line, sizeof line);
        coord_set_status(c, line);
        coord_act_log(c, "%s", line);
        coord_act_timer(c, COORD_T_PROGRESS, now + c->p.progress_interval);
        break;
    case COORD_T_CLOSE:
        if (c->closing && !c->closed_sent) {
            char names[512] = "";
            textlist_t l = {names, sizeof names, 0, 0, 8};
            for (size_t i = 0; i < c->n_nodes; i++)
                if (c->nodes[i]->connected)
                    textlist_add(&l, coord_node_label(c->nodes[i]));
            textlist_end(&l);
            coord_act_log(c, "rendezvous '%s': closing the store with %d agent%s still connected: %s",
                    c->run_id, c->connected, c->connected == 1 ? "" : "s", names);
            c->connected = 0;
            coord_maybe_closed(c);
        }
        break;
    default:
        break;
    }
}

/* The host is closing. A running round is decided at once (exit) and an open one ends, so no agent
 * waits for what cannot come; COORD_CLOSED follows once every agent has disconnected, or after
 * close_timeout. */
void coord_shutdown(coord_t *c, double now)
{
    coord_q_reset(c);
    if (c->closing)
        return;
    c->closing = 1;
    /* nobody may be left waiting for a decision or a round that can no longer come */
    if (c->phase == COORD_RUNNING && !c->decided) {
        if (!c->stopped) {
            rdzv_failure_t f;
            rdzv_failure_init(&f);
            sfmt(f.host, sizeof f.host, "%s", c->store_host);
            sfmt(f.node_name, sizeof f.node_name, "%s", c->store_host);
            f.time = now;
            sfmt(f.reason, sizeof f.reason, "%s", HOST_CLOSING);
            coord_round_record_failure(c, &f);
            c->stopped = 1;
            sfmt(c->stop_why, sizeof c->stop_why, "%s", HOST_CLOSING);
        }
        coord_round_decide(c, now);
    }
    if (c->phase == COORD_OPEN) {
        char text[256];
        sfmt(text, sizeof text, "job '%s': the job store host is shutting down", c->run_id);
        coord_round_go_over(c, "ended", text);
    }
    coord_act_timer(c, COORD_T_SWEEP, -1);
    coord_round_stop_open_timers(c);
    coord_act_timer(c, COORD_T_DECIDE, -1);
    if (c->connected > 0)
        coord_act_timer(c, COORD_T_CLOSE, now + c->p.close_timeout);
    coord_maybe_closed(c);
}

const char *coord_observe_prefix(const coord_t *c)
{
    return c->observe_prefix;
}

void coord_info(const coord_t *c, coord_info_t *info)
{
    info->round = c->round;
    info->phase = c->phase;
    info->joined = c->joined;
    info->members = c->members;
    info->waiting = c->waiting;
    info->connected = c->connected;
    info->nodes = (int)c->n_nodes;
    info->restarts_used = c->restarts_used;
    info->finished = c->finished;
    info->over_kind = c->over_kind;
    info->over_text = c->over_text;
    info->bad = c->bad.v;
    info->n_bad = c->bad.n;
}

/* `expected`: comma-separated names, blanks trimmed, duplicates dropped. */
static int parse_expected(coord_t *c, const char *list)
{
    if (!list || !*list)
        return 0;
    int cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    c->exp_names = calloc((size_t)cap, sizeof *c->exp_names);
    c->exp_joined = calloc((size_t)cap, sizeof *c->exp_joined);
    if (!c->exp_names || !c->exp_joined)
        return -ENOMEM;
    c->n_exp = 0; /* the list is built from empty; exp_find reads only what it holds */
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        while (l && isspace((unsigned char)*p))
            p++, l--;
        while (l && isspace((unsigned char)p[l - 1]))
            l--;
        if (l) {
            char *s = strndup(p, l);
            if (!s)
                return -ENOMEM;
            if (coord_exp_find(c, s) >= 0)
                free(s);
            else
                c->exp_names[c->n_exp++] = s;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

coord_t *coord_new(const coord_params_t *p, double now)
{
    if (!p || !p->run_id || p->min_nodes < 1 || p->max_nodes < p->min_nodes ||
        p->segment_size < 0 || p->max_nodes > (1 << 20) || p->max_restarts < 0 || p->max_no_progress < 0 || p->keep_alive_interval <= 0 ||
        p->keep_alive_max_attempt < 1 || p->progress_interval <= 0)
        return NULL;
    coord_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->p = *p;
    c->prog_base = -1;
    c->run_id = strdup(p->run_id);
    c->store_host = strdup(p->store_host ? p->store_host : "");
    c->rank_owner = malloc((size_t)p->max_nodes * sizeof *c->rank_owner);
    char prefix[RDZV_RUN_ID_MAX + 16];
    if (c->run_id && rdzv_run_prefix(prefix, sizeof prefix, p->run_id) > 0) {
        c->prefix = strdup(prefix);
        if (asprintf(&c->observe_prefix, "%sn/", prefix) < 0)
            c->observe_prefix = NULL;
    }
    if (!c->run_id || !c->store_host || !c->rank_owner || !c->prefix || !c->observe_prefix ||
        parse_expected(c, p->expected) < 0) {
        coord_free(c);
        return NULL;
    }
    c->p.run_id = c->run_id;
    c->p.store_host = c->store_host;
    c->p.expected = NULL;
    sfmt(c->host_id, sizeof c->host_id, "%s", p->host_id ? p->host_id : "");
    c->p.host_id = c->host_id;
    c->elastic = p->min_nodes < p->max_nodes;
    c->last_sweep = c->started = now;
    c->last_fail_round = -1;
    coord_act_timer(c, COORD_T_SWEEP, now + p->keep_alive_interval);
    coord_round_open(c, 0, now);
    return c;
}

void coord_free(coord_t *c)
{
    if (!c)
        return;
    coord_q_reset(c);
    free(c->q);
    for (size_t i = 0; i < c->n_nodes; i++) {
        free(c->nodes[i]->strs);
        free(c->nodes[i]->health_why);
        free(c->nodes[i]);
    }
    free(c->nodes);
    u64map_free(&c->by_id);
    u64map_free(&c->by_conn);
    for (int i = 0; i < c->n_exp; i++)
        free(c->exp_names[i]);
    free(c->exp_names);
    free(c->exp_joined);
    free(c->rank_owner);
    free(c->run_id);
    free(c->store_host);
    free(c->prefix);
    free(c->observe_prefix);
    free(c);
}
