/* launcher/frontends/torchrun.c — torchrun's words (torch/distributed/run.py; reference/torch.md
 * §2.1): every flag in both spellings (2.x accepts --dash and --underscore forms, 1.13 had the
 * underscore ones), torch 2.x's newer flags (but --numa-binding and --virtual-local-rank, which
 * are the device layer's), PET_<NAME> for every flag (argparse action=env), and the variables
 * its agent reads. podrun applies the PET_ rule to its own settings too, as it answers to every
 * PODRUN_<NAME>: doc/usage.md#usage promises both for every option. */
#include "launcher/frontends/frontend.h"

/* --numa-binding and --virtual-local-rank are torch 2.9/2.10's; podrun's own flags of the same
 * spelling take podrun's values, a superset (numa-binding also takes none and cores). */
static const struct fe_word flags[] = {
    {"--nnodes", CFG_NNODES, NULL},
    {"--nproc-per-node", CFG_NPROC_PER_NODE, NULL},
    {"--nproc_per_node", CFG_NPROC_PER_NODE, NULL},
    {"--rdzv-backend", CFG_RDZV_BACKEND, NULL},
    {"--rdzv_backend", CFG_RDZV_BACKEND, NULL},
    {"--rdzv-endpoint", CFG_RDZV_ENDPOINT, NULL},
    {"--rdzv_endpoint", CFG_RDZV_ENDPOINT, NULL},
    {"--rdzv-id", CFG_RDZV_ID, NULL},
    {"--rdzv_id", CFG_RDZV_ID, NULL},
    {"--rdzv-conf", CFG_RDZV_CONF, NULL},
    {"--rdzv_conf", CFG_RDZV_CONF, NULL},
    {"--standalone", CFG_STANDALONE, NULL},
    {"--max-restarts", CFG_MAX_RESTARTS, NULL},
    {"--max_restarts", CFG_MAX_RESTARTS, NULL},
    {"--monitor-interval", CFG_MONITOR_INTERVAL, NULL},
    {"--monitor_interval", CFG_MONITOR_INTERVAL, NULL},
    {"--start-method", CFG_START_METHOD, NULL},
    {"--start_method", CFG_START_METHOD, NULL},
    {"--role", CFG_ROLE, NULL},
    {"-m", CFG_MODULE, NULL},
    {"--module", CFG_MODULE, NULL},
    {"--no-python", CFG_NO_PYTHON, NULL},
    {"--no_python", CFG_NO_PYTHON, NULL},
    {"--run-path", CFG_RUN_PATH, NULL},
    {"--run_path", CFG_RUN_PATH, NULL},
    {"--log-dir", CFG_LOG_DIR, NULL},
    {"--log_dir", CFG_LOG_DIR, NULL},
    {"-r", CFG_REDIRECTS, NULL},
    {"--redirects", CFG_REDIRECTS, NULL},
    {"-t", CFG_TEE, NULL},
    {"--tee", CFG_TEE, NULL},
    {"--log-line-prefix-template", CFG_LOG_LINE_PREFIX, NULL},
    {"--log_line_prefix_template", CFG_LOG_LINE_PREFIX, NULL},
    {"--local-ranks-filter", CFG_LOCAL_RANKS_FILTER, NULL},
    {"--local_ranks_filter", CFG_LOCAL_RANKS_FILTER, NULL},
    {"--node-rank", CFG_NODE_RANK, NULL},
    {"--node_rank", CFG_NODE_RANK, NULL},
    {"--master-addr", CFG_MASTER_ADDR, NULL},
    {"--master_addr", CFG_MASTER_ADDR, NULL},
    {"--master-port", CFG_MASTER_PORT, NULL},
    {"--master_port", CFG_MASTER_PORT, NULL},
    {"--local-addr", CFG_LOCAL_ADDR, NULL},
    {"--local_addr", CFG_LOCAL_ADDR, NULL},
    {"--numa-binding", CFG_NUMA_BINDING, NULL},
    {"--numa_binding", CFG_NUMA_BINDING, NULL},
    {"--virtual-local-rank", CFG_VIRTUAL_LOCAL_RANK, NULL},
    {"--virtual_local_rank", CFG_VIRTUAL_LOCAL_RANK, NULL},
    /* torch 2.x (reference/resilience.md §3.3) */
    {"--signals-to-handle", CFG_SIGNALS_TO_HANDLE, NULL},
    {"--signals_to_handle", CFG_SIGNALS_TO_HANDLE, NULL},
    {"--shutdown-timeout", CFG_TERM_TIMEOUT, NULL},
    {"--shutdown_timeout", CFG_TERM_TIMEOUT, NULL},
    {"--duplicate-stdout-filters", CFG_DUP_STDOUT_FILTERS, NULL},
    {"--duplicate_stdout_filters", CFG_DUP_STDOUT_FILTERS, NULL},
    {"--duplicate-stderr-filters", CFG_DUP_STDERR_FILTERS, NULL},
    {"--duplicate_stderr_filters", CFG_DUP_STDERR_FILTERS, NULL},
    {"--logs-specs", CFG_LOGS_SPECS, NULL},
    {"--logs_specs", CFG_LOGS_SPECS, NULL},
    {"--event-log-handler", CFG_EVENT_LOG_HANDLER, NULL},
    {"--event_log_handler", CFG_EVENT_LOG_HANDLER, NULL},
};

/* Applied before the PET_ rule, so that PET_PYTHON, say, wins over PYTHON_EXEC; torch 2.x's
 * --shutdown-timeout falls back on TORCH_ELASTIC_SHUTDOWN_TIMEOUT, and its PET_ name is not
 * podrun's (term-timeout). */
static const struct fe_word env[] = {
    {"PYTHON_EXEC", CFG_PYTHON, NULL},
    {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", CFG_LOG_LINE_PREFIX, NULL},
    {"TORCHELASTIC_SIGNALS_TO_HANDLE", CFG_SIGNALS_TO_HANDLE, NULL},
    {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", CFG_TERM_TIMEOUT, NULL},
    {"PET_SHUTDOWN_TIMEOUT", CFG_TERM_TIMEOUT, NULL},
};

const struct vocab torchrun_vocab = {
    .name = "torchrun",
    .env_rank = CFG_SRC_PET,
    .env = env,
    .nenv = sizeof env / sizeof *env,
    .env_prefix = "PET_",
    .flags = flags,
    .nflags = sizeof flags / sizeof *flags,
};

const struct frontend fe_torchrun = {"torchrun", &torchrun_vocab, NULL, "torchrun", NULL, NULL};
