/* tests/unit/rdzv/test_ranks.c — node ranks and global ranks for a closing round. */
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/ranks.h"

static void test_natural_sort(void)
{
    CHECK(rdzv_natural_cmp("worker-2", "worker-10") < 0);
    CHECK(rdzv_natural_cmp("worker-10", "worker-9") > 0);
    CHECK(rdzv_natural_cmp("a", "a") == 0);
    CHECK(rdzv_natural_cmp("node007", "node7") == 0);
    CHECK(rdzv_natural_cmp("a1b2", "a1b10") < 0);
    CHECK(rdzv_natural_cmp("abc", "abcd") < 0);
    CHECK(rdzv_natural_cmp("w-1-2", "w-1-10") < 0);
}


#define NODE(name, addr, id, want, nproc) {name, addr, id, want, nproc, -7, -7, NULL, 0}
#define DNODE(dom, name, want) {name, "", name, want, 1, -7, -7, dom, 0}

/* Every node rank once, order[] its inverse, rank_base the running sum in node-rank order. */
static void check_consistent(const rdzv_rank_node_t *v, int n, const int *order, long long world)
{
    long long base = 0;
    for (int r = 0; r < n; r++) {
        CHECK(order[r] >= 0 && order[r] < n);
        CHECK_EQ_INT(v[order[r]].node_rank, r);
        CHECK_EQ_INT(v[order[r]].rank_base, base);
        base += v[order[r]].nproc;
    }
    CHECK_EQ_INT(world, base);
}

static void test_sorted_by_name_addr_id(void)
{
    rdzv_rank_node_t v[] = {
        NODE("worker-10", "10.0.0.1", "aa", -1, 2),
        NODE("worker-2", "10.0.0.9", "bb", -1, 1),
        NODE("worker-2", "10.0.0.3", "cc", -1, 4),   /* same name: the address decides */
        NODE("worker-2", "10.0.0.3", "00", -1, 3),   /* same address too: the id decides */
    };
    int order[4];
    long long world = rdzv_assign_ranks(v, 4, order);
    CHECK_EQ_INT(world, 10);
    check_consistent(v, 4, order, world);
    CHECK_EQ_INT(v[3].node_rank, 0);
    CHECK_EQ_INT(v[2].node_rank, 1);
    CHECK_EQ_INT(v[1].node_rank, 2);
    CHECK_EQ_INT(v[0].node_rank, 3);   /* worker-10 after worker-2 */
    CHECK_EQ_INT(v[0].rank_base, 8);   /* 3 + 4 + 1 workers before it */
}

static void test_wanted_ranks_honoured(void)
{
    rdzv_rank_node_t v[] = {
        NODE("a", "", "1", -1, 1),
        NODE("b", "", "2", 0, 1),      /* wants 0: gets it although "a" sorts first */
        NODE("c", "", "3", 5, 1),      /* does not fit 3 nodes: a free rank */
    };
    int order[3];
    long long world = rdzv_assign_ranks(v, 3, order);
    check_consistent(v, 3, order, world);
    CHECK_EQ_INT(v[1].node_rank, 0);
    CHECK_EQ_INT(v[0].node_rank, 1);
    CHECK_EQ_INT(v[2].node_rank, 2);
}

static void test_same_rank_wanted_twice(void)
{
    rdzv_rank_node_t v[] = {
        NODE("y", "", "1", 1, 2),
        NODE("x", "", "2", 1, 3),      /* first in the sort order: it keeps rank 1 */
    };
    int order[2];
    long long world = rdzv_assign_ranks(v, 2, order);
    check_consistent(v, 2, order, world);
    CHECK_EQ_INT(v[1].node_rank, 1);
    CHECK_EQ_INT(v[0].node_rank, 0);
}

/* The same nodes in any input order get the same ranks: restarts keep them. */
static void test_stable_across_input_order(void)
{
    rdzv_rank_node_t a[] = {NODE("n-3", "", "c", -1, 1), NODE("n-1", "", "a", -1, 2),
                            NODE("n-2", "", "b", 2, 3)};
    rdzv_rank_node_t b[] = {NODE("n-2", "", "b", 2, 3), NODE("n-3", "", "c", -1, 1),
                            NODE("n-1", "", "a", -1, 2)};
    int oa[3], ob[3];
    rdzv_assign_ranks(a, 3, oa);
    rdzv_assign_ranks(b, 3, ob);
    for (int r = 0; r < 3; r++)
        CHECK_EQ_STR(a[oa[r]].name, b[ob[r]].name);
    CHECK_EQ_STR(a[oa[0]].name, "n-1");
    CHECK_EQ_STR(a[oa[1]].name, "n-3");
    CHECK_EQ_STR(a[oa[2]].name, "n-2");
    CHECK_EQ_INT(rdzv_assign_ranks(a, 0, oa), 0);
}

