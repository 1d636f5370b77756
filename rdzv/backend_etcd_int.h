/* rdzv/backend_etcd_int.h — the etcd backend's private header: its agent (backend_etcd.c: one
 * node, its lease, its watch) and what it does while it coordinates the job through etcd
 * (etcd_leader.c: the takeover from the state in etcd, the coordinator's writes in transaction
 * batches, the state record, etcd_state.h). The design and its failure cases are described at the
 * top of backend_etcd.c. Internal to those two files, whose functions and inlines are etcd_agent_*
 * (the agent) and etcd_leader_* (coordinating). */
#ifndef PODRUN_RDZV_BACKEND_ETCD_INT_H
#define PODRUN_RDZV_BACKEND_ETCD_INT_H

#include <string.h>

#include "rdzv/coordinator.h"
#include "rdzv/etcd/client.h"
#include "rdzv/etcd/json.h"
#include "rdzv/etcd_state.h"
#include "rdzv/host.h"
#include "rdzv/member.h"
#include "rdzv/records.h"
#include "rdzv/store/server.h"
#include "rdzv/base/u64map.h"

#define TXN_MAX_PUTS 120              /* etcd's default --max-txn-ops is 128 */
#define SWEEP_OFF (365.0 * 24 * 3600) /* the coordinator's silence sweep: leases do that here */
#define CLOSE_BOUND_MS 2000           /* the last words of a closing agent */
#define KEY_MAX 320
#define ETCD_HEALTH_TICKS 10          /* keep-alive intervals between puts of a check's time */

/* The watchers of an agent's stream, and the leader's own. */
enum { W_ASSIGN = 1, W_END, W_LEADER, W_RECORDS };

/* The leader's view of one agent, from its keys. */
typedef struct lnode {
    char id[17];
    uint64_t idn;
    int64_t lease;
    int sport;
    int join_k, answered_k; /* latest join seen; latest join with an answer in etcd */
    int has_desc, alive;
    rdzv_desc_rec_t d;
} lnode_t;

/* A write of the leader: puts (or, for the job's last write, the deletion of every key). */
typedef struct wput {
    char *key, *val;
    size_t klen, vlen;
    int64_t lease;
} wput_t;

typedef struct wbatch {
    struct wbatch *next;
    wput_t *puts;
    size_t n, cap;
    int cleanup;  /* delete P and everything under it */
    int job_only; /* every lease replaced by the job lease (an agent's lease had expired) */
} wbatch_t;

/* A record read at a takeover. */
typedef struct snaprec {
    char *key, *val;
    size_t klen, vlen;
    int64_t lease;
} snaprec_t;

typedef struct etcd_agent {
    rdzv_member_t m; /* first: it is a member (member.h); m.server, m.port: its own store */
    char *cacert, *cert, *key;
    uint64_t idn;
    etcd_endpoint_t ep[ETCD_MAX_ENDPOINTS];
    int n_ep;
    etcd_client_t *etcd;

    /* this node in the job */
    int64_t lease;
    int ttl;
    etcd_watch_t *watch;
    int created;
    etcd_call_t *ka_call, *jka_call, *hello_call, *status_call, *campaign_call, *sync_call;
    int flushing, revoking;
    int64_t said_failing;     /* when the last "etcd is not answering" line went out */
    int hb_ticks;             /* keep-alive ticks since a health check's time was last put */
    char endpoint[300];       /* the member this node talks to, as last said */
    uint64_t renewed;         /* loop ms: when the last renewal etcd answered was sent; the
                                 lease lasts at least its ttl from then, and no longer for sure */
    uv_timer_t ka_timer, close_timer, fence_timer;

    /* coordinating */
    int leading, lead_ready, cleaning;
    int64_t lead_rev, job_lease;
    host_t host;        /* the coordinator on this loop (host.h), while leading */
    etcd_watch_t *lwatch;
    etcd_call_t *lcall; /* the leader's one request in flight: a takeover step or a write */
    etcd_call_t *view_call; /* the job's state for `podrun status` being written */
    int view_round, view_phase, view_over; /* as last written; over: the job's keys go */
    wbatch_t *q_head, *q_tail;
    lnode_t **nodes;
    size_t n_nodes, cap_nodes;
    u64map_t by_id;
    etcd_state_t st; /* the state as last written; st.members owned */
    int st_valid;
    snaprec_t *snap;
    size_t n_snap;
    char *snap_state;
    size_t snap_state_len;
    int64_t snap_rev;
} etcd_agent_t;

