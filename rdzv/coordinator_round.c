/* rdzv/coordinator_round.c — the round state machine: opening a round, admitting joins, closing
 * it with ranks, stopping it and deciding what comes next; nodes that leave. */
#include "rdzv/coordinator_int.h"
#include "rdzv/relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The open round's timers (join, last call, progress) are off. */
void coord_round_stop_open_timers(coord_t *c)
{
    coord_act_timer(c, COORD_T_JOIN, -1);
    coord_act_timer(c, COORD_T_LAST_CALL, -1);
    coord_act_timer(c, COORD_T_PROGRESS, -1);
    c->last_call_armed = 0;
}

/* The job is over (finished, timed out, ended). Everyone still waiting for an answer gets `kind`
 * and `text` now, and on_join gives every later joiner the same, so nobody waits for a round that
 * will not come. */
void coord_round_go_over(coord_t *c, const char *kind, const char *text)
{
    c->phase = COORD_OVER;
    sfmt(c->over_kind, sizeof c->over_kind, "%s", kind);
    sfmt(c->over_text, sizeof c->over_text, "%s", text);
    coord_round_stop_open_timers(c);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_WAITING || n->state == NS_JOINED) {
            coord_answer_error(c, n, kind, text);
            n->state = NS_GONE;
        }
    }
    c->waiting = c->joined = 0;
    coord_set_status(c, text);
}

/* Adds a joining node to the open round. A wanted node rank must be below MAX and free, or the
 * node is rejected at once: no later round could give it either. Keeps the counts round_check_close
 * decides on (joined, expected_missing, rank_owner) in step. 0, or -1 when rejected. */
int coord_round_admit(coord_t *c, cnode_t *n, int idx, double now)
{
    int want = n->d.want_rank;
    if (want >= c->p.max_nodes) {
        char text[256];
        sfmt(text, sizeof text,
                 "node rank %d of %s is out of range: the job has at most %d nodes (ranks 0..%d)",
                 want, coord_node_label(n), c->p.max_nodes, c->p.max_nodes - 1);
        coord_act_log(c, "rendezvous '%s': rejected %s", c->run_id, text);
        coord_answer_error(c, n, "rejected", text);
        n->state = NS_GONE;
        return -1;
    }
    if (want >= 0 && c->rank_owner[want] >= 0 && c->rank_owner[want] != idx) {
        cnode_t *o = c->nodes[c->rank_owner[want]];
        char text[512];
        sfmt(text, sizeof text,
                 "node rank %d of %s (%s) is already taken by %s (%s): give every node its own "
                 "--node-rank",
                 want, coord_node_label(n), n->d.addr, coord_node_label(o), o->d.addr);
        coord_act_log(c, "rendezvous '%s': rejected %s", c->run_id, text);
        coord_answer_error(c, n, "rejected", text);
        n->state = NS_GONE;
        return -1;
    }
    if (want >= 0)
        c->rank_owner[want] = idx;
    if (n->state == NS_STOPPED)
        c->expected_missing--;
    n->state = NS_JOINED;
    c->joined++;
    n->last_seen = now;
    if (c->round == 0 && c->n_exp) {
        int e = coord_exp_find(c, n->d.name);
        if (e >= 0 && !c->exp_joined[e]) {
            c->exp_joined[e] = 1;
            n->exp_idx = e;
            c->expected_missing--;
        }
    }
    return 0;
}

/* A joined node leaves the open round before it closed: coord_round_admit() undone, its rank free
 * again. */
static void unadmit(coord_t *c, cnode_t *n, int idx)
{
    c->joined--;
    if (n->d.want_rank >= 0 && n->d.want_rank < c->p.max_nodes &&
        c->rank_owner[n->d.want_rank] == idx)
        c->rank_owner[n->d.want_rank] = -1;
    if (n->exp_idx >= 0 && c->round == 0) {
        c->exp_joined[n->exp_idx] = 0;
        c->expected_missing++;
    }
    n->exp_idx = -1;
}

/* Opens round `round`. The live members of the last round become expected (STOPPED), so an
 * unchanged job closes the moment the last of them is back; nodes that waited for room join at
 * once, up to MAX. Arms the join timeout and the first progress line. */
