/* tests/unit/rdzv/base/test_list.c — the intrusive list and fifo. */
#include "tests/unit/check.h"
#include "rdzv/base/list.h"

typedef struct item {
    int v;
    list_node_t node;
    fifo_node_t qnode;
} item_t;

#define ITEM(n) container_of(n, item_t, node)

static void test_list(void)
{
    item_t it[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
    list_head_t h = {0};
    CHECK(list_empty(&h) && list_last(&h) == NULL);
    for (int i = 0; i < 4; i++)
        list_push(&h, &it[i].node);
    /* newest first: 3 2 1 0; walked back from the end: 0 1 2 3 */
    int want = 0;
    for (list_node_t *n = list_last(&h); n; n = list_prev(&h, n))
        CHECK_EQ_INT(ITEM(n)->v, want++);
    CHECK_EQ_INT(want, 4);
    /* unlink from the middle, the front and the end, without the head */
    list_unlink(&it[2].node);
    list_unlink(&it[3].node);
    list_unlink(&it[0].node);
    CHECK(h.first == &it[1].node && it[1].node.next == NULL);
    CHECK(it[2].node.pprev == NULL);
    list_node_t *n, *tmp;
    int seen = 0;
    list_for_each_safe(n, tmp, &h) {
        list_unlink(n); /* the body may unlink where it is */
        seen++;
    }
    CHECK_EQ_INT(seen, 1);
    CHECK(list_empty(&h));
}

/* list_shift takes the first node off and leaves the rest linked to the head */
static void test_list_shift(void)
{
    item_t it[3] = {{.v = 0}, {.v = 1}, {.v = 2}};
    list_head_t h = {0};
    CHECK(list_shift(&h) == NULL);
    for (int i = 0; i < 3; i++)
        list_push(&h, &it[i].node);
    int want = 2, seen = 0;
    for (list_node_t *n; (n = list_shift(&h)); seen++) {
        CHECK_EQ_INT(ITEM(n)->v, want--);
        CHECK(n->next == NULL && n->pprev == NULL);
        CHECK(h.first == NULL || h.first->pprev == &h.first);
    }
    CHECK_EQ_INT(seen, 3);
    CHECK(list_empty(&h));
    list_push(&h, &it[1].node); /* usable again once empty */
    list_unlink(&it[1].node);
    CHECK(list_empty(&h));
}

static void test_fifo(void)
{
    item_t it[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
    fifo_t q = {0};
    CHECK(fifo_empty(&q) && fifo_pop(&q) == NULL);
    fifo_push(&q, &it[0].qnode);
    fifo_push(&q, &it[2].qnode);
    fifo_insert_after(&q, &it[0].qnode, &it[1].qnode);
    fifo_insert_after(&q, &it[2].qnode, &it[3].qnode); /* after the last: the new last */
    for (int i = 0; i < 4; i++) {
        fifo_node_t *n = fifo_pop(&q);
        CHECK(n == &it[i].qnode);
    }
    CHECK(fifo_empty(&q) && q.last == NULL);
    fifo_push(&q, &it[1].qnode); /* usable again once empty */
    CHECK(q.first == &it[1].qnode && q.last == &it[1].qnode);
}

int main(void)
{
    RUN(test_list);
    RUN(test_list_shift);
    RUN(test_fifo);
    return check_result();
}
