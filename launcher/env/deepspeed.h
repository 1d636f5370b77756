/* launcher/env/deepspeed.h — what the deepspeed launcher gives each worker and each host
 * (reference/launchers.md §1.3, §1.4), computed without I/O.
 *
 *  - world_info: launch.py's --world_info, the active hosts and their slot ids in node order, as
 *    Python's json.dumps text in URL-safe base64 (the head passes it to every host's agent).
 *  - The worker environment: torchrun's (env/torch.h), so init_process_group() from env works,
 *    plus DeepSpeed's CROSS_RANK, CROSS_SIZE, LOCAL_SIZE and CUDA_VISIBLE_DEVICES = the node's
 *    slot ids. LOCAL_RANK is the worker's index on its node, also where nodes have different slot
 *    counts (DeepSpeed's launch.py computes global_rank % num_local_procs, wrong there).
 *  - The worker's argv: `--local_rank=N` right after the script unless --no_local_rank.
 *  - .deepspeed_env files and the variables DeepSpeed exports to every host.
 *  - The head's command lines: the pdsh (or ssh) argv that starts one podrun agent per host, and
 *    the one that stops exactly those agents. */
#ifndef PODRUN_LAUNCHER_ENV_DEEPSPEED_H
#define PODRUN_LAUNCHER_ENV_DEEPSPEED_H

#include <stdbool.h>
#include <stddef.h>

#include "discover/hostfile.h"
#include "launcher/discover/resources.h"
#include "env/torch.h"

/* ---- world_info ---- */

/* The encoded text of `r` ({"h0": [0, 1], "h1": [0]} in URL-safe base64 with '=' padding) into
 * a malloc'd string. 0, -EILSEQ (a host name that is not UTF-8 text) or -ENOMEM. */
int ds_world_info_encode(const struct resources *r, char **out);

/* Decodes world_info (URL-safe or standard base64, padded or not, of a JSON object of host ->
 * list of slot ids) into r (hostfile order = the object's order). 0, or -EINVAL with one line in
 * err naming the input. The caller frees r with resources_free. */
int ds_world_info_decode(const char *text, struct resources *r, char *err,
                         size_t errlen);

/* "0,1,3" from a slot list. */
void ds_slots_format(const int *slots, size_t n, char *out, size_t cap);

/* ---- the worker ---- */

struct ds_worker {
    int cross_rank, cross_size;   /* node rank, node count */
    const char *devices;          /* CUDA_VISIBLE_DEVICES: the node's slot ids; NULL: unset */
};

/* The variables env_deepspeed_build sets besides torchrun's. */
extern const char *const env_deepspeed_vars[];
#define ENV_DEEPSPEED_NUM_VARS 4

/* torchrun's environment (env_torch_build, whose notes it returns) with DeepSpeed's variables:
 * CROSS_RANK, CROSS_SIZE, LOCAL_SIZE (= w->local_world_size) and CUDA_VISIBLE_DEVICES (when
 * d->devices is set; an inherited one is replaced: DeepSpeed's runner drops it). One
 * allocation: free(*out) frees all. */
int env_deepspeed_build(char *const *base, const struct env_worker *w, const struct ds_worker *d,
                        char ***out, struct env_notes *notes);

/* argv with "--local_rank=<local_rank>" inserted after argv[script] (the user's script or
 * module: DeepSpeed's place for it), into buf (at least 24 bytes) and *out (malloc'd array,
 * NULL-terminated, pointing into argv and buf). 0 or -ENOMEM / -EINVAL. */
int env_deepspeed_argv(char *const *argv, int script, int local_rank, char *buf, size_t cap,
                       char ***out);

/* ---- what goes to every host ---- */

/* Whether DeepSpeed exports the variable `name` to the other hosts: its name starts with NCCL,
 * PYTHON, UCX, MV2, MLFLOW or one of Nebula's and AzureML's names (runner.py's EXPORT_ENVS). */
bool ds_exported_name(const char *name);

/* One .deepspeed_env file's lines: KEY=VALUE, split at the first '=', key and value stripped.
 * Blank lines and lines starting with '#' are skipped (DeepSpeed crashes on them). Calls
 * add(arg, key, value) per line (key and value NUL-terminated copies valid during the call).
 * 0, or -EINVAL with one line in err naming the file and line. */
int ds_env_file_parse(const char *text, size_t len, const char *name,
                      int (*add)(void *arg, const char *key, const char *value), void *arg,
                      char *err, size_t errlen);

/* Splits a shell-like word list (launcher_args: spaces, '...', "...", backslash) into a
 * malloc'd NULL-terminated array of malloc'd words (ds_words_free). 0, -EINVAL (an unclosed
 * quote, one line in err) or -ENOMEM. */
int ds_words_split(const char *text, char ***out, int *count, char *err, size_t errlen);
void ds_words_free(char **words);

/* Whether pdsh's words (launcher_args) or PDSH_RCMD_TYPE pick the exec module: the "hosts" are
 * then commands run on this machine. */
bool ds_rcmd_is_exec(char *const *launcher_words, const char *pdsh_rcmd_type);

/* What the head starts on each host. */
struct ds_remote {
    const char *podrun;            /* the podrun binary, as each host runs it */
    const char *world_info;        /* encoded */
    const char *master_addr;
    int master_port;
    const char *run_id;            /* --rdzv-id: this job, and the name of its pid files */
    const char *pid_dir;           /* where each agent writes its pid */
    bool addr_is_host;             /* --local-addr=%h: every host is an address (exec mode) */
    bool name_is_host;             /* --node-name=%h */
    char *const *options;          /* the user's options the agents need (forwarded as given) */
    int noptions;
    char *const *program;          /* script and its args */
    int program_argc;
    char *const *exports;          /* "KEY=VALUE" to export on every host */
    int nexports;
    const char *cwd;
    const char *venv_script;       /* NULL: none */
};

/* The remote shell command (one string, for `sh -c` or ssh): [. VENV || exit 2;] export K='V'; ...
 * cd 'CWD'; 'PODRUN' deepspeed --world_info=... --node_rank=%n ... -- SCRIPT ARGS, every word
 * single-quoted and every '%' doubled except in pdsh's %n and %h (pdsh substitutes in every
 * argument). malloc'd into *out: 0 or -ENOMEM. */
int ds_remote_command(const struct ds_remote *r, char **out);

/* The command that stops this job's agent on a host: SIGTERM to the pid in its pid file (the
 * agent stops its own workers' process groups), nothing else on the host; the file is removed
 * with it, so that running the command again signals only agents that started since. */
int ds_stop_command(const struct ds_remote *r, char **out);

/* The pdsh argv: pdsh -S -f FANOUT -w HOSTS [launcher words] [sh -c] COMMAND. `hosts` is the
 * comma-joined list in node order (pdsh's %n is the index in it). exec mode runs the command
 * through `sh -c` on this machine. malloc'd NULL-terminated array pointing into the inputs and
 * into *fanout_buf (16 bytes). 0 or -ENOMEM. */
int ds_pdsh_argv(const char *hosts, int fanout, char *const *launcher_words, bool exec,
                 const char *command, char *fanout_buf, char ***out);

/* command with pdsh's %n, %h and %% done by hand for one host (the ssh fallback without pdsh):
 * malloc'd into *out. 0 or -ENOMEM. */
int ds_expand_host(const char *command, const char *host, int node_rank, char **out);

#endif
