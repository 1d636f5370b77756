/* rdzv/store/client.c — the blocking job-store client (include/podrun/store.h), 2.x dialect. */
#include "podrun/store.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdzv/base/common.h"
#include "rdzv/store/wire.h"

struct podrun_store {
    int fd;
    int io_ms;        /* how long one reply may take (the connect timeout); 0: no limit */
    uint32_t nonce;
    char *rbuf;
    size_t rlen, rcap;
    wire_buf_t out;
};

const char *podrun_store_strerror(int err)
{
    return podrun_strerror(err);
}

/* ---- bytes ---------------------------------------------------------------------------- */

/* deadline_ms for one request and its reply (< 0: none) */
static int64_t io_deadline(const podrun_store_t *s)
{
    return s->io_ms > 0 ? podrun_time_mono_ms() + s->io_ms : -1;
}

/* Waits until fd is ready for `events` or deadline_ms (< 0: none) passes. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        if (deadline_ms < 0)
            return 0;
        int64_t left = deadline_ms - podrun_time_mono_ms();
        if (left <= 0)
            return PODRUN_ETIMEDOUT;
        struct pollfd pfd = {fd, events, 0};
        int pr = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
        if (pr < 0 && errno != EINTR)
            return PODRUN_ECONNRESET;
        if (pr > 0)
            return 0;
    }
}

static int send_all(podrun_store_t *s, const char *p, size_t len, int64_t deadline_ms)
{
    while (len > 0) {
        int w = wait_fd(s->fd, POLLOUT, deadline_ms);
        if (w)
            return w;
        ssize_t n = send(s->fd, p, len, MSG_NOSIGNAL | (deadline_ms >= 0 ? MSG_DONTWAIT : 0));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return PODRUN_ECONNRESET;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int flush(podrun_store_t *s)
{
    int r = send_all(s, s->out.p, s->out.len, io_deadline(s));
    s->out.len = 0;
    return r;
}

/* Reads until a whole reply of `shape` is buffered; its size in *used. deadline_ms < 0: none. */
static int recv_reply(podrun_store_t *s, wire_reply_shape_t shape, uint64_t n,
                      int64_t deadline_ms, wire_reply_t *out, size_t *used)
{
    for (;;) {
        size_t need = 0;
        ssize_t r = wire_reply_parse(shape, n, s->rbuf, s->rlen, &wire_reply_limits, out, &need);
        if (r < 0)
            return PODRUN_EPROTO;
        if (r > 0) {
            *used = (size_t)r;
            return 0;
        }
        size_t want = need > s->rlen + 4096 ? need : s->rlen + 4096;
        if (want > s->rcap) {
            char *b = realloc(s->rbuf, want);
            if (!b)
                return -ENOMEM;
            s->rbuf = b;
            s->rcap = want;
        }
        int w = wait_fd(s->fd, POLLIN, deadline_ms);
        if (w)
            return w;
        ssize_t got = recv(s->fd, s->rbuf + s->rlen, s->rcap - s->rlen, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return PODRUN_ECONNRESET;
        s->rlen += (size_t)got;
    }
}

static void consume(podrun_store_t *s, size_t used)
{
    memmove(s->rbuf, s->rbuf + used, s->rlen - used);
    s->rlen -= used;
}

/* Sends what is in s->out and reads the reply. The caller consumes `*used` bytes after use. */
static int roundtrip(podrun_store_t *s, wire_reply_shape_t shape, uint64_t n, wire_reply_t *rep,
                     size_t *used)
{
    int64_t dl = io_deadline(s);
    int r = send_all(s, s->out.p, s->out.len, dl);
    s->out.len = 0;
    if (r)
        return r;
    return recv_reply(s, shape, n, dl, rep, used);
}

static int put_key_op(podrun_store_t *s, wire_op_t op, const char *key)
{
    s->out.len = 0;
    if (wire_put_op(&s->out, WIRE_V2, op) || wire_put_str(&s->out, key, strlen(key)))
        return -ENOMEM;
    return 0;
}

static int put_keys(podrun_store_t *s, wire_op_t op, const char *const *keys, size_t n)
{
    s->out.len = 0;
    if (wire_put_op(&s->out, WIRE_V2, op) || wire_put_keys(&s->out, keys, n))
        return -ENOMEM;
    return 0;
}

static int dup_val(wire_str_t v, char **val, size_t *len)
{
    char *p = malloc(v.len + 1);
    if (!p)
        return -ENOMEM;
    if (v.len)
        memcpy(p, v.p, v.len);
    p[v.len] = 0;
    *val = p;
    *len = v.len;
    return 0;
}

/* ---- connect --------------------------------------------------------------------------- */

/* One attempt: resolve, connect within the time left, VALIDATE + PING. A negative errno for
 * failures worth retrying (name not resolving yet, refused, reset, timed out). */
static int try_connect(podrun_store_t *s, const char *host, uint16_t port, int64_t deadline)
{
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, portstr, &hints, &res);
    if (g != 0)
        return g == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
    int err = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r < 0 && errno == EINPROGRESS) {
            int64_t left = deadline - podrun_time_mono_ms();
            struct pollfd pfd = {fd, POLLOUT, 0};
            int pr = poll(&pfd, 1, left < 1000 ? 1000 : (left > 60000 ? 60000 : (int)left));
            int soerr = ETIMEDOUT;
            socklen_t sl = sizeof soerr;
            if (pr > 0)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            r = soerr ? -1 : 0;
            errno = soerr;
        }
        if (r < 0) {
            err = -errno;
            close(fd);
            continue;
        }
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        s->fd = fd;
        err = 0;
        break;
    }
    freeaddrinfo(res);
    if (err)
        return err;
    /* VALIDATE, then PING: a server that answers the nonce speaks our dialect */
    s->nonce = (uint32_t)getpid() ^ (uint32_t)podrun_time_mono_ms();
    s->out.len = 0;
    if (wire_put_op(&s->out, WIRE_V2, WIRE_VALIDATE) || wire_put_u32(&s->out, WIRE_MAGIC) ||
        wire_put_op(&s->out, WIRE_V2, WIRE_PING) || wire_put_u32(&s->out, s->nonce))
        return -ENOMEM;
    wire_reply_t rep;
    size_t used;
    int r = flush(s);
    if (!r) {
        int64_t dl = podrun_time_mono_ms() + 10000;
        r = recv_reply(s, WIRE_R_U32, 0, dl > deadline ? dl : deadline, &rep, &used);
    }
    if (!r && rep.u32 != s->nonce)
        r = PODRUN_EPROTO;
    if (!r)
        consume(s, used);
    if (r) {
        close(s->fd);
        s->fd = -1;
        s->rlen = 0;
    }
    return r == PODRUN_ECONNRESET ? -ECONNRESET : r;
}

