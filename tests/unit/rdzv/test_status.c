/* tests/unit/rdzv/test_status.c — the job's state record that `podrun status` reads: a round trip
 * of every field, names with tabs and newlines, a record cut to the store's value limit, and bytes
 * that are no record. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/status.h"

static void fill(rdzv_status_t *s, rdzv_status_node_t *nodes, int n)
{
    memset(s, 0, sizeof *s);
    snprintf(s->run_id, sizeof s->run_id, "job-7");
    s->time = 1700000010.25;
    s->started = 1700000000.5;
    s->round = 3;
    s->phase = RDZV_JOB_RUNNING;
    s->round_since = 1700000005.0;
    snprintf(s->line, sizeof s->line, "waiting for 1 more node\nsecond line");
    s->min_nodes = 2;
    s->max_nodes = 4;
    s->world_size = 8;
    s->restarts_used = 2;
    s->max_restarts = 5;
    s->failure_round = 2;
    s->failure_action = RDZV_RESTART;
    rdzv_failure_init(&s->failure);
    snprintf(s->failure.node_name, sizeof s->failure.node_name, "pod-1");
    snprintf(s->failure.host, sizeof s->failure.host, "10.1.2.3");
    s->failure.rank = 5;
    s->failure.node_rank = 1;
    s->failure.local_rank = 1;
    s->failure.exit_code = 1;
    s->failure.time = 1700000004.75;
    snprintf(s->failure.reason, sizeof s->failure.reason, "exited with code 1");
    snprintf(s->failure.message, sizeof s->failure.message, "Traceback\n  ValueError: x=1");
    for (int i = 0; i < n; i++) {
        rdzv_status_node_t *o = &nodes[i];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "pod-%d", i);
        snprintf(o->addr, sizeof o->addr, "10.1.2.%d", i + 2);
        o->phase = RDZV_NODE_MEMBER;
        o->node_rank = i;
        o->rank_base = 4 * i;
        o->nproc = 4;
        o->last_seen = 1700000009.5 + i;
    }
    s->nodes = nodes;
    s->n_nodes = s->n_total = n;
}

static void test_round_trip(void)
{
    rdzv_status_t s, d;
    rdzv_status_node_t nodes[3], out[3];
    fill(&s, nodes, 3);
    /* separators in a node's strings travel escaped */
    snprintf(nodes[2].name, sizeof nodes[2].name, "we\tird\nname\\");
    nodes[1].phase = RDZV_NODE_DONE;
    s.n_bad = 1;
    s.bad[0] = (rdzv_badnode_t){"pod-1", 2, 0, 1, 1};
    char *text = NULL;
    long len = rdzv_status_encode(&s, 1 << 20, &text);
    CHECK(len > 0);
    CHECK_EQ_INT(strlen(text), len);
    CHECK_EQ_INT(rdzv_status_decode(text, (size_t)len, &d, out, 3), 0);
    CHECK_EQ_STR(d.run_id, "job-7");
    CHECK(d.time == s.time && d.started == s.started && d.round_since == s.round_since);
    CHECK_EQ_INT(d.round, 3);
    CHECK_EQ_INT(d.phase, RDZV_JOB_RUNNING);
    CHECK_EQ_STR(d.line, s.line);
    CHECK_EQ_INT(d.min_nodes, 2);
    CHECK_EQ_INT(d.max_nodes, 4);
    CHECK_EQ_INT(d.world_size, 8);
    CHECK_EQ_INT(d.restarts_used, 2);
    CHECK_EQ_INT(d.max_restarts, 5);
    CHECK_EQ_INT(d.failure_round, 2);
    CHECK_EQ_INT(d.failure_action, RDZV_RESTART);
    CHECK_EQ_STR(d.failure.node_name, "pod-1");
    CHECK_EQ_STR(d.failure.message, s.failure.message);
    CHECK_EQ_INT(d.failure.rank, 5);
    CHECK(d.failure.time == s.failure.time);
    CHECK_EQ_INT(d.n_nodes, 3);
    CHECK_EQ_INT(d.n_total, 3);
    CHECK_EQ_INT(d.n_bad, 1);
    CHECK_EQ_STR(d.bad[0].name, "pod-1");
    CHECK_EQ_INT(d.bad[0].asked, 1);
    CHECK(d.nodes == out);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_STR(out[i].name, nodes[i].name);
        CHECK_EQ_STR(out[i].addr, nodes[i].addr);
        CHECK_EQ_INT(out[i].phase, nodes[i].phase);
        CHECK_EQ_INT(out[i].node_rank, i);
        CHECK_EQ_INT(out[i].rank_base, 4 * i);
        CHECK_EQ_INT(out[i].nproc, 4);
        CHECK(out[i].last_seen > nodes[i].last_seen - 0.001 &&
              out[i].last_seen < nodes[i].last_seen + 0.001);
    }
    /* fewer slots than nodes: the rest counted only */
    CHECK_EQ_INT(rdzv_status_decode(text, (size_t)len, &d, out, 1), 0);
    CHECK_EQ_INT(d.n_nodes, 1);
    CHECK_EQ_INT(d.n_total, 3);
    free(text);
}

