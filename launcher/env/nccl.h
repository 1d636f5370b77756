/* launcher/env/nccl.h — the NCCL, Gloo, CUDA and OpenMP variables podrun derives from the node.
 *
 * Pure code: the device facts (launcher/devices, gathered once when the agent starts) and the
 * inherited environment in; for each variable podrun has something to say about, the value it
 * adds, or why it adds none, out. A variable already in the environment is never changed: it is
 * reported as left alone. `podrun env` prints the list with its reasons; the agent adds the SET
 * values to every worker (and to the preflight child, which then sees what the workers see), and
 * prints the notices once at start.
 *
 * What is derived (see reference/nccl.md):
 *   NCCL_SOCKET_IFNAME   =<if> (exact match) for the interface that reaches the master, when
 *                        NCCL's own selection would use anything else as well
 *   GLOO_SOCKET_IFNAME   <if>, the same interface (Gloo otherwise uses the hostname's address)
 *   NCCL_IB_DISABLE      1, with a notice, when HCAs exist but none can be used here
 *                        (/dev/infiniband not in the container, no port ACTIVE)
 *   NCCL_IB_HCA          =dev:port,... the usable ports, when some other port must be left out
 *   NCCL_IB_GID_INDEX    the RoCE v2 IPv4 GID index, when every RoCE port has the same one and
 *                        the NCCL in use may be older than 2.21 (which picks it itself)
 *   CUDA_DEVICE_ORDER    PCI_BUS_ID when the GPUs differ and CUDA's FASTEST_FIRST order would
 *                        make LOCAL_RANK i an unknown GPU
 *   CUDA_VISIBLE_DEVICES per worker, one device by UUID, when asked or when the devices are MIG
 *   OMP_NUM_THREADS      cores per rank under DeepSpeed core binding, else 1 with several
 *                        workers (torchrun's default) */
#ifndef PODRUN_ENV_NCCL_H
#define PODRUN_ENV_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/devices/gpu.h"
#include "launcher/devices/ib.h"
#include "launcher/devices/nic.h"
#include "launcher/devices/visible.h"

#define NCCL_ENV_MAX 16
#define NCCL_ENV_VALUE_LEN 512
#define NCCL_ENV_REASON_LEN 400

enum nccl_env_action {
    NCCL_ENV_SET,       /* podrun adds `value` to the workers' environment */
    NCCL_ENV_USER,      /* already set by the user or the operator: left alone */
    NCCL_ENV_UNSET,     /* podrun adds nothing; the reason says why */
};

struct nccl_env_var {
    const char *name;
    enum nccl_env_action action;
    bool notice;                        /* the reason is a warning to print at start */
    char value[NCCL_ENV_VALUE_LEN];     /* SET: podrun's value; USER: the inherited one */
    char reason[NCCL_ENV_REASON_LEN];
};

struct nccl_env {
    int n;
    struct nccl_env_var var[NCCL_ENV_MAX];
    bool per_rank_visible;              /* each worker gets its own CUDA_VISIBLE_DEVICES */
};

/* The OMP_NUM_THREADS a launcher gives its workers when the variable is unset. */
enum nccl_omp {
    NCCL_OMP_TORCHRUN,  /* 1 when several workers share the node (torchrun, accelerate) */
    NCCL_OMP_NONE,      /* nothing (DeepSpeed's launch.py, unless it binds cores) */
    NCCL_OMP_ONE,       /* always 1: Paddle's launcher imports paddle, whose import sets it */
};

/* The rule of the launcher whose worker environment is built (enum cfg_worker_env). */
enum nccl_omp nccl_omp_rule(int worker_env);

struct nccl_facts {
    const struct gpu_list *gpus;        /* NULL: not probed */
    const struct gpu_visible *visible;  /* NULL: not probed */
    const struct ib_info *ib;           /* NULL: not probed */
    const struct nic_choice *nic;       /* NULL: no master address known */
    int nccl_version;                   /* ncclGetVersion() code (22105 is 2.21.5), 0 unknown */
    int nlocal;                         /* local workers */
    bool per_rank_visible;              /* asked: --virtual-local-rank or per-rank visibility */
    int omp_threads;                    /* cores per rank under --bind_cores_to_rank, 0 none */
    enum nccl_omp omp;                  /* the launcher's rule otherwise */
};

/* Derives the variables. `environ` is the inherited "NAME=value" list (NULL-terminated; NULL is
 * empty). Returns 0, or -EINVAL for a NULL facts or out. */
int nccl_env_derive(const struct nccl_facts *f, char *const *environ, struct nccl_env *out);

/* The entry for `name`, NULL when nothing was said about it. */
const struct nccl_env_var *nccl_env_find(const struct nccl_env *e, const char *name);

/* Local rank `local_rank`'s own CUDA_VISIBLE_DEVICES (a UUID, or an ordinal when the UUID is
 * unknown) into buf. 0; -ENOENT when workers inherit the visibility; -ERANGE when there is no
 * device for that rank; -ENOSPC when buf is too small. */
int nccl_env_rank_visible(const struct nccl_env *e, const struct gpu_visible *v, int local_rank,
                          char *buf, size_t len);

/* The start-up line "podrun sets NAME=value NAME=value" (per-worker values shown as
 * "CUDA_VISIBLE_DEVICES=<per worker>"), "" when nothing is set. -ENOSPC when it does not fit. */
int nccl_env_summary(const struct nccl_env *e, char *buf, size_t len);

#endif
