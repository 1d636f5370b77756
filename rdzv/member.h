/* rdzv/member.h — one node's side of the rendezvous (rdzv/rendezvous.h), for every backend.
 *
 * A backend's agent begins with rdzv_member_t: it "is a" member, as libuv's uv_tcp_t is a
 * uv_stream_t. member.c decides what the bytes mean and what to tell the launcher: the join
 * record, the answer to a join (an assignment or the reason there is none), the end of a round,
 * the reports (failure, done, a peer lost), leave and rejoin, the progress timer, and the
 * lifetime (every callback once, `closed` last). The transport under it moves the bytes: the
 * store's async client with WAIT+GET and heartbeats (backend_store.c), or etcd's lease,
 * keep-alive and watch (backend_etcd.c). A transport is a row of function pointers, as nginx's
 * ngx_event_actions_t.
 *
 * The states: STARTING (the transport connects) -> JOINING (join sent, waiting for the answer)
 * -> RUNNING (assigned, waiting for the end of the round) -> STOPPED (the launcher rejoins or
 * exits) or FINISHED; DEAD once `lost` ran.
 *
 * Lifetime: the member stays allocated until it is closing (closing == 2), every handle it
 * counts is closed (`handles`), every request is answered (`pending`) and its store server is
 * gone; then the transport's `release` frees what it owns, the member is freed and `closed` runs,
 * last. */
#ifndef PODRUN_RDZV_MEMBER_H
#define PODRUN_RDZV_MEMBER_H

#include "rdzv/backend.h"
#include "rdzv/records.h"
#include "rdzv/store/server.h"

enum member_state {
    MS_STARTING, /* the transport connects (store: the connection; etcd: lease and watch) */
    MS_JOINING,  /* join sent, waiting for its answer */
    MS_RUNNING,  /* assigned, waiting for the end of the round */
    MS_STOPPED,  /* the round stopped; rejoin or exit is up to the launcher */
    MS_FINISHED,
    MS_DEAD,     /* lost() was called */
};

typedef struct rdzv_member rdzv_member_t;

/* What a backend does for a member. Entries marked optional may be NULL. */
typedef struct rdzv_transport {
    const char *what; /* where the records live, for messages: "the job store", "etcd" */
    /* Writes one of this node's records (fail, done, peer, leave, health, a later join). With `ack`, the
     * transport calls member_leave_sent once it is written or has failed, exactly once, unless
     * this call returns an error. 0, or a negative code (-ENOTCONN: nothing to send it on). */
    int (*put)(rdzv_member_t *m, const char *key, const char *val, size_t len, int ack);
    /* Sends join number m->join_k (the record under `key`) and waits for its answer, which
     * comes back through member_on_assign. 0, or a negative code. */
    int (*join)(rdzv_member_t *m, const char *key, const char *val, size_t len);
    /* optional: what the join record says besides the descriptor (etcd: this node's store) */
    void (*join_extra)(rdzv_member_t *m, kvbuf_t *b);
    /* optional: the member was assigned round m->round (the assignment's text: val[0..len)),
     * before the launcher hears of it (store: wait for the round's end, or take it from a relay;
     * etcd: empty this node's store for the workers). 0, or a negative code, which costs this
     * node the job. */
    int (*assigned)(rdzv_member_t *m, const char *val, size_t len);
    /* the progress timer fired while STARTING or JOINING: say what this node waits for */
    void (*tick)(rdzv_member_t *m);
    /* optional: this node's waiting is over (lost, finished, leaving, closing): stop what the
     * transport does periodically for it (store: the heartbeats) */
    void (*halt)(rdzv_member_t *m);
    /* Closes the transport (member_close ran): its connections, leases and handles; it calls
     * member_close_handles once nothing of it can call back any more. */
    void (*close)(rdzv_member_t *m);
    /* optional: frees what the transport owns, just before the member is freed */
    void (*release)(rdzv_member_t *m);
} rdzv_transport_t;

struct rdzv_member {
    rdzv_agent_t base; /* first: the API hands out &base */
    const rdzv_transport_t *t;
    uv_loop_t *loop;
    rdzv_params_t p;   /* run_id and expected point at the member's copies */
    char *run_id, *local_addr, *expected; /* local_addr, expected: NULL when not given */
    rdzv_callbacks_t cb;
    void *arg;
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX], hostname[RDZV_NAME_MAX];
    char domain[RDZV_NAME_MAX]; /* NVLink domain, "" none */
    int nproc, service;         /* service: a node of parameter servers (rendezvous.h) */
    long long progress;         /* what the next join says of the trainer's progress; -1 none */
    char id[17];                /* this agent's random id: its records' keys */
    char prefix[256];           /* "podrun/<run_id>/" */
    size_t plen;

    int state, join_k, round, node_rank;
    int stop_action;            /* of the last decision */
    int end_round;              /* the latest end record kept (it may come before the assignment) */
    char *end_val;
    size_t end_len;
    int leaving, closing;       /* closing: 1 closing, 2 handles closing (freed when all are) */
    uv_timer_t prog_timer, defer_timer;
    void (*leave_sent)(void *);
    void *leave_arg;
    rdzv_health_t health_sent;  /* the health check as last recorded (member_report_health) */
    double health_unsent;       /* epoch s of a check with no news since it, for a transport
                                   that sends something periodically to carry (store: the
                                   heartbeat); 0: none */

    store_server_t *server;     /* this node's store server, if it runs one */
    uint16_t port;              /* what rdzv_agent_store_port answers */
    int handles, pending;       /* open handles; requests still owed a callback */
    void (*closed)(void *);
    void *closed_arg;
};

