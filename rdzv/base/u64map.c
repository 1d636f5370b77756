/* rdzv/base/u64map.c — uint64 -> int, open addressing with linear probing (see u64map.h). */
#include "rdzv/base/u64map.h"

#include <errno.h>
#include <stdlib.h>

static size_t u64_hash(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

int u64map_get(const u64map_t *m, uint64_t k)
{
    if (!m->cap)
        return -1;
    for (size_t i = u64_hash(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == k)
            return m->vals[i];
        if (m->keys[i] == 0)
            return -1;
    }
}

int u64map_reserve(u64map_t *m)
{
    if ((m->n + 1) * 2 > m->cap) {
        u64map_t g = {0};
        g.cap = m->cap ? m->cap * 2 : 64;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                u64map_put(&g, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    return 0;
}

int u64map_put(u64map_t *m, uint64_t k, int v)
{
    if (u64map_reserve(m) < 0)
        return -ENOMEM;
    size_t i = u64_hash(k, m->cap);
    while (m->keys[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->keys[i])
        m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

void u64map_free(u64map_t *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}
