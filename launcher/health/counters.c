/* launcher/health/counters.c — an agent's metrics as Prometheus text (counters.h). */
#include "launcher/health/counters.h"

#include <stdio.h>
#include <string.h>

#include "rdzv/store/wire.h"

const char *const health_exit_names[HEALTH_EXIT__COUNT] = {
    [HEALTH_EXIT_SUCCESS] = "success", [HEALTH_EXIT_CODE] = "exit_code",
    [HEALTH_EXIT_SIGNAL] = "signal",   [HEALTH_EXIT_HANG] = "hang",
    [HEALTH_EXIT_SPAWN] = "spawn",     [HEALTH_EXIT_STOPPED] = "stopped",
};

/* A rendezvous takes from milliseconds (a restart) to the minutes pods need to be scheduled. */
static const double rdzv_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                     2.5,   5,    10,    30,   60,  300,  600};
/* A failure reaches every agent in milliseconds; seconds mean a node was noticed by silence. */
static const double push_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25,  0.5,    1,     2.5,  5,     10};

#define N(a) ((int)(sizeof a / sizeof *a))

void health_counters_init(struct health_counters *c)
{
    memset(c, 0, sizeof *c);
    metrics_histogram_init(&c->rdzv_seconds, rdzv_bounds, N(rdzv_bounds));
    metrics_histogram_init(&c->push_seconds, push_bounds, N(push_bounds));
}

static void gauge(struct prom *p, const char *name, const char *help, double v)
{
    metrics_family(p, name, "gauge", help);
    metrics_sample(p, name, NULL, v);
}

static void counter(struct prom *p, const char *name, const char *help, double v)
{
    metrics_family(p, name, "counter", help);
    metrics_sample(p, name, NULL, v);
}

static const char *const states[] = {"init",     "rendezvous", "starting", "running",
                                     "stopping", "exiting",    "done"};

static void render_agent(const struct health_snapshot *s, const struct health_labels *l,
                         struct prom *p)
{
    metrics_family(p, "podrun_info", "gauge", "podrun's version and who this agent is");
    const char *info[] = {"version", l->version, "node", l->node, "run_id", l->run_id,
                          "role", l->role, NULL};
    metrics_sample(p, "podrun_info", info, 1);
    metrics_family(p, "podrun_agent_state", "gauge", "1 for the state the agent is in");
    for (size_t i = 0; i < sizeof states / sizeof *states; i++) {
        const char *lab[] = {"state", states[i], NULL};
        metrics_sample(p, "podrun_agent_state", lab, strcmp(states[i], s->state) == 0);
    }
    gauge(p, "podrun_healthy", "1 while /healthz answers 200", s->healthy);
    gauge(p, "podrun_workers", "workers this node runs in each attempt", s->workers);
    gauge(p, "podrun_workers_running", "workers running now", s->workers_running);
    if (s->round >= 0) {
        gauge(p, "podrun_rendezvous_round", "the round this node runs in", s->round);
        gauge(p, "podrun_node_rank", "this node's rank in the round", s->node_rank);
        gauge(p, "podrun_nodes", "nodes in the round", s->nnodes);
        gauge(p, "podrun_world_size", "workers in the job (WORLD_SIZE)", s->world_size);
        gauge(p, "podrun_restart_attempt", "TORCHELASTIC_RESTART_COUNT of this attempt",
              s->restart_count);
    }
    gauge(p, "podrun_restarts_used", "restarts of the job that counted against --max-restarts",
          s->restarts_used);
    gauge(p, "podrun_max_restarts", "--max-restarts: in-place restarts the job may use",
          s->max_restarts);
}

static void render_events(const struct health_counters *c, struct prom *p)
{
    static const char *const phase_names[RESTARTS__PHASES] = RESTARTS_PHASE_NAMES;
    counter(p, "podrun_rendezvous_rounds_total", "rounds this node was assigned in",
            (double)c->rounds);
    metrics_histogram_write(p, "podrun_rendezvous_duration_seconds",
                            "from a join (or rejoin) to this node's assignment", &c->rdzv_seconds);
    metrics_family(p, "podrun_restarts_total", "counter",
                   "in-place restarts of the job (counted: one of --max-restarts was used)");
    const char *yes[] = {"counted", "true", NULL}, *no[] = {"counted", "false", NULL};
    metrics_sample(p, "podrun_restarts_total", yes, (double)c->restarts_counted);
    metrics_sample(p, "podrun_restarts_total", no, (double)c->restarts_uncounted);
    metrics_family(p, "podrun_worker_exits_total", "counter", "this node's worker exits by cause");
    for (int i = 0; i < HEALTH_EXIT__COUNT; i++) {
        const char *lab[] = {"cause", health_exit_names[i], NULL};
        metrics_sample(p, "podrun_worker_exits_total", lab, (double)c->exits[i]);
    }
    metrics_histogram_write(p, "podrun_failure_push_seconds",
                            "from a failure (the failing node's clock) to this agent being told "
                            "to stop for it", &c->push_seconds);
    counter(p, "podrun_restart_records_total", "restarts this node recorded in restarts.jsonl",
            (double)c->restart_records);
    metrics_family(p, "podrun_restart_phase_seconds_total", "counter",
                   "seconds the phases of this node's restarts took, all restarts together");
    for (int i = 0; i < RESTARTS__PHASES; i++) {
        const char *lab[] = {"phase", phase_names[i], NULL};
        metrics_sample(p, "podrun_restart_phase_seconds_total", lab, c->restart_phase_sum[i]);
    }
    metrics_family(p, "podrun_restart_last_phase_seconds", "gauge",
                   "seconds each phase of this node's last restart took");
    for (int i = 0; i < RESTARTS__PHASES; i++) {
        const char *lab[] = {"phase", phase_names[i], NULL};
        metrics_sample(p, "podrun_restart_last_phase_seconds", lab, c->restart_phase_last[i]);
    }
}

