/* rdzv/rendezvous.h — multi-node rendezvous and job-wide failure propagation over the job store.
 *
 * This is the contract of every backend (rdzv/backend.h); the protocol below is the default
 * backend's, "store" (rdzv/backend_store.c). The "etcd" backend (rdzv/backend_etcd.c) keeps the
 * same contract — the same rounds, ranks, decisions, records and callbacks — with the job's
 * state in etcd instead of one agent's memory: the coordinator below runs in whichever agent
 * holds etcd's leader key, fed by etcd watches instead of the store's observer, and when that
 * agent is gone another one takes over from the state in etcd. Losing any one node is then an
 * ordinary lost node (a restart round), never a lost store; node rank 0 of each round hosts the
 * workers' store for that round. Its header says how.
 *
 * One agent per node calls rdzv_agent_start. Exactly one of them hosts: it runs the job store
 * server (which also serves the workers) and the coordinator (rdzv/coordinator.h), a pure state
 * machine that sees every rendezvous write in-process through the server's observer hook and
 * answers with in-process writes that wake the remote WAITs. Every other agent — and the host's
 * own agent, over loopback — is an ordinary store client, so the store stays a plain TCPStore.
 *
 * ## Protocol (P = "podrun/<run_id>/"; every other key belongs to the workers)
 *
 * Each agent has a random 64-bit id (16 hex digits, <id> below) and one connection. It waits
 * for a key with a WAIT and the GET of that key in one write; the store parks the GET behind the
 * WAIT and answers both in one write once the key exists (rdzv/store/server.c), while the agent's
 * SETs (join, heartbeats, reports) are applied the moment they arrive, also behind its WAIT.
 *
 *   key                      written by    value
 *   P n/<id>/join/<k>        agent (SET)   node descriptor: name, addr, host, nproc, want_rank, pid
 *   P n/<id>/assign/<k>      coordinator   assignment for the agent's k-th join, or an error
 *                                          ("timeout", "rejected", "ended", "finished" + text)
 *   P n/<id>/hb              agent (SET)   heartbeat every keep_alive_interval (no answer);
 *                                          value "" or, after a health check that found what
 *                                          the last one did, how long ago it ran ("ago=0.4")
 *   P n/<id>/health          agent (SET)   its health check's state when it changed
 *                                          (records.h: rdzv_health_encode)
 *   P n/<id>/fail/<R>        agent (SET)   failure record (first failure of its workers in round R)
 *   P n/<id>/done/<R>        agent (SET)   all of its workers of round R exited 0
 *   P n/<id>/leave           agent (SET)   the agent is going away (SIGTERM); value = reason
 *   P n/<id>/peer/<R>        agent (SET)   another node of round R is gone as this agent's
 *                                          discovery saw it (its pod deleted or Failed); value =
 *                                          that node's name and address and why
 *   P n/<id>/gather/<s>      agent (SET)   joins of its relay subtree after a restart, taken as
 *                                          those nodes' own (rdzv/relay.h)
 *   P r/<R>/go               coordinator   round R closed with every member in its place: the
 *                                          fed members' assignments are their last ones moved
 *                                          to R ("inplace"), or read from the store ("store")
 *   P r/<R>/end              coordinator   the end of round R: "finished", or the job-wide stop
 *                                          decision (action restart|exit, failure records sorted
 *                                          by time — [0] is the root cause —, next round, counts)
 *   P status                 coordinator   the current progress line of an open round
 *
 * Key lifetimes: the host's state does not grow with restarts, membership rounds or agents
 * coming and going. The keys agents write (join, hb, fail, done, leave) are records for the
 * coordinator alone: the host drops each one from the key space as soon as the coordinator has
 * read it. An agent's assign key goes when it joins again (it has read the answer or given up on
 * it) or its connection closes; the end record of round R goes when round R + RDZV_KEEP_ROUNDS
 * ends (the last 4 stay for debugging: by then every member of round R has joined a later round
 * or is gone). The coordinator forgets a node once it is gone and its connection closed. The
 * failures a decision carries are bounded by RDZV_MAX_FAILURES. So the key count is about one
 * per agent (its latest assign key) plus 4 end records, whatever the number of rounds.
 *
 * Messages per round are O(N): per agent one write of join SET + WAIT + GET and one answer with
 * the assignment; one WAIT + GET and one answer with the end record. On the host that is one
 * read and two writes per agent per round (plus one read per heartbeat). Nobody
 * compare-and-swaps a shared blob; each node's state lives in its own keys and only the
 * coordinator reads them (for free, in-process). An agent never names a round when it joins:
 * the coordinator puts the join into the round that is open, or keeps it waiting.
 *
 * Round life (all decisions made by the coordinator, all results pushed):
 *  - Open: joins are counted. The round closes when MAX nodes have joined; or, once at least MIN
 *    have joined, when every node it expects has joined (the live members of the previous round
 *    plus nodes that were waiting, or the names given in `expected`); or when last_call_timeout
 *    has passed since MIN was reached. So MIN==MAX and every restart of an unchanged job close the
 *    moment the last node joins; only MIN<MAX round 0 ever waits for the last call.
 *    join_timeout after the round opened with fewer than MIN: every joined agent gets a
 *    "timeout" assignment naming who is missing.
 *  - Close: node ranks are given out (rule below), the workers' keys of the previous attempt are
 *    deleted (every key outside "podrun/"), and each joined agent's assign key is set.
 *  - Running: agents WAIT on P r/<R>/end. The first failure of round R — a fail record, a leave,
 *    a closed ops connection of a node that is not done, or a node silent for
 *    keep_alive_interval x keep_alive_max_attempt — makes the coordinator decide on the next pass
 *    of its loop (no timeout: reports that arrived in the same pass are sorted in by time, so the
 *    root cause is the earliest of them) and set P r/<R>/end; round R+1 opens in the same step.
 *    The decision is set once, so every agent prints the same root cause; later reports are only
 *    logged by the host. Action: restart while restarts are left, else exit. In an elastic
 *    job (MIN<MAX) a node leaving, lost or joining is a membership change: it restarts without
 *    using up a restart. A node joining a running round with room for it (elastic, fewer than
 *    MAX) stops the round for that reason; without room it waits for the next round.
 *  - Every member done: P r/<R>/end = finished; waiting agents get a "finished" assignment.
 *  - Exit: the host's agent stays up until every other agent has closed its connections, bounded
 *    by close_timeout, so nobody sees a reset at the end.
 *
 * Node ranks: a node's want_rank (--node-rank) is honoured when it is below the number of nodes
 * in the round; a want_rank that another joined node already holds is rejected. The remaining
 * slots go to the other nodes in the order (name natural-sorted so worker-2 < worker-10, addr,
 * id): deterministic and stable across restarts for the same set of nodes. Global ranks are
 * contiguous per node in node-rank order: rank_base = sum of nproc of the lower node ranks.
 *
 * Liveness (W = keep_alive_interval x keep_alive_max_attempt, 3 s by default; H, the hang
 * bound, = RDZV_HANG_FACTOR x W, 30 s). A slow peer is not a dead one, on either side:
 *  - A closed connection is a lost peer at once (a crash, a kill, an exit).
 *  - The kernel decides whether the peer's machine is reachable: both ends set TCP_USER_TIMEOUT
 *    and keep-alive to W (podrun_tcp_liveness), so a cut network or a dead machine fails the
 *    connection after W without acknowledgements ("unreachable"), and that is a lost peer. A
 *    peer's kernel acknowledges while its process is stopped, swapped out or starved of CPU.
 *  - A peer whose connection is open but that sends nothing is hung only after H: the host drops
 *    a node that sent nothing (no heartbeat, no record) for H; an agent gives up on the host when
 *    nothing at all came from it for H while it asked (any byte is a sign of life; after W of
 *    quiet the agent sends a PING, whose echo the store sends at once, ahead of any parked
 *    answer; an agent fed by a relay asks for its round's end with every heartbeat instead,
 *    rdzv/relay.h). A sweep or a heartbeat tick that runs late because this side's own loop was stalled
 *    restarts the clocks instead of judging. A silent node still waiting for its assignment is
 *    answered "rejected", so it exits if it is alive after all.
 *  - Heartbeats (store backend) come every keep_alive_interval while the job has at most
 *    RDZV_HEARTBEAT_RATE nodes (max_nodes); in a larger job the period grows with the node count
 *    (rdzv_heartbeat_ms: 8 s at 16,384 nodes by default, at most H / 3), so the host reads about
 *    RDZV_HEARTBEAT_RATE heartbeats a second at any size; an agent's PING and the kernel's
 *    keep-alive probes wait for the longer of W and the period, so the heartbeats are all that
 *    flows while the job runs. W and H stay as they are: a lost connection is seen at once, an
 *    unreachable machine after W (the period plus W where the host sends nothing to the node), a
 *    hung node after H, a hung host after H plus the wait before the PING.
 *
 * Who hosts: static — node rank 0, at master_addr:master_port; c10d — the agent whose local
 * address is the endpoint host (rdzv_endpoint_is_local), or the one given is_host=1. The host
 * binds local_addr (or all addresses) and its own agent connects over loopback like any other.
 * Joining: everyone else tries the store host every RDZV_JOIN_RETRY_MS (jittered by +-50%)
 * until join_timeout, without backing off: a name that does not resolve yet or a refused
 * connection is retried, never fatal before then, and an agent is in within one interval of the
 * host listening. In a job of more than RDZV_JOIN_RETRY_RATE / 20 nodes the interval grows with
 * the node count (at most 2 s), so the job as a whole makes at most about RDZV_JOIN_RETRY_RATE
 * attempts per second against a port that is not open yet.
 *
 * Use from the launcher's state machine:
 *   RENDEZVOUS  rdzv_agent_start; progress() lines go to the log.
 *   assigned()  start the workers: RANK = rank_base + local rank, WORLD_SIZE = world_size,
 *               GROUP_RANK = node_rank, GROUP_WORLD_SIZE = nnodes, MASTER_ADDR/PORT =
 *               store_host/store_port, TORCHELASTIC_RESTART_COUNT = restart_count,
 *               TORCHELASTIC_USE_AGENT_STORE=True.
 *   RUNNING     first local worker failure: stop the local workers and
 *               rdzv_agent_report_failure; every local worker exited 0: rdzv_agent_report_done.
 *   ending()    optional: the moment the end of the round is known (before its record is
 *               read): stop the local workers now.
 *   stopped()   stop the local workers; once they are gone, RDZV_RESTART: rdzv_agent_rejoin
 *               (back to RENDEZVOUS), RDZV_EXIT: print the summary (failures[0] is the root
 *               cause) and exit — with the worker's code if d->own >= 0, else the peer code.
 *   finished()  exit 0.
 *   lost()      stop the local workers and exit: PODRUN_ESTORELOST/PODRUN_ESTORESILENT with the
 *               retryable code, PODRUN_EJOINTIMEOUT/PODRUN_EREJECTED/PODRUN_EENDED non-zero, with `why`.
 *   SIGTERM     rdzv_agent_leave, stop the workers, and exit once `sent` has run.
 *   Every exit goes through rdzv_agent_close and waits for `closed`: on the host that is what
 *   keeps the store up until the other agents are gone.
 *
 * Values are "key=value\n" lines; in values '\\' and newline are escaped as "\\\\" and "\\n".
 * Every field has a bounded length (see the RDZV_*_MAX below); longer text is cut.
 */
