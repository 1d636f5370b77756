/* rdzv/store/aclient.c — the asynchronous job-store client (aclient.h), 2.x dialect, libuv.
 *
 * Requests are written as they are made and their replies matched first-in first-out. Behind a
 * WAIT that is not answered yet, podrun's store parks every request that has an answer and
 * answers it right after the WAIT (rdzv/store/server.c), so the FIFO holds, and a WAIT and the GET
 * of its key go out in one write and come back in one reply. PING is the exception: the store
 * echoes it at once, also ahead of a STOP_WAITING, so while a WAIT is unanswered a reply that
 * cannot start a WAIT's answer (0 or 1) is the echo of the oldest PING out; nonces never start with
 * 0 or 1 (store_aclient_ping).
 *
 * A WAIT with a timeout gets the client's one wait timer and is the only WAIT on the wire: it goes
 * out once no other WAIT is, and requests made after it are held back (not written) until it is
 * answered or cancelled. When the timer fires, CANCEL_WAIT is written; the server then answers
 * WAIT_CANCELED, possibly after a STOP_WAITING that raced it. A STOP_WAITING that arrives first
 * still counts as success.
 *
 * After the connection is lost the client stays allocated (requests fail at once with
 * PODRUN_ECONNRESET) until store_aclient_close. */
#include "rdzv/store/aclient.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/random.h>

#include "rdzv/store/acl.h"
#include "rdzv/store/auth.h"
#include "rdzv/base/list.h"
#include "rdzv/store/wire.h"

enum state { S_RESOLVING, S_CONNECTING, S_VALIDATING, S_READY, S_LOST, S_CLOSED };
enum kind { K_NORMAL, K_WAIT, K_CANCEL, K_HELLO, K_SET, K_AUTH, K_PING };

typedef struct areq {
    fifo_node_t node;           /* in wire or held */
    unsigned char kind, shape, timed_out;
    uint64_t n;                 /* MULTI_GET vectors */
    int64_t deadline;           /* WAIT: loop time in ms, < 0 none */
    uint32_t nonce;
    store_reply_cb cb;
    void *arg;
    size_t len;                 /* encoded request */
    char *data;
} areq_t;

typedef struct awrite {
    uv_write_t req;
    store_aclient_t *c;
    areq_t *set;                /* SET: its callback runs when written */
    char data[];
} awrite_t;

struct store_aclient {
    uv_loop_t *loop;
    uv_tcp_t tcp;
    uv_timer_t timer;           /* connect attempts and backoff */
    uv_timer_t wait_timer;
    uv_getaddrinfo_t gai;
    uv_connect_t creq;
    char *host;
    uint16_t port;
    int auth;                   /* store_aclient_auth: 0 none, 1 check only, 2 with key */
    auth_key_t key;
    uint8_t nc[AUTH_NONCE_LEN]; /* this attempt's nonce */
    int state;
    int tcp_open;               /* tcp handle initialised and not closed */
    int handles;                /* open handles; freed at 0 once closing */
    int freeing;
    int64_t deadline;
    double delay;
    unsigned retry_ms;          /* store_aclient_retry_every, 0: back off */
    unsigned seed;
    int last_err;
    int hello_err;              /* the last attempt was accepted but not answered as a store */
    struct sockaddr_storage src; /* store_aclient_source; ss_family 0: the kernel picks */
    fifo_t wire;                /* areq_t on the wire, awaiting replies in order */
    fifo_t held;                /* areq_t held back behind a timed WAIT */
    int waits_out;              /* WAITs on the wire */
    int timed_wait;             /* ... one of them with a timeout (then the only one) */
    int pings_out;              /* PINGs on the wire */
    uint64_t last_heard;        /* loop time (ms) of the last byte from the server */
    unsigned user_timeout_ms;   /* TCP_USER_TIMEOUT and keep-alive for the socket, 0: none */
    unsigned quiet_ms;          /* keep-alive probes after this long without a byte */
    char *rbuf;
    size_t rlen, rcap;
    store_aclient_cb connected, on_lost;
    void *carg, *lost_arg;
};

#define REQ(n) container_of(n, areq_t, node)

static void attempt(store_aclient_t *c);
static void lose(store_aclient_t *c, int err);

