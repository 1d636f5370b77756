/* The failure report: torchrun's fields, the error file's message and traceback, the
 * termination log's 4096-byte bound. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/output/report.h"

static const char *ERROR_JSON =
    "{\"message\": {\"message\": \"RuntimeError: boom\", \"extraInfo\": {\"py_callstack\": "
    "\"Traceback (most recent call last):\\n  File \\\"t.py\\\", line 3, in f\\n    raise "
    "RuntimeError('boom')\\nRuntimeError: boom\\n\", \"timestamp\": \"1763699990\"}}}";

/* t in the report's time format (local time, as torchrun's) */
static const char *when(time_t t, char *buf, size_t len)
{
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d_%H:%M:%S", &tm);
    return buf;
}

static struct report_failure failure(int wstatus)
{
    struct report_failure f = {.rank = 5, .local_rank = 1, .pid = 4242, .wstatus = wstatus,
                               .time = {1763700000, 0}, .host = "node-1", .program = "train.py",
                               .error_file = "/x/error.json", .stderr_tail = "warn\nlast words\n",
                               .stderr_tail_len = 16};
    return f;
}

static void test_parse_error_file(void)
{
    struct report_error e;
    CHECK_EQ_INT(report_parse_error_json(ERROR_JSON, strlen(ERROR_JSON), &e), 0);
    CHECK_EQ_STR(e.message, "RuntimeError: boom");
    CHECK(e.traceback && strstr(e.traceback, "line 3, in f"));
    CHECK_EQ_STR(e.timestamp, "1763699990");
    report_error_free(&e);
    const char *old = "{\"message\": \"plain text\"}";
    CHECK_EQ_INT(report_parse_error_json(old, strlen(old), &e), 0);
    CHECK_EQ_STR(e.message, "plain text");
    CHECK(e.traceback == NULL);
    CHECK(e.timestamp == NULL);
    report_error_free(&e);
    /* the flat form keeps its time at the top level (torch's ProcessFailure reads it there) */
    const char *flat = "{\"message\": \"plain text\", \"timestamp\": 1763699991}";
    CHECK_EQ_INT(report_parse_error_json(flat, strlen(flat), &e), 0);
    CHECK_EQ_STR(e.timestamp, "1763699991");
    report_error_free(&e);
    CHECK_EQ_INT(report_parse_error_json("{\"x\":1}", 7, &e), -22);
    CHECK_EQ_INT(report_parse_error_json("{not json", 9, &e), -22);
    CHECK_EQ_INT(report_parse_error_json("[]", 2, &e), -22);
    CHECK_EQ_INT(report_read_error_file("/nonexistent/error.json", &e), -2);
}

static void test_format_exit_code(void)
{
    char buf[4096];
    struct report_failure f = failure(3 << 8);
    struct report_error e;
    report_parse_error_json(ERROR_JSON, strlen(ERROR_JSON), &e);
    size_t n = report_format(&f, &e, buf, sizeof buf);
    CHECK_EQ_INT(n, strlen(buf));
    CHECK(strstr(buf, "train.py FAILED\n"));
    CHECK(strstr(buf, "Root Cause (first observed failure):\n[0]:\n"));
    CHECK(strstr(buf, "  host      : node-1\n"));
    CHECK(strstr(buf, "  rank      : 5 (local_rank: 1)\n"));
    CHECK(strstr(buf, "  exitcode  : 3 (pid: 4242)\n"));
    CHECK(strstr(buf, "  error_file: /x/error.json\n"));
    CHECK(strstr(buf, "  message   : RuntimeError: boom\n"));
    CHECK(strstr(buf, "  traceback : Traceback (most recent call last):\n      File \"t.py\""));
    CHECK(strstr(buf, "  stderr    : warn\n    last words\n"));
    /* torchrun's `time` is when @record caught the exception, not when the exit was seen */
    char t[64], line[160];
    snprintf(line, sizeof line, "  time      : %s\n", when(1763699990, t, sizeof t));
    CHECK(strstr(buf, line));
    report_details(&f, &e, buf, sizeof buf);
    snprintf(line, sizeof line, "  time      : %s (the error file's timestamp)\n", t);
    CHECK(strstr(buf, line));
    report_short(&f, &e, buf, sizeof buf);
    snprintf(line, sizeof line, "\nraised at %s (the error file's timestamp)\n", t);
    CHECK(strstr(buf, line));
    /* without a usable timestamp: the exit's time, and no line for it */
    static const char *const bad[] = {"", "soon", "-5", "99999999999999", "12x"};
    free(e.timestamp);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e.timestamp = (char *)bad[i];
        report_format(&f, &e, buf, sizeof buf);
        snprintf(line, sizeof line, "  time      : %s\n", when(1763700000, t, sizeof t));
        CHECK(strstr(buf, line));
        report_short(&f, &e, buf, sizeof buf);
        CHECK(!strstr(buf, "raised at"));
    }
    e.timestamp = NULL;
    report_error_free(&e);
}

