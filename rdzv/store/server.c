/* rdzv/store/server.c — moves bytes between client sockets and the key space, on one libuv loop.
 *
 * Per connection: the first bytes tell the dialect (wire_sniff), then requests are decoded with
 * that dialect's op table and applied to the one shared key space. Replies produced while one
 * read callback runs are gathered and written with one syscall; wake-ups of other connections
 * (STOP_WAITING, watch pushes) are written as they happen.
 *
 * The hosting process must ignore SIGPIPE: libuv writes with write(2), and a peer that reset
 * its connection must cost an EPIPE on that connection, not the process.
 *
 * Memory per idle connection is the conn_t below and nothing else: reads land in one buffer
 * shared by the whole server, and only the tail of a request that has not fully arrived yet is
 * copied into a per-connection buffer, which is freed again once that request is complete.
 *
 * Where torch's two servers disagree, the choice made here:
 *  - GET / MULTI_GET of a missing key answers an empty value in both dialects (the 2.x libuv
 *    server's answer; the 1.13 server throws and drops the connection). torch's clients always
 *    WAIT before GET, so they never see the difference; a debugging client keeps its connection.
 *  - ADD on a value that is not a number closes that connection, as both torch servers do (they
 *    throw inside the handler); the key keeps its value.
 *  - COMPARE_SET that creates a key wakes its waiters (2.x libuv server; 1.13 does not, leaving
 *    such a waiter hanging).
 *  - 1.13 abandoned waits: a 1.13 client that times out in WAIT does not tell the server, and the
 *    1.13 server keeps the wait and later sends an unsolicited STOP_WAITING that the client reads
 *    as the answer to a later request. A 1.13 client sends a new request only after the previous
 *    reply, so a WAIT that arrives while the same connection still has one pending means the
 *    client gave up on it: the older wait is dropped and only the newest one is answered. (The
 *    stray byte can still happen when the key appears between the timeout and the next WAIT; no
 *    server can tell that case apart.) 2.x clients cancel explicitly with CANCEL_WAIT.
 *  - WATCH_KEY (1.13 only) registers the connection and pushes KEY_CREATED / KEY_UPDATED /
 *    KEY_DELETED messages (u8 type, key, old value, new value) as 1.13 does.
 *  - Queues live beside the keys as in the 2.x libuv server: GETNUMKEYS and GET do not see
 *    them, CHECK/WAIT count a key with a non-empty queue as existing.
 *  - An unknown opcode, a bad VALIDATE magic, or a length or count over the limits closes the
 *    connection (2.x behaviour since the nmap fix); the server logs it once for that connection.
 *
 * Pipelining behind a WAIT (2.x dialect; an extension no torch client can notice, since torch's
 * clients send nothing but CANCEL_WAIT while a WAIT of theirs is unanswered): the requests that
 * arrive behind a WAIT that could not be answered at once and that have an answer themselves
 * (GET, ADD, another WAIT, ...) are *parked*: they run, in order, right after the WAIT is answered,
 * and their answers go out in the same write as its STOP_WAITING. A client can so send WAIT + GET
 * in one write and have the value in one reply: one write of the server per waiter when a key
 * many wait for appears, instead of a STOP_WAITING, a read and a write. Requests without an answer
 * (SET, APPEND, MULTI_SET, QUEUE_PUSH, VALIDATE), PING and CANCEL_WAIT are handled when they arrive,
 * also behind an unanswered WAIT: a client's records and heartbeats are never held up by its own
 * wait, and a PING's echo may come before the STOP_WAITING (podrun's client picks nonces whose
 * first byte cannot be a WAIT's answer). CANCEL_WAIT ends the wait, and the parked requests run
 * right after its WAIT_CANCELED. (So a parked GET sees a SET sent after it: a pipelining client
 * orders its reads after its WAIT, not after its writes.)
 */
#include "rdzv/store/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/store/keyspace.h"
#include "rdzv/base/list.h"
#include "rdzv/store/wire.h"

#define READ_CHUNK (64 * 1024)
#define MAX_LISTENERS 4
/* A peer that does not read its replies gets no more requests read once this much is queued. */
#define WRITE_HIGH (32u << 20)
#define WRITE_LOW (4u << 20)

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
    unsigned liveness_ms;
    void *obs_arg;
    int closing, handles;
    int limit_logged;
    void (*on_closed)(void *);
    void *closed_arg;
    uint64_t ops[WIRE_OP_COUNT];  /* requests handled, by opcode (store_server_stats) */
};

void store_limits_default(store_limits_t *lim)
{
    lim->max_key_len = 8 * 1024;
    lim->max_value_len = 8 * 1024 * 1024;
    lim->max_keys_per_req = 128 * 1024;
    lim->max_connections = 65536;
    lim->max_total_bytes = (size_t)1 << 30;
    lim->max_pending_bytes = (size_t)256 << 20;
}

/* ---- output ------------------------------------------------------------------------------ */

static void conn_close(conn_t *c);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Whether c may hold `more` bytes beyond what it holds now (queued replies and a split
 * request), within its own cap and the server's budget: a client that does not read its replies,
 * or asks for answers far larger than its requests, must not grow the server without bound. */
static int conn_room(const conn_t *c, size_t more)
{
    const store_server_t *s = c->srv;
    size_t held = c->queued + c->rcap;
    return more <= s->conn_cap - held && held <= s->conn_cap &&
           more <= s->lim.max_pending_bytes - s->pending && s->pending <= s->lim.max_pending_bytes;
}

