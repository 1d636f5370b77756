/* rdzv/store/keyspace.c — keys, values, queues, waiters and watchers (see keyspace.h). */
#include "rdzv/store/keyspace.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ks_item {
    fifo_node_t node;           /* first: a popped item's bytes are moved over it */
    size_t len;
    char data[];
} ks_item_t;

typedef struct ks_entry {
    list_node_t chain;          /* in its hash bucket */
    uint64_t hash;
    char *val;                  /* NUL-terminated; NULL when empty */
    size_t vlen, vcap;
    list_head_t waiters;        /* ks_link_t: waits for this key, newest first */
    list_head_t watchers;       /* ks_watch_t */
    fifo_t queue;               /* ks_item_t */
    size_t qlen;
    size_t klen;
    unsigned char present;
    char key[];
} ks_entry_t;

/* One missing key of one wait. */
typedef struct ks_link {
    struct ks_waiter *w;
    ks_entry_t *e;              /* NULL once the key was written */
    list_node_t node;           /* in e->waiters */
} ks_link_t;

typedef struct ks_waiter {
    ks_owner_t *owner;
    list_node_t onode;          /* in owner->waiters */
    size_t missing, nlinks;
    ks_link_t links[];
} ks_waiter_t;

typedef struct ks_watch {
    ks_owner_t *owner;
    ks_entry_t *e;
    list_node_t enode;          /* in e->watchers */
    list_node_t onode;          /* in owner->watches */
} ks_watch_t;

#define LINK(n) container_of(n, ks_link_t, node)
#define ENTRY(n) container_of(n, ks_entry_t, chain)

struct keyspace {
    list_head_t *buckets;
    size_t nbuckets, nentries, nkeys;
    size_t bytes, max_bytes;
    int unbounded; /* a keyspace_set_unbounded is running */
    uint64_t seed;
    ks_ready_cb on_ready;
    ks_watch_cb on_watch;
    void *arg;
};

static const char empty_val[1] = "";