static void test_format_signal(void)
{
    char buf[4096], cause[128];
    struct report_failure f = failure(SIGSEGV);
    report_format(&f, NULL, buf, sizeof buf);
    CHECK(strstr(buf, "  exitcode  : -11 (pid: 4242)\n"));
    CHECK(strstr(buf, "Signal 11 (SIGSEGV) received by PID 4242"));
    CHECK(strstr(buf, "  error_file: <N/A>\n"));
    report_cause(&f, cause, sizeof cause);
    CHECK_EQ_STR(cause, "killed by signal 11 (SIGSEGV)");
    f.wstatus = 127 << 8;
    f.exec_errno = 2;
    report_cause(&f, cause, sizeof cause);
    CHECK_EQ_STR(cause, "cannot run 'train.py': No such file or directory (exit code 127)");
}

static void test_format_truncates_safely(void)
{
    char small[100];
    struct report_failure f = failure(1 << 8);
    size_t n = report_format(&f, NULL, small, sizeof small);
    CHECK(n < sizeof small);
    CHECK_EQ_INT(strlen(small), n);
}

static void test_short_fits_termination_log(void)
{
    char *tb = malloc(20000);
    memset(tb, 'x', 19999);
    for (int i = 80; i < 19999; i += 81)
        tb[i] = '\n';
    memcpy(tb + 19999 - 9, "THE END\n", 8);
    tb[19999] = 0;
    struct report_error e = {strdup("ValueError: bad"), tb, NULL};
    struct report_failure f = failure(1 << 8);
    char buf[8192];
    size_t n = report_short(&f, &e, buf, sizeof buf);
    CHECK(n <= REPORT_TERMLOG_MAX);
    CHECK_EQ_INT(strlen(buf), n);
    const char *head = "podrun: rank 5 (local_rank 1, pid 4242) on node-1 failed at ";
    CHECK(!strncmp(buf, head, strlen(head)));
    CHECK(strstr(buf, "exit code 1\nValueError: bad\n"));
    CHECK(strstr(buf, "THE END\n"));       /* the end of the traceback is what is kept */
    report_error_free(&e);

    char path[] = "/tmp/podrun-termlog-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char big[10000];
    memset(big, 'y', sizeof big);
    CHECK_EQ_INT(report_write_termlog(path, false, big, sizeof big), 0);
    FILE *fp = fopen(path, "r");
    char back[8192];
    size_t got = fp ? fread(back, 1, sizeof back, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK_EQ_INT(got, REPORT_TERMLOG_MAX);
    unlink(path);
    CHECK(report_write_termlog(path, false, "x", 1) < 0);   /* not created when absent */
    CHECK_EQ_INT(report_write_termlog(path, true, "x", 1), 0);
    unlink(path);
}

static void test_job_report_same_root_cause(void)
{
    rdzv_failure_t f[2];
    memset(f, 0, sizeof f);
    f[0].exit_code = f[1].exit_code = -1;
    f[1].rank = f[1].local_rank = -1;
    snprintf(f[0].host, sizeof f[0].host, "10.0.0.4");
    snprintf(f[0].node_name, sizeof f[0].node_name, "worker-2");
    f[0].node_rank = 2;
    f[0].rank = 5;
    f[0].local_rank = 1;
    f[0].signo = 11;
    f[0].time = 1700000000.5;
    snprintf(f[0].reason, sizeof f[0].reason, "killed by signal 11 (SIGSEGV)");
    snprintf(f[0].message, sizeof f[0].message, "line one\nline two");
    snprintf(f[1].host, sizeof f[1].host, "10.0.0.5");
    snprintf(f[1].node_name, sizeof f[1].node_name, "worker-3");
    f[1].node_rank = 3;
    f[1].time = 1700000001;
    snprintf(f[1].reason, sizeof f[1].reason, "agent lost: connection closed");
    char a[4096], b[4096];
    report_job_format(f, 2, "train.py", a, sizeof a);
    report_job_format(f, 2, "train.py", b, sizeof b);
    CHECK_EQ_STR(a, b);   /* only record fields: every node prints the same */
    const char *root = strstr(a, "Root Cause");
    CHECK(root != NULL);
    CHECK(strstr(root, "  host      : 10.0.0.4\n") != NULL);
    CHECK(strstr(root, "  node      : worker-2 (node rank 2)\n") != NULL);
    CHECK(strstr(root, "  rank      : 5 (local_rank: 1)\n") != NULL);
    CHECK(strstr(root, "  exitcode  : -11 (SIGSEGV)\n") != NULL);
    CHECK(strstr(root, "  message   : line one\n              line two\n") != NULL);
    const char *other = strstr(a, "[1]:");
    CHECK(other != NULL && other < root);   /* the others first, torchrun's order */
    CHECK(strstr(a, "  rank      : <N/A> (the node itself)\n") != NULL);
    size_t n = report_job_short(f, 2, b, sizeof b);
    CHECK(n > 0 && n <= REPORT_TERMLOG_MAX);
    CHECK(strncmp(b, "podrun: job stopped: rank 5 (local_rank 1) on 10.0.0.4 (node worker-2, "
                     "node rank 2)", 82) == 0);
    CHECK(strstr(b, "1 other failure after it") != NULL);
    /* a tiny buffer is cut, never overrun */
    char tiny[16];
    report_job_format(f, 2, "train.py", tiny, sizeof tiny);
    CHECK(strlen(tiny) < sizeof tiny);
}

static void test_failure_message(void)
{
    char out[32];
    struct report_error e = {0};
    e.message = "ValueError: bad input";
    report_failure_message(&e, "ignored\n", 8, out, sizeof out);
    CHECK_EQ_STR(out, "ValueError: bad input");      /* the error file first */
    const char *tail = "line one\nline two\nline three is long\n";
    report_failure_message(NULL, tail, strlen(tail), out, sizeof out);
    CHECK_EQ_STR(out, "line two\nline three is long"); /* whole lines that fit */
    report_failure_message(NULL, NULL, 0, out, sizeof out);
    CHECK_EQ_STR(out, "");
}

/* A worker that never ran (its run directory could not be made) has no pid and no exit status:
 * no line of any form gives it one, and each says why it did not run. */
static void test_never_ran(void)
{
    struct report_failure f = {.rank = 0, .local_rank = 0, .time = {1763700000, 0},
                               .host = "node-1", .program = "true", .title = "true",
                               .never_ran = true, .reason = "could not start: No such file or directory"};
    char buf[4096];
    report_details(&f, NULL, buf, sizeof buf);
    CHECK_EQ_STR(buf, "Root cause details on this node: rank 0 (local_rank: 0): could not start: "
                      "No such file or directory\n"
                      "  error_file: <N/A>\n"
                      "============================================================\n");
    report_short(&f, NULL, buf, sizeof buf);
    const char *head = "podrun: rank 0 (local_rank 0) on node-1 failed at ";
    CHECK(strncmp(buf, head, strlen(head)) == 0);
    CHECK(strstr(buf, ": could not start: No such file or directory\n") != NULL);
    report_format(&f, NULL, buf, sizeof buf);
    CHECK(strstr(buf, "  exitcode  : <N/A> (it never ran)\n"
                      "  cause     : could not start: No such file or directory\n") != NULL);
    CHECK(strstr(buf, "  traceback : <N/A>\n") != NULL);
    CHECK(strstr(buf, "pid") == NULL && strstr(buf, "exit code") == NULL);
}

int main(void)
{
    RUN(test_failure_message);
    RUN(test_never_ran);
    RUN(test_parse_error_file);
    RUN(test_format_exit_code);
    RUN(test_format_signal);
    RUN(test_format_truncates_safely);
    RUN(test_short_fits_termination_log);
    RUN(test_job_report_same_root_cause);
    return check_result();
}
