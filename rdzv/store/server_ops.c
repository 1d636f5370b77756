/* rdzv/store/server_ops.c — one handler per op, the guard's answers, and the requests parked
 * behind an unanswered WAIT (see server.c's top comment for the rules they follow). */
#include "rdzv/store/server_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            podrun_tcp_liveness(fd, s->liveness_ms, s->liveness_quiet_ms);
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
    if (!server_conn_room(c, c->srv->out.len + klen + 8))
        return -ENOBUFS;
    return wire_put_str(&c->srv->out, key, klen);
}

/* ---- one handler per op ------------------------------------------------------------------
 *
 * A handler applies one decoded request to the key space and puts its reply (if the op has one)
 * into the batch of the read callback that is running. It returns 0; or a negative code for
 * server_ops_handle() to close the connection with (-ENOBUFS: a limit on what the connection may hold,
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

/* ADD's answer to a value that is not a number, for the ops that count (ADD, BARRIER). */
static int not_a_number(conn_t *c, const char *op, int r)
{
    char why[160];
    snprintf(why, sizeof why, "%s on a key whose value is not a 64-bit integer%s", op,
             r == -ERANGE ? " (or the sum overflows)" : "");
    server_conn_fail(c, why);
    return CLOSED;
}

static int op_add(conn_t *c, const wire_req_t *q)
{
    int64_t num;
    int r = keyspace_add(c->srv->ks, q->key.p, q->key.len, q->num, &num);
    if (r == -EINVAL || r == -ERANGE)
        return not_a_number(c, "ADD", r);
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

static int op_barrier(conn_t *c, const wire_req_t *q)
{
    int64_t count;
    int r = keyspace_barrier(c->srv->ks, &c->owner, q->key.p, q->key.len, q->num, &count);
    if (r == -EINVAL || r == -ERANGE)
        return not_a_number(c, "BARRIER", r);
    if (r < 0)
        return r;
    report_write(c, q->key.p, q->key.len);
    if (r == 0)
        c->blocked = 1; /* like a WAIT (see the top) */
    return r == 1 ? wire_put_u8(&c->srv->out, WIRE_STOP_WAITING) : 0;
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
        if (!server_conn_room(c, o->len + vlen + 8))
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
    c->blocked = 0; /* server_process() runs what was parked right behind the answer */
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
    [WIRE_BARRIER] = op_barrier,         [WIRE_WATCH_KEY] = op_watch_key,
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
        server_conn_fail(c, line);
        return GUARD_FAIL;
    }
    if (wire_put_str(&s->out, reply, rlen) < 0) {
        server_conn_fail(c, "out of memory");
        return GUARD_FAIL;
    }
    if (r == 0)
        return GUARD_DONE;
    server_conn_send(c, s->out.p, s->out.len);
    s->out.len = 0;
    server_conn_fail(c, line);
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
        server_conn_over(c);
    else
        server_conn_fail(c, "out of memory");
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
        server_conn_fail(c, line);
        return GUARD_FAIL;
    default:
        return GUARD_PASS;
    }
}

/* At accept: a source the guard does not admit is refused with one line, and the client is told
 * so in the bytes it reads first. */
/* A summary's turn: the refusals of the interval in one line; after a quiet interval the
 * timer stops, and the next refusal is told whole again. */
static void on_refused_tick(uv_timer_t *t)
{
    store_server_t *s = t->data;
    if (!s->refused_quiet) {
        uv_timer_stop(t);
        return;
    }
    podrun_logf(&s->log, "refused %u more connection%s in the last %d s, the last from %s: not in "
                         "the job store's allow-list", s->refused_quiet,
                s->refused_quiet == 1 ? "" : "s", REFUSED_LOG_MS / 1000, s->refused_last);
    s->refused_quiet = 0;
}

static void on_refused_timer_closed(uv_handle_t *h)
{
    store_server_t *s = h->data;
    free(h);
    s->handles--;
    server_maybe_done(s);
}

void server_ops_close(store_server_t *s)
{
    if (!s->refused_timer)
        return;
    uv_close((uv_handle_t *)s->refused_timer, on_refused_timer_closed);
    s->refused_timer = NULL;
}

/* A scanner's burst is not a line per connection: the first refusal is logged whole, the
 * rest counted into one line per REFUSED_LOG_MS. True when this one is to be logged whole. */
static bool refused_first(store_server_t *s, const char *peer)
{
    if (!s->refused_timer && (s->refused_timer = malloc(sizeof *s->refused_timer))) {
        uv_timer_init(s->loop, s->refused_timer);
        uv_unref((uv_handle_t *)s->refused_timer);   /* a summary keeps nothing alive */
        s->refused_timer->data = s;
        s->handles++;
    }
    if (!s->refused_timer)
        return true;
    if (uv_is_active((uv_handle_t *)s->refused_timer)) {
        s->refused_quiet++;
        snprintf(s->refused_last, sizeof s->refused_last, "%s", peer);
        return false;
    }
    uv_timer_start(s->refused_timer, on_refused_tick, REFUSED_LOG_MS, REFUSED_LOG_MS);
    return true;
}

int server_ops_conn_admitted(conn_t *c)
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
    server_peer_name(c, name, sizeof name);
    if (refused_first(c->srv, name))
        podrun_logf(&c->srv->log, "refused a connection from %s: not in the job store's "
                                  "allow-list (--store-allow, and the job's own pods or hosts); "
                                  "more refusals are counted, one line per %d s", name,
                    REFUSED_LOG_MS / 1000);
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
int server_ops_handle(conn_t *c, const wire_req_t *q)
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
        server_conn_over(c);
    } else if (r < 0) {
        char why[160];
        snprintf(why, sizeof why, "%s failed: %s", wire_op_name(q->op), ks_error(r));
        server_conn_fail(c, why);
    }
    return -1;
}

/* Whether a request that arrives behind an unanswered WAIT waits for it (see the top). */
int server_ops_parks(const wire_req_t *q)
{
    return wire_reply_shape(q->op) != WIRE_R_NONE && q->op != WIRE_PING &&
           q->op != WIRE_CANCEL_WAIT;
}

/* Keeps one whole request behind c's WAIT; its bytes count as held by the connection. */
int server_ops_park(conn_t *c, const char *p, size_t len)
{
    parked_t *k = c->park;
    size_t have = k ? k->len : 0, cap = k ? k->cap : 0;
    if (!k || have + len > cap) {
        size_t nc = cap ? 2 * cap : 256;
        while (nc < have + len)
            nc *= 2;
        if (!server_conn_room(c, nc - cap))
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

void server_ops_park_free(conn_t *c)
{
    if (c->park) {
        c->srv->pending -= c->park->cap;
        free(c->park);
        c->park = NULL;
    }
}


/* c's WAIT was answered (or cancelled): its parked requests run now, into the batch of the
 * running callback, in order; a parked WAIT that cannot be answered parks the rest again.
 * 0, or -1 when the connection was failed. */
int server_ops_run_parked(conn_t *c)
{
    parked_t *k = c->park;
    if (!k)
        return 0;
    c->park = NULL;
    ssize_t used = server_process(c, k->data, k->len);
    c->srv->pending -= k->cap;
    free(k);
    return used < 0 ? -1 : 0;
}
