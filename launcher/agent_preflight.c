/* launcher/agent_preflight.c — the preflight check (preflight/) in the agent (agent.c),
 * STARTING's step PREFLIGHT: handed what the nodes are after the rendezvous, then its verdict,
 * the same in every agent, read by --preflight-policy: the step is done (the workers start), the
 * node leaves the job (LEAVE), or it waits for the job to restart without the bad nodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/agent_int.h"
#include "rdzv/base/common.h"

/* ---------- the preflight check ---------- */

/* The check's lines, podrun's own. */
static void pf_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* A helper of the nccl check gets what local rank lr's worker would: the environment, the CPUs
 * and, as its CUDA device, lr, or 0 when the worker sees its own GPU only. */
static int pf_helper_env(void *arg, int lr, char ***envp, const cpu_set_t **cpus, int *mem_node,
                         int *device)
{
    struct agent *a = arg;
    const struct binding_rank *b = node_rank_binding(a->nd, lr);
    char visible[GPU_UUID_LEN];
    *cpus = b ? &b->cpus : NULL;
    *mem_node = b ? b->mem_node : -1;
    *device = node_rank_visible(a->nd, lr, visible, sizeof visible) ? 0 : lr;
    return agent_env_worker(a, lr, envp, NULL, NULL, 0, NULL);
}

/* The table, for every later termination log of this run (write_termlog adds it). */
static void pf_keep_report(struct agent *a, const struct pf_outcome *o)
{
    size_t cap = 1, used = 0;
    for (int i = 0; i < o->nlines; i++)
        cap += strlen(o->lines[i]) + 1;
    free(a->pf.report);
    if (!(a->pf.report = malloc(cap)))
        return;
    for (int i = 0; i < o->nlines; i++)
        used += (size_t)sprintf(a->pf.report + used, "%s\n", o->lines[i]);
    a->pf.report[used] = '\0';
}

/* This node leaves the job on the check's verdict. */
static void pf_leave(struct agent *a, const char *why)
{
    agent_post(a, AGENT_EV_LEAVE, &(struct agent_evd){.why = why});
}

/* The verdict, the same in every agent: print the table, then act by --preflight-policy. warn
 * starts the workers; fail makes every agent leave with --exit-code-preflight; exclude makes the
 * bad agents leave, and the others wait for the job to restart without them, when --nnodes
 * MIN:MAX still holds and the job store's host is not one of them (else it fails). */
static void on_preflight_done(void *arg, const struct pf_outcome *o)
{
    struct agent *a = arg;
    struct cfg *c = a->cfg;
    a->pf.check = NULL;
    if (!agent_wants(a, AGENT_EV_STEP_DONE))
        return;   /* the job moved on without the check: its verdict is news to nobody */
    static const char *const policies[] = {"warn", "fail", "exclude"};
    const char *policy = policies[c->preflight_policy];
    if (o->err) {
        logs_message(&a->logs, "preflight: the check did not finish: %s", o->why);
        if (c->preflight_policy == CFG_POLICY_WARN) {
            logs_message(&a->logs, "preflight: --preflight-policy warn: starting anyway");
            agent_post_step(a, AGENT_STEP_PREFLIGHT);
        } else {
            logs_message(&a->logs, "preflight: --preflight-policy %s: leaving the job", policy);
            pf_leave(a, "the preflight check did not finish");
        }
        return;
    }
    if (o->skipped) {
        if (c->debug)
            logs_message(&a->logs, "preflight: every node passed a check of this run; skipped");
        a->pf.passed = true;
        agent_post_step(a, AGENT_STEP_PREFLIGHT);
        return;
    }
    for (int i = 0; i < o->nlines; i++)
        logs_message(&a->logs, "%s", o->lines[i]);
    if (o->nbad == 0) {
        a->pf.passed = true;
        agent_post_step(a, AGENT_STEP_PREFLIGHT);
        return;
    }
    pf_keep_report(a, o);
    a->pf.passed = !o->self_bad;
    int left = o->nnodes - o->nbad;
    if (c->preflight_policy == CFG_POLICY_WARN) {
        logs_message(&a->logs, "preflight: %d bad node%s: %s; --preflight-policy warn: starting "
                     "anyway", o->nbad, o->nbad == 1 ? "" : "s", o->bad_summary);
        agent_post_step(a, AGENT_STEP_PREFLIGHT);
    } else if (c->preflight_policy == CFG_POLICY_EXCLUDE && left >= c->nnodes_min && left > 0 &&
               !o->host_bad) {
        if (o->self_bad) {
            logs_message(&a->logs, "preflight: this node is excluded from the job: %s; exit "
                         "code %d", o->self_reason, c->exit_code_preflight);
            pf_leave(a, "excluded by the preflight check");
        } else {
            logs_message(&a->logs, "preflight: excluding %d bad node%s (%s); the job restarts "
                         "with the other %d", o->nbad, o->nbad == 1 ? "" : "s", o->bad_summary,
                         left);
            /* STARTING with no worker: the job's stop decision comes when they leave */
        }
    } else {
        char why[160] = "";
        if (c->preflight_policy == CFG_POLICY_EXCLUDE)
            snprintf(why, sizeof why, " (cannot exclude: %s)",
                     o->host_bad ? "the node that hosts the job store is bad"
                                 : "--nnodes would drop below its minimum");
        logs_message(&a->logs, "preflight: %d bad node%s: %s; --preflight-policy %s%s: the job "
                     "stops; exit code %d", o->nbad, o->nbad == 1 ? "" : "s", o->bad_summary,
                     policy, why, c->exit_code_preflight);
        pf_leave(a, "the preflight check failed");
    }
}

