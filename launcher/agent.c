/* launcher/agent.c — the hub of the agent (see agent.h), on one libuv loop.
 *
 * Every run, one node or many, goes through the rendezvous (rdzv/rendezvous.h): this agent
 * joins, the coordinator in the agent that hosts the job store assigns ranks, and every
 * decision about the job — stop, restart, exit, finished — is pushed to every agent. The stages
 * (agent_int.h) and this file's own callbacks (the workers, init.c's children and signals, the
 * watchdog) report what happened as events (agent_post); the hub alone moves the state: it
 * gathers the facts, steps the table of agent_fsm.c, and executes the actions the table names by
 * calling the stages. doc/design.md#the-agents-states-and-events describes the states and events;
 * what the end says, the report and termination log, is agent_report.c. */
#include "launcher/agent.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/config/values.h"
#include "launcher/env/argv.h"
#include "launcher/workers/init.h"
#include "launcher/agent_int.h"
#include "rdzv/base/common.h"
#include "launcher/output/report.h"

#define AGENT_FLUSH_MS 10000   /* bound on writing the last output to a stalled reader */
#define AGENT_STRAY_MS 1000    /* grace for descendants that left their worker's group */
#define AGENT_LEAVE_MS 2000    /* bound on telling the job this node leaves */

/* The one place the state changes (agent_post, for the table). */
static void set_state(struct agent *a, enum agent_state s)
{
    if (a->state == s)
        return;
    if (a->cfg->debug)
        logs_message(&a->logs, "state %s -> %s", agent_fsm_state_name(a->state),
                     agent_fsm_state_name(s));
    a->state = s;
}

/* ---------- files: the run directory (rundir.c) ---------- */

void agent_rank_path(struct agent *a, int lr, const char *file, char *out, size_t len)
{
    rundir_path(&a->dir, lr, file, out, len);
}

/* ---------- stopping ---------- */

/* "<why>; stopping N workers (SIGTERM, SIGKILL after Ts)", or just why with none alive. */
void agent_say_stopping(struct agent *a, const char *why, int alive, int sig)
{
    char sn[32];
    if (alive)
        logs_message(&a->logs, "%s; stopping %d worker%s (%s, SIGKILL after %.1fs)", why, alive,
                     alive == 1 ? "" : "s", report_signame(sig, sn, sizeof sn),
                     (double)a->cfg->term_timeout_ms / 1000.0);
    else
        logs_message(&a->logs, "%s", why);
}

/* Stops this attempt's workers (sig, then SIGKILL after --term-timeout), saying why once; the
 * watchdog has nothing left to watch. Safe to call when the workers are already down: then only
 * the line is said. */
static void stop_job(struct agent *a, int sig, const char *why)
{
    if (why) {
        agent_say_stopping(a, why, workers_alive(&a->wg), sig);
        snprintf(a->stop.why, sizeof a->stop.why, "%.*s", (int)sizeof a->stop.why - 1, why);
    }
    watchdog_disarm_all(&a->wd);
    devcheck_stop(&a->health.check);
    if (!a->workers_down)
        workers_stop_all(&a->wg, sig, a->cfg->term_timeout_ms);
    restarts_stopping(&a->restarts);   /* a restart's record: the stop's phase begins */
}

/* Reads what the workers' pipes still hold and closes them: no output is lost at a stop. */
static void finish_streams(struct agent *a)
{
    for (int i = 0; i < 2 * a->n; i++)
        logs_stream_finish(&a->streams[i]);
}

/* Every worker of this attempt is gone (GONE): read the rest of their output. Gone on their own
 * (every one exited 0 while other nodes run on), they leave the checks nothing to watch: those
 * stop as at a stop (stop_job). */
static void workers_gone(struct agent *a)
{
    a->workers_down = true;
    devcheck_stop(&a->health.check);
    finish_streams(a);
}

/* The stop's grace passed with processes left: one line says whom the SIGKILL hits, so a log
 * whose checkpoint was cut short does not read like one that saved. */
static void on_grace_end(worker_group_t *g, uint64_t grace_ms)
{
    struct agent *a = g->data;
    char who[1024], sn[32];
    size_t n = 0;
    who[0] = 0;
    for (int i = 0; i < g->n && n < sizeof who; i++) {
        worker_t *w = &g->w[i];
        if (w->group_gone || w->pid <= 0)
            continue;
        int k = snprintf(who + n, sizeof who - n, "%srank %d (local_rank %d)%s", n ? ", " : "",
                         a->rdzv.rank_base + i, i,
                         w->state == WORKER_RUNNING ? "" : "'s leftover processes");
        n += k > 0 ? (size_t)k : 0;
    }
    logs_message(&a->logs, "the %.1fs grace after %s passed; sending SIGKILL to %s",
                 grace_ms / 1000.0, report_signame(g->stop_signal, sn, sizeof sn), who);
}

/* A process left behind after SIGKILL, said on stderr and kept for the termination log, where
 * `kubectl describe pod` shows it. */
