/* launcher/frontends/accelerate_cli.c — `accelerate launch`'s words (huggingface/accelerate:
 * commands/launch.py; reference/launchers.md §2): every launching flag in both spellings, its
 * config file (commands/config/config_args.py) and the arithmetic its multi-GPU launcher does
 * before handing over to torchrun (utils/launch.py prepare_multi_gpu_env).
 *
 * Every value keeps accelerate's text: Python's str() of what its parser or the config file
 * gave, which is what env/accelerate.c hands to the workers. What accelerate computes from them
 * (workers per machine, the rendezvous) becomes podrun's own settings, each named after the flag
 * or config key it came from.
 *
 * Which of config file and command line wins is accelerate's rule (_validate_launch_command):
 * a config key is taken only where the command line left the value at None. Flags whose default
 * is not None (--same_network, --rdzv_backend, --enable_cpu_affinity) therefore never take the
 * file's value; podrun matches that and doc/frontends.md#accelerate-launch says so. The keys of
 * the file's sections (deepspeed_config, fsdp_config, dynamo_config) win unless the flag was
 * given. */
#include "launcher/frontends/frontend.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/host.h"
#include "launcher/env/environ.h"
#include "launcher/frontends/accel_config.h"
#include "rdzv/base/common.h"

#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

static const char no_tpu[] = "podrun does not launch TPU training (torch_xla); run it with "
                             "accelerate itself";
static const char no_megatron[] = "podrun does not launch Megatron-LM jobs; run them with "
                                  "accelerate itself";
static const char no_mpi[] = "podrun does not launch through mpirun; drop it: podrun starts "
                             "every process itself (--num_processes, --num_machines)";
static const char no_sagemaker[] = "podrun does not launch SageMaker jobs";
static const char no_fp8[] = "podrun does not pass accelerate's FP8 recipe settings on; drop "
                             "them or launch with accelerate itself";
static const char no_nd[] = "podrun does not pass accelerate's ParallelismConfig on; drop it "
                            "or launch with accelerate itself";

/* ---- transforms: what argparse's type= and choices= accept, as Python writes the result ---- */

/* Python's int(): optional sign, digits with single '_' between them, spaces around. */
static int py_int(const char *in, long long *v)
{
    char t[32];
    size_t o = 0;
    const char *p = in;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+')
        t[o++] = *p++;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    for (; *p && !isspace((unsigned char)*p); p++) {
        if (*p == '_' && isdigit((unsigned char)p[-1]) && isdigit((unsigned char)p[1]))
            continue;
        if (!isdigit((unsigned char)*p) || o + 1 >= sizeof t)
            return -EINVAL;
        t[o++] = *p;
    }
    while (isspace((unsigned char)*p))
        p++;
    t[o] = '\0';
    if (*p)
        return -EINVAL;
    errno = 0;
    char *end;
    *v = strtoll(t, &end, 10);
    return errno || *end ? -EINVAL : 0;
}

static int t_int(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    long long v;
    if (py_int(in, &v))
        return fail(err, errlen, "expected a whole number");
    snprintf(out, cap, "%lld", v);
    return 0;
}

