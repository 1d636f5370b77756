/* launcher/env/torch.h — what each worker is started with under torchrun's rules: its
 * environment (reference/torch.md §2.2).
 *
 * Pure code (no I/O): the agent passes in the inherited environment and the worker's ranks and
 * gets back exactly torchrun's worker environment, plus notes on what it had to replace so the
 * agent can say so. */
#ifndef PODRUN_LAUNCHER_ENV_TORCH_H
#define PODRUN_LAUNCHER_ENV_TORCH_H

#include <stdbool.h>

struct env_worker {
    int local_rank, rank, group_rank, role_rank;
    int local_world_size, world_size, group_world_size, role_world_size;
    const char *role_name;
    const char *master_addr;
    int master_port;
    int restart_count, max_restarts;
    const char *run_id;
    bool use_agent_store;
    const char *error_file;
    const char *heartbeat_file;  /* PODRUN_HEARTBEAT_FILE (--hang-timeout), NULL: not set */
    const char *socket_ifname;   /* GLOO_SOCKET_IFNAME when unset: the --local-addr interface */
};

/* The variables env_torch_build sets; the index is the bit in env_notes.replaced. */
extern const char *const env_torch_vars[];
#define ENV_TORCH_NUM_VARS 16

struct env_notes {
    unsigned replaced;      /* bit i: env_torch_vars[i] was inherited with another value */
    bool omp_set;           /* OMP_NUM_THREADS=1 was added */
};

/* Builds a NULL-terminated environment: `base` minus the worker variables, then the worker
 * variables, then PODRUN_HEARTBEAT_FILE when heartbeat_file is set, then
 * TORCH_NCCL_ASYNC_ERROR_HANDLING / NCCL_ASYNC_ERROR_HANDLING=1 when unset and
 * OMP_NUM_THREADS=1 when unset and local_world_size > 1, GLOO_SOCKET_IFNAME=socket_ifname when
 * that is given and the variable is unset. One allocation: free(*out) frees all. */
int env_torch_build(char *const *base, const struct env_worker *w, char ***out,
                    struct env_notes *notes);

#endif
