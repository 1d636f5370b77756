/* rdzv/coordinator.c — the rendezvous coordinator: the round state machine.
 * Protocol: rdzv/rendezvous.h. No I/O here: every effect is an action in the queue.
 *
 * Inputs come one at a time (a write, a close, a timer) and each runs to the end: every counter
 * below is consistent again before the input returns, which is what lets the host's loop drain
 * the actions and apply them in order. The round's life: OPEN (joins counted; check_close
 * decides) -> RUNNING (close_round gave out ranks; a stop reason arms DECIDE) -> decide() sets
 * the end record and opens the next round at once, or the job goes OVER (go_over answers
 * everyone still waiting). */
#include "rdzv/coordinator.h"

#include "rdzv/ranks.h"
#include "rdzv/status.h"
#include "rdzv/base/u64map.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum node_state {
    NS_NEW,     /* has written something, never joined */
    NS_JOINED,  /* in the open round */
    NS_WAITING, /* joined while the job was full; joins the next round */
    NS_MEMBER,  /* in the running (or last) round */
    NS_STOPPED, /* member of a stopped round, expected to join the open one */
    NS_GONE,    /* left, lost, silent or rejected */
};

#define HOST_CLOSING "the job store host is shutting down"

enum fail_kind { FK_WORKER, FK_LEFT, FK_LOST, FK_SILENT, FK_JOINED };

/* A node's descriptor as the coordinator keeps it: the strings live in one allocation of
 * their own length (strs), not in three RDZV_NAME_MAX arrays, since a 1000-node job keeps a
 * thousand of these. Before the first join the strings are "". */
typedef struct cdesc {
    const char *name, *addr, *host, *domain; /* domain: NVLink domain, "" none */
    int nproc, want_rank, pid;
    int service;   /* a node of services (parameter servers): its "done" is not waited for */
} cdesc_t;

typedef struct cnode {
    uint64_t id, conn;
    char ids[17];
    cdesc_t d;
    char *strs;
    int state, connected, join_k, node_rank, done, exp_idx;
    int was_member; /* a member of the last round (whole segments keep it before a spare) */
    int assign_k; /* the join whose assign key holds an answer, -1: none */
    double last_seen;
    /* its health check as last reported (rdzv_health_t, kept small: the finding is allocated
     * only while the last check failed) */
    int health;
    float health_interval;
    double health_checked;
    char *health_why;
} cnode_t;

typedef struct action_store {
    coord_action_t a;
    char *key, *val;
} action_store_t;

struct coord {
    coord_params_t p;
    char *run_id, *store_host, *prefix, *observe_prefix;
    int elastic;

    cnode_t **nodes;
    size_t n_nodes, cap_nodes;
    u64map_t by_id, by_conn;

    /* expected names (params.expected) */
    char **exp_names;
    int *exp_joined;
    int n_exp;

    int round, phase, finished, restarts_used;
    int joined, members, done, waiting, connected;
    int services;    /* members of the running round that are service nodes */
    int expect_known, expected_missing;
    int last_call_armed;
    double round_opened, join_deadline, last_sweep;
    int *rank_owner; /* node index owning each wanted rank in the open round, -1 */
    int stopped;     /* a reason to stop the running round was seen */
    int decided;     /* ... and the decision was set */
    int stop_counted;
    char stop_why[RDZV_REASON_MAX];
    rdzv_failure_t failures[RDZV_MAX_FAILURES];
    int n_failures;
    char over_kind[16];
    char over_text[RDZV_LINE_MAX];
    int closing, closed_sent;

    action_store_t *q;
    size_t q_len, q_cap, q_pos;

    /* what `podrun status` is shown (coord_state) and metrics count */
    double started, round_since;
    long long world;
    int last_fail_round, last_fail_action; /* the last stop that had a failure; round -1: none */
    rdzv_failure_t last_fail;
    unsigned long silent_nodes;
};

/* ---- action queue ---- */

/* Forgets the previous input's actions: their strings were promised only until this input. */
static void q_reset(coord_t *c)
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
 * line costs nothing; a lost set is what decide()'s and close_round's callers retry on their
 * timers). */
