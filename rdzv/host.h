/* rdzv/host.h — the coordinator (rdzv/coordinator.h) on a loop, for every backend.
 *
 * The coordinator is pure: inputs in, a queue of actions out. host.c drains that queue after
 * every input, keeps the timers itself (COORD_TIMER arms or cancels one of COORD_T_COUNT uv
 * timers, with one clamp on the delay, and feeds their expiry back as coord_on_timer), and hands
 * the rest to a sink: the log lines, the writes of one pass in their order, and the end. The
 * store backend's sink writes into the store server it hosts; the etcd backend's queues the
 * writes as one batch of transactions (etcd_leader.c).
 *
 * The host does not own its coordinator's lifetime decisions: whoever hosts sets `coord` (from
 * coord_new, or coord_new + coord_resume), feeds it inputs and calls host_run after each. */
#ifndef PODRUN_RDZV_HOST_H
#define PODRUN_RDZV_HOST_H

#include <uv.h>

#include "rdzv/coordinator.h"
#include "rdzv/rendezvous.h"

/* The longest a coordinator timer is armed for, in ms (about 46 days; a later deadline is
 * looked at again then): a deadline far away (a year, for a sweep that is off) still fits the
 * loop's clock, and a double converts to an integer only where it fits. */
#define HOST_TIMER_MAX_MS 4e9

typedef struct host_sink {
    /* The writes of one pass, in the coordinator's order: COORD_SET, COORD_DELETE and
     * COORD_DELETE_WORKERS (the array holds nothing else; strings valid until the next input).
     * `over`: COORD_CLOSED ends this pass, and `closed` runs right after. */
    void (*apply)(void *arg, const coord_action_t *w, size_t n, int over);
    void (*log)(void *arg, const char *line); /* a COORD_LOG line */
    void (*closed)(void *arg); /* COORD_CLOSED: the coordinator is done (after coord_shutdown) */
} host_sink_t;

typedef struct host {
    coord_t *coord;                  /* NULL while not coordinating */
    uv_timer_t timer[COORD_T_COUNT]; /* data: the host */
    const host_sink_t *sink;
    void *arg;
    coord_action_t *w;               /* the pass's writes */
    size_t cap;
    int open, closing;               /* timers initialised; timers closing */
    int left;                        /* timers not yet closed */
    void (*done)(void *);
    void *done_arg;
} host_t;

/* Initialises the timers on `loop`; no coordinator yet. */
void host_init(host_t *h, uv_loop_t *loop, const host_sink_t *sink, void *arg);
/* Drains the coordinator's actions: timers armed, lines logged, the writes to the sink. After
 * every input. Nothing while h->coord is NULL. */
void host_run(host_t *h);
/* Stops coordinating: the timers stop, the coordinator is freed (h->coord NULL). Idempotent. */
void host_stop(host_t *h);
/* Closes the timers; `done` runs once all are closed (from the loop), and then 1 is returned;
 * 0 (and no `done`) when there is nothing to close. host_free after it. */
int host_close(host_t *h, void (*done)(void *), void *arg);
/* Frees the coordinator and the host's buffers (not the host itself). */
void host_free(host_t *h);
/* The coordinator's parameters from the rendezvous's: run id, sizes, timeouts, heartbeats,
 * expected names (the strings stay p's). Where the workers' store is, and anything a backend does
 * otherwise (etcd: leases, not the sweep, watch liveness), the caller sets after. */
coord_params_t host_coord_params(const rdzv_params_t *p);
/* The delay, in ms, for a timer due at epoch time `at` when it is `now`: at least 0 (due: at
 * once), 1 ms late rather than early, at most HOST_TIMER_MAX_MS. */
uint64_t host_timer_delay(double at, double now);

#endif
