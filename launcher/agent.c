/* launcher/agent.c — the state machine (see agent.h), on one libuv loop.
 *
 * Every run, one node or many, goes through the rendezvous (rdzv/rendezvous.h): this agent
 * joins, the coordinator in the agent that hosts the job store assigns ranks, and every
 * decision about the job — stop, restart, exit, finished — is pushed to every agent. The events
 * and what they do:
 *   assigned (RENDEZVOUS)                  → STARTING: the first time, the master's address is
 *                                            resolved (on the loop) and the environment derived
 *                                            from the node; with --preflight the nodes are
 *                                            checked; then the workers of this attempt start
 *                                            (RUNNING), or, on the check's verdict, the node
 *                                            leaves the job (fail, exclude)
 *   a worker exits non-zero while RUNNING  → report it to the job (the first one only) and stop
 *                                            the others at once (STOPPING)
 *   the hang watchdog fires                → the same, with "hang" as the reason
 *   a worker's torch timer expired         → that worker gets the signal the timer asked for,
 *                                            then the same, with the timer as the reason
 *   every worker exited 0                  → report done; wait for the job to finish
 *   ending (the round's end is known)      → stop the workers at once (STOPPING); its record,
 *                                            stopped or finished, follows a round trip later
 *   stopped(decision)                      → stop the workers; once they are gone: restart →
 *                                            rejoin (RENDEZVOUS, next attempt); exit → EXITING
 *                                            with the code the decision gives this node
 *   finished                               → EXITING, exit 0
 *   lost (store host gone, join timeout)   → stop the workers, EXITING with the lost code
 *   SIGTERM / SIGINT                       → tell the job this node leaves, stop the workers,
 *                                            exit 128+signal; a second one sends SIGKILL at once
 *   SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2      → forwarded to every worker process group, unless
 *                                            --signals-to-handle names it: then as SIGTERM
 *   an orphan is reaped                    → nothing else to do (init.c reaped it)
 *   EXITING                                → drain the pipes, print the report, write the
 *                                            termination log, close the rendezvous (the host
 *                                            keeps the store up until the others are gone),
 *                                            flush, close, return.
 * The stages' glue is in files of their own (agent_int.h): the rendezvous (agent_rdzv.c), an
 * attempt's environment and workers (agent_spawn.c), the preflight check (agent_preflight.c),
 * --discovery k8s (agent_k8s.c), and health: the port, the checks, torch's timers, the GPUs'
 * memory (agent_watch.c), the stacks before a kill (agent_stacks.c). Each hands its events to
 * the transitions here; what the end says, the report and termination log, is agent_report.c. */
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
#define AGENT_EXEC_WAIT_MS 1000  /* bound on learning whether siblings of a worker that could
                                   not start could not either */

static const char *state_name(enum agent_state s)
{
    static const char *names[] = {"INIT",     "RENDEZVOUS", "STARTING", "RUNNING",
                                  "STOPPING", "EXITING",    "DONE"};
    return names[s];
}