#ifndef PODRUN_RDZV_RENDEZVOUS_H
#define PODRUN_RDZV_RENDEZVOUS_H

#include <stdint.h>
#include <uv.h>

#include "rdzv/base/common.h"

#define RDZV_NAME_MAX 128    /* node names, addresses, hosts (with the NUL) */
#define RDZV_REASON_MAX 128
#define RDZV_MESSAGE_MAX 512
#define RDZV_MAX_FAILURES 16 /* failure records carried by one decision */
#define RDZV_LINE_MAX 1024   /* progress lines */
#define RDZV_HANG_FACTOR 10  /* the hang bound H is this many heartbeat windows (Liveness) */
#define RDZV_KEEP_ROUNDS 4   /* end records kept for debugging (Key lifetimes) */
#define RDZV_JOIN_RETRY_MS 50      /* a joining agent's attempt interval (Joining) */
#define RDZV_JOIN_RETRY_RATE 10240 /* attempts per second a whole job makes at most (Joining) */
#define RDZV_HEARTBEAT_RATE 2048   /* heartbeats per second the host reads at most (Liveness) */

/* The lost() callback gets PODRUN_EJOINTIMEOUT, PODRUN_ESTORELOST, PODRUN_ESTORESILENT,
 * PODRUN_EREJECTED or PODRUN_EENDED (rdzv/base/common.h). */