/* ---- lifetime ------------------------------------------------------------------------- */

static void free_req(areq_t *q)
{
    free(q->data);
    free(q);
}

static void maybe_free(store_aclient_t *c)
{
    if (!c->freeing || c->handles > 0)
        return;
    free(c->rbuf);
    free(c->host);
    free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    store_aclient_t *c = h->data;
    c->handles--;
    maybe_free(c);
}

static void close_tcp(store_aclient_t *c, uv_close_cb cb)
{
    if (!c->tcp_open)
        return;
    c->tcp_open = 0;
    uv_close((uv_handle_t *)&c->tcp, cb);
}

/* Fails every queued request with err, a caller's CANCEL_WAIT too (the client's own requests,
 * the handshake and a timed WAIT's cancel, have no callback). Callbacks may queue new requests:
 * they fail too. */
static void fail_all(store_aclient_t *c, int err)
{
    for (;;) {
        fifo_node_t *n = fifo_pop(&c->wire);
        if (!n)
            n = fifo_pop(&c->held);
        if (!n)
            break;
        areq_t *q = REQ(n);
        if (q->cb)
            q->cb(c, err, NULL, 0, 0, q->arg);
        free_req(q);
    }
    c->waits_out = c->timed_wait = c->pings_out = 0;
}

static void start_free(store_aclient_t *c)
{
    c->freeing = 1;
    close_tcp(c, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->wait_timer, on_handle_closed);
}

/* ---- writing -------------------------------------------------------------------------- */

static void on_written(uv_write_t *w, int status)
{
    awrite_t *aw = (awrite_t *)w;
    store_aclient_t *c = aw->c;
    areq_t *set = aw->set;
    free(aw);
    if (set) {
        /* after store_aclient_close the write is cancelled: UV_ECANCELED as the header says */
        int st = status >= 0 ? 0 : c->state == S_CLOSED ? UV_ECANCELED : PODRUN_ECONNRESET;
        if (set->cb)
            set->cb(c, st, NULL, 0, 0, set->arg);
        free_req(set);
    }
    if (status < 0 && c->state == S_READY)
        lose(c, status);
}

