/* launcher/config/config.h — podrun's one configuration struct and the only way to write it.
 *
 * Every value comes from a source, and sources rank:
 *
 *   default < operator env < hostfile < PET_* < PODRUN_* < config file < command line  (< derived)
 *
 * cfg_set parses a value with its setting's type and keeps it only when its source ranks at
 * least as high as the source of the value held now, so precedence holds whatever order the
 * layers are applied in (within one rank the later call wins). A value that does not parse is an
 * error even when a higher source would have shadowed it. Each value remembers its source's exact
 * spelling — a flag as typed ("--nproc_per_node"), "PET_NNODES", "VC_TASK_INDEX (Volcano)",
 * "default_config.yaml:num_machines" — which is what `podrun --print-config` shows. DERIVED
 * values are written by cfg_finalize alone (an endpoint that follows from --master-addr, ...).
 *
 * Who writes: front-ends (launcher/frontends/) and operator adapters (launcher/operators/) map
 * their own spellings to settings and call cfg_set; podrun's own environment (PODRUN_<NAME>) is
 * cfg_load_env. Nothing outside launcher/config/ writes a field of struct cfg; the rest of podrun
 * reads them.
 *
 * Pure code: no I/O besides what the caller passes in (envp, CPU/GPU counts) and the FILE that
 * cfg_print and cfg_usage write to. Functions return 0 or a negative errno and, on error, leave
 * one line in `err` naming the input and the fix. */
