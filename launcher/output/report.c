/* launcher/output/report.c — turning the first worker failure into words an operator can act on.
 *
 * The block follows torchrun's ChildFailedError layout (reference: torch.md §2.7) so people and
 * log scrapers that know it find the same fields; podrun adds the cause in words and the last
 * lines of the worker's stderr, which is where the reason is when the worker wrote no error
 * file. The termination-log form puts the identity and the cause first, because Kubernetes
 * keeps only the first 4096 bytes. */
#include "launcher/output/report.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdzv/base/text.h"

#define RULE "============================================================\n"
#define THIN "------------------------------------------------------------\n"

/* Linux's signal names; a table rather than glibc's sigabbrev_np, which needs glibc 2.32 and
 * podrun's one-file build runs on 2.31. */
static const char *const signames[] = {
    [SIGHUP] = "HUP",       [SIGINT] = "INT",       [SIGQUIT] = "QUIT",   [SIGILL] = "ILL",
    [SIGTRAP] = "TRAP",     [SIGABRT] = "ABRT",     [SIGBUS] = "BUS",     [SIGFPE] = "FPE",
    [SIGKILL] = "KILL",     [SIGUSR1] = "USR1",     [SIGSEGV] = "SEGV",   [SIGUSR2] = "USR2",
    [SIGPIPE] = "PIPE",     [SIGALRM] = "ALRM",     [SIGTERM] = "TERM",   [SIGSTKFLT] = "STKFLT",
    [SIGCHLD] = "CHLD",     [SIGCONT] = "CONT",     [SIGSTOP] = "STOP",   [SIGTSTP] = "TSTP",
    [SIGTTIN] = "TTIN",     [SIGTTOU] = "TTOU",     [SIGURG] = "URG",     [SIGXCPU] = "XCPU",
    [SIGXFSZ] = "XFSZ",     [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",   [SIGWINCH] = "WINCH",
    [SIGIO] = "IO",         [SIGPWR] = "PWR",       [SIGSYS] = "SYS",
};

const char *report_signame(int sig, char *buf, size_t len)
{
    if (sig > 0 && (size_t)sig < sizeof signames / sizeof *signames && signames[sig])
        snprintf(buf, len, "SIG%s", signames[sig]);
    else
        snprintf(buf, len, "SIG%d", sig);
    return buf;
}

void report_cause(const struct report_failure *f, char *buf, size_t len)
{
    char sn[32];
    if (f->never_ran)
        snprintf(buf, len, "%s", f->reason ? f->reason : "it never ran");
    else if (f->exec_errno)
        snprintf(buf, len, "cannot run '%s': %s (exit code %d)", f->program ? f->program : "?",
                 strerror(f->exec_errno), WIFEXITED(f->wstatus) ? WEXITSTATUS(f->wstatus) : 127);
    else if (WIFSIGNALED(f->wstatus))
        snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(f->wstatus),
                 report_signame(WTERMSIG(f->wstatus), sn, sizeof sn),
                 WCOREDUMP(f->wstatus) ? ", core dumped" : "");
    else
        snprintf(buf, len, "exit code %d", WEXITSTATUS(f->wstatus));
}

static char *dup_json_str(json_t *v)
{
    const char *s = json_string_value(v);
    return s ? strdup(s) : NULL;
}

/* torch writes the time as a string of epoch seconds; an integer is taken as well */
static void put_timestamp(json_t *ts, struct report_error *e)
{
    if (json_is_string(ts))
        e->timestamp = dup_json_str(ts);
    else if (json_is_integer(ts) && (e->timestamp = malloc(32)))
        snprintf(e->timestamp, 32, "%lld", (long long)json_integer_value(ts));
}

