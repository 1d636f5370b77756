/* launcher/env/accelerate.h — what each worker is started with under `accelerate launch`
 * (reference/launchers.md §2.4; huggingface/accelerate utils/launch.py).
 *
 * accelerate picks one of three launchers and each gives its workers a different environment:
 *   deepspeed  (--use_deepspeed, not --cpu): torchrun's variables, PYTHONPATH with the working
 *              directory appended, ACCELERATE_USE_DEEPSPEED=true and the ACCELERATE_DEEPSPEED_*
 *              / ACCELERATE_GRADIENT_* values given, ACCELERATE_CONFIG_DS_FIELDS; no
 *              OMP_NUM_THREADS of its own.
 *   multi-GPU  (--multi_gpu or --use_fsdp, not --cpu): torchrun's variables, the dynamo values,
 *              FSDP_* with ACCELERATE_USE_FSDP=true, OMP_NUM_THREADS.
 *   simple     (anything else: one process, or --cpu): no torchrun variables, but
 *              ACCELERATE_USE_CPU=True|False and the dynamo values and OMP_NUM_THREADS.
 * All three: ACCELERATE_MIXED_PRECISION, ACCELERATE_DEBUG_MODE=true with --debug,
 * CUDA_VISIBLE_DEVICES from --gpu_ids unless "all", ACCELERATE_CPU_AFFINITY=1.
 *
 * Where accelerate would run its simple launcher for more than one process (mpirun), podrun
 * starts the processes itself, so they also get torchrun's variables, which accelerate's
 * workers read before MPI's. The simple launcher's KMP_AFFINITY/KMP_BLOCKTIME are set, as in
 * accelerate, only when the environment holds a variable named after ACCELERATE_USE_CPU's own
 * value ("True") that reads as true: accelerate looks the value up as a name.
 *
 * Pure code: the agent passes in the inherited environment, the worker's ranks, the config and
 * two facts of the machine. */
#ifndef PODRUN_LAUNCHER_ENV_ACCELERATE_H
#define PODRUN_LAUNCHER_ENV_ACCELERATE_H

#include "launcher/config/config.h"
#include "launcher/env/torch.h"

enum env_accelerate_launcher { ENV_ACC_SIMPLE, ENV_ACC_MULTI_GPU, ENV_ACC_DEEPSPEED };

struct env_accelerate {
    int physical_cores;   /* psutil's cpu_count(logical=False): --cpu's OMP_NUM_THREADS */
    int ngpus;            /* the GPUs CUDA sees: --num_processes when it is not given */
    const char *cwd;      /* the working directory (DeepSpeed's PYTHONPATH) */
};

/* The launcher accelerate would use for this configuration. */
enum env_accelerate_launcher env_accelerate_launcher(const struct cfg *c);

/* The worker's environment (NULL-terminated; free(*out) frees it): env_torch_build's, w's derived
 * variables included, under accelerate's own, so its OMP_NUM_THREADS rule wins over the node's.
 * notes as env_torch_build's. 0 or -ENOMEM. */
int env_accelerate_build(char *const *base, const struct env_worker *w, const struct cfg *c,
                         const struct env_accelerate *m, char ***out, struct env_notes *notes);

#endif