void agent_set_state(struct agent *a, enum agent_state s)
{
    if (a->cfg->debug)
        logs_message(&a->logs, "state %s -> %s", state_name(a->state), state_name(s));
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

/* Stops this attempt's workers (sig, then SIGKILL after --term-timeout), saying why once; a
 * RUNNING agent is STOPPING from here, and the watchdog has nothing left to watch. Safe to call
 * when the workers are already down: then only the line is said. */
void agent_stop_job(struct agent *a, int sig, const char *why)
{
    if (why) {
        agent_say_stopping(a, why, workers_alive(&a->wg), sig);
        snprintf(a->stop.why, sizeof a->stop.why, "%s", why);
    }
    if (a->state == AGENT_RUNNING)
        agent_set_state(a, AGENT_STOPPING);
    watchdog_disarm_all(&a->wd);
    devcheck_stop(&a->health.check);
    if (!a->workers_down)
        workers_stop_all(&a->wg, sig, a->cfg->term_timeout_ms);
}

/* Reads what the workers' pipes still hold and closes them: no output is lost at a stop. */
static void finish_streams(struct agent *a)
{
    for (int i = 0; i < 2 * a->n; i++)
        logs_stream_finish(&a->streams[i]);
}

/* Every worker of this attempt is gone: read the rest of their output, then see what next.
 * Gone on their own (every one exited 0 while other nodes run on), they leave the checks
 * nothing to watch: those stop as at a stop (agent_stop_job). */
static void workers_gone(struct agent *a)
{
    if (a->workers_down)
        return;
    a->workers_down = true;
    devcheck_stop(&a->health.check);
    finish_streams(a);
    if (a->state == AGENT_RUNNING)
        agent_set_state(a, AGENT_STOPPING);
    agent_advance(a);
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
    workers_gone(a);
}

/* ---------- this node's failure → the job ---------- */

/* What a failed worker left: its error file (read into *e; the result of
 * report_read_error_file) and the last lines of its stderr. */
int agent_failure_inputs(struct agent *a, int lr, char *errfile, size_t len,
                         struct report_error *e, const char **tail, size_t *tl)
{
    agent_rank_path(a, lr, "error.json", errfile, len);
    *tl = 0;
    *tail = logs_stream_tail(&a->streams[2 * lr + 1], tl);
    return report_read_error_file(errfile, e);
}

/* The worker's own words for the record: its error file's message, else its last stderr lines. */
static void failure_message(struct agent *a, int lr, char *out, size_t cap)
{
    char errfile[PATH_MAX + 32];
    out[0] = 0;
    struct report_error e;
    const char *tail;
    size_t tl;
    int er = agent_failure_inputs(a, lr, errfile, sizeof errfile, &e, &tail, &tl);
    report_failure_message(er ? NULL : &e, tail, tl, out, cap);
    if (!er)
        report_error_free(&e);
}

/* The record of local rank lr's failure: its exit status ws (-1: none, a hang), at time t. */
static void fill_failure(struct agent *a, int lr, int ws, double t, const char *reason,
                         rdzv_failure_t *f)
{
    rdzv_failure_init(f);
    snprintf(f->host, sizeof f->host, "%s", a->id.host);
    snprintf(f->node_name, sizeof f->node_name, "%s", a->id.name);
    f->node_rank = a->rdzv.group_rank;
    f->rank = a->rdzv.rank_base + lr;
    f->local_rank = lr;
    if (ws != -1 && WIFSIGNALED(ws))
        f->signo = WTERMSIG(ws);
    else if (ws != -1)
        f->exit_code = workers_exit_code(ws);
    f->time = t;
    f->permanent = ws != -1 && a->wg.w[lr].exec_errno != 0;
    f->fatal = ws != -1 && cfg_codes_has(a->failed.fatal_codes, workers_exit_code(ws));
    snprintf(f->reason, sizeof f->reason, "%s", reason);
    failure_message(a, lr, f->message, sizeof f->message);
}

static double exit_epoch(const worker_t *w)
{
    return (double)w->exit_time.tv_sec + w->exit_time.tv_nsec / 1e9;
}

/* The record of a worker that failed on its own, once reaped (its exit status and time). */
void agent_fill_alone(struct agent *a, const worker_t *w, rdzv_failure_t *f)
{
    char cause[512];
    struct report_failure rf = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                .program = a->argv[0]};
    report_cause(&rf, cause, sizeof cause);
    fill_failure(a, w->index, w->wstatus, exit_epoch(w), cause, f);
}

void agent_send_failure(struct agent *a, const rdzv_failure_t *f)
{
    int r = a->rdzv.rz ? rdzv_agent_report_failure(a->rdzv.rz, f) : 0;
    if (r)
        logs_message(&a->logs, "cannot report the failure to the job store: %s",
                     podrun_strerror(r));
}

/* Workers other than lr that have already exited non-zero but are not reaped yet failed on their
 * own at the same time as lr, before any stop reached them (a signal that hit every group, two
 * programs that cannot start): they are marked, told to the job with lr's failure, and not
 * counted among the workers to stop. Returns how many exited (zero or not). */
static int failed_with(struct agent *a, int lr)
{
    int exited = 0;
    if (a->wg.w[lr].exec_errno)
        workers_await_exec(&a->wg, AGENT_EXEC_WAIT_MS);
    for (int i = 0; i < a->wg.n; i++) {
        worker_t *w = &a->wg.w[i];
        int ws;
        if (i == lr || w->state != WORKER_RUNNING)
            continue;
        if (w->exec_errno)   /* it is exiting 127/126, if not yet gone */
            ws = (w->exec_errno == ENOENT || w->exec_errno == ENOTDIR ? 127 : 126) << 8;
        else if (!workers_exited_unreaped(w, &ws))
            continue;
        exited++;
        if (ws == 0)
            continue;
        w->failed_alone = true;
        char cause[512];
        struct report_failure rf = {.wstatus = ws, .exec_errno = w->exec_errno,
                                    .program = a->argv[0]};
        report_cause(&rf, cause, sizeof cause);
        rdzv_failure_t f;
        fill_failure(a, i, ws, podrun_time_epoch(), cause, &f);
        agent_send_failure(a, &f);
    }
    return exited;
}