#define RDZV_HOST_INFERRED 2

typedef struct rdzv_params {
    const char *backend;       /* "store" (c10d and static: the job store hosted by one agent);
                                  NULL: "store" */
    const char *run_id;        /* job id; keys live under "podrun/<run_id>/" */
    const char *endpoint_host; /* where the store is (c10d endpoint or static master addr) */
    uint16_t endpoint_port;
    int is_host;               /* 1: this agent starts the store and the coordinator;
                                  RDZV_HOST_INFERRED: the same, but where the port is taken on
                                  this machine by the store of this run, it joins that one */
    int min_nodes, max_nodes;
    int want_rank;             /* --node-rank, or -1 */
    int segment_size;          /* --segment-size: rounds take whole segments of this many nodes
                                  of one NVLink domain (0, 1: off); divides min and max nodes */
    int max_restarts;
    int max_node_failures;     /* --max-node-failures: a node that caused this many failures is
                                  left out of later rounds where the job can do without it
                                  (rdzv/badnodes.h); 0: never */
    int max_no_progress;       /* the host's coordinator ends the job, instead of starting a
                                  round, once this many attempts in a row ended in a restart
                                  without the job's progress (the largest a node joined with,
                                  rdzv_agent_set_progress) advancing: every waiting agent gets
                                  lost() with PODRUN_ENOPROGRESS. 0: off */
    double join_timeout;       /* seconds; defaults (when <= 0): 600 */
    double last_call_timeout;  /* 30 */
    double close_timeout;      /* 30 */
    double keep_alive_interval; /* 1 */
    int keep_alive_max_attempt; /* 3 */
    double progress_interval;  /* 5: a waiting agent reports progress after 1 s, then this often */
    double stop_grace;         /* the agents' --term-timeout: the longest a stop of workers takes */
    const char *local_addr;    /* address to advertise; the host also binds it (NULL: all) */
    const char *expected;      /* optional comma-separated names of the nodes expected, used by
                                  the host to name missing nodes and to close round 0 early */
    /* backend "etcd" (rdzv/backend_etcd.c) */
    const char *endpoints;     /* etcd's members: "host:2379,..." or http(s):// URLs */
    const char *etcd_cacert, *etcd_cert, *etcd_key; /* PEM files for https endpoints */
    uint16_t store_port;       /* this node's job store, which serves the workers while the node
                                  has node rank 0; 0: a free port */
    double read_timeout;       /* 60: how long etcd may fail before this agent gives up */
    /* Who may use the job's store (doc/store.md#security): with a token, every agent connection
     * passes the token handshake (rdzv/store/auth.h) and the store keeps podrun's keys from any
     * other; NULL: the store is open (backend "store"; etcd's own TLS guards the etcd
     * backend's records). The node that hosts a store refuses sources outside `allow` at
     * accept (rdzv/store/acl.h; it stays the caller's and may change while the agent runs; NULL:
     * any). */
    const struct auth_key *token;
    const struct acl *allow;
} rdzv_params_t;