/* FNV-1a with a per-keyspace seed, finished with a 64-bit mixer so that low bits spread. */
static uint64_t hash_key(const keyspace_t *ks, const char *k, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ ks->seed;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

int keyspace_new(size_t max_bytes, ks_ready_cb on_ready, ks_watch_cb on_watch, void *arg,
                 keyspace_t **out)
{
    keyspace_t *ks = calloc(1, sizeof *ks);
    if (!ks)
        return -ENOMEM;
    ks->nbuckets = 1024;
    ks->buckets = calloc(ks->nbuckets, sizeof *ks->buckets);
    if (!ks->buckets) {
        free(ks);
        return -ENOMEM;
    }
    ks->max_bytes = max_bytes ? max_bytes : SIZE_MAX;
    ks->seed = (uint64_t)(uintptr_t)ks * 0x9e3779b97f4a7c15ull;
    ks->on_ready = on_ready;
    ks->on_watch = on_watch;
    ks->arg = arg;
    *out = ks;
    return 0;
}

static ks_entry_t *find(keyspace_t *ks, const char *key, size_t klen, uint64_t h)
{
    for (list_node_t *n = ks->buckets[h & (ks->nbuckets - 1)].first; n; n = n->next) {
        ks_entry_t *e = ENTRY(n);
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    }
    return NULL;
}

static ks_entry_t *lookup(keyspace_t *ks, const char *key, size_t klen)
{
    return find(ks, key, klen, hash_key(ks, key, klen));
}

static void grow(keyspace_t *ks)
{
    size_t n = ks->nbuckets * 2;
    list_head_t *b = calloc(n, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < ks->nbuckets; i++) {
        list_node_t *c;
        while ((c = ks->buckets[i].first)) {
            list_unlink(c);
            list_push(&b[ENTRY(c)->hash & (n - 1)], c);
        }
    }
    free(ks->buckets);
    ks->buckets = b;
    ks->nbuckets = n;
}

static int room(const keyspace_t *ks, size_t more)
{
    return ks->unbounded || (more <= ks->max_bytes && ks->bytes <= ks->max_bytes - more);
}

/* The entry for key, created (not present, no value) if needed. */
static int get_entry(keyspace_t *ks, const char *key, size_t klen, ks_entry_t **out)
{
    uint64_t h = hash_key(ks, key, klen);
    ks_entry_t *e = find(ks, key, klen, h);
    if (e) {
        *out = e;
        return 0;
    }
    if (!room(ks, klen))
        return -ENOSPC;
    e = calloc(1, sizeof *e + klen + 1);
    if (!e)
        return -ENOMEM;
    e->hash = h;
    e->klen = klen;
    if (klen)
        memcpy(e->key, key, klen);
    if (ks->nentries >= 2 * ks->nbuckets) /* chains of 2 on average: half the table */
        grow(ks);
    list_push(&ks->buckets[h & (ks->nbuckets - 1)], &e->chain);
    ks->nentries++;
    ks->bytes += klen;
    *out = e;
    return 0;
}

/* Frees an entry nobody needs any more: no value, no waits, no watches, no queue. */
static void maybe_drop(keyspace_t *ks, ks_entry_t *e)
{
    if (e->present || !list_empty(&e->waiters) || !list_empty(&e->watchers) ||
        !fifo_empty(&e->queue))
        return;
    list_unlink(&e->chain);
    ks->nentries--;
    ks->bytes -= e->klen;
    free(e->val);
    free(e);
}

static void unlink_link(ks_link_t *l)
{
    list_unlink(&l->node);
    l->e = NULL;
}

/* A link's key was written and the link is out of the key's list: one key fewer missing. */
static void arrived(keyspace_t *ks, ks_link_t *l)
{
    ks_waiter_t *w = l->w;
    l->e = NULL;
    if (--w->missing > 0)
        return;
    ks_owner_t *o = w->owner;
    list_unlink(&w->onode);
    free(w);
    if (ks->on_ready)
        ks->on_ready(ks->arg, o);
}

static void satisfy(keyspace_t *ks, ks_link_t *l)
{
    list_unlink(&l->node);
    arrived(ks, l);
}

static void wake_all(keyspace_t *ks, ks_entry_t *e)
{
    list_node_t *n;
    while ((n = list_shift(&e->waiters)))
        arrived(ks, LINK(n));
}

static void notify(keyspace_t *ks, ks_entry_t *e, int type, const char *old, size_t oldlen)
{
    if (!ks->on_watch)
        return;
    const char *nv = e->present && e->val ? e->val : empty_val;
    size_t nl = e->present ? e->vlen : 0;
    for (list_node_t *n = e->watchers.first; n; n = n->next) {
        ks_watch_t *w = container_of(n, ks_watch_t, enode);
        ks->on_watch(ks->arg, w->owner, type, e->key, e->klen, old, oldlen, nv, nl);
    }
}

/* Stores val as e's value. When watchers need the old value it is handed to them first. With
 * `wake`, the key's waiters are woken: a plain wait's key exists now, and a barrier's waiters
 * are released by any write of its key, as in torch's servers. */
static int put_value(keyspace_t *ks, ks_entry_t *e, const char *val, size_t vlen, int wake)
{
    size_t old = e->present ? e->vlen : 0;
    if (vlen > old && !room(ks, vlen - old))
        return -ENOSPC;
    char *keep = NULL;
    size_t keeplen = 0;
    int was = e->present;
    if (!list_empty(&e->watchers) && was) {
        keep = e->val;
        keeplen = e->vlen;
        e->val = NULL;
        e->vcap = 0;
    }
    if (vlen >= e->vcap || e->vcap > 4 * (vlen + 64)) { /* vcap 0: no buffer */
        char *p = malloc(vlen + 1);
        if (!p) {
            if (keep) {
                e->val = keep;
                e->vcap = keeplen + 1;
            }
            return -ENOMEM;
        }
        free(e->val);
        e->val = p;
        e->vcap = vlen + 1;
    }
    if (vlen)
        memcpy(e->val, val, vlen);
    e->val[vlen] = 0;
    e->vlen = vlen;
    ks->bytes = ks->bytes - old + vlen;
    if (!was) {
        e->present = 1;
        ks->nkeys++;
    }
    if (!list_empty(&e->watchers))
        notify(ks, e, was ? WIRE_KEY_UPDATED : WIRE_KEY_CREATED, keep ? keep : empty_val,
               keeplen);
    free(keep);
    if (wake)
        wake_all(ks, e);
    return 0;
}

static int store_value(keyspace_t *ks, ks_entry_t *e, const char *val, size_t vlen)
{
    return put_value(ks, e, val, vlen, 1);
}

int keyspace_set(keyspace_t *ks, const char *key, size_t klen, const char *val, size_t vlen)
{
    ks_entry_t *e;
    int r = get_entry(ks, key, klen, &e);
    if (r)
        return r;
    r = store_value(ks, e, val, vlen);
    if (r)
        maybe_drop(ks, e);
    return r;
}

int keyspace_set_unbounded(keyspace_t *ks, const char *key, size_t klen, const char *val,
                           size_t vlen)
{
    ks->unbounded = 1;
    int r = keyspace_set(ks, key, klen, val, vlen);
    ks->unbounded = 0;
    return r;
}

int keyspace_get(keyspace_t *ks, const char *key, size_t klen, const char **val, size_t *vlen)
{
    ks_entry_t *e = lookup(ks, key, klen);
    if (!e || !e->present) {
        *val = empty_val;
        *vlen = 0;
        return 0;
    }
    *val = e->val ? e->val : empty_val;
    *vlen = e->vlen;
    return 1;
}

/* std::stoll on the stored bytes: blanks, sign, at least one digit, the rest ignored. */
static int parse_ll(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')))
        i++;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (i >= n || s[i] < '0' || s[i] > '9')
        return -EINVAL;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (lim - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* The entry of a counter key (ADD, BARRIER) and the number it holds: 0 when absent; -EINVAL
 * when it holds something else. */
static int counter_entry(keyspace_t *ks, const char *key, size_t klen, ks_entry_t **e,
                         int64_t *cur)
{
    int r = get_entry(ks, key, klen, e);
    *cur = 0;
    if (r || !(*e)->present)
        return r;
    return parse_ll((*e)->val ? (*e)->val : "", (*e)->vlen, cur);
}

int keyspace_add(keyspace_t *ks, const char *key, size_t klen, int64_t delta, int64_t *out)
{
    ks_entry_t *e;
    int64_t cur;
    int r = counter_entry(ks, key, klen, &e, &cur);
    if (r)
        return r;
    if ((delta > 0 && cur > INT64_MAX - delta) || (delta < 0 && cur < INT64_MIN - delta)) {
        maybe_drop(ks, e);
        return -ERANGE;
    }
    cur += delta;
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)cur);
    r = store_value(ks, e, buf, (size_t)n);
    if (r) {
        maybe_drop(ks, e);
        return r;
    }
    *out = cur;
    return 0;
}

int keyspace_barrier(keyspace_t *ks, ks_owner_t *owner, const char *key, size_t klen,
                     int64_t world, int64_t *count)
{
    ks_entry_t *e;
    int64_t cur;
    int r = counter_entry(ks, key, klen, &e, &cur);
    if (r)
        return r;
    if (cur == INT64_MAX)
        return -ERANGE;
    int last = ++cur >= world;
    ks_waiter_t *w = NULL;
    if (!last && !(w = calloc(1, sizeof *w + sizeof(ks_link_t)))) {
        maybe_drop(ks, e);
        return -ENOMEM;
    }
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)cur);
    /* an arrival that is not the last wakes nobody, not even those waiting for the key to exist
     * (torch's servers do the same) */
    r = put_value(ks, e, buf, (size_t)n, last);
    if (r) {
        free(w);
        maybe_drop(ks, e);
        return r;
    }
    *count = cur;
    if (last)
        return 1;
    w->owner = owner;
    w->missing = w->nlinks = 1;
    w->links[0].w = w;
    w->links[0].e = e;
    list_push(&e->waiters, &w->links[0].node);
    list_push(&owner->waiters, &w->onode);
    return 0;
}

