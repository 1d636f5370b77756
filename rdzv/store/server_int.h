/* rdzv/store/server_int.h — the server's connection and server state, shared by server.c
 * (output, connections, reading, the server) and server_ops.c (the op handlers, the guard's
 * answers, parking behind a WAIT). Private to them; callers use rdzv/store/server.h. */
#ifndef PODRUN_RDZV_STORE_SERVER_INT_H
#define PODRUN_RDZV_STORE_SERVER_INT_H

#include "rdzv/store/server.h"

#include "rdzv/store/keyspace.h"
#include "rdzv/base/list.h"
#include "rdzv/store/wire.h"

#define READ_CHUNK (64 * 1024)
#define MAX_LISTENERS 4
/* A peer that does not read its replies gets no more requests read once this much is queued. */
#define WRITE_HIGH (32u << 20)
#define WRITE_LOW (4u << 20)
#define REFUSED_LOG_MS 10000   /* after a refused connection's line, one summary per this */

typedef struct conn {
    uv_tcp_t tcp;               /* first: handle pointers cast to conn_t */
    struct store_server *srv;
    list_node_t node;           /* in srv->conns */
    ks_owner_t owner;
    auth_conn_t auth;           /* the token handshake (store_server_guard) */
    uint64_t id;
    char *rbuf;                 /* the unparsed tail of a request, when one is split */
    size_t rlen, rcap;
    size_t need;                /* bytes rbuf must hold before parsing can progress */
    size_t queued;              /* reply bytes handed to uv_write and not yet written */
    struct parked *park;        /* whole requests behind an unanswered WAIT (see the top) */
    struct conn *next_woken;    /* in srv->woken: its WAIT was answered, its parked work is due */
    unsigned char dialect;
    unsigned char closing, paused, wrote_observed;
    unsigned char blocked;      /* a 2.x WAIT of this connection is unanswered */
    int close_err;              /* the socket error that closed it, 0: a plain close */
} conn_t;

/* Requests parked behind a WAIT, as they came (allocated only while there are any). */
typedef struct parked {
    size_t len, cap;
    char data[];
} parked_t;

typedef struct wreq {
    uv_write_t req;
    conn_t *c;
    size_t len;
    char data[];
} wreq_t;

struct store_server {
    uv_loop_t *loop;
    uv_tcp_t *listeners[MAX_LISTENERS];
    int nlisteners;
    uint16_t port;
    store_limits_t lim;
    podrun_log_t log;
    wire_limits_t wl;
    keyspace_t *ks;
    store_guard_t guard;        /* store_server_guard, store_server_allow */
    list_head_t conns;
    size_t nconns;
    uint64_t next_id;
    size_t pending;             /* queued replies + split-request buffers, all connections */
    size_t conn_cap;            /* ... of one connection */
    char *shared;               /* READ_CHUNK bytes lent to whichever connection is reading */
    wire_buf_t out;             /* replies of the read callback that is running */
    conn_t *cur;                /* ... and its connection */
    conn_t *woken, *woken_tail; /* connections whose WAIT was answered while they had parked
                                   requests: served by drain_woken, first woken first */
    int draining;
    wire_str_t *keys;           /* scratch for CHECK/WAIT/MULTI_GET */
    size_t keys_cap;
    char *prefix;
    size_t prefixlen;
    store_write_cb on_write;
    store_close_cb on_close;
    unsigned liveness_ms, liveness_quiet_ms;
    void *obs_arg;
    int closing, handles;
    int limit_logged;
    uv_timer_t *refused_timer;  /* running while refusals are summarised (server_ops.c) */
    unsigned refused_quiet;     /* refusals since the last line */
    char refused_last[96];      /* ... the last one's peer */
    void (*on_closed)(void *);
    void *closed_arg;
    uint64_t ops[WIRE_OP_COUNT];  /* requests handled, by opcode (store_server_stats) */
};


/* server.c */
int server_conn_room(const conn_t *c, size_t more);
void server_conn_over(conn_t *c);
void server_conn_send(conn_t *c, const char *p, size_t len);
void server_peer_name(conn_t *c, char *out, size_t n);
void server_conn_fail(conn_t *c, const char *why);
/* Frees a closing server once its last handle is closed. */
void server_maybe_done(store_server_t *s);
ssize_t server_process(conn_t *c, const char *p, size_t len);

/* server_ops.c */
int server_ops_conn_admitted(conn_t *c);
void server_ops_close(store_server_t *s);
int server_ops_handle(conn_t *c, const wire_req_t *q);
int server_ops_parks(const wire_req_t *q);
int server_ops_park(conn_t *c, const char *p, size_t len);
void server_ops_park_free(conn_t *c);
int server_ops_run_parked(conn_t *c);

#endif
