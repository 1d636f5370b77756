/* launcher/agent_record.c — a failed worker's record, as the job hears of it (agent_failure.c)
 * and as the failure report says it (agent_report.c): who, how it ended, and its own words (its
 * error file's message, else its last stderr lines), with what it asked of the job. Data that
 * the stages share, read from the worker and its run directory: no stage, no event. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "launcher/agent_int.h"
#include "launcher/config/values.h"
#include "launcher/output/report.h"
#include "rdzv/base/common.h"

/* What a failed worker left: its error file (read into *e; the result of
 * report_read_error_file) and the last lines of its stderr. */
int agent_record_inputs(struct agent *a, int lr, char *errfile, size_t len,
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
    int er = agent_record_inputs(a, lr, errfile, sizeof errfile, &e, &tail, &tl);
    report_failure_message(er ? NULL : &e, tail, tl, out, cap);
    if (!er)
        report_error_free(&e);
}

/* The record of local rank lr's failure: its exit status ws (-1: none, a hang), at time t. */
void agent_record_worker(struct agent *a, int lr, int ws, double t, const char *reason,
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
    /* what the worker asked of the job, carried by its record (workers/control.h) */
    char ctl[PATH_MAX + 32], bad[64];
    agent_rank_path(a, lr, CONTROL_FILE, ctl, sizeof ctl);
    if (control_apply(ctl, f, bad, sizeof bad) >= 0 && bad[0])
        logs_message(&a->logs, "rank %d asked '%s' in %s: not 'stop' or 'exclude'; ignored",
                     f->rank, bad, ctl);
}

double agent_record_exit_time(const worker_t *w)
{
    return (double)w->exit_time.tv_sec + w->exit_time.tv_nsec / 1e9;
}

/* The record of a worker that failed on its own, once reaped (its exit status and time). */
void agent_record_alone(struct agent *a, const worker_t *w, rdzv_failure_t *f)
{
    char cause[512];
    struct report_failure rf = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                .program = a->argv[0]};
    report_cause(&rf, cause, sizeof cause);
    agent_record_worker(a, w->index, w->wstatus, agent_record_exit_time(w), cause, f);
}