int keyspace_compare_set(keyspace_t *ks, const char *key, size_t klen, const char *exp,
                         size_t elen, const char *des, size_t dlen, const char **cur,
                         size_t *curlen)
{
    ks_entry_t *e = lookup(ks, key, klen);
    if (!e || !e->present) {
        if (elen != 0) {
            *cur = exp;
            *curlen = elen;
            return 0;
        }
        int r = keyspace_set(ks, key, klen, des, dlen);
        if (r)
            return r;
        *cur = des;
        *curlen = dlen;
        return 1;
    }
    int swapped = 0;
    if (e->vlen == elen && (elen == 0 || memcmp(e->val, exp, elen) == 0)) {
        int r = store_value(ks, e, des, dlen);
        if (r)
            return r;
        swapped = 1;
    }
    *cur = e->val ? e->val : empty_val;
    *curlen = e->vlen;
    return swapped;
}

int keyspace_append(keyspace_t *ks, const char *key, size_t klen, const char *val, size_t vlen)
{
    ks_entry_t *e;
    int r = get_entry(ks, key, klen, &e);
    if (r)
        return r;
    if (!e->present || !list_empty(&e->watchers)) {
        /* plain set path: creation wakes waiters, watchers see old and new */
        char *joined = NULL;
        size_t jl = vlen;
        const char *src = val;
        if (e->present && e->vlen) {
            if (vlen > SIZE_MAX - e->vlen || !(joined = malloc(e->vlen + vlen + 1)))
                return -ENOMEM;
            memcpy(joined, e->val, e->vlen);
            if (vlen)
                memcpy(joined + e->vlen, val, vlen);
            jl = e->vlen + vlen;
            src = joined;
        }
        r = store_value(ks, e, src, jl);
        free(joined);
        if (r)
            maybe_drop(ks, e);
        return r;
    }
    if (!room(ks, vlen))
        return -ENOSPC;
    if (e->vlen + vlen + 1 > e->vcap) {
        size_t cap = e->vcap * 2;
        if (cap < e->vlen + vlen + 1)
            cap = e->vlen + vlen + 1;
        char *p = realloc(e->val, cap);
        if (!p)
            return -ENOMEM;
        e->val = p;
        e->vcap = cap;
    }
    if (vlen)
        memcpy(e->val + e->vlen, val, vlen);
    e->vlen += vlen;
    e->val[e->vlen] = 0;
    ks->bytes += vlen;
    wake_all(ks, e); /* a barrier's waiters */
    return 0;
}