void coord_round_open(coord_t *c, int round, double now)
{
    c->round = round;
    c->phase = COORD_OPEN;
    c->joined = 0;
    c->expected_missing = 0;
    c->expect_known = round > 0 || c->n_exp > 0;
    if (round == 0)
        c->expected_missing = c->n_exp;
    c->round_opened = c->round_since = now;
    c->join_deadline = now + c->p.join_timeout;
    c->last_call_armed = 0;
    c->close_deferred = 0;
    c->stopped = c->decided = c->stop_counted = 0;
    c->n_failures = 0;
    for (int r = 0; r < c->p.max_nodes; r++)
        c->rank_owner[r] = -1;
    coord_act_timer(c, COORD_T_JOIN, c->join_deadline);
    coord_act_timer(c, COORD_T_LAST_CALL, -1);
    /* the first line soon, so a short wait is explained too; then every progress_interval */
    coord_act_timer(c, COORD_T_PROGRESS,
              now + (c->p.progress_interval < 1 ? c->p.progress_interval : 1));
    c->tree_joins = 0;
    /* live members of the previous round are expected back; waiting nodes join right away */
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        n->was_member = n->state == NS_MEMBER || n->state == NS_STOPPED;
        if (n->was_member) {
            n->state = NS_STOPPED;
            c->expected_missing++;
        }
    }
    c->members = c->done = 0;
    /* ... up to MAX: the rest keep waiting for the round after (with segments all join, and the
       close picks whole segments among them) */
    for (size_t i = 0; i < c->n_nodes && (c->joined < c->p.max_nodes || c->p.segment_size > 1);
         i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_WAITING) {
            c->waiting--;
            coord_round_admit(c, n, (int)i, now);
        }
    }
    coord_round_check_close(c, now);
}

/* The nodes in state s1 or s2 as rdzv_rank_node_t, ix[i] their index in c->nodes; their number,
 * or -ENOMEM. */
static int seg_nodes(coord_t *c, int s1, int s2, int **ix, rdzv_rank_node_t **rn)
{
    int n = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        n += c->nodes[i]->state == s1 || c->nodes[i]->state == s2;
    *ix = malloc((size_t)(n ? n : 1) * sizeof **ix);
    *rn = malloc((size_t)(n ? n : 1) * sizeof **rn);
    if (!*ix || !*rn) {
        free(*ix), free(*rn);
        return -ENOMEM;
    }
    int k = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i]->state == s1 || c->nodes[i]->state == s2) {
            cnode_t *m = c->nodes[i];
            (*ix)[k] = (int)i;
            (*rn)[k++] = (rdzv_rank_node_t){m->d.name, m->d.addr, m->ids, m->d.want_rank,
                                            m->d.nproc, -1, 0, m->d.domain,
                                            m->was_member || m->state == NS_MEMBER};
        }
    return n;
}

/* One line for each domain left out for having fewer than --segment-size nodes. */
static void seg_log_small(coord_t *c, const rdzv_rank_node_t *rn, const int *take, int n)
{
    for (int i = 0; i < n; i++) {
        int first = take[i] < 0, count = 0;
        for (int j = 0; j < n && first; j++)
            if (take[j] < 0 && strcmp(rn[j].domain, rn[i].domain) == 0) {
                first = j >= i;
                count++;
            }
        if (first)
            coord_act_log(c,
                    "rendezvous '%s' round %d: NVLink domain %s has %d node%s, fewer than "
                    "--segment-size %d: left out",
                    c->run_id, c->round, *rn[i].domain ? rn[i].domain : "(none)", count,
                    count == 1 ? "" : "s", c->p.segment_size);
    }
}

/* Whole segments (coord_params.segment_size): how many of the nodes in state s1 or s2 a round can
 * take. With `apply` (joined nodes, at the close), the others go back to waiting for a later
 * round (spares), and a domain too small for one segment is named. The count, or -ENOMEM. */
