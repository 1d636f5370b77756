/* tests/unit/rdzv/test_coordinator_round.c — the coordinator's rounds (coordinator_round.c):
 * joining and closing a round, ranks, segments, and what a failure makes of the next round,
 * driven with explicit times in the model of coord_world.h and inspected through its actions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/rdzv/coord_world.h"

static void test_join_fixed_closes_at_max(void)
{
    coord_t *c = mk(3, 3, 0, NULL);
    join(c, 0, "worker-10", 1, -1, 0);
    join(c, 1, "worker-2", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), -1); /* not yet */
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    join(c, 2, "worker-1", 1, -1, 0);
    /* closed the moment the last one joined, ranks in natural order */
    CHECK_EQ_INT(node_rank_of(2, 0), 0);
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    CHECK_EQ_INT(W.deletes, 1);
    rdzv_assignment_t a = {0};
    assigned(0, 0, &a, NULL, 0, NULL, 0);
    CHECK_EQ_INT(a.nnodes, 3);
    CHECK_EQ_INT(a.world_size, 3);
    CHECK_EQ_INT(a.restart_count, 0);
    CHECK_EQ_INT(a.store_port, 29400);
    CHECK(W.timer[COORD_T_JOIN] < 0 && W.timer[COORD_T_PROGRESS] < 0);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK_EQ_INT(info.members, 3);
    coord_free(c);
}