static int write_bytes(store_aclient_t *c, const char *p, size_t len, areq_t *set)
{
    awrite_t *aw = malloc(sizeof *aw + len);
    if (!aw)
        return -ENOMEM;
    aw->c = c;
    aw->set = set;
    memcpy(aw->data, p, len);
    uv_buf_t b = uv_buf_init(aw->data, (unsigned)len);
    int r = uv_write(&aw->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (r < 0)
        free(aw);
    return r;
}

static void on_wait_timeout(uv_timer_t *t);

/* Puts q on the wire (after its bytes are written its reply is expected at the FIFO tail). */
static int send_req(store_aclient_t *c, areq_t *q)
{
    int r = write_bytes(c, q->data, q->len, q->kind == K_SET ? q : NULL);
    if (r < 0)
        return r;
    free(q->data);
    q->data = NULL;
    if (q->kind == K_SET)
        return 0;
    fifo_push(&c->wire, &q->node);
    c->pings_out += q->kind == K_PING;
    if (q->kind == K_WAIT) {
        c->waits_out++;
        if (q->deadline >= 0) {
            c->timed_wait = 1;
            int64_t left = q->deadline - (int64_t)uv_now(c->loop);
            uv_timer_start(&c->wait_timer, on_wait_timeout, left > 0 ? (uint64_t)left : 0, 0);
        }
    }
    return 0;
}

/* Whether q must wait in `held`: everything behind a timed WAIT (its CANCEL_WAIT may race what
 * follows), and a timed WAIT itself while another WAIT is out. */
static int must_hold(const store_aclient_t *c, const areq_t *q)
{
    return c->timed_wait || (q->kind == K_WAIT && q->deadline >= 0 && c->waits_out > 0);
}

/* Writes held requests until one must wait again. */
static void release_held(store_aclient_t *c)
{
    while (!fifo_empty(&c->held) && !must_hold(c, REQ(c->held.first)) && c->state == S_READY) {
        areq_t *q = REQ(fifo_pop(&c->held));
        if (send_req(c, q) < 0) {
            if (q->cb)
                q->cb(c, PODRUN_ECONNRESET, NULL, 0, 0, q->arg);
            free_req(q);
            lose(c, PODRUN_ECONNRESET);
            return;
        }
    }
}

static int submit(store_aclient_t *c, areq_t *q)
{
    if (c->state != S_READY) {
        free_req(q);
        return c->state == S_LOST ? PODRUN_ECONNRESET : -ENOTCONN;
    }
    if (!fifo_empty(&c->held) || must_hold(c, q)) {
        fifo_push(&c->held, &q->node);
        return 0;
    }
    int r = send_req(c, q);
    if (r < 0)
        free_req(q);
    return r;
}

static areq_t *new_req(int kind, wire_reply_shape_t shape, store_reply_cb cb, void *arg)
{
    areq_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->kind = (unsigned char)kind;
    q->shape = (unsigned char)shape;
    q->cb = cb;
    q->arg = arg;
    q->deadline = -1;
    return q;
}

/* Moves an encoded buffer into q. */
static void take_buf(areq_t *q, wire_buf_t *b)
{
    q->data = b->p;
    q->len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
}

static void on_wait_timeout(uv_timer_t *t)
{
    store_aclient_t *c = t->data;
    fifo_node_t *n = c->wire.first;
    while (n && REQ(n)->kind != K_WAIT)
        n = n->next;
    areq_t *w = n ? REQ(n) : NULL;
    if (!w || w->timed_out || c->state != S_READY)
        return;
    w->timed_out = 1;
    /* CANCEL_WAIT's reply is matched right behind the WAIT */
    areq_t *cq = new_req(K_CANCEL, WIRE_R_U8, NULL, NULL);
    char op = (char)wire_opcode(WIRE_V2, WIRE_CANCEL_WAIT);
    if (!cq || write_bytes(c, &op, 1, NULL) < 0) {
        free(cq);
        lose(c, PODRUN_ECONNRESET);
        return;
    }
    fifo_insert_after(&c->wire, &w->node, &cq->node);
}

/* ---- reading -------------------------------------------------------------------------- */

static void pop_head(store_aclient_t *c)
{
    free_req(REQ(fifo_pop(&c->wire)));
}

static void on_ready_hello(store_aclient_t *c);
static int auth_reply(store_aclient_t *c, const wire_reply_t *rep);

/* Delivers one reply to the request behind `prev` (NULL: the FIFO head; a PING's echo can
 * overtake a WAIT, see the top). Returns 0, or an error to drop the link. */
static int deliver(store_aclient_t *c, fifo_node_t *prev, const wire_reply_t *rep)
{
    areq_t *q = REQ(prev ? prev->next : c->wire.first);
    switch (q->kind) {
    case K_HELLO: {
        int ok = rep->u32 == q->nonce;
        pop_head(c);
        if (!ok)
            return rep->u32 == WIRE_REFUSED ? PODRUN_EREFUSED : PODRUN_EPROTO;
        on_ready_hello(c);
        return 0;
    }
    case K_AUTH:
        return auth_reply(c, rep);
    case K_CANCEL: {
        /* a wrong answer leaves the request queued: the lost link answers it (fail_all) */
        if (rep->u8 != WIRE_WAIT_CANCELED)
            return PODRUN_EPROTO;
        store_reply_cb cb = q->cb;
        void *arg = q->arg;
        pop_head(c);
        if (cb)
            cb(c, 0, NULL, 0, 0, arg);
        return 0;
    }
    case K_PING: {
        if (rep->u32 != q->nonce)
            return PODRUN_EPROTO;
        store_reply_cb cb = q->cb;
        void *arg = q->arg;
        free_req(REQ(fifo_remove_after(&c->wire, prev)));
        c->pings_out--;
        if (cb)
            cb(c, 0, NULL, 0, 0, arg);
        return 0;
    }
    case K_WAIT: {
        /* one WAIT_CANCELED answers the WAIT and the oldest CANCEL_WAIT behind it; with none
         * behind it, or any other answer, the requests stay queued for the lost link */
        fifo_node_t *pc = &q->node;
        while (pc->next && REQ(pc->next)->kind != K_CANCEL)
            pc = pc->next;
        if (rep->u8 != WIRE_STOP_WAITING && (rep->u8 != WIRE_WAIT_CANCELED || !pc->next))
            return PODRUN_EPROTO;
        int timed = q->deadline >= 0;
        int status = rep->u8 == WIRE_STOP_WAITING ? 0 : timed ? PODRUN_ETIMEDOUT : UV_ECANCELED;
        store_reply_cb cb = q->cb;
        void *arg = q->arg;
        areq_t *cq = status < 0 ? REQ(fifo_remove_after(&c->wire, pc)) : NULL;
        pop_head(c);
        if (cq) {
            if (cq->cb)
                cq->cb(c, 0, NULL, 0, 0, cq->arg);
            free_req(cq);
        }
        c->waits_out--;
        if (timed) {
            uv_timer_stop(&c->wait_timer);
            c->timed_wait = 0;
        }
        if (cb)
            cb(c, status, NULL, 0, 0, arg);
        release_held(c);
        return 0;
    }
    default: {
        int64_t num = rep->num;
        store_reply_cb cb = q->cb;
        void *arg = q->arg;
        fifo_pop(&c->wire);
        if (cb)
            cb(c, 0, rep->val.p, rep->val.len, num, arg);
        free_req(q);
        return 0;
    }
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    store_aclient_t *c = h->data;
    (void)hint;
    if (c->rcap - c->rlen < 4096) {
        size_t cap = c->rcap ? c->rcap * 2 : 8192;
        char *p = realloc(c->rbuf, cap);
        if (!p) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        c->rbuf = p;
        c->rcap = cap;
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    store_aclient_t *c = s->data;
    (void)buf;
    if (nread < 0) {
        /* the socket's own error says how (UV_ETIMEDOUT: nothing acknowledged, see
         * store_aclient_liveness); an orderly close is a lost connection */
        lose(c, nread == UV_ENOBUFS ? -ENOMEM : nread == UV_EOF ? PODRUN_ECONNRESET : (int)nread);
        return;
    }
    c->rlen += (size_t)nread;
    if (nread > 0)
        c->last_heard = uv_now(c->loop);
    size_t off = 0;
    while (!fifo_empty(&c->wire) && c->state != S_LOST && c->state != S_CLOSED && off < c->rlen) {
        wire_reply_t rep;
        size_t need = 0;
        fifo_node_t *prev = NULL;
        areq_t *to = REQ(c->wire.first);
        /* an unanswered WAIT ahead: a byte that cannot answer it starts the oldest PING's echo */
        if (to->kind == K_WAIT && c->pings_out > 0 &&
            (unsigned char)c->rbuf[off] > WIRE_WAIT_CANCELED) {
            for (prev = c->wire.first; prev->next && REQ(prev->next)->kind != K_PING;)
                prev = prev->next;
            if (!prev->next) {
                lose(c, PODRUN_EPROTO);
                return;
            }
            to = REQ(prev->next);
        }
        ssize_t r = wire_reply_parse((wire_reply_shape_t)to->shape, to->n, c->rbuf + off,
                                     c->rlen - off, &wire_reply_limits, &rep, &need);
        if (r < 0) {
            lose(c, PODRUN_EPROTO);
            return;
        }
        if (r == 0)
            break;
        int err = deliver(c, prev, &rep);
        off += (size_t)r;
        if (err) {
            lose(c, err);
            return;
        }
    }
    if (c->state == S_LOST || c->state == S_CLOSED)
        return;
    if (fifo_empty(&c->wire) && off < c->rlen) {
        lose(c, PODRUN_EPROTO); /* bytes nobody asked for */
        return;
    }
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
}

/* ---- connecting ----------------------------------------------------------------------- */

static void connect_failed(store_aclient_t *c, int err)
{
    store_aclient_cb cb = c->connected;
    void *arg = c->carg;
    c->state = S_CLOSED;
    fail_all(c, err);
    start_free(c);
    if (cb)
        cb(c, err, arg);
}

static void on_timer_attempt(uv_timer_t *t)
{
    attempt(t->data);
}

static void retry_later(store_aclient_t *c);

static void on_tcp_closed_retry(uv_handle_t *h)
{
    retry_later(h->data);
}

/* After a failed attempt (its TCP handle, if any, closed): back off, or give up at the deadline.
 * Takes the client itself: when name resolution failed there is no TCP handle whose data could
 * point at it. */
static void retry_later(store_aclient_t *c)
{
    c->handles--;
    if (c->freeing) {
        maybe_free(c);
        return;
    }
    int64_t left = c->deadline - (int64_t)uv_now(c->loop);
    if (left <= 0) {
        connect_failed(c, c->last_err == -ECONNREFUSED || c->last_err == UV_ECONNREFUSED
                              ? PODRUN_ETIMEDOUT : c->last_err ? c->last_err : PODRUN_ETIMEDOUT);
        return;
    }
    /* a refusal by the allow-list may lift (a pod's address joins it), but not within one
     * short interval: backed off, so the store logs a few lines, not one per interval */
    double d = c->retry_ms && c->last_err != PODRUN_EREFUSED
                   ? c->retry_ms * (0.5 + (double)rand_r(&c->seed) / RAND_MAX)
                   : wire_backoff_next(&c->delay, &c->seed);
    if (d > (double)left)
        d = (double)left;
    c->state = S_RESOLVING;
    uv_timer_start(&c->timer, on_timer_attempt, (uint64_t)d, 0);
}

/* This attempt failed: back off and try again while time is left. */
static void retry(store_aclient_t *c, int err)
{
    c->last_err = err;
    c->hello_err = c->state == S_VALIDATING ? err : 0;
    uv_timer_stop(&c->timer);
    fail_all(c, PODRUN_ECONNRESET); /* only the internal hello can be queued here */
    c->rlen = 0;
    if (c->tcp_open) {
        c->tcp_open = 0;
        uv_close((uv_handle_t *)&c->tcp, on_tcp_closed_retry);
        return;
    }
    c->handles++; /* balance the decrement in the shared path */
    retry_later(c);
}

static void become_ready(store_aclient_t *c);
static int auth_send(store_aclient_t *c, int proof, const char *key);

/* The store is there and speaks 2.x: ready, or first the token handshake. */
static void on_ready_hello(store_aclient_t *c)
{
    char key[AUTH_KEY_MAX];
    if (!c->auth) {
        become_ready(c);
        return;
    }
    if (getrandom(c->nc, sizeof c->nc, 0) != (ssize_t)sizeof c->nc) {
        connect_failed(c, -EIO);
        return;
    }
    auth_client_hello(c->nc, key, sizeof key);
    if (auth_send(c, 0, key) < 0)
        retry(c, PODRUN_ECONNRESET);
}

static void become_ready(store_aclient_t *c)
{
    uv_timer_stop(&c->timer);
    c->state = S_READY;
    if (c->connected)
        c->connected(c, 0, c->carg);
}

/* One GET of the handshake (rdzv/store/auth.h): the hello (proof 0) or the proof (1). */
static int auth_send(store_aclient_t *c, int proof, const char *key)
{
    areq_t *q = new_req(K_AUTH, WIRE_R_VEC, NULL, NULL);
    wire_buf_t b = {0};
    if (!q || wire_put_op(&b, WIRE_V2, WIRE_GET) || wire_put_str(&b, key, strlen(key))) {
        free(q);
        wire_buf_free(&b);
        return -ENOMEM;
    }
    q->nonce = (uint32_t)proof;
    take_buf(q, &b);
    int r = send_req(c, q);
    if (r < 0)
        free_req(q);
    return r;
}

/* The store's answer to a handshake GET. A store that holds another token, or asks for one
 * this client lacks, or asks for none while this client has one, is not retried: the
 * configuration, not the network, is wrong. */
static int auth_reply(store_aclient_t *c, const wire_reply_t *rep)
{
    areq_t *q = REQ(c->wire.first);
    int proof = q->nonce != 0;
    char key[AUTH_KEY_MAX];
    pop_head(c);
    if (proof) {
        if (auth_client_accepted(rep->val.p, rep->val.len))
            become_ready(c);
        else
            connect_failed(c, PODRUN_EAUTH);
        return 0;
    }
    if (c->auth == 1) {
        if (rep->val.len == 0)
            become_ready(c);
        else
            connect_failed(c, PODRUN_EAUTHNEEDED);
        return 0;
    }
    int r = auth_client_prove(&c->key, c->nc, rep->val.p, rep->val.len, key, sizeof key);
    if (r == AUTH_OPEN)
        connect_failed(c, PODRUN_EAUTHOPEN);
    else if (r < 0)
        connect_failed(c, PODRUN_EAUTH);
    else if (auth_send(c, 1, key) < 0)
        return PODRUN_ECONNRESET;
    return 0;
}

/* The kernel's part of noticing a lost server (store_aclient_liveness). */
static void apply_liveness(store_aclient_t *c)
{
    uv_os_fd_t fd;
    if (c->user_timeout_ms && c->tcp_open && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
        podrun_tcp_liveness(fd, c->user_timeout_ms, c->quiet_ms);
}

static void on_connected(uv_connect_t *req, int status)
{
    store_aclient_t *c = req->data;
    /* closed while connecting (timed out, closed by the user): whoever closed it has dealt
     * with the attempt already */
    if (c->state == S_CLOSED || status == UV_ECANCELED || !c->tcp_open)
        return;
    if (status < 0) {
        retry(c, status);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    apply_liveness(c);
    c->state = S_VALIDATING;
    wire_buf_t b = {0};
    uint32_t nonce = (uint32_t)uv_hrtime() ^ (uint32_t)(uintptr_t)c;
    areq_t *q = new_req(K_HELLO, WIRE_R_U32, NULL, NULL);
    if (!q || wire_put_op(&b, WIRE_V2, WIRE_VALIDATE) || wire_put_u32(&b, WIRE_MAGIC) ||
        wire_put_op(&b, WIRE_V2, WIRE_PING) || wire_put_u32(&b, nonce) ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        free(q);
        wire_buf_free(&b);
        connect_failed(c, -ENOMEM);
        return;
    }
    q->nonce = nonce;
    take_buf(q, &b);
    if (send_req(c, q) < 0) {
        free_req(q);
        retry(c, PODRUN_ECONNRESET);
    }
}

static void on_attempt_timeout(uv_timer_t *t)
{
    store_aclient_t *c = t->data;
    if (c->state == S_CONNECTING || c->state == S_VALIDATING)
        retry(c, PODRUN_ETIMEDOUT);
}

static void connect_to(store_aclient_t *c, struct sockaddr_storage ss);

static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res)
{
    store_aclient_t *c = gai->data;
    c->handles--;
    if (c->freeing) {
        uv_freeaddrinfo(res);
        maybe_free(c);
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        retry(c, status < 0 ? status : UV_EAI_NONAME);
        return;
    }
    struct sockaddr_storage ss;
    memcpy(&ss, res->ai_addr, res->ai_addrlen);
    uv_freeaddrinfo(res);
    connect_to(c, ss);
}

static void connect_to(store_aclient_t *c, struct sockaddr_storage ss)
{
    if (uv_tcp_init(c->loop, &c->tcp) < 0) {
        connect_failed(c, -ENOMEM);
        return;
    }
    c->tcp.data = c;
    c->tcp_open = 1;
    c->handles++;
    c->state = S_CONNECTING;
    c->creq.data = c;
    int r = 0;
    /* only where the store is on this machine: there the kernel would pick the loopback
     * address; towards another machine it picks the outgoing interface's, which routes back */
    if (c->src.ss_family && c->src.ss_family == ss.ss_family &&
        store_aclient_is_local((struct sockaddr *)&ss))
        r = uv_tcp_bind(&c->tcp, (struct sockaddr *)&c->src, 0);
    if (r == 0)
        r = uv_tcp_connect(&c->creq, &c->tcp, (struct sockaddr *)&ss, on_connected);
    if (r < 0) {
        retry(c, r);
        return;
    }
    int64_t left = c->deadline - (int64_t)uv_now(c->loop);
    uint64_t tmo = left < 1000 ? 1000 : left > 10000 ? 10000 : (uint64_t)left;
    uv_timer_start(&c->timer, on_attempt_timeout, tmo, 0);
}

static void attempt(store_aclient_t *c)
{
    char port[8];
    snprintf(port, sizeof port, "%u", c->port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    c->state = S_RESOLVING;
    /* a numeric address needs no lookup, and a lookup would start libuv's thread pool */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (uv_ip4_addr(c->host, c->port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(c->host, c->port, (struct sockaddr_in6 *)&ss) == 0) {
        connect_to(c, ss);
        return;
    }
    c->gai.data = c;
    c->handles++; /* the pending lookup keeps c alive */
    int r = uv_getaddrinfo(c->loop, &c->gai, on_resolved, c->host, port, &hints);
    if (r < 0) {
        c->handles--;
        connect_failed(c, r);
    }
}

int store_aclient_connect(uv_loop_t *loop, const char *host, uint16_t port, int timeout_ms,
                          store_aclient_cb connected, void *arg, store_aclient_t **out)
{
    if (!loop || !host)
        return -EINVAL;
    store_aclient_t *c = calloc(1, sizeof *c);
    if (!c || !(c->host = strdup(host))) {
        free(c);
        return -ENOMEM;
    }
    c->loop = loop;
    c->port = port;
    c->connected = connected;
    c->carg = arg;
    c->delay = 500;
    c->seed = (unsigned)uv_hrtime();
    c->deadline = (int64_t)uv_now(loop) + (timeout_ms > 0 ? timeout_ms : 0);
    uv_timer_init(loop, &c->timer);
    uv_timer_init(loop, &c->wait_timer);
    c->timer.data = c->wait_timer.data = c;
    c->handles = 2;
    /* start from the loop, so `connected` never runs inside this call */
    uv_timer_start(&c->timer, on_timer_attempt, 0, 0);
    if (out)
        *out = c;
    return 0;
}

void store_aclient_auth(store_aclient_t *c, const auth_key_t *key)
{
    c->auth = key ? 2 : 1;
    if (key)
        c->key = *key;
}

void store_aclient_retry_every(store_aclient_t *c, unsigned interval_ms)
{
    c->retry_ms = interval_ms;
}

void store_aclient_liveness(store_aclient_t *c, unsigned timeout_ms, unsigned quiet_ms)
{
    c->user_timeout_ms = timeout_ms;
    c->quiet_ms = quiet_ms;
    if (c->state == S_READY || c->state == S_VALIDATING)
        apply_liveness(c);
}

static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return sa->sa_family == AF_INET6 &&
           (IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127));
}

static int held_here(const struct sockaddr *sa)
{
    uv_interface_address_t *ifs;
    int n, found = 0;
    if (uv_interface_addresses(&ifs, &n) < 0)
        return 0;
    for (int i = 0; i < n && !found; i++)
        found = acl_same_ip((const struct sockaddr *)&ifs[i].address, sa);
    uv_free_interface_addresses(ifs, n);
    return found;
}

int store_aclient_is_local(const struct sockaddr *sa)
{
    return is_loopback(sa) || held_here(sa);
}

int store_aclient_source(store_aclient_t *c, const char *addr)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (!c)
        return -EINVAL;
    if (!addr || !*addr) {
        c->src.ss_family = 0;
        return 0;
    }
    if (uv_ip4_addr(addr, 0, (struct sockaddr_in *)&ss) &&
        uv_ip6_addr(addr, 0, (struct sockaddr_in6 *)&ss))
        return -EINVAL;
    c->src = ss;
    return 0;
}

int store_aclient_hello_error(const store_aclient_t *c)
{
    return c ? c->hello_err : 0;
}

void store_aclient_on_lost(store_aclient_t *c, store_aclient_cb on_lost, void *arg)
{
    c->on_lost = on_lost;
    c->lost_arg = arg;
}

static void lose(store_aclient_t *c, int err)
{
    if (c->state == S_LOST || c->state == S_CLOSED)
        return;
    if (c->state != S_READY) { /* still connecting: that attempt failed */
        retry(c, err);
        return;
    }
    c->state = S_LOST;
    uv_timer_stop(&c->wait_timer);
    close_tcp(c, on_handle_closed);
    fail_all(c, PODRUN_ECONNRESET);
    if (c->on_lost)
        c->on_lost(c, err, c->lost_arg);
}

/* ---- operations ----------------------------------------------------------------------- */

static int key_req(store_aclient_t *c, int kind, wire_op_t op, wire_reply_shape_t shape,
                   const char *key, const void *val, size_t vlen, int with_val, int64_t num,
                   int with_num, store_reply_cb cb, void *arg)
{
    areq_t *q = new_req(kind, shape, cb, arg);
    wire_buf_t b = {0};
    if (!q || wire_put_op(&b, WIRE_V2, op) || wire_put_str(&b, key, strlen(key)) ||
        (with_val && wire_put_str(&b, val, vlen)) || (with_num && wire_put_i64(&b, num))) {
        free(q);
        wire_buf_free(&b);
        return -ENOMEM;
    }
    take_buf(q, &b);
    return submit(c, q);
}

int store_aclient_set(store_aclient_t *c, const char *key, const void *val, size_t len,
                      store_reply_cb cb, void *arg)
{
    return key_req(c, K_SET, WIRE_SET, WIRE_R_NONE, key, val, len, 1, 0, 0, cb, arg);
}

int store_aclient_get(store_aclient_t *c, const char *key, store_reply_cb cb, void *arg)
{
    return key_req(c, K_NORMAL, WIRE_GET, WIRE_R_VEC, key, NULL, 0, 0, 0, 0, cb, arg);
}

int store_aclient_add(store_aclient_t *c, const char *key, int64_t delta, store_reply_cb cb,
                      void *arg)
{
    return key_req(c, K_NORMAL, WIRE_ADD, WIRE_R_I64, key, NULL, 0, 0, delta, 1, cb, arg);
}

int store_aclient_delete(store_aclient_t *c, const char *key, store_reply_cb cb, void *arg)
{
    return key_req(c, K_NORMAL, WIRE_DELETE_KEY, WIRE_R_I64, key, NULL, 0, 0, 0, 0, cb, arg);
}

int store_aclient_cancel_wait(store_aclient_t *c, store_reply_cb cb, void *arg)
{
    if (c->timed_wait)
        return -EINVAL;
    areq_t *q = new_req(K_CANCEL, WIRE_R_U8, cb, arg);
    wire_buf_t b = {0};
    if (!q || wire_put_op(&b, WIRE_V2, WIRE_CANCEL_WAIT)) {
        free(q);
        wire_buf_free(&b);
        return -ENOMEM;
    }
    take_buf(q, &b);
    return submit(c, q);
}

int store_aclient_ping(store_aclient_t *c, store_reply_cb cb, void *arg)
{
    areq_t *q = new_req(K_PING, WIRE_R_U32, cb, arg);
    wire_buf_t b = {0};
    /* the echo's first byte must not be one a WAIT's answer starts with (see the top) */
    uint32_t nonce = (uint32_t)rand_r(&c->seed);
    nonce = (nonce & ~0xFFu) | (2 + nonce % 254);
    if (!q || wire_put_op(&b, WIRE_V2, WIRE_PING) || wire_put_u32(&b, nonce)) {
        free(q);
        wire_buf_free(&b);
        return -ENOMEM;
    }
    q->nonce = nonce;
    take_buf(q, &b);
    return submit(c, q);
}

uint64_t store_aclient_last_heard(const store_aclient_t *c)
{
    return c->last_heard;
}

int store_aclient_wait(store_aclient_t *c, const char *const *keys, size_t n, int timeout_ms,
                       store_reply_cb cb, void *arg)
{
    areq_t *q = new_req(K_WAIT, WIRE_R_U8, cb, arg);
    wire_buf_t b = {0};
    if (!q || wire_put_op(&b, WIRE_V2, WIRE_WAIT) || wire_put_keys(&b, keys, n)) {
        free(q);
        wire_buf_free(&b);
        return -ENOMEM;
    }
    take_buf(q, &b);
    q->deadline = timeout_ms < 0 ? -1 : (int64_t)uv_now(c->loop) + timeout_ms;
    return submit(c, q);
}

void store_aclient_close(store_aclient_t *c)
{
    if (!c || c->freeing)
        return;
    c->state = S_CLOSED;
    uv_timer_stop(&c->timer);
    uv_timer_stop(&c->wait_timer);
    if (c->handles > 2 + c->tcp_open) /* a name lookup is in flight */
        uv_cancel((uv_req_t *)&c->gai);
    fail_all(c, UV_ECANCELED);
    start_free(c);
}
