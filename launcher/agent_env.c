/* launcher/agent_env.c — a worker's environment, as the spawn (agent_spawn.c) and the preflight
 * check's helpers (agent_preflight.c) give it: the front-end's variables for this attempt, what
 * podrun derived from the node, the files podrun watches (the timers' FIFO, the control file,
 * the progress file, the restart's record) and the arming for the stacks before a kill for a
 * hang. Data that the stages share, derived from what they filled in: no stage, no event. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/agent_int.h"
#include "launcher/env/deepspeed.h"
#include "launcher/env/environ.h"
#include "rdzv/base/common.h"

/* Local rank lr's environment armed for its stacks (agent_stacks.c): podrun's sitecustomize first on PYTHONPATH, the rank's raw
 * file and the trigger. *env is replaced (one allocation, as jobenv gives it). */
static int arm_stacks(struct agent *a, int lr, char ***env)
{
    struct agent_stacks *k = &a->stacks;
    if (k->t && !k->site[0] && !k->site_failed) {
        /* node and pid, as the timers' FIFO: agents in containers sharing --log-dir are PID 1 */
        int n = snprintf(k->site, sizeof k->site, "%s/.podrun_site.%s.%d", a->dir.base,
                         a->id.name, (int)getpid());
        int r = n < 0 || (size_t)n >= sizeof k->site ? -ENAMETOOLONG
                                                     : stacks_write_site(k->site);
        if (r) {
            logs_message(&a->logs, "cannot write %s/sitecustomize.py (%s); a hung worker is "
                         "killed without its Python stacks", k->site, podrun_strerror(r));
            k->site[0] = 0;
            k->site_failed = true;
        }
    }
    if (!k->site[0])
        return 0;
    char raw[PATH_MAX + 32], file[PATH_MAX + 64], sig[48];
    agent_rank_path(a, lr, "stacks.raw", raw, sizeof raw);
    unlink(raw);   /* an earlier run's (--log-dir) */
    /* the worker's own PYTHONPATH follows whole, however long */
    const char *had = env_get(*env, "PYTHONPATH");
    size_t cap = strlen(k->site) + (had ? strlen(had) : 0) + 16;
    char *pp = malloc(cap), **out;
    if (!pp)
        return -ENOMEM;
    snprintf(pp, cap, "PYTHONPATH=%s%s%s", k->site, had && *had ? ":" : "", had ? had : "");
    snprintf(file, sizeof file, "PODRUN_STACKS_FILE=%s", raw);
    snprintf(sig, sizeof sig, "PODRUN_STACKS_SIGNAL=%d", stacks_signal());
    char *set[] = {pp, file, sig};
    int r = env_edit(*env, NULL, set, 3, &out);
    free(pp);
    if (r)
        return r;
    free(*env);
    *env = out;
    return 0;
}

/* Local rank i's environment and argv: the front-end's launcher's variables for this attempt
 * (torchrun's unless --worker-env names another, jobenv.h), what podrun derived from the node
 * (its own GPU under per-rank visibility, LOCAL_RANK=0 under --virtual-local-rank), and for a
 * DeepSpeed job DeepSpeed's variables on top and --local_rank=N after the script (*argv then is
 * a new array, buf holding the word; argv NULL: the environment only). *replaced: the inherited
 * variables it replaces (env_notes). free(*env) frees it. */
int agent_env_worker(struct agent *a, int i, char ***env, char ***argv, char *buf, size_t cap,
                     unsigned *replaced)
{
    struct cfg *c = a->cfg;
    char errfile[PATH_MAX + 32], hbfile[PATH_MAX + 32], visible[GPU_UUID_LEN];
    int rank = a->rdzv.rank_base + i;
    /* what podrun derived, and the timers' FIFO (added only where the inherited environment
     * does not name it already, which then names this very FIFO) */
    char timer_var[PATH_MAX + 32], *derived[128];
    char progress_var[PATH_MAX + 32], attempt_var[PATH_MAX + 32], record_var[PATH_MAX + 32];
    size_t nd = 0;
    for (char **d = a->spawn.derived; d && *d && nd < 122; d++)
        derived[nd++] = *d;
    if (a->ts.fd >= 0) {
        snprintf(timer_var, sizeof timer_var, "TORCHELASTIC_TIMER_FILE=%s", a->ts.path);
        derived[nd++] = timer_var;
    }
    char control_var[PATH_MAX + 32];   /* where the worker may ask (workers/control.h) */
    int cl = snprintf(control_var, sizeof control_var, "%s=", CONTROL_ENV);
    agent_rank_path(a, i, CONTROL_FILE, control_var + cl, sizeof control_var - (size_t)cl);
    derived[nd++] = control_var;
    if (progress_env(&a->progress, progress_var, sizeof progress_var))
        derived[nd++] = progress_var;
    if (restarts_env(&a->restarts, a->rdzv.attempt, attempt_var, record_var, sizeof record_var)) {
        derived[nd++] = attempt_var;
        derived[nd++] = record_var;
    }
    derived[nd] = NULL;
    agent_rank_path(a, i, "error.json", errfile, sizeof errfile);
    agent_rank_path(a, i, "heartbeat", hbfile, sizeof hbfile);
    struct env_worker ew = {
        .local_rank = c->virtual_local_rank ? 0 : i, .rank = rank,
        .group_rank = a->rdzv.group_rank, .role_rank = rank,
        .local_world_size = a->n, .world_size = a->rdzv.world_size,
        .group_world_size = a->rdzv.group_world_size, .role_world_size = a->rdzv.world_size,
        .role_name = c->role, .master_addr = a->rdzv.master_addr,
        .master_port = a->rdzv.master_port,
        .restart_count = a->rdzv.restart_count, .max_restarts = c->max_restarts,
        .run_id = a->rdzv.run_id, .use_agent_store = true, .error_file = errfile,
        .heartbeat_file = c->hang_timeout_ms ? hbfile : NULL,
        .derived = derived,
        .cuda_visible_devices =
            node_rank_visible(a->nd, i, visible, sizeof visible) ? visible : NULL,
        .signals_to_handle = c->signals_to_handle,
    };
    struct env_notes notes = {0};
    if (argv)
        *argv = a->argv;
    int r = jobenv_worker_env(&a->spawn.je, i, &ew, env, &notes);
    if (!r && (r = arm_stacks(a, i, env)))
        free(*env);
    if (!r && argv && c->worker_env == CFG_WORKER_ENV_DEEPSPEED && !c->ds_no_local_rank) {
        int n = 0;
        while (a->argv[n])
            n++;
        r = env_deepspeed_argv(a->argv, n - c->program_argc, ew.local_rank, buf, cap, argv);
        if (r)
            free(*env);
    }
    if (replaced)
        *replaced = notes.replaced;
    return r;
}
