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
 *                                            flush, close, return. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "config/values.h"
#include "devices/gpumem.h"
#include "devices/node.h"
#include "discover/identity.h"
#include "discover/k8s_discover.h"
#include "env/argv.h"
#include "env/deepspeed.h"
#include "env/torch.h"
#include "guards.h"
#include "health/health.h"
#include "init.h"
#include "jobenv.h"
#include "logs.h"
#include "preflight/preflight.h"
#include "podrun/version.h"
#include "rdzv/common.h"
#include "rdzv/http.h"
#include "rdzv/rendezvous.h"
#include "report.h"
#include "rundir.h"
#include "timer_server.h"
#include "healthcheck.h"
#include "watchdog.h"
#include "workers.h"

#define AGENT_FLUSH_MS 10000   /* bound on writing the last output to a stalled reader */
#define AGENT_STRAY_MS 1000    /* grace for descendants that left their worker's group */
#define AGENT_LEAVE_MS 2000    /* bound on telling the job this node leaves */
#define AGENT_EXEC_WAIT_MS 1000  /* bound on learning whether siblings of a worker that could
                                   not start could not either */
#define AGENT_RECLAIM_MS 1000  /* how often the GPUs' memory is looked at before a restart */

enum agent_state { AGENT_INIT, AGENT_RENDEZVOUS, AGENT_STARTING, AGENT_RUNNING, AGENT_STOPPING,
                   AGENT_EXITING, AGENT_DONE };

struct agent {
    uv_loop_t *loop;
    struct cfg *cfg;
    char **envp;
    enum agent_state state;
    worker_group_t wg;
    bool wg_ready;
    struct logs logs;
    struct log_stream *streams;    /* 2 per worker: stdout, stderr */
    struct watchdog wd;            /* --hang-timeout */
    struct timer_server ts;        /* torch's file-based timers (TORCHELASTIC_ENABLE_FILE_TIMER) */
    struct healthcheck hc;         /* GPUs and links while workers run (--health-check-interval) */
    bool health_bad;               /* this node failed a check in this attempt */
    struct rundir dir;             /* error, heartbeat and log files */
    int n;

    /* the rendezvous and what it assigned */
    rdzv_agent_t *rz;              /* NULL once closed (or never started) */
    int group_rank, group_world_size, world_size, rank_base;
    int restart_count;
    char master_addr[RDZV_NAME_MAX];
    int master_port;
    const char *run_id;
    int attempt;                   /* attempts this agent started: attempt_<n> */
    bool workers_down;             /* no worker of this attempt is left (or none started) */
    int ended_alive;               /* workers stopped when the round's end was first known */
    int services_alive;            /* of them, services (parameter servers) */

    /* this node's first failure in the attempt */
    int failed;                    /* local rank, -1 if none */
    int failed_code;               /* its exit code (128+signal) */
    bool failed_hang;

    /* what the job decided */
    bool decided;
    int action, dn, own, restart_counted, restarts_used;
    rdzv_failure_t dfail[RDZV_MAX_FAILURES];
    char dreason[RDZV_REASON_MAX];
    bool finished;
    bool lost;

    char **argv;

    int exit_code;
    int strays;                    /* such descendants sent SIGTERM at exit, not yet reaped */
    int stop_signal;               /* the signal that stopped podrun, 0 if none */
    bool leave_pending;
    bool drained;
    struct identity id;            /* this node's name and the address peers know it by */
    struct node_devices *nd;       /* the node's devices, probed once at start */
    char **derived;                /* what every worker gets from them (node_worker_vars) */
    bool env_ready;                /* ... derived with the interface towards the master */
    bool gai_pending;              /* the master's address is being resolved for that */
    uv_getaddrinfo_t gai;

    /* the preflight check (--preflight) */
    preflight_t *pf;               /* running; NULL otherwise */
    bool pf_passed;                /* this node passed a check of this run */
    bool quit;                     /* leaving the job on the check's verdict (exit_code is set) */
    char *pf_report;               /* the check's table, kept for the termination log */
    char exe[PATH_MAX];            /* podrun's own binary, re-executed as the nccl check */
    int round;                     /* the rendezvous round of this attempt */
    bool is_host;                  /* this agent hosts the job store */
    struct jobenv je;              /* the front-end's worker environment (jobenv.h) */
    bool je_init;
    bool done_reported;            /* every worker the job waits for exited 0 (this attempt) */
    uint64_t stop_signals;         /* 1 << signo of --signals-to-handle: they stop the job */
    uint64_t forwarded;            /* 1 << signo of the signals forwarded to the workers */
    uint64_t fatal_codes[4];       /* --fatal-exit-codes: bit c of [c / 64] */
    char filter_buf[2][1024];      /* --duplicate-std*-filters, split */
    const char *filter_items[2][64];
    size_t nfilters[2];
    int filter_fd[2];              /* this attempt's filtered_std*.log, -1: none */
    char rdzv_id_buf[40];
    char last_progress[RDZV_LINE_MAX];   /* the last rendezvous line printed */
    uv_timer_t exit_timer, leave_timer;
    uv_timer_t reclaim_timer;              /* GPU memory before a restart */
    uint64_t reclaim_start;                /* loop time the wait began */
    bool reclaim_said;                     /* the wait was said */

    /* --discovery k8s: the watch of the job's pods, and what it found */
    k8s_discover_t *k8s;
    bool k8s_found;
    int k8s_rank;                          /* this pod's place, -1 for an elastic job */
    char k8s_ip[RDZV_NAME_MAX];            /* this pod's IP */
    char k8s_host_ip[RDZV_NAME_MAX];       /* the rank-0 pod's: the job store */

    struct guards guards;                  /* the job store's token and allow-list */
    /* --health-port: /healthz and /metrics (health/health.h); NULL when not asked for */
    struct health *health;
    char stop_why[RDZV_REASON_MAX + 96];   /* why the workers are being stopped, for /healthz */
    char stuck[512];                       /* processes left behind after SIGKILL, for the
                                              termination log */
};

static const char *state_name(enum agent_state s)
{
    static const char *names[] = {"INIT",     "RENDEZVOUS", "STARTING", "RUNNING",
                                  "STOPPING", "EXITING",    "DONE"};
    return names[s];
}

static void enter_exiting(struct agent *a);
static void advance(struct agent *a);
static void leave_done(struct agent *a);
static void on_left(void *arg);
static void on_leave_timeout(uv_timer_t *t);

static void set_state(struct agent *a, enum agent_state s)
{
    if (a->cfg->debug)
        logs_message(&a->logs, "state %s -> %s", state_name(a->state), state_name(s));
    a->state = s;
}

/* ---------- files: the run directory (rundir.c) ---------- */

static void rank_path(struct agent *a, int lr, const char *file, char *out, size_t len)
{
    rundir_path(&a->dir, lr, file, out, len);
}

/* This attempt's rank directories; where the log files are is said once when podrun chose it. */
static int prepare_attempt_dir(struct agent *a)
{
    int r = rundir_attempt(&a->dir, a->run_id, a->attempt);
    if (!r && a->dir.keep && !a->cfg->log_dir)
        logs_message(&a->logs, "worker log files are in %s", a->dir.attempt);
    for (int k = 0; !r && k < 2; k++) {
        if (a->filter_fd[k] >= 0)
            close(a->filter_fd[k]);
        a->filter_fd[k] = -1;
        if (!a->nfilters[k])
            continue;
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/filtered_std%s.log", a->dir.attempt, k ? "err" : "out");
        a->filter_fd[k] = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (a->filter_fd[k] < 0)
            logs_message(&a->logs, "cannot write %s: %s", p, strerror(errno));
        logs_set_filter(&a->logs, k + 1, a->filter_fd[k], a->filter_items[k], a->nfilters[k]);
    }
    return r;
}

/* The log file of one stream, or -1: none is wanted, or it cannot be written (said once). */
static int open_log_file(struct agent *a, int lr, int stream)
{
    char p[PATH_MAX + 32];
    int fd, r = rundir_log_file(&a->dir, lr, stream, &fd, p, sizeof p);
    if (r)
        logs_message(&a->logs, "cannot write %s: %s; that stream goes to the console only", p,
                     podrun_strerror(r));
    return fd;
}

/* The front-end's own log file of a stream (paddle's workerlog.N), or -1 (said once). */
static int jobenv_log(struct agent *a, int lr, int stream)
{
    char p[PATH_MAX + 32];
    int fd, r = jobenv_log_fd(&a->je, lr, stream, &fd, p, sizeof p);
    if (r)
        logs_message(&a->logs, "cannot write %s: %s; that stream goes to the console only", p,
                     podrun_strerror(r));
    return fd;
}

/* ---------- stopping ---------- */

/* "<why>; stopping N workers (SIGTERM, SIGKILL after Ts)", or just why with none alive. */
static void say_stopping(struct agent *a, const char *why, int alive, int sig)
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
static void stop_job(struct agent *a, int sig, const char *why)
{
    if (why) {
        say_stopping(a, why, workers_alive(&a->wg), sig);
        snprintf(a->stop_why, sizeof a->stop_why, "%s", why);
    }
    if (a->state == AGENT_RUNNING)
        set_state(a, AGENT_STOPPING);
    watchdog_disarm_all(&a->wd);
    healthcheck_stop(&a->hc);
    if (!a->workers_down)
        workers_stop_all(&a->wg, sig, a->cfg->term_timeout_ms);
}

/* Reads what the workers' pipes still hold and closes them: no output is lost at a stop. */
static void finish_streams(struct agent *a)
{
    for (int i = 0; i < 2 * a->n; i++)
        logs_stream_finish(&a->streams[i]);
}

/* Every worker of this attempt is gone: read the rest of their output, then see what next. */
static void workers_gone(struct agent *a)
{
    if (a->workers_down)
        return;
    a->workers_down = true;
    finish_streams(a);
    if (a->state == AGENT_RUNNING)
        set_state(a, AGENT_STOPPING);
    advance(a);
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
                         a->rank_base + i, i,
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
    size_t used = strlen(a->stuck);
    if (used + strlen(line) + 10 < sizeof a->stuck)
        snprintf(a->stuck + used, sizeof a->stuck - used, "podrun: %s\n", line);
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
                      "kernel?); leaving it behind", a->rank_base + i, (int)w->pid,
                      g->kill_wait_ms / 1000.0);
        else if (!w->group_gone && w->pid > 0)
            say_stuck(a, "processes of rank %d's group (pgid %d) did not exit %.1fs after "
                      "SIGKILL; leaving them behind", a->rank_base + i, (int)w->pid,
                      g->kill_wait_ms / 1000.0);
    }
    workers_gone(a);
}

/* ---------- this node's failure → the job ---------- */

/* What a failed worker left: its error file (read into *e; the result of
 * report_read_error_file) and the last lines of its stderr. */