/* The address the other agents reach this one at: --local-addr, else this node's address on the
 * interface towards the master, else its host name. */
static const char *pf_address(struct agent *a)
{
    if (a->cfg->local_addr)
        return a->cfg->local_addr;
    if (a->nd->nic_known && a->nd->nic.addr[0])
        return a->nd->nic.addr;
    return a->id.host;
}

/* Step PREFLIGHT: the check when it is asked for and there is something to check. */
void agent_preflight_run(struct agent *a)
{
    struct cfg *c = a->cfg;
    bool tcp = c->preflight == CFG_PREFLIGHT_TCP;
    if (c->preflight == CFG_PREFLIGHT_OFF || (tcp && a->rdzv.group_world_size < 2)) {
        agent_post_step(a, AGENT_STEP_PREFLIGHT);
        return;
    }
    struct pf_params p = {
        .loop = a->loop, .mode = tcp ? PF_MODE_TCP : PF_MODE_NCCL, .run_id = a->rdzv.run_id,
        .round = a->rdzv.round, .node_rank = a->rdzv.group_rank, .nnodes = a->rdzv.group_world_size,
        .nproc = a->n, .rank_base = a->rdzv.rank_base, .name = a->id.name, .addr = pf_address(a),
        .bind_addr = c->local_addr, .store_host = a->rdzv.master_addr,
        .store_port = (uint16_t)a->rdzv.master_port, .passed = a->pf.passed,
        /* the etcd backend's workers' store asks for no token */
        .token = a->guards.has_token && c->rdzv_backend != CFG_BACKEND_ETCD ? &a->guards.token
                                                                            : NULL,
        .hosts_store = a->rdzv.is_host, .timeout_ms = c->preflight_timeout_ms,
        .tcp_bytes = c->preflight_tcp_bytes, .nccl_bytes = c->preflight_nccl_bytes,
        .bounds = {.max_rtt = c->preflight_max_rtt_ms / 1e3,
                   .min_bw = c->preflight_min_bandwidth * 1e6,
                   .slow_percent = c->preflight_slow_percent},
        .exe = a->pf.exe, .nccl_lib = c->preflight_nccl_lib, .cudart_lib = c->preflight_cudart_lib,
        .python = c->python,
        .helper_env = pf_helper_env, .log = pf_say, .done = on_preflight_done, .arg = a,
    };
    int r = pf_start(&p, &a->pf.check);
    if (r) {
        a->pf.check = NULL;
        struct pf_outcome o = {.err = r};
        snprintf(o.why, sizeof o.why, "cannot start it: %s", podrun_strerror(r));
        on_preflight_done(a, &o);
    }
}
