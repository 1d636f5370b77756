/* launcher/agent_spawn.c — an attempt of the agent (agent.c): the environment derived from the
 * node once the master is known (the interface towards it, resolved on the loop), the
 * front-end's agreement on the job (jobenv.h), and the workers, each with its environment
 * (agent_env.c): STARTING's steps ENV, FRONTEND and SPAWN, each reporting STEP_DONE or
 * STEP_FAILED. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/agent_int.h"
#include "launcher/env/torch.h"
#include "rdzv/base/common.h"

/* ---------- an attempt ---------- */

/* This attempt's rank directories; where the log files are is said once when podrun chose it. */
static int prepare_attempt_dir(struct agent *a)
{
    int r = rundir_attempt(&a->dir, a->rdzv.run_id, a->rdzv.attempt);
    if (!r && a->dir.keep && !a->cfg->log_dir)
        logs_message(&a->logs, "worker log files are in %s", a->dir.attempt);
    for (int k = 0; !r && k < 2; k++) {
        if (a->filters.fd[k] >= 0)
            close(a->filters.fd[k]);
        a->filters.fd[k] = -1;
        if (!a->filters.n[k])
            continue;
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/filtered_std%s.log", a->dir.attempt, k ? "err" : "out");
        a->filters.fd[k] = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (a->filters.fd[k] < 0)
            logs_message(&a->logs, "cannot write %s: %s", p, strerror(errno));
        logs_set_filter(&a->logs, k + 1, a->filters.fd[k], a->filters.items[k], a->filters.n[k]);
    }
    return r;
}

/* The log file of one stream, or -1: none is wanted, or it cannot be written (said once). */
static int open_log_file(struct agent *a, int lr, int stream)
{
    char p[PATH_MAX + 32];
    int fd, r = rundir_log_file(&a->dir, lr, stream, &fd, p, sizeof p);
    if (r)
        logs_message(&a->logs, "cannot write %s: %s; that stream goes to the console only", p,
                     podrun_strerror(r));
    return fd;
}

/* The front-end's own log file of a stream (paddle's workerlog.N), or -1 (said once). */
static int jobenv_log(struct agent *a, int lr, int stream)
{
    char p[PATH_MAX + 32];
    int fd, r = jobenv_log_fd(&a->spawn.je, lr, stream, &fd, p, sizeof p);
    if (r)
        logs_message(&a->logs, "cannot write %s: %s; that stream goes to the console only", p,
                     podrun_strerror(r));
    return fd;
}

/* Starts this attempt's workers: per worker its streams (console, log files), its front-end's
 * environment (worker_env) with what podrun derived from the node (its own GPU under per-rank
 * visibility, LOCAL_RANK=0 under --virtual-local-rank), its CPUs (--numa-binding) and its
 * watchdog timer.
 * What was replaced in the inherited environment is said once, on the first attempt. */
