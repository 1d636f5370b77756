/* The failure report: torchrun's fields, the error file's message and traceback, the
 * termination log's 4096-byte bound. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "report.h"

static const char *ERROR_JSON =
    "{\"message\": {\"message\": \"RuntimeError: boom\", \"extraInfo\": {\"py_callstack\": "
    "\"Traceback (most recent call last):\\n  File \\\"t.py\\\", line 3, in f\\n    raise "
    "RuntimeError('boom')\\nRuntimeError: boom\\n\", \"timestamp\": \"1763700000\"}}}";

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
    CHECK_EQ_STR(e.timestamp, "1763700000");
    report_error_free(&e);
    const char *old = "{\"message\": \"plain text\"}";
    CHECK_EQ_INT(report_parse_error_json(old, strlen(old), &e), 0);
    CHECK_EQ_STR(e.message, "plain text");
    CHECK(e.traceback == NULL);
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

int main(void)
{
    RUN(test_parse_error_file);
    RUN(test_format_exit_code);
    RUN(test_format_signal);
    RUN(test_format_truncates_safely);
    RUN(test_short_fits_termination_log);
    return check_result();
}