static void test_last_call_min_max(void)
{
    coord_t *c = mk(2, 4, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    join(c, 1, "b", 1, -1, 0);
    CHECK(W.timer[COORD_T_LAST_CALL] > 1029.9 && W.timer[COORD_T_LAST_CALL] < 1030.1);
    advance(c, 10);
    join(c, 2, "c", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), -1);
    advance(c, 19);
    CHECK_EQ_INT(node_rank_of(0, 0), -1);
    advance(c, 1.5);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    CHECK_EQ_INT(node_rank_of(2, 0), 2);
    rdzv_assignment_t a = {0};
    assigned(1, 0, &a, NULL, 0, NULL, 0);
    CHECK_EQ_INT(a.nnodes, 3);
    coord_free(c);

    /* a joined node dropping out below MIN cancels the last call */
    c = mk(2, 4, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    CHECK(W.timer[COORD_T_LAST_CALL] > 0);
    conn_close(c, 1);
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    coord_free(c);
}

static void test_max_reached_elastic(void)
{
    coord_t *c = mk(2, 3, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    join(c, 2, "c", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(1, 0), 1); /* no last call needed at MAX */
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    coord_free(c);
}

static void test_expected_names_close_early(void)
{
    coord_t *c = mk(2, 8, 0, "n-1, n-2,n-3");
    join(c, 0, "n-3", 1, -1, 0);
    join(c, 1, "n-1", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), -1);
    advance(c, 5); /* progress names the one missing */
    CHECK(logs_contain("2/3 nodes joined (min 2), waiting for n-2"));
    join(c, 2, "n-2", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    coord_free(c);
}

static void test_given_ranks(void)
{
    coord_t *c = mk(3, 3, 0, NULL);
    join(c, 0, "z", 1, 2, 0);
    join(c, 1, "y", 1, 0, 0);
    join(c, 3, "dup", 1, 0, 0); /* rank 0 taken */
    join(c, 4, "far", 1, 7, 0); /* out of range */
    char err[32], text[RDZV_LINE_MAX];
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(3, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "rejected");
    CHECK(strstr(text, "node rank 0") && strstr(text, "already taken by y"));
    CHECK_EQ_INT(assigned(4, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK(strstr(text, "out of range"));
    join(c, 2, "x", 1, 1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    CHECK_EQ_INT(node_rank_of(1, 0), 0);
    CHECK_EQ_INT(node_rank_of(2, 0), 1);
    coord_free(c);
}

static void test_mixed_nproc(void)
{
    coord_t *c = mk(3, 3, 0, NULL);
    join(c, 0, "n-1", 4, -1, 0);
    join(c, 1, "n-3", 1, -1, 0);
    join(c, 2, "n-2", 2, -1, 0);
    rdzv_assignment_t a[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(assigned(i, 0, &a[i], NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a[0].rank_base, 0);
    CHECK_EQ_INT(a[2].rank_base, 4);
    CHECK_EQ_INT(a[1].rank_base, 6);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(a[i].world_size, 7);
    coord_free(c);
}

static void test_join_timeout_names_missing(void)
{
    coord_t *c = mk(4, 4, 0, NULL);
    join(c, 0, "w0", 1, 0, 0);
    join(c, 1, "w2", 1, 2, 0);
    advance(c, 5);
    CHECK(logs_contain("rendezvous 'job1' round 0: 2/4 nodes joined, waiting for node rank 1, "
                       "node rank 3 (joined so far: w0, w2; 9m59s left)"));
    char st[RDZV_LINE_MAX];
    const char *v = w_get("podrun/job1/status");
    CHECK(v && strstr(v, "2/4 nodes joined"));
    advance(c, 595);
    rdzv_assignment_t a = {0};
    char err[32], text[RDZV_LINE_MAX];
    CHECK_EQ_INT(assigned(0, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "timeout");
    snprintf(st, sizeof st, "%s", text);
    CHECK(strstr(st, "timed out after 10m00s: 2/4 nodes joined, still waiting for node rank 1, "
                      "node rank 3 (joined: w0, w2)"));
    CHECK_EQ_INT(assigned(1, 0, &a, err, sizeof err, text, sizeof text), -1);
    /* a late node hears the same */
    join(c, 2, "w1", 1, 1, 0);
    CHECK_EQ_INT(assigned(2, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "timeout");
    coord_free(c);

    /* without ranks or names: counts */
    c = mk(3, 3, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    advance(c, 5);
    CHECK(logs_contain("1/3 nodes joined, waiting for 2 more nodes (joined so far: a;"));
    coord_free(c);
}

static void test_failure_root_cause(void)
{
    coord_t *c = running(4, 1);
    /* two reports in the same pass of the loop: the earlier failure is the root cause */
    fail(c, 2, 0, 2, 2000.50, "exited with code 1");
    fail(c, 1, 0, 1, 2000.25, "exited with code 7");
    CHECK_EQ_INT(end_of(0, NULL, NULL) , -1); /* decided on the next pass */
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.n, 2);
    CHECK_EQ_STR(f[0].node_name, "worker-1");
    CHECK_EQ_INT(f[0].rank, 1);
    CHECK_EQ_INT(f[0].node_rank, 1);
    CHECK_EQ_STR(f[0].host, "10.0.0.2");
    CHECK_EQ_STR(f[0].message, "ValueError: bad\nline two");
    CHECK_EQ_STR(f[1].node_name, "worker-2");
    CHECK_EQ_STR(d.reason, "rank 1 on worker-1 exited with code 7");
    CHECK_EQ_INT(d.restart_counted, 1);
    CHECK_EQ_INT(d.next_round, 1);
    /* set once: a later report does not change what everyone read */
    char before[4096];
    snprintf(before, sizeof before, "%s", w_get("podrun/job1/r/0/end"));
    fail(c, 3, 0, 3, 1999.0, "exited with code 9");
    CHECK_EQ_STR(w_get("podrun/job1/r/0/end"), before);
    coord_free(c);
}

/* A failure that no restart can help (the program cannot be started) ends the job with restarts
 * left, and says so in the record every agent reads. */
static void test_permanent_failure_exits(void)
{
    coord_t *c = running(2, 1);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES], g;
    char val[2048];
    rdzv_failure_init(&g);
    g.rank = 1;
    g.exit_code = 127;
    g.time = now;
    g.permanent = 1;
    snprintf(g.reason, sizeof g.reason, "cannot run 'x': No such file or directory");
    CHECK(rdzv_failure_encode(&g, val, sizeof val) > 0);
    wr(c, 1, "fail", 0, val);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.n, 1);
    CHECK_EQ_INT(f[0].permanent, 1);
    coord_free(c);
}

static void test_restart_counting(void)
{
    coord_t *c = running(3, 1);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    fail(c, 0, 0, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.restart_count, 1);
    int deletes = W.deletes;
    /* everyone rejoins: round 1 closes at once, fresh worker namespace, count 1 */
    join(c, 0, "worker-0", 1, -1, 1);
    join(c, 1, "worker-1", 1, -1, 1);
    CHECK_EQ_INT(node_rank_of(0, 1), -1);
    join(c, 2, "worker-2", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(2, 1, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 1);
    CHECK_EQ_INT(a.restart_count, 1);
    CHECK_EQ_INT(a.node_rank, 2); /* stable across restarts */
    CHECK_EQ_INT(W.deletes, deletes + 1);
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    /* second failure: restarts used up → exit */
    fail(c, 1, 1, 1, now, "exited with code 2");
    run_timers(c);
    CHECK_EQ_INT(end_of(1, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.restart_counted, 0);
    /* nobody can join an ended job */
    join(c, 5, "late", 1, -1, 0);
    char err[32];
    CHECK_EQ_INT(assigned(5, 0, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "ended");
    coord_free(c);
}

/* An exit code not to retry ends the job with restarts left, and uses none of them; the record
 * every agent reads says so, so each agent exits with the same code. */
static void test_fatal_failure_exits_without_restart(void)
{
    coord_t *c = running(3, 5);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    fail(c, 0, 0, 0, now, "exit code 1");          /* an ordinary failure first... */
    fail_fatal(c, 2, 0, 2, now + 0.5);               /* ...and a fatal one in the same pass */
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.restart_counted, 0);
    CHECK_EQ_INT(d.restart_count, 0);
    CHECK_EQ_INT(d.n, 2);
    CHECK(!f[0].fatal && f[1].fatal);
    CHECK_EQ_INT(f[1].exit_code, 42);
    coord_free(c);
}

static void test_membership_change_not_counted(void)
{
    coord_t *c = mk(2, 4, 0, NULL);
    rejoin_all(c, 3, 0);
    advance(c, 30);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    /* a node leaves (SIGTERM): restart, not counted, even with max_restarts 0 */
    wr(c, 2, "leave", -1, "SIGTERM");
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.restart_counted, 0);
    CHECK_EQ_INT(d.restart_count, 0);
    CHECK_EQ_STR(f[0].reason, "agent left: SIGTERM");
    /* the two survivors rejoin: round 1 closes without a last call */
    rejoin_all(c, 2, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(1, 1, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.nnodes, 2);
    CHECK_EQ_INT(a.restart_count, 0);
    /* a new node joins the running elastic job: restart for it, not counted */
    join(c, 3, "worker-3", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(1, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.n, 0);
    CHECK(strstr(d.reason, "worker-3 joined"));
    rejoin_all(c, 2, 2);
    CHECK_EQ_INT(assigned(3, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 2);
    CHECK_EQ_INT(a.nnodes, 3);
    CHECK_EQ_INT(a.node_rank, 2);
    coord_free(c);
}

static void join_in(coord_t *c, int i, const char *domain, const char *name)
{
    join_domain = domain;
    join(c, i, name, 1, -1, 0);
    join_domain = NULL;
}

/* --segment-size 2, 4 nodes: 3 of domain A, 2 of B, 1 of C. Two of A and both of B run, with
 * the nodes of each domain on contiguous node ranks; the third of A waits as a spare; C, too
 * small for a segment, is named and left out. */
static void test_segments_fixed(void)
{
    coord_t *c = mk_segments(2, 4, 4, 0, NULL);
    join_in(c, 0, "B/1", "n-1");
    join_in(c, 1, "A/1", "n-2");
    join_in(c, 2, "C/1", "n-3");
    join_in(c, 3, "A/1", "n-4");
    join_in(c, 4, "A/1", "n-5");
    CHECK_EQ_INT(node_rank_of(1, 0), -1); /* 5 joined, but only 2 in whole segments */
    join_in(c, 5, "B/1", "n-6");
    CHECK_EQ_INT(node_rank_of(1, 0), 0);
    CHECK_EQ_INT(node_rank_of(3, 0), 1);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    CHECK_EQ_INT(node_rank_of(5, 0), 3);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(4, 0, &a, NULL, 0, NULL, 0), 0);   /* n-5: a spare, no answer */
    CHECK_EQ_INT(assigned(2, 0, &a, NULL, 0, NULL, 0), 0);
    CHECK(logs_contain("n-5 waits as a spare"));
    CHECK(logs_contain("NVLink domain C/1 has 1 node, fewer than --segment-size 2: left out"));
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.members, 4);
    CHECK_EQ_INT(info.waiting, 2);
    coord_free(c);
}

/* Elastic 2:4 with segments of 2: the round closes with one segment; a single node of another
 * domain does not restart it, the second one does (a new whole segment). */
static void test_segments_elastic_restart(void)
{
    coord_t *c = mk_segments(2, 2, 4, 0, NULL);
    join_in(c, 0, "A/1", "a-1");
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);   /* one node is no segment: no last call yet */
    join_in(c, 1, "A/1", "a-2");
    CHECK(W.timer[COORD_T_LAST_CALL] > 0);
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    join_in(c, 2, "B/1", "b-1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    join_in(c, 3, "B/1", "b-2");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);   /* membership change: round 1 takes both */
    coord_free(c);
}

/* A restart keeps the nodes that ran: a spare that sorts first does not push a survivor out. */
static void test_segments_restart_keeps_survivors(void)
{
    coord_t *c = mk_segments(2, 2, 2, 2, NULL);
    join_in(c, 0, "A/1", "a-2");
    join_in(c, 1, "A/1", "a-3");
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    join_in(c, 2, "A/1", "a-1");   /* a spare */
    fail(c, 0, 0, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    join_domain = "A/1";
    join(c, 0, "a-2", 1, -1, 1);
    CHECK_EQ_INT(node_rank_of(0, 1), -1);   /* full, but a-3 is expected back: it waits */
    CHECK(W.timer[COORD_T_LAST_CALL] > 0);
    join(c, 1, "a-3", 1, -1, 1);
    join_domain = NULL;
    CHECK_EQ_INT(node_rank_of(0, 1), 0);
    CHECK_EQ_INT(node_rank_of(1, 1), 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(2, 0, &a, NULL, 0, NULL, 0), 0);
    /* a member that is gone is not waited for: the spare takes its place at once */
    fail(c, 1, 1, 1, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(1, NULL, NULL), 0);
    conn_close(c, 1);
    join_domain = "A/1";
    join(c, 0, "a-2", 1, -1, 2);
    join_domain = NULL;
    CHECK_EQ_INT(node_rank_of(2, 0), 0);
    CHECK_EQ_INT(node_rank_of(0, 2), 1);
    coord_free(c);
}

static void test_full_job_waits(void)
{
    coord_t *c = running(2, 1);
    join(c, 5, "spare", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1); /* full: no restart for it */
    CHECK(logs_contain("spare waits for the next round"));
    conn_close(c, 1); /* a node dies: restart, the spare takes its place */
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_STR(f[0].reason, "agent lost: connection closed");
    CHECK_EQ_INT(d.restart_counted, 1);
    join(c, 0, "worker-0", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(5, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.nnodes, 2);
    coord_free(c);
}

/* Nodes that waited while the job was full fill the next round only up to MAX. */
static void test_waiting_nodes_capped_at_max(void)
{
    coord_t *c = mk(1, 2, 3, NULL);
    join(c, 0, "a", 1, -1, 0);
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    join(c, 1, "b", 1, -1, 0);
    join(c, 2, "c", 1, -1, 0);
    join(c, 3, "d", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    rdzv_assignment_t a = {0};
    int n = 0;
    for (int i = 1; i <= 3; i++)
        if (assigned(i, 0, &a, NULL, 0, NULL, 0) == 1) {
            CHECK_EQ_INT(a.round, 1);
            CHECK_EQ_INT(a.nnodes, 2);
            n++;
        }
    CHECK_EQ_INT(n, 2);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK_EQ_INT(info.members, 2);
    CHECK_EQ_INT(info.waiting, 1);
    coord_free(c);
}

/* Thousands of joins in-process, in two different orders: the same node ranks either way, and
 * the coordinator's writes per round are O(K) (one assignment per node plus a constant), so a
 * failure round costs one answer per node, not one per node per event. */
static void big_round(int k, unsigned seed, int *rank_of)
{
    coord_t *c = mk(k, k, 5, NULL);
    int *order = malloc((size_t)k * sizeof *order);
    for (int i = 0; i < k; i++)
        order[i] = i;
    srand(seed);
    for (int i = k - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    char name[32];
    long sets0 = W.sets;
    for (int i = 0; i < k; i++) {
        snprintf(name, sizeof name, "node-%d", order[i]);
        join(c, order[i], name, 1, -1, 0);
    }
    CHECK(W.sets - sets0 <= k + 4);
    for (int i = 0; i < k; i++)
        rank_of[i] = node_rank_of(i, 0);
    /* a failure round: the decision, every node's next assignment, nothing per node per event */
    sets0 = W.sets;
    fail(c, order[0], 0, 0, now, "exited with code 1");
    run_timers(c);
    for (int i = 0; i < k; i++) {
        snprintf(name, sizeof name, "node-%d", order[k - 1 - i]);
        join(c, order[k - 1 - i], name, 1, -1, 1);
    }
    CHECK_EQ_INT(node_rank_of(order[0], 1), rank_of[order[0]]);
    CHECK(W.sets - sets0 <= k + 6);
    free(order);
    coord_free(c);
}

static void test_thousands_of_joins(void)
{
    int k = 2000;
    int *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * sizeof *b);
    big_round(k, 1, a);
    big_round(k, 2, b);
    char seen[2000] = {0};
    for (int i = 0; i < k; i++) {
        CHECK_EQ_INT(a[i], b[i]);
        CHECK(a[i] >= 0 && a[i] < k && !seen[a[i]]);
        if (a[i] >= 0 && a[i] < k)
            seen[a[i]] = 1;
    }
    CHECK_EQ_INT(a[10], 10); /* natural order: node-9 before node-10, not node-10 after node-1 */
    CHECK_EQ_INT(a[1999], 1999);
    free(a);
    free(b);
}

/* A spare waits without touching the running round, takes the place of the first node lost;
 * the second loss finds no spare and the round waits for a node until one comes. */
static void test_two_failures_one_spare(void)
{
    coord_t *c = running(3, 2);
    join(c, 5, "worker-5", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    conn_close(c, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    join(c, 1, "worker-1", 1, -1, 1);
    join(c, 2, "worker-2", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(5, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 1);
    CHECK_EQ_INT(a.nnodes, 3);
    CHECK_EQ_INT(node_rank_of(5, 0), 2);
    conn_close(c, 1);
    run_timers(c);
    CHECK_EQ_INT(end_of(1, NULL, NULL), 0);
    join(c, 2, "worker-2", 1, -1, 2);
    join(c, 5, "worker-5", 1, -1, 1);
    CHECK_EQ_INT(node_rank_of(2, 2), -1); /* 2 of 3: no spare left, the round waits */
    join(c, 6, "worker-6", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(2, 2), 0);
    CHECK_EQ_INT(node_rank_of(6, 0), 2);
    coord_free(c);
}

/* A member lost while it may still run (its connection timed out: cut off) keeps its ranks until
 * the fence has passed, the time it takes such a node to find out and stop its workers; one whose
 * connection closed (its agent gone, its workers with it) costs no wait, nor does a fence of 0. */
static void test_unreachable_member_fences_its_ranks(void)
{
    for (int how = 0; how < 3; how++) {
        w_fence = how == 2 ? 0 : 5;
        coord_t *c = mk(2, 3, 0, NULL);
        rejoin_all(c, 3, 0);
        CHECK_EQ_INT(node_rank_of(2, 0), 2);
        hb_on[2] = 0;
        coord_on_close(c, 3, how == 1 ? NULL : "unreachable, nothing acknowledged for 3 s", now);
        drain(c);
        run_timers(c);
        rdzv_decision_t d = {0};
        CHECK_EQ_INT(end_of(0, &d, NULL), 0);
        CHECK_EQ_INT(d.action, RDZV_RESTART);
        rejoin_all(c, 2, 1);
        if (how == 0) {
            CHECK_EQ_INT(node_rank_of(0, 1), -1);
            CHECK(logs_contain("closing in 5.0 s, once worker-2, lost while it may be alive"));
            advance(c, 4.9);
            CHECK_EQ_INT(node_rank_of(0, 1), -1);
            advance(c, 0.2);
        }
        CHECK_EQ_INT(node_rank_of(0, 1), 0);
        CHECK_EQ_INT(node_rank_of(1, 1), 1);
        coord_free(c);
    }
    w_fence = 0;
}

/* A member of a stopped round that is lost while it may run (its connection timed out before it
 * joined again: cut off, it may not even know the round stopped) fences its ranks as a running
 * member does; one that closed its connection, or said it was done, does not. */
static void test_stopped_member_lost_while_alive_fences(void)
{
    for (int how = 0; how < 3; how++) {
        w_fence = 5;
        coord_t *c = mk(2, 3, 1, NULL);
        rejoin_all(c, 3, 0);
        if (how == 2)
            wr(c, 2, "done", 0, "1");
        fail(c, 0, 0, 0, now, "exited with code 1");
        run_timers(c);
        rdzv_decision_t d = {0};
        CHECK_EQ_INT(end_of(0, &d, NULL), 0);
        CHECK_EQ_INT(d.action, RDZV_RESTART);
        hb_on[2] = 0;
        coord_on_close(c, 3, how == 1 ? NULL : "unreachable, nothing acknowledged for 3 s", now);
        drain(c);
        rejoin_all(c, 2, 1);
        run_timers(c);
        if (how == 0) {
            CHECK_EQ_INT(node_rank_of(0, 1), -1);
            CHECK(logs_contain("closing in 5.0 s, once worker-2, lost while it may be alive"));
            advance(c, 5.1);
        }
        CHECK_EQ_INT(node_rank_of(0, 1), 0);
        coord_free(c);
    }
    w_fence = 0;
}

int main(void)
{
    RUN(test_join_fixed_closes_at_max);
    RUN(test_permanent_failure_exits);
    RUN(test_last_call_min_max);
    RUN(test_max_reached_elastic);
    RUN(test_expected_names_close_early);
    RUN(test_given_ranks);
    RUN(test_mixed_nproc);
    RUN(test_join_timeout_names_missing);
    RUN(test_failure_root_cause);
    RUN(test_restart_counting);
    RUN(test_fatal_failure_exits_without_restart);
    RUN(test_membership_change_not_counted);
    RUN(test_full_job_waits);
    RUN(test_segments_fixed);
    RUN(test_segments_elastic_restart);
    RUN(test_segments_restart_keeps_survivors);
    RUN(test_waiting_nodes_capped_at_max);
    RUN(test_thousands_of_joins);
    RUN(test_two_failures_one_spare);
    RUN(test_unreachable_member_fences_its_ranks);
    RUN(test_stopped_member_lost_while_alive_fences);
    w_reset();
    return check_result();
}