static action_store_t *q_push(coord_t *c, int kind)
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
static void act_set(coord_t *c, const char *key, const char *val, size_t vlen)
{
    action_store_t *s = q_push(c, COORD_SET);
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
static void act_delete(coord_t *c, const char *key)
{
    action_store_t *s = q_push(c, COORD_DELETE);
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
static void act_timer(coord_t *c, int timer, double at)
{
    action_store_t *s = q_push(c, COORD_TIMER);
    if (s) {
        s->a.timer = timer;
        s->a.at = at;
    }
}

/* Queues one line for the host's log. */
static void act_log(coord_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void act_log(coord_t *c, const char *fmt, ...)
{
    char line[RDZV_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    action_store_t *s = q_push(c, COORD_LOG);
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
static const char *node_label(const cnode_t *n)
{
    return n->d.name[0] ? n->d.name : n->d.addr[0] ? n->d.addr : n->ids;
}

static void node_key(const coord_t *c, char *out, size_t cap, const cnode_t *n, const char *what,
                     int num)
{
    rdzv_node_key(out, cap, c->prefix, n->ids, what, num);
}

/* Answers n's latest join with an error kind ("timeout", "rejected", "ended", "finished") and a
 * text: the agent's WAIT on that join's assign key wakes with it. */
static void answer_error(coord_t *c, cnode_t *n, const char *kind, const char *text)
{
    char key[256], val[RDZV_LINE_MAX + 64];
    node_key(c, key, sizeof key, n, "assign", n->join_k);
    int len = rdzv_assign_error_encode(kind, text, val, sizeof val);
    if (len >= 0)
        act_set(c, key, val, (size_t)len);
    n->assign_k = n->join_k;
}

/* The answer to n's previous join is no longer needed once the agent joined again (it read that
 * answer, or gave up on it) or its connection closed: its assign key goes. */
static void forget_answer(coord_t *c, cnode_t *n)
{
    if (n->assign_k < 0)
        return;
    char key[256];
    node_key(c, key, sizeof key, n, "assign", n->assign_k);
    act_delete(c, key);
    n->assign_k = -1;
}

static int exp_find(const coord_t *c, const char *name)
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
static int ready_nodes(coord_t *c);

static void progress_line(coord_t *c, double now, int timed_out, char *out, size_t cap)
{
    char missing[512] = "", joined[512] = "", left[32];
    textlist_t lm = {missing, sizeof missing, 0, 0, 8}, lj = {joined, sizeof joined, 0, 0, 8};
    int target, all_ranked = c->joined > 0;

    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_JOINED) {
            textlist_add(&lj, node_label(n));
            if (n->d.want_rank < 0)
                all_ranked = 0;
        } else if (n->state == NS_STOPPED && c->expect_known) {
            textlist_add(&lm, node_label(n));
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
        sfmt(out + used, cap - used, "; %d of them in whole segments of %d", ready_nodes(c),
             c->p.segment_size);
    }
}

/* Publishes the open round's state under P status: waiting agents on other nodes cannot see the
 * coordinator, so they read this for their own progress lines. */
static void set_status(coord_t *c, const char *line)
{
    char key[256];
    sfmt(key, sizeof key, "%sstatus", c->prefix);
    act_set(c, key, line, strlen(line));
}

static void close_round(coord_t *c, double now);
static void check_close(coord_t *c, double now);

/* The open round's timers (join, last call, progress) are off. */
static void stop_open_timers(coord_t *c)
{
    act_timer(c, COORD_T_JOIN, -1);
    act_timer(c, COORD_T_LAST_CALL, -1);
    act_timer(c, COORD_T_PROGRESS, -1);
    c->last_call_armed = 0;
}

/* The job is over (finished, timed out, ended). Everyone still waiting for an answer gets `kind`
 * and `text` now, and on_join gives every later joiner the same, so nobody waits for a round that
 * will not come. */
static void go_over(coord_t *c, const char *kind, const char *text)
{
    c->phase = COORD_OVER;
    sfmt(c->over_kind, sizeof c->over_kind, "%s", kind);
    sfmt(c->over_text, sizeof c->over_text, "%s", text);
    stop_open_timers(c);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_WAITING || n->state == NS_JOINED) {
            answer_error(c, n, kind, text);
            n->state = NS_GONE;
        }
    }
    c->waiting = c->joined = 0;
    set_status(c, text);
}

/* Adds a joining node to the open round. A wanted node rank must be below MAX and free, or the
 * node is rejected at once: no later round could give it either. Keeps the counts check_close
 * decides on (joined, expected_missing, rank_owner) in step. 0, or -1 when rejected. */
static int admit(coord_t *c, cnode_t *n, int idx, double now)
{
    int want = n->d.want_rank;
    if (want >= c->p.max_nodes) {
        char text[256];
        sfmt(text, sizeof text,
                 "node rank %d of %s is out of range: the job has at most %d nodes (ranks 0..%d)",
                 want, node_label(n), c->p.max_nodes, c->p.max_nodes - 1);
        act_log(c, "rendezvous '%s': rejected %s", c->run_id, text);
        answer_error(c, n, "rejected", text);
        n->state = NS_GONE;
        return -1;
    }
    if (want >= 0 && c->rank_owner[want] >= 0 && c->rank_owner[want] != idx) {
        cnode_t *o = c->nodes[c->rank_owner[want]];
        char text[512];
        sfmt(text, sizeof text,
                 "node rank %d of %s (%s) is already taken by %s (%s): give every node its own "
                 "--node-rank",
                 want, node_label(n), n->d.addr, node_label(o), o->d.addr);
        act_log(c, "rendezvous '%s': rejected %s", c->run_id, text);
        answer_error(c, n, "rejected", text);
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
        int e = exp_find(c, n->d.name);
        if (e >= 0 && !c->exp_joined[e]) {
            c->exp_joined[e] = 1;
            n->exp_idx = e;
            c->expected_missing--;
        }
    }
    return 0;
}

/* A joined node leaves the open round before it closed: admit() undone, its rank free again. */
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
static void open_round(coord_t *c, int round, double now)
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
    c->stopped = c->decided = c->stop_counted = 0;
    c->n_failures = 0;
    for (int r = 0; r < c->p.max_nodes; r++)
        c->rank_owner[r] = -1;
    act_timer(c, COORD_T_JOIN, c->join_deadline);
    act_timer(c, COORD_T_LAST_CALL, -1);
    /* the first line soon, so a short wait is explained too; then every progress_interval */
    act_timer(c, COORD_T_PROGRESS,
              now + (c->p.progress_interval < 1 ? c->p.progress_interval : 1));
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
            admit(c, n, (int)i, now);
        }
    }
    check_close(c, now);
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
            act_log(c,
                    "rendezvous '%s' round %d: NVLink domain %s has %d node%s, fewer than "
                    "--segment-size %d: left out",
                    c->run_id, c->round, *rn[i].domain ? rn[i].domain : "(none)", count,
                    count == 1 ? "" : "s", c->p.segment_size);
    }
}