static void say_stuck(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say_stuck(struct agent *a, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    logs_message(&a->logs, "%s", line);
    size_t used = strlen(a->end.stuck);
    if (used + strlen(line) + 10 < sizeof a->end.stuck)
        snprintf(a->end.stuck + used, sizeof a->end.stuck - used, "podrun: %s\n", line);
}

/* workers.c stopped the group (every worker reaped, or left behind after SIGKILL, which is
 * said): the attempt's workers are gone either way. */
static void on_stopped(worker_group_t *g)
{
    struct agent *a = g->data;
    for (int i = 0; i < g->n; i++) {
        worker_t *w = &g->w[i];
        if (w->state == WORKER_RUNNING)
            say_stuck(a, "rank %d (pid %d) did not exit %.1fs after SIGKILL (stuck in the "
                      "kernel?); leaving it behind", a->rdzv.rank_base + i, (int)w->pid,
                      g->kill_wait_ms / 1000.0);
        else if (!w->group_gone && w->pid > 0)
            say_stuck(a, "processes of rank %d's group (pgid %d) did not exit %.1fs after "
                      "SIGKILL; leaving them behind", a->rdzv.rank_base + i, (int)w->pid,
                      g->kill_wait_ms / 1000.0);
    }
    agent_post(a, AGENT_EV_WORKERS_GONE, NULL);
}

/* Workers of this attempt still running that the job waits for: all but services (parameter
 * servers, jobenv.h), which run until the job has finished. */
static int awaited_running(struct agent *a)
{
    int n = 0;
    for (int i = 0; i < a->wg.n; i++)
        n += a->wg.w[i].state == WORKER_RUNNING && !jobenv_is_service(&a->spawn.je, i);
    return n;
}

/* Every worker exited 0, and some left processes in their groups (LEFTOVERS): the job stops
 * them, and the line names them by rank. */
static void leftovers_why(struct agent *a, char *why, size_t cap)
{
    char procs[256];
    int named = 0;
    size_t used = (size_t)snprintf(why, cap, "every worker exited 0 but left processes "
                                   "in its group:");
    for (int i = 0; i < a->wg.n && used < cap; i++) {
        worker_t *w = &a->wg.w[i];
        if (w->group_gone || w->pid <= 0 || !init_group_members(w->pid, procs, sizeof procs))
            continue;
        int k = snprintf(why + used, cap - used, "%s rank %d (local_rank %d): %s",
                         named++ ? ";" : "", a->rdzv.rank_base + i, i, procs);
        used = k > 0 ? used + (size_t)k : used;
    }
    if (!named)
        why[used - 1] = '\0';   /* only zombies were left, gone by now: no ':' to nothing */
}

/* A worker exited while the attempt runs: the first non-zero exit is this node's failure; when
 * the last one the job waits for exits 0 the node is done (its services keep running until the
 * job has finished); when the last one exits the attempt's workers are gone (a group still
 * holding processes is stopped first). Exits while stopping are podrun's own signals at work and
 * mean nothing new. */
static void on_worker_exit(worker_group_t *g, worker_t *w)
{
    struct agent *a = g->data;
    int code = workers_exit_code(w->wstatus);
    timer_server_forget(&a->ts, w->index);   /* a dead worker's timers kill nothing */
    health_worker_exit(a->health.port, a->state != AGENT_RUNNING
                                           ? (a->failed.lr == w->index && a->failed.hang
                                                  ? HEALTH_EXIT_HANG
                                                  : HEALTH_EXIT_STOPPED)
                                       : code == 0               ? HEALTH_EXIT_SUCCESS
                                       : WIFSIGNALED(w->wstatus) ? HEALTH_EXIT_SIGNAL
                                                                 : HEALTH_EXIT_CODE);
    if (a->state != AGENT_RUNNING) {
        agent_failure_note_alone(a, w);
        return;   /* stopping: else these exits are our own signals at work */
    }
    watchdog_disarm(&a->wd, w->index);
    if (code != 0 && a->failed.lr < 0) {
        char cause[512];
        struct report_failure f = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                   .program = a->argv[0]};
        report_cause(&f, cause, sizeof cause);
        agent_post(a, AGENT_EV_LOCAL_FAILURE,
                   &(struct agent_evd){.lr = w->index, .code = code, .why = cause});
        return;
    }
    if (!a->done_reported && awaited_running(a) == 0) {
        a->done_reported = true;
        if (a->rdzv.rz && rdzv_agent_report_done(a->rdzv.rz))
            logs_message(&a->logs, "cannot report success to the job store");
    }
    if (g->running == 0) {
        /* a child the worker never reaped came to podrun with the worker's exit, a zombie still
         * in the worker's group: reaped first, it is no leftover */
        init_reap();
        agent_post(a, workers_alive(g) > 0 ? AGENT_EV_LEFTOVERS : AGENT_EV_WORKERS_GONE, NULL);
    }
}

/* ---------- the hang watchdog's events (watchdog.c) ---------- */

/* Only a running worker of a running attempt can hang. */
static bool hang_watching(void *arg, int lr)
{
    struct agent *a = arg;
    return agent_wants(a, AGENT_EV_HANG) && a->wg.w[lr].state == WORKER_RUNNING;
}

/* A hung worker is this node's failure like any other, reported as a hang. */
static void hang_fired(void *arg, int lr, const char *reason)
{
    agent_post(arg, AGENT_EV_HANG, &(struct agent_evd){.lr = lr, .why = reason});
}

/* ---------- leaving the job ---------- */

/* The leave record is out (or its time is up): whatever waited for it may go on. */
static void on_left(void *arg)
{
    agent_post(arg, AGENT_EV_LEFT, NULL);
}

static void on_leave_timeout(uv_timer_t *t)
{
    struct agent *a = t->data;
    if (a->stop.leave_pending)
        logs_message(&a->logs, "could not tell the job store that this node leaves within %.1fs",
                     AGENT_LEAVE_MS / 1000.0);
    agent_post(a, AGENT_EV_LEFT, NULL);
}

/* The job is told this node leaves (a signal, a check's verdict), bounded by AGENT_LEAVE_MS;
 * LEFT follows. */
static void tell_leave(struct agent *a, const char *reason)
{
    if (!a->rdzv.rz)
        return;
    a->stop.leave_pending = true;
    uv_timer_start(&a->stop.leave_timer, on_leave_timeout, AGENT_LEAVE_MS, 0);
    if (rdzv_agent_leave(a->rdzv.rz, reason, on_left, a))
        agent_post(a, AGENT_EV_LEFT, NULL);
}

/* ---------- a restart ---------- */

/* The GPUs' memory before the next join (RECLAIM): RECLAIMED once it is free or its wait is
 * over. */
static void reclaim_gpus(struct agent *a)
{
    if (!agent_health_reclaim(a))
        agent_post(a, AGENT_EV_RECLAIMED, NULL);
}

/* The attempt is over (RESTART, in STOPPING): a fresh attempt directory, a reset worker group,
 * then the GPUs' memory freed (agent_health_reclaim) before RECLAIMED makes the next join. A
 * restart decided before any worker ran (STARTING: the good nodes under --preflight-policy
 * exclude, a decision during the master's lookup or the front-end's agreement) waits in STOPPING
 * too, the state that takes RECLAIMED. */
