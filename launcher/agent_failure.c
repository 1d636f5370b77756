/* launcher/agent_failure.c — this node's failures as the job hears of them (agent.c acts on
 * them): a failed worker's record (agent_record.c), the siblings that failed with it at the same
 * time, a worker that failed on its own while the others were being stopped, and a record of
 * the node itself (a health check, a pod behind JobSet's in-place restart). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "launcher/agent_int.h"
#include "launcher/output/report.h"
#include "rdzv/base/common.h"

#define AGENT_EXEC_WAIT_MS 1000  /* bound on learning whether siblings of a worker that could
                                   not start could not either */

/* A failure record to the job; one that cannot be sent is said. */
void agent_failure_send(struct agent *a, const rdzv_failure_t *f)
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
        agent_record_worker(a, i, ws, podrun_time_epoch(), cause, &f);
        agent_failure_send(a, &f);
    }
    return exited;
}

/* The first failure of a local worker in this attempt (FAIL): tell the job, say the stop (STOP
 * follows). A program that cannot be started fails the same way in every restart: its record
 * says so, and the job exits instead of restarting. */
void agent_failure_local(struct agent *a, int lr, int code, bool hang, const char *reason)
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
    agent_record_worker(a, lr, hang || w->pid <= 0 ? -1 : exited ? w->wstatus : code << 8,
                 exited ? agent_record_exit_time(w) : podrun_time_epoch(), reason, &f);
    agent_failure_send(a, &f);
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
}

/* A worker that exited while its siblings were being stopped failed on its own when podrun's
 * stop is not what ended it: it could not be started, or a signal podrun forwarded (SIGHUP to
 * every group) killed it, or it had already exited when the stop began (failed_with). */
void agent_failure_note_alone(struct agent *a, worker_t *w)
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
        agent_record_alone(a, w, &f);
        agent_failure_send(a, &f);
    }
}

/* A failure record of this node, not of a worker (a failed health check, a pod behind JobSet's
 * in-place restart), to the job. */
void agent_failure_node(struct agent *a, const char *reason)
{
    rdzv_failure_t f;
    rdzv_failure_init(&f);
    snprintf(f.host, sizeof f.host, "%s", a->id.host);
    snprintf(f.node_name, sizeof f.node_name, "%s", a->id.name);
    f.node_rank = a->rdzv.group_rank;
    f.time = podrun_time_epoch();
    snprintf(f.reason, sizeof f.reason, "%s", reason);
    agent_failure_send(a, &f);
}