static void conn_fail(conn_t *c, const char *why);

static void conn_over(conn_t *c)
{
    char why[240];
    snprintf(why, sizeof why,
             "replies and partial requests held for it would pass %zu bytes (%zu held for all "
             "connections, limit --max-pending-bytes %zu): a client must read its replies",
             c->srv->conn_cap, c->srv->pending, c->srv->lim.max_pending_bytes);
    conn_fail(c, why);
}

static void on_written(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    conn_t *c = w->c;
    c->queued -= w->len;
    c->srv->pending -= w->len;
    free(w);
    if (status < 0) {
        if (!c->close_err)
            c->close_err = status;
        conn_close(c);
        return;
    }
    if (c->paused && !c->closing && c->tcp.write_queue_size < WRITE_LOW) {
        c->paused = 0;
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
            conn_close(c);
    }
}

/* Writes now what the socket takes, queues the rest. Errors close the connection. */
static void conn_send(conn_t *c, const char *p, size_t len)
{
    if (c->closing || len == 0)
        return;
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)len)
        return;
    if (n < 0 && n != UV_EAGAIN && n != UV_ENOSYS) {
        conn_close(c);
        return;
    }
    if (n < 0)
        n = 0;
    size_t rest = len - (size_t)n;
    if (!conn_room(c, rest)) {
        conn_over(c);
        return;
    }
    wreq_t *w = malloc(sizeof *w + rest);
    if (!w) {
        conn_close(c);
        return;
    }
    w->c = c;
    w->len = rest;
    memcpy(w->data, p + n, rest);
    b = uv_buf_init(w->data, (unsigned)rest);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
        free(w);
        conn_close(c);
        return;
    }
    c->queued += rest;
    c->srv->pending += rest;
    if (!c->paused && c->tcp.write_queue_size > WRITE_HIGH) {
        c->paused = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* A reply for c: into the batch if c's read callback is running, else straight out. */
static wire_buf_t *reply_buf(conn_t *c, wire_buf_t *tmp)
{
    return c == c->srv->cur ? &c->srv->out : tmp;
}

static void reply_done(conn_t *c, wire_buf_t *b)
{
    if (b != &c->srv->out) {
        conn_send(c, b->p, b->len);
        wire_buf_free(b);
    }
}

static conn_t *owner_conn(ks_owner_t *o)
{
    return container_of(o, conn_t, owner);
}

/* A wait of c completed. Its STOP_WAITING goes out now, or, when requests are parked behind the
 * WAIT, together with their answers once the call that woke it is over (drain_woken): the key
 * space must not be entered from inside its own callback. */
static void on_ready(void *arg, ks_owner_t *owner)
{
    (void)arg;
    conn_t *c = owner_conn(owner);
    store_server_t *s = c->srv;
    static const char stop = WIRE_STOP_WAITING;
    c->blocked = 0;
    if (c == s->cur) {
        /* its own request woke it: the batch gets the STOP_WAITING, and process() runs the
         * parked requests right behind the request that woke it */
        if (wire_put_u8(&s->out, (uint8_t)stop) < 0)
            conn_fail(c, "out of memory"); /* a lost STOP_WAITING would hang the client */
    } else if (c->park && c->park->len) {
        c->next_woken = NULL;
        if (s->woken_tail)
            s->woken_tail->next_woken = c;
        else
            s->woken = c;
        s->woken_tail = c;
    } else {
        conn_send(c, &stop, 1);
    }
}

static void on_watch(void *arg, ks_owner_t *owner, int type, const char *key, size_t klen,
                     const char *old, size_t oldlen, const char *nval, size_t newlen)
{
    (void)arg;
    conn_t *c = owner_conn(owner);
    wire_buf_t tmp = {0}, *b = reply_buf(c, &tmp);
    if (wire_put_u8(b, (uint8_t)type) || wire_put_str(b, key, klen) ||
        wire_put_str(b, old, oldlen) || wire_put_str(b, nval, newlen)) {
        wire_buf_free(&tmp);
        conn_close(c);
        return;
    }
    reply_done(c, b);
}

/* ---- connections ------------------------------------------------------------------------- */

static void server_maybe_done(store_server_t *s);
static void rbuf_free(conn_t *c);
static void park_free(conn_t *c);

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *c = (conn_t *)h;
    store_server_t *s = c->srv;
    keyspace_release(s->ks, &c->owner);
    park_free(c);
    list_unlink(&c->node);
    s->nconns--;
    if (s->nconns < s->lim.max_connections)
        s->limit_logged = 0;
    if (c->wrote_observed && s->on_close)
        s->on_close(s->obs_arg, c->id, c->close_err);
    rbuf_free(c);
    free(c);
    s->handles--;
    server_maybe_done(s);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void peer_name(conn_t *c, char *out, size_t n)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
    }
    snprintf(out, n, "%s:%d", ip, port);
}

/* Bad input or a limit: this connection goes, with one line saying why. */
static void conn_fail(conn_t *c, const char *why)
{
    if (c->closing)
        return;
    char peer[96];
    peer_name(c, peer, sizeof peer);
    podrun_logf(&c->srv->log, "closing connection %llu from %s: %s", (unsigned long long)c->id,
                peer, why);
    conn_close(c);
}

