/* launcher/health/counters.h — what an agent counts for /metrics, and the text it is served as.
 * Pure code: no I/O; the agent feeds the counters as things happen (health.h) and a snapshot of
 * its state comes with every scrape.
 *
 * The metrics (all prefixed podrun_):
 *   info{version,node,run_id,role}, agent_state{state}, healthy, workers, workers_running,
 *   node_rank, nodes, world_size, restart_count, rendezvous_round      gauges of now
 *   rendezvous_rounds_total, rendezvous_duration_seconds (histogram)  joins to assignments
 *   restarts_total{counted}                                           in-place restarts
 *   worker_exits_total{cause}                                         success, exit_code,
 *                                                                     signal, hang, spawn, stopped
 *   failure_push_seconds (histogram)      from a failure (the failing node's clock) to this agent
 *                                         being told to stop for it
 *   restart_records_total, restart_phase_seconds_total{phase},
 *   restart_last_phase_seconds{phase}     this node's restarts and how long each phase took
 *                                         (detect, stop, gpu_wait, rendezvous, spawn)
 *   heartbeats_total, heartbeat_misses_total                          this agent's, to the store
 *   store_hosted, store_connections, store_connections_total,
 *   store_requests_total{op}, store_keys, store_bytes,
 *   rendezvous_silent_nodes_total                                     the host's, 0 elsewhere
 *   health_requests_total{code}, health_refused_total{reason}         the health port's own
 *   health_check_last_time_seconds, health_check_ok, health_checks_total,
 *   health_check_failures_total           --health-check-interval's GPU and link checks
 *   bad_node_failures{node}, bad_node_left_out{node}   the nodes the job remembers for their
 *                                         failures (rdzv/badnodes.h), from its last decision */
#ifndef PODRUN_LAUNCHER_HEALTH_COUNTERS_H
#define PODRUN_LAUNCHER_HEALTH_COUNTERS_H

#include <stdint.h>

#include "launcher/health/port.h"
#include "launcher/health/metrics.h"
#include "launcher/output/restarts.h"
#include "rdzv/rendezvous.h"

enum health_exit {
    HEALTH_EXIT_SUCCESS,  /* exited 0 */
    HEALTH_EXIT_CODE,     /* exited non-zero on its own (126/127: could not be run) */
    HEALTH_EXIT_SIGNAL,   /* died of a signal it was not sent by podrun */
    HEALTH_EXIT_HANG,     /* stopped by podrun for --hang-timeout */
    HEALTH_EXIT_SPAWN,    /* could not be started */
    HEALTH_EXIT_STOPPED,  /* stopped by podrun (another failure, a restart, a signal) */
    HEALTH_EXIT__COUNT
};
extern const char *const health_exit_names[HEALTH_EXIT__COUNT];

struct health_counters {
    uint64_t rounds;
    struct prom_histogram rdzv_seconds;
    uint64_t restarts_counted, restarts_uncounted;
    uint64_t exits[HEALTH_EXIT__COUNT];
    struct prom_histogram push_seconds;
    int n_bad;                  /* the nodes the job remembers, as of its last stop decision */
    rdzv_badnode_t bad[RDZV_MAX_BAD_NODES];
    uint64_t restart_records;                     /* restarts recorded (restarts.h) */
    double restart_phase_sum[RESTARTS__PHASES];   /* seconds of each phase, all of them */
    double restart_phase_last[RESTARTS__PHASES];  /* ... of the last one */
};

void health_counters_init(struct health_counters *c);

/* The agent now: asked for on every scrape and probe. */
struct health_snapshot {
    const char *state;          /* init, rendezvous, starting, running, stopping, exiting, done */
    int healthy;                /* /healthz: 200, else 503 */
    char reason[512];           /* /healthz's one line */
    int workers, workers_running;
    int round, node_rank, nnodes, world_size, restart_count; /* -1 before the first round */
    int restarts_used, max_restarts;  /* counted restarts of the job so far, --max-restarts */
    rdzv_stats_t rdzv;          /* zeroes before the rendezvous started */
    /* --health-check-interval: the last check of the GPUs and links (check_on 0: off) */
    int check_on, check_ok;
    double check_time;          /* epoch s; 0: none yet */
    uint64_t checks, check_failures;
};

struct health_labels {
    const char *version, *node, *run_id, *role;
};

/* The whole /metrics text for counters c, snapshot s and the health port's own stats h. */
void health_counters_render(const struct health_counters *c, const struct health_snapshot *s,
                            const struct health_labels *l, const struct httpd_stats *h,
                            struct prom *out);

#endif