/* ---- starting and lifetime (what a backend's start and close call) ---- */

/* Fills the member from the checked parameters: copies of the strings that outlive the call,
 * name, address, host name, a fresh id, the key prefix; STARTING, no timers yet. 0 or -ENOMEM
 * (then member_free frees it). */
int member_init(rdzv_member_t *m, const rdzv_backend_t *backend, const rdzv_transport_t *t,
                uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                const rdzv_callbacks_t *cb, void *arg);
/* A copy of an optional string: NULL and "" both mean "not given" and leave *dst NULL. 0 or
 * -ENOMEM. */
int member_copy_str(char **dst, const char *src);
/* A timer on the member's loop, counted in `handles`, with data = m. */
void member_timer_init(rdzv_member_t *m, uv_timer_t *t);
/* The member's own timers (progress, deferred leave), counted in `handles`. */
void member_timers_init(rdzv_member_t *m);
/* The progress timer: the transport's tick after 1 s (or progress_interval if shorter), then
 * every progress_interval. */
void member_start_progress(rdzv_member_t *m);
/* The close callback for a handle counted in `handles` (its data is the member). */
void member_on_handle_closed(uv_handle_t *h);
/* One counted thing (a handle, a request, a server) is gone: frees the member if it was the last. */
void member_maybe_free(rdzv_member_t *m);
/* Closing, last stage: the member's timers and its store server close; it is freed, and
 * `closed` runs, once every handle is closed and every request answered. */
void member_close_handles(rdzv_member_t *m);
/* Frees now (nothing may call back any more), then runs `closed`. */
void member_free(rdzv_member_t *m);
/* The log sink for the member's store server: a line goes to cb.store_log. */
void member_on_store_log(void *arg, const char *line);

/* ---- what a transport calls ---- */

/* A line for the log (cb.progress). */
void member_progress(rdzv_member_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* This node is out of the job: `lost`, once (nothing after DEAD or while closing). */
void member_fail(rdzv_member_t *m, int err, const char *why);
/* Whether this node is on its way out anyway (closing, leaving, finished, told to exit): a lost
 * connection then costs it nothing. */
int member_done_anyway(const rdzv_member_t *m);
/* What the next join says of the trainer's progress (rdzv_agent_set_progress). */
void member_set_progress(rdzv_member_t *m, long long progress);
/* Sends join m->join_k: the record (descriptor + join_extra) through the transport; JOINING.
 * 0, or a negative code (nothing sent). */
int member_join(rdzv_member_t *m);
/* The answer to join m->join_k (the transport checks the key): an assignment, or why there is
 * none. Only while JOINING and not closing; an empty value is ignored. */
void member_on_assign(rdzv_member_t *m, const char *val, size_t len);
/* Round `round`'s end record exists (store: before its value is read): cb.ending. */
void member_on_ending(rdzv_member_t *m, int round);
/* Round `round`'s end record: finished, or the job's stop decision. The latest is kept, so one
 * that arrives before this node's assignment is read when the assignment comes. Nothing while
 * closing. */
void member_on_end(rdzv_member_t *m, int round, const char *val, size_t len);
/* The leave record is written (or could not be): the leave's `sent` callback, once. */
void member_leave_sent(rdzv_member_t *m);
/* The key of one of this node's records ("<P>n/<id>/<what>[/<num>]"). */
void member_key(const rdzv_member_t *m, char *out, size_t cap, const char *what, int num);

/* ---- the backend-table entries every backend shares ---- */

int member_report_failure(rdzv_agent_t *a, const rdzv_failure_t *f);
int member_report_done(rdzv_agent_t *a);
int member_report_peer_lost(rdzv_agent_t *a, const char *name, const char *addr,
                            const char *reason);
int member_report_health(rdzv_agent_t *a, const rdzv_health_t *h);
int member_leave(rdzv_agent_t *a, const char *reason, void (*sent)(void *), void *arg);
int member_rejoin(rdzv_agent_t *a);
void member_close(rdzv_agent_t *a, void (*closed)(void *), void *arg);
uint16_t member_store_port(const rdzv_agent_t *a);

/* A backend table's entries that every backend shares, in one place:
 * `const rdzv_backend_t rdzv_backend_x = {.name = "x", .start = x_start, MEMBER_ENTRIES};` */
#define MEMBER_ENTRIES                                                                            \
    .report_failure = member_report_failure, .report_done = member_report_done,                   \
    .report_peer_lost = member_report_peer_lost, .report_health = member_report_health,           \
    .leave = member_leave, .rejoin = member_rejoin,                                               \
    .close = member_close, .store_port = member_store_port

#endif
