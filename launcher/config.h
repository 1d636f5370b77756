/* launcher/config.h — podrun's one configuration struct.
 *
 * Every value is filled in layers — built-in default < PODRUN_* / PET_* environment < command
 * line — and remembers which layer set it, so `podrun --print-config` can say where each value
 * came from. Front-ends for other launchers and operator environments fill the same struct
 * through cfg_set().
 *
 * Pure code: no I/O besides what the caller passes in (argv, envp, CPU/GPU counts). Every
 * function returns 0 or a negative errno and, on error, leaves one line in `err` naming the
 * input and the fix. */
#ifndef PODRUN_LAUNCHER_CONFIG_H
#define PODRUN_LAUNCHER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every settable value. The order is the order of --print-config and --help. */
enum cfg_id {
    CFG_NPROC_PER_NODE,
    CFG_NNODES,
    CFG_NODE_RANK,
    CFG_RDZV_BACKEND,
    CFG_RDZV_ENDPOINT,
    CFG_RDZV_ID,
    CFG_RDZV_CONF,
    CFG_STANDALONE,
    CFG_MASTER_ADDR,
    CFG_MASTER_PORT,
    CFG_LOCAL_ADDR,
    CFG_MAX_RESTARTS,
    CFG_MONITOR_INTERVAL,
    CFG_START_METHOD,
    CFG_ROLE,
    CFG_MODULE,
    CFG_NO_PYTHON,
    CFG_RUN_PATH,
    CFG_PYTHON,
    CFG_LOG_DIR,
    CFG_REDIRECTS,
    CFG_TEE,
    CFG_LOCAL_RANKS_FILTER,
    CFG_LOG_LINE_PREFIX,
    CFG_TERM_TIMEOUT,
    CFG_TERMINATION_LOG,
    CFG_HANG_TIMEOUT,
    CFG_EXIT_CODE_PEER_FAILURE,
    CFG_EXIT_CODE_PEER_LOST,
    CFG_EXIT_CODE_STORE_LOST,
    CFG_EXIT_CODE_RDZV_TIMEOUT,
    CFG_EXIT_CODE_HANG,
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

enum cfg_src_kind {
    CFG_SRC_DEFAULT = 0,
    CFG_SRC_OPERATOR,   /* a scheduler's environment (PyTorchJob, Volcano, SLURM, …) */
    CFG_SRC_ENV,        /* PODRUN_<NAME>, PET_<NAME> or a torch variable */
    CFG_SRC_FILE,       /* a config file */
    CFG_SRC_FLAG,       /* the command line */
    CFG_SRC_DERIVED,    /* computed from another value, named in `name` */
};

struct cfg_src {
    enum cfg_src_kind kind;
    char name[48];      /* env var, flag spelling or the value it was derived from */
};

enum cfg_nproc_kind { CFG_NPROC_NUMBER, CFG_NPROC_AUTO, CFG_NPROC_CPU, CFG_NPROC_GPU };
enum cfg_backend { CFG_BACKEND_STATIC, CFG_BACKEND_C10D };
enum cfg_start_method { CFG_START_SPAWN, CFG_START_FORK, CFG_START_FORKSERVER };

#define CFG_MAX_NPROC 1024          /* workers per node */
#define CFG_DEFAULT_C10D_PORT 29400

struct cfg {
    enum cfg_nproc_kind nproc_kind;
    int nproc_per_node;             /* resolved by cfg_finalize */
    int nnodes_min, nnodes_max;
    int node_rank;
    enum cfg_backend rdzv_backend;
    char *rdzv_host;                /* --rdzv-endpoint host; NULL: derived in cfg_finalize */
    int rdzv_port;                  /* 0: the backend's default, or a free port when given */
    bool rdzv_port_given;           /* the endpoint named a port (":0" = a free port) */
    char *rdzv_id;
    bool standalone;
    char *master_addr;
    int master_port;
    char *local_addr;               /* NULL: not given */
    int max_restarts;
    uint64_t monitor_interval_ms;
    enum cfg_start_method start_method;
    char *role;
    bool module, no_python, run_path;
    char *python;
    char *log_dir;                  /* NULL: not given */
    char *redirects, *tee;          /* specs as given ("3", "0:1,1:2"); expanded per local rank */
    char *local_ranks_filter;       /* "0,2" or NULL for all */
    char *log_line_prefix;          /* template with ${rank} ${local_rank} ${role_name} */
    uint64_t term_timeout_ms;
    char *termination_log;          /* NULL: /dev/termination-log when writable */
    uint64_t hang_timeout_ms;       /* 0: off */
    /* exit codes for the ways a node can be stopped by something other than its own worker's
     * exit status (README "Exit codes") */
    int exit_code_peer_failure;     /* a worker on another node failed */
    int exit_code_peer_lost;        /* another agent or node was lost, left or went silent */
    int exit_code_store_lost;       /* the job store host was lost */
    int exit_code_rdzv_timeout;     /* the rendezvous did not complete within join_timeout */
    int exit_code_hang;             /* this node's worker hung (--hang-timeout) */

    /* --rdzv-conf */
    uint64_t join_timeout_ms, last_call_timeout_ms, close_timeout_ms, keep_alive_interval_ms;
    int keep_alive_max_attempt;
    int is_host;                    /* -1: decide from the endpoint */
    uint64_t read_timeout_ms, store_timeout_ms;

    bool print_config, help, version;

    /* the program and its arguments (pointers into argv) */
    char **program;
    int program_argc;

    /* per local rank, filled by cfg_finalize: bit 1 stdout, bit 2 stderr */
    uint8_t *redirect_mask, *tee_mask;
    bool *console_rank;             /* shown on the console (--local-ranks-filter) */

    struct cfg_src src[CFG__COUNT];
};

/* Defaults only. */
void cfg_init(struct cfg *c);
void cfg_free(struct cfg *c);

/* Sets one value from text, as if given by `src` (error names src). */
int cfg_set(struct cfg *c, enum cfg_id id, const char *value, const struct cfg_src *src,
            char *err, size_t errlen);

/* The PODRUN_<NAME> / PET_<NAME> layer from an environment array (NULL-terminated). */
int cfg_load_env(struct cfg *c, char *const *envp, char *err, size_t errlen);

/* The command line: options up to the first non-option or "--", then the program and its
 * arguments. Stops early (returning 0) at --help or --version. */
int cfg_parse_args(struct cfg *c, int argc, char **argv, char *err, size_t errlen);

/* Resolves nproc (auto/cpu/gpu with the given counts), --standalone, the rendezvous endpoint,
 * the per-rank log masks, and checks values against each other. */
int cfg_finalize(struct cfg *c, int ncpus, int ngpus, char *err, size_t errlen);

/* One line per value: name, value, source. */
void cfg_print(const struct cfg *c, FILE *f);
void cfg_usage(FILE *f);

/* "--nproc-per-node" / "PODRUN_NPROC_PER_NODE" / "default" … for messages. */
void cfg_src_describe(const struct cfg_src *s, char *buf, size_t len);
const char *cfg_name(enum cfg_id id);

/* "25", "2.5", "500ms", "30s", "10m", "1h" (bare numbers are seconds) in milliseconds. */
int cfg_parse_duration(const char *s, uint64_t *ms);

#endif