/* The first failure of a local worker in this attempt: tell the job, stop the others now. A
 * program that cannot be started fails the same way in every restart: its record says so, and
 * the job exits instead of restarting. */
void agent_local_failure(struct agent *a, int lr, int code, bool hang, const char *reason)
{
    worker_t *w = &a->wg.w[lr];
    a->failed.lr = lr;
    a->failed.code = code;
    a->failed.hang = hang;
    snprintf(a->failed.why, sizeof a->failed.why, "%s", reason);
    logs_stream_pull(&a->streams[2 * lr + 1]);   /* its last words, if still in the pipe */
    bool exited = !hang && w->state == WORKER_EXITED;
    rdzv_failure_t f;
    /* a hang, and a worker that never ran, have no exit status */
    fill_failure(a, lr, hang || w->pid <= 0 ? -1 : exited ? w->wstatus : code << 8,
                 exited ? exit_epoch(w) : podrun_time_epoch(), reason, &f);
    agent_send_failure(a, &f);
    int gone = failed_with(a, lr);
    char why[RDZV_REASON_MAX + 160];
    int n = w->pid > 0 ? snprintf(why, sizeof why, "rank %d (pid %d) failed: %s", f.rank,
                                  (int)w->pid, reason)
                       : snprintf(why, sizeof why, "rank %d failed: %s", f.rank, reason);
    if (f.permanent && n > 0 && (size_t)n < sizeof why)
        snprintf(why + n, sizeof why - (size_t)n, "; a program that cannot start is not "
                 "restarted");
    snprintf(a->stop.why, sizeof a->stop.why, "%.*s", (int)sizeof a->stop.why - 1, why);
    agent_say_stopping(a, why, workers_alive(&a->wg) - gone, SIGTERM);
    agent_stop_job(a, SIGTERM, NULL);
}

/* A worker that exited while its siblings were being stopped failed on its own when podrun's
 * stop is not what ended it: it could not be started, or a signal podrun forwarded (SIGHUP to
 * every group) killed it, or it had already exited when the stop began (failed_with). */
static void note_failed_alone(struct agent *a, worker_t *w)
{
    int ws = w->wstatus;
    bool forwarded =
        WIFSIGNALED(ws) && WTERMSIG(ws) < 64 && (a->stop.forwarded >> WTERMSIG(ws) & 1);
    if (ws == 0 || w->index == a->failed.lr || a->stop.signal)
        return;
    if (!w->failed_alone && !w->exec_errno && !forwarded)
        return;
    bool told = w->failed_alone;
    w->failed_alone = true;
    if (!told) {
        rdzv_failure_t f;
        agent_fill_alone(a, w, &f);
        agent_send_failure(a, &f);
    }
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

/* Every worker exited 0, and some left processes in their groups: the job stops them, and the
 * line names them by rank. */
static void stop_leftovers(struct agent *a)
{
    char why[768], procs[256];
    int named = 0;
    size_t used = (size_t)snprintf(why, sizeof why, "every worker exited 0 but left processes "
                                   "in its group:");
    for (int i = 0; i < a->wg.n && used < sizeof why; i++) {
        worker_t *w = &a->wg.w[i];
        if (w->group_gone || w->pid <= 0 || !init_group_members(w->pid, procs, sizeof procs))
            continue;
        int k = snprintf(why + used, sizeof why - used, "%s rank %d (local_rank %d): %s",
                         named++ ? ";" : "", a->rdzv.rank_base + i, i, procs);
        used = k > 0 ? used + (size_t)k : used;
    }
    if (!named)
        why[used - 1] = '\0';   /* only zombies were left, gone by now: no ':' to nothing */
    agent_stop_job(a, SIGTERM, why);
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
        note_failed_alone(a, w);
        return;   /* stopping: else these exits are our own signals at work */
    }
    watchdog_disarm(&a->wd, w->index);
    if (code != 0 && a->failed.lr < 0) {
        char cause[512];
        struct report_failure f = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                   .program = a->argv[0]};
        report_cause(&f, cause, sizeof cause);
        agent_local_failure(a, w->index, code, false, cause);
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
        if (workers_alive(g) > 0)
            stop_leftovers(a);
        else
            workers_gone(a);
    }
}

