/* tests/unit/launcher/preflight/test_plan.c — the pairing schedule and the judgement: a slow or
 * unreachable node is named within two rounds, its partner is cleared, and the reasons say why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/preflight/plan.h"

static const char *names[] = {"node-0", "node-1", "node-2", "node-3", "node-4", "node-5"};

static struct pf_figure ok(double rtt, double bw)
{
    struct pf_figure f = {.done = true, .ok = true, .rtt = rtt, .bw = bw};
    return f;
}

static struct pf_figure fail(const char *why)
{
    struct pf_figure f = {.done = true, .ok = false, .rtt = -1, .bw = -1};
    snprintf(f.reason, sizeof f.reason, "%s", why);
    return f;
}

static const struct pf_bounds bounds = {.max_rtt = 0.010, .min_bw = 0, .slow_percent = 25};

static void test_round1_pairs(void)
{
    struct pf_link l[8];
    CHECK_EQ_INT(pf_plan_round1(1, l), 0);
    CHECK_EQ_INT(pf_plan_round1(4, l), 2);
    CHECK(l[0].a == 0 && l[0].b == 1 && l[1].a == 2 && l[1].b == 3);
    CHECK_EQ_INT(pf_plan_round1(5, l), 3);
    CHECK(l[2].a == 0 && l[2].b == 4);   /* node 0 runs the odd one out after its first */
    CHECK_EQ_INT(pf_plan_round1(2, l), 1);
}

static void test_combine_and_passes(void)
{
    struct pf_figure a = ok(0.001, 2e9), b = ok(0.002, 1e9), c;
    pf_figure_combine(&a, &b, "n0", "n1", &c);
    CHECK(c.ok && c.rtt == 0.002 && c.bw == 1e9);
    struct pf_figure f = fail("connect to 10.0.0.4:4000: no route to host"), none = {0};
    pf_figure_combine(&a, &f, "n0", "n3", &c);
    CHECK(!c.ok);
    CHECK_EQ_STR(c.reason, "n3: connect to 10.0.0.4:4000: no route to host");
    pf_figure_combine(&none, &b, "n0", "n1", &c);
    CHECK(!c.ok && strstr(c.reason, "n0: no result"));
    char why[PF_REASON_MAX];
    struct pf_figure slow = ok(0.2, 1e9);
    CHECK(!pf_figure_passes(&slow, &bounds, -1, why, sizeof why));
    CHECK_EQ_STR(why, "slow: round trip 200.00 ms, over --preflight-max-rtt 10.00 ms");
    struct pf_figure thin = ok(0.001, 1e8);
    CHECK(!pf_figure_passes(&thin, &bounds, 2e9, why, sizeof why));
    CHECK_EQ_STR(why, "slow: 100.0 MB/s, under 25% of the median 2.00 GB/s");
    CHECK(pf_figure_passes(&thin, &bounds, 3e8, why, sizeof why) && !why[0]);
    struct pf_bounds floor = {0, 5e8, 0};
    CHECK(!pf_figure_passes(&thin, &floor, -1, why, sizeof why));
    CHECK(strstr(why, "under --preflight-min-bandwidth 500.0 MB/s") != NULL);
    struct pf_figure figs[3] = {ok(0, 1), ok(0, 3), fail("x")};
    CHECK(pf_median_bw(figs, 3) == 3);   /* the upper median of the ones that ran */
}

/* Four nodes: node 2 slow, node 3 unreachable. Round 1 pairs them together; round 2 meets each
 * with a good node; both are named, nodes 0 and 1 stay good. */
static void test_two_bad_nodes_named(void)
{
    struct pf_link l1[4], l2[4];
    int n1 = pf_plan_round1(4, l1);
    struct pf_figure f1[2] = {ok(0.0001, 2e9), fail("node-2: connect to 10.251.0.4:4000: no route "
                                                    "to host")};
    struct pf_judge j = {.n = 4, .bounds = bounds, .nlinks = {n1, 0}, .links = {l1, l2},
                         .figs = {f1, NULL}};
    enum pf_state st[4];
    int n2 = pf_plan_round2(&j, st, l2);
    CHECK(st[0] == PF_GOOD && st[1] == PF_GOOD && st[2] == PF_SUSPECT && st[3] == PF_SUSPECT);
    CHECK_EQ_INT(n2, 2);
    CHECK(l2[0].b == 2 && l2[1].b == 3);
    CHECK(l2[0].a == 0 && l2[1].a == 1);   /* the suspects spread over the good nodes */
    struct pf_figure f2[2] = {ok(0.0001, 5e6), fail("node-1: connect to 10.251.0.4:4000: no "
                                                    "route to host")};
    j.nlinks[1] = n2;
    j.figs[1] = f2;
    struct pf_node_verdict v[4];
    CHECK_EQ_INT(pf_verdict(&j, names, v), 2);
    CHECK(v[0].state == PF_GOOD && v[1].state == PF_GOOD);
    CHECK(v[2].state == PF_BAD && v[3].state == PF_BAD);
    CHECK(strstr(v[2].reason, "round 2 with node-0: slow: 5.0 MB/s, under 25% of the median "
                              "2.00 GB/s") != NULL);
    CHECK(strstr(v[3].reason, "with node-2: node-2: connect to 10.251.0.4:4000") != NULL);
    CHECK(strstr(v[3].reason, "round 2 with node-1: node-1: connect to") != NULL);
    CHECK_EQ_STR(v[2].kind, "slow");
    CHECK_EQ_STR(v[3].kind, "unreachable");
    CHECK(v[0].link == 0 && v[0].link_round == 0);
    CHECK(v[2].link == 0 && v[2].link_round == 1);
}