static void test_no_failure_yet(void)
{
    rdzv_status_t s, d;
    rdzv_status_node_t out[1];
    fill(&s, NULL, 0);
    s.failure_round = -1;
    s.phase = RDZV_JOB_OVER;
    snprintf(s.over, sizeof s.over, "finished");
    char *text = NULL;
    long len = rdzv_status_encode(&s, 0, &text);
    CHECK(len > 0);
    CHECK(strstr(text, "f.") == NULL);
    CHECK_EQ_INT(rdzv_status_decode(text, (size_t)len, &d, out, 1), 0);
    CHECK_EQ_INT(d.failure_round, -1);
    CHECK_EQ_INT(d.phase, RDZV_JOB_OVER);
    CHECK_EQ_STR(d.over, "finished");
    CHECK_EQ_INT(d.n_nodes, 0);
    free(text);
}

/* A job too big for the store's value limit: whole node lines up to it, the count for the rest. */
static void test_cut_to_limit(void)
{
    enum { N = 2000 };
    rdzv_status_node_t *nodes = calloc(N, sizeof *nodes), *out = calloc(N, sizeof *out);
    rdzv_status_t s, d;
    fill(&s, nodes, N);
    char *text = NULL;
    long len = rdzv_status_encode(&s, 16384, &text);
    CHECK(len > 0 && len < 16384);
    CHECK_EQ_INT(rdzv_status_decode(text, (size_t)len, &d, out, N), 0);
    CHECK(d.n_nodes > 10 && d.n_nodes < N);
    CHECK_EQ_INT(d.n_total, N);
    CHECK_EQ_STR(out[d.n_nodes - 1].name, nodes[d.n_nodes - 1].name);
    free(text);
    free(nodes);
    free(out);
}

/* Anything else read from a store: no record, or records with broken node lines (skipped). */
static void test_bad_bytes(void)
{
    rdzv_status_t d;
    rdzv_status_node_t out[4];
    CHECK_EQ_INT(rdzv_status_decode("", 0, &d, out, 4), -EINVAL);
    const char junk[] = "\xff\x00garbage\nnode=1\t2\n";
    CHECK_EQ_INT(rdzv_status_decode(junk, sizeof junk - 1, &d, out, 4), -EINVAL);
    const char nul_id[] = "run_id=\0\0\nround=1\n";   /* a name of NUL bytes is none */
    CHECK_EQ_INT(rdzv_status_decode(nul_id, sizeof nul_id - 1, &d, out, 4), -EINVAL);
    const char t[] = "run_id=j\nround=-5\nphase=99\nnode=9\t0\t0\t1\t1.0\ta\tb\n"
                     "node=1\t0\t0\t1\tnan\ta\tb\nnode=1\tx\t0\t1\t1.0\ta\tb\n"
                     "node=1\t0\t0\t1\t1.0\ta\n"
                     "node=2\t1\t4\t4\t12.5\tgood\t10.0.0.1\n";
    CHECK_EQ_INT(rdzv_status_decode(t, sizeof t - 1, &d, out, 4), 0);
    CHECK_EQ_STR(d.run_id, "j");
    CHECK_EQ_INT(d.round, 0);
    CHECK_EQ_INT(d.phase, 0);
    CHECK_EQ_INT(d.n_nodes, 1);
    CHECK_EQ_STR(out[0].name, "good");
    CHECK_EQ_INT(out[0].rank_base, 4);
    /* a time no clock gives (it would print back as another number): the line is none, the
     * header's value its default; the bound itself is out, just under it is in */
    const char big[] = "run_id=j\ntime=1e300\n"
                       "node=2\t1\t4\t4\t1444444444444444444444444444444444442.5\ta\tb\n"
                       "node=2\t2\t5\t1\t1e15\tc\td\n"
                       "node=2\t3\t6\t1\t999999999999999.5\te\tf\nhealth=4\t1\t1e16\t\n";
    CHECK_EQ_INT(rdzv_status_decode(big, sizeof big - 1, &d, out, 4), 0);
    CHECK(d.time == 0);
    CHECK_EQ_INT(d.n_nodes, 1);
    CHECK_EQ_STR(out[0].name, "e");
    CHECK_EQ_INT(out[0].health.state, RDZV_HEALTH_NONE);
    char *again = NULL;
    long len = rdzv_status_encode(&d, 0, &again);
    rdzv_status_t d2;
    CHECK(len > 0 && rdzv_status_decode(again, (size_t)len, &d2, out, 4) == 0);
    CHECK_EQ_INT(d2.n_nodes, 1);
    free(again);
}

