/* launcher/env/torch.h — what each worker is started with under torchrun's rules: its
 * environment (reference/torch.md §2.2).
 *
 * Pure code (no I/O): the agent passes in the inherited environment and the worker's ranks and
 * gets back exactly torchrun's worker environment, plus notes on what it had to replace so the
 * agent can say so. What podrun derives from the node (env/nccl.h: NCCL_SOCKET_IFNAME,
 * GLOO_SOCKET_IFNAME, OMP_NUM_THREADS, ...) comes in as a list and is merged here, each variable
 * only where the inherited environment does not have it. */
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
    char *const *derived;        /* "NAME=value" list (NULL-terminated; NULL: none), each added
                                    only when the inherited environment lacks NAME */
    const char *cuda_visible_devices; /* the worker's own device (per-rank visibility), which
                                         replaces an inherited list; NULL: inherit */
    const char *signals_to_handle; /* TORCHELASTIC_SIGNALS_TO_HANDLE: torch 2.x's agent writes
                                      its list into its own environment, so its workers inherit
                                      it; NULL (launchers other than torchrun's): not set */
};

/* The variables env_torch_build sets; the index is the bit in env_notes.replaced. */
extern const char *const env_torch_vars[];
#define ENV_TORCH_NUM_VARS 16

struct env_notes {
    unsigned replaced;      /* bit i: env_torch_vars[i] was inherited with another value */
};

/* Builds a NULL-terminated environment: `base` minus the worker variables, then the worker
 * variables, then PODRUN_HEARTBEAT_FILE when heartbeat_file is set, then
 * TORCH_NCCL_ASYNC_ERROR_HANDLING / NCCL_ASYNC_ERROR_HANDLING=1 when unset, then each `derived`
 * variable the base lacks, then CUDA_VISIBLE_DEVICES when the worker has its own and
 * TORCHELASTIC_SIGNALS_TO_HANDLE when signals_to_handle is set. One
 * allocation: free(*out) frees all. */
int env_torch_build(char *const *base, const struct env_worker *w, char ***out,
                    struct env_notes *notes);

#endif