int coord_round_seg_pick(coord_t *c, int s1, int s2, int apply)
{
    int *ix;
    rdzv_rank_node_t *rn;
    int n = seg_nodes(c, s1, s2, &ix, &rn);
    if (n < 0)
        return n;
    int *take = malloc((size_t)(n ? n : 1) * sizeof *take);
    int got = take ? rdzv_pick_segments(rn, n, c->p.segment_size, c->p.max_nodes, take)
                   : -ENOMEM;
    if (got >= 0 && apply) {
        seg_log_small(c, rn, take, n);
        for (int i = 0; i < n; i++)
            if (take[i] <= 0) {
                cnode_t *m = c->nodes[ix[i]];
                unadmit(c, m, ix[i]);
                m->state = NS_WAITING;
                c->waiting++;
                coord_act_log(c, "rendezvous '%s' round %d: %s waits as a spare (no whole segment of "
                           "%d nodes of its NVLink domain is left for it)",
                        c->run_id, c->round, coord_node_label(m), c->p.segment_size);
            }
    }
    free(take), free(ix), free(rn);
    return got;
}

/* The joined nodes that count towards closing: all of them, or whole segments. */
int coord_round_ready_nodes(coord_t *c)
{
    if (c->p.segment_size <= 1)
        return c->joined;
    int got = coord_round_seg_pick(c, NS_JOINED, NS_JOINED, 0);
    return got < 0 ? 0 : got;
}

/* The relay tree of a round of n members (v[i]: node rank i, NULL for none): tree[i] is
 * node rank i's place among the members that relay (rdzv/relay.h), -1 for one that does not,
 * tree[n] how many do, and tree[n + 1 + j] the node rank of place j. NULL without memory: then
 * every member waits on the store itself. */
static int *relay_tree(cnode_t **v, int n)
{
    int *tree = malloc((2 * (size_t)n + 1) * sizeof *tree);
    if (!tree)
        return NULL;
    int j = 0;
    for (int i = 0; i < n; i++) {
        tree[i] = v[i] && v[i]->d.relay_port > 0 ? j : -1;
        if (tree[i] >= 0)
            tree[n + 1 + j++] = i;
    }
    tree[n] = j;
    return tree;
}

static relay_ep_t relay_ep_of(cnode_t **v, int rank)
{
    const cnode_t *m = v[rank];
    relay_ep_t e = {rank, (uint16_t)m->d.relay_port, ""};
    sfmt(e.addr, sizeof e.addr, "%s", m->d.addr);
    return e;
}

/* Node rank i's relay links (its parent, its children) added to its assignment val[0..len):
 * the new length, or len when it takes no part or they do not fit. */
static int relay_assign_links(cnode_t **v, int n, const int *tree, int i, char *val, size_t cap,
                              size_t len)
{
    if (tree[i] < 0)
        return (int)len;
    const int count = tree[n], *at = tree + n + 1;
    int f = relay_fanout(count), first, p = relay_parent(tree[i], f);
    relay_links_t l;
    memset(&l, 0, sizeof l);
    if (p >= 0) {
        l.fed = 1;
        l.parent = relay_ep_of(v, at[p]);
    }
    l.n = relay_children(tree[i], count, f, &first);
    for (int k = 0; k < l.n; k++)
        l.child[k] = relay_ep_of(v, at[first + k]);
    kvbuf_t b = {val, cap, len, 0};
    relay_links_put(&b, &l);
    return b.overflow ? (int)len : (int)b.len;
}

void coord_round_write_assignments(coord_t *c, int pending, double now)
{
    int n = c->members;
    cnode_t **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) {
        coord_act_log(c, "rendezvous '%s' round %d: out of memory for the assignments; trying "
                      "again in 1 s", c->run_id, c->round);
        for (size_t j = 0; j < c->n_nodes; j++)
            c->nodes[j]->assign_pending |= c->nodes[j]->state == NS_MEMBER;
        coord_act_timer(c, COORD_T_ASSIGN, now + 1);
        return;
    }
    for (size_t j = 0; j < c->n_nodes; j++) {
        cnode_t *m = c->nodes[j];
        if (m->state == NS_MEMBER && m->node_rank >= 0 && m->node_rank < n)
            v[m->node_rank] = m;
    }
    int *tree = relay_tree(v, n);
    for (int i = 0; i < n; i++) {
        cnode_t *m = v[i];
        if (!m || m->assign_pending != pending)
            continue;
        m->assign_pending = 0;
        rdzv_assignment_t a = {
            .round = c->round,
            .node_rank = i,
            .nnodes = n,
            .rank_base = m->rank_base,
            .world_size = (int)c->world,
            .restart_count = c->restarts_used,
            .store_host = c->store_host,
            .store_port = c->p.store_port,
        };
        char key[256], val[512 + RELAY_LINKS_MAX];
        coord_node_key(c, key, sizeof key, m, "assign", m->assign_k);
        int len = rdzv_assign_encode(&a, val, sizeof val);
        if (len >= 0 && tree)
            len = relay_assign_links(v, n, tree, i, val, sizeof val, (size_t)len);
        if (len >= 0)
            coord_act_set(c, key, val, (size_t)len);
    }
    free(tree);
    free(v);
}

