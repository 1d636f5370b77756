/* rdzv/base/u64map.h — an open-addressing hash map from a non-zero 64-bit key to an int. Pure code.
 * The coordinator finds a node by its id and by its connection with it: O(1) per record in a job
 * of thousands of nodes. A zeroed map is empty; it grows at half full and never shrinks. */
#ifndef PODRUN_RDZV_U64MAP_H
#define PODRUN_RDZV_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct u64map {
    uint64_t *keys; /* 0: a free slot */
    int *vals;
    size_t cap, n;
} u64map_t;

/* The value of k, or -1. */
int u64map_get(const u64map_t *m, uint64_t k);
/* Makes room for one more key, so that the next u64map_put cannot fail: 0 or -ENOMEM. */
int u64map_reserve(u64map_t *m);
/* Sets k (non-zero) to v: 0 or -ENOMEM. */
int u64map_put(u64map_t *m, uint64_t k, int v);
void u64map_free(u64map_t *m);

#endif
