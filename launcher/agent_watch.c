/* launcher/agent_watch.c — the agent's health: what /healthz and /metrics say about it, the
 * checks of the GPUs and links while the workers run (devcheck.c), torch's file-based timers
 * (timer_server.c), and the wait for the GPUs' memory before a restart. A bad check
 * (HEALTH_FAILED), an expired timer (HANG) and the GPUs' memory freed (RECLAIMED) are posted to
 * the hub (agent.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/agent_int.h"
#include "launcher/devices/gpumem.h"
#include "launcher/output/report.h"
#include "podrun/version.h"
#include "rdzv/base/common.h"

#define AGENT_RECLAIM_MS 1000  /* how often the GPUs' memory is looked at before a restart */

/* ---------- --health-port ---------- */

/* What /healthz and /metrics say about this agent now. Healthy while it starts, waits for the
 * rendezvous (a restart's included: the job is mending itself), runs its workers, and once they
 * all exited 0 waits for the job to finish; not once a worker failed, while stopping, or when
 * exiting, each with its reason. */
static void health_snapshot(void *arg, struct health_snapshot *s)
{
    struct agent *a = arg;
    s->state = agent_fsm_state_word(a->state);
    s->workers = a->n;
    s->workers_running = a->wg_ready ? a->wg.running : 0;
    s->restarts_used = a->job.restarts_used;
    s->max_restarts = a->cfg->max_restarts;
    if (a->rdzv.round >= 0) {
        s->round = a->rdzv.round;
        s->node_rank = a->rdzv.group_rank;
        s->nnodes = a->rdzv.group_world_size;
        s->world_size = a->rdzv.world_size;
        s->restart_count = a->rdzv.restart_count;
    }
    if (a->rdzv.rz)
        rdzv_agent_stats(a->rdzv.rz, &s->rdzv);
    s->check_on = a->health.check.interval_ms > 0;
    s->check_ok = a->health.check.last_ok;
    s->check_time = a->health.check.last_time;
    s->checks = a->health.check.checks;
    s->check_failures = a->health.check.failures;
    size_t cap = sizeof s->reason;
    s->healthy = 1;
    switch (a->state) {
    case AGENT_INIT:
        snprintf(s->reason, cap, "starting");
        break;
    case AGENT_RENDEZVOUS:
        if (a->cfg->discovery == CFG_DISCOVERY_K8S && !a->k8s.found)
            snprintf(s->reason, cap, "waiting for the job's pods (kubernetes)");
        else if (a->rdzv.attempt > 0)
            snprintf(s->reason, cap, "restarting in place: waiting for the rendezvous");
        else
            snprintf(s->reason, cap, "waiting for the rendezvous");
        break;
    case AGENT_STARTING:
        snprintf(s->reason, cap, "starting the workers of round %d", a->rdzv.round);
        break;
    case AGENT_RUNNING:
        if (a->failed.lr >= 0) {
            s->healthy = 0;
            snprintf(s->reason, cap, "%s", a->stop.why);
        } else {
            snprintf(s->reason, cap, "running %d worker%s (ranks %d-%d of %d), round %d, "
                     "restart %d", a->n, a->n == 1 ? "" : "s", a->rdzv.rank_base,
                     a->rdzv.rank_base + a->n - 1, a->rdzv.world_size, a->rdzv.round,
                     a->rdzv.restart_count);
        }
        break;
    case AGENT_STOPPING:
        if (a->workers_down && a->done_reported && !a->job.decided && a->failed.lr < 0 &&
            !a->stop.signal && !a->stop.quit && !a->job.lost) {
            /* every worker exited 0 and the job runs on elsewhere: nothing stops here */
            snprintf(s->reason, cap, "done: every worker exited 0; waiting for the job to "
                     "finish");
            break;
        }
        s->healthy = 0;
        snprintf(s->reason, cap, "%s: %s",
                 a->job.decided && a->job.action == RDZV_RESTART ? "restarting" : "stopping",
                 a->stop.why[0] ? a->stop.why : "the job stopped");
        break;
    default:
        s->healthy = 0;
        snprintf(s->reason, cap, "exiting with code %d%s%s", a->exit_code,
                 a->stop.why[0] ? ": " : a->job.finished ? ": the job finished" : "", a->stop.why);
        break;
    }
}

/* The health port opens before discovery and the rendezvous, so a probe is answered from the
 * start; a port that cannot be bound is this agent's start failing, said with the flag. */
