/* launcher/agent_report.c — what this node says about how the job ended: the failure report on
 * stderr (the job's records, and the details of a failed worker of its own) and the termination
 * log. agent.c decides when; this file says it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/agent_int.h"
#include "launcher/output/report.h"
#include "rdzv/badnodes.h"
#include "rdzv/base/common.h"

/* The termination log (Kubernetes' /dev/termination-log unless --termination-log names one):
 * `text`, with the note about lost console output last, cutting the text to make room. */
void agent_report_termlog(struct agent *a, const char *text, size_t len)
{
    const char *path = a->cfg->termination_log;
    /* the preflight check's table follows what happened, as far as room allows */
    char *with = NULL;
    if (a->pf.report && (with = malloc(REPORT_TERMLOG_MAX + 1))) {
        int n = snprintf(with, REPORT_TERMLOG_MAX + 1, "%.*s%s", (int)len, text, a->pf.report);
        len = n < 0 ? 0 : (size_t)n > REPORT_TERMLOG_MAX ? REPORT_TERMLOG_MAX : (size_t)n;
        text = with;
    }
    /* lost console output is part of the story: the note goes last, the text yields room */
    char note[2560], *both = NULL;
    size_t nl = (size_t)snprintf(note, sizeof note, "%s%s", a->stacks.note, a->end.stuck);
    nl = nl < sizeof note ? nl : sizeof note - 1;
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
static void report_local(struct agent *a, bool details)
{
    worker_t *w = &a->wg.w[a->failed.lr];
    char errfile[PATH_MAX + 32];
    struct report_error e;
    const char *tail;
    size_t tl;
    int er = agent_record_inputs(a, a->failed.lr, errfile, sizeof errfile, &e, &tail, &tl);
    struct report_failure f = {
        .rank = a->rdzv.rank_base + a->failed.lr, .local_rank = a->failed.lr, .pid = w->pid,
        .wstatus = w->wstatus, .exec_errno = w->exec_errno, .time = w->exit_time,
        .host = a->id.host, .program = a->argv[0], .title = report_title(a),
        .error_file = errfile, .stderr_tail = tail,
        .stderr_tail_len = tl, .never_ran = w->pid <= 0, .reason = a->failed.why,
    };
    if (f.never_ran)   /* the failure's time is now */
        clock_gettime(CLOCK_REALTIME, &f.time);
    if (er == -EINVAL || er == -EFBIG)
        logs_message(&a->logs, "rank %d's error file %s is not torch's JSON; ignoring it",
                     f.rank, errfile);
    size_t cap = 16384;
    char *buf = malloc(cap);
    if (buf) {
        size_t n = details ? report_details(&f, er ? NULL : &e, buf, cap)
                           : report_format(&f, er ? NULL : &e, buf, cap);
        logs_text(&a->logs, 2, "report", buf, n);
        if (!a->failed.hang) {
            n = report_short(&f, er ? NULL : &e, buf, REPORT_TERMLOG_MAX + 1);
            agent_report_termlog(a, buf, n);
        }
        free(buf);
    }
    if (!er)
        report_error_free(&e);
}

/* The job's failure records and, after them, this node's workers that failed on their own
 * while the others were stopped and that the job's record lacks (their news came after its
 * decision): the report lists every one of them, as torchrun does. */
static void add_failed_alone(struct agent *a)
{
    for (int i = 0; i < a->wg.n && a->job.dn < RDZV_MAX_FAILURES; i++) {
        worker_t *w = &a->wg.w[i];
        bool known = false;
        if (!w->failed_alone || w->state != WORKER_EXITED)
            continue;
        for (int k = 0; k < a->job.dn && !known; k++)
            known = a->job.dfail[k].node_rank == a->rdzv.group_rank &&
                    a->job.dfail[k].rank == a->rdzv.rank_base + i;
        if (!known)
            agent_record_alone(a, w, &a->job.dfail[a->job.dn++]);
    }
}

/* The job's bad nodes (rdzv/badnodes.h) after its report: one line each. */
static void report_bad_nodes(struct agent *a)
{
    for (int i = 0; i < a->job.n_bad; i++) {
        if (!badnodes_is_bad(&a->job.bad[i], a->cfg->max_node_failures))
            continue;
        char line[RDZV_NAME_MAX + 200], d[RDZV_NAME_MAX + 160];
        badnodes_describe(&a->job.bad[i], d, sizeof d);
        int n = snprintf(line, sizeof line, "podrun: bad node: %s\n", d);
        logs_text(&a->logs, 2, "report", line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
    }
}

/* The job's failure report on stderr and in the termination log. The node whose worker is the
 * root cause also prints that worker's details (and its own short form goes to the log). */
static void report_job(struct agent *a)
{
    add_failed_alone(a);
    size_t cap = 16384;
    char *buf = malloc(cap);
    if (!buf)
        return;
    size_t n = report_job_format(a->job.dfail, a->job.dn, report_title(a), buf, cap);
    logs_text(&a->logs, 2, "report", buf, n);
    if (a->stacks.note[0])   /* where each rank was when the hang was found, and the file */
        logs_text(&a->logs, 2, "report", a->stacks.note, strlen(a->stacks.note));
    report_bad_nodes(a);
    bool mine =
        a->job.own == 0 && a->failed.lr >= 0 && a->job.dfail[0].rank >= 0 && !a->failed.hang;
    if (mine) {
        report_local(a, true);   /* details; the termination log gets the local short form */
        free(buf);
        return;
    }
    n = report_job_short(a->job.dfail, a->job.dn, buf, REPORT_TERMLOG_MAX + 1);
    agent_report_termlog(a, buf, n);
    free(buf);
}

/* A failure not to retry: the termination log says so first, then the job's root cause. */
static void report_fatal(struct agent *a, const rdzv_failure_t *f)
{
    char *buf = malloc(REPORT_TERMLOG_MAX + 1);
    if (!buf)
        return;
    int n = f->fatal == RDZV_FATAL_ASKED
                ? snprintf(buf, REPORT_TERMLOG_MAX + 1, "podrun: not to be retried: rank %d on "
                           "%s asked so (%s); every node exits %d\n", f->rank, f->node_name,
                           f->reason, a->exit_code)
                : snprintf(buf, REPORT_TERMLOG_MAX + 1, "podrun: not to be retried: rank %d on "
                           "%s exited with code %d, one of --fatal-exit-codes; every node exits "
                           "%d\n", f->rank, f->node_name,
                           f->signo > 0 ? 128 + f->signo : f->exit_code, a->exit_code);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len < REPORT_TERMLOG_MAX)
        len += report_job_short(a->job.dfail, a->job.dn, buf + len, REPORT_TERMLOG_MAX + 1 - len);
    agent_report_termlog(a, buf, len);
    free(buf);
}

/* How the job ended for this node, said once (EXITING): a signal, a check's verdict, the job's
 * decision (ff: its failure not to retry, or NULL), a lost job, or the job finished. */
void agent_report_end(struct agent *a, const rdzv_failure_t *ff)
{
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
        report_job(a);
        if (ff)
            report_fatal(a, ff);
        logs_message(&a->logs, "the job failed: %s%s; exit code %d", a->job.dreason,
                     !ff                              ? ""
                     : ff->fatal == RDZV_FATAL_ASKED ? " (a worker asked: not retried)"
                                                     : " (an exit code in --fatal-exit-codes: not retried)",
                     a->exit_code);
    } else if (a->job.lost && a->job.no_retry) {
        /* restarts without progress (doc/failures.md#restarts-that-make-no-progress) */
        int n = snprintf(msg, sizeof msg, "podrun: not to be retried: %s; exit code %d\n"
                         "podrun: the last attempt stopped for: %s\n", a->stop.why,
                         a->exit_code, a->job.dreason);
        agent_report_termlog(a, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        logs_message(&a->logs, "the job failed, not to be retried: %s; exit code %d", a->stop.why,
                     a->exit_code);
    } else if (a->job.lost) {
        /* the reason on the last line: it is the one a person and the termination log see */
        if (a->failed.lr >= 0)
            report_local(a, false);
        else {
            int n = snprintf(msg, sizeof msg, "podrun: this node lost the job: %s; exit code "
                             "%d\n", a->stop.why, a->exit_code);
            agent_report_termlog(a, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        }
        /* the same last line on stderr as every other ending */
        logs_message(&a->logs, "this node lost the job: %s; exit code %d", a->stop.why,
                     a->exit_code);
    } else if (a->job.finished) {
        bool job = a->rdzv.group_world_size > 1;
        int n = snprintf(msg, sizeof msg, "podrun: all %d workers%s exited 0\n",
                         job ? a->rdzv.world_size : a->n, job ? " of the job" : "");
        agent_report_termlog(a, msg, (size_t)n);
    }
}
