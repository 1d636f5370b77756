/* launcher/discover/resources.h — which slots (GPU ids) of which hosts a job uses: the pool a
 * hostfile gives (launcher/discover/hostfile.h), and DeepSpeed's resource selection
 * (--include/--exclude/--num_nodes/--num_gpus) that makes the active set out of it.
 *
 * Pure functions, no I/O: plain structs in, plain structs out, or one error line that names the
 * flag or the file and the fix. */
#ifndef PODRUN_DISCOVER_RESOURCES_H
#define PODRUN_DISCOVER_RESOURCES_H

#include <stddef.h>

#include "launcher/discover/hostfile.h"

struct resources_node {
    char *host;
    unsigned line;      /* hostfile line; 0 for a node that is not from a file (localhost) */
    size_t nslots;
    int *slots;         /* ascending, no repeats, each below HOSTFILE_SLOTS_MAX */
};

struct resources {
    char *source;                   /* where the hosts come from, for messages */
    size_t count;                   /* nodes in hostfile order: node rank = index */
    struct resources_node *nodes;
};

/* The resource pool of a hostfile: one node per line with slots 0..N-1, N being the line's slots
 * or default_slots for a line without (default_slots < 0: such a line is an error). */
int resources_from_hostfile(struct resources *r, const struct hostfile *hf, int default_slots,
                            char *err, size_t errlen);

/* Appends a node with the given slot ids (any order, repeats dropped), e.g. DeepSpeed's local run
 * without a hostfile: "localhost" with the ids CUDA_VISIBLE_DEVICES lists, so that
 * --include localhost:2,3 selects them. `source` names the pool if it has none yet.
 * Errors: a repeated host, an id out of range (-EINVAL). */
int resources_add(struct resources *r, const char *source, const char *host, unsigned line,
                  const int *slots, size_t nslots, char *err, size_t errlen);

void resources_free(struct resources *r);

/* DeepSpeed's resource selection, runner.py `main` order. */
struct resources_select {
    const char *include; /* -i/--include NODE_SPEC[@NODE_SPEC ...],
                            NODE_SPEC = NAME[:SLOT[,SLOT ...]]; NULL or "": not given */
    const char *exclude; /* -e/--exclude, the same syntax */
    int num_nodes;       /* --num_nodes: the first N hosts; -1: not given */
    int num_gpus;        /* --num_gpus/--num_accelerators: the first N slots of every host; -1 */
};

/* Builds the active resources `out` from `pool` (which is not changed); the caller frees out.
 * Semantics are DeepSpeed's documented ones (runner.py help and getting-started.md), not its
 * current regression (issue deepspeedai/DeepSpeed#6671):
 *  - --include: only the named hosts; NAME alone means all of that host's slots, NAME:0,2 those
 *    slots. -i "worker-0@worker-1:0,2" = all of worker-0 and slots 0,2 of worker-1.
 *  - --exclude: all but the named slots; NAME alone removes the host. -e "worker-2:0@worker-3:0,1".
 *  - A host named alone and with slots (in either list) counts as named alone. Slot lists are
 *    sorted and deduplicated; hosts left with no slot are dropped; hostfile order is kept.
 *  - --num_nodes N keeps the first N hosts; --num_gpus N keeps the first N slots of each host
 *    (slots 0..N-1 for a hostfile's host).
 * DeepSpeed's error texts, with the flag in front and the fix after:
 *   "include_str and exclude_str are mutually exclusive."
 *   "Cannot specify num_nodes/gpus with include/exclude"
 *   "Hostname '<h>' not found in hostfile"
 *   "No slot '<s>' specified on host '<h>'"
 * Where DeepSpeed does something silent podrun stops with one line instead: a spec that does not
 * parse (DeepSpeed dies in int()), --num_nodes 0 or --num_gpus 0 (DeepSpeed then uses everything),
 * --num_gpus above a host's slots (DeepSpeed starts more processes than the host has GPUs), and a
 * selection that leaves no slot at all.
 * Returns 0 or -EINVAL (-ENOMEM) with one line in err. */
int resources_select(struct resources *out, const struct resources *pool,
                    const struct resources_select *sel, char *err, size_t errlen);

#endif
