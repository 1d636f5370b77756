/* tests/unit/launcher/test_timers.c — torch's file-based timer requests as FileTimerClient writes
 * them, malformed ones refused with a reason, and the table of timers: set, reset, release, a
 * dead rank's timers dropped, and which timer of an expired pid is the one acted on. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/watch/timers.h"

#define P(s, r) timers_parse(s, strlen(s), r, why, sizeof why)

static char why[64];

static void test_parse_torch_request(void)
{
    struct timer_req r;
    /* FileTimerRequest.to_json(), byte for byte */
    CHECK_EQ_INT(P("{\"version\": 1, \"pid\": 4242, \"scope_id\": \"/x/train.py#17\", "
                   "\"expiration_time\": 1790000001.5, \"signal\": 9}", &r), 0);
    CHECK_EQ_INT(r.pid, 4242);
    CHECK_EQ_STR(r.scope, "/x/train.py#17");
    CHECK(r.expiration == 1790000001.5);
    CHECK_EQ_INT(r.signo, 9);
    /* release(): expiration -1, signal 0 */
    CHECK_EQ_INT(P("{\"version\": 1, \"pid\": 4242, \"scope_id\": \"s\", \"expiration_time\": -1,"
                   " \"signal\": 0}", &r), 0);
    CHECK(r.expiration < 0);
    CHECK_EQ_INT(r.signo, 0);
    /* an integer expiration, a negative signal (torch: "will not kill") */
    CHECK_EQ_INT(P("{\"pid\": 7, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": -3}",
                   &r), 0);
    CHECK_EQ_INT(r.signo, 0);
}

static void test_parse_malformed(void)
{
    struct timer_req r;
    const char *bad[] = {
        "", "not json", "{", "[1,2]", "null", "{\"pid\": 1}",
        "{\"pid\": \"1\", \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": 0, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": -5, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": 99999999999, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": 1.5, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": 1, \"scope_id\": 3, \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": \"soon\", \"signal\": 9}",
        "{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9.5}",
        "{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 65}",
        "{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1}",
        "{\"pid\": 1, \"pid\": 2, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
        "{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9} trailing",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        int rc = P(bad[i], &r);
        if (rc != -EINVAL)
            fprintf(stderr, "accepted: %s\n", bad[i]);
        CHECK_EQ_INT(rc, -EINVAL);
        CHECK(why[0] != 0);
    }
    CHECK_EQ_INT(P("garbage", &r), -EINVAL);
    CHECK_EQ_STR(why, "not JSON");
    /* bytes that are not text, and a NUL inside: no read past len, no crash */
    const char bin[] = "{\"pid\": 1,\0\xff\xfe}";
    CHECK_EQ_INT(timers_parse(bin, sizeof bin - 1, &r, why, sizeof why), -EINVAL);
    /* longer than PIPE_BUF: refused before parsing */
    static char big[TIMERS_LINE_MAX + 2];
    memset(big, ' ', sizeof big);
    CHECK_EQ_INT(timers_parse(big, sizeof big, &r, why, sizeof why), -EINVAL);
}

static void test_scope_is_cut_and_one_line(void)
{
    static char line[TIMERS_LINE_MAX];
    char scope[1500];
    memset(scope, 'a', sizeof scope - 1);
    scope[sizeof scope - 1] = 0;
    snprintf(line, sizeof line, "{\"pid\": 1, \"scope_id\": \"%s\\nb\", \"expiration_time\": 1,"
             " \"signal\": 9}", scope);
    struct timer_req r;
    CHECK_EQ_INT(P(line, &r), 0);
    CHECK_EQ_INT(strlen(r.scope), TIMERS_SCOPE_MAX - 1);
    CHECK(strchr(r.scope, '\n') == NULL);
    CHECK_EQ_INT(P("{\"pid\": 1, \"scope_id\": \"a\\nb\", \"expiration_time\": 1, \"signal\": 9}",
                   &r), 0);
    CHECK_EQ_STR(r.scope, "a b");
}

static struct timer_req req(pid_t pid, const char *scope, double exp, int sig)
{
    struct timer_req r = {.pid = pid, .expiration = exp, .signo = sig};
    snprintf(r.scope, sizeof r.scope, "%s", scope);
    return r;
}