static void restart(struct agent *a)
{
    if (a->job.restart_counted)
        logs_message(&a->logs, "restarting the job in place (restart %d of %d): %s",
                     a->job.restarts_used, a->cfg->max_restarts, a->job.dreason);
    else
        logs_message(&a->logs, "restarting the job in place (the nodes changed; no restart "
                     "used): %s", a->job.dreason);
    agent_cluster_restart(a);
    restarts_gone(&a->restarts);
    agent_stacks_end(a, false);
    rundir_remove(&a->dir, false);
    timer_server_clear(&a->ts);
    workers_reset(&a->wg);
    jobenv_cancel(&a->spawn.je);
    a->rdzv.attempt++;
    a->job.decided = false;
    a->failed.lr = -1;
    a->health.bad = false;
    a->done_reported = false;   /* the ended attempt's: this node is not done with the next */
    a->stop.why[0] = '\0';   /* the ended attempt's reason: /healthz must not give it again */
    a->jobset.barrier = agent_cluster_barrier(a);   /* JOBSET_GO, then RECLAIM */
    if (!a->jobset.barrier)
        reclaim_gpus(a);
}

/* EXIT_INSTEAD: the JobSet ended, so the restart the job decided (or that waits at its barrier)
 * is not made: the decision becomes an exit with the same root cause, as if the job's own
 * restarts were used up. */
static void exit_instead(struct agent *a)
{
    struct agent_decision *j = &a->job;
    /* a copy: STOPPED keeps the decision's records where these come from */
    rdzv_failure_t *f = malloc((size_t)(j->dn ? j->dn : 1) * sizeof *f);
    if (!f)
        return;
    memcpy(f, j->dfail, (size_t)j->dn * sizeof *f);
    rdzv_decision_t d = {.action = RDZV_EXIT, .n = j->dn, .failures = f, .own = j->own,
                         .restart_counted = j->restart_counted, .restart_count = j->restarts_used,
                         .n_bad = j->n_bad};
    memcpy(d.bad, j->bad, (size_t)j->n_bad * sizeof *d.bad);
    snprintf(d.reason, sizeof d.reason, "%s", j->dreason);
    agent_post(a, AGENT_EV_STOPPED, &(struct agent_evd){.dec = &d});
    free(f);
}

/* The next join (REJOIN, now RENDEZVOUS). A rejoin that cannot be sent is a lost store. */
static void rejoin(struct agent *a)
{
    health_rdzv_joining(a->health.port);
    restarts_rejoining(&a->restarts);
    agent_rdzv_progress(a);   /* the trainer's progress rides in the join */
    int r = rdzv_agent_rejoin(a->rdzv.rz);
    if (r) {
        char why[RDZV_REASON_MAX + 64];
        snprintf(why, sizeof why, "cannot rejoin the job: %s", podrun_strerror(r));
        agent_post(a, AGENT_EV_LOST, &(struct agent_evd){.err = PODRUN_ESTORELOST, .why = why});
    }
}

/* ---------- init.c's events ---------- */

static void close_all(uv_timer_t *t);

/* init.c reaped a child: the guard, a worker (workers.c), or an orphan or stray it adopted as
 * subreaper. The last stray of the end lets the agent close at once instead of after its grace. */
static void on_child(void *arg, pid_t pid, int wstatus)
{
    struct agent *a = arg;
    if (pid == a->wg.guard_pid) {
        a->wg.guard_pid = 0;   /* gone early: nothing left to reap at the end */
        return;
    }
    if (a->wg.w && workers_reaped(&a->wg, pid, wstatus))
        return;
    if (a->pf.check && pf_reaped(a->pf.check, pid, wstatus))
        return;
    /* only a stray's own exit shortens its grace, not an orphan's reaped meanwhile */
    int i = 0;
    while (i < a->end.strays && a->end.stray[i] != pid)
        i++;
    if (i == a->end.strays)
        return;
    a->end.stray[i] = a->end.stray[--a->end.strays];
    if (a->end.strays == 0 && !a->end.strays_untracked && a->state == AGENT_DONE)
        uv_timer_start(&a->end.exit_timer, close_all, 0, 0);
}

/* SIGTERM/SIGINT, and the signals --signals-to-handle names (torch 2.x's rule), stop the job on
 * this node: the job is told this node leaves (bounded by AGENT_LEAVE_MS), the workers get the
 * same signal, and podrun exits 128+signal; a second one sends SIGKILL at once. Any other
 * forwarded signal goes to every worker's process group. */
static void on_signal(void *arg, int sig)
{
    agent_post(arg, AGENT_EV_SIGNAL, &(struct agent_evd){.sig = sig});
}

/* ---------- the end ---------- */

/* The strays signalled at the end that still live after their grace: one line names them
 * before they get SIGKILL, so a daemon's cut-short flush is not a mystery. */
static void say_strays_left(struct agent *a)
{
    char who[512], one[96];
    size_t used = 0;
    int left = 0;
    who[0] = '\0';
    for (int i = 0; i < a->end.strays; i++) {
        if (init_proc_label(a->end.stray[i], one, sizeof one) <= 0)
            continue;   /* gone, or a zombie waiting to be reaped */
        int k = left++ < 8 ? snprintf(who + used, sizeof who - used, "%s%s", used ? ", " : "",
                                      one) : 0;
        used = k > 0 && used + (size_t)k < sizeof who ? used + (size_t)k : used;
    }
    if (left)
        logs_message(&a->logs, "%d process%s that left %s worker's group still there %.1fs after "
                     "SIGTERM: %s%s; sending SIGKILL", left, left == 1 ? "" : "es",
                     left == 1 ? "its" : "their", AGENT_STRAY_MS / 1000.0, who,
                     left > 8 ? ", ..." : "");
}

/* DONE: every handle closes, so uv_run returns; stray processes still there get SIGKILL. */
static void close_all(uv_timer_t *t)
{
    struct agent *a = t->data;
    say_strays_left(a);
    health_close(a->health.port);
    a->health.port = NULL;
    logs_close(&a->logs);
    /* whatever of the strays is still there after its grace */
    init_signal_children(SIGKILL, a->wg.guard_pid, NULL, 0);
    if (a->wg_ready)
        workers_close(&a->wg);
    watchdog_close(&a->wd);
    timer_server_close(&a->ts);
    agent_stacks_close(a);
    devcheck_close(&a->health.check);
    agent_cluster_close(a);
    init_stop();
    uv_close((uv_handle_t *)&a->end.exit_timer, NULL);
    uv_close((uv_handle_t *)&a->stop.leave_timer, NULL);
    uv_close((uv_handle_t *)&a->reclaim.timer, NULL);
}

