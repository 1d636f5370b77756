/* launcher/env/deepspeed.c — DeepSpeed's worker environment and argv (see deepspeed.h). */
#include "launcher/env/deepspeed.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "launcher/env/environ.h"

const char *const env_deepspeed_vars[ENV_DEEPSPEED_NUM_VARS] = {
    "CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE", "CUDA_VISIBLE_DEVICES",
};

int env_deepspeed_build(char *const *base, const struct env_worker *w, const struct ds_worker *d,
                        char ***out, struct env_notes *notes)
{
    /* DeepSpeed's variables replace inherited ones (its runner drops CUDA_VISIBLE_DEVICES only
     * when it sets it); torchrun's rules then apply to the result */
    struct env_set s = ENV_SET_INIT;
    env_set_add(&s, env_deepspeed_vars[0], "%d", d->cross_rank);
    env_set_add(&s, env_deepspeed_vars[1], "%d", d->cross_size);
    env_set_add(&s, env_deepspeed_vars[2], "%d", w->local_world_size);
    if (d->devices)
        env_set_add(&s, env_deepspeed_vars[3], "%s", d->devices);
    /* DeepSpeed's launcher imports deepspeed, whose import sets this where unset (torch then
     * asks NVML whether CUDA is there), and its workers inherit it */
    if (!env_get(base, "PYTORCH_NVML_BASED_CUDA_CHECK"))
        env_set_add(&s, "PYTORCH_NVML_BASED_CUDA_CHECK", "1");
    char **mid = NULL;
    int r = env_set_finish(&s, base, NULL, &mid);
    struct env_worker tw = *w;
    tw.signals_to_handle = NULL;   /* DeepSpeed's launcher does not set it */
    if (!r)
        r = env_torch_build(mid, &tw, out, notes);
    free(mid);
    return r;
}

int env_deepspeed_argv(char *const *argv, int script, int local_rank, char *buf, size_t cap,
                       char ***out)
{
    int n = 0;
    while (argv[n])
        n++;
    if (script < 0 || script >= n || cap < 24)
        return -EINVAL;
    char **a = malloc(((size_t)n + 2) * sizeof(char *));
    if (!a)
        return -ENOMEM;
    snprintf(buf, cap, "--local_rank=%d", local_rank);
    int k = 0;
    for (int i = 0; i < n; i++) {
        a[k++] = argv[i];
        if (i == script)
            a[k++] = buf;
    }
    a[k] = NULL;
    *out = a;
    return 0;
}
