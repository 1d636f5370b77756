/* launcher/fanout_cmd.h — the deepspeed head's command lines (reference/launchers.md §1.4),
 * computed without I/O: the pdsh (or ssh) argv that starts one podrun agent per host, and the one
 * that stops exactly those agents. fanout.c runs them. */
#ifndef PODRUN_LAUNCHER_FANOUT_CMD_H
#define PODRUN_LAUNCHER_FANOUT_CMD_H

#include <stdbool.h>

/* Whether pdsh's words (launcher_args) or PDSH_RCMD_TYPE pick the exec module: the "hosts" are
 * then commands run on this machine. */
bool fanout_cmd_rcmd_is_exec(char *const *launcher_words, const char *pdsh_rcmd_type);

/* What the head starts on each host. */
struct fanout_cmd_agent {
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
    const char *venv_script;       /* NULL: none; a relative one is under cwd */
};

/* The remote shell command (one string, for `sh -c` or ssh): [. VENV || exit 2;] export K='V'; ...
 * cd 'CWD'; 'PODRUN' deepspeed --world_info=... --node_rank=%n ... -- SCRIPT ARGS, every word
 * single-quoted and every '%' doubled except in pdsh's %n and %h (pdsh substitutes in every
 * argument). malloc'd into *out: 0 or -ENOMEM. */
int fanout_cmd_start(const struct fanout_cmd_agent *r, char **out);

/* The command that stops this job's agent on a host: SIGTERM to the pid in its pid file (the
 * agent stops its own workers' process groups), nothing else on the host; the file is removed
 * with it, so that running the command again signals only agents that started since. */
int fanout_cmd_stop(const struct fanout_cmd_agent *r, char **out);

/* The pdsh argv: pdsh -S -f FANOUT -w HOSTS [launcher words] [sh -c] COMMAND. `hosts` is the
 * comma-joined list in node order (pdsh's %n is the index in it). exec mode runs the command
 * through `sh -c` on this machine. malloc'd NULL-terminated array pointing into the inputs and
 * into *fanout_buf (16 bytes). 0 or -ENOMEM. */
int fanout_cmd_pdsh_argv(const char *hosts, int fanout, char *const *launcher_words, bool exec,
                 const char *command, char *fanout_buf, char ***out);

/* command with pdsh's %n, %h and %% done by hand for one host (the ssh fallback without pdsh):
 * malloc'd into *out. 0 or -ENOMEM. */
int fanout_cmd_expand_host(const char *command, const char *host, int node_rank, char **out);

#endif
