/* rdzv/host.c — the coordinator on a loop (host.h). */
#include "rdzv/host.h"

#include <stdlib.h>

#include "rdzv/base/common.h"

static void on_timer(uv_timer_t *t)
{
    host_t *h = t->data;
    if (!h->coord)
        return;
    coord_on_timer(h->coord, (int)(t - h->timer), podrun_time_epoch());
    host_run(h);
}

void host_init(host_t *h, uv_loop_t *loop, const host_sink_t *sink, void *arg)
{
    h->sink = sink;
    h->arg = arg;
    for (int i = 0; i < COORD_T_COUNT; i++) {
        uv_timer_init(loop, &h->timer[i]);
        h->timer[i].data = h;
    }
    h->open = 1;
}

coord_params_t host_coord_params(const rdzv_params_t *p)
{
    return (coord_params_t){
        .run_id = p->run_id,
        .min_nodes = p->min_nodes,
        .max_nodes = p->max_nodes,
        .segment_size = p->segment_size,
        .max_restarts = p->max_restarts,
        .max_node_failures = p->max_node_failures,
        .max_no_progress = p->max_no_progress,
        .join_timeout = p->join_timeout,
        .last_call_timeout = p->last_call_timeout,
        .close_timeout = p->close_timeout,
        .keep_alive_interval = p->keep_alive_interval,
        .keep_alive_max_attempt = p->keep_alive_max_attempt,
        .progress_interval = p->progress_interval,
        .expected = p->expected,
    };
}

uint64_t host_timer_delay(double at, double now)
{
    double d = (at - now) * 1000.0;
    if (d > HOST_TIMER_MAX_MS)
        d = HOST_TIMER_MAX_MS;
    return d > 0 ? (uint64_t)d + 1 : 0;
}

static void arm(host_t *h, const coord_action_t *act)
{
    if (act->timer < 0 || act->timer >= COORD_T_COUNT || !h->open || h->closing)
        return;
    uv_timer_t *t = &h->timer[act->timer];
    if (act->at < 0)
        uv_timer_stop(t);
    else
        uv_timer_start(t, on_timer, host_timer_delay(act->at, podrun_time_epoch()), 0);
}

/* Keeps a write for the pass's batch; when the buffer cannot grow, what it holds goes to the
 * sink first (the order stays the coordinator's). */
static void keep(host_t *h, size_t *n, const coord_action_t *act)
{
    if (*n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 32;
        coord_action_t *nw = realloc(h->w, nc * sizeof *nw);
        if (nw) {
            h->w = nw;
            h->cap = nc;
        } else if (*n) {
            h->sink->apply(h->arg, h->w, *n, 0);
            *n = 0;
        } else {
            h->sink->apply(h->arg, act, 1, 0);
            return;
        }
    }
    h->w[(*n)++] = *act;
}

void host_run(host_t *h)
{
    coord_action_t act;
    size_t n = 0;
    int over = 0;
    if (!h->coord)
        return;
    while (coord_next_action(h->coord, &act)) {
        switch (act.kind) {
        case COORD_TIMER:
            arm(h, &act);
            break;
        case COORD_LOG:
            if (h->sink->log)
                h->sink->log(h->arg, act.val);
            break;
        case COORD_CLOSED:
            over = 1;
            break;
        case COORD_SET:
        case COORD_DELETE:
        case COORD_DELETE_WORKERS:
            keep(h, &n, &act);
            break;
        default:
            break;
        }
    }
    h->sink->apply(h->arg, h->w, n, over); /* every pass: the sink may publish a new phase */
    /* the sink may have stopped coordinating (a write it could not make) */
    if (over && h->coord && h->sink->closed)
        h->sink->closed(h->arg);
}

void host_stop(host_t *h)
{
    if (h->open && !h->closing)
        for (int i = 0; i < COORD_T_COUNT; i++)
            uv_timer_stop(&h->timer[i]);
    coord_free(h->coord);
    h->coord = NULL;
}

static void on_closed(uv_handle_t *t)
{
    host_t *h = t->data;
    if (--h->left == 0 && h->done)
        h->done(h->done_arg);
}

int host_close(host_t *h, void (*done)(void *), void *arg)
{
    if (!h->open || h->closing)
        return 0;
    h->closing = 1;
    h->done = done;
    h->done_arg = arg;
    h->left = COORD_T_COUNT;
    for (int i = 0; i < COORD_T_COUNT; i++)
        uv_close((uv_handle_t *)&h->timer[i], on_closed);
    return 1;
}

void host_free(host_t *h)
{
    coord_free(h->coord);
    h->coord = NULL;
    free(h->w);
    h->w = NULL;
    h->cap = 0;
}
