/* launcher/env/torch.c — torchrun's worker environment, computed without I/O.
 *
 * Workers inherit podrun's whole environment plus the variables below (the list torchrun's
 * LocalElasticAgent sets). The rank variables always take the worker's own value — they are
 * the point of a launcher — but when one was inherited with another value env_torch_build
 * records it so the agent says so in one line. The NCCL error-handling knobs and the variables
 * derived from the node are only added when unset; the one exception is a worker's own
 * CUDA_VISIBLE_DEVICES, which is one device of the inherited list and so replaces it. */
#include "launcher/env/torch.h"

#include <string.h>

#include "launcher/env/environ.h"

/* One row per variable: its name and the worker's value (printf format and argument). The order
 * is env_torch_vars' order, so a variable's index is its bit in env_notes.replaced. */
#define TORCH_VARS(X)                                                               \
    X("LOCAL_RANK", "%d", w->local_rank)                                            \
    X("RANK", "%d", w->rank)                                                        \
    X("GROUP_RANK", "%d", w->group_rank)                                            \
    X("ROLE_RANK", "%d", w->role_rank)                                              \
    X("ROLE_NAME", "%s", w->role_name ? w->role_name : "default")                   \
    X("LOCAL_WORLD_SIZE", "%d", w->local_world_size)                                \
    X("WORLD_SIZE", "%d", w->world_size)                                            \
    X("GROUP_WORLD_SIZE", "%d", w->group_world_size)                                \
    X("ROLE_WORLD_SIZE", "%d", w->role_world_size)                                  \
    X("MASTER_ADDR", "%s", w->master_addr ? w->master_addr : "127.0.0.1")           \
    X("MASTER_PORT", "%d", w->master_port)                                          \
    X("TORCHELASTIC_RESTART_COUNT", "%d", w->restart_count)                         \
    X("TORCHELASTIC_MAX_RESTARTS", "%d", w->max_restarts)                           \
    X("TORCHELASTIC_RUN_ID", "%s", w->run_id ? w->run_id : "none")                  \
    X("TORCHELASTIC_USE_AGENT_STORE", "%s", w->use_agent_store ? "True" : "False")  \
    X("TORCHELASTIC_ERROR_FILE", "%s", w->error_file ? w->error_file : "")

#define TORCH_NAME(name, fmt, value) name,
const char *const env_torch_vars[ENV_TORCH_NUM_VARS] = {TORCH_VARS(TORCH_NAME)};
#define TORCH_ONE(name, fmt, value) +1
_Static_assert(0 TORCH_VARS(TORCH_ONE) == ENV_TORCH_NUM_VARS, "ENV_TORCH_NUM_VARS counts the rows");

static const char *const knobs[] = {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"};

/* Bit i for each torchrun variable base has with another value than s gives it. */
static unsigned replaced(char *const *base, const struct env_set *s)
{
    unsigned bits = 0;
    for (int i = 0; i < ENV_TORCH_NUM_VARS; i++) {
        const char *had = env_get(base, env_torch_vars[i]);
        const char *now = env_set_get(s, env_torch_vars[i]);
        if (had && now && strcmp(had, now))
            bits |= 1u << i;
    }
    return bits;
}

int env_torch_build(char *const *base, const struct env_worker *w, char ***out,
                    struct env_notes *notes)
{
    struct env_set s = ENV_SET_INIT;
#define TORCH_ADD(name, fmt, value) env_set_add(&s, name, fmt, value);
    TORCH_VARS(TORCH_ADD)
#undef TORCH_ADD
    if (w->heartbeat_file)
        env_set_add(&s, "PODRUN_HEARTBEAT_FILE", "%s", w->heartbeat_file);
    for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++)
        if (!env_get(base, knobs[i]))
            env_set_add(&s, knobs[i], "1");
    for (char *const *d = w->derived; d && *d; d++) {
        size_t nl = strcspn(*d, "=");
        char name[128];
        if (nl >= sizeof name || !(*d)[nl])
            continue;
        memcpy(name, *d, nl);
        name[nl] = '\0';
        if (!env_get(base, name))   /* the user's or the operator's value stands */
            env_set_add(&s, name, "%s", *d + nl + 1);
    }
    if (w->cuda_visible_devices)
        env_set_add(&s, "CUDA_VISIBLE_DEVICES", "%s", w->cuda_visible_devices);
    if (w->signals_to_handle)   /* the effective list, replacing the inherited one it read */
        env_set_add(&s, "TORCHELASTIC_SIGNALS_TO_HANDLE", "%s", w->signals_to_handle);
    struct env_notes nt = {replaced(base, &s)};
    /* podrun's own: an inherited heartbeat file would name another agent's */
    static const char *const drop[] = {"PODRUN_HEARTBEAT_FILE", NULL};
    int r = env_set_finish(&s, base, drop, out);
    if (!r && notes)
        *notes = nt;
    return r;
}
