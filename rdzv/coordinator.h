/* rdzv/coordinator.h — the rendezvous coordinator: a pure state machine, no I/O.
 *
 * It runs inside the agent that hosts the job store (protocol: rdzv/rendezvous.h). Inputs are the
 * store writes under "podrun/<run_id>/n/" seen by the server's observer, closes of the connections
 * that made them, and timer expiries, each with an explicit `now` (epoch seconds). Outputs are
 * actions, queued in order and drained with coord_next_action: keys to set (in-process, waking
 * remote WAITs), timers to arm or cancel, log lines, "delete the workers' keys", and "closed".
 * Work per input is O(1) except at a round's close (O(N log N)) and sweeps (O(N)).
 *
 * Also here: the "key=value\n" text codec and the record encoders/decoders shared with the
 * agent side, all pure functions. */
#ifndef PODRUN_RDZV_COORDINATOR_H
#define PODRUN_RDZV_COORDINATOR_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv/common.h"
#include "rdzv/rendezvous.h"

/* The key of a node's record: "<prefix>n/<ids>/<what>[/<num>]" (num < 0: none), prefix being
 * "podrun/<run_id>/" and ids the node's 16 hex digits. Agents write these and the coordinator
 * answers on them. */
void rdzv_node_key(char *out, size_t cap, const char *prefix, const char *ids, const char *what,
                   int num);

/* ---- key=value text ---- */

typedef struct kvbuf {
    char *buf;
    size_t cap, len;
    int overflow; /* 1 if something did not fit (what fit is kept, lines stay whole) */
} kvbuf_t;

void kv_init(kvbuf_t *b, char *buf, size_t cap);
/* Appends "k=v\n" with v escaped; v is cut to vmax bytes (0: no cut) before escaping. */
void kv_add(kvbuf_t *b, const char *k, const char *v, size_t vmax);
void kv_add_int(kvbuf_t *b, const char *k, long long v);
void kv_add_double(kvbuf_t *b, const char *k, double v);
/* Finds the first line "k=..." in text[0..len) and unescapes its value into out (cut to cap-1,
 * always NUL-terminated). Returns the unescaped length, or -1 if the key is absent. */
int kv_get(const char *text, size_t len, const char *k, char *out, size_t cap);
/* Integer value of k, or `def` if absent or not a number. */
long long kv_get_int(const char *text, size_t len, const char *k, long long def);
double kv_get_double(const char *text, size_t len, const char *k, double def);

/* ---- records ---- */

typedef struct rdzv_desc_rec {
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX], host[RDZV_NAME_MAX];
    int nproc, want_rank, pid;
} rdzv_desc_rec_t;

/* Each encoder returns the length written (< cap) or -ENOSPC. */
int rdzv_desc_encode(const rdzv_desc_rec_t *d, char *buf, size_t cap);
int rdzv_desc_decode(const char *text, size_t len, rdzv_desc_rec_t *d); /* 0 or -EINVAL */

/* A failure record; `pfx` prefixes every key ("" alone, "f3." inside a decision). */
void rdzv_failure_put(kvbuf_t *b, const char *pfx, const rdzv_failure_t *f);
void rdzv_failure_take(const char *text, size_t len, const char *pfx, rdzv_failure_t *f);
int rdzv_failure_encode(const rdzv_failure_t *f, char *buf, size_t cap);
int rdzv_failure_decode(const char *text, size_t len, rdzv_failure_t *f);

/* An assignment or, when `error` is non-NULL, an error answer ("timeout", "rejected", "ended",
 * "finished") with a text. */
int rdzv_assign_encode(const rdzv_assignment_t *a, char *buf, size_t cap);
int rdzv_assign_error_encode(const char *error, const char *text, char *buf, size_t cap);
/* Fills a (store_host points into host_buf); error_out gets the error kind ("" for none) and
 * text_out the error text. Returns 0 or -EINVAL. */
int rdzv_assign_decode(const char *text, size_t len, rdzv_assignment_t *a, char *host_buf,
                       size_t host_cap, char *error_out, size_t ecap, char *text_out,
                       size_t tcap);

/* The end of a round: finished (d NULL) or a decision. */
int rdzv_end_encode(const rdzv_decision_t *d, char *buf, size_t cap);
/* Returns 1 for "finished", 0 for a decision (failures must hold RDZV_MAX_FAILURES records; d->own
 * is left -1), -EINVAL for garbage. */
int rdzv_end_decode(const char *text, size_t len, rdzv_decision_t *d, rdzv_failure_t *failures);

/* Natural order: digit runs compare as numbers, so "worker-2" < "worker-10". */
int rdzv_natural_cmp(const char *a, const char *b);

/* ---- the coordinator ---- */

typedef struct coord_params {
    const char *run_id;
    int min_nodes, max_nodes, max_restarts;
    double join_timeout, last_call_timeout, close_timeout;
    double keep_alive_interval;
    int keep_alive_max_attempt;
    double progress_interval;
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
    COORD_T_COUNT
};

enum coord_action_kind {
    COORD_SET = 1,          /* set key (NUL-terminated) to val[0..vlen) */
    COORD_TIMER,            /* arm timer `timer` to fire at `at` (epoch s); at < 0: cancel */
    COORD_LOG,              /* a line for the log (in val) */
    COORD_DELETE_WORKERS,   /* delete every key not starting with key ("podrun/") */
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
void coord_on_close(coord_t *c, uint64_t conn, double now);
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
} coord_info_t;
enum { COORD_OPEN = 1, COORD_RUNNING, COORD_OVER };
void coord_info(const coord_t *c, coord_info_t *info);

#endif
