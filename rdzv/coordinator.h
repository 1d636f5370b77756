/* rdzv/coordinator.h — the rendezvous coordinator: a pure state machine, no I/O.
 *
 * It runs inside the agent that hosts the job store (protocol: rdzv/rendezvous.h). Inputs are the
 * store writes under "podrun/<run_id>/n/" seen by the server's observer, closes of the connections
 * that made them, and timer expiries, each with an explicit `now` (epoch seconds). Outputs are
 * actions, queued in order and drained with coord_next_action: keys to set (in-process, waking
 * remote WAITs), timers to arm or cancel, log lines, "delete the workers' keys", and "closed".
 * Work per input is O(1) except at a round's close (O(N log N)) and sweeps (O(N)); with whole
 * segments (segment_size > 1) a join in an open round also costs O(N log N), to count the nodes
 * that form whole segments.
 *
 * The records it reads and writes are rdzv/records.h; who gets which rank is rdzv/ranks.h. */
#ifndef PODRUN_RDZV_COORDINATOR_H
#define PODRUN_RDZV_COORDINATOR_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv/base/common.h"
#include "rdzv/records.h"
#include "rdzv/rendezvous.h"

/* ---- the coordinator ---- */

typedef struct coord_params {
    const char *run_id;
    int min_nodes, max_nodes, max_restarts;
    int max_node_failures;  /* a node with this many failures is left out where the job can do
                               without it (rdzv/badnodes.h); 0: only one that asked */
    const char *host_id;    /* the agent whose exit ends the job store (its 16 hex digits):
                               never left out; NULL: none (etcd) */
    int max_no_progress;    /* attempts in a row ending in a restart without progress that end
                               the job at the next close (rendezvous.h; 0: off) */
    int segment_size;       /* > 1: a round takes, per NVLink domain, a multiple of this many
                               nodes; the rest wait as spares (divides min and max nodes) */
    double join_timeout, last_call_timeout, close_timeout;
    double keep_alive_interval;
    int keep_alive_max_attempt;
    double progress_interval;
    double fence;           /* after a running member is lost while it may be alive (its
                               connection timed out, or it went silent), how long its ranks
                               stay fenced: the time it takes such a node to find itself cut
                               off and stop its workers; 0: no wait */
    const char *store_host; /* MASTER_ADDR/MASTER_PORT given to the workers */
    uint16_t store_port;
    const char *expected;   /* optional comma-separated node names */
} coord_params_t;

enum coord_timer {
    COORD_T_JOIN,      /* join_timeout of the open round */
    COORD_T_LAST_CALL, /* last call once MIN have joined */
    COORD_T_SWEEP,     /* heartbeat check, every keep_alive_interval */
    COORD_T_PROGRESS,  /* progress line while a round is open */
    COORD_T_CLOSE,     /* close_timeout while shutting down */
    COORD_T_DECIDE,    /* armed at `now` by the first failure of a round: reports that arrive
                          in the same pass of the loop are sorted in before the decision */
    COORD_T_FENCE,     /* the end of the fence of a lost member: a deferred close goes on */
    COORD_T_ASSIGN,    /* the running round's assignments, again after they could not be
                          written for lack of memory */
    COORD_T_COUNT
};

enum coord_action_kind {
    COORD_SET = 1,          /* set key (NUL-terminated) to val[0..vlen) */
    COORD_TIMER,            /* arm timer `timer` to fire at `at` (epoch s); at < 0: cancel */
    COORD_LOG,              /* a line for the log (in val) */
    COORD_DELETE_WORKERS,   /* delete every key not starting with key ("podrun/") */
    COORD_DELETE,           /* delete key: a record no agent can still need (rendezvous.h) */
    COORD_CLOSED,           /* shutting down and every agent has disconnected (or timed out) */
};

typedef struct coord_action {
    int kind;
    const char *key;  /* valid until the next input */
    const char *val;
    size_t vlen;
    int timer;
    double at;
} coord_action_t;