/* Closes the open round: ranks for every joined node (rdzv_assign_ranks), a fresh namespace for
 * the workers (queued before any assignment, so no worker of this attempt can read a key of the
 * last one), the go for joins that came up the relay tree, then each node's assignment on its
 * join's key (in place, none for those joins: see assign_pending below). Without memory nothing
 * changes and the join timer closes the round later. */
void coord_round_close(coord_t *c, double now)
{
    /* a lost member that may be alive still runs its workers, with their ranks: no one else
     * gets them until it must have found itself cut off and stopped them (split brain) */
    if (now < c->fence_until) {
        if (!c->close_deferred)
            coord_act_log(c, "rendezvous '%s' round %d: closing in %.1f s, once %s, lost while it "
                          "may be alive, must have stopped its workers",
                          c->run_id, c->round, c->fence_until - now, c->fence_who);
        c->close_deferred = 1;
        coord_act_timer(c, COORD_T_FENCE, c->fence_until);
        return;
    }
    c->close_deferred = 0;
    if (c->p.segment_size > 1 && coord_round_seg_pick(c, NS_JOINED, NS_JOINED, 1) < 0)
        return; /* the join timer retries */
    char stalled[RDZV_LINE_MAX];
    if (coord_progress_judge(c, stalled, sizeof stalled)) {
        /* attempts in a row without progress: no round starts, every node is told why */
        coord_act_log(c, "job '%s' stopped before round %d: %s; not restarted", c->run_id,
                      c->round, stalled);
        coord_round_go_over(c, "noprogress", stalled);
        return;
    }
    int n = c->joined, services = 0;
    cnode_t **v = malloc((size_t)n * sizeof *v);
    rdzv_rank_node_t *rn = malloc((size_t)n * sizeof *rn);
    int *order = malloc((size_t)n * sizeof *order);
    long long world = -ENOMEM;
    if (v && rn && order) {
        int k = 0;
        for (size_t i = 0; i < c->n_nodes && k < n; i++)
            if (c->nodes[i]->state == NS_JOINED) {
                cnode_t *m = c->nodes[i];
                v[k] = m;
                rn[k++] = (rdzv_rank_node_t){m->d.name, m->d.addr, m->ids, m->d.want_rank,
                                             m->d.nproc, -1, 0, m->d.domain, 0};
            }
        world = rdzv_assign_ranks(rn, n, order);
    }
    if (world < 0) {
        free(v);
        free(rn);
        free(order);
        return; /* the join timer retries */
    }
    for (int r = 0; r < n; r++) {
        const cnode_t *m = v[order[r]];
        if (m->d.want_rank >= n)
            coord_act_log(c,
                    "rendezvous '%s' round %d: node rank %d of %s does not fit %d nodes; it gets "
                    "a free one",
                    c->run_id, c->round, m->d.want_rank, coord_node_label(m), n);
    }

    /* a fresh namespace for the workers of this attempt, before anyone can start */
    action_store_t *s = coord_q_push(c, COORD_DELETE_WORKERS);
    if (s) {
        s->key = strdup("podrun/");
        s->a.key = s->key;
    }
    /* joins that came up the relay tree wait for the round's go (relay.h): "inplace" when every
     * member keeps the place it had, so its last assignment is this one but for the round and the
     * restart count; else "store", and they read their assignments as any other node */
    int in_place = 0;
    if (c->tree_joins > 0) {
        int same = world == c->world, was = 0;
        for (size_t j = 0; j < c->n_nodes; j++)
            was += c->nodes[j]->was_member;
        same = same && was == n;
        for (int i = 0; same && i < n; i++) {
            const cnode_t *m = v[order[i]];
            same = m->was_member && m->node_rank == i && m->rank_base == rn[order[i]].rank_base;
        }
        char key[256], go[RELAY_GO_MAX];
        sfmt(key, sizeof key, "%sr/%d/go", c->prefix, c->round);
        int len = relay_go_encode(c->round, c->restarts_used, same, go, sizeof go);
        if (len > 0)
            coord_act_set(c, key, go, (size_t)len);
        in_place = same;
    }
    if (c->round >= RDZV_KEEP_ROUNDS) { /* kept as long as the end records */
        char key[256];
        sfmt(key, sizeof key, "%sr/%d/go", c->prefix, c->round - RDZV_KEEP_ROUNDS);
        coord_act_delete(c, key);
    }
    for (int i = 0; i < n; i++) {
        cnode_t *m = v[order[i]];
        m->assign_k = m->join_k;
        m->state = NS_MEMBER;
        m->node_rank = i;
        m->rank_base = (int)rn[order[i]].rank_base;
        m->done = 0;
        services += m->d.service != 0;
        m->exp_idx = -1;
        /* in place, a member whose join came up the tree takes its go from its relay and
         * moves its last assignment to this round: it reads none from the store. Its
         * assignment is written only if it sends the same join to the store itself, having
         * given up on its relay (coord_on_join): then every such one at once */
        m->assign_pending = in_place && m->via_tree;
    }
    free(v);
    free(rn);
    free(order);
    c->phase = COORD_RUNNING;
    c->members = n;
    c->done = 0;
    c->services = services;
    c->joined = 0;
    c->world = world;
    c->round_since = now;
    coord_round_stop_open_timers(c);
    coord_round_write_assignments(c, 0, now);
    char line[256];
    sfmt(line, sizeof line,
             "rendezvous '%s' round %d complete: %d node%s, world size %lld, restart count %d "
             "(%.3f s)",
             c->run_id, c->round, n, n == 1 ? "" : "s", world, c->restarts_used,
             now - c->round_opened);
    coord_set_status(c, line);
    if (c->tree_joins > 0)
        coord_act_log(c, "%s; %d joined through the relay tree, %s", line, c->tree_joins,
                      in_place ? "in place" : "each reads its assignment from the store");
    else
        coord_act_log(c, "%s", line);
}

