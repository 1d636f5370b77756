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
 * Where torch's servers disagree, the choice made here (doc/store.md has the table):
 *  - GET / MULTI_GET of a missing key answers an empty value in both dialects (the 2.x libuv
 *    server's answer; the 1.13 server throws and drops the connection). torch's clients always
 *    WAIT before GET, so they never see the difference; a debugging client keeps its connection.
 *  - ADD on a value that is not a number closes that connection, as both torch servers do (they
 *    throw inside the handler); the key keeps its value.
 *  - COMPARE_SET that creates a key wakes its waiters (2.x libuv server; 1.13 and the 2.x classic
 *    server do not, leaving such a waiter hanging). One that changes nothing wakes nobody (the
 *    libuv server wakes the waiters of a key that is still missing).
 *  - BARRIER counts arrivals in its key like ADD 1; the last one releases everyone waiting on the
 *    key, and so does any other write of it (both 2.x servers).
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
#include "rdzv/store/server_int.h"


#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/store/keyspace.h"
#include "rdzv/base/list.h"
#include "rdzv/store/wire.h"

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
int server_conn_room(const conn_t *c, size_t more)
{
    const store_server_t *s = c->srv;
    size_t held = c->queued + c->rcap;
    return more <= s->conn_cap - held && held <= s->conn_cap &&
           more <= s->lim.max_pending_bytes - s->pending && s->pending <= s->lim.max_pending_bytes;
}


void server_conn_over(conn_t *c)
{
    char why[240];
    snprintf(why, sizeof why,
             "replies and partial requests held for it would pass %zu bytes (%zu held for all "
             "connections, limit --max-pending-bytes %zu): a client must read its replies",
             c->srv->conn_cap, c->srv->pending, c->srv->lim.max_pending_bytes);
    server_conn_fail(c, why);
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
void server_conn_send(conn_t *c, const char *p, size_t len)
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
    if (!server_conn_room(c, rest)) {
        server_conn_over(c);
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
        server_conn_send(c, b->p, b->len);
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
        /* its own request woke it: the batch gets the STOP_WAITING, and server_process() runs the
         * parked requests right behind the request that woke it */
        if (wire_put_u8(&s->out, (uint8_t)stop) < 0)
            server_conn_fail(c, "out of memory"); /* a lost STOP_WAITING would hang the client */
    } else if (c->park && c->park->len) {
        c->next_woken = NULL;
        if (s->woken_tail)
            s->woken_tail->next_woken = c;
        else
            s->woken = c;
        s->woken_tail = c;
    } else {
        server_conn_send(c, &stop, 1);
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

static void rbuf_free(conn_t *c);

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *c = (conn_t *)h;
    store_server_t *s = c->srv;
    keyspace_release(s->ks, &c->owner);
    server_ops_park_free(c);
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

void server_peer_name(conn_t *c, char *out, size_t n)
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
void server_conn_fail(conn_t *c, const char *why)
{
    if (c->closing)
        return;
    char peer[96];
    server_peer_name(c, peer, sizeof peer);
    podrun_logf(&c->srv->log, "closing connection %llu from %s: %s", (unsigned long long)c->id,
                peer, why);
    conn_close(c);
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
    server_conn_fail(c, why);
}

static void rbuf_fail(conn_t *c, int r);

/* Decodes and applies every complete request in p[0..len); returns the bytes used, or -1 when
 * the connection was failed. Behind an unanswered WAIT, requests that have an answer are parked;
 * once the WAIT is answered by a request of this same batch, the parked ones run before the
 * requests that follow it. */
ssize_t server_process(conn_t *c, const char *p, size_t len)
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
        if (c->blocked && server_ops_parks(&req)) {
            int pr = server_ops_park(c, p + off, (size_t)r);
            if (pr < 0) {
                rbuf_fail(c, pr);
                return -1;
            }
            off += (size_t)r;
            continue;
        }
        if (server_ops_handle(c, &req) < 0)
            return -1;
        if (!c->blocked && c->park && server_ops_run_parked(c) < 0)
            return -1;
        /* replies to a batch of pipelined requests are bounded like everything else */
        if (!server_conn_room(c, s->out.len)) {
            server_conn_over(c);
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
    if (!server_conn_room(c, want - c->rcap))
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
        server_conn_over(c);
    else
        server_conn_fail(c, "out of memory");
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
            server_conn_fail(c, "out of memory");
        else if (server_ops_run_parked(c) == 0)
            server_conn_send(c, s->out.p, s->out.len);
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
    ssize_t used = server_process(c, p, len);
    s->cur = NULL;
    if (used >= 0)
        server_conn_send(c, s->out.p, s->out.len);
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
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 || (s->guard.acl && !server_ops_conn_admitted(c))) {
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

void store_server_liveness(store_server_t *s, unsigned timeout_ms, unsigned quiet_ms)
{
    s->liveness_ms = timeout_ms;
    s->liveness_quiet_ms = quiet_ms;
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

void server_maybe_done(store_server_t *s)
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
    server_ops_close(s);
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