/* ---- requests ---------------------------------------------------------------------------- */

static int observed(store_server_t *s, const char *key, size_t klen)
{
    return s->on_write && klen >= s->prefixlen && memcmp(key, s->prefix, s->prefixlen) == 0;
}

static void report_write(conn_t *c, const char *key, size_t klen)
{
    store_server_t *s = c->srv;
    if (!observed(s, key, klen))
        return;
    const char *v = NULL;
    size_t vlen = 0;
    if (!keyspace_get(s->ks, key, klen, &v, &vlen))
        v = NULL;
    if (!c->wrote_observed && s->liveness_ms) {
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
            podrun_tcp_liveness(fd, s->liveness_ms);
    }
    c->wrote_observed = 1;
    if (s->on_write(s->obs_arg, c->id, key, klen, v, vlen) && v)
        keyspace_delete(s->ks, key, klen);
}

static const char *ks_error(int r)
{
    return r == -ENOSPC ? "the store is full (raise --max-total-bytes)" : "out of memory";
}

/* The keys of a CHECK/WAIT/MULTI_GET as an array (scratch owned by the server). */
static int gather_keys(store_server_t *s, const wire_req_t *req)
{
    if (req->n > s->keys_cap) {
        wire_str_t *k = realloc(s->keys, (size_t)req->n * sizeof *k);
        if (!k)
            return -ENOMEM;
        s->keys = k;
        s->keys_cap = (size_t)req->n;
    }
    wire_iter_t it;
    wire_iter_init(&it, req->list);
    for (size_t i = 0; i < req->n; i++)
        wire_list_next(&it, &s->keys[i], NULL);
    return 0;
}

static int list_key(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    (void)val;
    (void)vlen;
    conn_t *c = arg;
    if (!conn_room(c, c->srv->out.len + klen + 8))
        return -ENOBUFS;
    return wire_put_str(&c->srv->out, key, klen);
}

/* ---- one handler per op ------------------------------------------------------------------
 *
 * A handler applies one decoded request to the key space and puts its reply (if the op has one)
 * into the batch of the read callback that is running. It returns 0; or a negative code for
 * handle() to close the connection with (-ENOBUFS: a limit on what the connection may hold,
 * anything else: the op failed, e.g. -ENOSPC when the store is full); or CLOSED when it closed
 * the connection itself with its own words. */
#define CLOSED 1

typedef int (*op_handler)(conn_t *c, const wire_req_t *q);

/* SET, APPEND, QUEUE_PUSH: a write of q's value to q's key, which the observer may want to see. */
static int write_op(conn_t *c, const wire_req_t *q,
                    int (*write)(keyspace_t *, const char *, size_t, const char *, size_t))
{
    int r = write(c->srv->ks, q->key.p, q->key.len, q->val.p, q->val.len);
    if (r == 0)
        report_write(c, q->key.p, q->key.len);
    return r;
}

static int op_validate(conn_t *c, const wire_req_t *q)
{
    (void)c, (void)q;
    return 0; /* the magic was checked by the parser */
}

static int op_set(conn_t *c, const wire_req_t *q)
{
    return write_op(c, q, keyspace_set);
}

static int op_compare_set(conn_t *c, const wire_req_t *q)
{
    const char *v;
    size_t vlen;
    int r = keyspace_compare_set(c->srv->ks, q->key.p, q->key.len, q->val.p, q->val.len,
                                 q->val2.p, q->val2.len, &v, &vlen);
    if (r < 0)
        return r;
    if (wire_put_str(&c->srv->out, v, vlen) < 0)
        return -ENOMEM;
    if (r == 1)
        report_write(c, q->key.p, q->key.len);
    return 0;
}

static int op_get(conn_t *c, const wire_req_t *q)
{
    const char *v;
    size_t vlen;
    keyspace_get(c->srv->ks, q->key.p, q->key.len, &v, &vlen);
    return wire_put_str(&c->srv->out, v, vlen);
}

static int op_add(conn_t *c, const wire_req_t *q)
{
    int64_t num;
    int r = keyspace_add(c->srv->ks, q->key.p, q->key.len, q->num, &num);
    if (r == -EINVAL || r == -ERANGE) {
        char why[160];
        snprintf(why, sizeof why, "ADD on a key whose value is not a 64-bit integer%s",
                 r == -ERANGE ? " (or the sum overflows)" : "");
        conn_fail(c, why);
        return CLOSED;
    }
    if (r < 0)
        return r;
    r = wire_put_i64(&c->srv->out, num);
    report_write(c, q->key.p, q->key.len);
    return r;
}

static int op_check(conn_t *c, const wire_req_t *q)
{
    store_server_t *s = c->srv;
    int r = gather_keys(s, q);
    if (r < 0)
        return r;
    return wire_put_u8(&s->out, keyspace_check(s->ks, s->keys, (size_t)q->n) ? WIRE_READY
                                                                            : WIRE_NOT_READY);
}

static int op_wait(conn_t *c, const wire_req_t *q)
{
    store_server_t *s = c->srv;
    int r = gather_keys(s, q);
    if (r < 0)
        return r;
    if (c->dialect == WIRE_V1)
        keyspace_cancel_waits(s->ks, &c->owner); /* see the top of this file */
    r = keyspace_wait(s->ks, &c->owner, s->keys, (size_t)q->n);
    if (r == 0 && c->dialect == WIRE_V2)
        c->blocked = 1; /* what has an answer waits behind it (see the top) */
    return r == 1 ? wire_put_u8(&s->out, WIRE_STOP_WAITING) : r;
}