/* Fills the defaults above (strings NULL, want_rank -1, min = max = 1). Fields left at 0 when
 * the agent starts get these defaults too. */
void rdzv_params_default(rdzv_params_t *p);

/* The heartbeat period of a job with p's keep_alive_interval, keep_alive_max_attempt and
 * max_nodes, in ms (Liveness): keep_alive_interval x ceil(max_nodes / RDZV_HEARTBEAT_RATE),
 * at most a third of the hang bound. */
uint64_t rdzv_heartbeat_ms(const rdzv_params_t *p);

typedef struct rdzv_node_desc {
    const char *name;  /* hostname or PODRUN_NODE_NAME */
    const char *addr;  /* address peers reach this node at (local_addr, else name) */
    int nproc;         /* workers on this node */
    int service;       /* 1: its workers are services (parameter servers): the job has finished
                          when every other member is done, and then they are stopped */
    const char *domain; /* its NVLink domain (GPU fabric cluster UUID and clique), NULL or ""
                           none: nodes of one domain get contiguous node ranks */
} rdzv_node_desc_t;

typedef struct rdzv_assignment {
    int round;
    int node_rank, nnodes;     /* GROUP_RANK, GROUP_WORLD_SIZE */
    int rank_base, world_size; /* RANK = rank_base + local rank; WORLD_SIZE */
    int restart_count;         /* TORCHELASTIC_RESTART_COUNT */
    const char *store_host;    /* MASTER_ADDR: the job store (valid during the callback) */
    uint16_t store_port;       /* MASTER_PORT */
} rdzv_assignment_t;

