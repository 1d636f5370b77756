/* launcher/env/accelerate.c — accelerate launch's worker environment, computed without I/O (see
 * accelerate.h). Each value is the text accelerate's launcher writes: Python's str() of the
 * argument, lower-cased where it lower-cases it. */
#include "launcher/env/accelerate.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/env/environ.h"

static const char *acc(const struct cfg *c, enum cfg_id id)
{
    return cfg_acc(c, id);
}

static bool yes(const struct cfg *c, enum cfg_id id)
{
    const char *v = acc(c, id);
    return v && !strcmp(v, "True");
}

/* str(x).lower() */
static void lower_into(char *out, size_t cap, const char *in)
{
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

/* get_int_from_env: the first of names set to a number >= 0, else def. */
static long env_int(char *const *base, const char *const *names, long def)
{
    for (; *names; names++) {
        const char *v = env_get(base, *names);
        char *end;
        if (!v)
            continue;
        long x = strtol(v, &end, 10);
        if (end != v && !*end && x >= 0)
            return x;
    }
    return def;
}

enum env_accelerate_launcher env_accelerate_launcher(const struct cfg *c)
{
    if (yes(c, CFG_ACC_CPU))
        return ENV_ACC_SIMPLE;
    if (yes(c, CFG_ACC_USE_DEEPSPEED))
        return ENV_ACC_DEEPSPEED;
    if (yes(c, CFG_ACC_USE_FSDP) || yes(c, CFG_ACC_MULTI_GPU))
        return ENV_ACC_MULTI_GPU;
    return ENV_ACC_SIMPLE;
}

/* --num_cpu_threads_per_process, or accelerate's default: OMP_NUM_THREADS, else 1; on the CPU
 * without OMP_NUM_THREADS, and with at least one process (--num_processes, else the GPUs), the
 * physical cores shared by this machine's processes. */
static long omp_threads(char *const *base, const struct env_worker *w, const struct cfg *c,
                        const struct env_accelerate *m)
{
    static const char *const omp[] = {"OMP_NUM_THREADS", NULL};
    static const char *const local[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                        "MV2_COMM_WORLD_LOCAL_SIZE", NULL};
    const char *given = acc(c, CFG_ACC_NUM_CPU_THREADS);
    if (given)
        return atol(given);
    long n = env_int(base, omp, 1);
    const char *np = acc(c, CFG_ACC_NUM_PROCESSES), *nm = acc(c, CFG_ACC_NUM_MACHINES);
    long procs = np ? atol(np) : m->ngpus, machines = nm ? atol(nm) : 1;
    (void)w;
    if (yes(c, CFG_ACC_CPU) && procs >= 1 && env_int(base, omp, 0) == 0) {
        long per_node = machines > 0 ? procs / machines : procs;
        long size = env_int(base, local, per_node > 1 ? per_node : 1);
        long per = size > 0 ? m->physical_cores / size : 0;
        if (per > 1)
            n = per;
    }
    return n;
}

/* The values every launcher sets: debug, devices, precision. */
static void common(struct env_set *s, const struct cfg *c)
{
    char low[64];
    if (yes(c, CFG_ACC_DEBUG))
        env_set_add(s, "ACCELERATE_DEBUG_MODE", "true");
    const char *ids = acc(c, CFG_ACC_GPU_IDS);
    if (ids && strcmp(ids, "all"))
        env_set_add(s, "CUDA_VISIBLE_DEVICES", "%s", ids);
    const char *mp = acc(c, CFG_ACC_MIXED_PRECISION);
    lower_into(low, sizeof low, mp ? mp : "no");
    env_set_add(s, "ACCELERATE_MIXED_PRECISION", "%s", low);
}

static void dynamo(struct env_set *s, const struct cfg *c)
{
    char up[64];
    const char *b = acc(c, CFG_ACC_DYNAMO_BACKEND);
    size_t i = 0;
    for (b = b ? b : "no"; b[i] && i + 1 < sizeof up; i++)
        up[i] = (char)toupper((unsigned char)b[i]);
    up[i] = '\0';
    env_set_add(s, "ACCELERATE_DYNAMO_BACKEND", "%s", up);
    env_set_add(s, "ACCELERATE_DYNAMO_MODE", "%s", acc(c, CFG_ACC_DYNAMO_MODE));
    env_set_add(s, "ACCELERATE_DYNAMO_USE_FULLGRAPH", "%s", acc(c, CFG_ACC_DYNAMO_FULLGRAPH));
    env_set_add(s, "ACCELERATE_DYNAMO_USE_DYNAMIC", "%s", acc(c, CFG_ACC_DYNAMO_DYNAMIC));
    env_set_add(s, "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "%s",
                acc(c, CFG_ACC_DYNAMO_REGIONAL));
}

/* FSDP_* of prepare_multi_gpu_env: some always, some when given, some lower-cased. */
static void fsdp(struct env_set *s, const struct cfg *c)
{
    static const struct {
        const char *var;
        enum cfg_id id;
        bool lower, optional;
    } vars[] = {
        {"FSDP_VERSION", CFG_ACC_FSDP_VERSION, false, false},
        {"FSDP_SHARDING_STRATEGY", CFG_ACC_FSDP_SHARDING_STRATEGY, false, false},
        {"FSDP_RESHARD_AFTER_FORWARD", CFG_ACC_FSDP_RESHARD_AFTER_FORWARD, true, false},
        {"FSDP_OFFLOAD_PARAMS", CFG_ACC_FSDP_OFFLOAD_PARAMS, true, false},
        {"FSDP_MIN_NUM_PARAMS", CFG_ACC_FSDP_MIN_NUM_PARAMS, false, false},
        {"FSDP_AUTO_WRAP_POLICY", CFG_ACC_FSDP_AUTO_WRAP_POLICY, false, true},
        {"FSDP_TRANSFORMER_CLS_TO_WRAP", CFG_ACC_FSDP_TRANSFORMER_CLS, false, true},
        {"FSDP_BACKWARD_PREFETCH", CFG_ACC_FSDP_BACKWARD_PREFETCH, false, true},
        {"FSDP_STATE_DICT_TYPE", CFG_ACC_FSDP_STATE_DICT_TYPE, false, true},
        {"FSDP_FORWARD_PREFETCH", CFG_ACC_FSDP_FORWARD_PREFETCH, true, false},
        {"FSDP_USE_ORIG_PARAMS", CFG_ACC_FSDP_USE_ORIG_PARAMS, true, false},
        {"FSDP_CPU_RAM_EFFICIENT_LOADING", CFG_ACC_FSDP_CPU_RAM_EFFICIENT_LOADING, true, false},
        {"FSDP_SYNC_MODULE_STATES", CFG_ACC_FSDP_SYNC_MODULE_STATES, true, false},
        {"FSDP_ACTIVATION_CHECKPOINTING", CFG_ACC_FSDP_ACTIVATION_CHECKPOINTING, true, false},
        {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", CFG_ACC_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD,
         true, false},
        {"FSDP_IGNORED_MODULES", CFG_ACC_FSDP_IGNORED_MODULES, false, true},
    };
    env_set_add(s, "ACCELERATE_USE_FSDP", "true");
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = acc(c, vars[i].id);
        char low[4096];
        if (!v && vars[i].optional)
            continue;
        /* str(None) for a value a file emptied */
        lower_into(low, sizeof low, v ? v : "None");
        env_set_add(s, vars[i].var, "%s", vars[i].lower ? low : v ? v : "None");
    }
}

