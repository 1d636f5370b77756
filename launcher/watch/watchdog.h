/* launcher/watch/watchdog.h — the hang watchdog (--hang-timeout): one timer per worker, armed at the
 * worker's last sign of life plus the timeout. A sign of life is output on either stream or a
 * touch of its heartbeat file (PODRUN_HEARTBEAT_FILE). A worker held back by podrun's own stalled
 * output (a slow reader of podrun's stdout) is not hung: its timer just starts again. */
#ifndef PODRUN_LAUNCHER_WATCHDOG_H
#define PODRUN_LAUNCHER_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "launcher/output/logs.h"
#include "launcher/workers/rundir.h"

struct watchdog {
    uv_timer_t *timers;                 /* one per worker; NULL: the watchdog is off */
    int n;
    uint64_t timeout_ms;
    const struct log_stream *streams;   /* 2 per worker: stdout, stderr */
    const struct rundir *dir;           /* where the heartbeat files are */
    /* Whether local rank lr is still to be watched (running, in a running job). */
    bool (*watching)(void *arg, int lr);
    /* Local rank lr showed no sign of life for the timeout; `reason` says so in one line. */
    void (*hung)(void *arg, int lr, const char *reason);
    void *arg;
};

/* Sets w up for n workers; timeout_ms 0 leaves it off (every call below does nothing). w's
 * streams, dir and callbacks are the caller's to fill. 0 or -ENOMEM. */
int watchdog_init(struct watchdog *w, uv_loop_t *loop, int n, uint64_t timeout_ms);
/* Local rank lr has just started: its timer runs from now. */
void watchdog_arm(struct watchdog *w, int lr);
/* Local rank lr exited: nothing more to watch. */
void watchdog_disarm(struct watchdog *w, int lr);
void watchdog_disarm_all(struct watchdog *w);
/* Closes the timers; watchdog_free once the loop has run their close callbacks. */
void watchdog_close(struct watchdog *w);
void watchdog_free(struct watchdog *w);

#endif
