/* rdzv/keyspace.c — keys, values, queues, waiters and watchers (see keyspace.h). */
#include "rdzv/keyspace.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ks_item {
    struct ks_item *next;
    size_t len;
    char data[];
} ks_item_t;

typedef struct ks_entry {
    struct ks_entry *next;      /* hash chain */
    uint64_t hash;
    char *val;                  /* NUL-terminated; NULL when empty */
    size_t vlen, vcap;
    struct ks_link *waiters;    /* links of waits for this key */
    struct ks_watch *watchers;
    ks_item_t *qhead, *qtail;   /* queue items */
    size_t qlen;
    size_t klen;
    unsigned char present;
    char key[];
} ks_entry_t;

/* One missing key of one wait. */
typedef struct ks_link {
    struct ks_waiter *w;
    ks_entry_t *e;              /* NULL once the key was written */
    struct ks_link *next, *prev;
} ks_link_t;

typedef struct ks_waiter {
    ks_owner_t *owner;
    struct ks_waiter *onext, *oprev;
    size_t missing, nlinks;
    ks_link_t links[];
} ks_waiter_t;

typedef struct ks_watch {
    ks_owner_t *owner;
    ks_entry_t *e;
    struct ks_watch *enext, *eprev, *onext;
} ks_watch_t;

