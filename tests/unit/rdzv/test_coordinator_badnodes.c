/* tests/unit/rdzv/test_coordinator_badnodes.c — the nodes the job remembers for their failures in
 * the round state machine (coordinator_badnodes.c): counted at each decision, left out when they
 * join again where the job can do without them, kept where it cannot. */
#include <stdio.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/rdzv/coord_world.h"

/* A job of min..max nodes a, b, c (conn 1..3) where a node with k failures is bad; `host`: the
 * node whose agent hosts the store (-1: none). All three joined, round 0 running. */
static coord_t *job_of(int min, int max, int k, int host)
{
    w_reset();
    memset(hb_on, 0, sizeof hb_on);
    auto_hb = 1;
    char host_id[17];
    snprintf(host_id, sizeof host_id, "%016x", host + 1);
    coord_params_t p = {
        .run_id = "job1", .min_nodes = min, .max_nodes = max, .max_restarts = 10,
        .max_node_failures = k, .host_id = host >= 0 ? host_id : NULL,
        .join_timeout = 600, .last_call_timeout = 30, .close_timeout = 30,
        .keep_alive_interval = 1, .keep_alive_max_attempt = 3, .progress_interval = 5,
        .store_host = "store.example", .store_port = 29400,
    };
    coord_t *c = coord_new(&p, now);
    drain(c);
    return c;
}

static coord_t *job(int min, int max, int k, int host)
{
    coord_t *c = job_of(min, max, k, host);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    join(c, 2, "c", 1, -1, 0);
    advance(c, 31); /* the last call of an elastic round 0 */
    CHECK_EQ_INT(node_rank_of(2, 0), 2);
    return c;
}

/* Round r: node i's worker fails with `reason`; the decision is read into d, and every node
 * joins again (join r+1). */
static void fail_round(coord_t *c, int r, int i, const char *reason, int exclude,
                       rdzv_decision_t *d)
{
    rdzv_failure_t f, got[RDZV_MAX_FAILURES];
    char val[2048];
    rdzv_failure_init(&f);
    f.rank = i;
    f.exit_code = 1;
    f.time = now;
    f.exclude = exclude;
    snprintf(f.reason, sizeof f.reason, "%s", reason);
    CHECK(rdzv_failure_encode(&f, val, sizeof val) > 0);
    wr(c, i, "fail", r, val);
    run_timers(c);
    CHECK_EQ_INT(end_of(r, d, got), 0);
    CHECK_EQ_INT(d->action, RDZV_RESTART);
    for (int k = 0; k < 3; k++)
        join(c, k, (const char *[]){"a", "b", "c"}[k], 1, -1, r + 1);
    advance(c, 31);
}

/* Node c fails twice under --max-node-failures 2 in a 2:3 job: the second decision says it is
 * left out, its next join is answered "excluded", and the round runs with a and b. */