int agent_health_start(struct agent *a)
{
    struct cfg *c = a->cfg;
    struct health_params hp = {
        .host = NULL, .port = c->health_port,
        .labels = {PODRUN_VERSION_STRING, a->id.name, c->rdzv_id, c->role},
        .snapshot = health_snapshot, .arg = a,
    };
    int r = health_start(a->loop, &hp, &a->health.port);
    if (r) {
        logs_message(&a->logs, "cannot serve --health-port %d: %s; pick another port",
                     c->health_port, podrun_strerror(r));
        a->health.port = NULL;
        return r;
    }
    logs_message(&a->logs, "serving /healthz and /metrics on port %d", health_port(a->health.port));
    return 0;
}

/* ---------- the checks while the workers run (devcheck.c) ---------- */

/* What the workers are told NAME is: their inherited environment, else what podrun derived. */
static const char *worker_var(struct agent *a, const char *name)
{
    size_t nl = strlen(name);
    for (int k = 0; k < 2; k++)
        for (char **e = k ? a->spawn.derived : a->envp; e && *e; e++)
            if (strncmp(*e, name, nl) == 0 && (*e)[nl] == '=')
                return *e + nl + 1;
    return NULL;
}

/* The GPUs the workers see and the links NCCL was told to use are watched from the moment this
 * attempt's workers run. A node whose traffic never leaves it (one node, no GPU) has no link to
 * watch, and a node without GPUs no GPU: such a job checks nothing and probes nothing. */
void agent_health_watch(struct agent *a)
{
    const char *ifs = worker_var(a, "NCCL_SOCKET_IFNAME"), *off = worker_var(a, "NCCL_IB_DISABLE");
    if (!ifs && a->nd && a->nd->nic_known && a->nd->nic.ifname[0])
        ifs = a->nd->nic.ifname;   /* NCCL picks it on its own */
    bool gpus = a->nd && node_gpu_count(a->nd) > 0, links = a->nd && node_needs_master(a->nd);
    devcheck_start(&a->health.check, gpus, links, worker_var(a, "NCCL_IB_HCA"),
                      off && strcmp(off, "0") != 0, ifs);
}

/* Where the job can go on without this node (--nnodes MIN:MAX still holds and it does not host
 * the job store), a node that fails its health check leaves it, as under --preflight-policy
 * exclude: the job restarts without it and uses no restart; else it is a failure record of the
 * node. */
bool agent_health_can_leave(struct agent *a)
{
    rdzv_stats_t st = {0};
    if (a->rdzv.rz)
        rdzv_agent_stats(a->rdzv.rz, &st);
    int left = a->rdzv.group_world_size - 1;
    return a->cfg->nnodes_min < a->cfg->nnodes_max && left >= a->cfg->nnodes_min && left > 0 &&
           !st.hosting;
}

/* A bad GPU or link is this node's failure, pushed to the job at once and the workers stopped. */
static void health_failed(void *arg, const char *why)
{
    agent_post(arg, AGENT_EV_HEALTH_FAILED, &(struct agent_evd){.why = why});
}

static void health_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* The checks report to the agent; they start with the workers (agent_health_watch). */
void agent_health_init(struct agent *a)
{
    devcheck_init(&a->health.check, a->loop, a->cfg->health_check_interval_ms);
    a->health.check.failed = health_failed;
    a->health.check.say = health_say;
    a->health.check.arg = a;
    a->health.check.rz = &a->rdzv.rz; /* `podrun status` shows each check (devcheck.h) */
}

/* ---------- torch's file-based timers (timer_server.c) ---------- */

/* The local rank of the running worker whose process group holds pid: the worker itself, or a
 * process it started (a shell's python, a DataLoader). */
static int timer_rank_of(void *arg, pid_t pid)
{
    struct agent *a = arg;
    if (!agent_wants(a, AGENT_EV_HANG))
        return -1;
    pid_t pg = getpgid(pid);
    for (int i = 0; i < a->wg.n; i++) {
        worker_t *w = &a->wg.w[i];
        if (w->state == WORKER_RUNNING && (w->pid == pid || (pg > 0 && w->pid == pg)))
            return i;
    }
    return -1;
}

/* An expired timer: its process gets the signal it asked for (torch's FileTimerServer sends it
 * to that pid alone), and the worker has failed like a hung one, with the timer as the reason. */
static void timer_expired(void *arg, const struct timer_entry *e, double late)
{
    struct agent *a = arg;
    if (timer_rank_of(a, e->pid) != e->lr)
        return;   /* stopping already, or the process is gone (its timers went with it) */
    char reason[RDZV_REASON_MAX], sn[32];
    if (e->signo <= 0) {
        logs_message(&a->logs, "rank %d: timer '%s' of pid %d expired; it asked for no signal",
                     a->rdzv.rank_base + e->lr, e->scope, (int)e->pid);
        return;
    }
    double after = (double)(long long)((e->expiration - e->acquired) * 10.0 + 0.5) / 10.0;
    snprintf(reason, sizeof reason, "timer '%.*s' expired after %g s", RDZV_REASON_MAX - 48,
             e->scope, after > 0 ? after : 0);
    if (a->cfg->debug)
        logs_message(&a->logs, "rank %d: timer '%s' expired %.3fs ago; %s goes to pid %d",
                     a->rdzv.rank_base + e->lr, e->scope, late,
                     report_signame(e->signo, sn, sizeof sn), (int)e->pid);
    agent_post(a, AGENT_EV_HANG, &(struct agent_evd){.lr = e->lr, .why = reason, .pid = e->pid,
                                                     .signo = e->signo});
}