typedef struct coord coord_t;

/* Opens round 0 at `now` (queues the timers to arm). NULL on bad params or no memory. */
coord_t *coord_new(const coord_params_t *p, double now);
void coord_free(coord_t *c);

/* The observed prefix: "podrun/<run_id>/n/". */
const char *coord_observe_prefix(const coord_t *c);

void coord_on_write(coord_t *c, uint64_t conn, const char *key, size_t klen, const char *val,
                    size_t vlen, double now);
/* `why`: how the connection ended ("connection closed" when NULL), for the failure record. */
void coord_on_close(coord_t *c, uint64_t conn, const char *why, double now);
/* The same, for a backend whose agents are not connections: `why` is the failure's reason
 * ("agent lost: ..."). */
void coord_on_lost(coord_t *c, uint64_t conn, const char *why, double now);
void coord_on_timer(coord_t *c, int timer, double now);
/* The host is closing: COORD_CLOSED once every agent's connection is gone, or close_timeout. */
void coord_shutdown(coord_t *c, double now);

/* Pops the next action; 1 if one was popped, 0 if the queue is empty. Strings stay valid until
 * the next input call. */
int coord_next_action(coord_t *c, coord_action_t *a);

/* Introspection for logs and tests. */
typedef struct coord_info {
    int round;
    int phase;           /* COORD_OPEN, COORD_RUNNING, COORD_OVER */
    int joined;          /* in the open round */
    int members;         /* in the running round */
    int waiting;         /* joined while the job was full */
    int connected;       /* agents with an open connection */
    int restarts_used;
    int finished;        /* 1 when the job finished */
    const char *over_kind, *over_text; /* COORD_OVER: what later joiners are told ("" before) */
    int nodes;           /* nodes the coordinator keeps (it forgets those gone and closed) */
    const rdzv_badnode_t *bad; /* the nodes it remembers for their failures (badnodes.h) */
    int n_bad;
} coord_info_t;
enum { COORD_OPEN = 1, COORD_RUNNING, COORD_OVER };
void coord_info(const coord_t *c, coord_info_t *info);

/* ---- taking over a job another coordinator ran ----
 *
 * A backend where any agent may coordinate (etcd) keeps the job's state outside the coordinator
 * and, when the coordinating agent is gone, starts a new one where the old one left off. The
 * members' connection ids are their node ids (every later input for a member uses conn == id). */
typedef struct coord_member {
    const char *id;          /* 16 hex digits */
    rdzv_desc_rec_t d;
    int node_rank;
} coord_member_t;

typedef struct coord_resume {
    int round;
    int phase;               /* COORD_OPEN, COORD_RUNNING or COORD_OVER */
    int restarts_used;
    const coord_member_t *members; /* RUNNING: the round's members; OPEN: the last round's,
                                      expected back as after a restart decision */
    int n_members;
    const char *over_kind, *over_text; /* OVER: what every later joiner is told */
    const rdzv_badnode_t *bad;         /* the nodes remembered for their failures */
    int n_bad;
} coord_resume_t;

/* Puts a coordinator fresh from coord_new (before any other input) into round r->round in
 * r->phase with r->restarts_used restarts used; its actions replace coord_new's. What happened
 * meanwhile (joins, reports, members gone) is then fed as ordinary inputs. 0, -EINVAL (a bad
 * phase or id, or a coordinator that had input), or -ENOMEM. */
int coord_resume(coord_t *c, const coord_resume_t *r, double now);

/* The job's state for `podrun status` (rdzv/status.h) as of `now`: at most cap nodes, members
 * first in node-rank order; st->nodes points at `nodes`. */
struct rdzv_status;
struct rdzv_status_node;
int coord_state(const coord_t *c, double now, struct rdzv_status *st,
                struct rdzv_status_node *nodes, size_t cap);
/* Nodes dropped for silence (no record or heartbeat for the keep-alive window) so far. */
unsigned long coord_silent_nodes(const coord_t *c);

#endif