static int spawn_all(struct agent *a)
{
    struct cfg *c = a->cfg;
    unsigned replaced = 0;
    for (int i = 0; i < a->n; i++) {
        char prefix[128];
        int rank = a->rdzv.rank_base + i;
        if (logs_expand_prefix(c->log_line_prefix, rank, i, c->role, prefix, sizeof prefix))
            snprintf(prefix, sizeof prefix, "[rank %d]:", rank);
        int cfd[2] = {-1, -1};
        for (int s = 0; s < 2; s++) {
            int bit = s + 1;
            bool console = c->console_rank[i] && !(c->redirect_mask[i] & bit);
            int ffd = open_log_file(a, i, bit);
            if (ffd < 0)
                ffd = jobenv_log(a, i, bit);
            logs_stream_forget(&a->streams[2 * i + s]);   /* the previous attempt's */
            int r = logs_stream_open(&a->logs, &a->streams[2 * i + s], bit, prefix, console, ffd,
                                     s == 1, &cfd[s]);
            if (r) {
                if (ffd >= 0)
                    close(ffd);
                if (cfd[0] >= 0)
                    close(cfd[0]);
                return r;
            }
        }
        char **env = NULL, **argv = NULL, lrank[32];
        unsigned notes = 0;
        int r = agent_env_worker(a, i, &env, &argv, lrank, sizeof lrank, &notes);
        if (!r && (r = jobenv_paddle_files(&a->spawn.je, i, &env))) {
            free(env);
            if (argv != a->argv)
                free(argv);
        }
        if (!r) {
            replaced |= notes;
            const struct binding_rank *b = node_rank_binding(a->nd, i);
            struct worker_spawn sp = {argv, env, cfd[0], cfd[1], b ? &b->cpus : NULL,
                                      b ? b->mem_node : -1};
            r = workers_spawn(&a->wg, i, &sp);
            free(env);
            if (argv != a->argv)
                free(argv);
        }
        close(cfd[0]);
        close(cfd[1]);
        if (r) {
            logs_message(&a->logs, "cannot start worker rank %d: %s", rank, podrun_strerror(r));
            return r;
        }
        watchdog_arm(&a->wd, i);
    }
    if (a->rdzv.attempt > 0)
        return 0;   /* said once is enough */
    if (replaced) {
        char names[512] = "";
        for (int i = 0; i < ENV_TORCH_NUM_VARS; i++)
            if (replaced & (1u << i))
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", env_torch_vars[i]);
        logs_message(&a->logs, "the inherited %s %s replaced by each worker's own value", names,
                     (replaced & (replaced - 1)) ? "are" : "is");
    }
    return 0;
}

/* The record of the restart that brings this attempt, before its workers start (they may read
 * it); a file that cannot be written is said, the counters move all the same. */
static void record_restart(struct agent *a)
{
    int r = restarts_spawning(&a->restarts, a->dir.attempt, a->rdzv.attempt, a->rdzv.round,
                              a->id.name);
    if (r)
        health_restart_recorded(a->health.port, a->restarts.last);
    if (r < 0)
        logs_message(&a->logs, "cannot write the restart's record to %s: %s", a->restarts.path,
                     podrun_strerror(r));
}

/* Step SPAWN: this attempt's workers; one that cannot be started is this node's failure. */
void agent_spawn_workers(struct agent *a)
{
    record_restart(a);
    int r = spawn_all(a);
    if (r)
        agent_post(a, AGENT_EV_STEP_FAILED,
                   &(struct agent_evd){.step = AGENT_STEP_SPAWN, .err = r});
    else
        agent_post_step(a, AGENT_STEP_SPAWN);
}

/* The front-end's agreement on the job (paddle's endpoints) is done. */
static void frontend_done(struct agent *a, int status, const char *why)
{
    if (status)
        agent_post(a, AGENT_EV_STEP_FAILED,
                   &(struct agent_evd){.step = AGENT_STEP_FRONTEND, .err = status, .why = why});
    else
        agent_post_step(a, AGENT_STEP_FRONTEND);
}

static void on_jobenv_ready(struct jobenv *je, int status, const char *why)
{
    frontend_done(je->data, status, why);
}

/* Step FRONTEND: this attempt's directories, then the front-end's agreement on what it needs
 * (jobenv.h). */
void agent_spawn_prepare(struct agent *a)
{
    int r = prepare_attempt_dir(a);
    if (r) {
        logs_message(&a->logs, "cannot create the run directory under %s: %s", a->dir.base,
                     podrun_strerror(r));
        agent_post(a, AGENT_EV_STEP_FAILED,
                   &(struct agent_evd){.step = AGENT_STEP_FRONTEND, .err = r});
        return;
    }
    rdzv_assignment_t as = {
        .round = a->rdzv.round, .node_rank = a->rdzv.group_rank, .nnodes = a->rdzv.group_world_size,
        .rank_base = a->rdzv.rank_base, .world_size = a->rdzv.world_size,
        .restart_count = a->rdzv.restart_count, .store_host = a->rdzv.master_addr,
        .store_port = (uint16_t)a->rdzv.master_port,
    };
    r = jobenv_prepare(&a->spawn.je, &as, a->n, a->dir.attempt, on_jobenv_ready, a);
    if (r == 1)
        return;   /* on_jobenv_ready reports */
    frontend_done(a, r < 0 ? r : 0, r < 0 ? "could not agree on the workers' endpoints" : NULL);
}

