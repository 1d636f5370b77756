/* launcher/watch/devcheck.h — `--health-check-interval`: the node's GPUs and NCCL's links checked
 * on the agent's loop while its workers run (devices/gpuwatch.h, devices/linkwatch.h).
 *
 * One uv_timer, no thread: each check is a few NVML calls per GPU (events taken without
 * waiting) and one small sysfs read per link, bounded by the counts of both. NVML is opened once
 * when the watch starts, not per check. The first bad finding is reported through `failed` and
 * the checks stop until devcheck_start is called again (the next attempt).
 *
 * Each check and each start also tell the job (rdzv_agent_report_health) what `podrun status`
 * shows for this node: off, nothing to check, no check yet, ok, or the failure line, with the
 * time of the last check. The rendezvous sends only changes as records. */
#ifndef PODRUN_LAUNCHER_DEVCHECK_H
#define PODRUN_LAUNCHER_DEVCHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "launcher/devices/gpuwatch.h"
#include "launcher/devices/linkwatch.h"
#include "rdzv/rendezvous.h"

#define HEALTHCHECK_WHY 256

struct devcheck {
    uv_timer_t timer;
    bool handle;                /* timer initialised (to be closed) */
    bool nvml_tried;            /* NVML is opened at the first start only */
    uint64_t interval_ms;       /* 0: off */
    struct gpuwatch gpus;
    struct linkwatch links;
    bool watching;              /* started for this attempt with something to check */
    /* the last check, for /metrics, and for `podrun status` through the rendezvous (*rz, when
     * set and open: rdzv_agent_report_health after each check and at each start) */
    rdzv_agent_t **rz;
    double last_time;           /* epoch s; 0: none yet */
    bool last_ok;
    uint64_t checks, failures;
    char last_why[HEALTHCHECK_WHY];
    void (*failed)(void *arg, const char *why);
    void (*say)(void *arg, const char *line);
    void *arg;
};

/* Off until devcheck_start; interval_ms 0 keeps it off for good. */
void devcheck_init(struct devcheck *h, uv_loop_t *loop, uint64_t interval_ms);
/* Starts checking for an attempt whose workers run (and says so, or that checking is off): the GPUs when `gpus` (NVML is opened the
 * first time; its absence is said once), the links when `links` (ib_hca, ib_off and ifnames as
 * linkwatch_open); neither: nothing is checked. The first check runs one interval from now. */
void devcheck_start(struct devcheck *h, bool gpus, bool links, const char *ib_hca,
                       int ib_off, const char *ifnames);
/* No checks until the next start. */
void devcheck_stop(struct devcheck *h);
/* Closes NVML and the timer. */
void devcheck_close(struct devcheck *h);

#endif
