/* tests/fuzz/fuzz_hostfile.c — libFuzzer target for the hostfile parser, DeepSpeed's resource
 * selection and finding this node's line. Input: one byte of mode, one line of selection
 * ("I<spec>", "E<spec>", "N<n>", "G<n>", anything else: none), then the hostfile. Checks that
 * errors are one line and that a selection only ever keeps slots the pool has, in order. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostfile.h"
#include "launcher/discover/resources.h"

static void one_line(const char *err)
{
    if (!err[0] || strchr(err, '\n'))
        abort();
}

/* Every node of out is a pool node, in pool order, with a subset of its slots, ascending. */
static void check_subset(const struct resources *out,
                         const struct resources *pool)
{
    size_t p = 0;
    for (size_t i = 0; i < out->count; i++) {
        const struct resources_node *o = &out->nodes[i];
        while (p < pool->count && strcmp(pool->nodes[p].host, o->host) != 0)
            p++;
        if (p == pool->count)
            abort();
        const struct resources_node *n = &pool->nodes[p++];
        size_t k = 0;
        for (size_t j = 0; j < o->nslots; j++) {
            if (j && o->slots[j] <= o->slots[j - 1])
                abort();
            while (k < n->nslots && n->slots[k] != o->slots[j])
                k++;
            if (k == n->nslots)
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024], spec[512];
    if (size < 1)
        return 0;
    int mode = data[0];
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    const char *nl = memchr(rest, '\n', n);
    size_t sl = nl ? (size_t)(nl - rest) : 0;
    if (sl >= sizeof spec)
        sl = sizeof spec - 1;
    memcpy(spec, rest, sl);
    spec[sl] = '\0';
    if (memchr(spec, '\0', sl))
        spec[0] = '\0';
    if (nl) {
        n -= (size_t)(nl - rest) + 1;
        rest = nl + 1;
    }

    struct hostfile hf;
    enum hostfile_dialect d = mode & 1 ? HOSTFILE_ANY : HOSTFILE_DEEPSPEED;
    int rc = hostfile_parse(&hf, rest, n, d, "fuzz", err, sizeof err);
    if (rc) {
        one_line(err);
        hostfile_free(&hf);
        return 0;
    }
    if (hf.count == 0)
        abort();

    struct resources pool, act;
    int def = mode & 2 ? (mode >> 2) % 9 : -1;
    rc = resources_from_hostfile(&pool, &hf, def, err, sizeof err);
    if (rc) {
        one_line(err);
    } else {
        struct resources_select sel = {NULL, NULL, -1, -1};
        if (spec[0] == 'I')
            sel.include = spec + 1;
        else if (spec[0] == 'E')
            sel.exclude = spec + 1;
        else if (spec[0] == 'N')
            sel.num_nodes = atoi(spec + 1);
        else if (spec[0] == 'G')
            sel.num_gpus = atoi(spec + 1);
        rc = resources_select(&act, &pool, &sel, err, sizeof err);
        if (rc)
            one_line(err);
        else
            check_subset(&act, &pool);
        /* whatever the selection kept before an error is the caller's to free */

        /* this node: the last line's host, so most runs find it */
        const char *addrs[] = {"10.0.0.1", "fe80::1%eth0", "not an address"};
        struct hostfile_self me = {hf.entries[hf.count - 1].host, "x.example.", addrs, 3};
        size_t entry = 0, rank = 0;
        int r2 = hostfile_find_self(&hf, rc ? NULL : &act, &me, &entry, &rank, err, sizeof err);
        if (r2)
            one_line(err);
        else if (entry >= hf.count || rank >= (rc ? hf.count : act.count))
            abort();
        resources_free(&act);
    }
    resources_free(&pool);
    hostfile_free(&hf);
    return 0;
}
