/* tests/unit/launcher/preflight/test_codec.c — the preflight records round-trip any text, and
 * bytes that are not a record are refused. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/preflight/codec.h"

static void test_node(void)
{
    struct pf_node_rec r = {.port = 41234, .nproc = 8, .rank_base = 16, .passed = true,
                            .hosts_store = true}, d;
    snprintf(r.name, sizeof r.name, "node\\with\nnewline");
    snprintf(r.host, sizeof r.host, "10.0.0.3");
    textbuf_t b = {0};
    CHECK_EQ_INT(pf_node_encode(&r, &b), 0);
    CHECK_EQ_INT(pf_node_decode(b.s, b.len, &d), 0);
    CHECK_EQ_STR(d.name, r.name);
    CHECK_EQ_STR(d.host, "10.0.0.3");
    CHECK(d.port == 41234 && d.nproc == 8 && d.rank_base == 16 && d.passed && d.hosts_store);
    CHECK_EQ_INT(pf_node_decode(b.s, b.len - 14, &d), -EINVAL);   /* hosts_store= missing */
    text_free(&b);
    static const char *bad[] = {"name=a\nhost=b\nport=70000\nnproc=1\nrank_base=0\npassed=0\n",
                                "name=a\\x\n", "=x\n", "name", "port=1 \n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(pf_node_decode(bad[i], strlen(bad[i]), &d), -EINVAL);
}

static void test_figure(void)
{
    struct pf_figure f = {.done = true, .ok = false, .rtt = 0.000123, .bw = 2.5e9}, d;
    snprintf(f.reason, sizeof f.reason, "connect: no route to host");
    textbuf_t b = {0};
    CHECK_EQ_INT(pf_figure_encode(&f, &b), 0);
    CHECK_EQ_INT(pf_figure_decode(b.s, b.len, &d), 0);
    CHECK(d.done && !d.ok && d.rtt == 0.000123 && d.bw == 2.5e9);
    CHECK_EQ_STR(d.reason, f.reason);
    text_free(&b);
    const char *nan = "ok=1\nrtt=nan\nbw=1\nreason=\n";
    CHECK_EQ_INT(pf_figure_decode(nan, strlen(nan), &d), -EINVAL);
}

static void test_plan_and_verdict(void)
{
    struct pf_link l[2] = {{0, 1}, {2, 3}};
    textbuf_t b = {0};
    struct pf_plan_rec p;
    CHECK_EQ_INT(pf_plan_encode(false, l, 2, &b), 0);
    CHECK_EQ_INT(pf_plan_decode(b.s, b.len, 4, &p), 0);
    CHECK(!p.skip && p.nlinks == 2 && p.links[1].a == 2 && p.links[1].b == 3);
    pf_plan_free(&p);
    CHECK_EQ_INT(pf_plan_decode(b.s, b.len, 3, &p), -EINVAL);   /* node 3 of 3 nodes */
    text_free(&b);
    CHECK_EQ_INT(pf_plan_encode(false, l, 0, &b), 0);
    CHECK_EQ_INT(pf_plan_decode(b.s, b.len, 4, &p), 0);
    CHECK(!p.skip && p.nlinks == 0);
    text_free(&b);
    CHECK_EQ_INT(pf_plan_decode("", 0, 4, &p), -EINVAL);

    pf_verdict_begin(&b, 4, false);
    pf_verdict_host_bad(&b);
    pf_verdict_bad(&b, 3, "node\t3", "unreachable", "connect: a\tb");
    pf_verdict_line(&b, "  node-0  0  ok");
    struct pf_verdict_rec v;
    CHECK_EQ_INT(pf_verdict_decode(b.s, b.len, &v), 0);
    CHECK(v.nodes == 4 && !v.skip && v.host_bad && v.nbad == 1 && v.bad[0] == 3 &&
          v.nlines == 1);
    CHECK_EQ_STR(v.bad_name[0], "node 3");
    CHECK_EQ_STR(v.bad_kind[0], "unreachable");
    CHECK_EQ_STR(v.bad_reason[0], "connect: a\tb");
    CHECK_EQ_STR(v.lines[0], "  node-0  0  ok");
    pf_verdict_free(&v);
    text_free(&b);
    const char *out_of_range = "nodes=2\nbad=5\tx\tslow\ty\n";
    CHECK_EQ_INT(pf_verdict_decode(out_of_range, strlen(out_of_range), &v), -EINVAL);
}

int main(void)
{
    RUN(test_node);
    RUN(test_figure);
    RUN(test_plan_and_verdict);
    return check_result();
}