/* After any change to who has joined: close now (MAX joined, or MIN and everyone expected), or
 * arm the last call once MIN is reached, or take it back when a drop-out leaves fewer than MIN.
 * With whole segments a restart round that is full but still expects members of the last round
 * waits for them until the last call: spares must not take the place of survivors that are on
 * their way back (a member that is gone is not expected). */
void coord_round_check_close(coord_t *c, double now)
{
    if (c->phase != COORD_OPEN)
        return;
    int n = coord_round_ready_nodes(c);
    int full = n >= c->p.max_nodes &&
               !(c->p.segment_size > 1 && c->round > 0 && c->expected_missing > 0);
    if (full ||
        (n >= c->p.min_nodes && c->expect_known && c->expected_missing <= 0)) {
        coord_round_close(c, now);
    } else if (n >= c->p.min_nodes && !c->last_call_armed) {
        c->last_call_armed = 1;
        coord_act_timer(c, COORD_T_LAST_CALL, now + c->p.last_call_timeout);
    } else if (n < c->p.min_nodes && c->last_call_armed) {
        c->last_call_armed = 0;
        coord_act_timer(c, COORD_T_LAST_CALL, -1);
    }
}

static int cmp_fail(const void *pa, const void *pb)
{
    const rdzv_failure_t *a = pa, *b = pb;
    return a->time < b->time ? -1 : a->time > b->time ? 1 : 0;
}

/* Keeps the RDZV_MAX_FAILURES earliest failures sorted by time, so [0] is the root cause even
 * when reports arrive out of order. */
void coord_round_record_failure(coord_t *c, const rdzv_failure_t *f)
{
    if (c->n_failures < RDZV_MAX_FAILURES) {
        c->failures[c->n_failures++] = *f;
    } else if (f->time < c->failures[RDZV_MAX_FAILURES - 1].time) {
        c->failures[RDZV_MAX_FAILURES - 1] = *f;
    } else {
        return;
    }
    qsort(c->failures, (size_t)c->n_failures, sizeof *f, cmp_fail);
}