/* ---------- the hang watchdog's events (watchdog.c) ---------- */

/* Only a running worker of a running attempt can hang. */
static bool hang_watching(void *arg, int lr)
{
    struct agent *a = arg;
    return a->state == AGENT_RUNNING && a->wg.w[lr].state == WORKER_RUNNING;
}

/* A hung worker is this node's failure like any other, reported as a hang. */
static void hang_fired(void *arg, int lr, const char *reason)
{
    agent_stacks_then_kill(arg, lr, reason, 0, 0);
}

/* ---------- leaving the job ---------- */

/* The leave record is out (or its time is up): whatever waited for it may go on. */
static void leave_done(struct agent *a)
{
    if (!a->stop.leave_pending)
        return;
    a->stop.leave_pending = false;
    uv_timer_stop(&a->stop.leave_timer);
    agent_advance(a);
}

static void on_left(void *arg)
{
    leave_done(arg);
}

static void on_leave_timeout(uv_timer_t *t)
{
    struct agent *a = t->data;
    if (a->stop.leave_pending)
        logs_message(&a->logs, "could not tell the job store that this node leaves within %.1fs",
                     AGENT_LEAVE_MS / 1000.0);
    leave_done(a);
}

/* Leaves the job on the check's verdict: the job is told (bounded by AGENT_LEAVE_MS, as for
 * SIGTERM), then the agent exits with --exit-code-preflight. */
void agent_quit(struct agent *a, const char *reason)
{
    a->stop.quit = true;
    a->exit_code = a->cfg->exit_code_preflight;
    if (a->rdzv.rz) {
        a->stop.leave_pending = true;
        uv_timer_start(&a->stop.leave_timer, on_leave_timeout, AGENT_LEAVE_MS, 0);
        if (rdzv_agent_leave(a->rdzv.rz, reason, on_left, a))
            leave_done(a);
    }
    agent_advance(a);
}

/* ---------- what comes next ---------- */

/* -> RENDEZVOUS: the next join. A rejoin that cannot be sent is a lost store. */
void agent_rejoin(struct agent *a)
{
    agent_set_state(a, AGENT_RENDEZVOUS);
    health_rdzv_joining(a->health.port);
    int r = rdzv_agent_rejoin(a->rdzv.rz);
    if (r) {
        logs_message(&a->logs, "cannot rejoin the job: %s", podrun_strerror(r));
        a->job.lost = true;
        a->exit_code = a->cfg->exit_code_store_lost;
        agent_advance(a);
    }
}

/* STOPPING -> RENDEZVOUS for the next attempt, once every worker is gone: a fresh attempt
 * directory, a reset worker group, the GPUs' memory freed (agent_health_reclaim), the next join.
 * A restart decided before any worker ran (STARTING: the good nodes under --preflight-policy
 * exclude, a decision during the master's lookup or the front-end's agreement) stops an attempt
 * that has nothing to stop: it too waits in STOPPING, the state the GPUs' wait and the STARTING
 * steps' callbacks read as "this attempt is over". */
static void restart(struct agent *a)
{
    if (a->state == AGENT_STARTING)
        agent_set_state(a, AGENT_STOPPING);
    if (a->job.restart_counted)
        logs_message(&a->logs, "restarting the job in place (restart %d of %d): %s",
                     a->job.restarts_used, a->cfg->max_restarts, a->job.dreason);
    else
        logs_message(&a->logs, "restarting the job in place (the nodes changed; no restart "
                     "used): %s", a->job.dreason);
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
    agent_cluster_rejoin(a);   /* then agent_health_reclaim, then agent_rejoin */
}