/* Nodes of one NVLink domain get contiguous node ranks: the domain sorts before the name. */
static void test_domains_contiguous(void)
{
    rdzv_rank_node_t v[] = {
        DNODE("B/1", "node-1", -1), DNODE("A/1", "node-2", -1), DNODE("B/1", "node-3", -1),
        DNODE("A/1", "node-4", -1), DNODE("A/1", "node-5", -1),
    };
    int order[5];
    long long world = rdzv_assign_ranks(v, 5, order);
    check_consistent(v, 5, order, world);
    CHECK_EQ_INT(v[1].node_rank, 0);   /* A: node-2, node-4, node-5 */
    CHECK_EQ_INT(v[3].node_rank, 1);
    CHECK_EQ_INT(v[4].node_rank, 2);
    CHECK_EQ_INT(v[0].node_rank, 3);   /* then B: node-1, node-3 */
    CHECK_EQ_INT(v[2].node_rank, 4);
}

/* No domain is a domain of its own ("" sorts first); without any, the order is the old one. */
static void test_no_domain_first(void)
{
    rdzv_rank_node_t v[] = {
        DNODE("A/1", "node-1", -1), DNODE(NULL, "node-2", -1), DNODE("", "node-3", -1),
    };
    int order[3];
    check_consistent(v, 3, order, rdzv_assign_ranks(v, 3, order));
    CHECK_EQ_INT(v[1].node_rank, 0);
    CHECK_EQ_INT(v[2].node_rank, 1);
    CHECK_EQ_INT(v[0].node_rank, 2);
}

/* 3 of A, 2 of B, 1 of C, segments of 2: two of A (the first in the order) and both of B are
 * taken, the third of A waits, C is too small for one segment. */
static void test_pick_whole_segments(void)
{
    rdzv_rank_node_t v[] = {
        DNODE("A/1", "a-3", -1), DNODE("B/1", "b-1", -1), DNODE("A/1", "a-1", -1),
        DNODE("C/1", "c-1", -1), DNODE("B/1", "b-2", -1), DNODE("A/1", "a-2", -1),
    };
    int take[6];
    CHECK_EQ_INT(rdzv_pick_segments(v, 6, 2, 8, take), 4);
    CHECK_EQ_INT(take[2], 1);
    CHECK_EQ_INT(take[5], 1);
    CHECK_EQ_INT(take[0], 0);    /* a-3: the remainder of A */
    CHECK_EQ_INT(take[1], 1);
    CHECK_EQ_INT(take[4], 1);
    CHECK_EQ_INT(take[3], -1);   /* C: fewer than 2 nodes */
}

/* At most MAX: domains in order, whole segments only, the others wait. */
static void test_pick_bounded_by_max(void)
{
    rdzv_rank_node_t v[] = {
        DNODE("A/1", "a-1", -1), DNODE("A/1", "a-2", -1), DNODE("B/1", "b-1", -1),
        DNODE("B/1", "b-2", -1), DNODE("A/1", "a-3", -1), DNODE("A/1", "a-4", -1),
    };
    int take[6];
    CHECK_EQ_INT(rdzv_pick_segments(v, 6, 2, 4, take), 4);
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(take[i], v[i].domain[0] == 'A');
    /* MAX that is no multiple of the segment counts whole segments below it */
    CHECK_EQ_INT(rdzv_pick_segments(v, 6, 4, 6, take), 4);
    CHECK_EQ_INT(take[2], -1);
    /* the last round's members (a-3, a-4) are taken before a-1 and a-2, which sort first */
    v[4].keep = v[5].keep = 1;
    CHECK_EQ_INT(rdzv_pick_segments(v, 6, 2, 2, take), 2);
    CHECK_EQ_INT(take[4], 1);
    CHECK_EQ_INT(take[5], 1);
    CHECK_EQ_INT(take[0], 0);
    CHECK_EQ_INT(take[1], 0);
    CHECK_EQ_INT(take[2], 0);
    v[4].keep = v[5].keep = 0;
    /* segments of 1 take everyone up to MAX */
    CHECK_EQ_INT(rdzv_pick_segments(v, 6, 1, 8, take), 6);
}

int main(void)
{
    RUN(test_natural_sort);
    RUN(test_sorted_by_name_addr_id);
    RUN(test_wanted_ranks_honoured);
    RUN(test_same_rank_wanted_twice);
    RUN(test_stable_across_input_order);
    RUN(test_domains_contiguous);
    RUN(test_no_domain_first);
    RUN(test_pick_whole_segments);
    RUN(test_pick_bounded_by_max);
    return check_result();
}