/* prepare_deepspeed_cmd_env's own values. */
static void deepspeed(struct env_set *s, char *const *base, const struct cfg *c,
                      const struct env_accelerate *m)
{
    static const struct {
        const char *var;
        enum cfg_id id;
        bool lower;
    } vars[] = {
        {"ACCELERATE_DEEPSPEED_ZERO_STAGE", CFG_ACC_ZERO_STAGE, false},
        {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", CFG_ACC_GRADIENT_ACCUMULATION_STEPS, false},
        {"ACCELERATE_GRADIENT_CLIPPING", CFG_ACC_GRADIENT_CLIPPING, true},
        {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", CFG_ACC_OFFLOAD_OPTIMIZER_DEVICE, true},
        {"ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", CFG_ACC_OFFLOAD_PARAM_DEVICE, true},
        {"ACCELERATE_DEEPSPEED_ZERO3_INIT", CFG_ACC_ZERO3_INIT_FLAG, true},
        {"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", CFG_ACC_ZERO3_SAVE_16BIT_MODEL, true},
        {"ACCELERATE_DEEPSPEED_CONFIG_FILE", CFG_ACC_DS_CONFIG_FILE, false},
    };
    /* env_var_path_add: the non-empty entries of PYTHONPATH, then the working directory */
    char path[4096] = "";
    const char *pp = env_get(base, "PYTHONPATH");
    size_t o = 0;
    for (const char *p = pp; p && *p;) {
        size_t l = strcspn(p, ":");
        if (l && o + l + 1 < sizeof path)
            o += (size_t)snprintf(path + o, sizeof path - o, "%.*s:", (int)l, p);
        p += l;
        if (*p == ':')
            p++;
    }
    env_set_add(s, "PYTHONPATH", "%s%s", path, m->cwd ? m->cwd : ".");
    char low[1024];
    const char *fields = acc(c, CFG_ACC_DS_FIELDS);
    lower_into(low, sizeof low, fields ? fields : "");
    env_set_add(s, "ACCELERATE_CONFIG_DS_FIELDS", "%s", low);
    env_set_add(s, "ACCELERATE_USE_DEEPSPEED", "true");
    /* accelerate's launcher imports deepspeed, whose __init__ sets it where unset (so that
     * torch asks NVML, not a CUDA context, whether CUDA is there); the workers inherit it */
    if (!env_get(base, "PYTORCH_NVML_BASED_CUDA_CHECK"))
        env_set_add(s, "PYTORCH_NVML_BASED_CUDA_CHECK", "1");
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = acc(c, vars[i].id);
        if (!v)
            continue;
        lower_into(low, sizeof low, v);
        env_set_add(s, vars[i].var, "%s", vars[i].lower ? low : v);
    }
}

/* The simple launcher's rendezvous address, for a job of several processes or machines
 * (prepare_simple_launcher_cmd_env): main_process_ip/port, on one machine 127.0.0.1:29500
 * when not given. Whether it set them. */
static bool simple_master(struct env_set *s, const struct cfg *c)
{
    const char *np = acc(c, CFG_ACC_NUM_PROCESSES), *nm = acc(c, CFG_ACC_NUM_MACHINES);
    const char *ip = acc(c, CFG_ACC_MAIN_PROCESS_IP), *port = acc(c, CFG_ACC_MAIN_PROCESS_PORT);
    bool machines = nm && atol(nm) > 1;
    if (!machines && !(np && atol(np) > 1))
        return false;
    env_set_add(s, "MASTER_ADDR", "%s", ip ? ip : machines ? "None" : "127.0.0.1");
    env_set_add(s, "MASTER_PORT", "%s", port ? port : machines ? "None" : "29500");
    return true;
}

int env_accelerate_build(char *const *base, const struct env_worker *w, const struct cfg *c,
                         const struct env_accelerate *m, char ***out, struct env_notes *notes)
{
    enum env_accelerate_launcher l = env_accelerate_launcher(c);
    /* torchrun's variables: its launchers, and more than one process of podrun's own */
    bool torch = l != ENV_ACC_SIMPLE || w->world_size > 1;
    char **tenv = NULL;
    struct env_notes tn = {0};
    struct env_worker tw = *w;
    if (l == ENV_ACC_SIMPLE)
        tw.signals_to_handle = NULL;   /* set by torchrun's agent, which this one is not */
    int r = env_torch_build(base, &tw, &tenv, &tn);
    if (r)
        return r;
    struct env_set s = ENV_SET_INIT;
    common(&s, c);
    if (l == ENV_ACC_SIMPLE) {
        const char *cpu = yes(c, CFG_ACC_CPU) ? "True" : "False";
        env_set_add(&s, "ACCELERATE_USE_CPU", "%s", cpu);
        /* accelerate 1.x: str_to_bool(current_env["ACCELERATE_USE_CPU"]); its 0.x looked a
         * variable of that name up instead, so only a variable named True set them */
        if (yes(c, CFG_ACC_CPU)) {
            env_set_add(&s, "KMP_AFFINITY", "granularity=fine,compact,1,0");
            env_set_add(&s, "KMP_BLOCKTIME", "1");
        }
    }
    if (l == ENV_ACC_DEEPSPEED) {
        deepspeed(&s, base, c, m);
    } else {
        dynamo(&s, c);
        if (l == ENV_ACC_MULTI_GPU && yes(c, CFG_ACC_USE_FSDP))
            fsdp(&s, c);
        /* accelerate sets it whatever podrun derived from the node (set in s, it replaces the
         * derived value env_torch_build added) */
        env_set_add(&s, "OMP_NUM_THREADS", "%ld", omp_threads(base, w, c, m));
    }
    if (yes(c, CFG_ACC_CPU_AFFINITY))
        env_set_add(&s, "ACCELERATE_CPU_AFFINITY", "1");
    if (l == ENV_ACC_DEEPSPEED && acc(c, CFG_ACC_DS_MOE_LAYER_CLS_NAMES))
        env_set_add(&s, "ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES", "%s",
                    acc(c, CFG_ACC_DS_MOE_LAYER_CLS_NAMES));
    /* one process of the simple launcher: none of torchrun's variables (an inherited one keeps
     * its value) nor the knobs its agent adds; podrun's own (the heartbeat file, gloo's
     * interface) stay */
    static const char *const knobs[] = {"TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                        "NCCL_ASYNC_ERROR_HANDLING"};
    const char *drop[ENV_TORCH_NUM_VARS + 3];
    size_t nd = 0;
    bool master = !torch && simple_master(&s, c);
    if (!torch) {
        for (int i = 0; i < ENV_TORCH_NUM_VARS; i++) {
            const char *v = env_get(base, env_torch_vars[i]);
            if (master && (!strcmp(env_torch_vars[i], "MASTER_ADDR") ||
                           !strcmp(env_torch_vars[i], "MASTER_PORT")))
                continue;
            if (v)
                env_set_add(&s, env_torch_vars[i], "%s", v);
            else
                drop[nd++] = env_torch_vars[i];
        }
        for (int i = 0; i < 2; i++)
            if (!env_get(base, knobs[i]))
                drop[nd++] = knobs[i];
        tn.replaced = 0;
    }
    drop[nd] = NULL;
    r = env_set_finish(&s, tenv, drop, out);
    free(tenv);
    if (!r && notes)
        *notes = tn;
    return r;
}