int report_parse_error_json(const char *data, size_t len, struct report_error *e)
{
    memset(e, 0, sizeof *e);
    json_error_t jerr;
    json_t *root = json_loadb(data, len, 0, &jerr);
    if (!root)
        return -EINVAL;
    json_t *msg = json_object_get(root, "message");
    int r = 0;
    if (json_is_string(msg)) {
        /* the flat form a nested launcher or an ErrorHandler subclass may write: torch reads
         * its time from the top level */
        e->message = dup_json_str(msg);
        put_timestamp(json_object_get(root, "timestamp"), e);
    } else if (json_is_object(msg)) {
        e->message = dup_json_str(json_object_get(msg, "message"));
        json_t *extra = json_object_get(msg, "extraInfo");
        if (json_is_object(extra)) {
            e->traceback = dup_json_str(json_object_get(extra, "py_callstack"));
            put_timestamp(json_object_get(extra, "timestamp"), e);
        }
    } else {
        r = -EINVAL;
    }
    json_decref(root);
    if (!r && !e->message && !e->traceback)
        r = -EINVAL;
    if (r)
        report_error_free(e);
    return r;
}

int report_read_error_file(const char *path, struct report_error *e)
{
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (sb.st_size > REPORT_ERROR_FILE_MAX) {
        close(fd);
        return -EFBIG;
    }
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    while (n < cap - 1) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    int r = report_parse_error_json(buf, n, e);
    free(buf);
    return r;
}

void report_error_free(struct report_error *e)
{
    free(e->message);
    free(e->traceback);
    free(e->timestamp);
    memset(e, 0, sizeof *e);
}

/* Each line of text, indented, the first after `first`. */
static void put_lines(textbuf_t *o, const char *first, const char *indent, const char *text,
                      size_t len)
{
    const char *p = text, *end = text + len;
    bool firstline = true;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        text_printf(o, "%s%.*s\n", firstline ? first : indent, (int)n, p);
        firstline = false;
        p += n + (nl ? 1 : 0);
    }
}

static void format_time(const struct timespec *t, char *buf, size_t len)
{
    struct tm tm;
    time_t s = t->tv_sec;
    localtime_r(&s, &tm);
    strftime(buf, len, "%Y-%m-%d_%H:%M:%S", &tm);
}

/* When @record caught the exception: the error file's timestamp (whole epoch seconds, as
 * torch's ErrorHandler writes it), in the report's time format. false when there is none, or
 * it is not such a number. */
static bool error_time(const struct report_error *e, char *buf, size_t len)
{
    if (!e || !e->timestamp || !*e->timestamp)
        return false;
    char *end;
    errno = 0;
    long long s = strtoll(e->timestamp, &end, 10);
    if (errno || *end || s < 0 || s > 100000000000LL)   /* past the year 5000: not a time */
        return false;
    struct timespec t = {(time_t)s, 0};
    format_time(&t, buf, len);
    return true;
}

size_t report_format(const struct report_failure *f, const struct report_error *e, char *buf,
                     size_t len)
{
    textbuf_t o = text_start(buf, len);
    char when[64], cause[512], sn[32];
    /* torchrun's `time` is the error file's when there is one, else when the exit was seen */
    if (!error_time(e, when, sizeof when))
        format_time(&f->time, when, sizeof when);
    report_cause(f, cause, sizeof cause);
    text_printf(&o, RULE "%s FAILED\n" THIN "Failures:\n  <NO_OTHER_FAILURES>\n" THIN
            "Root Cause (first observed failure):\n[0]:\n",
        f->title ? f->title : f->program ? f->program : "job");
    text_printf(&o, "  time      : %s\n", when);
    text_printf(&o, "  host      : %s\n", f->host ? f->host : "?");
    text_printf(&o, "  rank      : %d (local_rank: %d)\n", f->rank, f->local_rank);
    if (f->never_ran)
        text_printf(&o, "  exitcode  : <N/A> (it never ran)\n");
    else if (WIFSIGNALED(f->wstatus))
        text_printf(&o, "  exitcode  : -%d (pid: %d)\n", WTERMSIG(f->wstatus), (int)f->pid);
    else
        text_printf(&o, "  exitcode  : %d (pid: %d)\n", WEXITSTATUS(f->wstatus), (int)f->pid);
    text_printf(&o, "  cause     : %s\n", cause);
    text_printf(&o, "  error_file: %s\n", e && f->error_file ? f->error_file : "<N/A>");
    if (e && e->message)
        put_lines(&o, "  message   : ", "              ", e->message, strlen(e->message));
    if (e && e->traceback)
        put_lines(&o, "  traceback : ", "    ", e->traceback, strlen(e->traceback));
    else if (f->never_ran)
        text_printf(&o, "  traceback : <N/A>\n");
    else if (WIFSIGNALED(f->wstatus))
        text_printf(&o, "  traceback : Signal %d (%s) received by PID %d\n", WTERMSIG(f->wstatus),
            report_signame(WTERMSIG(f->wstatus), sn, sizeof sn), (int)f->pid);
    else
        text_printf(&o, "  traceback : To enable traceback see: "
                "https://pytorch.org/docs/stable/elastic/errors.html\n");
    if (f->stderr_tail && f->stderr_tail_len)
        put_lines(&o, "  stderr    : ", "    ", f->stderr_tail, f->stderr_tail_len);
    text_printf(&o, RULE);
    return o.len;
}

