/* launcher/devices/binding.c — which CPUs each local worker is bound to (pure; see binding.h). */
#include "launcher/devices/binding.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/devices/cpuset.h"

static const char *const binding_names[] = {
    [BINDING_NONE] = "none",           [BINDING_NODE] = "node",
    [BINDING_SOCKET] = "socket",       [BINDING_EXCLUSIVE] = "exclusive",
    [BINDING_CORE_COMPLEX] = "core-complex", [BINDING_CORES] = "cores",
};

int binding_mode_parse(const char *text, enum binding_mode *out)
{
    for (int m = BINDING_NODE; m <= BINDING_CORE_COMPLEX; m++)
        if (text && strcmp(text, binding_names[m]) == 0) {
            *out = (enum binding_mode)m;
            return 0;
        }
    return -EINVAL;
}

const char *binding_mode_name(enum binding_mode m)
{
    return m >= BINDING_NONE && m <= BINDING_CORES ? binding_names[m] : "none";
}

/* Groups of CPUs sharing a key (a core, a cache), in ascending key order. */
struct binding_groups {
    int n;
    short key[CPU_SETSIZE];
    cpu_set_t *sets;        /* n entries, allocated */
};

/* Groups `cpus` by key[cpu] (a CPU with key -1 is its own group). -ENOMEM. */
static int binding_group(const cpu_set_t *cpus, const short *key, struct binding_groups *g)
{
    short slot[CPU_SETSIZE];
    memset(g, 0, sizeof *g);
    for (int c = 0; c < CPU_SETSIZE; c++)
        slot[c] = -1;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, cpus)) {
            int k = key[c] >= 0 ? key[c] : c;
            if (slot[k] < 0)
                slot[k] = 0, n++;
        }
    g->sets = calloc(n ? (size_t)n : 1, sizeof *g->sets);
    if (!g->sets)
        return -ENOMEM;
    for (int k = 0; k < CPU_SETSIZE; k++)  /* ascending keys */
        if (slot[k] == 0) {
            slot[k] = (short)g->n;
            g->key[g->n++] = (short)k;
        }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, cpus))
            CPU_SET(c, &g->sets[slot[key[c] >= 0 ? key[c] : c]]);
    return 0;
}

static void binding_node_cpus(const struct cpu_topo *t, const cpu_set_t *allowed, int node,
                              cpu_set_t *out)
{
    CPU_ZERO(out);
    if (node >= 0 && node < CPU_MAX_NODES)
        CPU_AND(out, &t->node[node], allowed);
}

/* The GPUs on `node` before GPU i: its position among them. */
static void binding_node_gpus(const struct binding_in *in, int i, int *rel, int *count)
{
    *rel = *count = 0;
    for (int j = 0; j < in->ngpus; j++)
        if (in->gpu_node[j] == in->gpu_node[i]) {
            if (j < i)
                (*rel)++;
            (*count)++;
        }
}

static int binding_socket(const struct cpu_topo *t, const cpu_set_t *allowed, int node,
                          cpu_set_t *out)
{
    cpu_set_t cpus;
    binding_node_cpus(t, allowed, node, &cpus);
    int first = cpuset_first(&cpus);
    int socket = first >= 0 ? t->package[first] : -1;
    CPU_ZERO(out);
    if (socket < 0)
        return -ENOENT;
    for (int n = 0; n < t->nnodes; n++) {
        binding_node_cpus(t, allowed, n, &cpus);
        int c = cpuset_first(&cpus);
        if (c >= 0 && t->package[c] == socket)
            CPU_OR(out, out, &cpus);
    }
    return 0;
}

static int binding_exclusive(const struct cpu_topo *t, const cpu_set_t *node_cpus,
                             const struct binding_in *in, int i, cpu_set_t *out, char *err,
                             size_t errlen)
{
    struct binding_groups g;
    if (binding_group(node_cpus, t->core, &g) < 0)
        return -ENOMEM;
    int rel, count;
    binding_node_gpus(in, i, &rel, &count);
    int per = g.n / count, extra = g.n % count;
    if (per < 1) {
        snprintf(err, errlen, "--numa-binding exclusive: NUMA node %d has %d physical core(s) in "
                              "this container for %d GPUs: use --numa-binding node",
                 in->gpu_node[i], g.n, count);
        free(g.sets);
        return -EINVAL;
    }
    int start = rel * per + (rel < extra ? rel : extra);
    int end = start + per + (rel < extra ? 1 : 0);
    CPU_ZERO(out);
    for (int k = start; k < end; k++)
        CPU_OR(out, out, &g.sets[k]);
    free(g.sets);
    return 0;
}

