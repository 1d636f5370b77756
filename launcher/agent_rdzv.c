/* launcher/agent_rdzv.c — the rendezvous (rdzv/rendezvous.h) in the agent (agent.c): the config
 * as rendezvous parameters, the join, and the rendezvous' events (assigned, ending, stopped,
 * finished, lost), each posted to the hub, and its lines. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "launcher/agent_int.h"
#include "rdzv/base/common.h"
#include "rdzv/base/http.h"

/* ---------- the rendezvous' events ---------- */

/* The job gave this node its ranks for a round. */
static void on_assigned(void *arg, const rdzv_assignment_t *as)
{
    agent_post(arg, AGENT_EV_ASSIGNED, &(struct agent_evd){.as = as});
}

/* The job decided to stop the round: restart or exit. */
static void on_rdzv_stopped(void *arg, const rdzv_decision_t *d)
{
    agent_post(arg, AGENT_EV_STOPPED, &(struct agent_evd){.dec = d});
}

/* The round ended (the decision follows a round trip later): restart and exit both stop the
 * workers, and a finished round has none running, so they are stopped now. */
static void on_rdzv_ending(void *arg, int round)
{
    (void)round;
    agent_post(arg, AGENT_EV_ENDING, NULL);
}

/* This node is out of the job (store lost or silent, join timeout, rejected). */
static void on_rdzv_lost(void *arg, int err, const char *why)
{
    agent_post(arg, AGENT_EV_LOST, &(struct agent_evd){.err = err, .why = why});
}

static void on_rdzv_finished(void *arg)
{
    struct agent *a = arg;
    if (a->rdzv.round < 0 &&
        (a->cfg->nnodes_min < a->cfg->nnodes_max || a->cfg->segment_size > 1)) {
        /* an elastic job that did not need this node: a spare's end, not a failure (torch 2.x
         * exits such a node gracefully too); its operator must not count a failed pod. With
         * --segment-size a node outside the whole segments is such a spare too. */
        logs_message(&a->logs, "rendezvous '%s': the job finished without needing this node "
                     "(a spare of a %d:%d-node job); nothing ran here", a->rdzv.run_id,
                     a->cfg->nnodes_min, a->cfg->nnodes_max);
        agent_post(a, AGENT_EV_FINISHED, NULL);
        return;
    }
    if (a->rdzv.round < 0) {
        /* never assigned a round in a job of a fixed size: the job's success is not this
         * node's (torchrun's agent, too, fails on a closed rendezvous) */
        char why[RDZV_LINE_MAX];
        snprintf(why, sizeof why,
                 "rendezvous '%s': the job finished without this node, which ran no worker in "
                 "it: it came too late for the job, or another job uses the same --rdzv-id "
                 "(give every job its own)", a->rdzv.run_id);
        on_rdzv_lost(a, PODRUN_EENDED, why);
        return;
    }
    /* a backend that tells the end without an 'ending' first (etcd): the parameter servers still
     * run and are stopped now (with a round's 'ending' first, they were counted then) */
    agent_post(a, AGENT_EV_ENDING, NULL);
    if (a->services_alive > 0)
        logs_message(&a->logs, "every trainer of the job is done; stopping this node's %d "
                     "parameter server%s", a->services_alive, a->services_alive == 1 ? "" : "s");
    a->services_alive = 0;
    agent_post(a, AGENT_EV_FINISHED, NULL);
}

static void on_rdzv_progress(void *arg, const char *line)
{
    struct agent *a = arg;
    /* one node alone has nobody to wait for: its rendezvous is not news */
    if (a->cfg->nnodes_max > 1 || a->cfg->debug) {
        logs_message(&a->logs, "%s", line);
        snprintf(a->rdzv.last_progress, sizeof a->rdzv.last_progress, "%s", line);
    }
}