static int t_float(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(in, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (end == in || *end || errno)
        return fail(err, errlen, "expected a number, e.g. 1.0");
    acc_py_float(v, out, cap);
    return 0;
}

static int choose(const char *in, const char *const *set, char *out, size_t cap, char *err,
                  size_t errlen)
{
    char list[256] = "";
    textlist_t l = {list, sizeof list, 0, 0, 64};
    for (const char *const *s = set; *s; s++) {
        if (!strcmp(in, *s)) {
            snprintf(out, cap, "%s", in);
            return 0;
        }
        textlist_add(&l, *s);
    }
    return fail(err, errlen, "expected one of %s", list);
}

static int t_precision(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    static const char *const set[] = {"no", "fp16", "bf16", "fp8", NULL};
    return choose(in, set, out, cap, err, errlen);
}

/* commands/config/config_utils.py DYNAMO_BACKENDS, lower-cased, after "no" */
static const char *const dynamo_choices[] = {
    "no", "eager", "aot_eager", "inductor", "aot_ts_nvfuser", "nvprims_nvfuser", "cudagraphs",
    "ofi", "fx2trt", "onnxrt", "tensorrt", "aot_torchxla_trace_once", "torhchxla_trace_once",
    "tvm", NULL};

static int t_dynamo_backend(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    return choose(in, dynamo_choices, out, cap, err, errlen);
}

static int t_dynamo_mode(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    static const char *const set[] = {"default", "reduce-overhead", "max-autotune", NULL};
    return choose(in, set, out, cap, err, errlen);
}

static int t_fsdp_version(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    static const char *const set[] = {"1", "2", NULL};
    return choose(in, set, out, cap, err, errlen);
}

/* ---- the command line ------------------------------------------------------------------------ */

/* A flag in accelerate's two spellings: "--a_b" and "--a-b" (a store_true one's setting is a
 * bool, which stands alone). */
#define W2(u, d, id, tr) {u, id, tr}, {d, id, tr}
#define B2(u, d, id) {u, id, NULL}, {d, id, NULL}
#define R2(u, d, why) {u, false, why}, {d, false, why}

static const struct fe_word flags[] = {
    W2("--config_file", "--config-file", CFG_ACC_CONFIG_FILE, NULL),
    {"-q", CFG_ACC_QUIET, NULL},
    {"--quiet", CFG_ACC_QUIET, NULL},
    {"--cpu", CFG_ACC_CPU, NULL},
    B2("--multi_gpu", "--multi-gpu", CFG_ACC_MULTI_GPU),
    W2("--mixed_precision", "--mixed-precision", CFG_ACC_MIXED_PRECISION, t_precision),
    W2("--num_processes", "--num-processes", CFG_ACC_NUM_PROCESSES, t_int),
    W2("--num_machines", "--num-machines", CFG_ACC_NUM_MACHINES, t_int),
    W2("--num_cpu_threads_per_process", "--num-cpu-threads-per-process",
       CFG_ACC_NUM_CPU_THREADS, t_int),
    B2("--enable_cpu_affinity", "--enable-cpu-affinity", CFG_ACC_CPU_AFFINITY),
    W2("--dynamo_backend", "--dynamo-backend", CFG_ACC_DYNAMO_BACKEND, t_dynamo_backend),
    W2("--dynamo_mode", "--dynamo-mode", CFG_ACC_DYNAMO_MODE, t_dynamo_mode),
    B2("--dynamo_use_fullgraph", "--dynamo-use-fullgraph", CFG_ACC_DYNAMO_FULLGRAPH),
    B2("--dynamo_use_dynamic", "--dynamo-use-dynamic", CFG_ACC_DYNAMO_DYNAMIC),
    B2("--dynamo_use_regional_compilation", "--dynamo-use-regional-compilation",
       CFG_ACC_DYNAMO_REGIONAL),
    B2("--use_deepspeed", "--use-deepspeed", CFG_ACC_USE_DEEPSPEED),
    B2("--use_fsdp", "--use-fsdp", CFG_ACC_USE_FSDP),
    W2("--gpu_ids", "--gpu-ids", CFG_ACC_GPU_IDS, NULL),
    /* TPU values that accelerate takes with every launcher and uses only for TPUs (accelerate
     * config writes main_training_function into every file): shown, not used */
    W2("--main_training_function", "--main-training-function", CFG_ACC_MAIN_TRAINING_FUNCTION,
       NULL),
    B2("--downcast_bf16", "--downcast-bf16", CFG_ACC_DOWNCAST_BF16),
    B2("--same_network", "--same-network", CFG_ACC_SAME_NETWORK),
    W2("--machine_rank", "--machine-rank", CFG_ACC_MACHINE_RANK, t_int),
    W2("--main_process_ip", "--main-process-ip", CFG_ACC_MAIN_PROCESS_IP, NULL),
    W2("--main_process_port", "--main-process-port", CFG_ACC_MAIN_PROCESS_PORT, t_int),
    {"-t", CFG_TEE, NULL},
    {"--tee", CFG_TEE, NULL},
    W2("--log_dir", "--log-dir", CFG_LOG_DIR, NULL),
    {"--role", CFG_ROLE, NULL},
    W2("--rdzv_backend", "--rdzv-backend", CFG_RDZV_BACKEND, NULL),
    W2("--rdzv_conf", "--rdzv-conf", CFG_RDZV_CONF, NULL),
    W2("--max_restarts", "--max-restarts", CFG_MAX_RESTARTS, t_int),
    W2("--monitor_interval", "--monitor-interval", CFG_MONITOR_INTERVAL, t_float),
    {"-m", CFG_MODULE, NULL},
    {"--module", CFG_MODULE, NULL},
    W2("--no_python", "--no-python", CFG_NO_PYTHON, NULL),
    {"--debug", CFG_ACC_DEBUG, NULL},
    W2("--deepspeed_config_file", "--deepspeed-config-file", CFG_ACC_DS_CONFIG_FILE, NULL),
    W2("--zero_stage", "--zero-stage", CFG_ACC_ZERO_STAGE, t_int),
    W2("--offload_optimizer_device", "--offload-optimizer-device", CFG_ACC_OFFLOAD_OPTIMIZER_DEVICE,
       NULL),
    W2("--offload_param_device", "--offload-param-device", CFG_ACC_OFFLOAD_PARAM_DEVICE, NULL),
    W2("--offload_optimizer_nvme_path", "--offload-optimizer-nvme-path",
       CFG_ACC_OFFLOAD_OPTIMIZER_NVME_PATH, NULL),
    W2("--offload_param_nvme_path", "--offload-param-nvme-path", CFG_ACC_OFFLOAD_PARAM_NVME_PATH,
       NULL),
    W2("--gradient_accumulation_steps", "--gradient-accumulation-steps",
       CFG_ACC_GRADIENT_ACCUMULATION_STEPS, t_int),
    W2("--gradient_clipping", "--gradient-clipping", CFG_ACC_GRADIENT_CLIPPING, t_float),
    W2("--zero3_init_flag", "--zero3-init-flag", CFG_ACC_ZERO3_INIT_FLAG, NULL),
    W2("--zero3_save_16bit_model", "--zero3-save-16bit-model", CFG_ACC_ZERO3_SAVE_16BIT_MODEL,
       NULL),
    W2("--deepspeed_hostfile", "--deepspeed-hostfile", CFG_ACC_DS_HOSTFILE, NULL),
    W2("--deepspeed_exclusion_filter", "--deepspeed-exclusion-filter", CFG_ACC_DS_EXCLUSION_FILTER,
       NULL),
    W2("--deepspeed_inclusion_filter", "--deepspeed-inclusion-filter", CFG_ACC_DS_INCLUSION_FILTER,
       NULL),
    W2("--deepspeed_multinode_launcher", "--deepspeed-multinode-launcher",
       CFG_ACC_DS_MULTINODE_LAUNCHER, NULL),
    W2("--deepspeed_moe_layer_cls_names", "--deepspeed-moe-layer-cls-names",
       CFG_ACC_DS_MOE_LAYER_CLS_NAMES, NULL),
    W2("--fsdp_version", "--fsdp-version", CFG_ACC_FSDP_VERSION, t_fsdp_version),
    W2("--fsdp_offload_params", "--fsdp-offload-params", CFG_ACC_FSDP_OFFLOAD_PARAMS, NULL),
    W2("--fsdp_min_num_params", "--fsdp-min-num-params", CFG_ACC_FSDP_MIN_NUM_PARAMS, t_int),
    W2("--fsdp_sharding_strategy", "--fsdp-sharding-strategy", CFG_ACC_FSDP_SHARDING_STRATEGY,
       NULL),
    W2("--fsdp_reshard_after_forward", "--fsdp-reshard-after-forward",
       CFG_ACC_FSDP_RESHARD_AFTER_FORWARD, NULL),
    W2("--fsdp_auto_wrap_policy", "--fsdp-auto-wrap-policy", CFG_ACC_FSDP_AUTO_WRAP_POLICY, NULL),
    W2("--fsdp_transformer_layer_cls_to_wrap", "--fsdp-transformer-layer-cls-to-wrap",
       CFG_ACC_FSDP_TRANSFORMER_CLS, NULL),
    W2("--fsdp_backward_prefetch", "--fsdp-backward-prefetch", CFG_ACC_FSDP_BACKWARD_PREFETCH,
       NULL),
    W2("--fsdp_state_dict_type", "--fsdp-state-dict-type", CFG_ACC_FSDP_STATE_DICT_TYPE, NULL),
    W2("--fsdp_forward_prefetch", "--fsdp-forward-prefetch", CFG_ACC_FSDP_FORWARD_PREFETCH, NULL),
    W2("--fsdp_use_orig_params", "--fsdp-use-orig-params", CFG_ACC_FSDP_USE_ORIG_PARAMS, NULL),
    W2("--fsdp_cpu_ram_efficient_loading", "--fsdp-cpu-ram-efficient-loading",
       CFG_ACC_FSDP_CPU_RAM_EFFICIENT_LOADING, NULL),
    W2("--fsdp_sync_module_states", "--fsdp-sync-module-states", CFG_ACC_FSDP_SYNC_MODULE_STATES,
       NULL),
    W2("--fsdp_activation_checkpointing", "--fsdp-activation-checkpointing",
       CFG_ACC_FSDP_ACTIVATION_CHECKPOINTING, NULL),
    W2("--fsdp_activation_checkpointing_offload", "--fsdp-activation-checkpointing-offload",
       CFG_ACC_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD, NULL),
};

/* what podrun does not launch */
static const struct fe_refusal refused[] = {
    {"--tpu", false, no_tpu},
    R2("--tpu_cluster", "--tpu-cluster", no_tpu),
    R2("--no_tpu_cluster", "--no-tpu-cluster", no_tpu),
    R2("--tpu_use_sudo", "--tpu-use-sudo", no_tpu),
    {"--vm", false, no_tpu},
    {"--env", false, no_tpu},
    R2("--use_megatron_lm", "--use-megatron-lm", no_megatron),
    {"--megatron_lm_", true, no_megatron},
    {"--megatron-lm-", true, no_megatron},
    R2("--mpirun_hostfile", "--mpirun-hostfile", no_mpi),
    {"--aws_", true, no_sagemaker},
    {"--aws-", true, no_sagemaker},
    {"--fp8_", true, no_fp8},
    {"--fp8-", true, no_fp8},
    R2("--use_parallelism_config", "--use-parallelism-config", no_nd),
    {"--parallelism_config_", true, no_nd},
    {"--parallelism-config-", true, no_nd},
};

/* ---- the config file --------------------------------------------------------------------------
 * ClusterConfig's fields, the only keys a LOCAL_MACHINE file may have. */
static const char *const known_keys[] = {
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip",
    "main_process_port", "rdzv_backend", "same_network", "main_training_function",
    "enable_cpu_affinity", "fp8_config", "deepspeed_config", "fsdp_config", "parallelism_config",
    "megatron_lm_config", "mpirun_config", "downcast_bf16", "tpu_name", "tpu_zone",
    "tpu_use_cluster", "tpu_use_sudo", "command_file", "commands", "tpu_vm", "tpu_env",
    "dynamo_config", NULL};

/* The file's plain keys that reach a launching value, and the ClusterConfig default a missing
 * one has (NULL: None). Keys whose flag has a default other than None (rdzv_backend,
 * same_network, enable_cpu_affinity) are not here: accelerate never takes them from the file. */
static const struct {
    const char *key;
    enum cfg_id id;
    const char *missing;
} plain_keys[] = {
    {"num_processes", CFG_ACC_NUM_PROCESSES, "-1"},
    {"machine_rank", CFG_ACC_MACHINE_RANK, "0"},
    {"num_machines", CFG_ACC_NUM_MACHINES, "1"},
    {"gpu_ids", CFG_ACC_GPU_IDS, NULL},
    {"main_process_ip", CFG_ACC_MAIN_PROCESS_IP, NULL},
    {"main_process_port", CFG_ACC_MAIN_PROCESS_PORT, NULL},
    {"use_cpu", CFG_ACC_CPU, "False"},
    {"debug", CFG_ACC_DEBUG, "False"},
    {"mixed_precision", CFG_ACC_MIXED_PRECISION, NULL},
};

/* Section keys (after accelerate's prefixing: fsdp_config's "version" is "fsdp_version"). */
static const struct {
    const char *key;
    enum cfg_id id;
} section_keys[] = {
    {"deepspeed_config_file", CFG_ACC_DS_CONFIG_FILE},
    {"zero_stage", CFG_ACC_ZERO_STAGE},
    {"offload_optimizer_device", CFG_ACC_OFFLOAD_OPTIMIZER_DEVICE},
    {"offload_param_device", CFG_ACC_OFFLOAD_PARAM_DEVICE},
    {"offload_optimizer_nvme_path", CFG_ACC_OFFLOAD_OPTIMIZER_NVME_PATH},
    {"offload_param_nvme_path", CFG_ACC_OFFLOAD_PARAM_NVME_PATH},
    {"gradient_accumulation_steps", CFG_ACC_GRADIENT_ACCUMULATION_STEPS},
    {"gradient_clipping", CFG_ACC_GRADIENT_CLIPPING},
    {"zero3_init_flag", CFG_ACC_ZERO3_INIT_FLAG},
    {"zero3_save_16bit_model", CFG_ACC_ZERO3_SAVE_16BIT_MODEL},
    {"deepspeed_hostfile", CFG_ACC_DS_HOSTFILE},
    {"deepspeed_exclusion_filter", CFG_ACC_DS_EXCLUSION_FILTER},
    {"deepspeed_inclusion_filter", CFG_ACC_DS_INCLUSION_FILTER},
    {"deepspeed_multinode_launcher", CFG_ACC_DS_MULTINODE_LAUNCHER},
    {"deepspeed_moe_layer_cls_names", CFG_ACC_DS_MOE_LAYER_CLS_NAMES},
    {"fsdp_version", CFG_ACC_FSDP_VERSION},
    {"fsdp_offload_params", CFG_ACC_FSDP_OFFLOAD_PARAMS},
    {"fsdp_min_num_params", CFG_ACC_FSDP_MIN_NUM_PARAMS},
    {"fsdp_sharding_strategy", CFG_ACC_FSDP_SHARDING_STRATEGY},
    {"fsdp_reshard_after_forward", CFG_ACC_FSDP_RESHARD_AFTER_FORWARD},
    {"fsdp_auto_wrap_policy", CFG_ACC_FSDP_AUTO_WRAP_POLICY},
    {"fsdp_transformer_layer_cls_to_wrap", CFG_ACC_FSDP_TRANSFORMER_CLS},
    {"fsdp_backward_prefetch", CFG_ACC_FSDP_BACKWARD_PREFETCH},
    {"fsdp_state_dict_type", CFG_ACC_FSDP_STATE_DICT_TYPE},
    {"fsdp_forward_prefetch", CFG_ACC_FSDP_FORWARD_PREFETCH},
    {"fsdp_use_orig_params", CFG_ACC_FSDP_USE_ORIG_PARAMS},
    {"fsdp_cpu_ram_efficient_loading", CFG_ACC_FSDP_CPU_RAM_EFFICIENT_LOADING},
    {"fsdp_sync_module_states", CFG_ACC_FSDP_SYNC_MODULE_STATES},
    {"fsdp_activation_checkpointing", CFG_ACC_FSDP_ACTIVATION_CHECKPOINTING},
    {"fsdp_activation_checkpointing_offload", CFG_ACC_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD},
    {"fsdp_ignored_modules", CFG_ACC_FSDP_IGNORED_MODULES},
    {"dynamo_backend", CFG_ACC_DYNAMO_BACKEND},
    {"dynamo_mode", CFG_ACC_DYNAMO_MODE},
    {"dynamo_use_fullgraph", CFG_ACC_DYNAMO_FULLGRAPH},
    {"dynamo_use_dynamic", CFG_ACC_DYNAMO_DYNAMIC},
    {"dynamo_use_regional_compilation", CFG_ACC_DYNAMO_REGIONAL},
};

static bool one_of_set(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(s, *set))
            return true;
    return false;
}

