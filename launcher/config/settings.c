/* launcher/config/settings.c — the table of settings (see settings.h). */
#include "launcher/config/settings.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define OFF(f) offsetof(struct cfg, f)

/* torchrun 2.x looks --logs-specs up in the entry-point group torchrun.logs_specs, where
 * torch itself registers "default" (DefaultLogsSpecs); podrun has that layout only. */
static const char *const logs_specs[] = {"default", NULL};
static const char *const backends[] = {"static", "c10d", "etcd", NULL}; /* enum cfg_backend */
static const char *const start_methods[] = {"spawn", "fork", "forkserver", NULL};
static const char *const discoveries[] = {"auto", "env", "k8s", "hostfile", "none", NULL};
static const char *const k8s_orders[] = {"index", "name", "ip", NULL};   /* enum cfg_k8s_order */
static const char *const visibles[] = {"all", "per-rank", NULL};                /* cfg_visible */
static const char *const numas[] = {"none", "node", "socket", "exclusive", "core-complex",
                                    "cores", NULL};                            /* cfg_numa */
static const char *const preflights[] = {"off", "tcp", "nccl", NULL};
static const char *const policies[] = {"warn", "fail", "exclude", NULL};
static const char *const ds_modes[] = {"off", "node", "head", "local", NULL}; /* cfg_ds_mode */
static const char *const ds_launchers[] = {"pdsh", "ssh", NULL};   /* enum cfg_ds_launcher */
static const char *const ds_log_levels[] = {"debug", "info", "warning", "error", "critical",
                                            NULL};
static const char *const stop_tos[] = {"worker-first", "worker", "group", NULL}; /* cfg_stop_to */
static const char *const log_formats[] = {"human", "json", NULL};       /* enum cfg_log_format */
static const char *const worker_envs[] = {"torch", "accelerate", "paddle", "deepspeed", NULL};
static const char *const paddle_modes[] = {"collective", "ps", NULL};  /* enum cfg_paddle_mode */
static const char *const paddle_roles[] = {"none", "PSERVER", "TRAINER", NULL};