typedef struct rdzv_failure {
    char host[RDZV_NAME_MAX];       /* address of the node */
    char node_name[RDZV_NAME_MAX];
    int node_rank, rank, local_rank; /* rank/local_rank -1 for a node-level failure */
    int exit_code;                  /* or -1 */
    int signo;                      /* or 0 */
    double time;                    /* epoch seconds */
    char reason[RDZV_REASON_MAX];   /* "exited with code 1", "agent lost: connection closed",
                                       "node silent for 3 s", "agent left: SIGTERM", ... */
    char message[RDZV_MESSAGE_MAX]; /* root-cause text from the worker's error file, cut */
    int permanent;                  /* 1: no restart can help (the program cannot be started):
                                       the job exits whatever restarts are left */
    int fatal;                      /* not to retry, the job exits without a restart:
                                       RDZV_FATAL_CODE (an exit code in --fatal-exit-codes) or
                                       RDZV_FATAL_ASKED (the worker asked, launcher/control.h) */
    int exclude;                    /* 1: the worker asked to leave its node out of later rounds
                                       (launcher/control.h) */
} rdzv_failure_t;
enum { RDZV_FATAL_CODE = 1, RDZV_FATAL_ASKED = 2 };

/* A node the job remembers for its failures (rdzv/badnodes.h), by name. */
#define RDZV_MAX_BAD_NODES 16 /* carried by one decision or status record */
typedef struct rdzv_badnode {
    char name[RDZV_NAME_MAX];
    int caused;   /* stops of the job whose root cause it was (a worker of it, or it was lost) */
    int checks;   /* health or preflight checks it failed */
    int asked;    /* 1: a worker of it asked to leave it out */
    int out;      /* 1: left out of later rounds */
} rdzv_badnode_t;

/* Fills a failure with "unknown" values: ranks -1, exit_code -1, signo 0, empty strings. */
void rdzv_failure_init(rdzv_failure_t *f);

enum { RDZV_RESTART = 1, RDZV_EXIT = 2 };

typedef struct rdzv_decision {
    int action;                /* RDZV_RESTART | RDZV_EXIT */
    int round;                 /* the round that stopped */
    int n;                     /* failure records; 0 for a membership change */
    rdzv_failure_t *failures;  /* sorted by time: [0] is the root cause (valid during callback) */
    int own;                   /* index of this node's first record in failures, or -1 */
    int next_round;
    int restart_counted;       /* 1 if this stop used up one of max_restarts */
    int restart_count;         /* restarts used so far, this one included */
    char reason[RDZV_REASON_MAX]; /* one line: why the job stopped */
    int n_bad;                 /* the nodes the job remembers for their failures, worst first */
    rdzv_badnode_t bad[RDZV_MAX_BAD_NODES];
} rdzv_decision_t;

typedef struct rdzv_callbacks {
    void (*assigned)(void *arg, const rdzv_assignment_t *a); /* start the workers */
    void (*stopped)(void *arg, const rdzv_decision_t *d);    /* stop the workers now; then
                                                                 rejoin (RESTART) or exit (EXIT) */
    void (*finished)(void *arg);                              /* every node is done: exit 0 */
    void (*lost)(void *arg, int err, const char *why);        /* this node is out of the job */
    void (*progress)(void *arg, const char *line);            /* a line for the log */
    void (*ending)(void *arg, int round); /* optional: round `round` has ended, the record of
                                             why (stopped() or finished()) follows as soon as
                                             it is read. Every ending stops this node's workers
                                             (finished: they have already exited), so the
                                             launcher may stop them here, one round trip
                                             earlier; it must not close or rejoin from here. */
    void (*store_log)(void *arg, const char *line); /* optional: a line of the job store this
                                                       agent hosts (a client cut off, ...) */
} rdzv_callbacks_t;

typedef struct rdzv_agent rdzv_agent_t;

/* Starts the agent on `loop`: the host also binds the store at (local_addr or all
 * addresses):endpoint_port now, so a bind error is returned here. Then both connections are made
 * (retried until join_timeout), the node joins, and callbacks follow. Strings are copied. */
int rdzv_agent_start(uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                     const rdzv_callbacks_t *cb, void *arg, rdzv_agent_t **out);
/* This node's run-time health check (--health-check-interval, launcher/watch/devcheck.h) as
 * `podrun status` shows it per node. */
enum rdzv_health_state {
    RDZV_HEALTH_NONE,     /* not reported (not started yet, or an agent that does not say) */
    RDZV_HEALTH_OFF,      /* --health-check-interval 0 */
    RDZV_HEALTH_IDLE,     /* on, but this node has no GPU and no link to check */
    RDZV_HEALTH_WAITING,  /* on, no check has run yet */
    RDZV_HEALTH_OK,       /* the last check found every GPU and link well */
    RDZV_HEALTH_FAILED,   /* the last check found `why` */
    RDZV_HEALTH__COUNT
};
extern const char *const rdzv_health_names[RDZV_HEALTH__COUNT];

