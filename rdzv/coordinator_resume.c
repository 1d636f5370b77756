/* rdzv/coordinator_resume.c — a new coordinator picks up a job from what the store kept
 * (coord_resume). */
#include "rdzv/coordinator_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int coord_resume(coord_t *c, const coord_resume_t *r, double now)
{
    coord_q_reset(c);
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
        cnode_t *n = coord_node_for(c, id, id, m->id, &idx, now);
        if (!n || coord_node_set_desc(n, &m->d) < 0)
            return -ENOMEM;
        n->state = NS_MEMBER;
        n->node_rank = m->node_rank;
    }
    c->restarts_used = r->restarts_used;
    c->bad.n = r->n_bad < 0 ? 0 : r->n_bad < RDZV_MAX_BAD_NODES ? r->n_bad : RDZV_MAX_BAD_NODES;
    if (c->bad.n)
        memcpy(c->bad.v, r->bad, (size_t)c->bad.n * sizeof *c->bad.v);
    c->last_sweep = now;
    coord_act_timer(c, COORD_T_SWEEP, now + c->p.keep_alive_interval);
    if (r->phase == COORD_OPEN) {
        coord_round_open(c, r->round, now); /* the members become expected, as after a decision */
        return 0;
    }
    coord_round_stop_open_timers(c);
    c->round = r->round;
    c->joined = c->done = c->waiting = 0;
    c->stopped = c->decided = c->stop_counted = c->n_failures = 0;
    if (r->phase == COORD_RUNNING) {
        c->phase = COORD_RUNNING;
        c->members = r->n_members;
    } else {
        coord_round_go_over(c, r->over_kind ? r->over_kind : "ended", r->over_text ? r->over_text : "");
    }
    return 0;
}