const struct cfg_setting cfg_settings[CFG__COUNT] = {
    [CFG_NPROC_PER_NODE] = {"nproc-per-node", 0, CFG_T_NPROC, 0, 0, 0, NULL, "1",
        "N|auto|cpu|gpu", NULL, 0, "workers on this node; auto = GPUs, else usable CPUs (cpuset or CPU quota)", NULL},
    [CFG_NNODES] = {"nnodes", 0, CFG_T_NNODES, 0, 0, 0, NULL, "1", "N|MIN:MAX", NULL, 0,
        "nodes in the job", NULL},
    [CFG_NODE_RANK] = {"node-rank", 0, CFG_T_INT, OFF(node_rank), 0, 65535, NULL, "0", "N", NULL,
        0, "this node's rank (static rendezvous)", NULL},
    [CFG_SEGMENT_SIZE] = {"segment-size", 0, CFG_T_INT, OFF(segment_size), 1, 65535, NULL, "1",
        "N", NULL, 0,
        "rounds take whole segments: per NVLink domain (GPU fabric cluster and clique) a "
        "multiple of N nodes, the rest wait as spares; N divides both ends of --nnodes", NULL},
    [CFG_RDZV_BACKEND] = {"rdzv-backend", 0, CFG_T_CHOICE, OFF(rdzv_backend), 0, 0, backends,
        "static", "static|c10d|etcd", NULL, 0, "rendezvous backend",
        "unknown rendezvous backend; use 'c10d', 'static' or 'etcd'"},
    [CFG_RDZV_ENDPOINT] = {"rdzv-endpoint", 0, CFG_T_ENDPOINT, 0, 0, 0, NULL, NULL,
        "HOST[:PORT]", NULL, 0,
        "job store address; static: master addr:port by default; c10d: required with more than "
        "one node (one node: localhost), port 29400 when left out; etcd: its members, "
        "HOST[:2379][,...] or http(s):// URLs", NULL},
    [CFG_RDZV_ID] = {"rdzv-id", 0, CFG_T_STR, OFF(rdzv_id), 0, 0, NULL, "none", "ID", NULL, 0,
        "job id, TORCHELASTIC_RUN_ID", NULL},
    [CFG_RDZV_CONF] = {"rdzv-conf", 0, CFG_T_CONF, 0, 0, 0, NULL, NULL, "K=V,...", NULL,
        CFG_F_ACTION,
        "join_timeout, last_call_timeout, close_timeout, keep_alive_interval, "
        "keep_alive_max_attempt, is_host; timeout (static: join_timeout unless that is given, "
        "as torchrun), read_timeout (etcd: how long it may fail before an agent gives up; "
        "else unused)", NULL},
    [CFG_ETCD_CACERT] = {"etcd-cacert", 0, CFG_T_OPTSTR, OFF(etcd_cacert), 0, 0, NULL, NULL,
        "FILE", NULL, 0, "CA certificates (PEM) that etcd's server certificate is checked "
        "against", NULL},
    [CFG_ETCD_CERT] = {"etcd-cert", 0, CFG_T_OPTSTR, OFF(etcd_cert), 0, 0, NULL, NULL, "FILE",
        NULL, 0, "client certificate (PEM) for etcd", NULL},
    [CFG_ETCD_KEY] = {"etcd-key", 0, CFG_T_OPTSTR, OFF(etcd_key), 0, 0, NULL, NULL, "FILE", NULL,
        0, "the client certificate's private key (PEM)", NULL},
    [CFG_STANDALONE] = {"standalone", 0, CFG_T_BOOL, OFF(standalone), 0, 0, NULL, "0", NULL,
        NULL, 0, "single-node job on a free local port with a random id", NULL},
    [CFG_MASTER_ADDR] = {"master-addr", 0, CFG_T_STR, OFF(master_addr), 0, 0, NULL,
        "127.0.0.1", "HOST", NULL, 0, "MASTER_ADDR given to workers", NULL},
    [CFG_MASTER_PORT] = {"master-port", 0, CFG_T_INT, OFF(master_port), 1, 65535, NULL, "29500",
        "PORT", NULL, 0, "MASTER_PORT given to workers", NULL},
    [CFG_LOCAL_ADDR] = {"local-addr", 0, CFG_T_OPTSTR, OFF(local_addr), 0, 0, NULL, NULL, "ADDR",
        NULL, 0,
        "address this agent advertises and binds (workers get GLOO_SOCKET_IFNAME of its "
        "interface)", NULL},
    [CFG_NODE_NAME] = {"node-name", 0, CFG_T_OPTSTR, OFF(node_name), 0, 0, NULL, NULL, "NAME",
        NULL, 0, "this node's name in the rendezvous and in reports (default: the host name)",
        NULL},
    [CFG_DISCOVERY] = {"discovery", 0, CFG_T_CHOICE, OFF(discovery), 0, 0, discoveries, "auto",
        "auto|env|k8s|hostfile|none", NULL, 0,
        "where this node learns its rank and its peers (auto: the first source present)",
        "use 'auto', 'env', 'k8s', 'hostfile' or 'none'"},
    [CFG_DISCOVERED] = {"discovered", 0, CFG_T_OPTSTR, OFF(discovered), 0, 0, NULL, NULL, NULL,
        NULL, CFG_F_NO_ENV | CFG_F_NO_FLAG, NULL, NULL},
    [CFG_HOSTFILE] = {"hostfile", 0, CFG_T_OPTSTR, OFF(hostfile), 0, 0, NULL, NULL, "FILE", NULL,
        0, "this job's hosts, one per line (HOST, HOST slots=N, HOST:N): node rank = this "
        "node's line, nnodes = lines, the first line hosts the job store", NULL},
    [CFG_DISCOVERY_ROOT] = {"discovery-root", 0, CFG_T_STR, OFF(discovery_root), 0, 0, NULL, "/",
        NULL, NULL, CFG_F_NO_FLAG, NULL, NULL},
    [CFG_K8S_SELECTOR] = {"k8s-selector", 0, CFG_T_OPTSTR, OFF(k8s_selector), 0, 0, NULL, NULL,
        "SELECTOR", NULL, 0,
        "--discovery k8s: the job's pods (label selector; default: from this pod's operator "
        "labels)", NULL},
    [CFG_K8S_NAMESPACE] = {"k8s-namespace", 0, CFG_T_OPTSTR, OFF(k8s_namespace), 0, 0, NULL,
        NULL, "NAMESPACE", NULL, 0,
        "--discovery k8s: the pods' namespace (default: the service account's)", NULL},
    [CFG_K8S_ORDER] = {"k8s-order", 0, CFG_T_CHOICE, OFF(k8s_order), 0, 0, k8s_orders, "index",
        "index|name|ip", NULL, 0,
        "--discovery k8s: node ranks by the operator's index, else pod name; name; or pod IP "
        "as strings (k8s_tools.py)", "use 'index', 'name' or 'ip'"},
    [CFG_RDZV_TOKEN_FILE] = {"rdzv-token-file", 0, CFG_T_OPTSTR, OFF(rdzv_token_file), 0, 0,
        NULL, NULL, "FILE", NULL, 0,
        "the job's secret (e.g. a mounted Kubernetes Secret): only agents holding it use "
        "podrun's keys in the job store; without it (or PODRUN_RDZV_TOKEN) the store is open",
        NULL},
    [CFG_RDZV_TOKEN] = {"rdzv-token", 0, CFG_T_OPTSTR, OFF(rdzv_token), 0, 0, NULL, NULL, NULL,
        NULL, CFG_F_NO_FLAG | CFG_F_SECRET, NULL, NULL},
    [CFG_STORE_ALLOW] = {"store-allow", 0, CFG_T_OPTSTR, OFF(store_allow), 0, 0, NULL, NULL,
        "CIDR|job,...", NULL, 0,
        "sources the hosted job store accepts, others are refused at accept; job: the job's "
        "own pods as --discovery k8s sees them come and go", NULL},
#define DS (CFG_F_NO_ENV | CFG_F_NO_FLAG)
    [CFG_DS_MODE] = {"ds-mode", 0, CFG_T_CHOICE, OFF(ds_mode), 0, 0, ds_modes, "off", NULL, NULL,
        DS, NULL, "use 'off', 'node', 'head' or 'local'"},
    [CFG_DS_INCLUDE] = {"ds-include", 0, CFG_T_OPTSTR, OFF(ds_include), 0, 0, NULL, NULL, NULL,
        NULL, DS, NULL, NULL},
    [CFG_DS_EXCLUDE] = {"ds-exclude", 0, CFG_T_OPTSTR, OFF(ds_exclude), 0, 0, NULL, NULL, NULL,
        NULL, DS, NULL, NULL},
    [CFG_DS_NUM_NODES] = {"ds-num-nodes", 0, CFG_T_INT, OFF(ds_num_nodes), -1, 65536, NULL, "-1",
        NULL, NULL, DS, NULL, NULL},
    [CFG_DS_NUM_GPUS] = {"ds-num-gpus", 0, CFG_T_INT, OFF(ds_num_gpus), -1, 1024, NULL, "-1",
        NULL, NULL, DS, NULL, NULL},
    [CFG_DS_MIN_ELASTIC_NODES] = {"ds-min-elastic-nodes", 0, CFG_T_INT, OFF(ds_min_elastic_nodes),
        -1, 65536, NULL, "-1", NULL, NULL, DS, NULL, NULL},
    [CFG_DS_MAX_ELASTIC_NODES] = {"ds-max-elastic-nodes", 0, CFG_T_INT, OFF(ds_max_elastic_nodes),
        -1, 65536, NULL, "-1", NULL, NULL, DS, NULL, NULL},
    [CFG_DS_ELASTIC] = {"ds-elastic-training", 0, CFG_T_BOOL, OFF(ds_elastic), 0, 0, NULL, "0",
        NULL, NULL, DS, NULL, NULL},
    [CFG_DS_LAUNCHER] = {"ds-launcher", 0, CFG_T_CHOICE, OFF(ds_launcher), 0, 0, ds_launchers,
        "pdsh", NULL, NULL, DS, NULL, "use 'pdsh' or 'ssh'"},
    [CFG_DS_LAUNCHER_ARGS] = {"ds-launcher-args", 0, CFG_T_OPTSTR, OFF(ds_launcher_args), 0, 0,
        NULL, NULL, NULL, NULL, DS, NULL, NULL},
    [CFG_DS_NO_LOCAL_RANK] = {"ds-no-local-rank", 0, CFG_T_BOOL, OFF(ds_no_local_rank), 0, 0,
        NULL, "0", NULL, NULL, DS, NULL, NULL},
    [CFG_DS_NO_SSH] = {"ds-no-ssh", 0, CFG_T_BOOL, OFF(ds_no_ssh), 0, 0, NULL, "0", NULL, NULL,
        DS, NULL, NULL},
    [CFG_DS_NO_SSH_CHECK] = {"ds-no-ssh-check", 0, CFG_T_BOOL, OFF(ds_no_ssh_check), 0, 0, NULL,
        "0", NULL, NULL, DS, NULL, NULL},
    [CFG_DS_FORCE_MULTI] = {"ds-force-multi", 0, CFG_T_BOOL, OFF(ds_force_multi), 0, 0, NULL,
        "0", NULL, NULL, DS, NULL, NULL},
    [CFG_DS_SAVE_PID] = {"ds-save-pid", 0, CFG_T_BOOL, OFF(ds_save_pid), 0, 0, NULL, "0", NULL,
        NULL, DS, NULL, NULL},
    [CFG_DS_EACH_RANK_LOG] = {"ds-enable-each-rank-log", 0, CFG_T_OPTSTR, OFF(ds_each_rank_log),
        0, 0, NULL, NULL, NULL, NULL, DS, NULL, NULL},
    [CFG_DS_BIND_CORES] = {"ds-bind-cores-to-rank", 0, CFG_T_BOOL, OFF(ds_bind_cores), 0, 0,
        NULL, "0", NULL, NULL, DS, NULL, NULL},
    [CFG_DS_BIND_CORE_LIST] = {"ds-bind-core-list", 0, CFG_T_OPTSTR, OFF(ds_bind_core_list), 0,
        0, NULL, NULL, NULL, NULL, DS, NULL, NULL},
    [CFG_DS_SSH_PORT] = {"ds-ssh-port", 0, CFG_T_INT, OFF(ds_ssh_port), 0, 65535, NULL, "0",
        NULL, NULL, DS, NULL, NULL},
    [CFG_DS_VENV_SCRIPT] = {"ds-venv-script", 0, CFG_T_OPTSTR, OFF(ds_venv_script), 0, 0, NULL,
        NULL, NULL, NULL, DS, NULL, NULL},
    [CFG_DS_LOG_LEVEL] = {"ds-log-level", 0, CFG_T_CHOICE, OFF(ds_log_level), 0, 0,
        ds_log_levels, "info", NULL, NULL, DS, NULL,
        "use 'debug', 'info', 'warning', 'error' or 'critical'"},
    [CFG_DS_QUIET] = {"ds-quiet", 0, CFG_T_BOOL, OFF(ds_quiet), 0, 0, NULL, "0", NULL, NULL, DS,
        NULL, NULL},
    [CFG_DS_WORLD_INFO] = {"ds-world-info", 0, CFG_T_OPTSTR, OFF(ds_world_info), 0, 0, NULL,
        NULL, NULL, NULL, DS, NULL, NULL},
    [CFG_DS_DEVICES] = {"ds-devices", 0, CFG_T_OPTSTR, OFF(ds_devices), 0, 0, NULL, NULL, NULL,
        NULL, DS, NULL, NULL},
    [CFG_DS_PID_FILE] = {"pid-file", 0, CFG_T_OPTSTR, OFF(ds_pid_file), 0, 0, NULL, NULL,
        "FILE", NULL, 0, "write podrun's pid to FILE while it runs", NULL},
#undef DS
    [CFG_MAX_RESTARTS] = {"max-restarts", 0, CFG_T_INT, OFF(max_restarts), 0, 1000000, NULL, "0",
        "N", NULL, 0, "in-place restarts of the job before it fails", NULL},
    [CFG_MAX_NODE_FAILURES] = {"max-node-failures", 0, CFG_T_INT, OFF(max_node_failures), 0,
        1000000, NULL, "3", "K", NULL, 0,
        "a node that caused K of the job's failures (or failed K checks) is left out of later "
        "rounds where the job can do without it; it exits --exit-code-preflight (0: only a node "
        "whose worker asked)",
        NULL},
    [CFG_MONITOR_INTERVAL] = {"monitor-interval", 0, CFG_T_DUR, OFF(monitor_interval_ms), 0, 0,
        NULL, "0.1", "SECONDS", NULL, 0,
        "accepted for torchrun compatibility (podrun is event driven)", NULL},
    [CFG_START_METHOD] = {"start-method", 0, CFG_T_CHOICE, OFF(start_method), 0, 0,
        start_methods, "spawn", "spawn|fork|forkserver", NULL, 0,
        "accepted for torchrun compatibility (workers are always exec'd)",
        "use 'spawn', 'fork' or 'forkserver'"},
    [CFG_ROLE] = {"role", 0, CFG_T_STR, OFF(role), 0, 0, NULL, "default", "NAME", NULL, 0,
        "ROLE_NAME given to workers", NULL},
    [CFG_MODULE] = {"module", 'm', CFG_T_BOOL, OFF(module), 0, 0, NULL, "0", NULL, NULL, 0,
        "PROGRAM is a python module (python -u -m)", NULL},
    [CFG_NO_PYTHON] = {"no-python", 0, CFG_T_BOOL, OFF(no_python), 0, 0, NULL, "0", NULL, NULL,
        0, "exec PROGRAM directly, even a .py file", NULL},
    [CFG_RUN_PATH] = {"run-path", 0, CFG_T_BOOL, OFF(run_path), 0, 0, NULL, "0", NULL, NULL, 0,
        "run the script with runpy.run_path", NULL},
    [CFG_PYTHON] = {"python", 0, CFG_T_STR, OFF(python), 0, 0, NULL, "python3", "PATH", NULL, 0,
        "interpreter for .py scripts and -m", NULL},
    [CFG_LOG_DIR] = {"log-dir", 0, CFG_T_OPTSTR, OFF(log_dir), 0, 0, NULL, NULL, "DIR", NULL, 0,
        "per-rank logs in DIR/RUN_ID/attempt_N/LOCAL_RANK/{stdout,stderr}.log", NULL},
    [CFG_TMPDIR] = {"tmpdir", 0, CFG_T_STR, OFF(tmpdir), 0, 0, NULL, "/tmp", NULL, "TMPDIR",
        CFG_F_NO_FLAG, NULL, NULL},
    [CFG_REDIRECTS] = {"redirects", 'r', CFG_T_STDSPEC, OFF(redirects), 0, 0, NULL, NULL,
        "N|LR:N,...", NULL, 0, "streams to log files only (1 stdout, 2 stderr, 3 both)", NULL},
    [CFG_TEE] = {"tee", 't', CFG_T_STDSPEC, OFF(tee), 0, 0, NULL, NULL, "N|LR:N,...", NULL, 0,
        "streams to log files and the console (1 stdout, 2 stderr, 3 both)", NULL},
    [CFG_LOCAL_RANKS_FILTER] = {"local-ranks-filter", 0, CFG_T_RANKS, OFF(local_ranks_filter), 0,
        0, NULL, NULL, "LR,...", NULL, 0, "show only these local ranks on the console", NULL},
    [CFG_LOG_LINE_PREFIX] = {"log-line-prefix", 0, CFG_T_STR, OFF(log_line_prefix), 0, 0, NULL,
        "[rank ${rank}]:", "TEMPLATE", NULL, 0,
        "console line prefix; ${rank} ${local_rank} ${role_name}", NULL},
    [CFG_TERM_TIMEOUT] = {"term-timeout", 0, CFG_T_DUR, OFF(term_timeout_ms), 0, 0, NULL, "25",
        "SECONDS", NULL, 0, "grace between SIGTERM and SIGKILL when stopping workers", NULL},
    [CFG_STOP_SIGNAL_TO] = {"stop-signal-to", 0, CFG_T_CHOICE, OFF(stop_signal_to), 0, 0, stop_tos,
        "worker-first", "worker-first|worker|group", NULL, 0,
        "whom a stop's SIGTERM reaches: the worker, then its process group once it exited; the "
        "worker alone (torch 1.13); its whole group (torch 2.x). SIGKILL always hits the group",
        "use 'worker-first', 'worker' or 'group'"},
    [CFG_TERMINATION_LOG] = {"termination-log", 0, CFG_T_OPTSTR, OFF(termination_log), 0, 0,
        NULL, NULL, "PATH", NULL, 0,
        "failure summary file (default /dev/termination-log when writable)", NULL},
    [CFG_HANG_TIMEOUT] = {"hang-timeout", 0, CFG_T_DUR, OFF(hang_timeout_ms), 0, 0, NULL, "0",
        "SECONDS", NULL, 0, "a worker silent this long has failed (0: off)", NULL},
    [CFG_GPU_RECLAIM_TIMEOUT] = {"gpu-memory-reclaim-timeout", 0, CFG_T_DUR,
        OFF(gpu_reclaim_timeout_ms), 0, 0, NULL, "50", "SECONDS", NULL, 0,
        "before a restart, wait up to this long for the node's GPU memory (NVML) to fall to "
        "--gpu-memory-tolerance, then name what holds it and restart anyway (0: do not wait)",
        NULL},
    [CFG_GPU_MEMORY_TOLERANCE] = {"gpu-memory-tolerance", 0, CFG_T_SIZE,
        OFF(gpu_memory_tolerance), 0, 1L << 50, NULL, "512M", "SIZE", NULL, 0,
        "GPU memory (all GPUs together) that may still be in use when a restart starts", NULL},
    [CFG_HEALTH_CHECK_INTERVAL] = {"health-check-interval", 0, CFG_T_DUR,
        OFF(health_check_interval_ms), 0, 0, NULL, "5", "SECONDS", NULL, 0,
        "while workers run, check the GPUs (NVML: a critical Xid, a GPU lost, new uncorrectable "
        "ECC errors, retired pages pending) and NCCL's links (the NCCL_IB_HCA ports still "
        "ACTIVE, the NCCL_SOCKET_IFNAME interface still up) this often; a bad one is this node's "
        "failure, and under --nnodes MIN:MAX the node leaves the job (0: off)", NULL},
    [CFG_FILE_TIMER] = {"file-timer", 0, CFG_T_BOOL, OFF(file_timer), 0, 0, NULL, "0", NULL,
        "TORCHELASTIC_ENABLE_FILE_TIMER", CFG_F_NO_FLAG,
        "serve torch's file-based timers (torch.distributed.elastic.timer.expires): an expired "
        "timer's worker gets the signal it asked for and has failed", NULL},
    [CFG_TIMER_FILE] = {"timer-file", 0, CFG_T_OPTSTR, OFF(timer_file), 0, 0, NULL, NULL, "PATH",
        "TORCHELASTIC_TIMER_FILE", CFG_F_NO_FLAG,
        "the timers' FIFO, given to workers as TORCHELASTIC_TIMER_FILE (default: in the run "
        "directory)", NULL},
    [CFG_DEBUG] = {"debug", 0, CFG_T_BOOL, OFF(debug), 0, 0, NULL, "0", NULL, NULL, 0,
        "log the agent's state changes and every rendezvous line", NULL},
    [CFG_HEALTH_PORT] = {"health-port", 0, CFG_T_OPTPORT, OFF(health_port), 0, 0, NULL, "off",
        "PORT", NULL, 0,
        "serve GET /healthz (200, or 503 and why) and /metrics (Prometheus) on this port "
        "(0: a free one)", NULL},
    [CFG_LOG_FORMAT] = {"log-format", 0, CFG_T_CHOICE, OFF(log_format), 0, 0, log_formats,
        "human", "human|json", NULL, 0,
        "podrun's own lines (not the workers'): for people, or one JSON object per line",
        "use 'human' or 'json'"},
    [CFG_TRAINJOB_URL] = {"trainjob-server-url", 0, CFG_T_OPTSTR, OFF(trainjob_url), 0, 0, NULL,
        NULL, "URL", "KUBEFLOW_TRAINER_SERVER_URL", CFG_F_NO_FLAG,
        "Kubeflow Trainer's status server (set by its controller): node rank 0 reports the job's "
        "state there, into the TrainJob's status.trainerStatus", NULL},
    [CFG_TRAINJOB_CA] = {"trainjob-server-ca-cert", 0, CFG_T_OPTSTR, OFF(trainjob_ca), 0, 0,
        NULL, NULL, "FILE", "KUBEFLOW_TRAINER_SERVER_CA_CERT", CFG_F_NO_FLAG,
        "the CA that signs the status server's certificate (read at every report)", NULL},
    [CFG_TRAINJOB_TOKEN] = {"trainjob-server-token", 0, CFG_T_OPTSTR, OFF(trainjob_token), 0, 0,
        NULL, NULL, "FILE", "KUBEFLOW_TRAINER_SERVER_TOKEN", CFG_F_NO_FLAG,
        "the projected token the status server checks (read at every report: it rotates)", NULL},
    [CFG_TRAINJOB_INTERVAL] = {"trainjob-status-interval", 0, CFG_T_DUR,
        OFF(trainjob_interval_ms), 0, 0, NULL, "5", "SECONDS", NULL, 0,
        "under Kubeflow Trainer (KUBEFLOW_TRAINER_SERVER_URL), report the job's state to its "
        "TrainJob at most this often, and the trainer's progress this often while it changes "
        "(0: do not report, e.g. when the trainer reports itself)", NULL},
    [CFG_EXIT_CODE_PEER_FAILURE] = {"exit-code-peer-failure", 0, CFG_T_INT,
        OFF(exit_code_peer_failure), 1, 255, NULL, "170", "CODE", NULL, 0,
        "exit code when a worker on another node failed", NULL},
    [CFG_EXIT_CODE_PEER_LOST] = {"exit-code-peer-lost", 0, CFG_T_INT, OFF(exit_code_peer_lost), 1,
        255, NULL, "171", "CODE", NULL, 0,
        "exit code when another node was lost, left or went silent", NULL},
    [CFG_EXIT_CODE_STORE_LOST] = {"exit-code-store-lost", 0, CFG_T_INT,
        OFF(exit_code_store_lost), 1, 255, NULL, "172", "CODE", NULL, 0,
        "exit code when the job store host was lost", NULL},
    [CFG_EXIT_CODE_RDZV_TIMEOUT] = {"exit-code-rdzv-timeout", 0, CFG_T_INT,
        OFF(exit_code_rdzv_timeout), 1, 255, NULL, "173", "CODE", NULL, 0,
        "exit code when the rendezvous timed out (join_timeout)", NULL},
    [CFG_EXIT_CODE_HANG] = {"exit-code-hang", 0, CFG_T_INT, OFF(exit_code_hang), 1, 255, NULL,
        "174", "CODE", NULL, 0, "exit code when this node's worker hung (--hang-timeout) or its torch "
        "timer expired", NULL},
    [CFG_FATAL_EXIT_CODES] = {"fatal-exit-codes", 0, CFG_T_CODES, OFF(fatal_exit_codes), 0, 0,
        NULL, NULL, "CODES", NULL, 0,
        "a worker exiting with one of these (3,42,64-78; 128+N for signal N) stops the job on "
        "every node without a restart, each exiting --exit-code-fatal", NULL},
    [CFG_EXIT_CODE_FATAL] = {"exit-code-fatal", 0, CFG_T_INT, OFF(exit_code_fatal), 1, 255, NULL,
        "93", "CODE", NULL, 0,
        "every node's exit code when a worker exited with a --fatal-exit-codes code or asked "
        "not to be retried (PODRUN_CONTROL_FILE), or restarts made no progress "
        "(--max-no-progress-restarts): do not retry", NULL},
    [CFG_PROGRESS_FILE] = {"progress-file", 0, CFG_T_OPTSTR, OFF(progress_file), 0, 0, NULL,
        NULL, "PATH", NULL, 0,
        "a file whose content is the trainer's step or checkpoint iteration (a number), given "
        "to workers as PODRUN_PROGRESS_FILE; read before each join", NULL},
    [CFG_MAX_NO_PROGRESS] = {"max-no-progress-restarts", 0, CFG_T_INT, OFF(max_no_progress), 0,
        1 << 20, NULL, "0", "K", NULL, 0,
        "once K attempts in a row ended in a restart without the --progress-file value rising, "
        "every node stops without a restart and exits --exit-code-fatal (0: off)", NULL},
    [CFG_EXIT_CODE_PREFLIGHT] = {"exit-code-preflight", 0, CFG_T_INT, OFF(exit_code_preflight),
        1, 255, NULL, "175", "CODE", NULL, 0,
        "exit code when the preflight check stops the job or excludes this node, this node "
        "fails its --health-check-interval check, or the job leaves it out as a bad node "
        "(--max-node-failures)", NULL},
    [CFG_SYSROOT] = {"sysroot", 0, CFG_T_OPTSTR, OFF(sysroot), 0, 0, NULL, NULL, "DIR", NULL, 0,
        "read /proc, /sys and /dev under DIR (a copy of another machine's tree, or a test's)",
        NULL},
    [CFG_VISIBLE_DEVICES] = {"visible-devices", 0, CFG_T_CHOICE, OFF(visible_devices), 0, 0,
        visibles, "all", "all|per-rank", NULL, 0,
        "GPUs each worker sees: all (LOCAL_RANK picks one, as torchrun) or per-rank "
        "(CUDA_VISIBLE_DEVICES of its own GPU, by UUID)", "use 'all' or 'per-rank'"},
    [CFG_VIRTUAL_LOCAL_RANK] = {"virtual-local-rank", 0, CFG_T_BOOL, OFF(virtual_local_rank), 0,
        0, NULL, "0", NULL, NULL, 0,
        "torch 2.x: each worker sees only its own GPU, as device 0, with LOCAL_RANK=0", NULL},
    [CFG_NUMA_BINDING] = {"numa-binding", 0, CFG_T_CHOICE, OFF(numa_binding), 0, 0, numas,
        "none", "MODE", NULL, 0,
        "bind each worker to CPUs: node, socket, exclusive, core-complex (torch 2.9's: near its "
        "GPU), cores (DeepSpeed's --bind_cores_to_rank: the core list split by local rank), none",
        "use 'none', 'node', 'socket', 'exclusive', 'core-complex' or 'cores'"},
    [CFG_BIND_CORE_LIST] = {"bind-core-list", 0, CFG_T_OPTSTR, OFF(bind_core_list), 0, 0, NULL,
        NULL, "LIST", NULL, 0,
        "the CPUs --numa-binding cores splits (DeepSpeed's --bind_core_list, e.g. 0-9,12-21); "
        "implies cores", NULL},
    [CFG_PREFLIGHT] = {"preflight", 0, CFG_T_CHOICE, OFF(preflight), 0, 0, preflights, "off",
        "off|tcp|nccl", NULL, 0,
        "check the nodes after the rendezvous, before the workers start: tcp (latency and "
        "throughput between agents) or nccl (an all_reduce on every GPU)",
        "use 'off', 'tcp' or 'nccl'"},
    [CFG_PREFLIGHT_POLICY] = {"preflight-policy", 0, CFG_T_CHOICE, OFF(preflight_policy), 0, 0,
        policies, "warn", "warn|fail|exclude", NULL, 0,
        "on a bad node: warn and start, fail the job, or exclude the node when --nnodes MIN:MAX "
        "allows", "use 'warn', 'fail' or 'exclude'"},
    [CFG_PREFLIGHT_TIMEOUT] = {"preflight-timeout", 0, CFG_T_DUR, OFF(preflight_timeout_ms), 0,
        0, NULL, "60", "SECONDS", NULL, 0,
        "bound on each step of the preflight check (a link test, an NCCL init)", NULL},
    [CFG_PREFLIGHT_TCP_BYTES] = {"preflight-tcp-bytes", 0, CFG_T_SIZE,
        OFF(preflight_tcp_bytes), 1, 1L << 40, NULL, "16M", "SIZE", NULL, 0,
        "bytes sent each way on each link by the tcp check", NULL},
    [CFG_PREFLIGHT_NCCL_BYTES] = {"preflight-nccl-bytes", 0, CFG_T_SIZE,
        OFF(preflight_nccl_bytes), 4, 1L << 40, NULL, "64M", "SIZE", NULL, 0,
        "all_reduce buffer per GPU for the nccl check", NULL},
    [CFG_PREFLIGHT_MAX_RTT] = {"preflight-max-rtt", 0, CFG_T_DUR, OFF(preflight_max_rtt_ms), 0,
        0, NULL, "10ms", "SECONDS", NULL, 0,
        "a link whose round trip takes longer is slow (0: no bound)", NULL},
    [CFG_PREFLIGHT_MIN_BANDWIDTH] = {"preflight-min-bandwidth", 0, CFG_T_INT,
        OFF(preflight_min_bandwidth), 0, 100000000, NULL, "0", "MB/S", NULL, 0,
        "a link (tcp) or node (nccl bus bandwidth) below this many MB/s is slow (0: no bound)",
        NULL},
    [CFG_PREFLIGHT_SLOW_PERCENT] = {"preflight-slow-percent", 0, CFG_T_INT,
        OFF(preflight_slow_percent), 0, 100, NULL, "25", "N", NULL, 0,
        "a link or node below N% of the median bandwidth is slow (0: no bound)", NULL},
    [CFG_PREFLIGHT_NCCL_LIB] = {"preflight-nccl-lib", 0, CFG_T_OPTSTR, OFF(preflight_nccl_lib),
        0, 0, NULL, NULL, "PATH", NULL, 0,
        "the NCCL library the nccl check loads (default libnccl.so.2 on the library path)", NULL},
    [CFG_PREFLIGHT_CUDART_LIB] = {"preflight-cudart-lib", 0, CFG_T_OPTSTR,
        OFF(preflight_cudart_lib), 0, 0, NULL, NULL, "PATH", NULL, 0,
        "the CUDA runtime the nccl check loads (default the newest libcudart.so.N found)", NULL},
    [CFG_SIGNALS_TO_HANDLE] = {"signals-to-handle", 0, CFG_T_SIGNALS, OFF(signals_to_handle), 0,
        0, NULL, "SIGTERM,SIGINT", "SIG,...", NULL, 0,
        "signals that stop the job as SIGTERM does, each passed on to the workers (others of "
        "SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 are forwarded)", NULL},
    [CFG_DUP_STDOUT_FILTERS] = {"duplicate-stdout-filters", 0, CFG_T_OPTSTR,
        OFF(dup_filters[0]), 0, 0, NULL, NULL, "TEXT,...", NULL, 0,
        "also write console stdout lines holding any TEXT to filtered_stdout.log (',,' is a "
        "comma)", NULL},
    [CFG_DUP_STDERR_FILTERS] = {"duplicate-stderr-filters", 0, CFG_T_OPTSTR,
        OFF(dup_filters[1]), 0, 0, NULL, NULL, "TEXT,...", NULL, 0,
        "the same for stderr, into filtered_stderr.log", NULL},
    [CFG_LOGS_SPECS] = {"logs-specs", 0, CFG_T_CHOICE, OFF(logs_specs), 0, 0, logs_specs,
        "default", "NAME", NULL, 0,
        "torchrun's log layout: only 'default' (any other is a python entry point)",
        "podrun writes torchrun's default log layout and loads no python entry point; "
        "give --logs-specs default or leave it out"},
    [CFG_EVENT_LOG_HANDLER] = {"event-log-handler", 0, CFG_T_STR, OFF(event_log_handler), 0, 0,
        NULL, "null", "NAME", NULL, 0,
        "accepted for torchrun compatibility (podrun's events are its log lines)", NULL},
    [CFG_ACC_AUTO_LAUNCHER] = {"accelerate-auto-launcher", 0, CFG_T_BOOL, OFF(acc_auto_launcher),
        0, 0, NULL, "0", NULL, NULL, CFG_F_NO_ENV | CFG_F_NO_FLAG | CFG_F_ACCELERATE,
        "accelerate launch without --multi_gpu, --use_*, --cpu or a config file: one process "
        "(its simple launcher) unless this node has several GPUs", NULL},
    [CFG_WORKER_ENV] = {"worker-env", 0, CFG_T_CHOICE, OFF(worker_env), 0, 0, worker_envs,
        "torch", "torch|accelerate|paddle|deepspeed", NULL, 0,
        "whose environment the workers get (set by the front-end podrun is started as)",
        "use 'torch', 'accelerate', 'paddle' or 'deepspeed'"},
#define ACC_ROW(id, ty, nm, def) [CFG_ACC_##id] = {nm, 0, CFG_T_##ty,                           \
        OFF(acc[CFG_ACC_##id - CFG_ACC_CONFIG_FILE]), 0, 0, NULL, def, NULL, NULL, HIDDEN_ACC,  \
        NULL, NULL},
#define HIDDEN_ACC (CFG_F_NO_ENV | CFG_F_NO_FLAG | CFG_F_ACCELERATE)
    CFG_ACC_SETTINGS(ACC_ROW)
#undef HIDDEN_ACC
#undef ACC_ROW
#define PADDLE (CFG_F_NO_ENV | CFG_F_NO_FLAG | CFG_F_PADDLE)
    [CFG_PADDLE_LOG_DIR] = {"paddle-log-dir", 0, CFG_T_STR, OFF(paddle_log_dir), 0, 0, NULL,
        "log", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_LOG_OVERWRITE] = {"log-overwrite", 0, CFG_T_BOOL, OFF(paddle_log_overwrite), 0, 0,
        NULL, "0", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_LOG_LEVEL] = {"log-level", 0, CFG_T_STR, OFF(paddle_log_level), 0, 0, NULL,
        "INFO", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_DEVICES] = {"devices", 0, CFG_T_OPTSTR, OFF(paddle_devices), 0, 0, NULL, NULL,
        NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_IPS] = {"ips", 0, CFG_T_OPTSTR, OFF(paddle_ips), 0, 0, NULL, NULL, NULL, NULL,
        PADDLE, NULL, NULL},
    [CFG_PADDLE_START_PORT] = {"start-port", 0, CFG_T_INT, OFF(paddle_start_port), 1, 65535,
        NULL, "6070", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_RUN_MODE] = {"run-mode", 0, CFG_T_CHOICE, OFF(paddle_run_mode), 0, 0,
        paddle_modes, "collective", NULL, NULL, PADDLE, NULL,
        "use 'collective' or 'ps' (podrun does not run ps-heter, rpc or ipu jobs)"},
    [CFG_PADDLE_TRAINING_ROLE] = {"training-role", 0, CFG_T_CHOICE, OFF(paddle_training_role), 0,
        0, paddle_roles, "none", NULL, NULL, PADDLE, NULL, "use 'PSERVER' or 'TRAINER'"},
    [CFG_PADDLE_SERVER_NUM] = {"server-num", 0, CFG_T_INT, OFF(paddle_server_num), 0,
        CFG_MAX_NPROC, NULL, "0", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_TRAINER_NUM] = {"trainer-num", 0, CFG_T_INT, OFF(paddle_trainer_num), 0,
        CFG_MAX_NPROC, NULL, "0", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_SERVERS] = {"servers", 0, CFG_T_OPTSTR, OFF(paddle_servers), 0, 0, NULL, NULL,
        NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_TRAINERS] = {"trainers", 0, CFG_T_OPTSTR, OFF(paddle_trainers), 0, 0, NULL, NULL,
        NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_GLOO_PORT] = {"gloo-port", 0, CFG_T_INT, OFF(paddle_gloo_port), 1, 65535, NULL,
        "6767", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_WITH_GLOO] = {"with-gloo", 0, CFG_T_STR, OFF(paddle_with_gloo), 0, 0, NULL, "1",
        NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_MAX_RESTART] = {"max-restart", 0, CFG_T_INT, OFF(paddle_max_restart), 0, 1000000,
        NULL, "3", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_ELASTIC_LEVEL] = {"elastic-level", 0, CFG_T_INT, OFF(paddle_elastic_level), -1, 1,
        NULL, "-1", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_TRAINER_ID] = {"trainer-id", 0, CFG_T_INT, OFF(paddle_trainer_id), -1, 65535,
        NULL, "-1", NULL, NULL, PADDLE, NULL, NULL},
    [CFG_PADDLE_PSERVERS_GIVEN] = {"pod-pservers", 0, CFG_T_OPTSTR, OFF(paddle_pservers_given), 0,
        0, NULL, NULL, NULL, NULL, PADDLE, NULL, NULL},
#undef PADDLE
#define CONF_KEY (CFG_F_NO_ENV | CFG_F_NO_FLAG | CFG_F_CONF_KEY)
    [CFG_JOIN_TIMEOUT] = {"join_timeout", 0, CFG_T_DUR, OFF(join_timeout_ms), 0, 0, NULL, "600",
        NULL, NULL, CONF_KEY, NULL, NULL},
    [CFG_LAST_CALL_TIMEOUT] = {"last_call_timeout", 0, CFG_T_DUR, OFF(last_call_timeout_ms), 0,
        0, NULL, "30", NULL, NULL, CONF_KEY, NULL, NULL},
    [CFG_CLOSE_TIMEOUT] = {"close_timeout", 0, CFG_T_DUR, OFF(close_timeout_ms), 0, 0, NULL, "30",
        NULL, NULL, CONF_KEY, NULL, NULL},
    [CFG_KEEP_ALIVE_INTERVAL] = {"keep_alive_interval", 0, CFG_T_DUR, OFF(keep_alive_interval_ms),
        0, 0, NULL, "1", NULL, NULL, CONF_KEY, NULL, NULL},
    [CFG_KEEP_ALIVE_MAX_ATTEMPT] = {"keep_alive_max_attempt", 0, CFG_T_INT,
        OFF(keep_alive_max_attempt), 1, 1000, NULL, "3", NULL, NULL, CONF_KEY, NULL, NULL},
    [CFG_IS_HOST] = {"is_host", 0, CFG_T_TRISTATE, OFF(is_host), 0, 0, NULL, NULL, NULL, NULL,
        CONF_KEY, NULL, NULL},
    [CFG_READ_TIMEOUT] = {"read_timeout", 0, CFG_T_DUR, OFF(read_timeout_ms), 0, 0, NULL, "60",
        NULL, NULL, CONF_KEY, NULL, NULL},
    [CFG_STORE_TIMEOUT] = {"timeout", 0, CFG_T_DUR, OFF(store_timeout_ms), 0, 0, NULL, "900",
        NULL, NULL, CONF_KEY, NULL, NULL},
#undef CONF_KEY
    [CFG_PRINT_CONFIG] = {"print-config", 0, CFG_T_BOOL, OFF(print_config), 0, 0, NULL, "0", NULL,
        NULL, CFG_F_ACTION, "print every resolved value and where it came from, then exit",
        NULL},
    [CFG_HELP] = {"help", 'h', CFG_T_BOOL, OFF(help), 0, 0, NULL, "0", NULL, NULL,
        CFG_F_NO_ENV | CFG_F_ACTION, "print this help", NULL},
    [CFG_VERSION] = {"version", 0, CFG_T_BOOL, OFF(version), 0, 0, NULL, "0", NULL, NULL,
        CFG_F_NO_ENV | CFG_F_ACTION, "print the version", NULL},
};

int cfg_find_flag(const char *name, size_t len)
{
    for (int i = 0; i < CFG__COUNT; i++) {
        const char *o = cfg_settings[i].name;
        if (cfg_settings[i].flags & CFG_F_NO_FLAG || strlen(o) != len)
            continue;
        size_t k = 0;
        while (k < len && (name[k] == '_' ? '-' : name[k]) == o[k])
            k++;
        if (k == len)
            return i;
    }
    return -1;
}

int cfg_find_short(char c)
{
    for (int i = 0; i < CFG__COUNT; i++)
        if (cfg_settings[i].shortc && cfg_settings[i].shortc == c)
            return i;
    return -1;
}

void cfg_env_suffix(enum cfg_id id, char *buf, size_t len)
{
    const struct cfg_setting *s = &cfg_settings[id];
    size_t i = 0;
    if (len && !(s->flags & CFG_F_NO_ENV) && !s->env)
        for (; s->name[i] && i + 1 < len; i++)
            buf[i] = s->name[i] == '-' ? '_' : (char)toupper((unsigned char)s->name[i]);
    if (len)
        buf[i] = '\0';
}

void cfg_env_name(enum cfg_id id, char *buf, size_t len)
{
    const struct cfg_setting *s = &cfg_settings[id];
    char suffix[48];
    cfg_env_suffix(id, suffix, sizeof suffix);
    if (s->env)
        snprintf(buf, len, "%s", s->env);
    else if (suffix[0])
        snprintf(buf, len, "PODRUN_%s", suffix);
    else if (len)
        buf[0] = '\0';
}