static void timer_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* The timers' FIFO: TORCHELASTIC_TIMER_FILE when given, else in the run directory. */
int agent_health_timers(struct agent *a)
{
    char path[PATH_MAX + 64];
    int n = a->cfg->timer_file
                ? snprintf(path, sizeof path, "%s", a->cfg->timer_file)
                : snprintf(path, sizeof path, "%s/watchdog_timer.%s.%d", a->dir.base,
                           a->id.name, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof path) {
        logs_message(&a->logs, "cannot make the timer FIFO: its path is too long "
                     "(TORCHELASTIC_TIMER_FILE)");
        return -ENAMETOOLONG;
    }
    a->ts.rank_of = timer_rank_of;
    a->ts.expired = timer_expired;
    a->ts.say = timer_say;
    a->ts.arg = a;
    int r = timer_server_open(&a->ts, a->loop, path);
    if (r)
        logs_message(&a->logs, "cannot make the timer FIFO %s (TORCHELASTIC_TIMER_FILE): %s%s",
                     path, podrun_strerror(r),
                     r == -EEXIST ? "; name a path that is not a file, or remove it" : "");
    return r;
}

/* ---------- the GPUs' memory before a restart ---------- */

/* Before a restart on a node with GPUs: the memory the exited workers held is freed by the
 * driver, or by their leftover children, a moment after they are gone, and new workers started
 * on top of it run out of memory. So the node waits (looking again every AGENT_RECLAIM_MS, on the
 * loop) until its GPUs hold at most --gpu-memory-tolerance, for --gpu-memory-reclaim-timeout at
 * most; then it names what still holds memory and restarts anyway. */
static void on_reclaim_tick(uv_timer_t *t)
{
    struct agent *a = t->data;
    const struct cfg *c = a->cfg;
    uint64_t used = 0, waited = uv_now(a->loop) - a->reclaim.start;
    char holders[1024], err[256];
    double gib = 0;
    int r = gpumem_used(NULL, &used, holders, sizeof holders, err, sizeof err);
    gib = (double)used / (1 << 30);
    if (r) {
        logs_message(&a->logs, "cannot read the GPUs' memory (%s); restarting without waiting",
                     err);
    } else if (used <= c->gpu_memory_tolerance) {
        if (a->reclaim.said)
            logs_message(&a->logs, "the GPUs' memory was freed after %.1fs (%.2f GiB in use)",
                         waited / 1000.0, gib);
    } else if (waited >= c->gpu_reclaim_timeout_ms) {
        logs_message(&a->logs, "the GPUs still hold %.2f GiB after %.1fs (tolerance %.0f MiB); "
                     "held by: %s; restarting anyway", gib, waited / 1000.0,
                     (double)c->gpu_memory_tolerance / (1 << 20),
                     holders[0] ? holders : "no compute process NVML names");
    } else {
        if (!a->reclaim.said)
            logs_message(&a->logs, "waiting up to %.1fs for the GPUs' memory to be freed (%.2f "
                         "GiB in use, tolerance %.0f MiB)", c->gpu_reclaim_timeout_ms / 1000.0,
                         gib, (double)c->gpu_memory_tolerance / (1 << 20));
        a->reclaim.said = true;
        uint64_t left = c->gpu_reclaim_timeout_ms - waited;
        uv_timer_start(t, on_reclaim_tick, left < AGENT_RECLAIM_MS ? left : AGENT_RECLAIM_MS, 0);
        return;
    }
    agent_post(a, AGENT_EV_RECLAIMED, NULL);
}

/* Waits for the GPUs' memory when the node has GPUs NVML reads and a wait is asked for (true:
 * RECLAIMED follows); else false, nothing to wait for. The hub stops the timer when the job
 * moves on meanwhile. */
bool agent_health_reclaim(struct agent *a)
{
    if (!(a->nd && a->nd->gpus.source == GPU_SOURCE_NVML && a->nd->gpus.n > 0 &&
          a->cfg->gpu_reclaim_timeout_ms))
        return false;
    a->reclaim.start = uv_now(a->loop);
    a->reclaim.said = false;
    uv_timer_start(&a->reclaim.timer, on_reclaim_tick, 0, 0);
    return true;
}