/* The nodes the job remembers for their failures (rdzv/badnodes.h): none, no family. */
static void render_bad(const struct health_counters *c, struct prom *p)
{
    if (c->n_bad <= 0)
        return;
    metrics_family(p, "podrun_bad_node_failures", "gauge",
                   "failures of a node the job remembers: stops it caused and checks it failed");
    for (int i = 0; i < c->n_bad; i++) {
        const char *lab[] = {"node", c->bad[i].name, NULL};
        metrics_sample(p, "podrun_bad_node_failures", lab,
                       c->bad[i].caused + c->bad[i].checks);
    }
    metrics_family(p, "podrun_bad_node_left_out", "gauge",
                   "1 when the job left that node out of its later rounds");
    for (int i = 0; i < c->n_bad; i++) {
        const char *lab[] = {"node", c->bad[i].name, NULL};
        metrics_sample(p, "podrun_bad_node_left_out", lab, c->bad[i].out);
    }
}

static void render_rdzv(const struct health_snapshot *s, struct prom *p)
{
    const rdzv_stats_t *r = &s->rdzv;
    counter(p, "podrun_heartbeats_total", "heartbeats this agent sent to the job store",
            (double)r->heartbeats);
    counter(p, "podrun_heartbeat_misses_total",
            "keep-alive ticks on which the job store had been silent and was pinged",
            (double)r->heartbeat_misses);
    gauge(p, "podrun_store_hosted", "1 when this agent hosts the job store", r->hosting);
    if (!r->hosting)
        return;
    gauge(p, "podrun_store_connections", "open connections to the job store",
          (double)r->store_connections);
    counter(p, "podrun_store_connections_total", "connections the job store accepted",
            (double)r->store_accepted);
    metrics_family(p, "podrun_store_requests_total", "counter",
                   "requests the job store handled, by operation");
    for (int op = 0; op < WIRE_OP_COUNT && op < 32; op++) {
        const char *lab[] = {"op", wire_op_name((wire_op_t)op), NULL};
        metrics_sample(p, "podrun_store_requests_total", lab, (double)r->store_ops[op]);
    }
    gauge(p, "podrun_store_keys", "keys held by the job store", (double)r->store_keys);
    gauge(p, "podrun_store_bytes", "bytes of keys and values held by the job store",
          (double)r->store_bytes);
    counter(p, "podrun_rendezvous_silent_nodes_total",
            "nodes the coordinator dropped for missing heartbeats", (double)r->silent_nodes);
}

static void render_checks(const struct health_snapshot *s, struct prom *p)
{
    if (!s->check_on)
        return;
    gauge(p, "podrun_health_check_last_time_seconds",
          "when the GPUs and links were last checked (epoch s; 0: not yet)", s->check_time);
    gauge(p, "podrun_health_check_ok", "1 when the last check found the GPUs and links well",
          s->check_ok);
    counter(p, "podrun_health_checks_total", "checks of the GPUs and links", (double)s->checks);
    counter(p, "podrun_health_check_failures_total", "checks that found a GPU or link bad",
            (double)s->check_failures);
}

static void render_port(const struct httpd_stats *h, struct prom *p)
{
    metrics_family(p, "podrun_health_requests_total", "counter",
                   "answers of the health port, by status class");
    for (int k = 2; k <= 5; k++) {
        char code[8];
        snprintf(code, sizeof code, "%dxx", k);
        const char *lab[] = {"code", code, NULL};
        metrics_sample(p, "podrun_health_requests_total", lab, (double)h->answered[k]);
    }
    metrics_family(p, "podrun_health_refused_total", "counter",
                   "health port connections cut short: busy (too many open), bad (not HTTP or too "
                   "long), timeout (too slow)");
    const char *busy[] = {"reason", "busy", NULL}, *bad[] = {"reason", "bad", NULL},
               *slow[] = {"reason", "timeout", NULL};
    metrics_sample(p, "podrun_health_refused_total", busy, (double)h->busy);
    metrics_sample(p, "podrun_health_refused_total", bad, (double)h->bad);
    metrics_sample(p, "podrun_health_refused_total", slow, (double)h->timeouts);
}

void health_counters_render(const struct health_counters *c, const struct health_snapshot *s,
                            const struct health_labels *l, const struct httpd_stats *h,
                            struct prom *out)
{
    render_agent(s, l, out);
    render_events(c, out);
    render_bad(c, out);
    render_rdzv(s, out);
    render_checks(s, out);
    render_port(h, out);
}