/* EXITING -> DONE once the output is drained and the rendezvous closed (CLOSE): strays get
 * their grace (AGENT_STRAY_MS) before close_all. */
static void close_soon(struct agent *a)
{
    uv_timer_start(&a->end.exit_timer, close_all,
                   a->end.strays || a->end.strays_untracked ? AGENT_STRAY_MS : 0, 0);
}

/* podrun's own output is written (or AGENT_FLUSH_MS passed): a line about output lost on one
 * stream goes out on the other, which is drained again. */
static void on_drained(struct logs *L, bool complete)
{
    struct agent *a = L->data;
    if (complete && logs_say_dropped(L)) {   /* lost on one stream: said on the other */
        logs_drain(L, AGENT_FLUSH_MS, on_drained);
        return;
    }
    a->end.drained = true;
    agent_post(a, AGENT_EV_OUTPUT_DONE, NULL);
}

/* The rendezvous is closed (the host: every other agent is gone): drain once more and finish. */
static void on_rdzv_closed(void *arg)
{
    struct agent *a = arg;
    a->rdzv.rz = NULL;
    /* the host's last lines (who it waited for) may have come after the first drain */
    a->end.drained = false;
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
}

/* EXITING: something the end waited for is done (the last report, the last Event); what it
 * said goes out, and OUTPUT_DONE comes once it is written. */
void agent_drain_again(struct agent *a)
{
    a->end.drained = false;
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
}

/* The failure of the decision whose exit code is not to be retried, or NULL. */
static const rdzv_failure_t *fatal_failure(const struct agent *a)
{
    for (int i = 0; i < a->job.dn; i++)
        if (a->job.dfail[i].fatal)
            return &a->job.dfail[i];
    return NULL;
}

/* podrun's exit status, from how the job ended for this node (agent_fsm_exit_status decides). */
static int exit_status(const struct agent *a)
{
    const struct cfg *c = a->cfg;
    const rdzv_failure_t *root = &a->job.dfail[0];
    struct agent_outcome o = {
        .signal = a->stop.signal, .quit = a->stop.quit,
        .decided_exit = a->job.decided && a->job.action == RDZV_EXIT,
        .fatal = fatal_failure(a) != NULL, .dn = a->job.dn, .own = a->job.own,
        .root_rank = root->rank, .root_signo = root->signo, .root_exit_code = root->exit_code,
        .failed_lr = a->failed.lr, .failed_hang = a->failed.hang, .failed_code = a->failed.code,
        .health_bad = a->health.bad, .lost = a->job.lost, .lost_err = a->job.lost_err,
        .finished = a->job.finished, .start_err = a->end.start_err,
        .start_usage = a->end.start_usage, .start_timeout = a->end.start_timeout,
    };
    struct agent_codes codes = {
        .preflight = c->exit_code_preflight, .fatal = c->exit_code_fatal,
        .hang = c->exit_code_hang, .peer_lost = c->exit_code_peer_lost,
        .peer_failure = c->exit_code_peer_failure, .store_lost = c->exit_code_store_lost,
        .rdzv_timeout = c->exit_code_rdzv_timeout,
    };
    return agent_fsm_exit_status(&o, &codes);
}

/* EXITING (EXIT): the exit status and the one report for how the job ended (agent_report_end),
 * the run directory removed, strays asked to go, the rendezvous closed (the host keeps the store
 * up for the others), and podrun's output drained. */
static void enter_exiting(struct agent *a)
{
    a->exit_code = exit_status(a);
    k8s_discover_close(a->k8s.watch);   /* nothing to watch for any more */
    a->k8s.watch = NULL;
    if (a->spawn.gai_pending)
        uv_cancel((uv_req_t *)&a->spawn.gai);
    if (a->pf.check) {
        pf_cancel(a->pf.check);
        a->pf.check = NULL;
    }
    watchdog_disarm_all(&a->wd);
    uv_timer_stop(&a->reclaim.timer);
    jobenv_cancel(&a->spawn.je);
    finish_streams(a);
    agent_report_end(a, fatal_failure(a));
    logs_say_dropped(&a->logs);
    timer_server_stop(&a->ts);   /* before the run directory that may hold the FIFO goes */
    agent_stacks_end(a, true);
    restarts_end(&a->restarts, a->dir.keep);
    rundir_remove(&a->dir, true);
    /* The workers' groups are gone; what is left among podrun's children left its group
     * (setsid, a daemon) and was adopted by podrun as subreaper: it goes with the job. */
    int n = init_signal_children(SIGTERM, a->wg.guard_pid, a->end.stray, AGENT_STRAYS_MAX);
    a->end.strays = n < AGENT_STRAYS_MAX ? n : AGENT_STRAYS_MAX;
    a->end.strays_untracked = n > AGENT_STRAYS_MAX;
    agent_cluster_end(a);   /* the TrainJob's last report, the last Event: within their bounds */
    /* done once the output is drained, the rendezvous closed (on_rdzv_closed drains again) and
     * the TrainJob's last report answered and the last Event out */
    if (a->rdzv.rz)
        rdzv_agent_close(a->rdzv.rz, on_rdzv_closed, a);
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
}

/* ---------- the hub: events in, the table's actions out ---------- */

/* What one event brings while its actions run. Kept on the stack of its agent_post: an action
 * may post another event (a leave that cannot be sent is LEFT at once), which has its own. */
struct agent_ctx {
    enum agent_ev ev;
    const struct agent_evd *d;
    int step;                       /* STEP: the step to run */
    int sig;                        /* STOP, RESTOP: the signal */
    char why[RDZV_LINE_MAX + 64];   /* STOP: the reason said; "": none. FAIL, SAY: the reason */
    char leave[RDZV_REASON_MAX];    /* TELL_LEAVE, LEAVE: the reason the job is told */
    int lr, code;                   /* FAIL: the local rank, its code, */
    bool hang;                      /*   a hang */
    bool out;                       /* HEALTH_FAILED: the node leaves the job */
};