/* Whole segments (coord_params.segment_size): how many of the nodes in state s1 or s2 a round can
 * take. With `apply` (joined nodes, at the close), the others go back to waiting for a later
 * round (spares), and a domain too small for one segment is named. The count, or -ENOMEM. */
static int seg_pick(coord_t *c, int s1, int s2, int apply)
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
                act_log(c, "rendezvous '%s' round %d: %s waits as a spare (no whole segment of "
                           "%d nodes of its NVLink domain is left for it)",
                        c->run_id, c->round, node_label(m), c->p.segment_size);
            }
    }
    free(take), free(ix), free(rn);
    return got;
}

/* The joined nodes that count towards closing: all of them, or whole segments. */
static int ready_nodes(coord_t *c)
{
    if (c->p.segment_size <= 1)
        return c->joined;
    int got = seg_pick(c, NS_JOINED, NS_JOINED, 0);
    return got < 0 ? 0 : got;
}

/* Closes the open round: ranks for every joined node (rdzv_assign_ranks), a fresh namespace for
 * the workers (queued before any assignment, so no worker of this attempt can read a key of the
 * last one), then each node's assignment on its join's key. Without memory nothing changes and
 * the join timer closes the round later. */
static void close_round(coord_t *c, double now)
{
    if (c->p.segment_size > 1 && seg_pick(c, NS_JOINED, NS_JOINED, 1) < 0)
        return; /* the join timer retries */
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
            act_log(c,
                    "rendezvous '%s' round %d: node rank %d of %s does not fit %d nodes; it gets "
                    "a free one",
                    c->run_id, c->round, m->d.want_rank, node_label(m), n);
    }

    /* a fresh namespace for the workers of this attempt, before anyone can start */
    action_store_t *s = q_push(c, COORD_DELETE_WORKERS);
    if (s) {
        s->key = strdup("podrun/");
        s->a.key = s->key;
    }
    for (int i = 0; i < n; i++) {
        cnode_t *m = v[order[i]];
        rdzv_assignment_t a = {
            .round = c->round,
            .node_rank = i,
            .nnodes = n,
            .rank_base = rn[order[i]].rank_base,
            .world_size = (int)world,
            .restart_count = c->restarts_used,
            .store_host = c->store_host,
            .store_port = c->p.store_port,
        };
        char key[256], val[512];
        node_key(c, key, sizeof key, m, "assign", m->join_k);
        int len = rdzv_assign_encode(&a, val, sizeof val);
        if (len >= 0)
            act_set(c, key, val, (size_t)len);
        m->assign_k = m->join_k;
        m->state = NS_MEMBER;
        m->node_rank = i;
        m->done = 0;
        services += m->d.service != 0;
        m->exp_idx = -1;
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
    stop_open_timers(c);
    char line[256];
    sfmt(line, sizeof line,
             "rendezvous '%s' round %d complete: %d node%s, world size %lld, restart count %d "
             "(%.3f s)",
             c->run_id, c->round, n, n == 1 ? "" : "s", world, c->restarts_used,
             now - c->round_opened);
    set_status(c, line);
    act_log(c, "%s", line);
}

