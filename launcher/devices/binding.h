/* launcher/devices/binding.h — which CPUs each local worker is bound to.
 *
 * Pure code: the topology (cpu.h), the CPUs this container may use and each GPU's NUMA node in,
 * one CPU set per local rank out. The caller applies a set in the child between fork and exec
 * (cpu_bind_self), so no numactl is needed.
 *
 * torch 2.9's --numa-binding (torch/numa/binding.py), where local rank i uses GPU i:
 *   node          every CPU of the GPU's NUMA node;
 *   socket        every CPU of every NUMA node of the GPU's socket (the socket of a node is that of
 *                 its lowest usable CPU);
 *   exclusive     the node's physical cores divided evenly among the GPUs on that node, in GPU
 *                 order, the lowest GPUs taking one extra core each when it does not divide; a core
 *                 brings all its hardware threads;
 *   core-complex  one last-level-cache group of the node's CPUs per GPU, the largest groups first
 *                 (ties: lowest CPU first), wrapping around when the node has more GPUs than groups.
 * All sets are limited to the container's CPUs; an empty set is an error, as in torch.
 *
 * DeepSpeed's --bind_cores_to_rank [--bind_core_list LIST] (deepspeed/utils/numa.py): the core
 * list split into equal consecutive slices by local rank (the remainder unused), memory bound to
 * the NUMA node that holds a whole slice, and OMP_NUM_THREADS = cores per rank. DeepSpeed's
 * default list is CPUs 0..P-1 for P physical cores of the host; podrun's is the lowest usable
 * hardware thread of each physical core in the container's cpuset, which is the same on a whole
 * host whose siblings are numbered after the first threads, and stays inside the cpuset in a
 * container. Not GPU-aware, as in DeepSpeed. */
#ifndef PODRUN_DEVICES_BINDING_H
#define PODRUN_DEVICES_BINDING_H

#include <sched.h>
#include <stddef.h>

#include "launcher/devices/cpu.h"

enum binding_mode {
    BINDING_NONE,
    BINDING_NODE,
    BINDING_SOCKET,
    BINDING_EXCLUSIVE,
    BINDING_CORE_COMPLEX,
    BINDING_CORES,          /* DeepSpeed --bind_cores_to_rank */
};

struct binding_in {
    enum binding_mode mode;
    int nlocal;             /* local workers */
    int ngpus;              /* the visible GPUs in CUDA order: local rank i uses GPU i */
    const int *gpu_node;    /* each GPU's NUMA node, -1 unknown */
    const char *core_list;  /* BINDING_CORES: --bind_core_list ("0-9,12-21"), NULL: default */
};

struct binding_rank {
    cpu_set_t cpus;
    int mem_node;           /* BINDING_CORES: the node holding all of the rank's cores, else -1 */
    int threads;            /* BINDING_CORES: cores per rank (OMP_NUM_THREADS), else 0 */
};

/* Parses torch's names "node", "socket", "exclusive", "core-complex". -EINVAL otherwise. */
int binding_mode_parse(const char *text, enum binding_mode *out);

/* The name of a mode ("node", ..., "cores"; "none"). */
const char *binding_mode_name(enum binding_mode m);

/* Fills out[0..nlocal-1]. Returns 0, or -EINVAL with one line in err naming the input and the
 * fix (a GPU without a known NUMA node, a node with no usable CPU, fewer cores than workers, a
 * malformed or out-of-cpuset core list). BINDING_NONE gives every rank the allowed set. */
int binding_plan(const struct cpu_topo *t, const cpu_set_t *allowed, const struct binding_in *in,
                 struct binding_rank *out, char *err, size_t errlen);

#endif
