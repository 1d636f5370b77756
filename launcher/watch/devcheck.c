/* launcher/watch/devcheck.c — the GPU and link checks on the agent's loop (devcheck.h). */
#include "launcher/watch/devcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdzv/base/common.h"

void devcheck_init(struct devcheck *h, uv_loop_t *loop, uint64_t interval_ms)
{
    memset(h, 0, sizeof *h);
    h->interval_ms = interval_ms;
    h->last_ok = true;
    if (!interval_ms)
        return;
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    h->handle = true;
}

/* What `podrun status` is to show for this node now, to the job (the rendezvous keeps it to
 * the changes). Never fails the caller: a record that cannot go now goes with the next. */
static void publish(const struct devcheck *h)
{
    if (!h->rz || !*h->rz)
        return;
    rdzv_health_t r = {.interval = (double)h->interval_ms / 1000, .checked = h->last_time};
    r.state = !h->interval_ms  ? RDZV_HEALTH_OFF
              : !h->watching   ? RDZV_HEALTH_IDLE
              : !h->last_time  ? RDZV_HEALTH_WAITING
              : h->last_ok     ? RDZV_HEALTH_OK
                               : RDZV_HEALTH_FAILED;
    if (r.state == RDZV_HEALTH_FAILED)
        sfmt(r.why, sizeof r.why, "%s", h->last_why);   /* cut: one line in a table */
    (void)rdzv_agent_report_health(*h->rz, &r);
}

static void on_check(uv_timer_t *t)
{
    struct devcheck *h = t->data;
    char why[HEALTHCHECK_WHY], note[HEALTHCHECK_WHY];
    int bad = gpuwatch_check(&h->gpus, why, sizeof why, note, sizeof note);
    if (note[0])
        h->say(h->arg, note);
    if (!bad)
        bad = linkwatch_check(&h->links, why, sizeof why);
    h->last_time = podrun_time_epoch();
    h->last_ok = !bad;
    h->checks++;
    if (bad) {
        h->failures++;
        snprintf(h->last_why, sizeof h->last_why, "%s", why);
    }
    publish(h);   /* before the failure's own record: status names it by then */
    if (!bad)
        return;
    uv_timer_stop(&h->timer);   /* one failure per attempt: the job is being stopped */
    h->failed(h->arg, why);
}

static void open_nvml(struct devcheck *h)
{
    char err[512], line[600];
    h->nvml_tried = true;
    int r = gpuwatch_open(&h->gpus, NULL, err, sizeof err);
    if (r == 0 && h->gpus.n > 0 && !h->gpus.set) {
        snprintf(line, sizeof line, "health check: NVML cannot report Xid events here; the "
                 "GPUs' ECC counts and retired pages are still checked");
        h->say(h->arg, line);
    } else if (r == -ENODEV) {
        snprintf(line, sizeof line, "health check: the GPUs are not checked: %s", err);
        h->say(h->arg, line);
    }   /* -ENOENT: no NVML, a node without NVIDIA GPUs: nothing to say */
}

void devcheck_start(struct devcheck *h, bool gpus, bool links, const char *ib_hca,
                       int ib_off, const char *ifnames)
{
    h->watching = h->interval_ms && (gpus || links);
    if (!h->watching) {
        publish(h);
        return;
    }
    if (gpus && !h->nvml_tried)
        open_nvml(h);
    if (links)
        linkwatch_open(&h->links, ib_hca, ib_off, ifnames);
    uv_timer_start(&h->timer, on_check, h->interval_ms, h->interval_ms);
    publish(h);
}

void devcheck_stop(struct devcheck *h)
{
    if (h->handle)
        uv_timer_stop(&h->timer);
}

void devcheck_close(struct devcheck *h)
{
    devcheck_stop(h);
    gpuwatch_close(&h->gpus);
    if (h->handle)
        uv_close((uv_handle_t *)&h->timer, NULL);
    h->handle = false;
}
