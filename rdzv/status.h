/* rdzv/status.h — the job's state as the coordinator publishes it for `podrun status`: the round,
 * its nodes with their ranks, addresses and last heartbeat, the restarts used and the last stop's
 * root cause. Pure code: no I/O; the decoder takes any bytes.
 *
 * The host writes it under "podrun/<run_id>/state" every keep_alive_interval (and lists its run
 * ids under "podrun/runs"); on etcd the leader writes it under "podrun/<run_id>/view". So anyone who reaches the job store can read how the job is doing
 * without writing a byte. The text is "key=value" header lines (rdzv/records.h's escaping) and one
 * "node=" line per node with tab-separated fields, so a thousand-node job decodes in one pass.
 * A node whose agent reported its health check has a "health=" line right after its own
 * (state, interval, time of the last check, what it found): a reader that does not know the
 * line skips it, and a node without one reads as RDZV_HEALTH_NONE. */
#ifndef PODRUN_RDZV_STATUS_H
#define PODRUN_RDZV_STATUS_H

#include <stddef.h>

#include "rdzv/rendezvous.h"

#define RDZV_STATUS_KEY "state"       /* under "podrun/<run_id>/" */
/* the same record in etcd, whose "state" key is the leader's own (rdzv/etcd/state.h) */
#define RDZV_ETCD_STATUS_KEY "view"
#define RDZV_RUNS_KEY "podrun/runs"  /* the run ids this store hosts, one per line */

/* Where a node is in the job. */
enum rdzv_node_phase {
    RDZV_NODE_JOINED,   /* in the open round */
    RDZV_NODE_WAITING,  /* joined while the job was full */
    RDZV_NODE_MEMBER,   /* running in the current round */
    RDZV_NODE_DONE,     /* a member whose workers all exited 0 */
    RDZV_NODE_STOPPED,  /* member of the stopped round, expected back */
    RDZV_NODE__COUNT
};
extern const char *const rdzv_node_phase_names[RDZV_NODE__COUNT];

typedef struct rdzv_status_node {
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX];
    int phase;          /* enum rdzv_node_phase */
    int node_rank;      /* -1 unless a member */
    int rank_base;      /* -1 unless a member */
    int nproc;
    double last_seen;   /* epoch s of its last record or heartbeat (host clock) */
    /* its run-time health check (rendezvous.h rdzv_health_t; checked on the host clock) */
    rdzv_health_t health;
} rdzv_status_node_t;

/* The round's phase, as coordinator.h's. */
enum { RDZV_JOB_OPEN = 1, RDZV_JOB_RUNNING, RDZV_JOB_OVER };

typedef struct rdzv_status {
    char run_id[RDZV_NAME_MAX];
    double time;                /* when written (host clock, epoch s) */
    double started;             /* when the coordinator started */
    int round, phase;           /* RDZV_JOB_* */
    double round_since;         /* when the round opened or closed */
    char over[16];              /* phase OVER: "finished", "ended", "timeout", ... */
    char line[RDZV_LINE_MAX];   /* the open round's progress line, or how the job ended */
    int min_nodes, max_nodes;
    int world_size;             /* of the running round, 0 otherwise */
    int restarts_used, max_restarts;
    int failure_round;          /* round of the last stop that had a failure; -1: none */
    int failure_action;         /* RDZV_RESTART | RDZV_EXIT */
    rdzv_failure_t failure;     /* its root cause */
    int max_node_failures;      /* failures that make a node bad (badnodes.h) */
    int n_bad;                  /* the nodes the job remembers for their failures (badnodes.h) */
    rdzv_badnode_t bad[RDZV_MAX_BAD_NODES];
    int n_nodes;                /* nodes of the job in `nodes` */
    int n_total;                /* nodes the job has (more than n_nodes when cut) */
    rdzv_status_node_t *nodes;
} rdzv_status_t;

/* Encodes s into *out (malloc'ed, NUL-terminated); returns its length or -ENOMEM. Nodes beyond
 * what fits in max_len bytes are left out (n_total still counts them). */
long rdzv_status_encode(const rdzv_status_t *s, size_t max_len, char **out);
/* Decodes text into s, its nodes into nodes[0..cap) (the rest are counted in n_total only).
 * 0, or -EINVAL when the text is no state record (no run_id). */
int rdzv_status_decode(const char *text, size_t len, rdzv_status_t *s, rdzv_status_node_t *nodes,
                       size_t cap);

#endif