/* After any change to who has joined: close now (MAX joined, or MIN and everyone expected), or
 * arm the last call once MIN is reached, or take it back when a drop-out leaves fewer than MIN.
 * With whole segments a restart round that is full but still expects members of the last round
 * waits for them until the last call: spares must not take the place of survivors that are on
 * their way back (a member that is gone is not expected). */
static void check_close(coord_t *c, double now)
{
    if (c->phase != COORD_OPEN)
        return;
    int n = ready_nodes(c);
    int full = n >= c->p.max_nodes &&
               !(c->p.segment_size > 1 && c->round > 0 && c->expected_missing > 0);
    if (full ||
        (n >= c->p.min_nodes && c->expect_known && c->expected_missing <= 0)) {
        close_round(c, now);
    } else if (n >= c->p.min_nodes && !c->last_call_armed) {
        c->last_call_armed = 1;
        act_timer(c, COORD_T_LAST_CALL, now + c->p.last_call_timeout);
    } else if (n < c->p.min_nodes && c->last_call_armed) {
        c->last_call_armed = 0;
        act_timer(c, COORD_T_LAST_CALL, -1);
    }
}

static int cmp_fail(const void *pa, const void *pb)
{
    const rdzv_failure_t *a = pa, *b = pb;
    return a->time < b->time ? -1 : a->time > b->time ? 1 : 0;
}

/* Keeps the RDZV_MAX_FAILURES earliest failures sorted by time, so [0] is the root cause even
 * when reports arrive out of order. */
static void record_failure(coord_t *c, const rdzv_failure_t *f)
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
static void fail_summary(const rdzv_failure_t *f, char *out, size_t cap)
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
static void stop_round(coord_t *c, int kind, const rdzv_failure_t *f, const char *why,
                       double now)
{
    if (f)
        record_failure(c, f);
    if (c->phase != COORD_RUNNING || c->decided) {
        if (f)
            act_log(c, "rendezvous '%s' round %d: also %s on %s: %s", c->run_id, c->round,
                    kind == FK_WORKER ? "failed" : "lost", f->node_name, f->reason);
        return;
    }
    if (kind == FK_WORKER || !c->elastic)
        c->stop_counted = 1;
    if (c->stopped)
        return;
    c->stopped = 1;
    sfmt(c->stop_why, sizeof c->stop_why, "%s", why);
    act_timer(c, COORD_T_DECIDE, now);
}

/* The job-wide decision for the stopped round, set once under P r/<R>/end so every agent reads
 * the same root cause. Restart while restarts are left, opening the next round in the same step
 * so that rejoining agents find it open; else exit, and the job is over. A closing store host
 * always exits: it leaves no store to restart in. */
static void decide(coord_t *c, double now)
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
    if (d.n > 0) {
        c->last_fail = c->failures[0];
        c->last_fail_round = c->round;
        c->last_fail_action = d.action;
    }
    if (d.n > 0)
        fail_summary(&c->failures[0], d.reason, sizeof d.reason);
    else
        sfmt(d.reason, sizeof d.reason, "%s", c->stop_why);

    char key[256], *val = malloc(32768);
    if (!val)
        return;
    sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round);
    int len = rdzv_end_encode(&d, val, 32768);
    if (len >= 0)
        act_set(c, key, val, (size_t)len);
    free(val);
    /* the end records of the last RDZV_KEEP_ROUNDS rounds stay for debugging; an older one no
     * agent can still read: every member of that round has since joined a later one, or is gone */
    if (c->round >= RDZV_KEEP_ROUNDS) {
        sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round - RDZV_KEEP_ROUNDS);
        act_delete(c, key);
    }
    if (d.action == RDZV_RESTART) {
        act_log(c, "rendezvous '%s' round %d stopped: %s; restarting as round %d (restart %s, "
                   "%d of %d used)",
                c->run_id, c->round, d.reason, c->round + 1, counted ? "counted" : "not counted",
                c->restarts_used, c->p.max_restarts);
        open_round(c, c->round + 1, now);
    } else {
        char text[RDZV_LINE_MAX];
        sfmt(text, sizeof text, "job '%s' stopped in round %d: %s%s", c->run_id, c->round,
             d.reason,
             fatal && !c->closing         ? " (an exit code not to retry)"
             : !c->closing                ? " (no restarts left)"
             : strstr(d.reason, HOST_CLOSING) ? ""
                                              : " (" HOST_CLOSING ")");
        act_log(c, "%s", text);
        go_over(c, "ended", text);
    }
}