static int binding_complex(const struct cpu_topo *t, const cpu_set_t *node_cpus,
                           const struct binding_in *in, int i, cpu_set_t *out, char *err,
                           size_t errlen)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, node_cpus) && t->llc[c] < 0) {
            snprintf(err, errlen, "--numa-binding core-complex: CPU %d has no cache topology "
                                  "under /sys/devices/system/cpu: use --numa-binding node", c);
            return -EINVAL;
        }
    struct binding_groups g;
    if (binding_group(node_cpus, t->llc, &g) < 0)
        return -ENOMEM;
    /* Largest groups first, then lowest key: a stable selection sort over a handful of groups. */
    int order[CPU_SETSIZE];
    for (int k = 0; k < g.n; k++)
        order[k] = k;
    for (int a = 0; a < g.n; a++)
        for (int b = a + 1; b < g.n; b++) {
            int sa = CPU_COUNT(&g.sets[order[a]]), sb = CPU_COUNT(&g.sets[order[b]]);
            if (sb > sa || (sb == sa && g.key[order[b]] < g.key[order[a]])) {
                int tmp = order[a];
                order[a] = order[b];
                order[b] = tmp;
            }
        }
    int rel, count;
    binding_node_gpus(in, i, &rel, &count);
    *out = g.sets[order[rel % g.n]];
    free(g.sets);
    return 0;
}

/* One local rank under a torch mode. */
static int binding_torch(const struct cpu_topo *t, const cpu_set_t *allowed,
                         const struct binding_in *in, int i, cpu_set_t *out, char *err,
                         size_t errlen)
{
    const char *mode = binding_names[in->mode];
    int node = in->gpu_node[i];
    if (node < 0 || node >= CPU_MAX_NODES) {
        snprintf(err, errlen, "--numa-binding %s: the NUMA node of local rank %d's GPU is unknown "
                              "(no NVML affinity, no /sys/bus/pci/devices/<gpu>/numa_node): run "
                              "without --numa-binding", mode, i);
        return -EINVAL;
    }
    cpu_set_t node_cpus;
    binding_node_cpus(t, allowed, node, &node_cpus);
    if (CPU_COUNT(&node_cpus) == 0) {
        char a[256];
        cpuset_format(allowed, a, sizeof a);
        snprintf(err, errlen, "--numa-binding %s: local rank %d's GPU is on NUMA node %d, which "
                              "has no CPU in this container's cpuset (%s): widen the cpuset or "
                              "run without --numa-binding", mode, i, node, a);
        return -EINVAL;
    }
    switch (in->mode) {
    case BINDING_NODE:
        *out = node_cpus;
        return 0;
    case BINDING_SOCKET:
        if (binding_socket(t, allowed, node, out) < 0) {
            snprintf(err, errlen, "--numa-binding socket: the socket of NUMA node %d is unknown "
                                  "(no topology/physical_package_id): use --numa-binding node",
                     node);
            return -EINVAL;
        }
        return 0;
    case BINDING_EXCLUSIVE:
        return binding_exclusive(t, &node_cpus, in, i, out, err, errlen);
    default:
        return binding_complex(t, &node_cpus, in, i, out, err, errlen);
    }
}

/* DeepSpeed's core-list grammar: "N" or "A-B" items, comma-separated, ascending and not
 * overlapping, no spaces. Fills list (ascending) and returns its length, or -EINVAL. */
