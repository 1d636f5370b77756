/* tests/unit/rdzv/test_coordinator_progress.c — restarts that make no progress
 * (coordinator_progress.c): the count of attempts in a row, what resets it, what leaves it, and
 * the answer every node gets when the job ends for it. Driven in the model of coord_world.h. */
#include <stdio.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/rdzv/coord_world.h"

/* Round `round` of n nodes fails (node 0's rank 0) and every node rejoins (join k = round + 1)
 * saying `progress` (node 1 says none: the value may live on one node only). The answer of node
 * 0's join: 1 assigned, -1 an error (kind in err, text in text). */
static int fail_and_rejoin(coord_t *c, int n, int round, long long progress, char *err,
                           char *text)
{
    fail(c, 0, round, 0, now, "exit code 1");
    run_timers(c);
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        join_progress = i == 1 ? -1 : progress;
        join(c, i, name, 1, -1, round + 1);
    }
    join_progress = -1;
    rdzv_assignment_t a = {0};
    return assigned(0, round + 1, &a, err, 32, text, RDZV_LINE_MAX);
}

static coord_t *start(int n, int restarts, int max_no_progress, long long progress)
{
    world_max_no_progress = max_no_progress;
    coord_t *c = mk(n, n, restarts, NULL);
    world_max_no_progress = 0;
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        join_progress = progress;
        join(c, i, name, 1, -1, 0);
    }
    join_progress = -1;
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    return c;
}

/* K attempts in a row without progress: the round after the K-th is not started; every node,
 * the one that knows no value too, is told why. The first attempt counts (NVIDIA's rule). */
static void test_stops_after_k_attempts(void)
{
    char err[32], text[RDZV_LINE_MAX];
    coord_t *c = start(3, 10, 2, 1000);
    CHECK_EQ_INT(fail_and_rejoin(c, 3, 0, 1000, err, text), 1);
    CHECK(logs_contain("round 0 ended without progress (still 1000); 1 in a row"));
    CHECK_EQ_INT(fail_and_rejoin(c, 3, 1, 1000, err, text), -1);
    CHECK_EQ_STR(err, "noprogress");
    CHECK(strstr(text, "2 attempts in a row ended without progress") != NULL);
    CHECK(strstr(text, "stayed at 1000") != NULL);
    rdzv_assignment_t a;
    char e1[32];
    CHECK_EQ_INT(assigned(1, 2, &a, e1, sizeof e1, NULL, 0), -1);
    CHECK_EQ_STR(e1, "noprogress");
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_OVER);
    /* a node that comes late gets the same answer */
    join(c, 2, "worker-2", 1, -1, 3);
    CHECK_EQ_INT(assigned(2, 3, &a, e1, sizeof e1, NULL, 0), -1);
    CHECK_EQ_STR(e1, "noprogress");
    coord_free(c);
}

/* A rise starts the count again; a round where nobody knows a value (before the first
 * checkpoint) leaves the count and the base as they were. */
static void test_progress_resets_unknown_skips(void)
{
    char err[32], text[RDZV_LINE_MAX];
    coord_t *c = start(2, 10, 2, 1000);
    CHECK_EQ_INT(fail_and_rejoin(c, 2, 0, 1000, err, text), 1);   /* 1 in a row */
    CHECK_EQ_INT(fail_and_rejoin(c, 2, 1, 1005, err, text), 1);   /* progress: 0 */
    CHECK_EQ_INT(fail_and_rejoin(c, 2, 2, 1005, err, text), 1);   /* 1 in a row */
    CHECK_EQ_INT(fail_and_rejoin(c, 2, 3, -1, err, text), 1);     /* unknown: still 1 */
    CHECK_EQ_INT(fail_and_rejoin(c, 2, 4, 1005, err, text), -1);  /* 2 in a row */
    CHECK_EQ_STR(err, "noprogress");
    coord_free(c);
}

/* Off (0): restarts run out as always; restarts used up still exit with the worker's failure. */
static void test_off_and_restarts_used_up(void)
{
    char err[32], text[RDZV_LINE_MAX];
    coord_t *c = start(2, 3, 0, 1000);
    for (int r = 0; r < 3; r++)
        CHECK_EQ_INT(fail_and_rejoin(c, 2, r, 1000, err, text), 1);
    fail(c, 0, 3, 0, now, "exit code 1");
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(3, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    coord_free(c);
}

/* The value rides in the join record, and a record without it reads as none. */
static void test_desc_progress(void)
{
    rdzv_desc_rec_t d = {0}, e;
    char buf[1024];
    snprintf(d.name, sizeof d.name, "n0");
    d.nproc = 1;
    d.want_rank = -1;
    int len = rdzv_desc_encode(&d, buf, sizeof buf);
    CHECK(len > 0 && !strstr(buf, "progress"));
    CHECK_EQ_INT(rdzv_desc_decode(buf, (size_t)len, &e), 0);
    CHECK_EQ_INT(e.has_progress, 0);
    d.has_progress = 1;
    d.progress = 123456789012LL;
    len = rdzv_desc_encode(&d, buf, sizeof buf);
    CHECK_EQ_INT(rdzv_desc_decode(buf, (size_t)len, &e), 0);
    CHECK_EQ_INT(e.has_progress, 1);
    CHECK(e.progress == 123456789012LL);
    const char *bad = "name=n0\nnproc=1\nwant_rank=-1\nprogress=-5\n";
    CHECK_EQ_INT(rdzv_desc_decode(bad, strlen(bad), &e), 0);
    CHECK_EQ_INT(e.has_progress, 0);
}

int main(void)
{
    RUN(test_stops_after_k_attempts);
    RUN(test_progress_resets_unknown_skips);
    RUN(test_off_and_restarts_used_up);
    RUN(test_desc_progress);
    w_reset();
    return check_result();
}
