/* launcher/agent_k8s.c — --discovery k8s in the agent (agent.c): the watch of the job's pods
 * (discover/k8s_discover.h) until they are ready (DISCOVERED: the rendezvous starts with the
 * rank-0 pod as the job store's host); pods lost while the job runs, and the allow-list of
 * --store-allow job. */
#include <errno.h>
#include <stdio.h>

#include "launcher/agent_int.h"
#include "rdzv/base/common.h"

/* ---------- --discovery k8s ---------- */

/* The job's pods are Running and Ready: this pod is who the pods say (its name and IP, unless
 * --node-name/--local-addr say otherwise), and the rendezvous starts with the rank-0 pod as the
 * store host. */
static void on_k8s_ready(void *arg, const struct k8s_found *f)
{
    struct agent *a = arg;
    struct cfg *c = a->cfg;
    if (!agent_wants(a, AGENT_EV_DISCOVERED))
        return;
    a->k8s.found = true;
    a->k8s.rank = f->node_rank;
    snprintf(a->k8s.ip, sizeof a->k8s.ip, "%s", f->pod_ip);
    snprintf(a->k8s.host_ip, sizeof a->k8s.host_ip, "%s", f->host_ip);
    if (!c->node_name)
        snprintf(a->id.name, sizeof a->id.name, "%s", f->pod_name);
    if (!c->local_addr) {
        /* the pod's IP is the address this node advertises: Gloo and NCCL use its interface */
        snprintf(a->id.host, sizeof a->id.host, "%s", f->pod_ip);
        snprintf(a->nd->local_addr, sizeof a->nd->local_addr, "%s", f->pod_ip);
    }
    if (f->node_rank >= 0)
        logs_message(&a->logs, "kubernetes: the job's %d pods are ready; %s (%s) is node rank "
                     "%d, the job store is on %s (%s)", f->nnodes, f->pod_name, f->pod_ip,
                     f->node_rank, f->host_name, f->host_ip);
    else
        logs_message(&a->logs, "kubernetes: %d of the job's pods are ready; %s (%s) joins, the "
                     "job store is on %s (%s)", f->nnodes, f->pod_name, f->pod_ip, f->host_name,
                     f->host_ip);
    agent_post(a, AGENT_EV_DISCOVERED, NULL);
}

/* A pod of the job went away: that node is lost for the whole job now, not after the
 * heartbeat window. The rendezvous passes it on while a round runs (rdzv_agent_report_peer_lost);
 * at other times the node's own agent leaving, or its silence, says it. */
static void on_k8s_lost(void *arg, const char *name, const char *ip, const char *why)
{
    agent_post(arg, AGENT_EV_POD_LOST, &(struct agent_evd){.name = name, .ip = ip, .why = why});
}

/* Discovery gave up. Before the job started nothing can go on: usage errors (a selector or pod
 * that does not fit) exit 2, a wait past join_timeout with the rendezvous timeout code, the rest
 * (401/403 with the Role the service account needs) 1. Once the job runs it goes on without the
 * watch: a lost node is then noticed by its connection or its heartbeats. */
static void on_k8s_fatal(void *arg, int err, const char *line, int ready)
{
    struct agent *a = arg;
    if (ready) {
        logs_message(&a->logs, "%s; the job goes on without watching its pods", line);
        return;
    }
    if (!agent_wants(a, AGENT_EV_CANNOT_START))
        return;
    logs_message(&a->logs, "%s", line);
    agent_post(a, AGENT_EV_CANNOT_START, &(struct agent_evd){.err = err, .usage = err == -EINVAL,
                                                             .timeout = err == -ETIMEDOUT,
                                                             .said = true});
}

static void on_k8s_progress(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* The job's pods as they come and go: with --store-allow job, the sources the store accepts. */
static void on_k8s_addrs(void *arg, const char *const *ips, size_t n)
{
    struct agent *a = arg;
    if (guards_set_job_addrs(&a->guards, ips, n) < 0)
        logs_message(&a->logs, "out of memory for the job store's allow-list; it keeps the "
                               "pods it had");
}

/* The watch of the job's pods: this pod is the one the downward API names (identity_pod_name).
 * An error is said; -EINVAL is a usage error. */
int agent_k8s_start(struct agent *a)
{
    struct cfg *c = a->cfg;
    struct k8s_source src;
    k8s_source_from_env(&src);
    char hn[IDENTITY_NAME_MAX];
    const char *pod = identity_pod_name(hn, sizeof hn);
    struct k8s_discover_params p = {
        .src = &src, .selector = c->k8s_selector, .ns = c->k8s_namespace, .pod_name = pod,
        .order = (enum k8s_order)c->k8s_order, .min_nodes = c->nnodes_min,
        .max_nodes = c->nnodes_max, .timeout_ms = c->join_timeout_ms,
        .on_ready = on_k8s_ready, .on_lost = on_k8s_lost, .on_fatal = on_k8s_fatal,
        .on_addrs = on_k8s_addrs,
        .on_progress = on_k8s_progress, .arg = a,
    };
    char err[1024];
    int r = k8s_discover_start(a->loop, &p, &a->k8s.watch, err, sizeof err);
    if (r) {
        a->k8s.watch = NULL;
        logs_message(&a->logs, "%s", err);
    }
    return r;
}