/* ---------- what every worker gets from the node ---------- */

/* node_summary's lines: "podrun sets ..." is said as it is, the others as podrun's own. */
static void say_line(void *arg, const char *text)
{
    struct agent *a = arg;
    if (strncmp(text, "podrun ", 7) != 0) {
        logs_message(&a->logs, "%s", text);
        return;
    }
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "%s\n", text);
    logs_write(&a->logs, 2, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void master_known(struct agent *a, const char *host, const char *why);

/* The master's address is known (or not): the interface towards it, and with it every variable
 * the workers get, is derived once and said once; then this attempt goes on. */
static void on_master_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct agent *a = req->data;
    char host[INET6_ADDRSTRLEN] = "", why[RDZV_NAME_MAX + 96];
    a->spawn.gai_pending = false;
    if (status == UV_EAI_CANCELED) {   /* the agent is exiting */
        uv_freeaddrinfo(res);
        return;
    }
    /* uv_ip4_name/uv_ip6_name rather than uv_ip_name: the one-file build links Debian 11's
     * libuv 1.40, older than uv_ip_name */
    if (status == 0 && res && res->ai_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)res->ai_addr, host, sizeof host);
    else if (status == 0 && res)
        uv_ip4_name((const struct sockaddr_in *)res->ai_addr, host, sizeof host);
    uv_freeaddrinfo(res);
    snprintf(why, sizeof why, "the master %s does not resolve here (%s)", a->rdzv.master_addr,
             status ? uv_strerror(status) : "no address");
    master_known(a, host[0] ? host : NULL, why);
}

static void master_known(struct agent *a, const char *host, const char *why)
{
    node_set_master(a->nd, host, why);
    free(a->spawn.derived);
    a->spawn.derived = NULL;
    if (node_worker_vars(a->nd, &a->spawn.derived))
        logs_message(&a->logs, "out of memory: the workers get no variable derived from the node");
    a->spawn.env_ready = true;
    node_summary(a->nd, say_line, a);
    agent_post_step(a, AGENT_STEP_ENV);
}

/* Step ENV: the interface towards the master is derived the first time the master is known,
 * which for a multi-node job is the first assignment. The name is resolved on the loop: a slow
 * DNS must not stall the job store this agent may host. */
void agent_spawn_derive_env(struct agent *a)
{
    if (a->spawn.env_ready) {
        agent_post_step(a, AGENT_STEP_ENV);
        return;
    }
    if (a->spawn.gai_pending)
        return;   /* its callback reports */
    unsigned char bin[sizeof(struct in6_addr)];
    if (!node_needs_master(a->nd) || uv_inet_pton(AF_INET, a->rdzv.master_addr, bin) == 0 ||
        uv_inet_pton(AF_INET6, a->rdzv.master_addr, bin) == 0) {
        /* a numeric address needs no lookup, and a lookup would start libuv's thread pool */
        master_known(a, a->rdzv.master_addr, NULL);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    a->spawn.gai.data = a;
    int r = uv_getaddrinfo(a->loop, &a->spawn.gai, on_master_resolved, a->rdzv.master_addr, NULL,
                           &hints);
    if (r == 0) {
        a->spawn.gai_pending = true;
        return;
    }
    a->spawn.gai_pending = true;   /* on_master_resolved clears it */
    on_master_resolved(&a->spawn.gai, r, NULL);
}
