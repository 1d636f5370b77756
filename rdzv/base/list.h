/* rdzv/base/list.h — intrusive lists: the links live inside the listed structs, so linking and
 * unlinking never allocate, and one struct can sit in several lists at once.
 *
 * Two shapes, each the smallest that does its job:
 *  - list: doubly linked, its head a single pointer. O(1) push at the front and O(1) unlink of
 *    any node without knowing its head (a node knows the pointer it is linked from). For sets
 *    that lose members in any order: connections, hash chains, a key's waiters and watchers.
 *  - fifo: singly linked with a tail. O(1) push at the back, pop at the front and insert after a
 *    node. For queues: a key's queued items, requests waiting for their replies.
 * A zeroed head is an empty list of either shape. */
#ifndef PODRUN_RDZV_LIST_H
#define PODRUN_RDZV_LIST_H

#include <stdbool.h>
#include <stddef.h>

/* The struct that holds `member` at ptr. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- list ---- */

typedef struct list_node {
    struct list_node *next;
    struct list_node **pprev; /* the pointer that points at this node; NULL: not linked */
} list_node_t;

typedef struct list_head {
    list_node_t *first;
} list_head_t;

static inline bool list_empty(const list_head_t *h)
{
    return h->first == NULL;
}

static inline void list_push(list_head_t *h, list_node_t *n)
{
    n->next = h->first;
    if (n->next)
        n->next->pprev = &n->next;
    h->first = n;
    n->pprev = &h->first;
}

static inline void list_unlink(list_node_t *n)
{
    *n->pprev = n->next;
    if (n->next)
        n->next->pprev = n->pprev;
    n->next = NULL;
    n->pprev = NULL;
}

/* Takes the first node off, or returns NULL. A loop that empties a list (and frees what it
 * takes) takes nodes off with this: the head's new first is written through the head, which
 * list_unlink cannot do, so whoever reads the loop (a reader or the static analyzer) sees the
 * list shrink. */
static inline list_node_t *list_shift(list_head_t *h)
{
    list_node_t *n = h->first;
    if (!n)
        return NULL;
    h->first = n->next;
    if (n->next)
        n->next->pprev = &h->first;
    n->next = NULL;
    n->pprev = NULL;
    return n;
}

/* The node before n in h, or NULL when n is the first: walks a list from its end. */
static inline list_node_t *list_prev(const list_head_t *h, const list_node_t *n)
{
    return n->pprev == &h->first ? NULL : container_of(n->pprev, list_node_t, next);
}

/* The last node, or NULL: O(length). */
static inline list_node_t *list_last(const list_head_t *h)
{
    list_node_t *n = h->first;
    while (n && n->next)
        n = n->next;
    return n;
}

/* Walks h; the body may unlink (and free) the node it is at, nothing else. */
#define list_for_each_safe(pos, tmp, h)                                                  \
    for ((pos) = (h)->first, (tmp) = (pos) ? (pos)->next : NULL; (pos);              \
         (pos) = (tmp), (tmp) = (pos) ? (pos)->next : NULL)

/* ---- fifo ---- */

typedef struct fifo_node {
    struct fifo_node *next;
} fifo_node_t;

typedef struct fifo {
    fifo_node_t *first, *last;
} fifo_t;

static inline bool fifo_empty(const fifo_t *q)
{
    return q->first == NULL;
}

static inline void fifo_push(fifo_t *q, fifo_node_t *n)
{
    n->next = NULL;
    if (q->last)
        q->last->next = n;
    else
        q->first = n;
    q->last = n;
}

/* Takes the first node off, or returns NULL. */
static inline fifo_node_t *fifo_pop(fifo_t *q)
{
    fifo_node_t *n = q->first;
    if (n) {
        q->first = n->next;
        if (!q->first)
            q->last = NULL;
        n->next = NULL;
    }
    return n;
}

/* Links n right behind `at`, which is in q. */
static inline void fifo_insert_after(fifo_t *q, fifo_node_t *at, fifo_node_t *n)
{
    n->next = at->next;
    at->next = n;
    if (q->last == at)
        q->last = n;
}

/* Unlinks the node behind `prev` (NULL: the first), which must exist. */
static inline fifo_node_t *fifo_remove_after(fifo_t *q, fifo_node_t *prev)
{
    fifo_node_t *n = prev ? prev->next : q->first;
    if (prev)
        prev->next = n->next;
    else
        q->first = n->next;
    if (q->last == n)
        q->last = prev;
    n->next = NULL;
    return n;
}

#endif