static int op_getnumkeys(conn_t *c, const wire_req_t *q)
{
    (void)q;
    return wire_put_i64(&c->srv->out, (int64_t)keyspace_num_keys(c->srv->ks));
}

static int op_delete_key(conn_t *c, const wire_req_t *q)
{
    int r = keyspace_delete(c->srv->ks, q->key.p, q->key.len);
    if (r == 1)
        report_write(c, q->key.p, q->key.len);
    return wire_put_i64(&c->srv->out, r);
}

static int op_append(conn_t *c, const wire_req_t *q)
{
    return write_op(c, q, keyspace_append);
}

static int op_multi_get(conn_t *c, const wire_req_t *q)
{
    wire_buf_t *o = &c->srv->out;
    wire_iter_t it;
    wire_str_t k;
    const char *v;
    size_t vlen;
    int r = 0;
    wire_iter_init(&it, q->list);
    while (r == 0 && wire_list_next(&it, &k, NULL)) {
        keyspace_get(c->srv->ks, k.p, k.len, &v, &vlen);
        if (!conn_room(c, o->len + vlen + 8))
            return -ENOBUFS;
        r = wire_put_str(o, v, vlen);
    }
    return r;
}

static int op_multi_set(conn_t *c, const wire_req_t *q)
{
    wire_iter_t it;
    wire_str_t k, val;
    int r = 0;
    wire_iter_init(&it, q->list);
    while (r == 0 && wire_list_next(&it, &k, &val))
        if ((r = keyspace_set(c->srv->ks, k.p, k.len, val.p, val.len)) == 0)
            report_write(c, k.p, k.len);
    return r;
}

static int op_cancel_wait(conn_t *c, const wire_req_t *q)
{
    (void)q;
    keyspace_cancel_waits(c->srv->ks, &c->owner);
    c->blocked = 0; /* process() runs what was parked right behind the answer */
    return wire_put_u8(&c->srv->out, WIRE_WAIT_CANCELED);
}

static int op_ping(conn_t *c, const wire_req_t *q)
{
    return wire_put_u32(&c->srv->out, q->u32);
}

static int op_queue_push(conn_t *c, const wire_req_t *q)
{
    return write_op(c, q, keyspace_queue_push);
}

static int op_queue_pop(conn_t *c, const wire_req_t *q)
{
    char *item;
    size_t len;
    int64_t n = keyspace_queue_pop(c->srv->ks, q->key.p, q->key.len, &item, &len);
    int r = wire_put_i64(&c->srv->out, n);
    if (r == 0 && n > 0)
        r = wire_put_str(&c->srv->out, item, len);
    free(item);
    return r;
}

static int op_queue_len(conn_t *c, const wire_req_t *q)
{
    return wire_put_i64(&c->srv->out, keyspace_queue_len(c->srv->ks, q->key.p, q->key.len));
}

static int op_list(conn_t *c, const wire_req_t *q)
{
    (void)q;
    int r = wire_put_i64(&c->srv->out, (int64_t)keyspace_num_keys(c->srv->ks));
    return r ? r : keyspace_foreach(c->srv->ks, list_key, c);
}

static int op_watch_key(conn_t *c, const wire_req_t *q)
{
    int r = keyspace_watch(c->srv->ks, &c->owner, q->key.p, q->key.len);
    return r ? r : wire_put_u8(&c->srv->out, WIRE_KEY_CALLBACK_REGISTERED);
}

static const op_handler ops[WIRE_OP_COUNT] = {
    [WIRE_VALIDATE] = op_validate,       [WIRE_SET] = op_set,
    [WIRE_COMPARE_SET] = op_compare_set, [WIRE_GET] = op_get,
    [WIRE_ADD] = op_add,                 [WIRE_CHECK] = op_check,
    [WIRE_WAIT] = op_wait,               [WIRE_GETNUMKEYS] = op_getnumkeys,
    [WIRE_DELETE_KEY] = op_delete_key,   [WIRE_APPEND] = op_append,
    [WIRE_MULTI_GET] = op_multi_get,     [WIRE_MULTI_SET] = op_multi_set,
    [WIRE_CANCEL_WAIT] = op_cancel_wait, [WIRE_PING] = op_ping,
    [WIRE_QUEUE_PUSH] = op_queue_push,   [WIRE_QUEUE_POP] = op_queue_pop,
    [WIRE_QUEUE_LEN] = op_queue_len,     [WIRE_LIST] = op_list,
    [WIRE_WATCH_KEY] = op_watch_key,
};

/* ---- who may do what (guard.c decides; here its answers are written) ----------------------
 *
 * A refusal closes the connection with one line naming the peer; the key space is untouched. */
enum { GUARD_PASS, GUARD_DONE, GUARD_FAIL };

/* A GET of a handshake key: the challenge or the verdict. A wrong proof is answered with an
 * empty value, written before the connection closes so the agent can say what happened. */