static void test_left_out_after_k(void)
{
    coord_t *c = job(2, 3, 2, 0);
    rdzv_decision_t d;
    fail_round(c, 0, 2, "exit code 1", 0, &d);
    CHECK_EQ_INT(d.n_bad, 1);
    CHECK_EQ_STR(d.bad[0].name, "c");
    CHECK_EQ_INT(d.bad[0].caused, 1);
    CHECK_EQ_INT(d.bad[0].out, 0);
    CHECK_EQ_INT(node_rank_of(2, 1), 2); /* one failure: still in */
    fail_round(c, 1, 2, "exit code 1", 0, &d);
    CHECK_EQ_INT(d.bad[0].caused, 2);
    CHECK_EQ_INT(d.bad[0].out, 1);
    CHECK(logs_contain("c (2 failures; left out) is a bad node (--max-node-failures reached)"));
    rdzv_assignment_t a;
    char err[32], text[RDZV_LINE_MAX];
    CHECK_EQ_INT(assigned(2, 2, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "excluded");
    CHECK(strstr(text, "this node is left out of the job as a bad node: c (2 failures; left "
                       "out); the job goes on with the other 2 nodes") != NULL);
    CHECK_EQ_INT(assigned(0, 2, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.nnodes, 2);
    /* it stays out: a later join (a container restarted) is answered the same */
    join(c, 2, "c", 1, -1, 3);
    CHECK_EQ_INT(assigned(2, 3, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "excluded");
    rdzv_status_t st;
    rdzv_status_node_t nodes[8];
    coord_state(c, now, &st, nodes, 8);
    CHECK_EQ_INT(st.n_bad, 1);
    CHECK_EQ_INT(st.bad[0].out, 1);
    coord_free(c);
}

/* A job of a fixed size cannot do without the node: it stays, and the log says why; so does
 * the node that hosts the job store, and one whose name another node has. */
static void test_kept_where_the_job_needs_it(void)
{
    coord_t *c = job(3, 3, 1, -1);
    rdzv_decision_t d;
    fail_round(c, 0, 2, "exit code 1", 0, &d);
    CHECK_EQ_INT(d.bad[0].out, 0);
    CHECK(logs_contain("c (1 failure) is a bad node, but the job cannot do without it (2 other "
                       "nodes, at least 3 needed (--nnodes)): it stays"));
    CHECK_EQ_INT(node_rank_of(2, 1), 2);
    coord_free(c);

    c = job(2, 3, 1, 2);
    fail_round(c, 0, 2, "exit code 1", 0, &d);
    CHECK_EQ_INT(d.bad[0].out, 0);
    CHECK(logs_contain("(it hosts the job store): it stays"));
    CHECK_EQ_INT(node_rank_of(2, 1), 2);
    coord_free(c);
}

/* A worker that asked to leave its node out makes it bad at once, whatever the count. */
static void test_asked(void)
{
    coord_t *c = job(2, 3, 3, 0);
    rdzv_decision_t d;
    fail_round(c, 0, 1, "exit code 1; asked to leave its node out: GPU 3 degraded", 1, &d);
    CHECK_EQ_STR(d.bad[0].name, "b");
    CHECK_EQ_INT(d.bad[0].asked, 1);
    CHECK_EQ_INT(d.bad[0].out, 1);
    CHECK(logs_contain("is a bad node (a worker asked)"));
    char err[32];
    rdzv_assignment_t a;
    CHECK_EQ_INT(assigned(1, 1, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "excluded");
    coord_free(c);
}

/* A job of a fixed size with a spare: the spare takes the bad node's place. */
static void test_spare_takes_its_place(void)
{
    coord_t *c = job_of(2, 2, 1, 0);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    join(c, 2, "s", 1, -1, 0);   /* the job is full: a spare */
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    CHECK_EQ_INT(node_rank_of(2, 0), -1);
    rdzv_failure_t f, got[RDZV_MAX_FAILURES];
    char val[2048];
    rdzv_failure_init(&f);
    f.rank = 1;
    f.time = now;
    snprintf(f.reason, sizeof f.reason, "exit code 1");
    CHECK(rdzv_failure_encode(&f, val, sizeof val) > 0);
    wr(c, 1, "fail", 0, val);
    run_timers(c);
    rdzv_decision_t d;
    CHECK_EQ_INT(end_of(0, &d, got), 0);
    CHECK_EQ_STR(d.bad[0].name, "b");
    CHECK_EQ_INT(d.bad[0].out, 1);
    join(c, 0, "a", 1, -1, 1);
    join(c, 1, "b", 1, -1, 1);
    char err[32];
    rdzv_assignment_t a;
    CHECK_EQ_INT(assigned(1, 1, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "excluded");
    CHECK_EQ_INT(assigned(2, 0, &a, NULL, 0, NULL, 0), 1);   /* the spare's join is answered */
    CHECK_EQ_INT(a.nnodes, 2);
    coord_free(c);
}

/* What counts: a failed health check counts as a check; 0 (off) leaves nobody out unless asked. */
static void test_what_counts(void)
{
    coord_t *c = job(2, 3, 0, 0);
    rdzv_decision_t d;
    fail_round(c, 0, 2, "health check: GPU 5: Xid 79", 0, &d);
    CHECK_EQ_INT(d.bad[0].checks, 1);
    CHECK_EQ_INT(d.bad[0].caused, 0);
    fail_round(c, 1, 2, "exit code 1", 0, &d);
    fail_round(c, 2, 2, "exit code 1", 0, &d);
    CHECK_EQ_INT(d.bad[0].caused, 2);
    CHECK_EQ_INT(d.bad[0].out, 0);   /* --max-node-failures 0 */
    CHECK_EQ_INT(node_rank_of(2, 3), 2);
    coord_free(c);
}

int main(void)
{
    test_left_out_after_k();
    test_kept_where_the_job_needs_it();
    test_asked();
    test_spare_takes_its_place();
    test_what_counts();
    return check_result();
}