static void drop_value(keyspace_t *ks, ks_entry_t *e)
{
    char *old = e->val;
    size_t oldlen = e->vlen;
    e->val = NULL;
    e->vlen = e->vcap = 0;
    e->present = 0;
    ks->nkeys--;
    ks->bytes -= oldlen;
    if (!list_empty(&e->watchers))
        notify(ks, e, WIRE_KEY_DELETED, old ? old : empty_val, oldlen);
    free(old);
}

int keyspace_delete(keyspace_t *ks, const char *key, size_t klen)
{
    ks_entry_t *e = lookup(ks, key, klen);
    if (!e || !e->present)
        return 0;
    drop_value(ks, e);
    maybe_drop(ks, e);
    return 1;
}

size_t keyspace_num_keys(const keyspace_t *ks)
{
    return ks->nkeys;
}

size_t keyspace_bytes(const keyspace_t *ks)
{
    return ks->bytes;
}

static int exists(const ks_entry_t *e)
{
    return e && (e->present || !fifo_empty(&e->queue));
}

int keyspace_check(keyspace_t *ks, const wire_str_t *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!exists(lookup(ks, keys[i].p, keys[i].len)))
            return 0;
    return 1;
}

int keyspace_wait(keyspace_t *ks, ks_owner_t *owner, const wire_str_t *keys, size_t n)
{
    size_t missing = 0;
    for (size_t i = 0; i < n; i++)
        if (!exists(lookup(ks, keys[i].p, keys[i].len)))
            missing++;
    if (missing == 0)
        return 1;
    ks_waiter_t *w = calloc(1, sizeof *w + missing * sizeof(ks_link_t));
    if (!w)
        return -ENOMEM;
    w->owner = owner;
    size_t j = 0;
    for (size_t i = 0; i < n && j < missing; i++) {
        ks_entry_t *e;
        int r = get_entry(ks, keys[i].p, keys[i].len, &e);
        if (r) {
            while (j > 0) {
                ks_link_t *l = &w->links[--j];
                ks_entry_t *le = l->e;
                unlink_link(l);
                maybe_drop(ks, le);
            }
            free(w);
            return r;
        }
        if (exists(e))
            continue;
        ks_link_t *l = &w->links[j++];
        l->w = w;
        l->e = e;
        list_push(&e->waiters, &l->node);
    }
    w->missing = w->nlinks = j;
    list_push(&owner->waiters, &w->onode);
    return 0;
}

size_t keyspace_cancel_waits(keyspace_t *ks, ks_owner_t *owner)
{
    size_t n = 0;
    list_node_t *on;
    while ((on = list_shift(&owner->waiters))) {
        ks_waiter_t *w = container_of(on, ks_waiter_t, onode);
        for (size_t i = 0; i < w->nlinks; i++) {
            ks_entry_t *e = w->links[i].e;
            if (e) {
                unlink_link(&w->links[i]);
                maybe_drop(ks, e);
            }
        }
        free(w);
        n++;
    }
    return n;
}

int keyspace_watch(keyspace_t *ks, ks_owner_t *owner, const char *key, size_t klen)
{
    ks_entry_t *e;
    int r = get_entry(ks, key, klen, &e);
    if (r)
        return r;
    ks_watch_t *w = calloc(1, sizeof *w);
    if (!w) {
        maybe_drop(ks, e);
        return -ENOMEM;
    }
    w->owner = owner;
    w->e = e;
    list_push(&e->watchers, &w->enode);
    list_push(&owner->watches, &w->onode);
    return 0;
}