typedef struct rdzv_health {
    int state;                  /* enum rdzv_health_state */
    double interval;            /* seconds between checks; 0 when off */
    double checked;             /* epoch s of the last check (the sender's clock); 0: none */
    char why[RDZV_REASON_MAX];  /* FAILED: what the check found, one line */
} rdzv_health_t;

/* The first failure of a local worker in the current round (later ones may follow). */
int rdzv_agent_report_failure(rdzv_agent_t *a, const rdzv_failure_t *f);
/* Every local worker of the current round exited 0. */
int rdzv_agent_report_done(rdzv_agent_t *a);
/* Another node of the running round is gone as this node's discovery saw it (a Kubernetes pod
 * deleted or Failed): `name` and `addr` are what that node joined with (either may be "" when
 * unknown), `reason` says what was seen. The coordinator treats it exactly as that node's
 * connection closing, so the job stops at once instead of after the heartbeat window; a node
 * that is not a member of the running round, or is done, is not touched. Only while a round
 * runs: -EINVAL otherwise, -ENOTSUP for a backend without it. */
int rdzv_agent_report_peer_lost(rdzv_agent_t *a, const char *name, const char *addr,
                                const char *reason);
/* This node's health check after each check and when checking starts (or stays off) for an
 * attempt. What reaches the job store is bounded by changes, not by checks: a new state,
 * interval or finding is a record (P n/<id>/health, once); a check that found what the last one
 * did only moves its time, which rides on the next heartbeat, so a healthy job of N nodes writes
 * nothing more than its heartbeats. -ENOTSUP for a backend without it (etcd), -ENOTCONN before
 * the connection is up (the next call tries again). */
int rdzv_agent_report_health(rdzv_agent_t *a, const rdzv_health_t *h);
/* Tells the job this node is going away; `sent` runs once the message is on the wire (or at once
 * from the loop if there is no connection to send it on). */
int rdzv_agent_leave(rdzv_agent_t *a, const char *reason, void (*sent)(void *), void *arg);
/* The trainer's progress (a step or checkpoint iteration, >= 0; < 0: none known) that this
 * node's next join carries, for max_no_progress. Call it before rdzv_agent_rejoin; the first
 * join carries what was set before the connection was up. */
void rdzv_agent_set_progress(rdzv_agent_t *a, long long progress);
/* After stopped() with RDZV_RESTART, once the local workers are gone: join the next round. */
int rdzv_agent_rejoin(rdzv_agent_t *a);
/* Closes the agent. The host first waits (at most close_timeout) until every other agent has
 * disconnected, then closes the store. `closed` runs when everything is freed. */
void rdzv_agent_close(rdzv_agent_t *a, void (*closed)(void *), void *arg);

/* The port the store listens on (host), or the endpoint port. */
uint16_t rdzv_agent_store_port(const rdzv_agent_t *a);

/* What the rendezvous has done so far, for the agent's /metrics. */
typedef struct rdzv_stats {
    unsigned long heartbeats;        /* heartbeats this agent sent */
    unsigned long heartbeat_misses;  /* keep-alive ticks with the store silent, pinged */
    int hosting;                     /* this agent hosts the job store and the coordinator */
    /* hosting only */
    unsigned long silent_nodes;      /* nodes dropped for silence */
    size_t store_connections;        /* open now */
    uint64_t store_accepted;         /* connections accepted in all */
    uint64_t store_ops[32];          /* requests handled, by opcode (rdzv/store/wire.h) */
    size_t store_keys, store_bytes;  /* held now */
} rdzv_stats_t;
/* Zeroes for a backend that keeps none. */
void rdzv_agent_stats(const rdzv_agent_t *a, rdzv_stats_t *out);

/* c10d host rule (torchrun's, widened to every interface): 1 when `endpoint_host` is, or
 * resolves to, `local_addr`; or (no local_addr) when it is this machine's hostname (short or
 * full) or "localhost", or is or resolves to a loopback address or an address one of this
 * machine's interfaces holds. A name is looked up once, blocking (getaddrinfo). */
int rdzv_endpoint_is_local(const char *endpoint_host, const char *local_addr);

#endif