static bool truthy(const struct cfg *c, enum cfg_id id)
{
    const char *v = cfg_acc(c, id);
    return v && !strcmp(v, "True");
}

static bool from_flag(const struct cfg *c, enum cfg_id id)
{
    return c->src[id].kind == CFG_SRC_FLAG;
}

/* Sets id from the file's key (spelled "<file>:<key>" as its source). */
static int file_set(struct cfg *c, enum cfg_id id, const char *text, const char *file,
                    const char *key, char *err, size_t errlen)
{
    struct cfg_src s;
    cfg_src_init(&s, CFG_SRC_FILE, "%s:%s", file, key);
    return cfg_set(c, id, text ? text : "", &s, err, errlen);
}

/* Where accelerate looks without --config_file: $HF_HOME/accelerate/default_config.yaml, HF_HOME
 * defaulting to $XDG_CACHE_HOME/huggingface and that to ~/.cache/huggingface (its JSON fallback
 * names the same .yaml file, so there is only the one). */
static int default_path(char *const *envp, char *buf, size_t cap)
{
    const char *hf = env_get(envp, "HF_HOME"), *xdg = env_get(envp, "XDG_CACHE_HOME");
    char base[PATH_MAX];
    if (hf)
        snprintf(base, sizeof base, "%s", hf);
    else
        snprintf(base, sizeof base, "%s/huggingface", xdg ? xdg : "~/.cache");
    const char *home = env_get(envp, "HOME");
    if ((base[0] == '~' && (base[1] == '/' || !base[1])) && home)   /* os.path.expanduser */
        return snprintf(buf, cap, "%s%s/accelerate/default_config.yaml", home, base + 1) <
                       (int)cap ? 0 : -ENAMETOOLONG;
    return snprintf(buf, cap, "%s/accelerate/default_config.yaml", base) < (int)cap
               ? 0 : -ENAMETOOLONG;
}