static int failure_inputs(struct agent *a, int lr, char *errfile, size_t len,
                          struct report_error *e, const char **tail, size_t *tl)
{
    rank_path(a, lr, "error.json", errfile, len);
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
    int er = failure_inputs(a, lr, errfile, sizeof errfile, &e, &tail, &tl);
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
    f->node_rank = a->group_rank;
    f->rank = a->rank_base + lr;
    f->local_rank = lr;
    if (ws != -1 && WIFSIGNALED(ws))
        f->signo = WTERMSIG(ws);
    else if (ws != -1)
        f->exit_code = workers_exit_code(ws);
    f->time = t;
    f->permanent = ws != -1 && a->wg.w[lr].exec_errno != 0;
    f->fatal = ws != -1 && cfg_codes_has(a->fatal_codes, workers_exit_code(ws));
    snprintf(f->reason, sizeof f->reason, "%s", reason);
    failure_message(a, lr, f->message, sizeof f->message);
}

static double exit_epoch(const worker_t *w)
{
    return (double)w->exit_time.tv_sec + w->exit_time.tv_nsec / 1e9;
}

/* The record of a worker that failed on its own, once reaped (its exit status and time). */
static void fill_alone(struct agent *a, const worker_t *w, rdzv_failure_t *f)
{
    char cause[512];
    struct report_failure rf = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                .program = a->argv[0]};
    report_cause(&rf, cause, sizeof cause);
    fill_failure(a, w->index, w->wstatus, exit_epoch(w), cause, f);
}

static void send_failure(struct agent *a, const rdzv_failure_t *f)
{
    int r = a->rz ? rdzv_agent_report_failure(a->rz, f) : 0;
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
        send_failure(a, &f);
    }
    return exited;
}

/* The first failure of a local worker in this attempt: tell the job, stop the others now. A
 * program that cannot be started fails the same way in every restart: its record says so, and
 * the job exits instead of restarting. */
static void local_failure(struct agent *a, int lr, int code, bool hang, const char *reason)
{
    worker_t *w = &a->wg.w[lr];
    a->failed = lr;
    a->failed_code = code;
    a->failed_hang = hang;
    logs_stream_pull(&a->streams[2 * lr + 1]);   /* its last words, if still in the pipe */
    bool exited = !hang && w->state == WORKER_EXITED;
    rdzv_failure_t f;
    fill_failure(a, lr, hang ? -1 : exited ? w->wstatus : code << 8,
                 exited ? exit_epoch(w) : podrun_time_epoch(), reason, &f);
    send_failure(a, &f);
    int gone = failed_with(a, lr);
    char why[RDZV_REASON_MAX + 160];
    int n = w->pid > 0 ? snprintf(why, sizeof why, "rank %d (pid %d) failed: %s", f.rank,
                                  (int)w->pid, reason)
                       : snprintf(why, sizeof why, "rank %d failed: %s", f.rank, reason);
    if (f.permanent && n > 0 && (size_t)n < sizeof why)
        snprintf(why + n, sizeof why - (size_t)n, "; a program that cannot start is not "
                 "restarted");
    snprintf(a->stop_why, sizeof a->stop_why, "%.*s", (int)sizeof a->stop_why - 1, why);
    say_stopping(a, why, workers_alive(&a->wg) - gone, SIGTERM);
    stop_job(a, SIGTERM, NULL);
}

/* A worker that exited while its siblings were being stopped failed on its own when podrun's
 * stop is not what ended it: it could not be started, or a signal podrun forwarded (SIGHUP to
 * every group) killed it, or it had already exited when the stop began (failed_with). */
static void note_failed_alone(struct agent *a, worker_t *w)
{
    int ws = w->wstatus;
    bool forwarded = WIFSIGNALED(ws) && WTERMSIG(ws) < 64 && (a->forwarded >> WTERMSIG(ws) & 1);
    if (ws == 0 || w->index == a->failed || a->stop_signal)
        return;
    if (!w->failed_alone && !w->exec_errno && !forwarded)
        return;
    bool told = w->failed_alone;
    w->failed_alone = true;
    if (!told) {
        rdzv_failure_t f;
        fill_alone(a, w, &f);
        send_failure(a, &f);
    }
}

/* Workers of this attempt still running that the job waits for: all but services (parameter
 * servers, jobenv.h), which run until the job has finished. */
