/* launcher/devices/node.h — what podrun learns about this node's devices, once, and what the
 * workers get from it.
 *
 * The agent probes at start, before the configuration is final (--nproc-per-node gpu|auto count
 * the GPUs found): GPUs (NVML, else procfs and /dev, never CUDA), which of them CUDA shows a
 * worker, /dev/shm and this container's cpuset. Once the configuration is known, node_plan reads
 * what the job's settings use (the HCAs, the CPU topology), computes each local rank's CPU set
 * and derives the NCCL/Gloo/CUDA/OpenMP variables (env/nccl.h); a one-node job without a GPU
 * reads neither. The interface towards the master needs the master's address, which a
 * multi-node agent knows only after the rendezvous: node_set_master derives it then (and the
 * environment again), so the variables are final before the first worker starts.
 *
 * Nothing here prints: node_print writes the facts and the variables with their reasons to a FILE
 * for `podrun env` and --print-config; the agent prints node_summary's lines. */
#ifndef PODRUN_DEVICES_NODE_H
#define PODRUN_DEVICES_NODE_H

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>

#include "launcher/config/config.h"
#include "launcher/devices/binding.h"
#include "launcher/devices/cpu.h"
#include "launcher/devices/gpu.h"
#include "launcher/devices/ib.h"
#include "launcher/devices/nic.h"
#include "launcher/devices/shm.h"
#include "launcher/devices/visible.h"
#include "launcher/env/nccl.h"

struct node_devices {
    struct gpu_list gpus;
    struct gpu_visible visible;
    struct ib_info ib;
    bool ib_probed;                 /* the HCAs were read (a job with a GPU or several nodes) */
    struct shm_info shm;
    char shm_warning[300];          /* "" when /dev/shm is large enough */
    struct cpu_topo topo;
    bool topo_probed;               /* the topology was read (--numa-binding, `podrun env`) */
    bool topo_known;                /* /sys/devices/system/cpu was read */
    cpu_set_t allowed;              /* this container's CPUs (sched_getaffinity) */
    struct cpu_usable cpus;         /* how many of them it may keep busy (the CPU quota) */

    /* from the configuration (node_plan) */
    int nlocal;
    enum binding_mode mode;
    struct binding_rank *bind;      /* nlocal entries; NULL when workers are not bound */
    bool per_rank;                  /* one GPU per worker, by UUID */
    char local_addr[INET6_ADDRSTRLEN];    /* --local-addr (a numeric address), "" none */
    bool several_nodes;             /* the job may have more than one node */
    enum nccl_omp omp;              /* the launcher's OMP_NUM_THREADS rule */

    /* the interface towards the master (node_set_master) */
    bool nic_known;
    struct nic_choice nic;
    char nic_note[300];             /* why it is not known, "" when it is */

    struct nccl_env env;            /* derived from all of the above */
    char *const *envp;              /* the inherited environment the variables were derived over */
};

/* nd is zeroed (calloc'd: most of it stays untouched on a node without GPUs). Probes the node
 * under c->sysroot (NULL: /) with the inherited environment (for
 * NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER). Never fails for want of
 * devices: a CPU-only node has no GPU and no HCA. 0, or -ENAMETOOLONG for a sysroot too long. */
int node_probe(struct node_devices *nd, const struct cfg *c, char *const *envp);

/* What only some jobs need, read now: the HCAs and the CPU topology (`podrun env` shows them).
 * A job reads them in node_plan when its settings use them: the HCAs for a job with a GPU visible
 * here or more than one node (NCCL's variables), the topology under --numa-binding. */
void node_probe_all(struct node_devices *nd);

/* The number of CUDA devices a worker could be given (cfg_finalize's ngpus). */
int node_gpu_count(const struct node_devices *nd);
/* The CPUs this container may keep busy: its cpuset, or its CPU quota rounded down when that is
 * smaller (cfg_finalize's ncpus: --nproc-per-node cpu|auto). */
int node_cpu_count(const struct node_devices *nd);

/* After cfg_finalize: the CPU set of each local rank (--numa-binding, --bind-core-list) and the
 * derived variables. -EINVAL with one line in err naming the setting and the fix when the binding
 * cannot be made (a GPU's NUMA node unknown, no usable CPU near it, fewer cores than workers). */
int node_plan(struct node_devices *nd, const struct cfg *c, char *err, size_t errlen);

/* Whether the interface towards the master matters: the job may span nodes, or NCCL may run here
 * (a GPU is visible), or --local-addr names the interface. A one-node job without a GPU gets no
 * NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME, as from torchrun: node_set_master then says why. */
bool node_needs_master(const struct node_devices *nd);

/* The interface towards `master`, a numeric address (the agent resolves the name on its loop
 * first; NULL: it did not resolve, and `why` says so), or the one holding --local-addr when that
 * was given; then the variables again. Without either the socket variables stay unset, with the
 * reason in nic_note. */
void node_set_master(struct node_devices *nd, const char *master, const char *why);

/* The same for a master given by name, resolved here with getaddrinfo, which may block: for
 * `podrun env` and --print-config, which have no loop to wait on. */
void node_resolve_master(struct node_devices *nd, const char *master);

/* The lines to print once when workers start: "podrun sets NAME=value ..." (what was added to
 * their environment), one line per notice (HCAs unusable, /dev/shm small, ...), and the binding.
 * Each line is passed to `line`. */
void node_summary(const struct node_devices *nd, void (*line)(void *arg, const char *text),
                  void *arg);

/* `podrun env`: the devices found, every variable with what podrun does with it and why, the
 * per-worker values and CPU sets. brief (--print-config): the variables only. */
void node_print(const struct node_devices *nd, FILE *f, bool brief);

/* The variables every worker gets ("NAME=value", each added only where the worker's environment
 * does not have it): a NULL-terminated array in one allocation (free(*out) frees all). */
int node_worker_vars(const struct node_devices *nd, char ***out);

/* Local rank lr's own CUDA_VISIBLE_DEVICES into buf when each worker gets one: 1; 0 when workers
 * inherit the visibility. */
int node_rank_visible(const struct node_devices *nd, int lr, char *buf, size_t len);

/* Local rank lr's CPUs and memory node, NULL when workers are not bound. */
const struct binding_rank *node_rank_binding(const struct node_devices *nd, int lr);

void node_free(struct node_devices *nd);

#endif