/* What accelerate refuses or podrun does not launch, before any key is taken. */
static int file_refusals(const struct acc_file *f, const char *file, char *err, size_t errlen)
{
    const struct acc_entry *ce = acc_config_get(f->top, f->n, "compute_environment");
    if (ce && ce->kind == ACC_SCALAR && strcmp(ce->text, "LOCAL_MACHINE"))
        return fail(err, errlen, "%s: compute_environment %s: %s", file, ce->text,
                    no_sagemaker);
    const struct acc_entry *dt = acc_config_get(f->top, f->n, "distributed_type");
    if (!dt || dt->kind != ACC_SCALAR)
        return fail(err, errlen, "%s: A `distributed_type` must be specified in the config file.",
                    file);
    if (!strcmp(dt->text, "XLA"))
        return fail(err, errlen, "%s: distributed_type XLA: %s", file, no_tpu);
    if (!strcmp(dt->text, "MEGATRON_LM"))
        return fail(err, errlen, "%s: distributed_type MEGATRON_LM: %s", file, no_megatron);
    const struct acc_entry *mpi = acc_config_get(f->top, f->n, "mpirun_config");
    if (mpi && mpi->kind == ACC_MAP) {
        const struct acc_entry *h = acc_config_get(mpi->sub, mpi->nsub, "mpirun_hostfile");
        if (h && h->kind == ACC_SCALAR)
            return fail(err, errlen, "%s: mpirun_config.mpirun_hostfile: %s", file, no_mpi);
    }
    const struct acc_entry *nd = acc_config_get(f->top, f->n, "parallelism_config");
    if (nd && nd->kind == ACC_MAP && nd->nsub)
        return fail(err, errlen, "%s: parallelism_config: %s", file, no_nd);
    return 0;
}