static int awaited_running(struct agent *a)
{
    int n = 0;
    for (int i = 0; i < a->wg.n; i++)
        n += a->wg.w[i].state == WORKER_RUNNING && !jobenv_is_service(&a->je, i);
    return n;
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
    health_worker_exit(a->health, a->state != AGENT_RUNNING
                                      ? (a->failed == w->index && a->failed_hang
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
    if (code != 0 && a->failed < 0) {
        char cause[512];
        struct report_failure f = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                   .program = a->argv[0]};
        report_cause(&f, cause, sizeof cause);
        local_failure(a, w->index, code, false, cause);
        return;
    }
    if (!a->done_reported && awaited_running(a) == 0) {
        a->done_reported = true;
        if (a->rz && rdzv_agent_report_done(a->rz))
            logs_message(&a->logs, "cannot report success to the job store");
    }
    if (g->running == 0) {
        if (workers_alive(g) > 0)
            stop_job(a, SIGTERM, "every worker exited 0 but left processes in its group");
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
    local_failure(arg, lr, 0, true, reason);
}

/* ---------- torch's file-based timers (timer_server.c) ---------- */

/* The local rank of the running worker whose process group holds pid: the worker itself, or a
 * process it started (a shell's python, a DataLoader). */
static int timer_rank_of(void *arg, pid_t pid)
{
    struct agent *a = arg;
    if (a->state != AGENT_RUNNING)
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
    if (a->state != AGENT_RUNNING || a->failed >= 0 || timer_rank_of(a, e->pid) != e->lr)
        return;   /* stopping already, or the process is gone (its timers went with it) */
    char reason[RDZV_REASON_MAX], sn[32];
    if (e->signo <= 0) {
        logs_message(&a->logs, "rank %d: timer '%s' of pid %d expired; it asked for no signal",
                     a->rank_base + e->lr, e->scope, (int)e->pid);
        return;
    }
    double after = (double)(long long)((e->expiration - e->acquired) * 10.0 + 0.5) / 10.0;
    snprintf(reason, sizeof reason, "timer '%.*s' expired after %g s", RDZV_REASON_MAX - 48,
             e->scope, after > 0 ? after : 0);
    if (kill(e->pid, e->signo) < 0 && errno != ESRCH)
        logs_message(&a->logs, "cannot send %s to pid %d: %s",
                     report_signame(e->signo, sn, sizeof sn), (int)e->pid, strerror(errno));
    if (a->cfg->debug)
        logs_message(&a->logs, "rank %d: timer '%s' expired %.3fs ago; %s sent to pid %d",
                     a->rank_base + e->lr, e->scope, late,
                     report_signame(e->signo, sn, sizeof sn), (int)e->pid);
    local_failure(a, e->lr, 0, true, reason);
}

static void timer_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* The timers' FIFO: TORCHELASTIC_TIMER_FILE when given, else in the run directory. */
static int start_timers(struct agent *a)
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

/* ---------- the checks while the workers run (healthcheck.c) ---------- */

static void pf_quit(struct agent *a, const char *reason);

/* What the workers are told NAME is: their inherited environment, else what podrun derived. */
static const char *worker_var(struct agent *a, const char *name)
{
    size_t nl = strlen(name);
    for (int k = 0; k < 2; k++)
        for (char **e = k ? a->derived : a->envp; e && *e; e++)
            if (strncmp(*e, name, nl) == 0 && (*e)[nl] == '=')
                return *e + nl + 1;
    return NULL;
}

/* The GPUs the workers see and the links NCCL was told to use are watched from the moment this
 * attempt's workers run. A node whose traffic never leaves it (one node, no GPU) has no link to
 * watch, and a node without GPUs no GPU: such a job checks nothing and probes nothing. */
static void health_watch(struct agent *a)
{
    const char *ifs = worker_var(a, "NCCL_SOCKET_IFNAME"), *off = worker_var(a, "NCCL_IB_DISABLE");
    if (!ifs && a->nd && a->nd->nic_known && a->nd->nic.ifname[0])
        ifs = a->nd->nic.ifname;   /* NCCL picks it on its own */
    bool gpus = a->nd && node_gpu_count(a->nd) > 0, links = a->nd && node_needs_master(a->nd);
    healthcheck_start(&a->hc, gpus, links, worker_var(a, "NCCL_IB_HCA"),
                      off && strcmp(off, "0") != 0, ifs);
}

/* A bad GPU or link is this node's failure, pushed to the job at once and the workers stopped.
 * Where the job can go on without the node (--nnodes MIN:MAX still holds and it does not host
 * the job store) the push is the node leaving, as under --preflight-policy exclude: the job
 * restarts without it and uses no restart; else it is a failure record of the node. */
static void health_failed(void *arg, const char *why)
{
    struct agent *a = arg;
    if (a->state != AGENT_RUNNING || a->failed >= 0 || a->health_bad)
        return;
    a->health_bad = true;
    char reason[RDZV_REASON_MAX];
    snprintf(reason, sizeof reason, "health check: %s", why);
    rdzv_stats_t st = {0};
    if (a->rz)
        rdzv_agent_stats(a->rz, &st);
    int left = a->group_world_size - 1;
    bool out = a->cfg->nnodes_min < a->cfg->nnodes_max && left >= a->cfg->nnodes_min &&
               left > 0 && !st.hosting;
    if (!out) {
        rdzv_failure_t f;
        rdzv_failure_init(&f);
        snprintf(f.host, sizeof f.host, "%s", a->id.host);
        snprintf(f.node_name, sizeof f.node_name, "%s", a->id.name);
        f.node_rank = a->group_rank;
        f.time = podrun_time_epoch();
        snprintf(f.reason, sizeof f.reason, "%s", reason);
        send_failure(a, &f);
    }
    snprintf(a->stop_why, sizeof a->stop_why, "this node failed its health check: %s", why);
    say_stopping(a, a->stop_why, workers_alive(&a->wg), SIGTERM);
    stop_job(a, SIGTERM, NULL);
    if (out) {
        logs_message(&a->logs, "health check: this node takes itself out of the job; the job "
                     "goes on with the other %d; exit code %d", left,
                     a->cfg->exit_code_preflight);
        pf_quit(a, reason);
    }
}

static void health_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* ---------- spawning ---------- */

/* Local rank i's environment and argv: the front-end's launcher's variables for this attempt
 * (torchrun's unless --worker-env names another, jobenv.h), what podrun derived from the node
 * (its own GPU under per-rank visibility, LOCAL_RANK=0 under --virtual-local-rank), and for a
 * DeepSpeed job DeepSpeed's variables on top and --local_rank=N after the script (*argv then is
 * a new array, buf holding the word; argv NULL: the environment only). *replaced: the inherited
 * variables it replaces (env_notes). free(*env) frees it. */
static int worker_env(struct agent *a, int i, char ***env, char ***argv, char *buf, size_t cap,
                      unsigned *replaced)
{
    struct cfg *c = a->cfg;
    char errfile[PATH_MAX + 32], hbfile[PATH_MAX + 32], visible[GPU_UUID_LEN];
    int rank = a->rank_base + i;
    /* what podrun derived, and the timers' FIFO (added only where the inherited environment
     * does not name it already, which then names this very FIFO) */
    char timer_var[PATH_MAX + 32], *derived[128];
    size_t nd = 0;
    for (char **d = a->derived; d && *d && nd < 126; d++)
        derived[nd++] = *d;
    if (a->ts.fd >= 0) {
        snprintf(timer_var, sizeof timer_var, "TORCHELASTIC_TIMER_FILE=%s", a->ts.path);
        derived[nd++] = timer_var;
    }
    derived[nd] = NULL;
    rank_path(a, i, "error.json", errfile, sizeof errfile);
    rank_path(a, i, "heartbeat", hbfile, sizeof hbfile);
    struct env_worker ew = {
        .local_rank = c->virtual_local_rank ? 0 : i, .rank = rank,
        .group_rank = a->group_rank, .role_rank = rank,
        .local_world_size = a->n, .world_size = a->world_size,
        .group_world_size = a->group_world_size, .role_world_size = a->world_size,
        .role_name = c->role, .master_addr = a->master_addr, .master_port = a->master_port,
        .restart_count = a->restart_count, .max_restarts = c->max_restarts,
        .run_id = a->run_id, .use_agent_store = true, .error_file = errfile,
        .heartbeat_file = c->hang_timeout_ms ? hbfile : NULL,
        .derived = derived,
        .cuda_visible_devices =
            node_rank_visible(a->nd, i, visible, sizeof visible) ? visible : NULL,
    };
    struct env_notes notes = {0};
    if (argv)
        *argv = a->argv;
    int r = jobenv_worker_env(&a->je, i, &ew, env, &notes);
    if (!r && argv && c->worker_env == CFG_WORKER_ENV_DEEPSPEED && !c->ds_no_local_rank) {
        int n = 0;
        while (a->argv[n])
            n++;
        r = env_deepspeed_argv(a->argv, n - c->program_argc, ew.local_rank, buf, cap, argv);
        if (r)
            free(*env);
    }
    if (replaced)
        *replaced = notes.replaced;
    return r;
}

/* Starts this attempt's workers: per worker its streams (console, log files), its front-end's
 * environment (worker_env) with what podrun derived from the node (its own GPU under per-rank
 * visibility, LOCAL_RANK=0 under --virtual-local-rank), its CPUs (--numa-binding) and its
 * watchdog timer.
 * What was replaced in the inherited environment is said once, on the first attempt. A worker
 * that cannot be started is this node's failure (on_assigned). */
static int spawn_all(struct agent *a)
{
    struct cfg *c = a->cfg;
    unsigned replaced = 0;
    for (int i = 0; i < a->n; i++) {
        char prefix[128];
        int rank = a->rank_base + i;
        if (logs_expand_prefix(c->log_line_prefix, rank, i, c->role, prefix, sizeof prefix))
            snprintf(prefix, sizeof prefix, "[rank %d]:", rank);
        int cfd[2] = {-1, -1};
        for (int s = 0; s < 2; s++) {
            int bit = s + 1;
            bool console = c->console_rank[i] && !(c->redirect_mask[i] & bit);
            int ffd = open_log_file(a, i, bit);
            if (ffd < 0)
                ffd = jobenv_log(a, i, bit);
            logs_stream_forget(&a->streams[2 * i + s]);   /* the previous attempt's */
            int r = logs_stream_open(&a->logs, &a->streams[2 * i + s], bit, prefix, console, ffd,
                                     s == 1, &cfd[s]);
            if (r) {
                if (ffd >= 0)
                    close(ffd);
                if (cfd[0] >= 0)
                    close(cfd[0]);
                return r;
            }
        }
        char **env = NULL, **argv = NULL, lrank[32];
        unsigned notes = 0;
        int r = worker_env(a, i, &env, &argv, lrank, sizeof lrank, &notes);
        if (!r) {
            replaced |= notes;
            const struct binding_rank *b = node_rank_binding(a->nd, i);
            struct worker_spawn sp = {argv, env, cfd[0], cfd[1], b ? &b->cpus : NULL,
                                      b ? b->mem_node : -1};
            r = workers_spawn(&a->wg, i, &sp);
            free(env);
            if (argv != a->argv)
                free(argv);
        }
        close(cfd[0]);
        close(cfd[1]);
        if (r) {
            logs_message(&a->logs, "cannot start worker rank %d: %s", rank, podrun_strerror(r));
            return r;
        }
        watchdog_arm(&a->wd, i);
    }
    if (a->attempt > 0)
        return 0;   /* said once is enough */
    if (replaced) {
        char names[512] = "";
        for (int i = 0; i < ENV_TORCH_NUM_VARS; i++)
            if (replaced & (1u << i))
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", env_torch_vars[i]);
        logs_message(&a->logs, "the inherited %s %s replaced by each worker's own value", names,
                     (replaced & (replaced - 1)) ? "are" : "is");
    }
    return 0;
}

/* -> RUNNING: this attempt's workers start (err: they cannot, for that reason, which is this
 * node's failure like a worker's). */
static void start_workers(struct agent *a, int err, const char *why)
{
    a->workers_down = false;
    set_state(a, AGENT_RUNNING);
    int r = err ? err : spawn_all(a);
    if (r) {
        /* the workers that did start are stopped; the job hears of it as this node failing */
        int lr = 0;
        while (lr < a->n && a->wg.w[lr].state == WORKER_RUNNING)
            lr++;
        if (lr >= a->n)
            lr = 0;
        char reason[RDZV_REASON_MAX];
        if (why)
            snprintf(reason, sizeof reason, "%s", why);
        else
            snprintf(reason, sizeof reason, "could not start: %s", podrun_strerror(r));
        health_worker_exit(a->health, HEALTH_EXIT_SPAWN);
        local_failure(a, lr, 1, false, reason);
    } else {
        health_watch(a);
    }
}

/* The front-end's agreement on the job (paddle's endpoints) is done: start, unless the round
 * ended or podrun was told to stop meanwhile. */
static void on_jobenv_ready(struct jobenv *je, int status, const char *why)
{
    struct agent *a = je->data;
    if (a->state != AGENT_STARTING || a->stop_signal || a->quit || a->decided || a->lost ||
        a->finished)
        return;
    start_workers(a, status, why);
}

/* STARTING -> RUNNING: this attempt's directories and workers, once the front-end agreed on what
 * it needs (jobenv.h). A worker that cannot be started is this node's failure, reported to the
 * job like any other. */
static void start_attempt(struct agent *a)
{
    a->ended_alive = 0;
    a->done_reported = false;
    int r = prepare_attempt_dir(a);
    if (r) {
        logs_message(&a->logs, "cannot create the run directory under %s: %s", a->dir.base,
                     podrun_strerror(r));
        start_workers(a, r, NULL);
        return;
    }
    rdzv_assignment_t as = {
        .round = a->round, .node_rank = a->group_rank, .nnodes = a->group_world_size,
        .rank_base = a->rank_base, .world_size = a->world_size,
        .restart_count = a->restart_count, .store_host = a->master_addr,
        .store_port = (uint16_t)a->master_port,
    };
    r = jobenv_prepare(&a->je, &as, a->n, a->dir.attempt, on_jobenv_ready, a);
    if (r == 1)
        return;   /* on_jobenv_ready starts them */
    start_workers(a, r < 0 ? r : 0, r < 0 ? "could not agree on the workers' endpoints" : NULL);
}

/* node_summary's lines: "podrun sets ..." is said as it is, the others as podrun's own. */
/* ---------- the preflight check ---------- */

/* The check's lines, podrun's own. */
static void pf_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* A helper of the nccl check gets what local rank lr's worker would: the environment, the CPUs
 * and, as its CUDA device, lr, or 0 when the worker sees its own GPU only. */
static int pf_helper_env(void *arg, int lr, char ***envp, const cpu_set_t **cpus, int *mem_node,
                         int *device)
{
    struct agent *a = arg;
    const struct binding_rank *b = node_rank_binding(a->nd, lr);
    char visible[GPU_UUID_LEN];
    *cpus = b ? &b->cpus : NULL;
    *mem_node = b ? b->mem_node : -1;
    *device = node_rank_visible(a->nd, lr, visible, sizeof visible) ? 0 : lr;
    return worker_env(a, lr, envp, NULL, NULL, 0, NULL);
}

/* Leaves the job on the check's verdict: the job is told (bounded by AGENT_LEAVE_MS, as for
 * SIGTERM), then the agent exits with --exit-code-preflight. */
static void pf_quit(struct agent *a, const char *reason)
{
    a->quit = true;
    a->exit_code = a->cfg->exit_code_preflight;
    if (a->rz) {
        a->leave_pending = true;
        uv_timer_start(&a->leave_timer, on_leave_timeout, AGENT_LEAVE_MS, 0);
        if (rdzv_agent_leave(a->rz, reason, on_left, a))
            leave_done(a);
    }
    advance(a);
}

/* The table, for every later termination log of this run (write_termlog adds it). */
static void pf_keep_report(struct agent *a, const struct pf_outcome *o)
{
    size_t cap = 1, used = 0;
    for (int i = 0; i < o->nlines; i++)
        cap += strlen(o->lines[i]) + 1;
    free(a->pf_report);
    if (!(a->pf_report = malloc(cap)))
        return;
    for (int i = 0; i < o->nlines; i++)
        used += (size_t)sprintf(a->pf_report + used, "%s\n", o->lines[i]);
    a->pf_report[used] = '\0';
}

/* The verdict, the same in every agent: print the table, then act by --preflight-policy. warn
 * starts the workers; fail makes every agent leave with --exit-code-preflight; exclude makes the
 * bad agents leave, and the others wait for the job to restart without them, when --nnodes
 * MIN:MAX still holds and the job store's host is not one of them (else it fails). */
static void on_preflight_done(void *arg, const struct pf_outcome *o)
{
    struct agent *a = arg;
    struct cfg *c = a->cfg;
    a->pf = NULL;
    if (a->state != AGENT_STARTING || a->stop_signal) {
        advance(a);
        return;
    }
    static const char *const policies[] = {"warn", "fail", "exclude"};
    const char *policy = policies[c->preflight_policy];
    if (o->err) {
        logs_message(&a->logs, "preflight: the check did not finish: %s", o->why);
        if (c->preflight_policy == CFG_POLICY_WARN) {
            logs_message(&a->logs, "preflight: --preflight-policy warn: starting anyway");
            start_attempt(a);
        } else {
            logs_message(&a->logs, "preflight: --preflight-policy %s: leaving the job", policy);
            pf_quit(a, "the preflight check did not finish");
        }
        return;
    }
    if (o->skipped) {
        if (c->debug)
            logs_message(&a->logs, "preflight: every node passed a check of this run; skipped");
        a->pf_passed = true;
        start_attempt(a);
        return;
    }
    for (int i = 0; i < o->nlines; i++)
        logs_message(&a->logs, "%s", o->lines[i]);
    if (o->nbad == 0) {
        a->pf_passed = true;
        start_attempt(a);
        return;
    }
    pf_keep_report(a, o);
    a->pf_passed = !o->self_bad;
    int left = o->nnodes - o->nbad;
    if (c->preflight_policy == CFG_POLICY_WARN) {
        logs_message(&a->logs, "preflight: %d bad node%s: %s; --preflight-policy warn: starting "
                     "anyway", o->nbad, o->nbad == 1 ? "" : "s", o->bad_summary);
        start_attempt(a);
    } else if (c->preflight_policy == CFG_POLICY_EXCLUDE && left >= c->nnodes_min && left > 0 &&
               !o->host_bad) {
        if (o->self_bad) {
            logs_message(&a->logs, "preflight: this node is excluded from the job: %s; exit "
                         "code %d", o->self_reason, c->exit_code_preflight);
            pf_quit(a, "excluded by the preflight check");
        } else {
            logs_message(&a->logs, "preflight: excluding %d bad node%s (%s); the job restarts "
                         "with the other %d", o->nbad, o->nbad == 1 ? "" : "s", o->bad_summary,
                         left);
            /* STARTING with no worker: the job's stop decision comes when they leave */
        }
    } else {
        char why[160] = "";
        if (c->preflight_policy == CFG_POLICY_EXCLUDE)
            snprintf(why, sizeof why, " (cannot exclude: %s)",
                     o->host_bad ? "the node that hosts the job store is bad"
                                 : "--nnodes would drop below its minimum");
        logs_message(&a->logs, "preflight: %d bad node%s: %s; --preflight-policy %s%s: the job "
                     "stops; exit code %d", o->nbad, o->nbad == 1 ? "" : "s", o->bad_summary,
                     policy, why, c->exit_code_preflight);
        pf_quit(a, "the preflight check failed");
    }
}

/* The address the other agents reach this one at: --local-addr, else this node's address on the
 * interface towards the master, else its host name. */
static const char *pf_address(struct agent *a)
{
    if (a->cfg->local_addr)
        return a->cfg->local_addr;
    if (a->nd->nic_known && a->nd->nic.addr[0])
        return a->nd->nic.addr;
    return a->id.host;
}

/* STARTING: the check when it is asked for and there is something to check, else the workers. */
static void begin_attempt(struct agent *a)
{
    struct cfg *c = a->cfg;
    bool tcp = c->preflight == CFG_PREFLIGHT_TCP;
    if (c->preflight == CFG_PREFLIGHT_OFF || (tcp && a->group_world_size < 2)) {
        start_attempt(a);
        return;
    }
    struct pf_params p = {
        .loop = a->loop, .mode = tcp ? PF_MODE_TCP : PF_MODE_NCCL, .run_id = a->run_id,
        .round = a->round, .node_rank = a->group_rank, .nnodes = a->group_world_size,
        .nproc = a->n, .rank_base = a->rank_base, .name = a->id.name, .addr = pf_address(a),
        .bind_addr = c->local_addr, .store_host = a->master_addr,
        .store_port = (uint16_t)a->master_port, .passed = a->pf_passed,
        /* the etcd backend's workers' store asks for no token */
        .token = a->guards.has_token && c->rdzv_backend != CFG_BACKEND_ETCD ? &a->guards.token
                                                                            : NULL,
        .hosts_store = a->is_host, .timeout_ms = c->preflight_timeout_ms,
        .tcp_bytes = c->preflight_tcp_bytes, .nccl_bytes = c->preflight_nccl_bytes,
        .bounds = {.max_rtt = c->preflight_max_rtt_ms / 1e3,
                   .min_bw = c->preflight_min_bandwidth * 1e6,
                   .slow_percent = c->preflight_slow_percent},
        .exe = a->exe, .nccl_lib = c->preflight_nccl_lib, .cudart_lib = c->preflight_cudart_lib,
        .helper_env = pf_helper_env, .log = pf_say, .done = on_preflight_done, .arg = a,
    };
    int r = pf_start(&p, &a->pf);
    if (r) {
        a->pf = NULL;
        struct pf_outcome o = {.err = r};
        snprintf(o.why, sizeof o.why, "cannot start it: %s", podrun_strerror(r));
        on_preflight_done(a, &o);
    }
}

static void say_line(void *arg, const char *text)
{
    struct agent *a = arg;
    if (strncmp(text, "podrun ", 7) != 0) {
        logs_message(&a->logs, "%s", text);
        return;
    }
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "%s\n", text);
    logs_write(&a->logs, 2, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void master_known(struct agent *a, const char *host, const char *why);

/* The master's address is known (or not): the interface towards it, and with it every variable
 * the workers get, is derived once and said once; then this attempt goes on. */
static void on_master_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct agent *a = req->data;
    char host[INET6_ADDRSTRLEN] = "", why[RDZV_NAME_MAX + 96];
    a->gai_pending = false;
    if (status == UV_EAI_CANCELED) {   /* the agent is exiting */
        uv_freeaddrinfo(res);
        return;
    }
    /* uv_ip4_name/uv_ip6_name rather than uv_ip_name: the one-file build links Debian 11's
     * libuv 1.40, older than uv_ip_name */
    if (status == 0 && res && res->ai_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)res->ai_addr, host, sizeof host);
    else if (status == 0 && res)
        uv_ip4_name((const struct sockaddr_in *)res->ai_addr, host, sizeof host);
    uv_freeaddrinfo(res);
    snprintf(why, sizeof why, "the master %s does not resolve here (%s)", a->master_addr,
             status ? uv_strerror(status) : "no address");
    master_known(a, host[0] ? host : NULL, why);
}

static void master_known(struct agent *a, const char *host, const char *why)
{
    node_set_master(a->nd, host, why);
    free(a->derived);
    a->derived = NULL;
    if (node_worker_vars(a->nd, &a->derived))
        logs_message(&a->logs, "out of memory: the workers get no variable derived from the node");
    a->env_ready = true;
    node_summary(a->nd, say_line, a);
    if (a->state == AGENT_STARTING && !a->stop_signal)
        begin_attempt(a);
    else
        advance(a);
}

/* The interface towards the master is derived the first time the master is known, which for a
 * multi-node job is the first assignment. The name is resolved on the loop: a slow DNS must not
 * stall the job store this agent may host. */
static void derive_env(struct agent *a)
{
    if (a->gai_pending)
        return;   /* its callback goes on with the attempt */
    unsigned char bin[sizeof(struct in6_addr)];
    if (!node_needs_master(a->nd) || uv_inet_pton(AF_INET, a->master_addr, bin) == 0 ||
        uv_inet_pton(AF_INET6, a->master_addr, bin) == 0) {
        /* a numeric address needs no lookup, and a lookup would start libuv's thread pool */
        master_known(a, a->master_addr, NULL);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    a->gai.data = a;
    int r = uv_getaddrinfo(a->loop, &a->gai, on_master_resolved, a->master_addr, NULL, &hints);
    if (r == 0) {
        a->gai_pending = true;
        return;
    }
    a->gai_pending = true;   /* on_master_resolved clears it */
    on_master_resolved(&a->gai, r, NULL);
}

/* ---------- the rendezvous' events ---------- */

/* RENDEZVOUS -> STARTING: the job gave this node its ranks. An agent told to stop meanwhile (a
 * signal) starts nothing. */
static void on_assigned(void *arg, const rdzv_assignment_t *as)
{
    struct agent *a = arg;
    if (a->state != AGENT_RENDEZVOUS || a->stop_signal || a->quit)
        return;
    a->group_rank = as->node_rank;
    a->group_world_size = as->nnodes;
    if (as->nnodes > 1)   /* a node count that discovery learned after the plan */
        a->nd->several_nodes = true;
    a->rank_base = as->rank_base;
    a->world_size = as->world_size;
    a->restart_count = as->restart_count;
    snprintf(a->master_addr, sizeof a->master_addr, "%s", as->store_host);
    a->master_port = as->store_port;
    a->failed = -1;
    a->failed_hang = false;
    a->decided = false;
    if (a->cfg->debug)
        logs_message(&a->logs, "round %d: node rank %d of %d, ranks %d-%d of %d, restart %d",
                     as->round, as->node_rank, as->nnodes, as->rank_base,
                     as->rank_base + a->n - 1, as->world_size, as->restart_count);
    a->round = as->round;
    health_rdzv_assigned(a->health);
    set_state(a, AGENT_STARTING);
    if (a->env_ready)
        begin_attempt(a);
    else
        derive_env(a);
}

/* Keeps the job's decision: its records are valid only during the callback. */
static void copy_decision(struct agent *a, const rdzv_decision_t *d)
{
    a->decided = true;
    a->action = d->action;
    a->dn = d->n < RDZV_MAX_FAILURES ? d->n : RDZV_MAX_FAILURES;
    a->own = d->own;
    a->restart_counted = d->restart_counted;
    a->restarts_used = d->restart_count;
    if (a->dn > 0)
        memcpy(a->dfail, d->failures, (size_t)a->dn * sizeof *a->dfail);
    snprintf(a->dreason, sizeof a->dreason, "%s", d->reason);
}

/* The job decided to stop the round (restart or exit): the workers stop (or were already
 * stopped by on_rdzv_ending, which is said now with the reason), then advance() acts on it. */
/* A stop or a lost store while this agent holds the check's verdict but waits for the others to
 * read it: a peer acted on the verdict first (it left the job, or shut the store it hosts). This
 * agent then acts on the same verdict now, so under --preflight-policy fail it exits with
 * --exit-code-preflight as every other agent does, not with the peer-lost code. Under warn no
 * agent leaves on the verdict, so the stop is news of its own. */
static void pf_act_first(struct agent *a)
{
    if (a->pf && a->state == AGENT_STARTING && !a->stop_signal && !a->quit &&
        a->cfg->preflight_policy != CFG_POLICY_WARN)
        pf_verdict_now(a->pf);
}

static void on_rdzv_stopped(void *arg, const rdzv_decision_t *d)
{
    struct agent *a = arg;
    pf_act_first(a);
    if (a->state >= AGENT_EXITING || a->stop_signal || a->quit)
        return;
    copy_decision(a, d);
    health_job_stopped(a->health, d, podrun_time_epoch());
    char why[RDZV_REASON_MAX + 32];
    snprintf(why, sizeof why, "the job stopped: %s", d->reason);
    if (a->state == AGENT_RUNNING)
        stop_job(a, SIGTERM, why);
    else if (a->ended_alive > 0)
        say_stopping(a, why, a->ended_alive, SIGTERM);
    a->ended_alive = 0;
    advance(a);
}

/* The round ended (the decision follows a round trip later): restart and exit both stop the
 * workers, and a finished round has none running, so they are stopped now. */
static void on_rdzv_ending(void *arg, int round)
{
    struct agent *a = arg;
    (void)round;
    if (a->state != AGENT_RUNNING || a->stop_signal)
        return;
    a->ended_alive = workers_alive(&a->wg);
    a->services_alive = 0;
    for (int i = 0; i < a->wg.n; i++)
        a->services_alive += jobenv_is_service(&a->je, i) && a->wg.w[i].state == WORKER_RUNNING;
    stop_job(a, SIGTERM, NULL);
}

static void on_rdzv_lost(void *arg, int err, const char *why);

static void on_rdzv_finished(void *arg)
{
    struct agent *a = arg;
    if (a->round < 0 && (a->cfg->nnodes_min < a->cfg->nnodes_max || a->cfg->segment_size > 1)) {
        /* an elastic job that did not need this node: a spare's end, not a failure (torch 2.x
         * exits such a node gracefully too); its operator must not count a failed pod. With
         * --segment-size a node outside the whole segments is such a spare too. */
        logs_message(&a->logs, "rendezvous '%s': the job finished without needing this node "
                     "(a spare of a %d:%d-node job); nothing ran here", a->run_id,
                     a->cfg->nnodes_min, a->cfg->nnodes_max);
        a->finished = true;
        advance(a);
        return;
    }
    if (a->round < 0) {
        /* never assigned a round in a job of a fixed size: the job's success is not this
         * node's (torchrun's agent, too, fails on a closed rendezvous) */
        char why[RDZV_LINE_MAX];
        snprintf(why, sizeof why,
                 "rendezvous '%s': the job finished without this node, which ran no worker in "
                 "it: it came too late for the job, or another job uses the same --rdzv-id "
                 "(give every job its own)", a->run_id);
        on_rdzv_lost(a, PODRUN_EENDED, why);
        return;
    }
    /* a backend that tells the end without an 'ending' first (etcd): the parameter servers still
     * run and are stopped now */
    on_rdzv_ending(a, -1);
    if (a->services_alive > 0)
        logs_message(&a->logs, "every trainer of the job is done; stopping this node's %d "
                     "parameter server%s", a->services_alive, a->services_alive == 1 ? "" : "s");
    a->services_alive = 0;
    a->finished = true;
    advance(a);
}

/* The exit code for losing the job this way (doc/failures.md#exit-status). */
static int lost_code(struct agent *a, int err)
{
    switch (err) {
    case PODRUN_ESTORELOST:
    case PODRUN_ESTORESILENT: return a->cfg->exit_code_store_lost;
    case PODRUN_EJOINTIMEOUT: return a->cfg->exit_code_rdzv_timeout;
    case PODRUN_ERUNID: return 2; /* the flags disagree: a usage error, no retry mends it */
    default: return 1;
    }
}

/* This node is out of the job (store lost or silent, join timeout, rejected): stop the workers
 * and exit with the code for that reason. */
static void on_rdzv_lost(void *arg, int err, const char *why)
{
    struct agent *a = arg;
    pf_act_first(a);
    if (a->state >= AGENT_EXITING || a->stop_signal || a->quit)
        return;
    a->lost = true;
    a->exit_code = lost_code(a, err);
    snprintf(a->stop_why, sizeof a->stop_why, "%s", why);
    if (a->state == AGENT_RUNNING)
        stop_job(a, SIGTERM, why);
    else if (strcmp(why, a->last_progress) != 0)
        logs_message(&a->logs, "%s", why);   /* unless the rendezvous already said it */
    advance(a);
}

static void on_rdzv_progress(void *arg, const char *line)
{
    struct agent *a = arg;
    /* one node alone has nobody to wait for: its rendezvous is not news */
    if (a->cfg->nnodes_max > 1 || a->cfg->debug) {
        logs_message(&a->logs, "%s", line);
        snprintf(a->last_progress, sizeof a->last_progress, "%s", line);
    }
}

/* The job store this agent hosts speaks as `podrun store` does. */
static void on_store_log(void *arg, const char *line)
{
    struct agent *a = arg;
    if (a->logs.json) {
        logs_text(&a->logs, 2, "store", line, strlen(line));
        return;
    }
    char buf[RDZV_LINE_MAX + 32];
    int n = snprintf(buf, sizeof buf, "podrun store: %s\n", line);
    logs_write(&a->logs, 2, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* -> RENDEZVOUS: the next join. A rejoin that cannot be sent is a lost store. */
static void rejoin(struct agent *a)
{
    set_state(a, AGENT_RENDEZVOUS);
    health_rdzv_joining(a->health);
    int r = rdzv_agent_rejoin(a->rz);
    if (r) {
        logs_message(&a->logs, "cannot rejoin the job: %s", podrun_strerror(r));
        a->lost = true;
        a->exit_code = a->cfg->exit_code_store_lost;
        advance(a);
    }
}

/* Before a restart on a node with GPUs: the memory the exited workers held is freed by the
 * driver, or by their leftover children, a moment after they are gone, and new workers started
 * on top of it run out of memory. So the node waits (looking again every AGENT_RECLAIM_MS, on the
 * loop) until its GPUs hold at most --gpu-memory-tolerance, for --gpu-memory-reclaim-timeout at
 * most; then it names what still holds memory and restarts anyway. */
static void on_reclaim_tick(uv_timer_t *t)
{
    struct agent *a = t->data;
    const struct cfg *c = a->cfg;
    if (a->state != AGENT_STOPPING || a->stop_signal || a->lost || a->quit)
        return;   /* the job moved on meanwhile */
    uint64_t used = 0, waited = uv_now(a->loop) - a->reclaim_start;
    char holders[1024], err[256];
    double gib = 0;
    int r = gpumem_used(NULL, &used, holders, sizeof holders, err, sizeof err);
    gib = (double)used / (1 << 30);
    if (r) {
        logs_message(&a->logs, "cannot read the GPUs' memory (%s); restarting without waiting",
                     err);
    } else if (used <= c->gpu_memory_tolerance) {
        if (a->reclaim_said)
            logs_message(&a->logs, "the GPUs' memory was freed after %.1fs (%.2f GiB in use)",
                         waited / 1000.0, gib);
    } else if (waited >= c->gpu_reclaim_timeout_ms) {
        logs_message(&a->logs, "the GPUs still hold %.2f GiB after %.1fs (tolerance %.0f MiB); "
                     "held by: %s; restarting anyway", gib, waited / 1000.0,
                     (double)c->gpu_memory_tolerance / (1 << 20),
                     holders[0] ? holders : "no compute process NVML names");
    } else {
        if (!a->reclaim_said)
            logs_message(&a->logs, "waiting up to %.1fs for the GPUs' memory to be freed (%.2f "
                         "GiB in use, tolerance %.0f MiB)", c->gpu_reclaim_timeout_ms / 1000.0,
                         gib, (double)c->gpu_memory_tolerance / (1 << 20));
        a->reclaim_said = true;
        uint64_t left = c->gpu_reclaim_timeout_ms - waited;
        uv_timer_start(t, on_reclaim_tick, left < AGENT_RECLAIM_MS ? left : AGENT_RECLAIM_MS, 0);
        return;
    }
    rejoin(a);
}

/* STOPPING -> RENDEZVOUS for the next attempt, once every worker is gone: a fresh attempt
 * directory, a reset worker group, the GPUs' memory freed (on_reclaim_tick), the next join. */
static void restart(struct agent *a)
{
    if (a->restart_counted)
        logs_message(&a->logs, "restarting the job in place (restart %d of %d): %s",
                     a->restarts_used, a->cfg->max_restarts, a->dreason);
    else
        logs_message(&a->logs, "restarting the job in place (the nodes changed; no restart "
                     "used): %s", a->dreason);
    rundir_remove(&a->dir, false);
    timer_server_clear(&a->ts);
    workers_reset(&a->wg);
    jobenv_cancel(&a->je);
    a->attempt++;
    a->decided = false;
    a->failed = -1;
    a->health_bad = false;
    if (a->nd && a->nd->gpus.source == GPU_SOURCE_NVML && a->nd->gpus.n > 0 &&
        a->cfg->gpu_reclaim_timeout_ms) {
        a->reclaim_start = uv_now(a->loop);
        a->reclaim_said = false;
        uv_timer_start(&a->reclaim_timer, on_reclaim_tick, 0, 0);
    } else {
        rejoin(a);
    }
}

/* The one place that decides what comes next once something happened. */
static void advance(struct agent *a)
{
    if (a->state >= AGENT_EXITING || !a->workers_down)
        return;
    if (a->pf && (a->stop_signal || a->quit || a->lost || a->finished || a->decided)) {
        pf_cancel(a->pf);   /* the job moved on without the check */
        a->pf = NULL;
    }
    if (a->state == AGENT_STARTING &&
        (a->stop_signal || a->quit || a->lost || a->finished || a->decided))
        jobenv_cancel(&a->je);   /* nor the front-end's agreement */
    if (a->stop_signal || a->quit) {
        if (!a->leave_pending)
            enter_exiting(a);
    } else if (a->lost || a->finished) {
        enter_exiting(a);
    } else if (a->decided) {
        if (a->action == RDZV_RESTART)
            restart(a);
        else
            enter_exiting(a);
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
    if (a->pf && pf_reaped(a->pf, pid, wstatus))
        return;
    if (a->strays > 0 && --a->strays == 0 && a->state == AGENT_DONE)
        uv_timer_start(&a->exit_timer, close_all, 0, 0);
}

/* The leave record is out (or its time is up): whatever waited for it may go on. */
static void leave_done(struct agent *a)
{
    if (!a->leave_pending)
        return;
    a->leave_pending = false;
    uv_timer_stop(&a->leave_timer);
    advance(a);
}

static void on_left(void *arg)
{
    leave_done(arg);
}

static void on_leave_timeout(uv_timer_t *t)
{
    struct agent *a = t->data;
    if (a->leave_pending)
        logs_message(&a->logs, "could not tell the job store that this node leaves within %.1fs",
                     AGENT_LEAVE_MS / 1000.0);
    leave_done(a);
}

/* SIGTERM/SIGINT, and the signals --signals-to-handle names (torch 2.x's rule), stop the job on
 * this node: the job is told this node leaves (bounded by AGENT_LEAVE_MS), the workers get the
 * same signal, and podrun exits 128+signal; a second one sends SIGKILL at once. Any other
 * forwarded signal goes to every worker's process group. */
static void on_signal(void *arg, int sig)
{
    struct agent *a = arg;
    char sn[32], why[96];
    bool stops = sig == SIGTERM || sig == SIGINT || (a->stop_signals >> sig & 1);
    if (a->state >= AGENT_EXITING)
        return;   /* after the stop there is nobody to tell */
    if (!stops) {
        if (a->state == AGENT_RUNNING || a->state == AGENT_STOPPING) {
            a->forwarded |= 1ULL << sig;
            workers_signal(&a->wg, sig);
        }
        return;
    }
    if (a->stop_signal) {
        logs_message(&a->logs, "got %s again; sending SIGKILL now",
                     report_signame(sig, sn, sizeof sn));
        if (!a->workers_down)
            workers_stop_all(&a->wg, SIGKILL, 0);
        return;
    }
    a->stop_signal = sig;
    a->exit_code = 128 + sig;
    report_signame(sig, sn, sizeof sn);
    if (a->rz) {
        a->leave_pending = true;
        uv_timer_start(&a->leave_timer, on_leave_timeout, AGENT_LEAVE_MS, 0);
        if (rdzv_agent_leave(a->rz, sn, on_left, a))
            leave_done(a);
    }
    snprintf(why, sizeof why, "got %s", sn);
    if (a->state == AGENT_RUNNING)
        stop_job(a, sig, why);
    else if (a->state == AGENT_STOPPING && !a->workers_down)
        workers_stop_all(&a->wg, sig, a->cfg->term_timeout_ms);
    advance(a);
}

/* ---------- the end ---------- */

/* DONE: every handle closes, so uv_run returns; stray processes still there get SIGKILL. */
static void close_all(uv_timer_t *t)
{
    struct agent *a = t->data;
    health_close(a->health);
    a->health = NULL;
    logs_close(&a->logs);
    /* whatever of the strays is still there after its grace */
    init_signal_children(SIGKILL, a->wg.guard_pid);
    if (a->wg_ready)
        workers_close(&a->wg);
    watchdog_close(&a->wd);
    timer_server_close(&a->ts);
    healthcheck_close(&a->hc);
    init_stop();
    uv_close((uv_handle_t *)&a->exit_timer, NULL);
    uv_close((uv_handle_t *)&a->leave_timer, NULL);
    uv_close((uv_handle_t *)&a->reclaim_timer, NULL);
}

/* EXITING -> DONE once the output is drained and the rendezvous closed; strays get their grace
 * (AGENT_STRAY_MS) before close_all. */
static void maybe_done(struct agent *a)
{
    if (a->drained && !a->rz && a->state != AGENT_DONE) {
        set_state(a, AGENT_DONE);
        uv_timer_start(&a->exit_timer, close_all, a->strays ? AGENT_STRAY_MS : 0, 0);
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
    a->drained = true;
    maybe_done(a);
}

/* The rendezvous is closed (the host: every other agent is gone): drain once more and finish. */
static void on_rdzv_closed(void *arg)
{
    struct agent *a = arg;
    a->rz = NULL;
    /* the host's last lines (who it waited for) may have come after the first drain */
    a->drained = false;
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
}

/* The termination log (Kubernetes' /dev/termination-log unless --termination-log names one):
 * `text`, with the note about lost console output last, cutting the text to make room. */
static void write_termlog(struct agent *a, const char *text, size_t len)
{
    const char *path = a->cfg->termination_log;
    /* the preflight check's table follows what happened, as far as room allows */
    char *with = NULL;
    if (a->pf_report && (with = malloc(REPORT_TERMLOG_MAX + 1))) {
        int n = snprintf(with, REPORT_TERMLOG_MAX + 1, "%.*s%s", (int)len, text, a->pf_report);
        len = n < 0 ? 0 : (size_t)n > REPORT_TERMLOG_MAX ? REPORT_TERMLOG_MAX : (size_t)n;
        text = with;
    }
    /* lost console output is part of the story: the note goes last, the text yields room */
    char note[1024], *both = NULL;
    size_t nl = (size_t)snprintf(note, sizeof note, "%s", a->stuck);
    nl += logs_dropped_note(&a->logs, note + nl, sizeof note - nl);
    if (nl && (both = malloc(REPORT_TERMLOG_MAX + 1))) {
        size_t keep = len + nl > REPORT_TERMLOG_MAX ? REPORT_TERMLOG_MAX - nl : len;
        memcpy(both, text, keep);
        memcpy(both + keep, note, nl);
        text = both;
        len = keep + nl;
    }
    int r = report_write_termlog(path ? path : "/dev/termination-log", path != NULL, text, len);
    free(both);
    free(with);
    if (r && path)
        logs_message(&a->logs, "cannot write the termination log %s: %s", path, podrun_strerror(r));
}

/* What the report's title names, as torchrun does: the script (or module) a Python worker
 * runs, not the interpreter; the program itself under --no-python. */
static const char *report_title(struct agent *a)
{
    return a->cfg->program && a->cfg->program_argc > 0 ? a->cfg->program[0] : a->argv[0];
}

/* This node's own failed worker, as only this node knows it. */
static void local_report(struct agent *a, bool details)
{
    worker_t *w = &a->wg.w[a->failed];
    char errfile[PATH_MAX + 32];
    struct report_error e;
    const char *tail;
    size_t tl;
    int er = failure_inputs(a, a->failed, errfile, sizeof errfile, &e, &tail, &tl);
    struct report_failure f = {
        .rank = a->rank_base + a->failed, .local_rank = a->failed, .pid = w->pid,
        .wstatus = w->wstatus, .exec_errno = w->exec_errno, .time = w->exit_time,
        .host = a->id.host, .program = a->argv[0], .title = report_title(a),
        .error_file = errfile, .stderr_tail = tail,
        .stderr_tail_len = tl,
    };
    if (er == -EINVAL || er == -EFBIG)
        logs_message(&a->logs, "rank %d's error file %s is not torch's JSON; ignoring it",
                     f.rank, errfile);
    size_t cap = 16384;
    char *buf = malloc(cap);
    if (buf) {
        size_t n = details ? report_details(&f, er ? NULL : &e, buf, cap)
                           : report_format(&f, er ? NULL : &e, buf, cap);
        logs_text(&a->logs, 2, "report", buf, n);
        if (!a->failed_hang) {
            n = report_short(&f, er ? NULL : &e, buf, REPORT_TERMLOG_MAX + 1);
            write_termlog(a, buf, n);
        }
        free(buf);
    }
    if (!er)
        report_error_free(&e);
}

/* The failure of the decision whose exit code is not to be retried, or NULL. */
static const rdzv_failure_t *fatal_failure(const struct agent *a)
{
    for (int i = 0; i < a->dn; i++)
        if (a->dfail[i].fatal)
            return &a->dfail[i];
    return NULL;
}

/* The exit code a stop decision gives this node (doc/failures.md#exit-status). */
static int decision_code(struct agent *a)
{
    struct cfg *c = a->cfg;
    const rdzv_failure_t *root = &a->dfail[0];
    if (fatal_failure(a))
        return c->exit_code_fatal;   /* every node the same: the job is not to be retried */
    if (a->dn == 0)
        return c->exit_code_peer_lost;
    if (a->own == 0 && root->rank < 0 && a->health_bad)
        return c->exit_code_preflight;   /* this node's own health check: the node is bad */
    if (a->own == 0 && root->rank >= 0) {
        if (a->failed < 0)   /* a record of ours we no longer know: trust it */
            return root->signo > 0 ? 128 + root->signo : root->exit_code > 0 ? root->exit_code : 1;
        return a->failed_hang ? c->exit_code_hang : a->failed_code;
    }
    return root->rank < 0 ? c->exit_code_peer_lost : c->exit_code_peer_failure;
}

/* The job's failure report on stderr and in the termination log. The node whose worker is the
 * root cause also prints that worker's details (and its own short form goes to the log). */
/* The job's failure records and, after them, this node's workers that failed on their own
 * while the others were stopped and that the job's record lacks (their news came after its
 * decision): the report lists every one of them, as torchrun does. */
static void add_failed_alone(struct agent *a)
{
    for (int i = 0; i < a->wg.n && a->dn < RDZV_MAX_FAILURES; i++) {
        worker_t *w = &a->wg.w[i];
        bool known = false;
        if (!w->failed_alone || w->state != WORKER_EXITED)
            continue;
        for (int k = 0; k < a->dn && !known; k++)
            known = a->dfail[k].node_rank == a->group_rank &&
                    a->dfail[k].rank == a->rank_base + i;
        if (!known)
            fill_alone(a, w, &a->dfail[a->dn++]);
    }
}

static void job_report(struct agent *a)
{
    add_failed_alone(a);
    size_t cap = 16384;
    char *buf = malloc(cap);
    if (!buf)
        return;
    size_t n = report_job_format(a->dfail, a->dn, report_title(a), buf, cap);
    logs_text(&a->logs, 2, "report", buf, n);
    bool mine = a->own == 0 && a->failed >= 0 && a->dfail[0].rank >= 0 && !a->failed_hang;
    if (mine) {
        local_report(a, true);   /* details; the termination log gets the local short form */
        free(buf);
        return;
    }
    n = report_job_short(a->dfail, a->dn, buf, REPORT_TERMLOG_MAX + 1);
    write_termlog(a, buf, n);
    free(buf);
}

/* A failure not to retry: the termination log says so first, then the job's root cause. */
static void fatal_termlog(struct agent *a, const rdzv_failure_t *f)
{
    char *buf = malloc(REPORT_TERMLOG_MAX + 1);
    if (!buf)
        return;
    int n = snprintf(buf, REPORT_TERMLOG_MAX + 1, "podrun: not to be retried: rank %d on %s "
                     "exited with code %d, one of --fatal-exit-codes; every node exits %d\n",
                     f->rank, f->node_name, f->signo > 0 ? 128 + f->signo : f->exit_code,
                     a->exit_code);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len < REPORT_TERMLOG_MAX)
        len += report_job_short(a->dfail, a->dn, buf + len, REPORT_TERMLOG_MAX + 1 - len);
    write_termlog(a, buf, len);
    free(buf);
}

/* -> EXITING: the exit code and the one report for how the job ended (a signal, the job's
 * decision, a lost job, finished), the run directory removed, strays asked to go, the rendezvous
 * closed (the host keeps the store up for the others), and podrun's output drained. */
static void enter_exiting(struct agent *a)
{
    set_state(a, AGENT_EXITING);
    k8s_discover_close(a->k8s);   /* nothing to watch for any more */
    a->k8s = NULL;
    if (a->gai_pending)
        uv_cancel((uv_req_t *)&a->gai);
    if (a->pf) {
        pf_cancel(a->pf);
        a->pf = NULL;
    }
    watchdog_disarm_all(&a->wd);
    uv_timer_stop(&a->reclaim_timer);
    jobenv_cancel(&a->je);
    finish_streams(a);
    char msg[RDZV_LINE_MAX + 64];
    char sn[32];
    if (a->stop_signal) {
        int n = snprintf(msg, sizeof msg, "podrun: stopped by %s; exit code %d\n",
                         report_signame(a->stop_signal, sn, sizeof sn), a->exit_code);
        write_termlog(a, msg, (size_t)n);
    } else if (a->quit && a->health_bad) {
        int n = snprintf(msg, sizeof msg, "podrun: this node failed its health check and left "
                         "the job: %s; exit code %d\n", a->hc.last_why, a->exit_code);
        write_termlog(a, msg, (size_t)n);
    } else if (a->quit) {
        int n = snprintf(msg, sizeof msg, "podrun: the preflight check stopped this node; exit "
                         "code %d\n", a->exit_code);
        write_termlog(a, msg, (size_t)n);
    } else if (a->decided && a->action == RDZV_EXIT) {
        a->exit_code = decision_code(a);
        job_report(a);
        const rdzv_failure_t *ff = fatal_failure(a);
        if (ff)
            fatal_termlog(a, ff);
        logs_message(&a->logs, "the job failed: %s%s; exit code %d", a->dreason,
                     ff ? " (an exit code in --fatal-exit-codes: not retried)" : "",
                     a->exit_code);
    } else if (a->lost) {
        if (a->failed >= 0)
            local_report(a, false);
        else {
            int n = snprintf(msg, sizeof msg, "podrun: this node lost the job; exit code %d\n",
                             a->exit_code);
            write_termlog(a, msg, (size_t)n);
        }
        /* the same last line on stderr as every other ending */
        logs_message(&a->logs, "this node lost the job; exit code %d", a->exit_code);
    } else if (a->finished) {
        a->exit_code = 0;
        bool job = a->group_world_size > 1;
        int n = snprintf(msg, sizeof msg, "podrun: all %d workers%s exited 0\n",
                         job ? a->world_size : a->n, job ? " of the job" : "");
        write_termlog(a, msg, (size_t)n);
    } else if (!a->exit_code) {
        a->exit_code = 1;
    }
    logs_say_dropped(&a->logs);
    timer_server_stop(&a->ts);   /* before the run directory that may hold the FIFO goes */
    rundir_remove(&a->dir, true);
    /* The workers' groups are gone; what is left among podrun's children left its group
     * (setsid, a daemon) and was adopted by podrun as subreaper: it goes with the job. */
    a->strays = init_signal_children(SIGTERM, a->wg.guard_pid);
    /* done once the output is drained and the rendezvous closed (on_rdzv_closed drains again) */
    if (a->rz)
        rdzv_agent_close(a->rz, on_rdzv_closed, a);
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
}

/* ---------- --discovery k8s ---------- */

static int start_rendezvous(struct agent *a);

/* The job's pods are Running and Ready: this pod is who the pods say (its name and IP, unless
 * --node-name/--local-addr say otherwise), and the rendezvous starts with the rank-0 pod as the
 * store host. */
static void on_k8s_ready(void *arg, const struct k8s_found *f)
{
    struct agent *a = arg;
    struct cfg *c = a->cfg;
    if (a->state >= AGENT_EXITING || a->stop_signal)
        return;
    a->k8s_found = true;
    a->k8s_rank = f->node_rank;
    snprintf(a->k8s_ip, sizeof a->k8s_ip, "%s", f->pod_ip);
    snprintf(a->k8s_host_ip, sizeof a->k8s_host_ip, "%s", f->host_ip);
    if (!c->node_name)
        snprintf(a->id.name, sizeof a->id.name, "%s", f->pod_name);
    if (!c->local_addr) {
        /* the pod's IP is the address this node advertises: Gloo and NCCL use its interface */
        snprintf(a->id.host, sizeof a->id.host, "%s", f->pod_ip);
        snprintf(a->nd->local_addr, sizeof a->nd->local_addr, "%s", f->pod_ip);
    }
    if (f->node_rank >= 0)
        logs_message(&a->logs, "kubernetes: the job's %d pods are ready; %s (%s) is node rank "
                     "%d, the job store is on %s (%s)", f->nnodes, f->pod_name, f->pod_ip,
                     f->node_rank, f->host_name, f->host_ip);
    else
        logs_message(&a->logs, "kubernetes: %d of the job's pods are ready; %s (%s) joins, the "
                     "job store is on %s (%s)", f->nnodes, f->pod_name, f->pod_ip, f->host_name,
                     f->host_ip);
    if (start_rendezvous(a)) {
        a->exit_code = 1;
        enter_exiting(a);
    }
}

/* A pod of the job went away: that node is lost for the whole job now, not after the
 * heartbeat window. The rendezvous passes it on while a round runs (rdzv_agent_report_peer_lost);
 * at other times the node's own agent leaving, or its silence, says it. */
static void on_k8s_lost(void *arg, const char *name, const char *ip, const char *why)
{
    struct agent *a = arg;
    if (a->state >= AGENT_EXITING)
        return;
    logs_message(&a->logs, "kubernetes: pod %s (%s) of the job: %s", name, ip, why);
    if (a->rz && a->state == AGENT_RUNNING) {
        int r = rdzv_agent_report_peer_lost(a->rz, name, ip, why);
        if (r)
            logs_message(&a->logs, "cannot report the lost pod to the job store: %s",
                         podrun_strerror(r));
    }
}

/* Discovery gave up. Before the job started nothing can go on: usage errors (a selector or pod
 * that does not fit) exit 2, a wait past join_timeout with the rendezvous timeout code, the rest
 * (401/403 with the Role the service account needs) 1. Once the job runs it goes on without the
 * watch: a lost node is then noticed by its connection or its heartbeats. */
static void on_k8s_fatal(void *arg, int err, const char *line, int ready)
{
    struct agent *a = arg;
    if (a->state >= AGENT_EXITING)
        return;
    if (ready) {
        logs_message(&a->logs, "%s; the job goes on without watching its pods", line);
        return;
    }
    logs_message(&a->logs, "%s", line);
    a->exit_code = err == -EINVAL      ? 2
                   : err == -ETIMEDOUT ? a->cfg->exit_code_rdzv_timeout
                                       : 1;
    enter_exiting(a);
}

static void on_k8s_progress(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* INIT -> (waiting for the pods) -> RENDEZVOUS: this pod's name is POD_NAME (the downward API),
 * else HOSTNAME, else the host name, which a pod has by default. */
/* The job's pods as they come and go: with --store-allow job, the sources the store accepts. */
static void on_k8s_addrs(void *arg, const char *const *ips, size_t n)
{
    struct agent *a = arg;
    if (guards_set_job_addrs(&a->guards, ips, n) < 0)
        logs_message(&a->logs, "out of memory for the job store's allow-list; it keeps the "
                               "pods it had");
}

static int start_k8s(struct agent *a)
{
    struct cfg *c = a->cfg;
    struct k8s_source src;
    k8s_source_from_env(&src);
    char hn[IDENTITY_NAME_MAX];
    const char *pod = getenv("POD_NAME");
    if (!pod || !*pod)
        pod = getenv("HOSTNAME");
    if ((!pod || !*pod) && podrun_hostname(hn, sizeof hn) == 0)
        pod = hn;
    struct k8s_discover_params p = {
        .src = &src, .selector = c->k8s_selector, .ns = c->k8s_namespace, .pod_name = pod,
        .order = (enum k8s_order)c->k8s_order, .min_nodes = c->nnodes_min,
        .max_nodes = c->nnodes_max, .timeout_ms = c->join_timeout_ms,
        .on_ready = on_k8s_ready, .on_lost = on_k8s_lost, .on_fatal = on_k8s_fatal,
        .on_addrs = on_k8s_addrs,
        .on_progress = on_k8s_progress, .arg = a,
    };
    char err[1024];
    int r = k8s_discover_start(a->loop, &p, &a->k8s, err, sizeof err);
    if (r) {
        a->k8s = NULL;
        logs_message(&a->logs, "%s", err);
        if (r == -EINVAL)
            a->exit_code = 2;
    }
    return r;
}

/* ---------- --health-port ---------- */

/* What /healthz and /metrics say about this agent now. Healthy while it starts, waits for the
 * rendezvous (a restart's included: the job is mending itself) and runs its workers; not once a
 * worker failed, while stopping, or when exiting, each with its reason. */
static void health_snapshot(void *arg, struct health_snapshot *s)
{
    struct agent *a = arg;
    static const char *const names[] = {"init",     "rendezvous", "starting", "running",
                                        "stopping", "exiting",    "done"};
    s->state = names[a->state];
    s->workers = a->n;
    s->workers_running = a->wg_ready ? a->wg.running : 0;
    s->restarts_used = a->restarts_used;
    s->max_restarts = a->cfg->max_restarts;
    if (a->round >= 0) {
        s->round = a->round;
        s->node_rank = a->group_rank;
        s->nnodes = a->group_world_size;
        s->world_size = a->world_size;
        s->restart_count = a->restart_count;
    }
    if (a->rz)
        rdzv_agent_stats(a->rz, &s->rdzv);
    s->check_on = a->hc.interval_ms > 0;
    s->check_ok = a->hc.last_ok;
    s->check_time = a->hc.last_time;
    s->checks = a->hc.checks;
    s->check_failures = a->hc.failures;
    size_t cap = sizeof s->reason;
    s->healthy = 1;
    switch (a->state) {
    case AGENT_INIT:
        snprintf(s->reason, cap, "starting");
        break;
    case AGENT_RENDEZVOUS:
        if (a->cfg->discovery == CFG_DISCOVERY_K8S && !a->k8s_found)
            snprintf(s->reason, cap, "waiting for the job's pods (kubernetes)");
        else if (a->attempt > 0)
            snprintf(s->reason, cap, "restarting in place: waiting for the rendezvous");
        else
            snprintf(s->reason, cap, "waiting for the rendezvous");
        break;
    case AGENT_STARTING:
        snprintf(s->reason, cap, "starting the workers of round %d", a->round);
        break;
    case AGENT_RUNNING:
        if (a->failed >= 0) {
            s->healthy = 0;
            snprintf(s->reason, cap, "%s", a->stop_why);
        } else {
            snprintf(s->reason, cap, "running %d worker%s (ranks %d-%d of %d), round %d, "
                     "restart %d", a->n, a->n == 1 ? "" : "s", a->rank_base,
                     a->rank_base + a->n - 1, a->world_size, a->round, a->restart_count);
        }
        break;
    case AGENT_STOPPING:
        s->healthy = 0;
        snprintf(s->reason, cap, "%s: %s",
                 a->decided && a->action == RDZV_RESTART ? "restarting" : "stopping",
                 a->stop_why[0] ? a->stop_why : "the job stopped");
        break;
    default:
        s->healthy = 0;
        snprintf(s->reason, cap, "exiting with code %d%s%s", a->exit_code,
                 a->stop_why[0] ? ": " : a->finished ? ": the job finished" : "", a->stop_why);
        break;
    }
}

/* The health port opens before discovery and the rendezvous, so a probe is answered from the
 * start; a port that cannot be bound is this agent's start failing, said with the flag. */
static int start_health(struct agent *a)
{
    struct cfg *c = a->cfg;
    struct health_params hp = {
        .host = NULL, .port = c->health_port,
        .labels = {PODRUN_VERSION_STRING, a->id.name, c->rdzv_id, c->role},
        .snapshot = health_snapshot, .arg = a,
    };
    int r = health_start(a->loop, &hp, &a->health);
    if (r) {
        logs_message(&a->logs, "cannot serve --health-port %d: %s; pick another port",
                     c->health_port, podrun_strerror(r));
        a->health = NULL;
        return r;
    }
    logs_message(&a->logs, "serving /healthz and /metrics on port %d", health_port(a->health));
    return 0;
}

/* ---------- start ---------- */

/* Where the job store's port was given, as the user wrote it: "flag --main_process_port",
 * "config file c.yaml:main_process_port", or podrun's own flag for it. */
static const char *port_input(const struct cfg *c)
{
    static char buf[CFG_SRC_NAME_MAX + 32];
    const struct cfg_src *s = &c->src[CFG_RDZV_ENDPOINT];
    if (s->kind == CFG_SRC_DERIVED)
        s = &c->src[CFG_MASTER_PORT];
    if (s->kind == CFG_SRC_DEFAULT)
        return c->rdzv_backend == CFG_BACKEND_STATIC ? "--master-port" : "--rdzv-endpoint";
    cfg_src_describe(s, buf, sizeof buf);
    return buf;
}

/* INIT -> RENDEZVOUS: the rendezvous parameters from the config (--standalone: a random id and a
 * free loopback port; who hosts: static node rank 0, c10d the endpoint's own node unless is_host
 * says), and the join. A store that cannot be hosted is said with the flag that picks its port. */
static int start_rendezvous(struct agent *a)
{
    struct cfg *c = a->cfg;
    rdzv_params_t p;
    rdzv_params_default(&p);
    a->run_id = c->rdzv_id;
    const char *endpoint = c->rdzv_host;
    int port = c->rdzv_port;
    const char *local = c->local_addr;
    if (c->standalone) {
        if (c->src[CFG_RDZV_ID].kind == CFG_SRC_DEFAULT) {
            podrun_random_id(a->rdzv_id_buf, 32);
            a->run_id = a->rdzv_id_buf;
            if (a->logs.json)
                logs_set_json(&a->logs, a->id.name, a->run_id);
        }
        endpoint = "127.0.0.1";   /* a free port on loopback, nobody else to reach it */
        port = 0;
        if (!local)
            local = "127.0.0.1";
    }
    /* --discovery k8s: the rank-0 pod hosts, unless an endpoint or a master address was given */
    bool k8s_ep = a->k8s_found && c->src[CFG_RDZV_ENDPOINT].kind == CFG_SRC_DERIVED &&
                  strcmp(c->src[CFG_RDZV_ENDPOINT].name, "--discovery k8s") == 0;
    int node_rank = c->node_rank;
    bool rank_given = c->src[CFG_NODE_RANK].kind != CFG_SRC_DEFAULT;
    if (a->k8s_found) {
        if (k8s_ep)
            endpoint = a->k8s_host_ip;
        if (!local)
            local = a->k8s_ip;
        if (!rank_given) {
            node_rank = a->k8s_rank;
            rank_given = node_rank >= 0;
        }
    }
    p.run_id = a->run_id;
    p.endpoint_host = endpoint;
    p.endpoint_port = (uint16_t)port;
    if (k8s_ep && c->is_host < 0)
        p.is_host = strcmp(endpoint, local) == 0;
    else if (c->rdzv_backend == CFG_BACKEND_STATIC)
        p.is_host = node_rank == 0;
    else if (c->is_host >= 0)
        p.is_host = c->is_host;
    else if (c->standalone)
        p.is_host = 1;
    else
        p.is_host = rdzv_endpoint_is_local(endpoint, local) ? RDZV_HOST_INFERRED : 0;
    a->is_host = p.is_host;
    p.min_nodes = c->nnodes_min;
    p.max_nodes = c->nnodes_max;
    p.want_rank = (c->rdzv_backend == CFG_BACKEND_STATIC && node_rank >= 0) || rank_given
                      ? node_rank
                      : -1;
    p.segment_size = c->segment_size;
    p.max_restarts = c->max_restarts;
    p.join_timeout = (double)c->join_timeout_ms / 1000.0;
    p.last_call_timeout = (double)c->last_call_timeout_ms / 1000.0;
    p.close_timeout = (double)c->close_timeout_ms / 1000.0;
    p.keep_alive_interval = (double)c->keep_alive_interval_ms / 1000.0;
    p.keep_alive_max_attempt = c->keep_alive_max_attempt;
    p.local_addr = local;
    char etcd_endpoints[300];
    if (c->rdzv_backend == CFG_BACKEND_ETCD) {
        /* etcd's members; this node's own store listens on --master-port when one is given */
        p.backend = "etcd";
        p.endpoints = c->rdzv_endpoints;
        if (!p.endpoints) {
            podrun_hostport_format(endpoint, port, etcd_endpoints, sizeof etcd_endpoints);
            p.endpoints = etcd_endpoints;
        }
        p.etcd_cacert = c->etcd_cacert;
        p.etcd_cert = c->etcd_cert;
        p.etcd_key = c->etcd_key;
        p.store_port = c->src[CFG_MASTER_PORT].kind != CFG_SRC_DEFAULT ? (uint16_t)c->master_port
                                                                        : 0;
        p.read_timeout = (double)c->read_timeout_ms / 1000.0;
        p.is_host = 0;
    }
    p.token = a->guards.has_token ? &a->guards.token : NULL;
    p.allow = a->guards.has_allow ? &a->guards.allow : NULL;
    rdzv_node_desc_t self = {a->id.name, local, a->n, jobenv_node_service(&a->je),
                             a->nd ? a->nd->gpus.fabric : NULL};
    rdzv_callbacks_t cb = {on_assigned,      on_rdzv_stopped, on_rdzv_finished, on_rdzv_lost,
                           on_rdzv_progress, on_rdzv_ending,  on_store_log};
    set_state(a, AGENT_RENDEZVOUS);
    health_rdzv_joining(a->health);
    int r = rdzv_agent_start(a->loop, &p, &self, &cb, a, &a->rz);
    if (!r && p.is_host == RDZV_HOST_INFERRED) {
        rdzv_stats_t st;
        rdzv_agent_stats(a->rz, &st);
        a->is_host = st.hosting;   /* or it joined this run's store, which held the port */
    }
    if (r) {
        a->rz = NULL;
        if (c->rdzv_backend == CFG_BACKEND_ETCD && r == -ELIBACC)
            logs_message(&a->logs, "cannot start the rendezvous on etcd at %s: %s", p.endpoints,
                         http_library_error());   /* no libcurl in this image: which package */
        else if (c->rdzv_backend == CFG_BACKEND_ETCD)
            logs_message(&a->logs, "cannot start the rendezvous on etcd at %s: %s%s", p.endpoints,
                         podrun_strerror(r),
                         p.store_port ? "; pick another --master-port for this node's store" : "");
        else if (p.is_host)
            logs_message(&a->logs, "cannot host the job store on %s:%d: %s; pick another port "
                         "(%s)", local ? local : "*", port, podrun_strerror(r), port_input(c));
        else
            logs_message(&a->logs, "cannot start the rendezvous with %s:%d: %s",
                         endpoint ? endpoint : "?", port, podrun_strerror(r));
    }
    return r;
}

/* The run directory; a fallback from an unwritable TMPDIR is said once, with how to choose. */
static int open_rundir(struct agent *a)
{
    const struct cfg *c = a->cfg;
    int r = rundir_open(&a->dir, c);
    if (r && c->log_dir)
        logs_message(&a->logs, "cannot create the run directory under %s: %s; give --log-dir a "
                     "writable directory", a->dir.base, podrun_strerror(r));
    else if (r)
        logs_message(&a->logs, "cannot create the run directory under %s (%s), nor under "
                     "%s/dev/shm, /var/tmp or /run; set TMPDIR to a writable directory (in "
                     "Kubernetes, mount an emptyDir there)", a->dir.base, podrun_strerror(r),
                     strcmp(a->dir.base, "/tmp") ? "/tmp, " : "");
    else if (a->dir.fallback)
        logs_message(&a->logs, "cannot create the run directory under %s (%s); using %s instead "
                     "(set TMPDIR to a writable directory, e.g. an emptyDir, to choose)",
                     a->dir.tried, podrun_strerror(a->dir.tried_err), a->dir.base);
    return r;
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
    if (c->health_port >= 0 && (r = start_health(a)))
        return r;
    a->wd.streams = a->streams;
    a->wd.dir = &a->dir;
    a->wd.watching = hang_watching;
    a->wd.hung = hang_fired;
    a->wd.arg = a;
    if (c->file_timer && (r = start_timers(a)))
        return r;
    char gerr[600];
    r = guards_load(c, &a->guards, gerr, sizeof gerr);
    if (r) {
        logs_message(&a->logs, "%s", gerr);
        if (r == -EINVAL)
            a->exit_code = 2;
        return r;
    }
    if (c->discovery == CFG_DISCOVERY_K8S)
        return start_k8s(a);
    return start_rendezvous(a);
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
    a->failed = -1;
    timer_server_init(&a->ts);
    healthcheck_init(&a->hc, uv_default_loop(), cfg->health_check_interval_ms);
    a->hc.failed = health_failed;
    a->hc.say = health_say;
    a->hc.arg = a;
    a->hc.rz = &a->rz;   /* `podrun status` shows each check (healthcheck.h) */
    ssize_t el = readlink("/proc/self/exe", a->exe, sizeof a->exe - 1);
    a->exe[el > 0 ? el : 0] = '\0';
    a->round = -1;
    a->n = cfg->nproc_per_node;
    a->loop = uv_default_loop();
    identity_resolve(&a->id, cfg);
    char jerr[512];
    if (jobenv_init(&a->je, a->loop, cfg, envp, a->id.name, jerr, sizeof jerr)) {
        fprintf(stderr, "podrun: %s\n", jerr);
        jobenv_free(&a->je);
        free(a);
        return 1;
    }
    cfg_signals_parse(cfg->signals_to_handle, &a->stop_signals, NULL, 0);
    cfg_codes_parse(cfg->fatal_exit_codes, a->fatal_codes, NULL, 0);
    for (int k = 0; k < 2; k++) {
        a->filter_fd[k] = -1;
        a->nfilters[k] = cfg_filters_split(cfg->dup_filters[k], a->filter_buf[k],
                                           sizeof a->filter_buf[k], a->filter_items[k], 64);
    }
    int r = env_worker_argv(cfg, &a->argv);
    if (!r && !(a->streams = calloc((size_t)(2 * a->n), sizeof *a->streams)))
        r = -ENOMEM;
    if (!r)
        r = logs_init(&a->logs, a->loop);
    if (r) {
        fprintf(stderr, "podrun: cannot start: %s\n", podrun_strerror(r));
        jobenv_free(&a->je);
        free(a->argv);
        free(a->streams);
        free(a);
        return 1;
    }
    a->logs.data = a;
    if (cfg->log_format == CFG_LOG_JSON)
        logs_set_json(&a->logs, a->id.name, cfg->rdzv_id);
    uv_timer_init(a->loop, &a->exit_timer);
    a->exit_timer.data = a;
    uv_timer_init(a->loop, &a->leave_timer);
    a->leave_timer.data = a;
    uv_timer_init(a->loop, &a->reclaim_timer);
    a->reclaim_timer.data = a;

    r = start(a);
    if (r && a->state < AGENT_RUNNING) {
        if (!a->exit_code)
            a->exit_code = 1;
        logs_message(&a->logs, "cannot start the job: %s", podrun_strerror(r));
        enter_exiting(a);
    }
    uv_run(a->loop, UV_RUN_DEFAULT);
    int code = a->exit_code;
    uv_loop_close(a->loop);
    jobenv_free(&a->je);
    for (int k = 0; k < 2; k++)
        if (a->filter_fd[k] >= 0)
            close(a->filter_fd[k]);
    free(a->argv);
    free(a->streams);
    free(a->derived);
    free(a->pf_report);
    watchdog_free(&a->wd);
    guards_free(&a->guards);
    free(a);
    return code;
}