/* The last `budget` bytes of text, starting at a line boundary when one is near. */
static const char *tail_of(const char *text, size_t len, size_t budget, size_t *out_len)
{
    if (len <= budget) {
        *out_len = len;
        return text;
    }
    const char *p = text + len - budget;
    const char *nl = memchr(p, '\n', budget);
    if (nl && (size_t)(nl - p) < budget / 2)
        p = nl + 1;
    *out_len = (size_t)(text + len - p);
    return p;
}

size_t report_short(const struct report_failure *f, const struct report_error *e, char *buf,
                    size_t len)
{
    if (len > REPORT_TERMLOG_MAX + 1)
        len = REPORT_TERMLOG_MAX + 1;
    textbuf_t o = text_start(buf, len);
    char when[64], cause[512];
    format_time(&f->time, when, sizeof when);
    report_cause(f, cause, sizeof cause);
    char pid[32] = "";
    if (!f->never_ran)
        snprintf(pid, sizeof pid, ", pid %d", (int)f->pid);
    text_printf(&o, "podrun: rank %d (local_rank %d%s) on %s failed at %s: %s\n", f->rank,
        f->local_rank, pid, f->host ? f->host : "?", when, cause);
    if (e && e->message)
        text_printf(&o, "%.1024s\n", e->message);
    if (error_time(e, when, sizeof when))
        text_printf(&o, "raised at %s (the error file's timestamp)\n", when);
    const char *text = NULL;
    size_t tlen = 0;
    if (e && e->traceback) {
        text = e->traceback;
        tlen = strlen(text);
    } else if (f->stderr_tail) {
        text = f->stderr_tail;
        tlen = f->stderr_tail_len;
    }
    if (text && o.len + 2 < o.cap) {
        size_t n;
        const char *t = tail_of(text, tlen, o.cap - o.len - 2, &n);
        text_printf(&o, "%.*s", (int)n, t);
        if (o.len && buf[o.len - 1] != '\n')
            text_printf(&o, "\n");
    }
    return o.len;
}

static void format_epoch(double t, char *buf, size_t len)
{
    struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
    format_time(&ts, buf, len);
}

static void put_record(textbuf_t *o, int idx, const rdzv_failure_t *f)
{
    char when[64], sn[32];
    format_epoch(f->time, when, sizeof when);
    text_printf(o, "[%d]:\n", idx);
    text_printf(o, "  time      : %s\n", when);
    text_printf(o, "  host      : %s\n", f->host[0] ? f->host : "?");
    text_printf(o, "  node      : %s (node rank %d)\n", f->node_name[0] ? f->node_name : "?",
        f->node_rank);
    if (f->rank >= 0)
        text_printf(o, "  rank      : %d (local_rank: %d)\n", f->rank, f->local_rank);
    else
        text_printf(o, "  rank      : <N/A> (the node itself)\n");
    if (f->signo > 0)
        text_printf(o, "  exitcode  : -%d (%s)\n", f->signo,
                    report_signame(f->signo, sn, sizeof sn));
    else if (f->exit_code >= 0)
        text_printf(o, "  exitcode  : %d\n", f->exit_code);
    else
        text_printf(o, "  exitcode  : <N/A>\n");
    text_printf(o, "  reason    : %s\n", f->reason[0] ? f->reason : "?");
    if (f->message[0])
        put_lines(o, "  message   : ", "              ", f->message, strlen(f->message));
}