static int guard_handshake(conn_t *c, const wire_req_t *q)
{
    store_server_t *s = c->srv;
    char reply[AUTH_REPLY_MAX], line[200];
    size_t rlen = 0;
    int r = store_guard_answer(&s->guard, &c->auth, q, reply, sizeof reply, &rlen, line,
                               sizeof line);
    if (r < 0 && r != -EACCES) {
        conn_fail(c, line);
        return GUARD_FAIL;
    }
    if (wire_put_str(&s->out, reply, rlen) < 0) {
        conn_fail(c, "out of memory");
        return GUARD_FAIL;
    }
    if (r == 0)
        return GUARD_DONE;
    conn_send(c, s->out.p, s->out.len);
    s->out.len = 0;
    conn_fail(c, line);
    return GUARD_FAIL;
}

static int count_open(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    (void)val, (void)vlen;
    if (!store_guard_hidden(key, klen))
        ++*(size_t *)arg;
    return 0;
}

static int list_open_key(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    if (store_guard_hidden(key, klen))
        return 0;
    return list_key(arg, key, klen, val, vlen);
}

/* LIST and GETNUMKEYS for a connection that may not see podrun's keys. */
static int guard_count(conn_t *c, const wire_req_t *q)
{
    store_server_t *s = c->srv;
    size_t n = 0;
    keyspace_foreach(s->ks, count_open, &n);
    int r = wire_put_i64(&s->out, (int64_t)n);
    if (r == 0 && q->op == WIRE_LIST)
        r = keyspace_foreach(s->ks, list_open_key, c);
    if (r == 0)
        return GUARD_DONE;
    if (r == -ENOBUFS)
        conn_over(c);
    else
        conn_fail(c, "out of memory");
    return GUARD_FAIL;
}

static int guard(conn_t *c, const wire_req_t *q)
{
    char line[600];
    switch (store_guard_check(&c->srv->guard, &c->auth, q, line, sizeof line)) {
    case STORE_GUARD_HANDSHAKE:
        return guard_handshake(c, q);
    case STORE_GUARD_HIDE:
        return guard_count(c, q);
    case STORE_GUARD_REFUSE:
        conn_fail(c, line);
        return GUARD_FAIL;
    default:
        return GUARD_PASS;
    }
}

/* At accept: a source the guard does not admit is refused with one line, and the client is told
 * so in the bytes it reads first. */
static int conn_admitted(conn_t *c)
{
    struct sockaddr_storage peer, self;
    int pl = sizeof peer, sl = sizeof self;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &pl) < 0)
        return 0;
    int known = uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&self, &sl) == 0;
    if (store_guard_admits(&c->srv->guard, (struct sockaddr *)&peer,
                           known ? (struct sockaddr *)&self : NULL))
        return 1;
    char name[96];
    peer_name(c, name, sizeof name);
    podrun_logf(&c->srv->log, "refused a connection from %s: not in the job store's allow-list "
                              "(--store-allow, and the job's own pods or hosts)", name);
    /* the client's answer to its hello: it was refused, not served by some other program */
    char m[4];
    for (int i = 0; i < 4; i++)
        m[i] = (char)(WIRE_REFUSED >> (8 * i));
    uv_buf_t b = uv_buf_init(m, sizeof m);
    (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    return 0;
}

/* Applies one request through its handler. Returns 0, or -1 once the connection is failed: a
 * handler's error costs this connection only, with one line saying why. */
static int handle(conn_t *c, const wire_req_t *q)
{
    int g = c->srv->guard.on ? guard(c, q) : GUARD_PASS;
    if (g != GUARD_PASS)
        return g == GUARD_DONE ? 0 : -1;
    op_handler fn = (unsigned)q->op < WIRE_OP_COUNT ? ops[q->op] : NULL;
    if (fn)
        c->srv->ops[q->op]++;
    int r = fn ? fn(c, q) : -EINVAL;
    if (r == 0)
        return 0;
    if (r == -ENOBUFS) {
        conn_over(c);
    } else if (r < 0) {
        char why[160];
        snprintf(why, sizeof why, "%s failed: %s", wire_op_name(q->op), ks_error(r));
        conn_fail(c, why);
    }
    return -1;
}

static void parse_error(conn_t *c, ssize_t r, const char *p)
{
    char why[200];
    const char *d = c->dialect == WIRE_V2 ? "2.x" : "1.13";
    if (r == PODRUN_EBADOP)
        snprintf(why, sizeof why,
                 "unknown opcode 0x%02x for the torch %s dialect (not a TCPStore client?)",
                 (unsigned char)p[0], d);
    else if (r == PODRUN_EMAGIC)
        snprintf(why, sizeof why, "VALIDATE with a wrong magic number");
    else
        snprintf(why, sizeof why,
                 "a length or key count in a %s request is over the limits (key %zu B, value "
                 "%zu B, %zu keys; see podrun store --help)",
                 d, c->srv->lim.max_key_len, c->srv->lim.max_value_len,
                 c->srv->lim.max_keys_per_req);
    conn_fail(c, why);
}

/* Whether a request that arrives behind an unanswered WAIT waits for it (see the top). */
static int parks(const wire_req_t *q)
{
    return wire_reply_shape(q->op) != WIRE_R_NONE && q->op != WIRE_PING &&
           q->op != WIRE_CANCEL_WAIT;
}