#ifndef PODRUN_LAUNCHER_CONFIG_H
#define PODRUN_LAUNCHER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* accelerate launch's settings (frontends/accelerate_cli.c, env/accelerate.c): each one's value is
 * text as accelerate holds it (Python's str() of what its parser or config file gave), since
 * that text is what its workers are given. X(ID, type, name, default) */
#define CFG_ACC_SETTINGS(X)                                                                       \
    X(CONFIG_FILE, OPTSTR, "config-file", NULL)                                                   \
    X(CPU, PYBOOL, "cpu", "False")                                                                \
    X(MULTI_GPU, PYBOOL, "multi-gpu", "False")                                                    \
    X(USE_DEEPSPEED, PYBOOL, "use-deepspeed", "False")                                            \
    X(USE_FSDP, PYBOOL, "use-fsdp", "False")                                                      \
    X(NUM_PROCESSES, OPTSTR, "num-processes", NULL)                                               \
    X(NUM_MACHINES, OPTSTR, "num-machines", NULL)                                                 \
    X(MACHINE_RANK, OPTSTR, "machine-rank", NULL)                                                 \
    X(MAIN_PROCESS_IP, OPTSTR, "main-process-ip", NULL)                                           \
    X(MAIN_PROCESS_PORT, OPTSTR, "main-process-port", NULL)                                       \
    X(SAME_NETWORK, PYBOOL, "same-network", "False")                                              \
    X(GPU_IDS, OPTSTR, "gpu-ids", NULL)                                                           \
    X(MIXED_PRECISION, OPTSTR, "mixed-precision", NULL)                                           \
    X(NUM_CPU_THREADS, OPTSTR, "num-cpu-threads-per-process", NULL)                               \
    X(CPU_AFFINITY, PYBOOL, "enable-cpu-affinity", "False")                                       \
    X(DEBUG, PYBOOL, "accelerate-debug", "False")                                                 \
    X(QUIET, PYBOOL, "quiet", "False")                                                            \
    X(MAIN_TRAINING_FUNCTION, OPTSTR, "main-training-function", NULL)                             \
    X(DOWNCAST_BF16, PYBOOL, "downcast-bf16", "False")                                            \
    X(DYNAMO_BACKEND, OPTSTR, "dynamo-backend", NULL)                                             \
    X(DYNAMO_MODE, OPTSTR, "dynamo-mode", "default")                                              \
    X(DYNAMO_FULLGRAPH, PYBOOL, "dynamo-use-fullgraph", "False")                                  \
    X(DYNAMO_DYNAMIC, PYBOOL, "dynamo-use-dynamic", "False")                                      \
    X(DYNAMO_REGIONAL, PYBOOL, "dynamo-use-regional-compilation", "False")                        \
    X(DS_CONFIG_FILE, OPTSTR, "deepspeed-config-file", NULL)                                      \
    X(ZERO_STAGE, OPTSTR, "zero-stage", NULL)                                                     \
    X(OFFLOAD_OPTIMIZER_DEVICE, OPTSTR, "offload-optimizer-device", NULL)                         \
    X(OFFLOAD_PARAM_DEVICE, OPTSTR, "offload-param-device", NULL)                                 \
    X(OFFLOAD_OPTIMIZER_NVME_PATH, OPTSTR, "offload-optimizer-nvme-path", NULL)                   \
    X(OFFLOAD_PARAM_NVME_PATH, OPTSTR, "offload-param-nvme-path", NULL)                           \
    X(GRADIENT_ACCUMULATION_STEPS, OPTSTR, "gradient-accumulation-steps", NULL)                   \
    X(GRADIENT_CLIPPING, OPTSTR, "gradient-clipping", NULL)                                       \
    X(ZERO3_INIT_FLAG, OPTSTR, "zero3-init-flag", NULL)                                           \
    X(ZERO3_SAVE_16BIT_MODEL, OPTSTR, "zero3-save-16bit-model", NULL)                             \
    X(DS_HOSTFILE, OPTSTR, "deepspeed-hostfile", NULL)                                            \
    X(DS_EXCLUSION_FILTER, OPTSTR, "deepspeed-exclusion-filter", NULL)                            \
    X(DS_INCLUSION_FILTER, OPTSTR, "deepspeed-inclusion-filter", NULL)                            \
    X(DS_MULTINODE_LAUNCHER, OPTSTR, "deepspeed-multinode-launcher", NULL)                        \
    X(DS_MOE_LAYER_CLS_NAMES, OPTSTR, "deepspeed-moe-layer-cls-names", NULL)                      \
    X(DS_FIELDS, OPTSTR, "deepspeed-fields-from-config", NULL)                                    \
    X(FSDP_VERSION, OPTSTR, "fsdp-version", "1")                                                  \
    X(FSDP_OFFLOAD_PARAMS, OPTSTR, "fsdp-offload-params", "false")                                \
    X(FSDP_MIN_NUM_PARAMS, OPTSTR, "fsdp-min-num-params", "100000000")                            \
    X(FSDP_SHARDING_STRATEGY, OPTSTR, "fsdp-sharding-strategy", "FULL_SHARD")                     \
    X(FSDP_RESHARD_AFTER_FORWARD, OPTSTR, "fsdp-reshard-after-forward", "true")                   \
    X(FSDP_AUTO_WRAP_POLICY, OPTSTR, "fsdp-auto-wrap-policy", NULL)                               \
    X(FSDP_TRANSFORMER_CLS, OPTSTR, "fsdp-transformer-layer-cls-to-wrap", NULL)                   \
    X(FSDP_BACKWARD_PREFETCH, OPTSTR, "fsdp-backward-prefetch", NULL)                             \
    X(FSDP_STATE_DICT_TYPE, OPTSTR, "fsdp-state-dict-type", NULL)                                 \
    X(FSDP_FORWARD_PREFETCH, OPTSTR, "fsdp-forward-prefetch", "false")                            \
    X(FSDP_USE_ORIG_PARAMS, OPTSTR, "fsdp-use-orig-params", "true")                               \
    X(FSDP_CPU_RAM_EFFICIENT_LOADING, OPTSTR, "fsdp-cpu-ram-efficient-loading", "true")           \
    X(FSDP_SYNC_MODULE_STATES, OPTSTR, "fsdp-sync-module-states", "true")                         \
    X(FSDP_ACTIVATION_CHECKPOINTING, OPTSTR, "fsdp-activation-checkpointing", "false")            \
    X(FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD, OPTSTR, "fsdp-activation-checkpointing-offload",      \
      "false")                                                                                    \
    X(FSDP_IGNORED_MODULES, OPTSTR, "fsdp-ignored-modules", NULL)

/* Every setting. The order is the order of --print-config and --help. */
enum cfg_id {
    CFG_NPROC_PER_NODE,
    CFG_NNODES,
    CFG_NODE_RANK,
    CFG_SEGMENT_SIZE,
    CFG_RDZV_BACKEND,
    CFG_RDZV_ENDPOINT,
    CFG_RDZV_ID,
    CFG_RDZV_CONF,
    CFG_ETCD_CACERT,
    CFG_ETCD_CERT,
    CFG_ETCD_KEY,
    CFG_STANDALONE,
    CFG_MASTER_ADDR,
    CFG_MASTER_PORT,
    CFG_LOCAL_ADDR,
    CFG_NODE_NAME,
    CFG_DISCOVERY,
    CFG_DISCOVERED,
    CFG_HOSTFILE,
    CFG_DISCOVERY_ROOT,
    CFG_K8S_SELECTOR,
    CFG_K8S_NAMESPACE,
    CFG_K8S_ORDER,
    CFG_RDZV_TOKEN_FILE,
    CFG_RDZV_TOKEN,
    CFG_STORE_ALLOW,
    /* the deepspeed launcher's own settings (frontends/deepspeed_cli.c, env/deepspeed.c,
     * fanout.c) */
    CFG_DS_MODE,
    CFG_DS_INCLUDE,
    CFG_DS_EXCLUDE,
    CFG_DS_NUM_NODES,
    CFG_DS_NUM_GPUS,
    CFG_DS_MIN_ELASTIC_NODES,
    CFG_DS_MAX_ELASTIC_NODES,
    CFG_DS_ELASTIC,
    CFG_DS_LAUNCHER,
    CFG_DS_LAUNCHER_ARGS,
    CFG_DS_NO_LOCAL_RANK,
    CFG_DS_NO_SSH,
    CFG_DS_NO_SSH_CHECK,
    CFG_DS_FORCE_MULTI,
    CFG_DS_SAVE_PID,
    CFG_DS_EACH_RANK_LOG,
    CFG_DS_BIND_CORES,
    CFG_DS_BIND_CORE_LIST,
    CFG_DS_SSH_PORT,
    CFG_DS_VENV_SCRIPT,
    CFG_DS_LOG_LEVEL,
    CFG_DS_QUIET,
    CFG_DS_WORLD_INFO,
    CFG_DS_DEVICES,
    CFG_DS_PID_FILE,
    CFG_MAX_RESTARTS,
    CFG_MAX_NODE_FAILURES,
    CFG_MONITOR_INTERVAL,
    CFG_START_METHOD,
    CFG_ROLE,
    CFG_MODULE,
    CFG_NO_PYTHON,
    CFG_RUN_PATH,
    CFG_PYTHON,
    CFG_LOG_DIR,
    CFG_TMPDIR,
    CFG_REDIRECTS,
    CFG_TEE,
    CFG_LOCAL_RANKS_FILTER,
    CFG_LOG_LINE_PREFIX,
    CFG_TERM_TIMEOUT,
    CFG_STOP_SIGNAL_TO,
    CFG_TERMINATION_LOG,
    CFG_HANG_TIMEOUT,
    CFG_FILE_TIMER,
    CFG_GPU_RECLAIM_TIMEOUT,
    CFG_GPU_MEMORY_TOLERANCE,
    CFG_HEALTH_CHECK_INTERVAL,
    CFG_TIMER_FILE,
    CFG_DEBUG,
    CFG_HEALTH_PORT,
    CFG_LOG_FORMAT,
    CFG_TRAINJOB_URL,
    CFG_TRAINJOB_CA,
    CFG_TRAINJOB_TOKEN,
    CFG_TRAINJOB_INTERVAL,
    CFG_EXIT_CODE_PEER_FAILURE,
    CFG_EXIT_CODE_PEER_LOST,
    CFG_EXIT_CODE_STORE_LOST,
    CFG_EXIT_CODE_RDZV_TIMEOUT,
    CFG_EXIT_CODE_HANG,
    CFG_FATAL_EXIT_CODES,
    CFG_EXIT_CODE_FATAL,
    CFG_PROGRESS_FILE,
    CFG_MAX_NO_PROGRESS,
    /* the node's devices, the CPU binding of workers and the preflight check (launcher/devices,
     * launcher/preflight) */
    CFG_EXIT_CODE_PREFLIGHT,
    CFG_SYSROOT,
    CFG_VISIBLE_DEVICES,
    CFG_VIRTUAL_LOCAL_RANK,
    CFG_NUMA_BINDING,
    CFG_BIND_CORE_LIST,
    CFG_PREFLIGHT,
    CFG_PREFLIGHT_POLICY,
    CFG_PREFLIGHT_TIMEOUT,
    CFG_PREFLIGHT_TCP_BYTES,
    CFG_PREFLIGHT_NCCL_BYTES,
    CFG_PREFLIGHT_MAX_RTT,
    CFG_PREFLIGHT_MIN_BANDWIDTH,
    CFG_PREFLIGHT_SLOW_PERCENT,
    CFG_PREFLIGHT_NCCL_LIB,
    CFG_PREFLIGHT_CUDART_LIB,
    /* other launchers' settings (launcher/frontends/): torchrun 2.x's newer flags, the worker
     * environment a front-end picks, accelerate launch's and paddle.distributed.launch's own */
    CFG_SIGNALS_TO_HANDLE,
    CFG_DUP_STDOUT_FILTERS,
    CFG_DUP_STDERR_FILTERS,
    CFG_LOGS_SPECS,
    CFG_EVENT_LOG_HANDLER,
    CFG_WORKER_ENV,
    CFG_ACC_AUTO_LAUNCHER,
#define X(id, type, name, def) CFG_ACC_##id,
    CFG_ACC_SETTINGS(X)
#undef X
    CFG_PADDLE_LOG_DIR,
    CFG_PADDLE_LOG_OVERWRITE,
    CFG_PADDLE_LOG_LEVEL,
    CFG_PADDLE_DEVICES,
    CFG_PADDLE_IPS,
    CFG_PADDLE_START_PORT,
    CFG_PADDLE_RUN_MODE,
    CFG_PADDLE_TRAINING_ROLE,
    CFG_PADDLE_SERVER_NUM,
    CFG_PADDLE_TRAINER_NUM,
    CFG_PADDLE_SERVERS,
    CFG_PADDLE_TRAINERS,
    CFG_PADDLE_GLOO_PORT,
    CFG_PADDLE_WITH_GLOO,
    CFG_PADDLE_MAX_RESTART,
    CFG_PADDLE_ELASTIC_LEVEL,
    CFG_PADDLE_TRAINER_ID,
    CFG_PADDLE_PSERVERS_GIVEN,
    /* the keys of --rdzv-conf, each with its own source */
    CFG_JOIN_TIMEOUT,
    CFG_LAST_CALL_TIMEOUT,
    CFG_CLOSE_TIMEOUT,
    CFG_KEEP_ALIVE_INTERVAL,
    CFG_KEEP_ALIVE_MAX_ATTEMPT,
    CFG_IS_HOST,
    CFG_READ_TIMEOUT,
    CFG_STORE_TIMEOUT,
    /* actions */
    CFG_PRINT_CONFIG,
    CFG_HELP,
    CFG_VERSION,
    CFG__COUNT
};

/* Where a value came from, in rank order: a value is kept only over one of the same or a lower
 * rank. */
enum cfg_src_kind {
    CFG_SRC_DEFAULT = 0,
    CFG_SRC_OPERATOR,   /* a scheduler's environment (PyTorchJob, Volcano, SLURM, ...) */
    CFG_SRC_HOSTFILE,   /* a hostfile's lines (--hostfile, MPIJob's /etc/mpi/hostfile, ...) */
    CFG_SRC_PET,        /* torchrun's environment: PET_<NAME> and the variables its agent reads */
    CFG_SRC_PODRUN,     /* podrun's own environment: PODRUN_<NAME> (and TMPDIR) */
    CFG_SRC_FILE,       /* a config file */
    CFG_SRC_FLAG,       /* the command line */
    CFG_SRC_DERIVED,    /* computed by cfg_finalize from other values, named in `name` */
};

#define CFG_SRC_NAME_MAX 256 /* a hostfile's path and line fit */

struct cfg_src {
    enum cfg_src_kind kind;
    char name[CFG_SRC_NAME_MAX]; /* the input's exact spelling; "" for a default */
};

/* GPUS_OR_ONE: the GPUs, at least one worker (accelerate's and paddle's default); XPU: torch
 * 2.x's Intel GPUs, which podrun does not see (an error, as torchrun's on a node without them) */
enum cfg_nproc_kind { CFG_NPROC_NUMBER, CFG_NPROC_AUTO, CFG_NPROC_CPU, CFG_NPROC_GPU,
                      CFG_NPROC_GPUS_OR_ONE, CFG_NPROC_XPU };
enum cfg_backend { CFG_BACKEND_STATIC, CFG_BACKEND_C10D, CFG_BACKEND_ETCD };
enum cfg_start_method { CFG_START_SPAWN, CFG_START_FORK, CFG_START_FORKSERVER };
/* Where this node learns who it is and who its peers are (launcher/operators, launcher/discover). */
enum cfg_discovery { CFG_DISCOVERY_AUTO, CFG_DISCOVERY_ENV, CFG_DISCOVERY_K8S,
                     CFG_DISCOVERY_HOSTFILE, CFG_DISCOVERY_NONE };
/* How podrun writes its own lines (not the workers'): for people, or one JSON object each. */
enum cfg_log_format { CFG_LOG_HUMAN, CFG_LOG_JSON };
/* Whom the stop signal reaches first (doc/failures.md#pid-1-signals-stopping): the worker,
 * then its process group once it has exited; the worker alone (torch 1.13); its whole group
 * (torch 2.x). */
enum cfg_stop_to { CFG_STOP_WORKER_FIRST, CFG_STOP_WORKER, CFG_STOP_GROUP };
/* How Kubernetes discovery orders the pods into node ranks (launcher/discover/k8s_pods.h). */
enum cfg_k8s_order { CFG_K8S_ORDER_INDEX, CFG_K8S_ORDER_NAME, CFG_K8S_ORDER_IP };
/* Which GPUs a worker's CUDA sees: all of the node's (torchrun), or its own one by UUID. */
enum cfg_visible { CFG_VISIBLE_ALL, CFG_VISIBLE_PER_RANK };
/* Where each worker's CPUs are: torch 2.9's --numa-binding modes, and DeepSpeed's
 * --bind_cores_to_rank ("cores": the core list split evenly by local rank). */
enum cfg_numa { CFG_NUMA_NONE, CFG_NUMA_NODE, CFG_NUMA_SOCKET, CFG_NUMA_EXCLUSIVE,
                CFG_NUMA_CORE_COMPLEX, CFG_NUMA_CORES };
enum cfg_preflight { CFG_PREFLIGHT_OFF, CFG_PREFLIGHT_TCP, CFG_PREFLIGHT_NCCL };
enum cfg_preflight_policy { CFG_POLICY_WARN, CFG_POLICY_FAIL, CFG_POLICY_EXCLUDE };
/* What a `deepspeed` command line does here (frontends/deepspeed_cli.h): not a DeepSpeed job; run
 * this node's share of the hostfile's job; start every host's agent through pdsh or ssh; or run
 * on this machine alone because there is no hostfile. */
enum cfg_ds_mode { CFG_DS_MODE_OFF, CFG_DS_MODE_NODE, CFG_DS_MODE_HEAD, CFG_DS_MODE_LOCAL };
enum cfg_ds_launcher { CFG_DS_LAUNCH_PDSH, CFG_DS_LAUNCH_SSH };
/* Which launcher's environment each worker is started with (launcher/env/). */
enum cfg_worker_env { CFG_WORKER_ENV_TORCH, CFG_WORKER_ENV_ACCELERATE, CFG_WORKER_ENV_PADDLE,
                      CFG_WORKER_ENV_DEEPSPEED };
enum cfg_paddle_mode { CFG_PADDLE_COLLECTIVE, CFG_PADDLE_PS };
enum cfg_paddle_role { CFG_PADDLE_ROLE_NONE, CFG_PADDLE_ROLE_PSERVER, CFG_PADDLE_ROLE_TRAINER };
#define CFG_ACC__COUNT (CFG_ACC_FSDP_IGNORED_MODULES - CFG_ACC_CONFIG_FILE + 1)

#define CFG_MAX_NPROC 1024          /* workers per node */
#define CFG_DEFAULT_C10D_PORT 29400

struct cfg {
    enum cfg_nproc_kind nproc_kind;
    int nproc_per_node;             /* resolved by cfg_finalize */
    int nnodes_min, nnodes_max;
    int node_rank;
    int segment_size;           /* 1: off */
    enum cfg_backend rdzv_backend;
    char *rdzv_host;                /* --rdzv-endpoint host; NULL: derived in cfg_finalize */
    int rdzv_port;                  /* 0: the backend's default, or a free port when given */
    bool rdzv_port_given;           /* the endpoint named a port (":0" = a free port) */
    char *rdzv_endpoints;           /* the endpoint as given when it is a list or a URL (etcd's
                                       members); NULL for a plain HOST[:PORT] */
    char *etcd_cacert, *etcd_cert, *etcd_key; /* PEM files for https etcd endpoints */
    char *rdzv_id;
    bool standalone;
    char *master_addr;
    int master_port;
    char *local_addr;               /* NULL: not given */
    char *node_name;                /* this node's name in the job; NULL: the host name */
    enum cfg_discovery discovery;
    char *discovered;               /* the source discovery used ("Volcano"); NULL: none */
    char *hostfile;                 /* --hostfile; NULL: not given */
    char *discovery_root;           /* where a scheduler's mounted files are read ("/") */
    char *k8s_selector;             /* NULL: derived from this pod's own labels */
    char *k8s_namespace;            /* NULL: the service account's (or kubeconfig context's) */
    enum cfg_k8s_order k8s_order;
    /* who may use the job store (doc/store.md#security) */
    char *rdzv_token_file;          /* the job's token, read by the agent; NULL: none */
    char *rdzv_token;               /* PODRUN_RDZV_TOKEN: the token itself; never printed */
    char *store_allow;              /* CIDR,...: sources the store accepts; NULL: any */
    /* the deepspeed launcher's (DeepSpeed's runner.py flags; see frontends/deepspeed_cli.h) */
    int ds_mode;                    /* enum cfg_ds_mode */
    char *ds_include, *ds_exclude;  /* -i/-e NODE_SPEC[@NODE_SPEC...]; NULL: not given */
    int ds_num_nodes, ds_num_gpus;  /* -1: not given */
    int ds_min_elastic_nodes, ds_max_elastic_nodes;   /* -1: not given */
    bool ds_elastic;
    int ds_launcher;                /* enum cfg_ds_launcher */
    char *ds_launcher_args;         /* words for pdsh (or ssh), shell-split */
    bool ds_no_local_rank, ds_no_ssh, ds_no_ssh_check, ds_force_multi, ds_save_pid;
    char *ds_each_rank_log;         /* --enable_each_rank_log DIR */
    bool ds_bind_cores;
    char *ds_bind_core_list;
    int ds_ssh_port;                /* 0: ssh's own */
    char *ds_venv_script;
    int ds_log_level;
    bool ds_quiet;                  /* -q: --log_level error */
    char *ds_world_info;            /* launch.py's --world_info: every node's slot ids */
    char *ds_devices;               /* this node's slot ids, "0,1": CUDA_VISIBLE_DEVICES */
    char *ds_pid_file;              /* where this agent writes its pid (the head's stop) */
    int max_restarts;
    int max_node_failures;          /* a node with this many failures is left out (0: never) */
    uint64_t monitor_interval_ms;
    enum cfg_start_method start_method;
    char *role;
    bool module, no_python, run_path;
    char *python;
    char *log_dir;                  /* NULL: not given */
    char *tmpdir;                   /* where the private run directory goes without --log-dir */
    char *redirects, *tee;          /* specs as given ("3", "0:1,1:2"); expanded per local rank */
    char *local_ranks_filter;       /* "0,2" or NULL for all */
    char *log_line_prefix;          /* template with ${rank} ${local_rank} ${role_name} */
    uint64_t term_timeout_ms;
    int stop_signal_to;             /* enum cfg_stop_to: whom a stop's first signal reaches */
    char *termination_log;          /* NULL: /dev/termination-log when writable */
    uint64_t hang_timeout_ms;       /* 0: off */
    uint64_t gpu_reclaim_timeout_ms; /* bound on waiting for GPU memory before a restart; 0 off */
    uint64_t gpu_memory_tolerance;  /* bytes the node's GPUs may still hold at a restart */
    uint64_t health_check_interval_ms; /* GPU and link checks while workers run; 0 off */
    bool file_timer;                /* torch's file-based timers (TORCHELASTIC_ENABLE_FILE_TIMER) */
    char *timer_file;               /* their FIFO (TORCHELASTIC_TIMER_FILE); NULL: in the run dir */
    bool debug;                     /* state changes and every rendezvous line in the log */
    int health_port;                /* /healthz and /metrics: -1 off, 0 a free port */
    enum cfg_log_format log_format;
    /* Kubeflow Trainer's status server (KUBEFLOW_TRAINER_SERVER_*; output/trainjob.h) */
    char *trainjob_url;             /* NULL: not under a Trainer that takes reports */
    char *trainjob_ca;              /* the CA file of its certificate */
    char *trainjob_token;           /* the projected token's file */
    uint64_t trainjob_interval_ms;  /* the least time between two reports; 0: none sent */
    /* exit codes for the ways a node can be stopped by something other than its own worker's
     * exit status (doc/failures.md#exit-status) */
    int exit_code_peer_failure;     /* a worker on another node failed */
    int exit_code_peer_lost;        /* another agent or node was lost, left or went silent */
    int exit_code_store_lost;       /* the job store host was lost */
    int exit_code_rdzv_timeout;     /* the rendezvous did not complete within join_timeout */
    int exit_code_hang;             /* this node's worker hung (--hang-timeout) */
    char *fatal_exit_codes;         /* a worker exiting with one: no restart (NULL: none) */
    int exit_code_fatal;            /* every node's code when that happened */
    char *progress_file;            /* the trainer's step or checkpoint iteration; NULL: none */
    int max_no_progress;            /* attempts in a row without progress that end the job
                                       (--max-no-progress-restarts; 0: off) */
    /* devices, binding, preflight */
    int exit_code_preflight;        /* the preflight check failed (policy fail or exclude) */
    char *sysroot;                  /* root of /proc, /sys, /dev for device discovery; NULL: / */
    int visible_devices;            /* enum cfg_visible */
    bool virtual_local_rank;        /* LOCAL_RANK=0 and only the worker's own GPU visible */
    int numa_binding;               /* enum cfg_numa */
    char *bind_core_list;           /* CFG_NUMA_CORES: the CPUs to split; NULL: one per core */
    int preflight;                  /* enum cfg_preflight */
    int preflight_policy;           /* enum cfg_preflight_policy */
    uint64_t preflight_timeout_ms;  /* bound on each step of the check */
    uint64_t preflight_tcp_bytes;   /* sent each way on each link (tcp) */
    uint64_t preflight_nccl_bytes;  /* all_reduce buffer per GPU (nccl) */
    uint64_t preflight_max_rtt_ms;  /* a link slower than this is slow (0: no bound) */
    int preflight_min_bandwidth;    /* MB/s; a link or node below it is slow (0: no bound) */
    int preflight_slow_percent;     /* below this % of the median is slow (0: no bound) */
    char *preflight_nccl_lib;       /* NULL: libnccl.so.2 */
    char *preflight_cudart_lib;     /* NULL: the newest libcudart.so.N found */

    /* other launchers' settings */
    char *signals_to_handle;        /* signal names that stop the job the way SIGTERM does */
    char *dup_filters[2];           /* --duplicate-std{out,err}-filters (",," is a comma) */
    int logs_specs;                 /* 0: "default", torchrun's layout */
    char *event_log_handler;        /* accepted; see doc/frontends.md#torchrun */
    int worker_env;                 /* enum cfg_worker_env */
    /* accelerate launch named no launcher: its multi-GPU one with more than one GPU, else its
     * simple launcher, one process (resolved with the node's GPUs) */
    bool acc_auto_launcher;
    char *acc[CFG_ACC__COUNT];      /* accelerate's values, index id - CFG_ACC_CONFIG_FILE */
    char *paddle_log_dir;           /* workerlog.N, serverlog.N, endpoints.log */
    bool paddle_log_overwrite;
    char *paddle_log_level;
    char *paddle_devices;           /* --devices/--gpus: device ids for this node's workers */
    char *paddle_ips;               /* --ips: the nodes' addresses in node-rank order */
    int paddle_start_port;          /* --ips: workers' ports start here */
    int paddle_run_mode;            /* enum cfg_paddle_mode */
    int paddle_training_role;       /* enum cfg_paddle_role: every worker of this node's role */
    int paddle_server_num, paddle_trainer_num;  /* this node's parameter servers and trainers */
    char *paddle_servers, *paddle_trainers;     /* --servers/--trainers: every endpoint */
    int paddle_gloo_port;
    char *paddle_with_gloo;
    int paddle_max_restart, paddle_elastic_level;
    int paddle_trainer_id;          /* PADDLE_TRAINER_ID: the node rank in a collective job */
    char *paddle_pservers_given;    /* a pod's list of pservers: TRAINING_ROLE=TRAINER is ps's */

    /* --rdzv-conf */
    uint64_t join_timeout_ms, last_call_timeout_ms, close_timeout_ms, keep_alive_interval_ms;
    int keep_alive_max_attempt;
    int is_host;                    /* -1: decide from the endpoint */
    uint64_t read_timeout_ms, store_timeout_ms;

    bool print_config, help, version;

    /* the program and its arguments (pointers into argv: argv must outlive the struct) */
    char **program;
    int program_argc;

    /* per local rank, filled by cfg_finalize: bit 1 stdout, bit 2 stderr */
    uint8_t *redirect_mask, *tee_mask;
    bool *console_rank;             /* shown on the console (--local-ranks-filter) */

    struct cfg_src src[CFG__COUNT];
};

/* Every setting at its default (source "default"). */
void cfg_init(struct cfg *c);
void cfg_free(struct cfg *c);

/* Fills a source: its kind and its name from fmt (cut to CFG_SRC_NAME_MAX - 1). */
void cfg_src_init(struct cfg_src *s, enum cfg_src_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sets one value from text, as given by `src`: parsed with the setting's type (an error names
 * src and says what is expected), then kept only if src ranks at least as high as the source of
 * the value held now. A composite (--rdzv-conf K=V,...) sets each of its keys the same way.
 * -EINVAL for a DERIVED source: only cfg_finalize derives. */
int cfg_set(struct cfg *c, enum cfg_id id, const char *text, const struct cfg_src *src,
            char *err, size_t errlen);

/* The program and its arguments: argv[0..argc), which must outlive c. */
void cfg_set_program(struct cfg *c, char **argv, int argc);

/* podrun's own environment layer: PODRUN_<NAME> for every setting that has one (and the few
 * settings named by a plain variable, TMPDIR), from a NULL-terminated "NAME=value" array. An
 * empty variable is unset. */
int cfg_load_env(struct cfg *c, char *const *envp, char *err, size_t errlen);

/* After every layer: resolves nproc (auto/cpu/gpu with the given counts; ngpus is the number of
 * CUDA devices a worker could be given), --standalone, the
 * rendezvous endpoint, the per-rank log masks, and checks values against each other (one GPU per
 * worker where a setting needs it). */
int cfg_finalize(struct cfg *c, int ncpus, int ngpus, char *err, size_t errlen);

/* One line per value: name, value, source. */
void cfg_print(const struct cfg *c, FILE *f);
/* podrun's --help: its usage line and every setting it has a flag for. */
void cfg_usage(FILE *f);

/* "flag --nproc-per-node" / "env PODRUN_NPROC_PER_NODE" / "default" / "from --standalone". */
void cfg_src_describe(const struct cfg_src *s, char *buf, size_t len);
/* The setting's name ("nproc-per-node"), "?" for an unknown id. */
const char *cfg_name(enum cfg_id id);
/* An accelerate setting's text (NULL: not given and no default). */
const char *cfg_acc(const struct cfg *c, enum cfg_id id);

#endif