/* The job store this agent hosts speaks as `podrun store` does. */
static void on_store_log(void *arg, const char *line)
{
    struct agent *a = arg;
    if (a->logs.json) {
        logs_text(&a->logs, 2, "store", line, strlen(line));
        return;
    }
    char buf[RDZV_LINE_MAX + 32];
    int n = snprintf(buf, sizeof buf, "podrun store: %s\n", line);
    logs_write(&a->logs, 2, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* The progress file as it is now, for the next join; what is wrong with it is said once. */
void agent_rdzv_progress(struct agent *a)
{
    char err[PATH_MAX + 192];
    long long v = progress_read(&a->progress, err, sizeof err);
    if (err[0])
        logs_message(&a->logs, "%s", err);
    rdzv_agent_set_progress(a->rdzv.rz, v);
}

/* ---------- start ---------- */

/* Where the job store's port was given, as the user wrote it: "flag --main_process_port",
 * "config file c.yaml:main_process_port", or podrun's own flag for it. */
static const char *port_input(const struct cfg *c)
{
    static char buf[CFG_SRC_NAME_MAX + 32];
    const struct cfg_src *s = &c->src[CFG_RDZV_ENDPOINT];
    if (s->kind == CFG_SRC_DERIVED)
        s = &c->src[CFG_MASTER_PORT];
    if (s->kind == CFG_SRC_DEFAULT)
        return c->rdzv_backend == CFG_BACKEND_STATIC ? "--master-port" : "--rdzv-endpoint";
    cfg_src_describe(s, buf, sizeof buf);
    return buf;
}

/* The rendezvous parameters from the config (--standalone: a random id and a
 * free loopback port; who hosts: static node rank 0, c10d the endpoint's own node unless is_host
 * says), and the join. A store that cannot be hosted is said with the flag that picks its port. */
int agent_rdzv_start(struct agent *a)
{
    struct cfg *c = a->cfg;
    rdzv_params_t p;
    rdzv_params_default(&p);
    a->rdzv.run_id = c->rdzv_id;
    const char *endpoint = c->rdzv_host;
    int port = c->rdzv_port;
    const char *local = c->local_addr;
    if (c->standalone) {
        if (c->src[CFG_RDZV_ID].kind == CFG_SRC_DEFAULT) {
            podrun_random_id(a->rdzv.id_buf, 32);
            a->rdzv.run_id = a->rdzv.id_buf;
            if (a->logs.json)
                logs_set_json(&a->logs, a->id.name, a->rdzv.run_id);
        }
        endpoint = "127.0.0.1";   /* a free port on loopback, nobody else to reach it */
        port = 0;
        if (!local)
            local = "127.0.0.1";
    }
    /* --discovery k8s: the rank-0 pod hosts, unless an endpoint or a master address was given */
    bool k8s_ep = a->k8s.found && c->src[CFG_RDZV_ENDPOINT].kind == CFG_SRC_DERIVED &&
                  strcmp(c->src[CFG_RDZV_ENDPOINT].name, "--discovery k8s") == 0;
    int node_rank = c->node_rank;
    bool rank_given = c->src[CFG_NODE_RANK].kind != CFG_SRC_DEFAULT;
    if (a->k8s.found) {
        if (k8s_ep)
            endpoint = a->k8s.host_ip;
        if (!local)
            local = a->k8s.ip;
        if (!rank_given) {
            node_rank = a->k8s.rank;
            rank_given = node_rank >= 0;
        }
    }
    p.run_id = a->rdzv.run_id;
    p.endpoint_host = endpoint;
    p.endpoint_port = (uint16_t)port;
    if (k8s_ep && c->is_host < 0)
        p.is_host = strcmp(endpoint, local) == 0;
    else if (c->rdzv_backend == CFG_BACKEND_STATIC)
        p.is_host = node_rank == 0;
    else if (c->is_host >= 0)
        p.is_host = c->is_host;
    else if (c->standalone)
        p.is_host = 1;
    else
        p.is_host = rdzv_endpoint_is_local(endpoint, local) ? RDZV_HOST_INFERRED : 0;
    a->rdzv.is_host = p.is_host;
    p.min_nodes = c->nnodes_min;
    p.max_nodes = c->nnodes_max;
    p.want_rank = (c->rdzv_backend == CFG_BACKEND_STATIC && node_rank >= 0) || rank_given
                      ? node_rank
                      : -1;
    p.segment_size = c->segment_size;
    p.max_restarts = c->max_restarts;
    p.max_node_failures = c->max_node_failures;
    p.max_no_progress = c->max_no_progress;
    p.join_timeout = (double)c->join_timeout_ms / 1000.0;
    p.last_call_timeout = (double)c->last_call_timeout_ms / 1000.0;
    p.close_timeout = (double)c->close_timeout_ms / 1000.0;
    p.keep_alive_interval = (double)c->keep_alive_interval_ms / 1000.0;
    p.keep_alive_max_attempt = c->keep_alive_max_attempt;
    p.stop_grace = (double)c->term_timeout_ms / 1000.0;
    p.local_addr = local;
    char etcd_endpoints[300];
    if (c->rdzv_backend == CFG_BACKEND_ETCD) {
        /* etcd's members; this node's own store listens on --master-port when one is given */
        p.backend = "etcd";
        p.endpoints = c->rdzv_endpoints;
        if (!p.endpoints) {
            podrun_hostport_format(endpoint, port, etcd_endpoints, sizeof etcd_endpoints);
            p.endpoints = etcd_endpoints;
        }
        p.etcd_cacert = c->etcd_cacert;
        p.etcd_cert = c->etcd_cert;
        p.etcd_key = c->etcd_key;
        p.store_port = c->src[CFG_MASTER_PORT].kind != CFG_SRC_DEFAULT ? (uint16_t)c->master_port
                                                                        : 0;
        p.read_timeout = (double)c->read_timeout_ms / 1000.0;
        p.is_host = 0;
    }
    p.token = a->guards.has_token ? &a->guards.token : NULL;
    p.allow = a->guards.has_allow ? &a->guards.allow : NULL;
    rdzv_node_desc_t self = {a->id.name, local, a->n, jobenv_node_service(&a->spawn.je),
                             a->nd ? a->nd->gpus.fabric : NULL};
    rdzv_callbacks_t cb = {on_assigned,      on_rdzv_stopped, on_rdzv_finished, on_rdzv_lost,
                           on_rdzv_progress, on_rdzv_ending,  on_store_log};
    int r = rdzv_agent_start(a->loop, &p, &self, &cb, a, &a->rdzv.rz);
    if (!r)
        agent_rdzv_progress(a);   /* before the connection is up: the first join carries it */
    if (!r && p.is_host == RDZV_HOST_INFERRED) {
        rdzv_stats_t st;
        rdzv_agent_stats(a->rdzv.rz, &st);
        a->rdzv.is_host = st.hosting;   /* or it joined this run's store, which held the port */
    }
    if (r) {
        a->rdzv.rz = NULL;
        if (c->rdzv_backend == CFG_BACKEND_ETCD && r == -ELIBACC)
            logs_message(&a->logs, "cannot start the rendezvous on etcd at %s: %s", p.endpoints,
                         http_library_error());   /* no libcurl in this image: which package */
        else if (c->rdzv_backend == CFG_BACKEND_ETCD)
            logs_message(&a->logs, "cannot start the rendezvous on etcd at %s: %s%s", p.endpoints,
                         podrun_strerror(r),
                         p.store_port ? "; pick another --master-port for this node's store" : "");
        else if (p.is_host)
            logs_message(&a->logs, "cannot host the job store on %s:%d: %s; pick another port "
                         "(%s)", local ? local : "*", port, podrun_strerror(r), port_input(c));
        else
            logs_message(&a->logs, "cannot start the rendezvous with %s:%d: %s",
                         endpoint ? endpoint : "?", port, podrun_strerror(r));
    }
    return r;
}