static void post(struct agent *a, enum agent_ev ev, const struct agent_evd *d, bool again);

static void gather_facts(struct agent *a, enum agent_ev ev, const struct agent_evd *d,
                         bool again, struct agent_facts *f)
{
    memset(f, 0, sizeof *f);
    f->workers_down = a->workers_down;
    f->leaving = a->stop.leave_pending;
    f->signal = a->stop.signal != 0;
    f->quit = a->stop.quit;
    f->lost = a->job.lost;
    f->finished = a->job.finished;
    f->decided = a->job.decided;
    f->restart = a->job.action == RDZV_RESTART;
    f->failed = a->failed.lr >= 0;
    f->health_bad = a->health.bad;
    f->check_running = a->pf.check != NULL;
    f->verdict_first = a->cfg->preflight_policy != CFG_POLICY_WARN;
    f->reclaiming = uv_is_active((const uv_handle_t *)&a->reclaim.timer);
    f->drained = a->end.drained && !agent_cluster_busy(a);   /* the last report and Event too */
    f->closed = !a->rdzv.rz;
    f->barrier = a->jobset.barrier;
    f->behind_told = a->jobset.behind_told;
    f->again = again;
    f->step = d->step;
    if (ev == AGENT_EV_SIGNAL)
        f->stops = d->sig == SIGTERM || d->sig == SIGINT || (a->stop.signals >> d->sig & 1);
    if (ev == AGENT_EV_HEALTH_FAILED && !f->failed && !f->health_bad)
        f->out = agent_health_can_leave(a);
}

/* ASSIGNED: this node's ranks for the round, a fresh attempt's bookkeeping. */
static void take_assigned(struct agent *a, const rdzv_assignment_t *as)
{
    a->rdzv.group_rank = as->node_rank;
    a->rdzv.group_world_size = as->nnodes;
    if (as->nnodes > 1)   /* a node count that discovery learned after the plan */
        a->nd->several_nodes = true;
    a->rdzv.rank_base = as->rank_base;
    a->rdzv.world_size = as->world_size;
    a->rdzv.restart_count = as->restart_count;
    snprintf(a->rdzv.master_addr, sizeof a->rdzv.master_addr, "%s", as->store_host);
    a->rdzv.master_port = as->store_port;
    a->failed.lr = -1;
    a->failed.hang = false;
    a->job.decided = false;
    a->ended_alive = 0;
    a->done_reported = false;
    if (a->cfg->debug)
        logs_message(&a->logs, "round %d: node rank %d of %d, ranks %d-%d of %d, restart %d",
                     as->round, as->node_rank, as->nnodes, as->rank_base,
                     as->rank_base + a->n - 1, as->world_size, as->restart_count);
    a->rdzv.round = as->round;
    agent_cluster_round(a);
    restarts_assigned(&a->restarts);
    health_rdzv_assigned(a->health.port);
}

/* STOPPED: the job's decision, kept (its records are valid only during the callback). */
static void take_decision(struct agent *a, const rdzv_decision_t *d, struct agent_ctx *x)
{
    a->job.decided = true;
    a->job.action = d->action;
    a->job.dn = d->n < RDZV_MAX_FAILURES ? d->n : RDZV_MAX_FAILURES;
    a->job.own = d->own;
    a->job.restart_counted = d->restart_counted;
    a->job.restarts_used = d->restart_count;
    if (a->job.dn > 0)
        memcpy(a->job.dfail, d->failures, (size_t)a->job.dn * sizeof *a->job.dfail);
    snprintf(a->job.dreason, sizeof a->job.dreason, "%s", d->reason);
    restarts_decided(&a->restarts, d);
    a->job.n_bad = d->n_bad;
    memcpy(a->job.bad, d->bad, (size_t)d->n_bad * sizeof *d->bad);
    health_job_stopped(a->health.port, d, podrun_time_epoch());
    snprintf(x->why, sizeof x->why, "the job stopped: %s", d->reason);
    if (!a->stop.why[0])   /* stopped by the round's end, or while STARTING: the job's reason */
        snprintf(a->stop.why, sizeof a->stop.why, "%.*s", (int)sizeof a->stop.why - 1, x->why);
    agent_cluster_decided(a);   /* the Event, and a JobSet's next in-place attempt */
}

/* HEALTH_FAILED: the node is bad for this attempt; the stop is said, and where the job goes on
 * without the node (LEAVE follows) so is that. */
static void take_health(struct agent *a, struct agent_ctx *x)
{
    const char *why = x->d->why;
    a->health.bad = true;
    snprintf(x->leave, sizeof x->leave, "health check: %s", why);
    snprintf(a->stop.why, sizeof a->stop.why, "this node failed its health check: %s", why);
    agent_say_stopping(a, a->stop.why, workers_alive(&a->wg), SIGTERM);
    if (x->out)
        logs_message(&a->logs, "health check: this node takes itself out of the job; the job "
                     "goes on with the other %d; exit code %d", a->rdzv.group_world_size - 1,
                     a->cfg->exit_code_preflight);
}

/* CANNOT_START: why, for the exit status; unless the stage said it, one last line with the
 * reason and its fix, the one a person and the termination log see. */