struct keyspace {
    ks_entry_t **buckets;
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
    for (ks_entry_t *e = ks->buckets[h & (ks->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    return NULL;
}

static ks_entry_t *lookup(keyspace_t *ks, const char *key, size_t klen)
{
    return find(ks, key, klen, hash_key(ks, key, klen));
}

static void grow(keyspace_t *ks)
{
    size_t n = ks->nbuckets * 2;
    ks_entry_t **b = calloc(n, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < ks->nbuckets; i++) {
        ks_entry_t *e = ks->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
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
    size_t b = h & (ks->nbuckets - 1);
    e->next = ks->buckets[b];
    ks->buckets[b] = e;
    ks->nentries++;
    ks->bytes += klen;
    *out = e;
    return 0;
}

/* Frees an entry nobody needs any more: no value, no waits, no watches, no queue. */
static void maybe_drop(keyspace_t *ks, ks_entry_t *e)
{
    if (e->present || e->waiters || e->watchers || e->qhead)
        return;
    ks_entry_t **pp = &ks->buckets[e->hash & (ks->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    ks->nentries--;
    ks->bytes -= e->klen;
    free(e->val);
    free(e);
}

static void unlink_link(ks_link_t *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        l->e->waiters = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->e = NULL;
}

static void unlink_waiter(ks_waiter_t *w)
{
    ks_owner_t *o = w->owner;
    if (w->oprev)
        w->oprev->onext = w->onext;
    else
        o->waiters = w->onext;
    if (w->onext)
        w->onext->oprev = w->oprev;
}

/* A link's key was written: one key fewer missing. */
static void satisfy(keyspace_t *ks, ks_link_t *l)
{
    ks_waiter_t *w = l->w;
    unlink_link(l);
    if (--w->missing > 0)
        return;
    ks_owner_t *o = w->owner;
    unlink_waiter(w);
    free(w);
    if (ks->on_ready)
        ks->on_ready(ks->arg, o);
}

static void wake_all(keyspace_t *ks, ks_entry_t *e)
{
    while (e->waiters)
        satisfy(ks, e->waiters);
}

static void notify(keyspace_t *ks, ks_entry_t *e, int type, const char *old, size_t oldlen)
{
    if (!ks->on_watch)
        return;
    const char *nv = e->present && e->val ? e->val : empty_val;
    size_t nl = e->present ? e->vlen : 0;
    for (ks_watch_t *w = e->watchers; w; w = w->enext)
        ks->on_watch(ks->arg, w->owner, type, e->key, e->klen, old, oldlen, nv, nl);
}

/* Stores val as e's value. When watchers need the old value it is handed to them first. */
static int store_value(keyspace_t *ks, ks_entry_t *e, const char *val, size_t vlen)
{
    size_t old = e->present ? e->vlen : 0;
    if (vlen > old && !room(ks, vlen - old))
        return -ENOSPC;
    char *keep = NULL;
    size_t keeplen = 0;
    int was = e->present;
    if (e->watchers && was) {
        keep = e->val;
        keeplen = e->vlen;
        e->val = NULL;
        e->vcap = 0;
    }
    if (vlen + 1 > e->vcap || e->vcap > 4 * (vlen + 64)) {
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
    if (e->watchers)
        notify(ks, e, was ? WIRE_KEY_UPDATED : WIRE_KEY_CREATED, keep ? keep : empty_val,
               keeplen);
    free(keep);
    if (!was)
        wake_all(ks, e);
    return 0;
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

int keyspace_add(keyspace_t *ks, const char *key, size_t klen, int64_t delta, int64_t *out)
{
    ks_entry_t *e;
    int r = get_entry(ks, key, klen, &e);
    if (r)
        return r;
    int64_t cur = 0;
    if (e->present && (r = parse_ll(e->val ? e->val : "", e->vlen, &cur)) != 0)
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
    if (!e->present || e->watchers) {
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
    if (e->watchers)
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
    return e && (e->present || e->qhead);
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
        l->prev = NULL;
        l->next = e->waiters;
        if (e->waiters)
            e->waiters->prev = l;
        e->waiters = l;
    }
    w->missing = w->nlinks = j;
    w->onext = owner->waiters;
    if (owner->waiters)
        owner->waiters->oprev = w;
    owner->waiters = w;
    return 0;
}

size_t keyspace_cancel_waits(keyspace_t *ks, ks_owner_t *owner)
{
    size_t n = 0;
    ks_waiter_t *w;
    while ((w = owner->waiters)) {
        owner->waiters = w->onext;
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
    w->enext = e->watchers;
    if (e->watchers)
        e->watchers->eprev = w;
    e->watchers = w;
    w->onext = owner->watches;
    owner->watches = w;
    return 0;
}

void keyspace_release(keyspace_t *ks, ks_owner_t *owner)
{
    keyspace_cancel_waits(ks, owner);
    ks_watch_t *w;
    while ((w = owner->watches)) {
        owner->watches = w->onext;
        ks_entry_t *e = w->e;
        if (w->eprev)
            w->eprev->enext = w->enext;
        else
            e->watchers = w->enext;
        if (w->enext)
            w->enext->eprev = w->eprev;
        free(w);
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
    it->next = NULL;
    it->len = vlen;
    if (vlen)
        memcpy(it->data, val, vlen);
    it->data[vlen] = 0;
    if (e->qtail)
        e->qtail->next = it;
    else
        e->qhead = it;
    e->qtail = it;
    e->qlen++;
    ks->bytes += vlen;
    /* One item can feed one popper: wake waiters oldest first until one wait completes. The
     * list is newest first, so walk from its tail. */
    ks_link_t *l = e->waiters;
    while (l && l->next)
        l = l->next;
    while (l) {
        ks_link_t *prev = l->prev;
        int last = l->w->missing == 1;
        satisfy(ks, l);
        if (last)
            break;
        l = prev;
    }
    return 0;
}

int64_t keyspace_queue_pop(keyspace_t *ks, const char *key, size_t klen, char **item,
                           size_t *ilen)
{
    ks_entry_t *e = lookup(ks, key, klen);
    *item = NULL;
    *ilen = 0;
    if (!e || !e->qhead)
        return 0;
    int64_t n = (int64_t)e->qlen;
    ks_item_t *it = e->qhead;
    e->qhead = it->next;
    if (!e->qhead)
        e->qtail = NULL;
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
        for (ks_entry_t *e = ks->buckets[i]; e; e = e->next)
            if (e->present) {
                int r = fn(arg, e->key, e->klen, e->val ? e->val : empty_val, e->vlen);
                if (r)
                    return r;
            }
    return 0;
}

/* Frees every queued item of e. */
static void drop_queue(keyspace_t *ks, ks_entry_t *e)
{
    while (e->qhead) {
        ks_item_t *it = e->qhead;
        e->qhead = it->next;
        ks->bytes -= it->len;
        free(it);
    }
    e->qtail = NULL;
    e->qlen = 0;
}

size_t keyspace_delete_except(keyspace_t *ks, const char *keep, size_t keeplen)
{
    size_t n = 0;
    for (size_t i = 0; i < ks->nbuckets; i++) {
        ks_entry_t *e = ks->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
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
        ks_entry_t *e = ks->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            drop_queue(ks, e);
            /* waiters and watches belong to owners; detach them so owners can be released */
            for (ks_link_t *l = e->waiters; l; l = l->next)
                l->e = NULL;
            for (ks_watch_t *w = e->watchers; w; w = w->enext)
                w->e = NULL;
            free(e->val);
            free(e);
        }
    }
    free(ks->buckets);
    free(ks);
}