/* One line for a failure: "rank 3 on worker-1 exited with code 1", "worker-1: agent lost: …". */
void coord_round_fail_summary(const rdzv_failure_t *f, char *out, size_t cap)
{
    if (f->rank >= 0)
        sfmt(out, cap, "rank %d on %.60s %.100s", f->rank, f->node_name, f->reason);
    else
        sfmt(out, cap, "%.60s: %.100s", f->node_name, f->reason);
}

/* A reason to stop the running round; `f` may be NULL (a node joined). The decision itself
 * follows on COORD_T_DECIDE, armed for `now`, so that failures reported in the same pass of the
 * loop are sorted in and the root cause is the earliest of them. A worker's failure always uses
 * up a restart; in an elastic job a node leaving, lost or joining is a membership change that
 * does not. Reports after the decision are only logged: the decision is set once. */
void coord_round_stop(coord_t *c, int kind, const rdzv_failure_t *f, const char *why,
                double now)
{
    if (f)
        coord_round_record_failure(c, f);
    if (c->phase != COORD_RUNNING || c->decided) {
        if (f)
            coord_act_log(c, "rendezvous '%s' round %d: also %s on %s: %s", c->run_id, c->round,
                    kind == FK_WORKER ? "failed" : "lost", f->node_name, f->reason);
        return;
    }
    if (kind == FK_WORKER || !c->elastic)
        c->stop_counted = 1;
    if (c->stopped)
        return;
    c->stopped = 1;
    sfmt(c->stop_why, sizeof c->stop_why, "%s", why);
    coord_act_timer(c, COORD_T_DECIDE, now);
}

/* The job-wide decision for the stopped round, set once under P r/<R>/end so every agent reads
 * the same root cause. Restart while restarts are left, opening the next round in the same step
 * so that rejoining agents find it open; else exit, and the job is over. A closing store host
 * always exits: it leaves no store to restart in. */
void coord_round_decide(coord_t *c, double now)
{
    if (c->phase != COORD_RUNNING || !c->stopped || c->decided)
        return;
    c->decided = 1;
    int counted = c->stop_counted;
    rdzv_decision_t d = {0};
    d.round = c->round;
    d.next_round = c->round + 1;
    d.failures = c->failures;
    d.n = c->n_failures;
    d.own = -1;
    int permanent = 0, fatal = 0;   /* fatal: a worker's exit code not to retry */
    for (int i = 0; i < c->n_failures; i++) {
        permanent |= c->failures[i].permanent;
        fatal |= c->failures[i].fatal;
    }
    if (c->closing || permanent || fatal ||
        (counted && c->restarts_used >= c->p.max_restarts)) {
        /* a closing store host leaves no store to restart in; a program that cannot start
         * would fail the same way in every restart */
        d.action = RDZV_EXIT;
        d.restart_counted = 0;
    } else {
        d.action = RDZV_RESTART;
        d.restart_counted = counted;
        if (counted)
            c->restarts_used++;
    }
    d.restart_count = c->restarts_used;
    coord_badnodes_decided(c, &d);
    coord_progress_decided(c, d.action == RDZV_RESTART && counted);
    if (d.n > 0) {
        c->last_fail = c->failures[0];
        c->last_fail_round = c->round;
        c->last_fail_action = d.action;
    }
    if (d.n > 0)
        coord_round_fail_summary(&c->failures[0], d.reason, sizeof d.reason);
    else
        sfmt(d.reason, sizeof d.reason, "%s", c->stop_why);

    char key[256], *val = malloc(32768);
    if (!val)
        return;
    sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round);
    int len = rdzv_end_encode(&d, val, 32768);
    if (len >= 0)
        coord_act_set(c, key, val, (size_t)len);
    free(val);
    /* the end records of the last RDZV_KEEP_ROUNDS rounds stay for debugging; an older one no
     * agent can still read: every member of that round has since joined a later one, or is gone */
    if (c->round >= RDZV_KEEP_ROUNDS) {
        sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round - RDZV_KEEP_ROUNDS);
        coord_act_delete(c, key);
    }
    if (d.action == RDZV_RESTART) {
        coord_act_log(c, "rendezvous '%s' round %d stopped: %s; restarting as round %d (restart %s, "
                   "%d of %d used)",
                c->run_id, c->round, d.reason, c->round + 1, counted ? "counted" : "not counted",
                c->restarts_used, c->p.max_restarts);
        coord_round_open(c, c->round + 1, now);
    } else {
        char text[RDZV_LINE_MAX];
        sfmt(text, sizeof text, "job '%s' stopped in round %d: %s%s", c->run_id, c->round,
             d.reason,
             (fatal & RDZV_FATAL_CODE) && !c->closing ? " (an exit code not to retry)"
             : fatal && !c->closing       ? " (a worker asked not to retry)"
             : permanent && !c->closing   ? " (the program cannot start, so no restart is tried)"
             : !c->closing                ? " (no restarts left)"
             : strstr(d.reason, HOST_CLOSING) ? ""
                                              : " (" HOST_CLOSING ")");
        coord_act_log(c, "%s", text);
        coord_round_go_over(c, "ended", text);
    }
}