/* A node-level failure record for `n`. */
static void node_failure(const cnode_t *n, const char *reason, double now, rdzv_failure_t *f)
{
    rdzv_failure_init(f);
    sfmt(f->host, sizeof f->host, "%s", n->d.addr[0] ? n->d.addr : n->d.host);
    sfmt(f->node_name, sizeof f->node_name, "%s", node_label(n));
    f->node_rank = n->node_rank;
    f->time = now;
    sfmt(f->reason, sizeof f->reason, "%s", reason);
}

static void maybe_closed(coord_t *c);

/* `n` is out of the job (left, lost, silent). What follows depends on where it was: a joined
 * node leaves the open round (which may now close without it), an expected one is waited for no
 * longer, a waiting one is dropped, and a running member that was not done stops the round with a
 * failure record naming it. A silent node is told "rejected" in case it is alive after all. */
static void node_gone(coord_t *c, cnode_t *n, int idx, int kind, const char *reason, double now)
{
    /* A silent node (cut off, host down) may never close its connection: a closing store must
     * not wait close_timeout for it. */
    if (kind == FK_SILENT && n->connected) {
        n->connected = 0;
        c->connected--;
        maybe_closed(c);
    }
    switch (n->state) {
    case NS_JOINED:
        unadmit(c, n, idx);
        if (kind == FK_SILENT)
            answer_error(c, n, "rejected", reason);
        n->state = NS_GONE;
        act_log(c, "rendezvous '%s' round %d: %s dropped out before the round closed: %s",
                c->run_id, c->round, node_label(n), reason);
        check_close(c, now);
        break;
    case NS_STOPPED:
        c->expected_missing--;
        n->state = NS_GONE;
        act_log(c, "rendezvous '%s' round %d: %s will not rejoin: %s", c->run_id, c->round,
                node_label(n), reason);
        check_close(c, now);
        break;
    case NS_WAITING:
        c->waiting--;
        if (kind == FK_SILENT)
            answer_error(c, n, "rejected", reason);
        n->state = NS_GONE;
        break;
    case NS_MEMBER:
        n->state = NS_GONE;
        if (c->phase == COORD_RUNNING && !n->done) {
            rdzv_failure_t f;
            char why[RDZV_REASON_MAX + RDZV_NAME_MAX];
            node_failure(n, reason, now, &f);
            sfmt(why, sizeof why, "%s: %s", node_label(n), reason);
            stop_round(c, kind, &f, why, now);
        }
        break;
    default:
        n->state = NS_GONE;
        break;
    }
}

/* The node behind a write: found by its id, created at its first write. An id belongs to the
 * connection that first used it and a connection to one id, so a second agent reusing either is
 * ignored rather than believed. NULL for those, and without memory. */
static cnode_t *node_for(coord_t *c, uint64_t conn, uint64_t id, const char *ids, int *idx,
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
static int node_set_desc(cnode_t *n, const rdzv_desc_rec_t *d)
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
    return 0;
}

/* With segments: would the waiting nodes and the members make a larger round (a new whole
 * segment) than the running one? */
static int seg_grows(coord_t *c)
{
    return seg_pick(c, NS_MEMBER, NS_WAITING, 0) > c->members;
}

/* A node's k-th join. Admitted to the open round; queued for the next while one runs (an elastic
 * job with room restarts for it now); answered at once when the job is over or the node is a
 * member of the running round. Every answer goes to the key of this k, so an answer to an
 * earlier join can never be taken for this one. A repeated join changes nothing. */