static void take_cannot_start(struct agent *a, const struct agent_evd *d)
{
    a->end.start_err = d->err;
    a->end.start_usage = d->usage;
    a->end.start_timeout = d->timeout;
    if (d->said)
        return;
    char line[sizeof a->end.start_why + 64];
    int n = snprintf(line, sizeof line, "podrun: cannot start the job: %s\n",
                     a->end.start_why[0] ? a->end.start_why : podrun_strerror(d->err));
    logs_message(&a->logs, "%.*s", n > 9 ? n - 9 : 0, line + 8);
    agent_report_termlog(a, line,
                         n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* TAKE: what the event says, recorded where the hub and the stages read it. */
static void take(struct agent *a, struct agent_ctx *x)
{
    const struct agent_evd *d = x->d;
    char sn[32];
    switch (x->ev) {
    case AGENT_EV_CANNOT_START: take_cannot_start(a, d); break;
    case AGENT_EV_ASSIGNED: take_assigned(a, d->as); break;
    case AGENT_EV_STEP_FAILED: {
        /* the workers that did start are stopped; the job hears of it as this node failing */
        a->workers_down = false;
        x->lr = 0;
        while (x->lr < a->n && a->wg.w[x->lr].state == WORKER_RUNNING)
            x->lr++;
        if (x->lr >= a->n)
            x->lr = 0;
        x->code = 1;
        if (d->why)
            snprintf(x->why, sizeof x->why, "%s", d->why);
        else
            snprintf(x->why, sizeof x->why, "could not start: %s", podrun_strerror(d->err));
        health_worker_exit(a->health.port, HEALTH_EXIT_SPAWN);
        break;
    }
    case AGENT_EV_LOCAL_FAILURE:
        x->lr = d->lr;
        x->code = d->code;
        x->hang = d->hang;
        snprintf(x->why, sizeof x->why, "%s", d->why);
        break;
    case AGENT_EV_HEALTH_FAILED: take_health(a, x); break;
    case AGENT_EV_LEFTOVERS: leftovers_why(a, x->why, 768); break;   /* one line for a few ranks */
    case AGENT_EV_ENDING:
        a->ended_alive = workers_alive(&a->wg);
        a->services_alive = 0;
        for (int i = 0; i < a->wg.n; i++)
            a->services_alive +=
                jobenv_is_service(&a->spawn.je, i) && a->wg.w[i].state == WORKER_RUNNING;
        break;
    case AGENT_EV_STOPPED: take_decision(a, d->dec, x); break;
    case AGENT_EV_FINISHED: a->job.finished = true; break;
    case AGENT_EV_LOST:
        a->job.lost = true;
        a->job.lost_err = d->err;
        a->job.no_retry = d->err == PODRUN_ENOPROGRESS;
        snprintf(a->stop.why, sizeof a->stop.why, "%s", d->why);
        snprintf(x->why, sizeof x->why, "%s", d->why);
        break;
    case AGENT_EV_POD_LOST:
        logs_message(&a->logs, "kubernetes: pod %s (%s) of the job: %s", d->name, d->ip, d->why);
        break;
    case AGENT_EV_SIGNAL:
        a->stop.signal = d->sig;
        x->sig = d->sig;
        report_signame(d->sig, sn, sizeof sn);
        snprintf(x->leave, sizeof x->leave, "%s", sn);
        snprintf(x->why, sizeof x->why, "got %s", sn);
        break;
    case AGENT_EV_LEFT:
        a->stop.leave_pending = false;
        uv_timer_stop(&a->stop.leave_timer);
        break;
    case AGENT_EV_JOBSET_GO: a->jobset.barrier = a->jobset.behind_told = false; break;
    case AGENT_EV_JOBSET_BEHIND:
        a->jobset.behind_told = true;
        logs_message(&a->logs, "%s", d->why);
        break;
    case AGENT_EV_JOBSET_ENDED: a->jobset.barrier = false; break;
    default: break;
    }
}

/* SAY: the event's reason, with no worker of this node to stop. */
static void say(struct agent *a, struct agent_ctx *x)
{
    if (x->ev == AGENT_EV_STOPPED && a->ended_alive > 0)   /* stopped at the round's end */
        agent_say_stopping(a, x->why, a->ended_alive, SIGTERM);
    else if (x->ev == AGENT_EV_LOST && strcmp(x->why, a->rdzv.last_progress) != 0)
        logs_message(&a->logs, "%s", x->why);   /* unless the rendezvous already said it */
    a->ended_alive = 0;
}

/* RDZV_START: the join (-> RENDEZVOUS). One that cannot start ends the job before it ran. */
static void rdzv_start(struct agent *a)
{
    health_rdzv_joining(a->health.port);
    int r = agent_rdzv_start(a);
    if (r)   /* the stage said why; --discovery k8s says no more */
        agent_post(a, AGENT_EV_CANNOT_START,
                   &(struct agent_evd){.err = r, .said = a->cfg->discovery == CFG_DISCOVERY_K8S});
}

/* The first join, at the start or once a JobSet's barrier is down (JOIN): through the job's pods
 * (--discovery k8s), else the rendezvous at once. */
static int join(struct agent *a)
{
    if (a->cfg->discovery == CFG_DISCOVERY_K8S)
        return agent_k8s_start(a);
    agent_post(a, AGENT_EV_DISCOVERED, NULL);
    return 0;
}

/* STARTING's steps, in their order (agent_fsm.h); each reports STEP_DONE or STEP_FAILED. */
static void (*const starting[AGENT_NSTEPS])(struct agent *a) = {
    [AGENT_STEP_ENV] = agent_spawn_derive_env,
    [AGENT_STEP_PREFLIGHT] = agent_preflight_run,
    [AGENT_STEP_FRONTEND] = agent_spawn_prepare,
    [AGENT_STEP_SPAWN] = agent_spawn_workers,
};

static void run_actions(struct agent *a, struct agent_ctx *x, unsigned acts);

/* One action of the table, done. */
static void act(struct agent *a, struct agent_ctx *x, unsigned bit)
{
    char sn[32];
    switch (bit) {
    case AGENT_ACT_TAKE: take(a, x); break;
    case AGENT_ACT_VERDICT_NOW: pf_verdict_now(a->pf.check); break;
    case AGENT_ACT_FORWARD:
        a->stop.forwarded |= 1ULL << x->d->sig;
        workers_signal(&a->wg, x->d->sig);
        break;
    case AGENT_ACT_GATHER:
        agent_stacks_then_kill(a, x->d->lr, x->d->why, x->d->pid, x->d->signo);
        break;
    case AGENT_ACT_KILL:
        logs_message(&a->logs, "got %s again; sending SIGKILL now",
                     report_signame(x->d->sig, sn, sizeof sn));
        if (!a->workers_down)
            workers_stop_all(&a->wg, SIGKILL, 0);
        break;
    case AGENT_ACT_TELL_FAILURE: agent_failure_node(a, x->leave); break;
    case AGENT_ACT_FAIL: agent_failure_local(a, x->lr, x->code, x->hang, x->why); break;
    case AGENT_ACT_TELL_LEAVE: tell_leave(a, x->leave); break;
    case AGENT_ACT_STOP:
        stop_job(a, x->sig, x->ev == AGENT_EV_STOPPED || x->ev == AGENT_EV_LOST ||
                                    x->ev == AGENT_EV_SIGNAL || x->ev == AGENT_EV_LEFTOVERS
                                ? x->why
                                : NULL);
        break;
    case AGENT_ACT_RESTOP:
        if (!a->workers_down)
            workers_stop_all(&a->wg, x->sig, a->cfg->term_timeout_ms);
        break;
    case AGENT_ACT_SAY: say(a, x); break;
    case AGENT_ACT_LEAVE:
        a->stop.quit = true;
        tell_leave(a, x->leave);
        break;
    case AGENT_ACT_GONE: workers_gone(a); break;
    case AGENT_ACT_TELL_PEER_LOST:
        if (a->rdzv.rz) {
            int r = rdzv_agent_report_peer_lost(a->rdzv.rz, x->d->name, x->d->ip, x->d->why);
            if (r)
                logs_message(&a->logs, "cannot report the lost pod to the job store: %s",
                             podrun_strerror(r));
        }
        break;
    case AGENT_ACT_RDZV_START: rdzv_start(a); break;
    case AGENT_ACT_JOIN: {
        int r = join(a);
        if (r)
            agent_post(a, AGENT_EV_CANNOT_START,
                       &(struct agent_evd){.err = r, .usage = r == -EINVAL});
        break;
    }
    case AGENT_ACT_CATCH_UP: agent_cluster_catch_up(a); break;
    case AGENT_ACT_STEP:
        if (x->step == AGENT_STEP_SPAWN)
            a->workers_down = false;
        starting[x->step](a);
        break;
    case AGENT_ACT_WATCH: agent_health_watch(a); break;
    case AGENT_ACT_CANCEL_CHECK:
        pf_cancel(a->pf.check);   /* the job moved on without the check */
        a->pf.check = NULL;
        break;
    case AGENT_ACT_CANCEL_FRONTEND: jobenv_cancel(&a->spawn.je); break;
    case AGENT_ACT_CANCEL_RECLAIM: uv_timer_stop(&a->reclaim.timer); break;
    case AGENT_ACT_RESTART: restart(a); break;
    case AGENT_ACT_RECLAIM: reclaim_gpus(a); break;
    case AGENT_ACT_REJOIN: rejoin(a); break;
    case AGENT_ACT_EXIT_INSTEAD: exit_instead(a); break;
    case AGENT_ACT_LOSE: agent_post(a, AGENT_EV_LOST, x->d); break;
    case AGENT_ACT_EXIT: enter_exiting(a); break;
    case AGENT_ACT_CLOSE: close_soon(a); break;
    case AGENT_ACT_SETTLE: {
        struct agent_facts f;
        gather_facts(a, x->ev, x->d, true, &f);
        struct agent_next n = agent_fsm_settle(a->state, &f);
        set_state(a, n.next);
        run_actions(a, x, n.actions);
        break;
    }
    case AGENT_ACT_AGAIN: post(a, x->ev, x->d, true); break;
    default: break;
    }
}

/* The actions in their order; the state is set once what the event says is taken. */
static void run_actions(struct agent *a, struct agent_ctx *x, unsigned acts)
{
    for (unsigned b = 0; b < AGENT_NACTIONS; b++)
        if (acts >> b & 1)
            act(a, x, 1u << b);
}

static void post(struct agent *a, enum agent_ev ev, const struct agent_evd *d, bool again)
{
    static const struct agent_evd none;
    if (!d)
        d = &none;
    struct agent_facts f;
    gather_facts(a, ev, d, again, &f);
    struct agent_next n = agent_fsm_step(a->state, ev, &f);
    if (!n.accepted)
        return;   /* late: the state moved on, the event means nothing now */
    struct agent_ctx x = {.ev = ev, .d = d, .step = n.step, .sig = SIGTERM, .out = f.out};
    if (d->why)
        snprintf(x.leave, sizeof x.leave, "%s", d->why);
    if (n.actions & AGENT_ACT_TAKE)
        take(a, &x);
    set_state(a, n.next);
    run_actions(a, &x, n.actions & ~(unsigned)AGENT_ACT_TAKE);
}

void agent_post(struct agent *a, enum agent_ev ev, const struct agent_evd *d)
{
    post(a, ev, d, false);
}

void agent_post_step(struct agent *a, enum agent_step s)
{
    agent_post(a, AGENT_EV_STEP_DONE, &(struct agent_evd){.step = (int)s});
}

bool agent_wants(struct agent *a, enum agent_ev ev)
{
    static const struct agent_evd none;
    struct agent_facts f;
    gather_facts(a, ev, &none, false, &f);
    return agent_fsm_step(a->state, ev, &f).accepted;
}

/* The run directory; a fallback from an unwritable TMPDIR is said once, with how to choose. */
static int open_rundir(struct agent *a)
{
    const struct cfg *c = a->cfg;
    int r = rundir_open(&a->dir, c);
    char *why = a->end.start_why;
    if (r && c->log_dir)
        snprintf(why, sizeof a->end.start_why, "cannot create the run directory under %s: %s; "
                 "give --log-dir a writable directory", a->dir.base, podrun_strerror(r));
    else if (r)
        snprintf(why, sizeof a->end.start_why, "cannot create the run directory under %s (%s), "
                 "nor under %s/dev/shm, /var/tmp or /run; set TMPDIR to a writable directory (in "
                 "Kubernetes, mount an emptyDir there)", a->dir.base, podrun_strerror(r),
                 strcmp(a->dir.base, "/tmp") ? "/tmp, " : "");
    else if (a->dir.fallback)
        logs_message(&a->logs, "cannot create the run directory under %s (%s); using %s instead "
                     "(set TMPDIR to a writable directory, e.g. an emptyDir, to choose)",
                     a->dir.tried, podrun_strerror(a->dir.tried_err), a->dir.base);
    return r;
}

/* PID 1's duties (signals, reaping, subreaper), the run directory, the worker group and its
 * guard, the watchdog; then discovery or the rendezvous. An error (*usage: a usage error) leaves
 * the agent to exit. */
static int start(struct agent *a, bool *usage)
{
    struct cfg *c = a->cfg;
    int r = init_start(a->loop, on_child, on_signal, a);
    if (r)
        return r;
    if ((r = init_become_subreaper()))
        logs_message(&a->logs, "cannot become a child subreaper (%s); orphaned grandchildren "
                     "of the workers will be reaped by the system's init", podrun_strerror(r));
    if ((r = open_rundir(a)))
        return r;
    if ((r = progress_init(&a->progress, c->progress_file))) {
        snprintf(a->end.start_why, sizeof a->end.start_why, "--progress-file %s: %s; give a "
                 "shorter path", c->progress_file, podrun_strerror(r));
        *usage = true;   /* a flag's value: exit 2 (agent_fsm_exit_status) */
        return r;
    }
    if ((r = workers_init(&a->wg, a->loop, a->n)))
        return r;
    a->wg_ready = true;
    a->wg.data = a;
    a->wg.on_exit = on_worker_exit;
    a->wg.on_stopped = on_stopped;
    a->wg.on_grace_end = on_grace_end;
    a->wg.stop_to = c->stop_signal_to == CFG_STOP_GROUP    ? WORKERS_STOP_GROUP
                    : c->stop_signal_to == CFG_STOP_WORKER ? WORKERS_STOP_WORKER
                                                           : WORKERS_STOP_WORKER_FIRST;
    a->workers_down = true;   /* none started yet */
    /* a PID 1's death takes its whole PID namespace with it: no guard needed there */
    if (!init_is_pid1() && (r = workers_guard_start(&a->wg)))
        logs_message(&a->logs, "cannot start the guard process (%s); if podrun is killed, "
                     "processes its workers started may be left behind", podrun_strerror(r));
    if ((r = watchdog_init(&a->wd, a->loop, a->n, c->hang_timeout_ms)))
        return r;
    if (c->health_port >= 0 && (r = agent_health_start(a)))
        return r;
    agent_cluster_trainjob(a);   /* Kubeflow Trainer's status server, where it is given */
    a->wd.streams = a->streams;
    a->wd.dir = &a->dir;
    a->wd.watching = hang_watching;
    a->wd.hung = hang_fired;
    a->wd.arg = a;
    if (c->file_timer && (r = agent_health_timers(a)))
        return r;
    if ((r = agent_stacks_start(a)))
        return r;
    char gerr[600];
    r = guards_load(c, &a->guards, gerr, sizeof gerr);
    if (r) {
        logs_message(&a->logs, "%s", gerr);
        *usage = r == -EINVAL;
        return r;
    }
    a->jobset.barrier = true;   /* held until JOBSET_GO, which makes the first join */
    if (agent_cluster_start(a))
        return 0;
    a->jobset.barrier = false;   /* no JobSet's barrier: the first join now */
    r = join(a);
    *usage = r == -EINVAL;
    return r;
}

int agent_run(struct cfg *cfg, char **envp, struct node_devices *nd)
{
    struct agent *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "podrun: out of memory\n");
        return 1;
    }
    a->cfg = cfg;
    a->envp = envp;
    a->nd = nd;
    a->failed.lr = -1;
    timer_server_init(&a->ts);
    a->loop = uv_default_loop();
    agent_health_init(a);
    ssize_t el = readlink("/proc/self/exe", a->pf.exe, sizeof a->pf.exe - 1);
    a->pf.exe[el > 0 ? el : 0] = '\0';
    a->rdzv.round = -1;
    a->n = cfg->nproc_per_node;
    identity_resolve(&a->id, cfg);
    char jerr[512];
    if (jobenv_init(&a->spawn.je, a->loop, cfg, envp, a->id.name, jerr, sizeof jerr)) {
        fprintf(stderr, "podrun: %s\n", jerr);
        jobenv_free(&a->spawn.je);
        free(a);
        return 1;
    }
    /* accelerate's --cpu threads share the CPUs the quota leaves, not every core (node.h) */
    if (nd && a->spawn.je.physical_cores > node_cpu_count(nd))
        a->spawn.je.physical_cores = node_cpu_count(nd);
    cfg_signals_parse(cfg->signals_to_handle, &a->stop.signals, NULL, 0);
    cfg_codes_parse(cfg->fatal_exit_codes, a->failed.fatal_codes, NULL, 0);
    for (int k = 0; k < 2; k++) {
        a->filters.fd[k] = -1;
        a->filters.n[k] = cfg_filters_split(cfg->dup_filters[k], a->filters.buf[k],
                                            sizeof a->filters.buf[k], a->filters.items[k], 64);
    }
    int r = env_argv_build(cfg, &a->argv);
    if (!r && !(a->streams = calloc((size_t)(2 * a->n), sizeof *a->streams)))
        r = -ENOMEM;
    if (!r)
        r = logs_init(&a->logs, a->loop);
    if (r) {
        fprintf(stderr, "podrun: cannot start: %s\n", podrun_strerror(r));
        jobenv_free(&a->spawn.je);
        free(a->argv);
        free(a->streams);
        free(a);
        return 1;
    }
    a->logs.data = a;
    if (cfg->log_format == CFG_LOG_JSON)
        logs_set_json(&a->logs, a->id.name, cfg->rdzv_id);
    uv_timer_init(a->loop, &a->end.exit_timer);
    a->end.exit_timer.data = a;
    uv_timer_init(a->loop, &a->stop.leave_timer);
    a->stop.leave_timer.data = a;
    uv_timer_init(a->loop, &a->reclaim.timer);
    a->reclaim.timer.data = a;

    bool usage = false;
    r = start(a, &usage);
    if (r)
        agent_post(a, AGENT_EV_CANNOT_START, &(struct agent_evd){.err = r, .usage = usage});
    uv_run(a->loop, UV_RUN_DEFAULT);
    int code = a->exit_code;
    uv_loop_close(a->loop);
    jobenv_free(&a->spawn.je);
    for (int k = 0; k < 2; k++)
        if (a->filters.fd[k] >= 0)
            close(a->filters.fd[k]);
    free(a->argv);
    free(a->streams);
    free(a->spawn.derived);
    free(a->pf.report);
    watchdog_free(&a->wd);
    guards_free(&a->guards);
    free(a);
    return code;
}