/* Keeps one whole request behind c's WAIT; its bytes count as held by the connection. */
static int park(conn_t *c, const char *p, size_t len)
{
    parked_t *k = c->park;
    size_t have = k ? k->len : 0, cap = k ? k->cap : 0;
    if (have + len > cap) {
        size_t nc = cap ? 2 * cap : 256;
        while (nc < have + len)
            nc *= 2;
        if (!conn_room(c, nc - cap))
            return -ENOBUFS;
        parked_t *g = realloc(k, sizeof *g + nc);
        if (!g)
            return -ENOMEM;
        if (!k)
            g->len = 0;
        g->cap = nc;
        c->srv->pending += nc - cap;
        c->park = k = g;
    }
    memcpy(k->data + k->len, p, len);
    k->len += len;
    return 0;
}

static void park_free(conn_t *c)
{
    if (c->park) {
        c->srv->pending -= c->park->cap;
        free(c->park);
        c->park = NULL;
    }
}

static ssize_t process(conn_t *c, const char *p, size_t len);
static void rbuf_fail(conn_t *c, int r);

/* c's WAIT was answered (or cancelled): its parked requests run now, into the batch of the
 * running callback, in order; a parked WAIT that cannot be answered parks the rest again.
 * 0, or -1 when the connection was failed. */
static int run_parked(conn_t *c)
{
    parked_t *k = c->park;
    if (!k)
        return 0;
    c->park = NULL;
    ssize_t used = process(c, k->data, k->len);
    c->srv->pending -= k->cap;
    free(k);
    return used < 0 ? -1 : 0;
}

/* Decodes and applies every complete request in p[0..len); returns the bytes used, or -1 when
 * the connection was failed. Behind an unanswered WAIT, requests that have an answer are parked;
 * once the WAIT is answered by a request of this same batch, the parked ones run before the
 * requests that follow it. */
static ssize_t process(conn_t *c, const char *p, size_t len)
{
    store_server_t *s = c->srv;
    size_t off = 0;
    c->need = 0;
    while (off < len && !c->closing) {
        if (c->dialect == WIRE_UNKNOWN) {
            c->dialect = (unsigned char)wire_sniff(p + off, len - off);
            if (c->dialect == WIRE_UNKNOWN) {
                c->need = 5;
                break;
            }
        }
        wire_req_t req;
        size_t need = 0;
        ssize_t r = wire_parse((wire_dialect_t)c->dialect, p + off, len - off, &s->wl, &req,
                               &need);
        if (r < 0) {
            parse_error(c, r, p + off);
            return -1;
        }
        if (r == 0) {
            c->need = need;
            break;
        }
        if (c->blocked && parks(&req)) {
            int pr = park(c, p + off, (size_t)r);
            if (pr < 0) {
                rbuf_fail(c, pr);
                return -1;
            }
            off += (size_t)r;
            continue;
        }
        if (handle(c, &req) < 0)
            return -1;
        if (!c->blocked && c->park && run_parked(c) < 0)
            return -1;
        /* replies to a batch of pipelined requests are bounded like everything else */
        if (!conn_room(c, s->out.len)) {
            conn_over(c);
            return -1;
        }
        off += (size_t)r;
    }
    return (ssize_t)off;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    conn_t *c = (conn_t *)h;
    /* A long request already started: read straight into its buffer. */
    if (c->rlen && c->rcap - c->rlen >= READ_CHUNK) {
        *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
        return;
    }
    *buf = uv_buf_init(c->srv->shared, READ_CHUNK);
}

/* Grows the split-request buffer to hold at least `want` bytes: -ENOBUFS over the limits. */
static int rbuf_reserve(conn_t *c, size_t want)
{
    if (want <= c->rcap)
        return 0;
    if (!conn_room(c, want - c->rcap))
        return -ENOBUFS;
    char *b = realloc(c->rbuf, want);
    if (!b)
        return -ENOMEM;
    c->srv->pending += want - c->rcap;
    c->rbuf = b;
    c->rcap = want;
    return 0;
}

static void rbuf_free(conn_t *c)
{
    c->srv->pending -= c->rcap;
    free(c->rbuf);
    c->rbuf = NULL;
    c->rlen = c->rcap = 0;
}

static void rbuf_fail(conn_t *c, int r)
{
    if (r == -ENOBUFS)
        conn_over(c);
    else
        conn_fail(c, "out of memory");
}

/* The connections whose WAIT was answered while requests were parked behind it: each gets its
 * STOP_WAITING and the answers of its parked requests in one write. Runs at the end of every
 * call that can answer a wait (a read, an in-process write), never inside one; what the parked
 * requests wake in turn is served in the same pass. */
static void drain_woken(store_server_t *s)
{
    if (s->draining || s->cur)
        return;
    s->draining = 1;
    conn_t *c;
    while ((c = s->woken)) {
        s->woken = c->next_woken;
        if (!s->woken)
            s->woken_tail = NULL;
        c->next_woken = NULL;
        if (c->closing)
            continue;
        s->cur = c;
        s->out.len = 0;
        if (wire_put_u8(&s->out, WIRE_STOP_WAITING) < 0)
            conn_fail(c, "out of memory");
        else if (run_parked(c) == 0)
            conn_send(c, s->out.p, s->out.len);
        s->cur = NULL;
    }
    if (s->out.cap > (1u << 20))
        wire_buf_free(&s->out);
    s->draining = 0;
}

static void read_conn(conn_t *c, ssize_t nread, const uv_buf_t *buf);

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = (conn_t *)st;
    store_server_t *s = c->srv;
    read_conn(c, nread, buf);
    drain_woken(s);
}