static void on_join(coord_t *c, cnode_t *n, int idx, int k, const char *val, size_t vlen,
                    double now)
{
    rdzv_desc_rec_t d;
    if (k != n->assign_k)
        forget_answer(c, n);
    n->join_k = k;
    if (rdzv_desc_decode(val, vlen, &d) < 0) {
        answer_error(c, n, "rejected", "unreadable node descriptor");
        return;
    }
    if (n->state == NS_JOINED || n->state == NS_WAITING)
        return; /* a repeated join changes nothing but the key it is answered on */
    if (n->state == NS_MEMBER && c->phase == COORD_RUNNING) {
        answer_error(c, n, "rejected", "joined again while its round is running");
        return;
    }
    if (node_set_desc(n, &d) < 0) {
        answer_error(c, n, "rejected", "the job store host is out of memory");
        return;
    }
    if (c->phase == COORD_OVER) {
        answer_error(c, n, c->over_kind, c->over_text);
        n->state = NS_GONE;
        return;
    }
    if (n->state == NS_GONE || n->state == NS_MEMBER)
        n->state = NS_NEW;
    if (c->phase == COORD_OPEN) {
        if (admit(c, n, idx, now) == 0)
            check_close(c, now);
        return;
    }
    /* running: wait for the next round; an elastic job with room restarts for it now */
    n->state = NS_WAITING;
    c->waiting++;
    if (c->elastic && !c->stopped &&
        (c->p.segment_size > 1 ? seg_grows(c) : c->members + c->waiting <= c->p.max_nodes)) {
        char why[RDZV_REASON_MAX];
        sfmt(why, sizeof why, "membership change: %.100s joined", node_label(n));
        stop_round(c, FK_JOINED, NULL, why, now);
    } else {
        act_log(c, "rendezvous '%s': %s waits for the next round (round %d is running with %d "
                   "of at most %d nodes)",
                c->run_id, node_label(n), c->round, c->members, c->p.max_nodes);
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
        act_set(c, key, val, (size_t)len);
    c->finished = 1;
    char text[256];
    if (c->services)
        sfmt(text, sizeof text, "job '%s' finished: all %d nodes done in round %d (%d service "
             "node%s to stop)", c->run_id, c->members - c->services, c->round, c->services,
             c->services == 1 ? "" : "s");
    else
        sfmt(text, sizeof text, "job '%s' finished: all %d nodes done in round %d", c->run_id,
             c->members, c->round);
    act_log(c, "%s", text);
    go_over(c, "finished", text);
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
        sfmt(f.node_name, sizeof f.node_name, "%s", node_label(n));
    f.node_rank = n->node_rank;
    if (!f.reason[0])
        sfmt(f.reason, sizeof f.reason, "failed");
    if (f.time <= 0)
        f.time = now;
    char why[RDZV_REASON_MAX];
    fail_summary(&f, why, sizeof why);
    stop_round(c, FK_WORKER, &f, why, now);
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
    sfmt(why, sizeof why, "agent lost: %.60s (seen by %.40s)", reason, node_label(n));
    node_gone(c, c->nodes[found], found, FK_LOST, why, now);
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

/* Parses "<prefix><16 hex id>/<what>[/<num>]" and hands the record to its handler; any other key
 * under the prefix is ignored (noise, or an agent of another version). Every write proves its
 * node alive, including a node dropped as silent that turns out not to be. */
void coord_on_write(coord_t *c, uint64_t conn, const char *key, size_t klen, const char *val,
                    size_t vlen, double now)
{
    q_reset(c);
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
    enum { OP_HB, OP_JOIN, OP_DONE, OP_FAIL, OP_LEAVE, OP_PEER, OP_HEALTH, OP_COUNT };
    static const char *const ops[OP_COUNT] = {"hb",    "join", "done",  "fail",
                                              "leave", "peer", "health"};
    int op = 0;
    while (op < OP_COUNT && strcmp(rest, ops[op]) != 0)
        op++;
    if (op == OP_COUNT)
        return;
    int idx;
    cnode_t *n = node_for(c, conn, id, ids, &idx, now);
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
        if (num >= 0)
            on_join(c, n, idx, (int)num, val, vlen, now);
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
            node_gone(c, n, idx, FK_LEFT, why, now);
        }
        break;
    case OP_HEALTH:
        on_health(n, val, vlen, now);
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
static void maybe_closed(coord_t *c)
{
    if (c->closing && !c->closed_sent && c->connected <= 0) {
        c->closed_sent = 1;
        act_timer(c, COORD_T_CLOSE, -1);
        q_push(c, COORD_CLOSED);
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

/* A node's connection closed (`why` says how, NULL: closed). A node still part of the job is
 * lost; a member of a finished or ended job just went home. */
void coord_on_close(coord_t *c, uint64_t conn, const char *why, double now)
{
    char reason[RDZV_REASON_MAX];
    sfmt(reason, sizeof reason, "agent lost: %s", why ? why : "connection closed");
    coord_on_lost(c, conn, reason, now);
}

void coord_on_lost(coord_t *c, uint64_t conn, const char *why, double now)
{
    q_reset(c);
    int idx = u64map_get(&c->by_conn, conn);
    if (idx < 0)
        return;
    cnode_t *n = c->nodes[idx];
    if (!n->connected)
        return;
    n->connected = 0;
    c->connected--;
    if (n->state != NS_GONE && !(n->state == NS_MEMBER && c->phase == COORD_OVER))
        node_gone(c, n, idx, FK_LOST, why, now);
    forget_answer(c, n);
    maybe_closed(c);
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
            node_gone(c, n, (int)i, FK_SILENT, why, now);
        }
    }
    act_timer(c, COORD_T_SWEEP, now + c->p.keep_alive_interval);
}

/* One of the timers the host armed on our word. A timer that fires after the state it was for
 * has passed (the round closed, the job ended) does nothing. */
void coord_on_timer(coord_t *c, int timer, double now)
{
    q_reset(c);
    char line[RDZV_LINE_MAX];
    switch (timer) {
    case COORD_T_JOIN:
        if (c->phase != COORD_OPEN)
            break;
        if (ready_nodes(c) >= c->p.min_nodes) {
            close_round(c, now);
        } else {
            progress_line(c, now, 1, line, sizeof line);
            act_log(c, "%s", line);
            go_over(c, "timeout", line);
        }
        break;
    case COORD_T_LAST_CALL:
        c->last_call_armed = 0;
        if (c->phase == COORD_OPEN && ready_nodes(c) >= c->p.min_nodes)
            close_round(c, now);
        break;
    case COORD_T_SWEEP:
        sweep(c, now);
        break;
    case COORD_T_DECIDE:
        decide(c, now);
        break;
    case COORD_T_PROGRESS:
        if (c->phase != COORD_OPEN)
            break;
        progress_line(c, now, 0, line, sizeof line);
        set_status(c, line);
        act_log(c, "%s", line);
        act_timer(c, COORD_T_PROGRESS, now + c->p.progress_interval);
        break;
    case COORD_T_CLOSE:
        if (c->closing && !c->closed_sent) {
            char names[512] = "";
            textlist_t l = {names, sizeof names, 0, 0, 8};
            for (size_t i = 0; i < c->n_nodes; i++)
                if (c->nodes[i]->connected)
                    textlist_add(&l, node_label(c->nodes[i]));
            textlist_end(&l);
            act_log(c, "rendezvous '%s': closing the store with %d agent%s still connected: %s",
                    c->run_id, c->connected, c->connected == 1 ? "" : "s", names);
            c->connected = 0;
            maybe_closed(c);
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
    q_reset(c);
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
            record_failure(c, &f);
            c->stopped = 1;
            sfmt(c->stop_why, sizeof c->stop_why, "%s", HOST_CLOSING);
        }
        decide(c, now);
    }
    if (c->phase == COORD_OPEN) {
        char text[256];
        sfmt(text, sizeof text, "job '%s': the job store host is shutting down", c->run_id);
        go_over(c, "ended", text);
    }
    act_timer(c, COORD_T_SWEEP, -1);
    stop_open_timers(c);
    act_timer(c, COORD_T_DECIDE, -1);
    if (c->connected > 0)
        act_timer(c, COORD_T_CLOSE, now + c->p.close_timeout);
    maybe_closed(c);
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
}

int coord_resume(coord_t *c, const coord_resume_t *r, double now)
{
    q_reset(c);
    if (c->n_nodes || r->round < 0 || r->restarts_used < 0 || r->n_members < 0 ||
        (r->phase != COORD_OPEN && r->phase != COORD_RUNNING && r->phase != COORD_OVER))
        return -EINVAL;
    for (int i = 0; i < r->n_members; i++) {
        const coord_member_t *m = &r->members[i];
        char *end;
        uint64_t id = strtoull(m->id, &end, 16);
        int idx;
        if (strlen(m->id) != 16 || *end || id == 0 || u64map_get(&c->by_id, id) >= 0)
            return -EINVAL;
        cnode_t *n = node_for(c, id, id, m->id, &idx, now);
        if (!n || node_set_desc(n, &m->d) < 0)
            return -ENOMEM;
        n->state = NS_MEMBER;
        n->node_rank = m->node_rank;
    }
    c->restarts_used = r->restarts_used;
    c->last_sweep = now;
    act_timer(c, COORD_T_SWEEP, now + c->p.keep_alive_interval);
    if (r->phase == COORD_OPEN) {
        open_round(c, r->round, now); /* the members become expected, as after a decision */
        return 0;
    }
    stop_open_timers(c);
    c->round = r->round;
    c->joined = c->done = c->waiting = 0;
    c->stopped = c->decided = c->stop_counted = c->n_failures = 0;
    if (r->phase == COORD_RUNNING) {
        c->phase = COORD_RUNNING;
        c->members = r->n_members;
    } else {
        go_over(c, r->over_kind ? r->over_kind : "ended", r->over_text ? r->over_text : "");
    }
    return 0;
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
            if (exp_find(c, s) >= 0)
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
        p->segment_size < 0 || p->max_nodes > (1 << 20) || p->max_restarts < 0 || p->keep_alive_interval <= 0 ||
        p->keep_alive_max_attempt < 1 || p->progress_interval <= 0)
        return NULL;
    coord_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->p = *p;
    c->run_id = strdup(p->run_id);
    c->store_host = strdup(p->store_host ? p->store_host : "");
    c->rank_owner = malloc((size_t)p->max_nodes * sizeof *c->rank_owner);
    if (c->run_id && (size_t)snprintf(NULL, 0, "podrun/%s/", p->run_id) < 200) {
        if (asprintf(&c->prefix, "podrun/%s/", p->run_id) < 0)
            c->prefix = NULL;
        if (asprintf(&c->observe_prefix, "podrun/%s/n/", p->run_id) < 0)
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
    c->elastic = p->min_nodes < p->max_nodes;
    c->last_sweep = c->started = now;
    c->last_fail_round = -1;
    act_timer(c, COORD_T_SWEEP, now + p->keep_alive_interval);
    open_round(c, 0, now);
    return c;
}

void coord_free(coord_t *c)
{
    if (!c)
        return;
    q_reset(c);
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

/* ---- the job's state for `podrun status` ---- */

static int cmp_node_rank(const void *pa, const void *pb)
{
    const rdzv_status_node_t *a = pa, *b = pb;
    if ((a->node_rank < 0) != (b->node_rank < 0))
        return a->node_rank < 0 ? 1 : -1;
    return a->node_rank < b->node_rank ? -1 : a->node_rank > b->node_rank;
}

/* Members first in node-rank order with their global rank ranges (contiguous per node, as
 * close_round gave them), then the nodes joined, waiting or expected back. Nodes that are gone
 * or never joined are not the job's. */
int coord_state(const coord_t *c, double now, rdzv_status_t *st, rdzv_status_node_t *nodes,
                size_t cap)
{
    memset(st, 0, sizeof *st);
    sfmt(st->run_id, sizeof st->run_id, "%s", c->run_id);
    st->time = now;
    st->started = c->started;
    st->round = c->round;
    st->phase = c->phase;
    st->round_since = c->round_since;
    if (c->phase == COORD_OVER)
        sfmt(st->over, sizeof st->over, "%s", c->finished ? "finished" : c->over_kind);
    sfmt(st->line, sizeof st->line, "%s", c->phase == COORD_OVER ? c->over_text : "");
    st->min_nodes = c->p.min_nodes;
    st->max_nodes = c->p.max_nodes;
    st->world_size = c->phase == COORD_RUNNING ? (int)c->world : 0;
    st->restarts_used = c->restarts_used;
    st->max_restarts = c->p.max_restarts;
    st->failure_round = c->last_fail_round;
    st->failure_action = c->last_fail_action;
    st->failure = c->last_fail;
    st->nodes = nodes;
    size_t k = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const cnode_t *n = c->nodes[i];
        int phase = n->state == NS_JOINED    ? RDZV_NODE_JOINED
                    : n->state == NS_WAITING ? RDZV_NODE_WAITING
                    : n->state == NS_MEMBER  ? (n->done ? RDZV_NODE_DONE : RDZV_NODE_MEMBER)
                    : n->state == NS_STOPPED ? RDZV_NODE_STOPPED
                                             : -1;
        if (phase < 0)
            continue;
        st->n_total++;
        if (k >= cap)
            continue;
        rdzv_status_node_t *o = &nodes[k++];
        sfmt(o->name, sizeof o->name, "%s", node_label(n));
        sfmt(o->addr, sizeof o->addr, "%s", n->d.addr);
        o->phase = phase;
        o->node_rank = n->state == NS_MEMBER ? n->node_rank : -1;
        o->nproc = n->d.nproc;
        o->last_seen = n->last_seen;
        memset(&o->health, 0, sizeof o->health);
        o->health.state = n->health;
        o->health.interval = n->health_interval;
        o->health.checked = n->health_checked;
        sfmt(o->health.why, sizeof o->health.why, "%s", n->health_why ? n->health_why : "");
    }
    qsort(nodes, k, sizeof *nodes, cmp_node_rank);
    int base = 0;
    for (size_t i = 0; i < k; i++) {
        nodes[i].rank_base = nodes[i].node_rank >= 0 ? base : -1;
        if (nodes[i].node_rank >= 0)
            base += nodes[i].nproc;
    }
    st->n_nodes = (int)k;
    return 0;
}

unsigned long coord_silent_nodes(const coord_t *c)
{
    return c->silent_nodes;
}