/* accelerate's "unknown keys" error: the sorted keys ClusterConfig lacks, as a Python list. A
 * top-level fp16 or dynamo_backend is an older file's, converted rather than refused. */
static int unknown_keys(const struct acc_file *f, const char *path, char *err, size_t errlen)
{
    const char *bad[64];
    size_t nb = 0;
    for (size_t i = 0; i < f->n && nb < 64; i++) {
        const char *k = f->top[i].key;
        bool ok = !strcmp(k, "fp16") || !strcmp(k, "dynamo_backend");
        for (const char *const *kk = known_keys; *kk && !ok; kk++)
            ok = !strcmp(k, *kk);
        if (ok)
            continue;
        size_t at = nb++;
        while (at > 0 && strcmp(bad[at - 1], k) > 0) {
            bad[at] = bad[at - 1];
            at--;
        }
        bad[at] = k;
    }
    if (!nb)
        return 0;
    char list[512] = "";
    size_t o = 0;
    for (size_t i = 0; i < nb && o < sizeof list; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s'%s'", i ? ", " : "", bad[i]);
    return fail(err, errlen, "The config file at %s had unknown keys ([%s]), please try upgrading "
                "your `accelerate` version or fix (and potentially remove) these keys from your "
                "config file.", path, list);
}

/* A section's keys ("deepspeed_config", "fsdp_config" with prefix "fsdp_", "dynamo_config" with
 * "dynamo_"): each taken unless its flag was given. fields collects deepspeed_config's keys for
 * ACCELERATE_CONFIG_DS_FIELDS. */
static int apply_section(struct cfg *c, const struct acc_file *f, const char *name,
                         const char *prefix, const char *file, char *fields, size_t fcap,
                         char *err, size_t errlen)
{
    const struct acc_entry *sec = acc_config_get(f->top, f->n, name);
    if (!sec || sec->kind != ACC_MAP)
        return 0;
    for (size_t i = 0; i < sec->nsub; i++) {
        const struct acc_entry *e = &sec->sub[i];
        char key[128];
        size_t pl = prefix ? strlen(prefix) : 0;
        snprintf(key, sizeof key, "%s%s", prefix && strncmp(e->key, prefix, pl) ? prefix : "",
                 e->key);
        if (fields) {
            size_t o = strlen(fields);
            snprintf(fields + o, fcap - o, "%s%s", o ? "," : "", e->key);
        }
        for (size_t k = 0; k < sizeof section_keys / sizeof *section_keys; k++) {
            if (strcmp(key, section_keys[k].key) || from_flag(c, section_keys[k].id))
                continue;
            char src[96];
            snprintf(src, sizeof src, "%s.%s", name, e->key);
            int r = file_set(c, section_keys[k].id, e->kind == ACC_SCALAR ? e->text : NULL, file,
                             src, err, errlen);
            if (r)
                return r;
        }
    }
    return 0;
}

/* The paradigm the file's distributed_type names, unless the command line named one. */
static int apply_paradigm(struct cfg *c, const struct acc_file *f, const char *file, char *err,
                          size_t errlen)
{
    static const char *const multi[] = {"MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA",
                                        "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU", "MULTI_NEURON",
                                        NULL};
    if (truthy(c, CFG_ACC_MULTI_GPU) || truthy(c, CFG_ACC_USE_DEEPSPEED) ||
        truthy(c, CFG_ACC_USE_FSDP))
        return 0;
    const char *dt = acc_config_get(f->top, f->n, "distributed_type")->text;
    enum cfg_id id = !strcmp(dt, "DEEPSPEED") ? CFG_ACC_USE_DEEPSPEED
                   : !strcmp(dt, "FSDP") ? CFG_ACC_USE_FSDP : CFG__COUNT;
    for (const char *const *m = multi; *m && id == CFG__COUNT; m++)
        if (!strcmp(dt, *m))
            id = CFG_ACC_MULTI_GPU;
    return id == CFG__COUNT ? 0 : file_set(c, id, "True", file, "distributed_type", err, errlen);
}

/* The file's values into c (BaseConfig.process_config's conversions, then the keys under
 * accelerate's rule). */
static int apply_file(struct cfg *c, const struct acc_file *f, const char *path, char *err,
                      size_t errlen)
{
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    int r = file_refusals(f, file, err, errlen);
    if (!r)
        r = unknown_keys(f, path, err, errlen);
    if (!r)
        r = apply_paradigm(c, f, file, err, errlen);
    if (r)
        return r;
    const char *dt = acc_config_get(f->top, f->n, "distributed_type")->text;
    for (size_t i = 0; !r && i < sizeof plain_keys / sizeof *plain_keys; i++) {
        const struct acc_entry *e = acc_config_get(f->top, f->n, plain_keys[i].key);
        const char *v = e && e->kind == ACC_SCALAR ? e->text : NULL;
        if (!e) {
            v = plain_keys[i].missing;
            /* process_config: a NO job without num_processes has one; an old file's fp16 */
            if (!strcmp(plain_keys[i].key, "num_processes") && !strcmp(dt, "NO"))
                v = "1";
            const struct acc_entry *fp16 = acc_config_get(f->top, f->n, "fp16");
            if (!strcmp(plain_keys[i].key, "mixed_precision") && fp16 &&
                fp16->kind == ACC_SCALAR && strcmp(fp16->text, "False") && strcmp(fp16->text, "0")
                && fp16->text[0])
                v = "fp16";
        }
        if (v && c->src[plain_keys[i].id].kind <= CFG_SRC_FILE)
            r = file_set(c, plain_keys[i].id, v, file, plain_keys[i].key, err, errlen);
    }
    char fields[1024] = "";
    if (!r)
        r = apply_section(c, f, "deepspeed_config", NULL, file, fields, sizeof fields, err,
                          errlen);
    if (!r)
        r = apply_section(c, f, "fsdp_config", "fsdp_", file, NULL, 0, err, errlen);
    /* an older file's top-level dynamo_backend is dynamo_config's */
    const struct acc_entry *old = acc_config_get(f->top, f->n, "dynamo_backend");
    if (!r && old && old->kind == ACC_SCALAR && strcmp(old->text, "NO") &&
        !from_flag(c, CFG_ACC_DYNAMO_BACKEND))
        r = file_set(c, CFG_ACC_DYNAMO_BACKEND, old->text, file, "dynamo_backend", err, errlen);
    if (!r)
        r = apply_section(c, f, "dynamo_config", "dynamo_", file, NULL, 0, err, errlen);
    /* ACCELERATE_CONFIG_DS_FIELDS: the deepspeed_config keys, and mixed_precision when the file
     * gave it */
    if (!r && c->src[CFG_ACC_MIXED_PRECISION].kind == CFG_SRC_FILE) {
        size_t o = strlen(fields);
        snprintf(fields + o, sizeof fields - o, "%smixed_precision", o ? "," : "");
    }
    if (!r)
        r = file_set(c, CFG_ACC_DS_FIELDS, fields, file, "deepspeed_config", err, errlen);
    return r;
}

/* The checks accelerate makes on the command line alone, before it reads its file. */
static int check_flags(const struct cfg *c, char *err, size_t errlen)
{
    int paradigms = truthy(c, CFG_ACC_MULTI_GPU) + truthy(c, CFG_ACC_CPU) +
                    truthy(c, CFG_ACC_USE_DEEPSPEED) + truthy(c, CFG_ACC_USE_FSDP);
    if (paradigms > 1)
        return fail(err, errlen, "You can only use one of `--cpu`, `--multi_gpu`, "
                    "`--use_deepspeed`, `--use_fsdp` at a time.");
    const char *np = cfg_acc(c, CFG_ACC_NUM_PROCESSES);
    if (truthy(c, CFG_ACC_MULTI_GPU) && np && atoll(np) < 2)
        return fail(err, errlen, "--num_processes %s: You need to use at least 2 processes to "
                    "use `--multi_gpu`.", np);
    return 0;
}

/* The config hook: the file given by --config_file, else the default one when it exists and
 * --cpu is not given (accelerate's condition), read through host. */
static int accelerate_config(struct cfg *c, char *const *envp, const struct discover_host *host,
                             char *err, size_t errlen)
{
    int r = check_flags(c, err, errlen);
    if (r)
        return r;
    const char *given = cfg_acc(c, CFG_ACC_CONFIG_FILE);
    char path[PATH_MAX];
    if (given)
        snprintf(path, sizeof path, "%s", given);
    else if (truthy(c, CFG_ACC_CPU) || default_path(envp, path, sizeof path))
        return 0;
    char *text = NULL;
    size_t len = 0;
    r = host && host->read_file ? host->read_file(host, path, ACC_CONFIG_MAX_BYTES, &text, &len)
                                 : -ENOENT;
    if (r) {
        if (!given && r == -ENOENT)
            return 0;
        return fail(err, errlen, "--config_file %s: %s; give an existing file (accelerate config "
                    "writes one) or drop --config_file", path,
                    r == -ENOENT ? "no such file" : podrun_strerror(r));
    }
    size_t pl = strlen(path);
    struct acc_file f;
    char why[384];
    r = acc_config_parse(text, len, pl > 5 && !strcmp(path + pl - 5, ".json"), &f, why,
                         sizeof why);
    free(text);
    if (r)
        return fail(err, errlen, "the config file at %s is %s", path, why);
    r = apply_file(c, &f, path, err, errlen);
    acc_config_free(&f);
    /* a file was read: the default of --gpu_ids becomes "all" (accelerate sets it so) */
    if (!r && !cfg_acc(c, CFG_ACC_GPU_IDS))
        r = cfg_set(c, CFG_ACC_GPU_IDS, "all", &(struct cfg_src){CFG_SRC_DEFAULT, ""}, err,
                    errlen);
    return r;
}

/* ---- finalize: what prepare_multi_gpu_env computes, as podrun's settings ------------------- */

/* The whole number a value holds, or an error naming where it came from. */
static int acc_number(const struct cfg *c, enum cfg_id id, long long lo, long long hi,
                      long long *v, char *err, size_t errlen)
{
    char src[CFG_SRC_NAME_MAX + 32];
    cfg_src_describe(&c->src[id], src, sizeof src);
    if (py_int(cfg_acc(c, id), v) || *v < lo || *v > hi)
        return fail(err, errlen, "%s '%s' (%s): expected a whole number from %lld to %lld",
                    cfg_name(id), cfg_acc(c, id), src, lo, hi);
    return 0;
}

/* cfg_set of a podrun setting, with the source of the accelerate value it follows from. */
static int set_from(struct cfg *c, enum cfg_id id, const char *text, enum cfg_id from, char *err,
                    size_t errlen)
{
    struct cfg_src s = c->src[from];
    if (s.kind == CFG_SRC_DEFAULT)
        cfg_src_init(&s, CFG_SRC_FLAG, "accelerate launch's default %s", cfg_name(from));
    return cfg_set(c, id, text, &s, err, errlen);
}

static int check_values(struct cfg *c, char *err, size_t errlen)
{
    /* PrecisionType and DynamoBackend take any case from a file */
    static const char *const precisions[] = {"no", "fp16", "bf16", "fp8", NULL};
    static const char *const backends[] = {
        "NO", "EAGER", "AOT_EAGER", "INDUCTOR", "AOT_TS_NVFUSER", "NVPRIMS_NVFUSER", "CUDAGRAPHS",
        "OFI", "ONNXRT", "TENSORRT", "AOT_TORCHXLA_TRACE_ONCE", "TORCHXLA_TRACE_ONCE", "TVM",
        "HPU_BACKEND", "NEURON", NULL};
    char v[64];
    const char *mp = cfg_acc(c, CFG_ACC_MIXED_PRECISION);
    snprintf(v, sizeof v, "%s", mp ? mp : "no");
    for (char *p = v; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (!one_of_set(v, precisions))
        return fail(err, errlen, "mixed_precision '%s': Unknown mixed_precision mode: %s. Choose "
                    "between ['no', 'fp8', 'fp16', 'bf16'].", mp, v);
    if (!strcmp(v, "fp8"))
        return fail(err, errlen, "mixed_precision fp8: %s", no_fp8);
    const char *db = cfg_acc(c, CFG_ACC_DYNAMO_BACKEND);
    snprintf(v, sizeof v, "%s", db ? db : "no");
    for (char *p = v; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    if (!one_of_set(v, backends))
        return fail(err, errlen, "dynamo_backend '%s': Unknown dynamo backend: %s; choose one of "
                    "no, eager, aot_eager, inductor, cudagraphs, ofi, onnxrt, tensorrt, tvm, ...",
                    db, v);
    return 0;
}

/* The machines' arithmetic and the rendezvous (prepare_multi_gpu_env), without accelerate's
 * failures: a multi-machine launch without a machine rank or a main address is a usage error
 * here, not a TypeError or an endpoint "None:None". */
static int machines_and_rendezvous(struct cfg *c, char *err, size_t errlen)
{
    long long machines = 1, np = 0, rank = 0, port = 29500;
    int r = 0;
    if (cfg_acc(c, CFG_ACC_NUM_MACHINES) &&
        (r = acc_number(c, CFG_ACC_NUM_MACHINES, 1, 65536, &machines, err, errlen)))
        return r;
    char text[300];
    if (cfg_acc(c, CFG_ACC_NUM_PROCESSES)) {
        if ((r = acc_number(c, CFG_ACC_NUM_PROCESSES, -1, 1 << 26, &np, err, errlen)))
            return r;
        if (np == -1)
            return fail(err, errlen, "You need to manually pass in `--num_processes` using this "
                        "config yaml.");
        if (np < 1)
            return fail(err, errlen, "--num_processes %lld: give at least one process", np);
        if (np % machines)
            return fail(err, errlen, "--num_processes %lld is the job's total, which podrun "
                        "splits evenly over --num_machines %lld; give a multiple of %lld", np,
                        machines, machines);
        snprintf(text, sizeof text, "%lld", np / machines);
        r = set_from(c, CFG_NPROC_PER_NODE, text, CFG_ACC_NUM_PROCESSES, err, errlen);
    } else {
        /* accelerate's default: the devices CUDA sees (one process without any) */
        r = set_from(c, CFG_NPROC_PER_NODE, "gpus-or-1", CFG_ACC_NUM_PROCESSES, err, errlen);
    }
    if (!r && cfg_acc(c, CFG_ACC_MAIN_PROCESS_PORT))
        r = acc_number(c, CFG_ACC_MAIN_PROCESS_PORT, 0, 65535, &port, err, errlen);
    if (r)
        return r;
    if (machines <= 1) {
        if (!cfg_acc(c, CFG_ACC_MAIN_PROCESS_PORT))
            return 0;
        if (port == 0)   /* a free port, on the one machine */
            return set_from(c, CFG_RDZV_ENDPOINT, "127.0.0.1:0", CFG_ACC_MAIN_PROCESS_PORT, err,
                            errlen);
        snprintf(text, sizeof text, "%lld", port);
        return set_from(c, CFG_MASTER_PORT, text, CFG_ACC_MAIN_PROCESS_PORT, err, errlen);
    }
    snprintf(text, sizeof text, "%lld", machines);
    if ((r = set_from(c, CFG_NNODES, text, CFG_ACC_NUM_MACHINES, err, errlen)))
        return r;
    if (!cfg_acc(c, CFG_ACC_MACHINE_RANK))
        return fail(err, errlen, "--num_machines %lld needs --machine_rank: 0 on the main machine, "
                    "1 to %lld on the others", machines, machines - 1);
    if ((r = acc_number(c, CFG_ACC_MACHINE_RANK, 0, machines - 1, &rank, err, errlen)))
        return r;
    snprintf(text, sizeof text, "%lld", rank);
    if ((r = set_from(c, CFG_NODE_RANK, text, CFG_ACC_MACHINE_RANK, err, errlen)))
        return r;
    const char *ip = cfg_acc(c, CFG_ACC_MAIN_PROCESS_IP);
    if (!ip)
        return fail(err, errlen, "--num_machines %lld needs --main_process_ip: the address of the "
                    "machine with --machine_rank 0, the same on every machine", machines);
    if (port == 0)
        return fail(err, errlen, "--main_process_port 0 (a free port) works on one machine only: "
                    "the other machines cannot find it; give the port");
    if (truthy(c, CFG_ACC_SAME_NETWORK)) {
        snprintf(text, sizeof text, "%lld", port);
        r = set_from(c, CFG_MASTER_ADDR, ip, CFG_ACC_MAIN_PROCESS_IP, err, errlen);
        return r ? r : set_from(c, CFG_MASTER_PORT, text, CFG_ACC_MAIN_PROCESS_PORT, err, errlen);
    }
    podrun_hostport_format(ip, (int)port, text, sizeof text);
    return set_from(c, CFG_RDZV_ENDPOINT, text, CFG_ACC_MAIN_PROCESS_PORT, err, errlen);
}

/* Which launcher accelerate's launch_command picks: --cpu, or a config file whose
 * distributed_type names none of the multi-GPU, DeepSpeed and FSDP launchers (NO, MULTI_CPU),
 * is its simple launcher, which starts one process (mpirun, its only way to start more, is
 * refused here); without a config file or a launcher flag, accelerate decides by the GPUs it
 * sees (several: multi-GPU), which podrun resolves on the node (accelerate-auto-launcher). */
static int pick_launcher(struct cfg *c, char *err, size_t errlen)
{
    bool paradigm = truthy(c, CFG_ACC_MULTI_GPU) || truthy(c, CFG_ACC_USE_DEEPSPEED) ||
                    truthy(c, CFG_ACC_USE_FSDP);
    bool cpu = truthy(c, CFG_ACC_CPU) && from_flag(c, CFG_ACC_CPU);
    bool file_read = c->src[CFG_ACC_DS_FIELDS].kind == CFG_SRC_FILE;
    struct cfg_src s;
    if (cpu || (!paradigm && file_read)) {
        cfg_src_init(&s, CFG_SRC_FLAG, "%s", cpu ? "--cpu: accelerate's simple launcher"
                     : "distributed_type: accelerate's simple launcher");
        return cfg_set(c, CFG_NPROC_PER_NODE, "1", &s, err, errlen);
    }
    if (paradigm)
        return 0;
    cfg_src_init(&s, CFG_SRC_FLAG, "accelerate launch without a launcher named");
    return cfg_set(c, CFG_ACC_AUTO_LAUNCHER, "1", &s, err, errlen);
}

static int accelerate_finalize(struct cfg *c, char *err, size_t errlen)
{
    int r = check_values(c, err, errlen);
    if (r)
        return r;
    struct cfg_src fe;
    cfg_src_init(&fe, CFG_SRC_FLAG, "accelerate launch");
    if ((r = cfg_set(c, CFG_WORKER_ENV, "accelerate", &fe, err, errlen)))
        return r;
    if ((r = machines_and_rendezvous(c, err, errlen)) || (r = pick_launcher(c, err, errlen)))
        return r;
    const char *ids = cfg_acc(c, CFG_ACC_GPU_IDS);
    bool file_read = c->src[CFG_ACC_DS_FIELDS].kind == CFG_SRC_FILE;
    if (file_read && ids && strcmp(ids, "all") && !strchr(ids, ',') &&
        truthy(c, CFG_ACC_MULTI_GPU) && c->nnodes_max <= 1)
        return fail(err, errlen, "gpu_ids '%s': Less than two GPU ids were configured and tried to "
                    "run on multiple GPUs. Please ensure at least two are specified for "
                    "`--gpu_ids`, or use `--gpu_ids='all'`.", ids);
    return 0;
}

static void accelerate_usage(FILE *f)
{
    fprintf(f,
        "usage: podrun accelerate launch [options] PROGRAM [ARGS...]\n"
        "       accelerate launch [options] PROGRAM [ARGS...]   (podrun linked as accelerate)\n"
        "\n"
        "Runs PROGRAM the way `accelerate launch` does, without Python in the launch path: the\n"
        "same flags (--a_b and --a-b), the same config file (--config_file, else\n"
        "$HF_HOME/accelerate/default_config.yaml), the same environment in every worker\n"
        "(ACCELERATE_*, FSDP_*, torchrun's variables). podrun then does the rest: rendezvous,\n"
        "spawning, failure propagation, restarts (see podrun --help).\n"
        "\n"
        "  --config_file PATH            accelerate's YAML (or .json) config\n"
        "  --cpu | --multi_gpu | --use_deepspeed | --use_fsdp\n"
        "  --num_processes N             processes of the whole job (split over machines)\n"
        "  --num_machines N  --machine_rank R  --main_process_ip IP  --main_process_port P\n"
        "  --same_network  --rdzv_backend static|c10d  --rdzv_conf K=V,...\n"
        "  --gpu_ids LIST  --mixed_precision no|fp16|bf16  --num_cpu_threads_per_process N\n"
        "  --enable_cpu_affinity  --dynamo_backend B  --dynamo_mode M  --dynamo_use_*\n"
        "  --deepspeed_config_file F  --zero_stage N  --offload_*  --gradient_*  --zero3_*\n"
        "  --deepspeed_hostfile/_exclusion_filter/_inclusion_filter/_multinode_launcher\n"
        "  --fsdp_*  -m/--module  --no_python  --debug  -q  -t/--tee  --log_dir  --role\n"
        "  --max_restarts N  --monitor_interval S\n"
        "\n"
        "Refused: TPU (--tpu, --vm, ...), SageMaker, Megatron-LM, mpirun (--mpirun_hostfile),\n"
        "FP8 recipes (--fp8_*) and ParallelismConfig. podrun's own options also work here.\n");
}

const struct vocab accelerate_vocab = {
    .name = "accelerate",
    .env_rank = CFG_SRC_PET,
    .flags = flags,
    .nflags = sizeof flags / sizeof *flags,
    .refused = refused,
    .nrefused = sizeof refused / sizeof *refused,
    .config = accelerate_config,
    .finalize = accelerate_finalize,
};

const struct frontend fe_accelerate = {"accelerate launch", &accelerate_vocab, accelerate_usage,
                                       "accelerate", "accelerate", "launch"};
