/* rdzv/coordinator_status.c — the job's state for `podrun status` (coord_state). */
#include "rdzv/coordinator_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the job's state for `podrun status` ---- */

static int cmp_node_rank(const void *pa, const void *pb)
{
    const rdzv_status_node_t *a = pa, *b = pb;
    if ((a->node_rank < 0) != (b->node_rank < 0))
        return a->node_rank < 0 ? 1 : -1;
    return a->node_rank < b->node_rank ? -1 : a->node_rank > b->node_rank;
}

/* Members first in node-rank order with their global rank ranges (contiguous per node, as
 * round_close gave them), then the nodes joined, waiting or expected back. Nodes that are gone
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
    st->max_node_failures = c->p.max_node_failures;
    st->n_bad = c->bad.n;
    memcpy(st->bad, c->bad.v, (size_t)c->bad.n * sizeof *st->bad);
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
        sfmt(o->name, sizeof o->name, "%s", coord_node_label(n));
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
