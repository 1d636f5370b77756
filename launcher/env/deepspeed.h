/* launcher/env/deepspeed.h — what the deepspeed launcher gives each worker (reference/
 * launchers.md §1.3), computed without I/O.
 *
 *  - The worker environment: torchrun's (env/torch.h), so init_process_group() from env works,
 *    plus DeepSpeed's CROSS_RANK, CROSS_SIZE, LOCAL_SIZE and CUDA_VISIBLE_DEVICES = the node's
 *    slot ids. LOCAL_RANK is the worker's index on its node, also where nodes have different slot
 *    counts (DeepSpeed's launch.py computes global_rank % num_local_procs, wrong there).
 *  - The worker's argv: `--local_rank=N` right after the script unless --no_local_rank.
 * What the head and the hosts exchange (world_info, .deepspeed_env) is frontends/deepspeed_hosts.h;
 * the head's command lines are fanout_cmd.h. */
#ifndef PODRUN_LAUNCHER_ENV_DEEPSPEED_H
#define PODRUN_LAUNCHER_ENV_DEEPSPEED_H

#include <stddef.h>

#include "launcher/env/torch.h"

struct ds_worker {
    int cross_rank, cross_size;   /* node rank, node count */
    const char *devices;          /* CUDA_VISIBLE_DEVICES: the node's slot ids; NULL: unset */
};

/* The variables env_deepspeed_build sets besides torchrun's. */
extern const char *const env_deepspeed_vars[];
#define ENV_DEEPSPEED_NUM_VARS 4

/* torchrun's environment (env_torch_build, whose notes it returns) with DeepSpeed's variables:
 * CROSS_RANK, CROSS_SIZE, LOCAL_SIZE (= w->local_world_size) and CUDA_VISIBLE_DEVICES (when
 * d->devices is set; an inherited one is replaced: DeepSpeed's runner drops it). One
 * allocation: free(*out) frees all. */
int env_deepspeed_build(char *const *base, const struct env_worker *w, const struct ds_worker *d,
                        char ***out, struct env_notes *notes);

/* argv with "--local_rank=<local_rank>" inserted after argv[script] (the user's script or
 * module: DeepSpeed's place for it), into buf (at least 24 bytes) and *out (malloc'd array,
 * NULL-terminated, pointing into argv and buf). 0 or -ENOMEM / -EINVAL. */
int env_deepspeed_argv(char *const *argv, int script, int local_rank, char *buf, size_t cap,
                       char ***out);

#endif
