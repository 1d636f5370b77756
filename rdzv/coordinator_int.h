/* rdzv/coordinator_int.h — the coordinator's state, shared by its files (coordinator.c: the action
 * queue, inputs and timers; coordinator_round.c: opening, closing and deciding rounds;
 * coordinator_resume.c; coordinator_status.c). Private to them; callers use rdzv/coordinator.h. */
#ifndef PODRUN_RDZV_COORDINATOR_INT_H
#define PODRUN_RDZV_COORDINATOR_INT_H

#include "rdzv/coordinator.h"

#include "rdzv/badnodes.h"
#include "rdzv/ranks.h"
#include "rdzv/status.h"
#include "rdzv/base/u64map.h"

enum node_state {
    NS_NEW,     /* has written something, never joined */
    NS_JOINED,  /* in the open round */
    NS_WAITING, /* joined while the job was full; joins the next round */
    NS_MEMBER,  /* in the running (or last) round */
    NS_STOPPED, /* member of a stopped round, expected to join the open one */
    NS_GONE,    /* left, lost, silent or rejected */
};

#define HOST_CLOSING "the job store host is shutting down"

/* FK_UNREACHABLE: lost, but perhaps alive (its connection timed out); as FK_LOST, fenced */
enum fail_kind { FK_WORKER, FK_LEFT, FK_LOST, FK_SILENT, FK_JOINED, FK_UNREACHABLE };

/* A node's descriptor as the coordinator keeps it: the strings live in one allocation of
 * their own length (strs), not in three RDZV_NAME_MAX arrays, since a 1000-node job keeps a
 * thousand of these. Before the first join the strings are "". */
typedef struct cdesc {
    const char *name, *addr, *host, *domain; /* domain: NVLink domain, "" none */
    int nproc, want_rank, pid;
    int service;   /* a node of services (parameter servers): its "done" is not waited for */
    long long progress; /* the trainer's progress it joined with, -1 none */
    int relay_port; /* where it takes the round's end from a relay (rdzv/relay.h); 0: none */
} cdesc_t;

typedef struct cnode {
    uint64_t id, conn;
    char ids[17];
    cdesc_t d;
    char *strs;
    int state, connected, join_k, node_rank, done, exp_idx;
    int was_member; /* a member of the last round (whole segments keep it before a spare) */
    int via_tree;   /* its latest join came up the relay tree (a gather), not from the node */
    int assign_pending; /* its assignment is not in the store (yet): see coord_round_close */
    int assign_k; /* the join whose assign key holds an answer, -1: none */
    int rank_base; /* its first global rank in the running (or last) round */
    double last_seen;
    /* its health check as last reported (rdzv_health_t, kept small: the finding is allocated
     * only while the last check failed) */
    int health;
    float health_interval;
    double health_checked;
    char *health_why;
} cnode_t;

typedef struct action_store {
    coord_action_t a;
    char *key, *val;
} action_store_t;

struct coord {
    coord_params_t p;
    char *run_id, *store_host, *prefix, *observe_prefix;
    int elastic;

    cnode_t **nodes;
    size_t n_nodes, cap_nodes;
    u64map_t by_id, by_conn;

    /* expected names (params.expected) */
    char **exp_names;
    int *exp_joined;
    int n_exp;

    int round, phase, finished, restarts_used;
    int joined, members, done, waiting, connected;
    int services;    /* members of the running round that are service nodes */
    int expect_known, expected_missing;
    int last_call_armed;
    double round_opened, join_deadline, last_sweep;
    int *rank_owner; /* node index owning each wanted rank in the open round, -1 */
    int stopped;     /* a reason to stop the running round was seen */
    int decided;     /* ... and the decision was set */
    int stop_counted;
    char stop_why[RDZV_REASON_MAX];
    rdzv_failure_t failures[RDZV_MAX_FAILURES];
    int n_failures;
    char over_kind[16];
    char over_text[RDZV_LINE_MAX];
    int closing, closed_sent;
    int tree_joins;  /* joins of the open round that came up the relay tree (rdzv/relay.h) */