/* Bytes from c: whole requests are applied (replies gathered into one write), an incomplete
 * tail is kept for the next read. */
static void read_conn(conn_t *c, ssize_t nread, const uv_buf_t *buf)
{
    store_server_t *s = c->srv;
    if (nread < 0) {
        c->close_err = nread == UV_EOF ? 0 : (int)nread;
        conn_close(c); /* EOF or reset: the peer went away, nothing to log */
        return;
    }
    if (nread == 0 || c->closing)
        return;
    const char *p = buf->base;
    size_t len = (size_t)nread;
    int in_rbuf = c->rlen > 0;
    if (in_rbuf) {
        if (buf->base == s->shared) { /* a chunk of a split request: append it */
            int rr = rbuf_reserve(c, c->rlen + len);
            if (rr < 0) {
                rbuf_fail(c, rr);
                return;
            }
            memcpy(c->rbuf + c->rlen, buf->base, len);
        }
        c->rlen += len;
        p = c->rbuf;
        len = c->rlen;
        if (len < c->need)
            return;
    }
    s->cur = c;
    s->out.len = 0;
    ssize_t used = process(c, p, len);
    s->cur = NULL;
    if (used >= 0)
        conn_send(c, s->out.p, s->out.len);
    if (s->out.cap > (1u << 20))
        wire_buf_free(&s->out);
    if (used < 0)
        return;
    size_t rest = len - (size_t)used;
    if (rest == 0) {
        rbuf_free(c);
        return;
    }
    /* keep the incomplete request, with room for all of it when its size is known */
    if (in_rbuf) {
        memmove(c->rbuf, c->rbuf + used, rest);
        c->rlen = rest;
    } else {
        c->rlen = 0;
        int rr = rbuf_reserve(c, rest);
        if (rr < 0) {
            rbuf_fail(c, rr);
            return;
        }
        memcpy(c->rbuf, p + used, rest);
        c->rlen = rest;
    }
    int rr = rbuf_reserve(c, c->need);
    if (rr < 0)
        rbuf_fail(c, rr);
}

static void on_connection(uv_stream_t *l, int status)
{
    store_server_t *s = l->data;
    if (status < 0 || s->closing)
        return;
    conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    if (uv_tcp_init(s->loop, &c->tcp) < 0) {
        free(c);
        return;
    }
    c->srv = s;
    c->id = ++s->next_id;
    s->handles++;
    list_push(&s->conns, &c->node);
    s->nconns++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 || (s->guard.acl && !conn_admitted(c))) {
        conn_close(c);
        return;
    }
    if (s->nconns > s->lim.max_connections) {
        if (!s->limit_logged) {
            podrun_logf(&s->log, "%zu connections open, refusing more (raise --max-connections)",
                        s->lim.max_connections);
            s->limit_logged = 1;
        }
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        conn_close(c);
}

/* ---- server ------------------------------------------------------------------------------ */