/* A suspect cleared: its round-1 partner was the bad one. */
static void test_partner_cleared(void)
{
    struct pf_link l1[4], l2[4];
    int n1 = pf_plan_round1(4, l1);
    struct pf_figure f1[2] = {ok(0.0001, 2e9), ok(0.0001, 1e7)};   /* 2-3 slow */
    struct pf_judge j = {.n = 4, .bounds = bounds, .nlinks = {n1, 0}, .links = {l1, l2},
                         .figs = {f1, NULL}};
    enum pf_state st[4];
    int n2 = pf_plan_round2(&j, st, l2);
    CHECK_EQ_INT(n2, 2);
    struct pf_figure f2[2] = {ok(0.0001, 1.9e9), ok(0.0001, 1e7)};  /* 2 fine, 3 slow again */
    j.nlinks[1] = n2;
    j.figs[1] = f2;
    struct pf_node_verdict v[4];
    CHECK_EQ_INT(pf_verdict(&j, names, v), 1);
    CHECK(v[2].state == PF_GOOD && v[3].state == PF_BAD);
    CHECK(v[2].reason[0] == '\0');
}

/* nccl: a node whose own GPUs fail is bad at once; its partner is re-tested and cleared. */
static void test_local_failure(void)
{
    struct pf_link l1[4], l2[4];
    int n1 = pf_plan_round1(4, l1);
    struct pf_figure local[4] = {ok(-1, 3e11), fail("init: timed out after 60.0s; aborted"),
                                 ok(-1, 3.1e11), ok(-1, 2.9e11)};
    struct pf_figure f1[2] = {fail("node-0: all_reduce: timed out"), ok(-1, 4e10)};
    struct pf_judge j = {.n = 4, .bounds = bounds, .local = local, .nlinks = {n1, 0},
                         .links = {l1, l2}, .figs = {f1, NULL}};
    enum pf_state st[4];
    int n2 = pf_plan_round2(&j, st, l2);
    CHECK(st[1] == PF_BAD && st[0] == PF_SUSPECT);
    CHECK_EQ_INT(n2, 1);
    CHECK(l2[0].b == 0);
    struct pf_figure f2[1] = {ok(-1, 4.1e10)};
    j.nlinks[1] = n2;
    j.figs[1] = f2;
    struct pf_node_verdict v[4];
    CHECK_EQ_INT(pf_verdict(&j, names, v), 1);
    CHECK(v[1].state == PF_BAD && v[0].state == PF_GOOD);
    CHECK_EQ_STR(v[1].reason, "its own GPUs: init: timed out after 60.0s; aborted");
    CHECK_EQ_STR(v[1].kind, "GPUs failed");
    /* a slow node's own all_reduce against the median of the nodes */
    local[1] = ok(-1, 1e10);
    j.nlinks[1] = 0;
    pf_plan_round2(&j, st, l2);
    CHECK(st[1] == PF_BAD);
}

/* Two nodes, the link fails both times: both named, with why nobody can tell more. */
static void test_two_nodes(void)
{
    struct pf_link l1[2], l2[2];
    int n1 = pf_plan_round1(2, l1);
    struct pf_figure f1[1] = {fail("node-1: timed out")};
    struct pf_judge j = {.n = 2, .bounds = bounds, .nlinks = {n1, 0}, .links = {l1, l2},
                         .figs = {f1, NULL}};
    enum pf_state st[2];
    int n2 = pf_plan_round2(&j, st, l2);
    CHECK_EQ_INT(n2, 1);   /* once more, in case it passes now */
    j.nlinks[1] = n2;
    j.figs[1] = f1;
    struct pf_node_verdict v[2];
    CHECK_EQ_INT(pf_verdict(&j, names, v), 2);
    /* one node alone: nothing to pair */
    struct pf_judge one = {.n = 1, .bounds = bounds};
    CHECK_EQ_INT(pf_plan_round2(&one, st, l2), 0);
    CHECK_EQ_INT(pf_verdict(&one, names, v), 0);
}

/* Five nodes (odd): node 0 pairs twice; a bad node 4 is named. */
static void test_odd_count(void)
{
    struct pf_link l1[5], l2[5];
    int n1 = pf_plan_round1(5, l1);
    struct pf_figure f1[3] = {ok(0.0001, 2e9), ok(0.0001, 2.1e9), fail("node-4: refused")};
    struct pf_judge j = {.n = 5, .bounds = bounds, .nlinks = {n1, 0}, .links = {l1, l2},
                         .figs = {f1, NULL}};
    enum pf_state st[5];
    int n2 = pf_plan_round2(&j, st, l2);
    CHECK(st[0] == PF_GOOD && st[4] == PF_SUSPECT);
    CHECK_EQ_INT(n2, 1);
    CHECK(l2[0].a == 2 || l2[0].a == 3);   /* the fastest good link's nodes go first */
    struct pf_figure f2[1] = {fail("node-4: refused")};
    j.nlinks[1] = n2;
    j.figs[1] = f2;
    struct pf_node_verdict v[5];
    CHECK_EQ_INT(pf_verdict(&j, names, v), 1);
    CHECK(v[4].state == PF_BAD);
}

int main(void)
{
    RUN(test_round1_pairs);
    RUN(test_combine_and_passes);
    RUN(test_two_bad_nodes_named);
    RUN(test_partner_cleared);
    RUN(test_local_failure);
    RUN(test_two_nodes);
    RUN(test_odd_count);
    return check_result();
}