    action_store_t *q;
    size_t q_len, q_cap, q_pos;

    /* what `podrun status` is shown (coord_state) and metrics count */
    double started, round_since;
    long long world;
    int last_fail_round, last_fail_action; /* the last stop that had a failure; round -1: none */
    rdzv_failure_t last_fail;
    unsigned long silent_nodes;
    badnodes_t bad;   /* the nodes the job remembers for their failures */
    char host_id[17]; /* coord_params.host_id, "" none */

    /* the trainer's progress across restarts (coordinator_progress.c) */
    long long prog_base;  /* the largest progress the last round's nodes joined with, -1 none */
    int prog_judge;       /* the last round ended in a counted restart: the next close judges */
    int prog_stalled;     /* attempts in a row that ended so without progress */
    /* no round closes before fence_until: a lost member that may be alive runs its workers
     * until then (params.fence); close_deferred: a close waits for it */
    double fence_until;
    int close_deferred;
    char fence_who[RDZV_NAME_MAX];
};

/* coordinator.c: the action queue, helpers and inputs */
void coord_q_reset(coord_t *c);
action_store_t *coord_q_push(coord_t *c, int kind);
void coord_act_set(coord_t *c, const char *key, const char *val, size_t vlen);
void coord_act_delete(coord_t *c, const char *key);
void coord_act_timer(coord_t *c, int timer, double at);
void coord_act_log(coord_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *coord_node_label(const cnode_t *n);
void coord_node_key(const coord_t *c, char *out, size_t cap, const cnode_t *n, const char *what,
              int num);
void coord_answer_error(coord_t *c, cnode_t *n, const char *kind, const char *text);
int coord_exp_find(const coord_t *c, const char *name);
void coord_set_status(coord_t *c, const char *line);
cnode_t *coord_node_for(coord_t *c, uint64_t conn, uint64_t id, const char *ids, int *idx,
                  double now);
int coord_node_set_desc(cnode_t *n, const rdzv_desc_rec_t *d);
void coord_on_join(coord_t *c, cnode_t *n, int idx, int k, const char *val, size_t vlen,
             double now);
void coord_maybe_closed(coord_t *c);

/* coordinator_round.c */
void coord_round_stop_open_timers(coord_t *c);
void coord_round_go_over(coord_t *c, const char *kind, const char *text);
int coord_round_admit(coord_t *c, cnode_t *n, int idx, double now);
void coord_round_open(coord_t *c, int round, double now);
int coord_round_seg_pick(coord_t *c, int s1, int s2, int apply);
int coord_round_ready_nodes(coord_t *c);
void coord_round_close(coord_t *c, double now);
/* The running round's assignments on their members' join keys: of the members whose
 * assign_pending is `pending` (which it clears); without memory, all of them a second on. */
void coord_round_write_assignments(coord_t *c, int pending, double now);
void coord_round_check_close(coord_t *c, double now);
void coord_round_record_failure(coord_t *c, const rdzv_failure_t *f);
void coord_round_fail_summary(const rdzv_failure_t *f, char *out, size_t cap);
void coord_round_stop(coord_t *c, int kind, const rdzv_failure_t *f, const char *why,
                double now);
void coord_round_decide(coord_t *c, double now);
/* coordinator_badnodes.c */
void coord_badnodes_decided(coord_t *c, rdzv_decision_t *d);
int coord_badnodes_refuse(coord_t *c, cnode_t *n, int idx, double now);

/* coordinator_progress.c */
int coord_progress_judge(coord_t *c, char *text, size_t cap);
void coord_progress_decided(coord_t *c, int counted_restart);
void coord_round_node_gone(coord_t *c, cnode_t *n, int idx, int kind, const char *reason, double now);

#endif