static int binding_core_list(const char *text, int *list, char *err, size_t errlen)
{
    int n = 0, last = -1;
    const char *p = text;
    for (;;) {
        char *end;
        if (!isdigit((unsigned char)*p))
            goto bad;
        long a = strtol(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char)*++p))
                goto bad;
            b = strtol(p, &end, 10);
            p = end;
        }
        if (b < a || a <= last || b >= CPU_SETSIZE)
            goto bad;
        for (long c = a; c <= b; c++)
            list[n++] = (int)c;
        last = (int)b;
        if (!*p)
            return n;
        if (*p++ != ',')
            goto bad;
    }
bad:
    snprintf(err, errlen, "--bind_core_list '%s': give ascending, non-overlapping CPUs and ranges "
                          "such as 0-9,12-21", text);
    return -EINVAL;
}

/* The default list: the lowest usable hardware thread of each physical core, ascending. */
static int binding_default_cores(const struct cpu_topo *t, const cpu_set_t *allowed, int *list)
{
    bool seen[CPU_SETSIZE] = {false};
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, allowed))
            continue;
        int core = t->core[c] >= 0 ? t->core[c] : c;
        if (!seen[core]) {
            seen[core] = true;
            list[n++] = c;
        }
    }
    return n;
}

static int binding_cores(const struct cpu_topo *t, const cpu_set_t *allowed,
                         const struct binding_in *in, struct binding_rank *out, char *err,
                         size_t errlen)
{
    int list[CPU_SETSIZE];
    int n = in->core_list ? binding_core_list(in->core_list, list, err, errlen)
                          : binding_default_cores(t, allowed, list);
    if (n < 0)
        return n;
    for (int k = 0; in->core_list && k < n; k++)
        if (!CPU_ISSET(list[k], allowed)) {
            char a[256];
            cpuset_format(allowed, a, sizeof a);
            snprintf(err, errlen, "--bind_core_list names CPU %d, outside this container's cpuset "
                                  "(%s): list CPUs from the cpuset", list[k], a);
            return -EINVAL;
        }
    int per = n / in->nlocal;
    if (per < 1) {
        snprintf(err, errlen, "--bind_cores_to_rank: %d core(s) for %d local workers: at least one "
                              "core per worker (lower --num_gpus or give a longer --bind_core_list)",
                 n, in->nlocal);
        return -EINVAL;
    }
    for (int r = 0; r < in->nlocal; r++) {
        struct binding_rank *o = &out[r];
        CPU_ZERO(&o->cpus);
        for (int k = r * per; k < (r + 1) * per; k++)
            CPU_SET(list[k], &o->cpus);
        o->threads = per;
        o->mem_node = -1;
        for (int node = 0; node < t->nnodes && o->mem_node < 0; node++) {
            cpu_set_t both;
            CPU_AND(&both, &o->cpus, &t->node[node]);
            if (CPU_EQUAL(&both, &o->cpus))
                o->mem_node = node;
        }
    }
    return 0;
}

int binding_plan(const struct cpu_topo *t, const cpu_set_t *allowed, const struct binding_in *in,
                 struct binding_rank *out, char *err, size_t errlen)
{
    if (!t || !allowed || !in || !out || in->nlocal < 1 || in->nlocal > CPU_SETSIZE) {
        snprintf(err, errlen, "binding: no local workers to bind");
        return -EINVAL;
    }
    bool torch = in->mode != BINDING_NONE && in->mode != BINDING_CORES;
    if (torch && (in->nlocal > in->ngpus || !in->gpu_node)) {
        snprintf(err, errlen, "--numa-binding %s: %d local workers and %d visible GPU(s); local "
                              "rank i is bound near GPU i, so give one GPU per worker",
                 binding_names[in->mode], in->nlocal, in->ngpus);
        return -EINVAL;
    }
    for (int r = 0; r < in->nlocal; r++) {
        out[r].cpus = *allowed;
        out[r].mem_node = -1;
        out[r].threads = 0;
    }
    if (in->mode == BINDING_NONE)
        return 0;
    if (in->mode == BINDING_CORES)
        return binding_cores(t, allowed, in, out, err, errlen);
    for (int r = 0; r < in->nlocal; r++) {
        int rc = binding_torch(t, allowed, in, r, &out[r].cpus, err, errlen);
        if (rc < 0)
            return rc;
    }
    return 0;
}
