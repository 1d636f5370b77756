/* launcher/watch/watchdog.c — the hang watchdog (see watchdog.h). */
#include "launcher/watch/watchdog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "rdzv/base/common.h"

int watchdog_init(struct watchdog *w, uv_loop_t *loop, int n, uint64_t timeout_ms)
{
    w->timers = NULL;
    w->n = n;
    w->timeout_ms = timeout_ms;
    if (!timeout_ms)
        return 0;
    if (!(w->timers = calloc((size_t)n, sizeof *w->timers)))
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        uv_timer_init(loop, &w->timers[i]);
        w->timers[i].data = w;
    }
    return 0;
}

/* ms since the worker's heartbeat file was last touched, or UINT64_MAX without one. */
static uint64_t heartbeat_age(const struct watchdog *w, int lr)
{
    char path[PATH_MAX + 32];
    struct stat sb;
    rundir_path(w->dir, lr, "heartbeat", path, sizeof path);
    if (stat(path, &sb) != 0)
        return UINT64_MAX;
    double m = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec / 1e9;
    double age = (podrun_time_epoch() - m) * 1000.0;
    return age > 0 ? (uint64_t)age : 0;
}

/* The timer of local rank lr fired: re-armed for the rest of the timeout when the worker showed
 * life since it was armed (or was held back by podrun's own output), else the worker hung. */
static void on_timer(uv_timer_t *t)
{
    struct watchdog *w = t->data;
    int lr = (int)(t - w->timers);
    const struct log_stream *out = &w->streams[2 * lr], *err = &w->streams[2 * lr + 1];
    uint64_t T = w->timeout_ms, now = uv_now(t->loop);
    if (!w->watching(w->arg, lr))
        return;
    if (logs_stream_paused(out) || logs_stream_paused(err)) {
        uv_timer_start(t, on_timer, T, 0); /* blocked by podrun's own output, not hung */
        return;
    }
    uint64_t last = out->last_ms > err->last_ms ? out->last_ms : err->last_ms;
    uint64_t age = now > last ? now - last : 0, hb = heartbeat_age(w, lr);
    if (hb < age)
        age = hb;
    if (age < T) {
        uv_timer_start(t, on_timer, T - age, 0);
        return;
    }
    char reason[128];
    snprintf(reason, sizeof reason, "hang: no output or heartbeat for %gs", (double)T / 1000.0);
    w->hung(w->arg, lr, reason);
}

void watchdog_arm(struct watchdog *w, int lr)
{
    if (w->timers)
        uv_timer_start(&w->timers[lr], on_timer, w->timeout_ms, 0);
}

void watchdog_disarm(struct watchdog *w, int lr)
{
    if (w->timers)
        uv_timer_stop(&w->timers[lr]);
}

void watchdog_disarm_all(struct watchdog *w)
{
    for (int i = 0; w->timers && i < w->n; i++)
        uv_timer_stop(&w->timers[i]);
}

void watchdog_close(struct watchdog *w)
{
    for (int i = 0; w->timers && i < w->n; i++)
        uv_close((uv_handle_t *)&w->timers[i], NULL);
}

void watchdog_free(struct watchdog *w)
{
    free(w->timers);
    w->timers = NULL;
}