size_t report_job_format(const rdzv_failure_t *f, int n, const char *title, char *buf,
                         size_t len)
{
    textbuf_t o = text_start(buf, len);
    text_printf(&o, RULE "%s FAILED\n" THIN "Failures:\n", title ? title : "job");
    if (n <= 1)
        text_printf(&o, "  <NO_OTHER_FAILURES>\n");
    for (int i = 1; i < n; i++)
        put_record(&o, i, &f[i]);
    text_printf(&o, THIN "Root Cause (first observed failure):\n");
    if (n > 0)
        put_record(&o, 0, &f[0]);
    else
        text_printf(&o, "  <NONE>\n");
    text_printf(&o, RULE);
    return o.len;
}

size_t report_job_short(const rdzv_failure_t *f, int n, char *buf, size_t len)
{
    if (len > REPORT_TERMLOG_MAX + 1)
        len = REPORT_TERMLOG_MAX + 1;
    textbuf_t o = text_start(buf, len);
    if (n <= 0)
        return 0;
    char when[64], who[96];
    format_epoch(f[0].time, when, sizeof when);
    if (f[0].rank >= 0)
        snprintf(who, sizeof who, "rank %d (local_rank %d)", f[0].rank, f[0].local_rank);
    else
        snprintf(who, sizeof who, "the agent");
    text_printf(&o, "podrun: job stopped: %s on %s (node %s, node rank %d) failed at %s: %s\n", who,
        f[0].host, f[0].node_name, f[0].node_rank, when, f[0].reason);
    if (f[0].message[0])
        text_printf(&o, "%s\n", f[0].message);
    if (n > 1)
        text_printf(&o, "%d other failure%s after it, first: %s on %s: %s\n", n - 1,
            n == 2 ? "" : "s", f[1].rank >= 0 ? "a worker" : "an agent", f[1].host, f[1].reason);
    return o.len;
}

size_t report_details(const struct report_failure *f, const struct report_error *e, char *buf,
                      size_t len)
{
    textbuf_t o = text_start(buf, len);
    char cause[512];
    report_cause(f, cause, sizeof cause);
    char pid[32] = "";
    if (!f->never_ran)
        snprintf(pid, sizeof pid, ", pid: %d", (int)f->pid);
    text_printf(&o, "Root cause details on this node: rank %d (local_rank: %d%s): %s\n",
        f->rank, f->local_rank, pid, cause);
    text_printf(&o, "  error_file: %s\n", e && f->error_file ? f->error_file : "<N/A>");
    char when[64];
    if (error_time(e, when, sizeof when))
        text_printf(&o, "  time      : %s (the error file's timestamp)\n", when);
    if (e && e->traceback)
        put_lines(&o, "  traceback : ", "    ", e->traceback, strlen(e->traceback));
    if (f->stderr_tail && f->stderr_tail_len)
        put_lines(&o, "  stderr    : ", "    ", f->stderr_tail, f->stderr_tail_len);
    text_printf(&o, RULE);
    return o.len;
}

int report_write_termlog(const char *path, bool create, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY | (create ? O_CREAT : 0), 0644);
    if (fd < 0)
        return -errno;
    if (len > REPORT_TERMLOG_MAX)
        len = REPORT_TERMLOG_MAX;
    size_t off = 0;
    int r = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : -EIO;
            break;
        }
        off += (size_t)n;
    }
    if (close(fd) < 0 && !r)
        r = -errno;
    return r;
}

void report_failure_message(const struct report_error *e, const char *tail, size_t tl, char *out,
                            size_t cap)
{
    out[0] = 0;
    if (e) {
        snprintf(out, cap, "%s", e->message ? e->message : e->traceback ? e->traceback : "");
        return;
    }
    if (!tail || !tl)
        return;
    /* the last few lines that fit, whole where possible */
    size_t keep = tl < cap - 1 ? tl : cap - 1;
    const char *p = tail + tl - keep;
    if (keep < tl) {
        const char *nl = memchr(p, '\n', keep);
        if (nl && nl + 1 < tail + tl)
            p = nl + 1;
    }
    size_t n = (size_t)(tail + tl - p);
    while (n && p[n - 1] == '\n')
        n--;
    memcpy(out, p, n);
    out[n] = 0;
}