/* A node-level failure record for `n`. */
static void node_failure(const cnode_t *n, const char *reason, double now, rdzv_failure_t *f)
{
    rdzv_failure_init(f);
    sfmt(f->host, sizeof f->host, "%s", n->d.addr[0] ? n->d.addr : n->d.host);
    sfmt(f->node_name, sizeof f->node_name, "%s", coord_node_label(n));
    f->node_rank = n->node_rank;
    f->time = now;
    sfmt(f->reason, sizeof f->reason, "%s", reason);
}


/* `n`, a node of the last round that was not done, is gone while it may be alive (its connection
 * timed out, it went silent, its lease ended): it may still run its workers, with their ranks,
 * so no round closes until the fence has passed. A member of a stopped round that has not joined
 * again has not said it stopped them either (cut off, it may never have heard of the stop). */
static void fence(coord_t *c, const cnode_t *n, int kind, double now)
{
    if (!n->done && c->p.fence > 0 && (kind == FK_UNREACHABLE || kind == FK_SILENT) &&
        now + c->p.fence > c->fence_until) {
        c->fence_until = now + c->p.fence;
        sfmt(c->fence_who, sizeof c->fence_who, "%s", coord_node_label(n));
    }
}

/* `n` is out of the job (left, lost, silent). What follows depends on where it was: a joined
 * node leaves the open round (which may now close without it), an expected one is waited for no
 * longer, a waiting one is dropped, and a running member that was not done stops the round with a
 * failure record naming it. A silent node is told "rejected" in case it is alive after all. */
void coord_round_node_gone(coord_t *c, cnode_t *n, int idx, int kind, const char *reason, double now)
{
    /* A silent node (cut off, host down) may never close its connection: a closing store must
     * not wait close_timeout for it. */
    if (kind == FK_SILENT && n->connected) {
        n->connected = 0;
        c->connected--;
        coord_maybe_closed(c);
    }
    switch (n->state) {
    case NS_JOINED:
        unadmit(c, n, idx);
        if (kind == FK_SILENT)
            coord_answer_error(c, n, "rejected", reason);
        n->state = NS_GONE;
        coord_act_log(c, "rendezvous '%s' round %d: %s dropped out before the round closed: %s",
                c->run_id, c->round, coord_node_label(n), reason);
        coord_round_check_close(c, now);
        break;
    case NS_STOPPED:
        c->expected_missing--;
        n->state = NS_GONE;
        fence(c, n, kind, now);
        coord_act_log(c, "rendezvous '%s' round %d: %s will not rejoin: %s", c->run_id, c->round,
                coord_node_label(n), reason);
        coord_round_check_close(c, now);
        break;
    case NS_WAITING:
        c->waiting--;
        if (kind == FK_SILENT)
            coord_answer_error(c, n, "rejected", reason);
        n->state = NS_GONE;
        break;
    case NS_MEMBER:
        n->state = NS_GONE;
        if (c->phase == COORD_RUNNING)
            fence(c, n, kind, now);
        if (c->phase == COORD_RUNNING && !n->done) {
            rdzv_failure_t f;
            char why[RDZV_REASON_MAX + RDZV_NAME_MAX];
            node_failure(n, reason, now, &f);
            sfmt(why, sizeof why, "%s: %s", coord_node_label(n), reason);
            coord_round_stop(c, kind, &f, why, now);
        }
        break;
    default:
        n->state = NS_GONE;
        break;
    }
}