/* Each node's health check: after its own line, only for a node that reported one, the finding
 * escaped, and lines that are no health line leave the node without one. */
static void test_health(void)
{
    rdzv_status_t s, d;
    rdzv_status_node_t nodes[3], out[3];
    fill(&s, nodes, 3);
    nodes[0].health = (rdzv_health_t){RDZV_HEALTH_OK, 5, 1700000008.25, ""};
    nodes[1].health = (rdzv_health_t){RDZV_HEALTH_FAILED, 0.5, 1700000009.0,
                                      "GPU 3 (GPU-8932f937...): Xid 79,\tfallen\noff"};
    char *text = NULL;
    long len = rdzv_status_encode(&s, 0, &text);
    CHECK(len > 0);
    CHECK(strstr(text, "health=4\t5.000\t1700000008.250\t\n") != NULL);
    CHECK_EQ_INT(rdzv_status_decode(text, (size_t)len, &d, out, 3), 0);
    CHECK_EQ_INT(d.n_nodes, 3);
    CHECK_EQ_INT(out[0].health.state, RDZV_HEALTH_OK);
    CHECK(out[0].health.interval == 5 && out[0].health.checked == 1700000008.25);
    CHECK_EQ_INT(out[1].health.state, RDZV_HEALTH_FAILED);
    /* one line in a table: the tab and the newline come back as '?' */
    CHECK_EQ_STR(out[1].health.why, "GPU 3 (GPU-8932f937...): Xid 79,?fallen?off");
    CHECK_EQ_INT(out[2].health.state, RDZV_HEALTH_NONE);
    free(text);
    /* a health line before any node, after a bad node line, or broken: no health */
    const char t[] = "run_id=j\nhealth=4\t1\t2\t\n"
                     "node=2\t0\t0\t1\t1.0\ta\tb\nhealth=9\t1\t2\t\n"
                     "node=2\t1\t1\t1\t1.0\tc\td\nhealth=4\tx\t2\t\n"
                     "node=x\t1\t1\t1\t1.0\tc\td\nhealth=4\t1\t2\t\n"
                     "node=2\t2\t2\t1\t1.0\te\tf\nhealth=5\t1\t2\twhy\n";
    CHECK_EQ_INT(rdzv_status_decode(t, sizeof t - 1, &d, out, 3), 0);
    CHECK_EQ_INT(d.n_nodes, 3);
    CHECK_EQ_INT(out[0].health.state, RDZV_HEALTH_NONE);
    CHECK_EQ_INT(out[1].health.state, RDZV_HEALTH_NONE);
    CHECK_EQ_INT(out[2].health.state, RDZV_HEALTH_FAILED);
    CHECK_EQ_STR(out[2].health.why, "why");
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_no_failure_yet);
    RUN(test_cut_to_limit);
    RUN(test_bad_bytes);
    RUN(test_health);
    return check_result();
}
