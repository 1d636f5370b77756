/* tests/unit/rdzv/test_badnodes.c — the list of nodes a job remembers (rdzv/badnodes.c): what
 * counts, the order, a full list, and its text in records, also from a broken peer. */
#include <stdio.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/badnodes.h"

static rdzv_failure_t rec(const char *node, const char *reason, int exclude)
{
    rdzv_failure_t f;
    rdzv_failure_init(&f);
    snprintf(f.node_name, sizeof f.node_name, "%s", node);
    snprintf(f.reason, sizeof f.reason, "%s", reason);
    f.exclude = exclude;
    return f;
}

/* The root cause counts for its node; a node that left on purpose does not; checks count for
 * every node that failed one; a worker's request makes its node bad at once. */
static void test_rules(void)
{
    badnodes_t l = {0};
    rdzv_failure_t f[3] = {rec("n1", "exit code 1", 0), rec("n2", "exit code 1", 0),
                           rec("n3", "agent left: " BADNODES_PREFLIGHT, 0)};
    badnodes_note(&l, f, 3);
    CHECK_EQ_INT(l.n, 2);
    CHECK_EQ_STR(badnodes_find(&l, "n1")->name, "n1");
    CHECK_EQ_INT(badnodes_find(&l, "n1")->caused, 1);
    CHECK(badnodes_find(&l, "n2") == NULL);     /* not the root cause */
    CHECK_EQ_INT(badnodes_find(&l, "n3")->checks, 1);
    rdzv_failure_t left = rec("n4", "agent left: SIGTERM", 0);
    badnodes_note(&l, &left, 1);
    CHECK(badnodes_find(&l, "n4") == NULL);
    rdzv_failure_t asked = rec("n5", "exit code 1; asked to leave its node out", 1);
    badnodes_note(&l, &asked, 1);
    CHECK(badnodes_is_bad(badnodes_find(&l, "n5"), 0));
    CHECK(!badnodes_is_bad(badnodes_find(&l, "n1"), 0));
    CHECK(badnodes_is_bad(badnodes_find(&l, "n1"), 1));
    CHECK(!badnodes_is_bad(badnodes_find(&l, "n1"), 2));
    CHECK_EQ_STR(l.v[0].name, "n5");    /* worst first */
    char line[256];
    badnodes_describe(badnodes_find(&l, "n5"), line, sizeof line);
    CHECK_EQ_STR(line, "n5 (1 failure; a worker asked to leave it out)");
}

/* A full list takes a new node in place of the least bad one, never of one left out. */
static void test_full(void)
{
    badnodes_t l = {0};
    char name[32];
    for (int i = 0; i < RDZV_MAX_BAD_NODES; i++) {
        snprintf(name, sizeof name, "n%02d", i);
        rdzv_failure_t f = rec(name, "exit code 1", 0);
        badnodes_note(&l, &f, 1);
        badnodes_note(&l, &f, 1);
    }
    rdzv_failure_t g = rec("new", "exit code 1", 0);
    badnodes_note(&l, &g, 1);
    CHECK_EQ_INT(l.n, RDZV_MAX_BAD_NODES);
    CHECK(badnodes_find(&l, "new") != NULL);
    for (int i = 0; i < l.n; i++)
        l.v[i].out = 1;
    rdzv_failure_t h = rec("newer", "exit code 1", 0);
    badnodes_note(&l, &h, 1);
    CHECK(badnodes_find(&l, "newer") == NULL);
}

/* The text round-trips in an end record; lines that do not parse are skipped. */
static void test_text(void)
{
    rdzv_decision_t d = {0}, e;
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0}, g[RDZV_MAX_FAILURES];
    rdzv_failure_init(&f[0]);
    f[0].fatal = RDZV_FATAL_ASKED;
    f[0].exclude = 1;
    d.action = RDZV_RESTART;
    d.n = 1;
    d.failures = f;
    d.n_bad = 2;
    d.bad[0] = (rdzv_badnode_t){"node one", 2, 1, 0, 1};
    d.bad[1] = (rdzv_badnode_t){"n2", 1, 0, 1, 0};
    char buf[8192];
    int len = rdzv_end_encode(&d, buf, sizeof buf);
    CHECK(len > 0);
    CHECK_EQ_INT(rdzv_end_decode(buf, (size_t)len, &e, g), 0);
    CHECK_EQ_INT(e.n_bad, 2);
    CHECK_EQ_STR(e.bad[0].name, "node one");
    CHECK_EQ_INT(e.bad[0].caused, 2);
    CHECK_EQ_INT(e.bad[0].checks, 1);
    CHECK_EQ_INT(e.bad[0].out, 1);
    CHECK_EQ_INT(e.bad[1].asked, 1);
    CHECK_EQ_INT(g[0].fatal, RDZV_FATAL_ASKED);
    CHECK_EQ_INT(g[0].exclude, 1);
    const char *junk = "bad=x y z\\n1 2\\n-1 0 0 0 neg\\n3 0 0 1\\n1 0 0 0 ok\n";
    rdzv_badnode_t v[4];
    CHECK_EQ_INT(badnodes_take(junk, strlen(junk), "bad", v, 4), 1);
    CHECK_EQ_STR(v[0].name, "ok");
    CHECK_EQ_INT(badnodes_take("", 0, "bad", v, 4), 0);
}

int main(void)
{
    test_rules();
    test_full();
    test_text();
    return check_result();
}
