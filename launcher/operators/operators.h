/* launcher/operators/operators.h — a scheduler's environment into the one config struct: who this
 * pod is in its job (node rank), how many nodes the job has, which pod hosts the job store, and
 * the rest a scheduler says (workers per node, a job id), read from what the scheduler injected
 * into the pod: its environment variables and the files it mounts.
 *
 * One adapter per source, each in its own file, each writing only through cfg_set at
 * CFG_SRC_OPERATOR (a hostfile's lines at CFG_SRC_HOSTFILE), every value with the variable or
 * line it came from, so `podrun --print-config` says "node-rank 2 (env RANK (Volcano pytorch
 * plugin))". What each scheduler injects, and why each maps the way it does, is written in its
 * adapter, with reference/k8s.md's sections as the facts.
 *
 * --discovery (CFG_DISCOVERY) picks the sources:
 *   auto      a hostfile named by --hostfile, else the first scheduler found, in this order:
 *               1 Volcano          VC_TASK_INDEX/VK_TASK_INDEX, VC_<TASK>_HOSTS/_NUM, the pytorch
 *                                  plugin's MASTER_ADDR/RANK/WORLD_SIZE, /etc/volcano/<task>.host
 *                                  (before PyTorchJob: the plugin uses PyTorchJob's names)
 *               2 PaddleJob        paddle-operator's PADDLE_TRAINER_ID + TRAINING_ROLE, or the
 *                                  training-operator's PADDLE_MASTER + PADDLE_NNODES
 *               3 MPIJob           OMPI_MCA_orte_default_hostfile (I_MPI_HYDRA_HOST_FILE,
 *                                  HYDRA_HOST_FILE), or K_MPI_JOB_ROLE with /etc/mpi/hostfile
 *                                  (before the Trainer and JobSet: Trainer v2's MPI runtime runs
 *                                  its nodes as JobSet pods, and the hostfile says more)
 *               4 Kubeflow Trainer v2   JOB_COMPLETION_INDEX + PET_NODE_RANK + PET_MASTER_ADDR
 *               5 PyTorchJob       MASTER_ADDR + MASTER_PORT + WORLD_SIZE + RANK (a pod, not a
 *                                  launcher's worker: no LOCAL_RANK, GROUP_RANK, TORCHELASTIC_*)
 *               6 LeaderWorkerSet  LWS_LEADER_ADDRESS + LWS_GROUP_SIZE + LWS_WORKER_INDEX
 *               7 JobSet, Indexed Job   JOB_COMPLETION_INDEX (JOBSET_JOB_INDEX for a JobSet's
 *                                  job index, mapped from its annotation by the downward API)
 *               8 SLURM            SLURM_JOB_ID + SLURM_NODEID + SLURM_NNODES
 *             the first one present is the job's; none present: nothing is discovered.
 *   env       the same schedulers, but one must be present (an error names what was looked for);
 *             --hostfile is then an error.
 *   hostfile  a hostfile only: --hostfile FILE, else MPIJob's hostfile, else the Volcano
 *             <task>.host file that names this pod; scheduler variables are not read.
 *   k8s       the Kubernetes API (launcher/discover/k8s_watch.c); nothing here is read.
 *   none      nothing is discovered: flags, PODRUN_* and PET_* only (torchrun's behaviour).
 * --standalone is a single node: nothing is discovered either.
 *
 * Conflicts. A scheduler writes all of its variables for one pod: when two of them contradict
 * each other (RANK >= WORLD_SIZE, Volcano's task index against its pytorch plugin's RANK, a
 * PyTorchJob's RANK against its PET_NODE_RANK, SLURM's node list against its node count, a pod
 * missing from its own hostfile) the pod is not what its scheduler says and any choice could start
 * the job wrong: one line naming both values and their sources, exit 2. A value that the user
 * gives (PET_*, PODRUN_*, a flag) replaces the scheduler's: that is precedence, and how to
 * override a scheduler. What precedence cannot make one job is an error too: a node rank not below
 * the node count when the two come from different layers (cfg_finalize names both), a scheduler
 * that names this pod's rank but not the node count, and one that gives several nodes but not the
 * store's host, when nothing else gives them either.
 *
 * Pure code: the environment and the machine (discover/host.h) are handed in. */
#ifndef PODRUN_LAUNCHER_OPERATORS_OPERATORS_H
#define PODRUN_LAUNCHER_OPERATORS_OPERATORS_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/config/config.h"
#include "launcher/discover/host.h"

/* What an adapter reads. */
struct op_ctx {
    char *const *envp;                  /* NULL-terminated NAME=value */
    const struct discover_host *host;   /* the files and names; NULL: none (env only) */
    const struct cfg *cfg;              /* --local-addr, --node-name, discovery-root */
    bool files_only;                    /* --discovery hostfile: the mounted hostfiles alone */
};

enum { OP_ENV = 1, OP_FILES = 2 };      /* the --discovery modes an adapter serves */

struct op_adapter {
    const char *name;                   /* the value of `discovered`: "Volcano" */
    unsigned modes;                     /* OP_ENV and/or OP_FILES */
    /* Is this source present? On yes, names what showed it in `why` (the source of
     * `discovered`, e.g. env "VC_TASK_INDEX (Volcano)"). */
    bool (*detect)(const struct op_ctx *x, struct cfg_src *why);
    /* Its values into c. 0 or -EINVAL (-ENOMEM) with one line in err. */
    int (*apply)(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen);
};

/* In detection order. */
extern const struct op_adapter op_volcano, op_paddlejob, op_mpijob, op_trainjob, op_pytorchjob,
    op_lws, op_jobset, op_slurm;

/* The discovery layer: after the environment and command-line layers (so that --discovery,
 * --hostfile, --local-addr and --node-name are known), before the front-end's finalize hook. Picks
 * the source (see above), applies it, and checks that the result can describe one job. 0 or
 * -EINVAL (-ENOMEM) with one line in err. */
int operators_load(struct cfg *c, char *const *envp, const struct discover_host *host, char *err,
                   size_t errlen);

/* The adapter --discovery auto (or env) would pick, or NULL. */
const struct op_adapter *operators_detect(const struct cfg *c, char *const *envp,
                                          const struct discover_host *host);

#endif