static int retryable(int err)
{
    return err == -EHOSTUNREACH || err == -ECONNREFUSED || err == -ECONNRESET ||
           err == -ETIMEDOUT || err == -ENETUNREACH || err == -EAGAIN || err == PODRUN_ETIMEDOUT;
}

int podrun_store_connect(const char *host, uint16_t port, int timeout_ms, podrun_store_t **out)
{
    if (!host || !out)
        return -EINVAL;
    podrun_store_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fd = -1;
    s->io_ms = timeout_ms > 0 ? timeout_ms : 0;
    int64_t deadline = podrun_time_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    double delay = 500;
    unsigned seed = (unsigned)getpid() ^ (unsigned)podrun_time_mono_ms();
    for (;;) {
        int r = try_connect(s, host, port, deadline);
        if (r == 0) {
            *out = s;
            return 0;
        }
        int64_t left = deadline - podrun_time_mono_ms();
        if (!retryable(r) || left <= 0) {
            podrun_store_close(s);
            return r == -ECONNRESET ? PODRUN_ECONNRESET
                   : r == -ETIMEDOUT ? PODRUN_ETIMEDOUT : r;
        }
        /* exponential backoff with +/-50 % jitter, never past the deadline */
        double d = wire_backoff_next(&delay, &seed);
        if (d > (double)left)
            d = (double)left;
        struct timespec ts = {(time_t)(d / 1000), (long)((int64_t)d % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

void podrun_store_close(podrun_store_t *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s->rbuf);
    wire_buf_free(&s->out);
    free(s);
}

/* ---- operations ------------------------------------------------------------------------ */

int podrun_store_set(podrun_store_t *s, const char *key, const void *val, size_t len)
{
    if (put_key_op(s, WIRE_SET, key) || wire_put_str(&s->out, val, len))
        return -ENOMEM;
    return flush(s);
}

static int vec_op(podrun_store_t *s, char **val, size_t *len)
{
    wire_reply_t rep;
    size_t used;
    int r = roundtrip(s, WIRE_R_VEC, 0, &rep, &used);
    if (r)
        return r;
    r = dup_val(rep.val, val, len);
    consume(s, used);
    return r;
}

static int num_op(podrun_store_t *s, wire_reply_shape_t shape, wire_reply_t *rep)
{
    size_t used;
    int r = roundtrip(s, shape, 0, rep, &used);
    if (!r)
        consume(s, used);
    return r;
}

int podrun_store_get(podrun_store_t *s, const char *key, char **val, size_t *len)
{
    if (put_key_op(s, WIRE_GET, key))
        return -ENOMEM;
    return vec_op(s, val, len);
}

int podrun_store_add(podrun_store_t *s, const char *key, int64_t delta, int64_t *result)
{
    wire_reply_t rep;
    if (put_key_op(s, WIRE_ADD, key) || wire_put_i64(&s->out, delta))
        return -ENOMEM;
    int r = num_op(s, WIRE_R_I64, &rep);
    if (!r && result)
        *result = rep.num;
    return r;
}

int podrun_store_compare_set(podrun_store_t *s, const char *key, const void *expected,
                             size_t elen, const void *desired, size_t dlen, char **cur,
                             size_t *curlen)
{
    if (put_key_op(s, WIRE_COMPARE_SET, key) || wire_put_str(&s->out, expected, elen) ||
        wire_put_str(&s->out, desired, dlen))
        return -ENOMEM;
    return vec_op(s, cur, curlen);
}

int podrun_store_check(podrun_store_t *s, const char *const *keys, size_t n)
{
    wire_reply_t rep;
    if (put_keys(s, WIRE_CHECK, keys, n))
        return -ENOMEM;
    int r = num_op(s, WIRE_R_U8, &rep);
    if (r)
        return r;
    return rep.u8 == WIRE_READY ? 1 : rep.u8 == WIRE_NOT_READY ? 0 : PODRUN_EPROTO;
}

int podrun_store_wait(podrun_store_t *s, const char *const *keys, size_t n, int timeout_ms)
{
    if (put_keys(s, WIRE_WAIT, keys, n))
        return -ENOMEM;
    int r = flush(s);
    if (r)
        return r;
    wire_reply_t rep;
    size_t used;
    r = recv_reply(s, WIRE_R_U8, 0, timeout_ms < 0 ? -1 : podrun_time_mono_ms() + timeout_ms, &rep, &used);
    if (r == 0) {
        consume(s, used);
        return rep.u8 == WIRE_STOP_WAITING ? 0 : PODRUN_EPROTO;
    }
    if (r != PODRUN_ETIMEDOUT)
        return r;
    /* Cancel on the server; a STOP_WAITING may already be on its way, skip it. */
    s->out.len = 0;
    if (wire_put_op(&s->out, WIRE_V2, WIRE_CANCEL_WAIT))
        return -ENOMEM;
    if ((r = flush(s)))
        return r;
    int64_t dl = io_deadline(s);
    for (;;) {
        if ((r = recv_reply(s, WIRE_R_U8, 0, dl, &rep, &used))) {
            if (r == PODRUN_ETIMEDOUT)
                shutdown(s->fd, SHUT_RDWR); /* out of step with the server: unusable now */
            return r == PODRUN_ETIMEDOUT ? PODRUN_ECONNRESET : r;
        }
        consume(s, used);
        if (rep.u8 == WIRE_WAIT_CANCELED)
            return PODRUN_ETIMEDOUT;
        if (rep.u8 != WIRE_STOP_WAITING)
            return PODRUN_EPROTO;
    }
}

int podrun_store_delete(podrun_store_t *s, const char *key)
{
    wire_reply_t rep;
    if (put_key_op(s, WIRE_DELETE_KEY, key))
        return -ENOMEM;
    int r = num_op(s, WIRE_R_I64, &rep);
    return r ? r : rep.num > 0;
}

int podrun_store_num_keys(podrun_store_t *s, int64_t *n)
{
    wire_reply_t rep;
    s->out.len = 0;
    if (wire_put_op(&s->out, WIRE_V2, WIRE_GETNUMKEYS))
        return -ENOMEM;
    int r = num_op(s, WIRE_R_I64, &rep);
    if (!r)
        *n = rep.num;
    return r;
}

int podrun_store_append(podrun_store_t *s, const char *key, const void *val, size_t len)
{
    if (put_key_op(s, WIRE_APPEND, key) || wire_put_str(&s->out, val, len))
        return -ENOMEM;
    return flush(s);
}

int podrun_store_multi_get(podrun_store_t *s, const char *const *keys, size_t n, char **vals,
                           size_t *lens)
{
    if (put_keys(s, WIRE_MULTI_GET, keys, n))
        return -ENOMEM;
    wire_reply_t rep;
    size_t used;
    int r = roundtrip(s, WIRE_R_VECS, n, &rep, &used);
    if (r)
        return r;
    wire_iter_t it;
    wire_str_t v;
    wire_iter_init(&it, rep.list);
    for (size_t i = 0; i < n; i++) {
        vals[i] = NULL;
        lens[i] = 0;
    }
    for (size_t i = 0; i < n && wire_list_next(&it, &v, NULL); i++) {
        if ((r = dup_val(v, &vals[i], &lens[i])) < 0) {
            for (size_t j = 0; j < i; j++) {
                free(vals[j]);
                vals[j] = NULL;
            }
            break;
        }
    }
    consume(s, used);
    return r;
}

int podrun_store_multi_set(podrun_store_t *s, const char *const *keys, const void *const *vals,
                           const size_t *lens, size_t n)
{
    s->out.len = 0;
    if (wire_put_op(&s->out, WIRE_V2, WIRE_MULTI_SET) || wire_put_u64(&s->out, n))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (wire_put_str(&s->out, keys[i], strlen(keys[i])) ||
            wire_put_str(&s->out, vals[i], lens[i]))
            return -ENOMEM;
    return flush(s);
}

int podrun_store_ping(podrun_store_t *s)
{
    wire_reply_t rep;
    s->out.len = 0;
    s->nonce++;
    if (wire_put_op(&s->out, WIRE_V2, WIRE_PING) || wire_put_u32(&s->out, s->nonce))
        return -ENOMEM;
    int r = num_op(s, WIRE_R_U32, &rep);
    if (r)
        return r;
    return rep.u32 == s->nonce ? 0 : PODRUN_EPROTO;
}