static void test_table(void)
{
    struct timer_table t;
    struct timer_entry e;
    timers_table_init(&t);
    CHECK(timers_next(&t) < 0);
    struct timer_req a = req(10, "step", 105, 9), b = req(11, "load", 103, 9);
    CHECK_EQ_INT(timers_apply(&t, &a, 0, 100), 0);
    CHECK_EQ_INT(timers_apply(&t, &b, 1, 100), 0);
    CHECK(timers_next(&t) == 103);
    /* the same (pid, scope) again resets it */
    b.expiration = 108;
    CHECK_EQ_INT(timers_apply(&t, &b, 1, 101), 0);
    CHECK_EQ_INT(t.n, 2);
    CHECK(timers_next(&t) == 105);
    CHECK_EQ_INT(timers_take_expired(&t, 104, &e), 0);
    CHECK_EQ_INT(timers_take_expired(&t, 105, &e), 1);
    CHECK_EQ_INT(e.pid, 10);
    CHECK_EQ_INT(e.lr, 0);
    CHECK(e.expiration - e.acquired == 5);
    CHECK_EQ_INT(t.n, 1);
    /* a release drops it; releasing what is not held is nothing */
    struct timer_req rel = req(11, "load", -1, 0);
    CHECK_EQ_INT(timers_apply(&t, &rel, -1, 102), 0);
    CHECK_EQ_INT(timers_apply(&t, &rel, -1, 102), 0);
    CHECK_EQ_INT(t.n, 0);
    CHECK(timers_next(&t) < 0);
    timers_table_free(&t);
}

static void test_expired_pid_picks_signal_and_drops_all(void)
{
    struct timer_table t;
    struct timer_entry e;
    timers_table_init(&t);
    struct timer_req r1 = req(20, "a", 101, 0), r2 = req(20, "b", 102, 15),
                     r3 = req(20, "c", 109, 9), r4 = req(21, "d", 150, 9);
    timers_apply(&t, &r1, 2, 100);
    timers_apply(&t, &r2, 2, 100);
    timers_apply(&t, &r3, 2, 100);
    timers_apply(&t, &r4, 3, 100);
    /* at 103: pid 20's a (no signal) and b (SIGTERM) expired; b is the one acted on, and all of
     * pid 20's timers go, c too */
    CHECK_EQ_INT(timers_take_expired(&t, 103, &e), 1);
    CHECK_EQ_STR(e.scope, "b");
    CHECK_EQ_INT(e.signo, 15);
    CHECK_EQ_INT(t.n, 1);
    CHECK_EQ_INT(timers_take_expired(&t, 103, &e), 0);
    /* a rank's worker exited: its timers go */
    CHECK_EQ_INT(timers_forget_rank(&t, 3), 1);
    CHECK_EQ_INT(t.n, 0);
    /* only signal-less timers expired: the earliest is given, with no signal */
    timers_apply(&t, &r1, 2, 100);
    CHECK_EQ_INT(timers_take_expired(&t, 200, &e), 1);
    CHECK_EQ_STR(e.scope, "a");
    CHECK_EQ_INT(e.signo, 0);
    timers_table_free(&t);
}

static void test_table_is_bounded(void)
{
    struct timer_table t;
    timers_table_init(&t);
    char s[32];
    int rc = 0, i;
    for (i = 0; i <= TIMERS_MAX && !rc; i++) {
        snprintf(s, sizeof s, "s%d", i);
        struct timer_req r = req(5, s, 1000, 9);
        rc = timers_apply(&t, &r, 0, 1);
    }
    CHECK_EQ_INT(rc, -ENOSPC);
    CHECK_EQ_INT(t.n, TIMERS_MAX);
    timers_table_free(&t);
}

int main(void)
{
    RUN(test_parse_torch_request);
    RUN(test_parse_malformed);
    RUN(test_scope_is_cut_and_one_line);
    RUN(test_table);
    RUN(test_expired_pid_picks_signal_and_drops_all);
    RUN(test_table_is_bounded);
    return check_result();
}