static void warn_somaxconn(const podrun_log_t *log)
{
    static int warned;
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    long v = 0;
    if (!f)
        return;
    if (fscanf(f, "%ld", &v) != 1)
        v = 0;
    fclose(f);
    if (v > 0 && v < 4096 && !warned) {
        warned = 1;
        podrun_logf(log, "listen backlog limited to %ld by /proc/sys/net/core/somaxconn; jobs "
                         "with more ranks joining at once need `sysctl -w net.core.somaxconn=65535`",
                    v);
    }
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static int listen_on(store_server_t *s, const struct sockaddr *sa)
{
    uv_tcp_t *t = malloc(sizeof *t);
    if (!t)
        return -ENOMEM;
    int r = uv_tcp_init(s->loop, t);
    if (r < 0) {
        free(t);
        return r;
    }
    t->data = s;
    /* backlog: as deep as the kernel allows (it clips to net.core.somaxconn) */
    if ((r = uv_tcp_bind(t, sa, 0)) < 0 ||
        (r = uv_listen((uv_stream_t *)t, 65535, on_connection)) < 0) {
        uv_close((uv_handle_t *)t, free_handle);
        return r;
    }
    s->listeners[s->nlisteners++] = t;
    s->handles++;
    if (!s->port) {
        struct sockaddr_storage ss;
        int len = sizeof ss;
        if (uv_tcp_getsockname(t, (struct sockaddr *)&ss, &len) == 0)
            s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return 0;
}

/* Binds every address `host` names (all interfaces when host is empty), on one port. */
static int bind_all(store_server_t *s, const char *host, uint16_t port)
{
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    if (!host || !*host) {
        uv_ip6_addr("::", port, &a6);
        if (listen_on(s, (struct sockaddr *)&a6) == 0)
            return 0;
        uv_ip4_addr("0.0.0.0", port, &a4);
        return listen_on(s, (struct sockaddr *)&a4);
    }
    uv_getaddrinfo_t gai;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int r = uv_getaddrinfo(s->loop, &gai, NULL, host, NULL, &hints);
    if (r < 0)
        return r;
    int last = UV_EADDRNOTAVAIL;
    for (struct addrinfo *ai = gai.addrinfo; ai && s->nlisteners < MAX_LISTENERS;
         ai = ai->ai_next) {
        if (ai->ai_family == AF_INET6) {
            memcpy(&a6, ai->ai_addr, sizeof a6);
            a6.sin6_port = htons(s->port ? s->port : port);
            last = listen_on(s, (struct sockaddr *)&a6);
        } else if (ai->ai_family == AF_INET) {
            memcpy(&a4, ai->ai_addr, sizeof a4);
            a4.sin_port = htons(s->port ? s->port : port);
            last = listen_on(s, (struct sockaddr *)&a4);
        }
    }
    uv_freeaddrinfo(gai.addrinfo);
    return s->nlisteners ? 0 : last;
}

int store_server_start(uv_loop_t *loop, const char *host, uint16_t port,
                       const store_limits_t *lim, const podrun_log_t *log, store_server_t **out)
{
    store_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    if (log)
        s->log = *log;
    if (lim)
        s->lim = *lim;
    else
        store_limits_default(&s->lim);
    s->wl.max_key_len = s->lim.max_key_len;
    s->wl.max_value_len = s->lim.max_value_len;
    s->wl.max_keys = s->lim.max_keys_per_req;
    if (!s->lim.max_pending_bytes)
        s->lim.max_pending_bytes = (size_t)256 << 20;
    /* one connection: its largest request (COMPARE_SET: a key and two values) plus replies
     * queued up to the point where its reading pauses, within the budget of all */
    s->conn_cap = 2 * s->lim.max_value_len + s->lim.max_key_len + WRITE_HIGH + 2 * READ_CHUNK;
    if (s->conn_cap > s->lim.max_pending_bytes)
        s->conn_cap = s->lim.max_pending_bytes;
    s->wl.max_request = s->lim.max_total_bytes + 2 * s->lim.max_value_len + 1024;
    if (s->wl.max_request > s->conn_cap)
        s->wl.max_request = s->conn_cap;
    s->shared = malloc(READ_CHUNK);
    int r = s->shared ? keyspace_new(s->lim.max_total_bytes, on_ready, on_watch, s, &s->ks)
                      : -ENOMEM;
    if (r == 0)
        r = bind_all(s, host, port);
    if (r < 0) {
        keyspace_free(s->ks);
        free(s->shared);
        free(s);
        return r;
    }
    warn_somaxconn(&s->log);
    *out = s;
    return 0;
}

uint16_t store_server_port(const store_server_t *s)
{
    return s->port;
}

void store_server_observe(store_server_t *s, const char *prefix, store_write_cb on_write,
                          store_close_cb on_close, void *arg)
{
    free(s->prefix);
    s->prefix = strdup(prefix ? prefix : "");
    s->prefixlen = s->prefix ? strlen(s->prefix) : 0;
    s->on_write = on_write;
    s->on_close = on_close;
    s->obs_arg = arg;
}

void store_server_liveness(store_server_t *s, unsigned timeout_ms)
{
    s->liveness_ms = timeout_ms;
}

int store_server_set(store_server_t *s, const char *key, size_t klen, const void *val,
                     size_t vlen)
{
    int r = keyspace_set_unbounded(s->ks, key, klen, val, vlen);
    drain_woken(s);
    return r;
}

int store_server_get(store_server_t *s, const char *key, size_t klen, const char **val,
                     size_t *vlen)
{
    return keyspace_get(s->ks, key, klen, val, vlen);
}

int store_server_delete(store_server_t *s, const char *key, size_t klen)
{
    return keyspace_delete(s->ks, key, klen);
}

size_t store_server_delete_except(store_server_t *s, const char *keep_prefix)
{
    return keyspace_delete_except(s->ks, keep_prefix, keep_prefix ? strlen(keep_prefix) : 0);
}

static void on_listener_closed(uv_handle_t *h)
{
    store_server_t *s = h->data;
    free(h);
    s->handles--;
    server_maybe_done(s);
}

static void server_maybe_done(store_server_t *s)
{
    if (!s->closing || s->handles > 0)
        return;
    void (*cb)(void *) = s->on_closed;
    void *arg = s->closed_arg;
    keyspace_free(s->ks);
    wire_buf_free(&s->out);
    free(s->keys);
    free(s->shared);
    free(s->prefix);
    free(s);
    if (cb)
        cb(arg);
}

void store_server_close(store_server_t *s, void (*on_closed)(void *arg), void *arg)
{
    if (s->closing)
        return;
    s->closing = 1;
    s->on_closed = on_closed;
    s->closed_arg = arg;
    s->handles++; /* held while closing so the last close callback below cannot free s early */
    for (int i = 0; i < s->nlisteners; i++)
        uv_close((uv_handle_t *)s->listeners[i], on_listener_closed);
    for (list_node_t *n = s->conns.first; n; n = n->next) /* closes unlink later */
        conn_close(container_of(n, conn_t, node));
    s->handles--;
    server_maybe_done(s);
}

void store_server_guard(store_server_t *s, const auth_key_t *key, store_may_write_cb may_write,
                        void *arg)
{
    store_guard_set(&s->guard, key, may_write, arg);
}

void store_server_allow(store_server_t *s, const acl_t *acl)
{
    s->guard.acl = acl;
}

void store_server_stats(const store_server_t *s, store_server_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->connections = s->nconns;
    out->accepted = s->next_id;
    for (int i = 0; i < WIRE_OP_COUNT && i < (int)(sizeof out->ops / sizeof *out->ops); i++)
        out->ops[i] = s->ops[i];
    out->keys = keyspace_num_keys(s->ks);
    out->bytes = keyspace_bytes(s->ks);
}