/* The one place that decides what comes next once something happened. */
void agent_advance(struct agent *a)
{
    if (a->state >= AGENT_EXITING || !a->workers_down)
        return;
    if (a->pf.check &&
        (a->stop.signal || a->stop.quit || a->job.lost || a->job.finished || a->job.decided)) {
        pf_cancel(a->pf.check);   /* the job moved on without the check */
        a->pf.check = NULL;
    }
    if (a->state == AGENT_STARTING &&
        (a->stop.signal || a->stop.quit || a->job.lost || a->job.finished || a->job.decided))
        jobenv_cancel(&a->spawn.je);   /* nor the front-end's agreement */
    if (a->stop.signal || a->stop.quit) {
        if (!a->stop.leave_pending)
            agent_enter_exiting(a);
    } else if (a->job.lost || a->job.finished) {
        agent_enter_exiting(a);
    } else if (a->job.decided) {
        if (a->job.action == RDZV_RESTART)
            restart(a);
        else
            agent_enter_exiting(a);
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
    struct agent *a = arg;
    char sn[32], why[96];
    bool stops = sig == SIGTERM || sig == SIGINT || (a->stop.signals >> sig & 1);
    if (a->state >= AGENT_EXITING)
        return;   /* after the stop there is nobody to tell */
    if (!stops) {
        if (a->state == AGENT_RUNNING || a->state == AGENT_STOPPING) {
            a->stop.forwarded |= 1ULL << sig;
            workers_signal(&a->wg, sig);
        }
        return;
    }
    if (a->stop.signal) {
        logs_message(&a->logs, "got %s again; sending SIGKILL now",
                     report_signame(sig, sn, sizeof sn));
        if (!a->workers_down)
            workers_stop_all(&a->wg, SIGKILL, 0);
        return;
    }
    a->stop.signal = sig;
    a->exit_code = 128 + sig;
    report_signame(sig, sn, sizeof sn);
    if (a->rdzv.rz) {
        a->stop.leave_pending = true;
        uv_timer_start(&a->stop.leave_timer, on_leave_timeout, AGENT_LEAVE_MS, 0);
        if (rdzv_agent_leave(a->rdzv.rz, sn, on_left, a))
            leave_done(a);
    }
    snprintf(why, sizeof why, "got %s", sn);
    if (a->state == AGENT_RUNNING)
        agent_stop_job(a, sig, why);
    else if (a->state == AGENT_STOPPING && !a->workers_down)
        workers_stop_all(&a->wg, sig, a->cfg->term_timeout_ms);
    agent_advance(a);
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

/* EXITING -> DONE once the output is drained and the rendezvous closed; strays get their grace
 * (AGENT_STRAY_MS) before close_all. */
void agent_maybe_done(struct agent *a)
{
    if (a->end.drained && !a->rdzv.rz && !agent_cluster_busy(a) && a->state != AGENT_DONE) {
        agent_set_state(a, AGENT_DONE);
        uv_timer_start(&a->end.exit_timer, close_all,
                       a->end.strays || a->end.strays_untracked ? AGENT_STRAY_MS : 0, 0);
    }
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
    agent_maybe_done(a);
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

/* The failure of the decision whose exit code is not to be retried, or NULL. */
static const rdzv_failure_t *fatal_failure(const struct agent *a)
{
    for (int i = 0; i < a->job.dn; i++)
        if (a->job.dfail[i].fatal)
            return &a->job.dfail[i];
    return NULL;
}

/* The exit code a stop decision gives this node (doc/failures.md#exit-status). */
static int decision_code(struct agent *a)
{
    struct cfg *c = a->cfg;
    const rdzv_failure_t *root = &a->job.dfail[0];
    if (fatal_failure(a))
        return c->exit_code_fatal;   /* every node the same: the job is not to be retried */
    if (a->job.dn == 0)
        return c->exit_code_peer_lost;
    if (a->job.own == 0 && root->rank < 0 && a->health.bad)
        return c->exit_code_preflight;   /* this node's own health check: the node is bad */
    if (a->job.own == 0 && root->rank >= 0) {
        if (a->failed.lr < 0)   /* a record of ours we no longer know: trust it */
            return root->signo > 0 ? 128 + root->signo : root->exit_code > 0 ? root->exit_code : 1;
        return a->failed.hang ? c->exit_code_hang : a->failed.code;
    }
    return root->rank < 0 ? c->exit_code_peer_lost : c->exit_code_peer_failure;
}

/* -> EXITING: the exit code and the one report for how the job ended (a signal, the job's
 * decision, a lost job, finished), the run directory removed, strays asked to go, the rendezvous
 * closed (the host keeps the store up for the others), and podrun's output drained. */
void agent_enter_exiting(struct agent *a)
{
    agent_set_state(a, AGENT_EXITING);
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
    char msg[RDZV_LINE_MAX + 64];
    char sn[32];
    if (a->stop.signal) {
        int n = snprintf(msg, sizeof msg, "podrun: stopped by %s; exit code %d\n",
                         report_signame(a->stop.signal, sn, sizeof sn), a->exit_code);
        agent_report_termlog(a, msg, (size_t)n);
    } else if (a->stop.quit && a->health.bad) {
        int n = snprintf(msg, sizeof msg, "podrun: this node failed its health check and left "
                         "the job: %s; exit code %d\n", a->health.check.last_why, a->exit_code);
        agent_report_termlog(a, msg, (size_t)n);
    } else if (a->stop.quit) {
        int n = snprintf(msg, sizeof msg, "podrun: the preflight check stopped this node; exit "
                         "code %d\n", a->exit_code);
        agent_report_termlog(a, msg, (size_t)n);
    } else if (a->job.decided && a->job.action == RDZV_EXIT) {
        a->exit_code = decision_code(a);
        agent_report_job(a);
        const rdzv_failure_t *ff = fatal_failure(a);
        if (ff)
            agent_report_fatal(a, ff);
        logs_message(&a->logs, "the job failed: %s%s; exit code %d", a->job.dreason,
                     ff ? " (an exit code in --fatal-exit-codes: not retried)" : "",
                     a->exit_code);
    } else if (a->job.lost) {
        /* the reason on the last line: it is the one a person and the termination log see */
        if (a->failed.lr >= 0)
            agent_report_local(a, false);
        else {
            int n = snprintf(msg, sizeof msg, "podrun: this node lost the job: %s; exit code "
                             "%d\n", a->stop.why, a->exit_code);
            agent_report_termlog(a, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        }
        /* the same last line on stderr as every other ending */
        logs_message(&a->logs, "this node lost the job: %s; exit code %d", a->stop.why,
                     a->exit_code);
    } else if (a->job.finished) {
        a->exit_code = 0;
        bool job = a->rdzv.group_world_size > 1;
        int n = snprintf(msg, sizeof msg, "podrun: all %d workers%s exited 0\n",
                         job ? a->rdzv.world_size : a->n, job ? " of the job" : "");
        agent_report_termlog(a, msg, (size_t)n);
    } else if (!a->exit_code) {
        a->exit_code = 1;
    }
    logs_say_dropped(&a->logs);
    timer_server_stop(&a->ts);   /* before the run directory that may hold the FIFO goes */
    agent_stacks_end(a, true);
    rundir_remove(&a->dir, true);
    /* The workers' groups are gone; what is left among podrun's children left its group
     * (setsid, a daemon) and was adopted by podrun as subreaper: it goes with the job. */
    int n = init_signal_children(SIGTERM, a->wg.guard_pid, a->end.stray, AGENT_STRAYS_MAX);
    a->end.strays = n < AGENT_STRAYS_MAX ? n : AGENT_STRAYS_MAX;
    a->end.strays_untracked = n > AGENT_STRAYS_MAX;
    agent_cluster_end(a);
    /* done once the output is drained and the rendezvous closed (on_rdzv_closed drains again) */
    if (a->rdzv.rz)
        rdzv_agent_close(a->rdzv.rz, on_rdzv_closed, a);
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
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

/* The first join: through the job's pods (--discovery k8s), else the rendezvous at once. */
static int join(struct agent *a)
{
    if (a->cfg->discovery == CFG_DISCOVERY_K8S)
        return agent_k8s_start(a);
    return agent_rdzv_start(a);
}

/* PID 1's duties (signals, reaping, subreaper), the run directory, the worker group and its
 * guard, the watchdog; then the rendezvous. An error leaves the agent to exit. */
static int start(struct agent *a)
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
        if (r == -EINVAL)
            a->exit_code = 2;
        return r;
    }
    return agent_cluster_start(a, join);
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

    r = start(a);
    if (r && a->state < AGENT_RUNNING) {
        if (!a->exit_code)
            a->exit_code = 1;
        /* one last line with the reason and its fix, the one a person and the termination
         * log see */
        char line[sizeof a->end.start_why + 64];
        int n = snprintf(line, sizeof line, "podrun: cannot start the job: %s\n",
                         a->end.start_why[0] ? a->end.start_why : podrun_strerror(r));
        logs_message(&a->logs, "%.*s", n > 9 ? n - 9 : 0, line + 8);
        agent_report_termlog(a, line, n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        agent_enter_exiting(a);
    }
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
