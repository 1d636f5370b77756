/* launcher/output/report.h — the failure report: torchrun's block on stderr, a short form for
 * Kubernetes' termination log (at most REPORT_TERMLOG_MAX bytes). Formatting is pure; reading
 * the worker's error file and writing the termination log are the only I/O. */
#ifndef PODRUN_LAUNCHER_REPORT_H
#define PODRUN_LAUNCHER_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "rdzv/rendezvous.h"

#define REPORT_TERMLOG_MAX 4096
#define REPORT_ERROR_FILE_MAX (1024 * 1024)

struct report_failure {
    int rank, local_rank;
    pid_t pid;
    int wstatus;              /* as from waitpid */
    int exec_errno;           /* the program could not be started */
    struct timespec time;     /* CLOCK_REALTIME */
    const char *host;
    const char *program;      /* what was exec'd, for exec errors (and the title without one) */
    const char *title;        /* the report's "<title> FAILED": the script, module or program */
    const char *error_file;   /* path given in TORCHELASTIC_ERROR_FILE, NULL if none */
    const char *stderr_tail;  /* last lines of its stderr */
    size_t stderr_tail_len;
    bool never_ran;           /* it was never started: no pid, no exit status; reason says why */
    const char *reason;       /* "could not start: ..." */
};

/* What torch's @record wrote into TORCHELASTIC_ERROR_FILE. Fields NULL when absent. */
struct report_error {
    char *message;            /* "RuntimeError: boom" */
    char *traceback;          /* extraInfo.py_callstack */
    char *timestamp;          /* extraInfo.timestamp (the flat form: the top level's), epoch
                               * seconds: when @record caught the exception */
};

/* 0, -ENOENT (no file: the worker did not write one), -EINVAL (not the expected JSON),
 * -EFBIG (over REPORT_ERROR_FILE_MAX). */
int report_read_error_file(const char *path, struct report_error *e);
/* The same from bytes in memory. */
int report_parse_error_json(const char *data, size_t len, struct report_error *e);
void report_error_free(struct report_error *e);

/* "SIGSEGV" (or "SIG42"). */
const char *report_signame(int sig, char *buf, size_t len);
/* "exit code 3", "signal SIGSEGV (11)", "cannot run 'x': No such file or directory"; for a
 * worker that never ran, its reason. */
void report_cause(const struct report_failure *f, char *buf, size_t len);

/* The torchrun-style block; its time is the error file's timestamp where there is one, as
 * torchrun's. Returns the length written (always NUL-terminated, truncated to
 * fit). `e` may be NULL. */
size_t report_format(const struct report_failure *f, const struct report_error *e, char *buf,
                     size_t len);
/* The termination-log text: who failed and why first, then the end of the traceback or of
 * stderr, in at most min(len-1, REPORT_TERMLOG_MAX) bytes. */
size_t report_short(const struct report_failure *f, const struct report_error *e, char *buf,
                    size_t len);

/* The job's end as every node prints it, from the stop decision's failure records (sorted by
 * time: f[0] is the root cause): torchrun's layout, the other failures first, then the root
 * cause. Only record fields are used, so every node prints the same text. */
size_t report_job_format(const rdzv_failure_t *f, int n, const char *title, char *buf,
                         size_t len);
/* Termination-log form of the same: the root cause first, then a count of the others. */
size_t report_job_short(const rdzv_failure_t *f, int n, char *buf, size_t len);
/* What this node knows beyond the record about its own failed worker: error file, traceback,
 * the end of its stderr. Printed after the job block on the node whose worker failed. */
size_t report_details(const struct report_failure *f, const struct report_error *e, char *buf,
                      size_t len);

/* Writes text (cut to REPORT_TERMLOG_MAX) to path. create=false: only if the file exists and
 * is writable (/dev/termination-log outside Kubernetes is left alone). 0 or negative errno. */
int report_write_termlog(const char *path, bool create, const char *text, size_t len);

/* The worker's own words for its failure record: its error file's message (or traceback) when
 * e is given, else the last lines of its stderr that fit in cap, whole lines where possible. */
void report_failure_message(const struct report_error *e, const char *tail, size_t tl, char *out,
                            size_t cap);

#endif
