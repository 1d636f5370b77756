/* launcher/env/torch.c — torchrun's worker environment, computed without I/O.
 *
 * Workers inherit podrun's whole environment plus the variables below (the list torchrun's
 * LocalElasticAgent sets). The rank variables always take the worker's own value — they are
 * the point of a launcher — but when one was inherited with another value env_torch_build
 * records it so the agent says so in one line. The NCCL error-handling knobs and the variables
 * derived from the node are only added when unset; the one exception is a worker's own
 * CUDA_VISIBLE_DEVICES, which is one device of the inherited list and so replaces it. */
#include "launcher/env/torch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/env/environ.h"

const char *const env_torch_vars[ENV_TORCH_NUM_VARS] = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
};

static const char *const knobs[] = {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"};

int env_torch_build(char *const *base, const struct env_worker *w, char ***out,
                    struct env_notes *notes)
{
    char vals[ENV_TORCH_NUM_VARS][512];
    const int ints[] = {w->local_rank, w->rank, w->group_rank, w->role_rank};
    for (int i = 0; i < 4; i++)
        snprintf(vals[i], sizeof vals[i], "%d", ints[i]);
    snprintf(vals[4], sizeof vals[4], "%s", w->role_name ? w->role_name : "default");
    const int sizes[] = {w->local_world_size, w->world_size, w->group_world_size,
                         w->role_world_size};
    for (int i = 0; i < 4; i++)
        snprintf(vals[5 + i], sizeof vals[5 + i], "%d", sizes[i]);
    snprintf(vals[9], sizeof vals[9], "%s", w->master_addr ? w->master_addr : "127.0.0.1");
    snprintf(vals[10], sizeof vals[10], "%d", w->master_port);
    snprintf(vals[11], sizeof vals[11], "%d", w->restart_count);
    snprintf(vals[12], sizeof vals[12], "%d", w->max_restarts);
    snprintf(vals[13], sizeof vals[13], "%s", w->run_id ? w->run_id : "none");
    snprintf(vals[14], sizeof vals[14], "%s", w->use_agent_store ? "True" : "False");
    snprintf(vals[15], sizeof vals[15], "%s", w->error_file ? w->error_file : "");

    struct env_notes nt = {0};
    size_t nbase = 0, bytes = 0;
    for (char *const *e = base; e && *e; e++) {
        nbase++;
        bytes += strlen(*e) + 1;
    }
    for (int i = 0; i < ENV_TORCH_NUM_VARS; i++)
        bytes += strlen(env_torch_vars[i]) + strlen(vals[i]) + 2;
    bytes += 64 * 2;   /* the knobs */
    size_t nderived = 0;
    for (char *const *d = w->derived; d && *d; d++) {
        nderived++;
        bytes += strlen(*d) + 1;
    }
    if (w->cuda_visible_devices)
        bytes += sizeof "CUDA_VISIBLE_DEVICES=" + strlen(w->cuda_visible_devices);
    if (w->heartbeat_file)
        bytes += sizeof "PODRUN_HEARTBEAT_FILE=" + strlen(w->heartbeat_file);
    size_t slots = nbase + ENV_TORCH_NUM_VARS + nderived + 5;
    char **arr = malloc(slots * sizeof(char *) + bytes);
    if (!arr)
        return -ENOMEM;
    char *p = (char *)(arr + slots);
    size_t n = 0;

    for (char *const *e = base; e && *e; e++) {
        int hit = -1;
        for (int i = 0; i < ENV_TORCH_NUM_VARS && hit < 0; i++)
            if (env_is(*e, env_torch_vars[i]))
                hit = i;
        if (env_is(*e, "PODRUN_HEARTBEAT_FILE"))
            continue;   /* podrun's own: an inherited one would name another agent's file */
        if (w->cuda_visible_devices && env_is(*e, "CUDA_VISIBLE_DEVICES"))
            continue;
        if (hit >= 0) {
            if (strcmp(*e + strlen(env_torch_vars[hit]) + 1, vals[hit]))
                nt.replaced |= 1u << hit;
            continue;
        }
        size_t l = strlen(*e) + 1;
        memcpy(p, *e, l);
        arr[n++] = p;
        p += l;
    }
    for (int i = 0; i < ENV_TORCH_NUM_VARS; i++) {
        arr[n++] = p;
        p += sprintf(p, "%s=%s", env_torch_vars[i], vals[i]) + 1;
    }
    if (w->heartbeat_file) {
        arr[n++] = p;
        p += sprintf(p, "PODRUN_HEARTBEAT_FILE=%s", w->heartbeat_file) + 1;
    }
    for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++)
        if (!env_get(base, knobs[i])) {
            arr[n++] = p;
            p += sprintf(p, "%s=1", knobs[i]) + 1;
        }
    for (char *const *d = w->derived; d && *d; d++) {
        size_t nl = strcspn(*d, "=");
        char name[128];
        if (nl >= sizeof name || !(*d)[nl])
            continue;
        memcpy(name, *d, nl);
        name[nl] = '\0';
        if (env_get(base, name))
            continue;   /* the user's or the operator's value stands */
        size_t l = strlen(*d) + 1;
        memcpy(p, *d, l);
        arr[n++] = p;
        p += l;
    }
    if (w->cuda_visible_devices) {
        arr[n++] = p;
        sprintf(p, "CUDA_VISIBLE_DEVICES=%s", w->cuda_visible_devices); /* the last string */
    }
    arr[n] = NULL;
    *out = arr;
    if (notes)
        *notes = nt;
    return 0;
}