void keyspace_release(keyspace_t *ks, ks_owner_t *owner)
{
    keyspace_cancel_waits(ks, owner);
    list_node_t *on;
    while ((on = list_shift(&owner->watches))) {
        ks_watch_t *w = container_of(on, ks_watch_t, onode);
        ks_entry_t *e = w->e;
        if (e)
            list_unlink(&w->enode);
        free(w);
        if (e)
            maybe_drop(ks, e);
    }
}

int keyspace_queue_push(keyspace_t *ks, const char *key, size_t klen, const char *val,
                        size_t vlen)
{
    ks_entry_t *e;
    int r = get_entry(ks, key, klen, &e);
    if (r)
        return r;
    if (!room(ks, vlen))
        return maybe_drop(ks, e), -ENOSPC;
    ks_item_t *it = malloc(sizeof *it + vlen + 1);
    if (!it)
        return maybe_drop(ks, e), -ENOMEM;
    it->len = vlen;
    if (vlen)
        memcpy(it->data, val, vlen);
    it->data[vlen] = 0;
    fifo_push(&e->queue, &it->node);
    e->qlen++;
    ks->bytes += vlen;
    /* One item can feed one popper: wake waiters oldest first until one wait completes. The
     * list is newest first, so walk it from its end. */
    list_node_t *n = list_last(&e->waiters);
    while (n) {
        list_node_t *prev = list_prev(&e->waiters, n);
        ks_link_t *l = LINK(n);
        int last = l->w->missing == 1;
        satisfy(ks, l);
        if (last)
            break;
        n = prev;
    }
    return 0;
}

int64_t keyspace_queue_pop(keyspace_t *ks, const char *key, size_t klen, char **item,
                           size_t *ilen)
{
    ks_entry_t *e = lookup(ks, key, klen);
    *item = NULL;
    *ilen = 0;
    if (!e || fifo_empty(&e->queue))
        return 0;
    int64_t n = (int64_t)e->qlen;
    ks_item_t *it = container_of(fifo_pop(&e->queue), ks_item_t, node);
    e->qlen--;
    ks->bytes -= it->len;
    /* hand the item's bytes over in place: the header goes in front, so move the data */
    size_t len = it->len;
    memmove(it, it->data, len + 1);
    *item = (char *)it;
    *ilen = len;
    maybe_drop(ks, e);
    return n;
}

int64_t keyspace_queue_len(keyspace_t *ks, const char *key, size_t klen)
{
    ks_entry_t *e = lookup(ks, key, klen);
    return e ? (int64_t)e->qlen : 0;
}

int keyspace_foreach(keyspace_t *ks, int (*fn)(void *arg, const char *key, size_t klen,
                                               const char *val, size_t vlen), void *arg)
{
    for (size_t i = 0; i < ks->nbuckets; i++)
        for (list_node_t *n = ks->buckets[i].first; n; n = n->next) {
            ks_entry_t *e = ENTRY(n);
            if (e->present) {
                int r = fn(arg, e->key, e->klen, e->val ? e->val : empty_val, e->vlen);
                if (r)
                    return r;
            }
        }
    return 0;
}

/* Frees every queued item of e. */
static void drop_queue(keyspace_t *ks, ks_entry_t *e)
{
    fifo_node_t *n;
    while ((n = fifo_pop(&e->queue))) {
        ks_item_t *it = container_of(n, ks_item_t, node);
        ks->bytes -= it->len;
        free(it);
    }
    e->qlen = 0;
}

size_t keyspace_delete_except(keyspace_t *ks, const char *keep, size_t keeplen)
{
    size_t n = 0;
    for (size_t i = 0; i < ks->nbuckets; i++) {
        list_node_t *c, *next;
        list_for_each_safe(c, next, &ks->buckets[i]) {
            ks_entry_t *e = ENTRY(c);
            if (e->klen >= keeplen && memcmp(e->key, keep, keeplen) == 0)
                continue;
            if (e->present) {
                drop_value(ks, e);
                n++;
            }
            drop_queue(ks, e);
            maybe_drop(ks, e);
        }
    }
    return n;
}

void keyspace_free(keyspace_t *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < ks->nbuckets; i++) {
        list_node_t *c, *next;
        list_for_each_safe(c, next, &ks->buckets[i]) {
            ks_entry_t *e = ENTRY(c);
            drop_queue(ks, e);
            /* waits and watches belong to owners; detach them so owners can be released */
            for (list_node_t *n = e->waiters.first; n; n = n->next)
                LINK(n)->e = NULL;
            for (list_node_t *n = e->watchers.first; n; n = n->next)
                container_of(n, ks_watch_t, enode)->e = NULL;
            free(e->val);
            free(e);
        }
    }
    free(ks->buckets);
    free(ks);
}