/* ---- keys and requests (both sides) ---- */

/* The job's key `rest` under this run's prefix. */
static inline void etcd_agent_key(const etcd_agent_t *a, char *out, size_t cap, const char *rest)
{
    sfmt(out, cap, "%s%s", a->m.prefix, rest);
}

/* The callback of a request whose answer changes nothing. */
static inline void etcd_agent_ignored(void *arg, int status, const etcd_resp_t *r)
{
    (void)arg, (void)status, (void)r;
}

/* A transaction's operations and comparison, as etcd_req_op/etcd_req_txn take them. */
static inline etcd_op_t etcd_agent_op_put(const char *key, const char *val, size_t vlen,
                                          int64_t lease)
{
    return (etcd_op_t){ETCD_OP_PUT, key, strlen(key), NULL, 0, val, vlen, lease};
}

static inline etcd_op_t etcd_agent_op_range(const char *key, const char *end)
{
    return (etcd_op_t){ETCD_OP_RANGE, key, strlen(key), end, end ? strlen(end) : 0, NULL, 0, 0};
}

static inline etcd_cmp_t etcd_agent_cmp_create(const char *key, int64_t rev)
{
    return (etcd_cmp_t){key, strlen(key), ETCD_CMP_CREATE, rev, NULL, 0};
}

/* ---- the agent (backend_etcd.c) ---- */

/* How long past its lease's ttl, counted from the last renewal etcd answered, an agent that runs
 * workers waits for an answer before it stops them: as long again. A raft leader's failover
 * leaves renewals unanswered for an election or more (longer on a loaded machine), and etcd
 * gives every lease a full ttl on a new raft leader: that costs the job nothing. The leader's
 * fence counts it too (etcd_leader.c), so it is the c10d fence's window W = the ttl. */
static inline double etcd_agent_late_s(const etcd_agent_t *a)
{
    return a->ttl;
}

/* This node is out of the job: tell the launcher once (not a node on its way out anyway). */
void etcd_agent_fail(etcd_agent_t *a, int err, const char *why);
/* Parses "<P>n/<16 hex>/<what>[/<num>]". 0, or -1 for any other key. */
int etcd_agent_parse_key(const etcd_agent_t *a, const char *key, size_t klen, char ids[17],
                         uint64_t *idn, char *what, size_t wcap, long *num);
/* Tries to become the leader: creates P leader with this agent's lease unless it exists. */
void etcd_agent_campaign(etcd_agent_t *a);
/* The last step of closing: this node's lease is revoked (bounded), then the teardown. */
void etcd_agent_close_finish(etcd_agent_t *a);

/* ---- coordinating (etcd_leader.c) ---- */

/* The coordinator's timers on the agent's loop (at start; counted by host_close at the end). */
void etcd_leader_init(etcd_agent_t *a);
/* This agent holds the leader key (created at revision rev): it reads the job and coordinates. */
void etcd_leader_start(etcd_agent_t *a, int64_t rev);
/* This agent no longer coordinates: everything the role held goes. It stays an agent. */
void etcd_leader_stop(etcd_agent_t *a);
/* A leader's request was refused for good: this node gives up (etcd_agent_fail). */
void etcd_leader_fail(etcd_agent_t *a, const char *what, const char *why);
/* An agent's alive key is gone (its lease ended), or this agent closes: the coordinator's close
 * input for it. */
void etcd_leader_lost(etcd_agent_t *a, uint64_t idn);
/* Every keep_alive_interval while leading: the job lease is renewed, and the job's state for
 * `podrun status` (rdzv/status.h) is written under P RDZV_ETCD_STATUS_KEY. */
void etcd_leader_keepalive(etcd_agent_t *a);

#endif
