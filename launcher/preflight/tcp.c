/* launcher/preflight/tcp.c — the tcp check of one link on the loop (see tcp.h). */
#include "launcher/preflight/tcp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"

#define PF_HELLO "podrunpf"
#define PF_HELLO_LEN 8
#define PF_PING_LEN 64
#define PF_CHUNK (256 * 1024)
#define PF_WINDOW 8            /* bulk writes in flight */
#define PF_SERVER_CONNS 256    /* connections one listener serves at once */
#define PF_HOST_ADDR 256

/* The bulk data: zeros; only its count matters. Not const: a const array of zeros would be
 * stored in the file (.rodata), this one is .bss, mapped at run time. Never written. */
static char pf_zeros[PF_CHUNK];

struct pf_write {
    uv_write_t req;
    void *owner;
    char data[PF_PING_LEN + 16];
};

/* ---------- the listener ---------- */

enum { SRV_HELLO, SRV_CMD, SRV_PING, SRV_BLEN, SRV_BULK };

struct pf_conn {
    uv_tcp_t tcp;
    struct pf_tcp_server *s;
    struct pf_conn *next, **pprev;
    int state;
    size_t have;
    unsigned char hdr[PF_PING_LEN];
    uint64_t left, total;
    char rbuf[65536];
};

struct pf_tcp_server {
    uv_tcp_t tcp;
    struct pf_conn *conns;
    int nconns;
    int open;                  /* handles not yet closed: the listener and the connections */
};

static void srv_maybe_free(struct pf_tcp_server *s)
{
    if (s->open == 0)
        free(s);
}

static void srv_conn_closed(uv_handle_t *h)
{
    struct pf_conn *c = h->data;
    struct pf_tcp_server *s = c->s;
    free(c);
    s->open--;
    srv_maybe_free(s);
}

static void srv_conn_close(struct pf_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    c->s->nconns--;
    uv_close((uv_handle_t *)&c->tcp, srv_conn_closed);
}

static void srv_written(uv_write_t *req, int status)
{
    (void)status;   /* a failed write shows as a read error next */
    free(req->data);
}

static void srv_send(struct pf_conn *c, const void *data, size_t len)
{
    struct pf_write *w = malloc(sizeof *w);
    if (!w) {
        srv_conn_close(c);
        return;
    }
    memcpy(w->data, data, len);
    w->req.data = w;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, srv_written) < 0) {
        free(w);
        srv_conn_close(c);
    }
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* Takes bytes into the header until it holds `want`; true when it does. */
static bool srv_take(struct pf_conn *c, const char **p, size_t *n, size_t want)
{
    size_t k = want - c->have < *n ? want - c->have : *n;
    memcpy(c->hdr + c->have, *p, k);
    c->have += k;
    *p += k;
    *n -= k;
    return c->have == want;
}

static void srv_ack(struct pf_conn *c)
{
    unsigned char ack[9] = {'A'};
    put_u64(ack + 1, c->total);
    srv_send(c, ack, sizeof ack);
    c->state = SRV_CMD;
}

/* The listener's side of the protocol: false when the connection is to be closed. */
static bool srv_feed(struct pf_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        switch (c->state) {
        case SRV_HELLO:
            if (!srv_take(c, &p, &n, PF_HELLO_LEN))
                break;
            if (memcmp(c->hdr, PF_HELLO, PF_HELLO_LEN))
                return false;   /* not a podrun agent */
            c->state = SRV_CMD;
            break;
        case SRV_CMD:
            c->have = 0;
            if (*p == 'P') {
                c->state = SRV_PING;
            } else if (*p == 'B') {
                c->state = SRV_BLEN;
                p++, n--;
            } else {
                return false;
            }
            break;
        case SRV_PING:
            if (!srv_take(c, &p, &n, PF_PING_LEN))
                break;
            srv_send(c, c->hdr, PF_PING_LEN);
            c->state = SRV_CMD;
            break;
        case SRV_BLEN:
            if (!srv_take(c, &p, &n, 8))
                break;
            c->total = c->left = get_u64(c->hdr);
            c->state = SRV_BULK;
            if (c->left == 0)
                srv_ack(c);
            break;
        case SRV_BULK: {
            size_t k = n < c->left ? n : (size_t)c->left;
            c->left -= k;
            p += k;
            n -= k;
            if (c->left == 0)
                srv_ack(c);
            break;
        }
        }
    }
    return true;
}

static void srv_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct pf_conn *c = h->data;
    (void)hint;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void srv_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct pf_conn *c = st->data;
    if (n < 0 || (n > 0 && !srv_feed(c, buf->base, (size_t)n)))
        srv_conn_close(c);
}

static void srv_accept(uv_stream_t *l, int status)
{
    struct pf_tcp_server *s = l->data;
    if (status < 0)
        return;
    struct pf_conn *c = calloc(1, sizeof *c);
    if (!c || uv_tcp_init(l->loop, &c->tcp) < 0) {
        free(c);
        return;
    }
    c->s = s;
    c->tcp.data = c;
    c->next = s->conns;
    if (c->next)
        c->next->pprev = &c->next;
    c->pprev = &s->conns;
    s->conns = c;
    s->nconns++;
    s->open++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 || s->nconns > PF_SERVER_CONNS ||
        uv_read_start((uv_stream_t *)&c->tcp, srv_alloc, srv_read) < 0) {
        srv_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
}

static void srv_closed(uv_handle_t *h)
{
    struct pf_tcp_server *s = h->data;
    s->open--;
    srv_maybe_free(s);
}

int pf_tcp_listen(uv_loop_t *loop, const char *host, uint16_t *port, pf_tcp_server_t **out)
{
    struct pf_tcp_server *s = calloc(1, sizeof *s);
    if (!s)
        return UV_ENOMEM;
    struct sockaddr_storage ss;
    const char *h = host && *host ? host : "::";
    int r = uv_ip6_addr(h, 0, (struct sockaddr_in6 *)&ss);
    if (r < 0)
        r = uv_ip4_addr(host && *host ? host : "0.0.0.0", 0, (struct sockaddr_in *)&ss);
    if (r == 0)
        r = uv_tcp_init(loop, &s->tcp);
    if (r < 0) {
        free(s);
        return r;
    }
    s->tcp.data = s;
    s->open = 1;
    r = uv_tcp_bind(&s->tcp, (struct sockaddr *)&ss, 0);
    if (r == UV_EAFNOSUPPORT && !(host && *host)) {   /* no IPv6 here: IPv4 alone */
        uv_ip4_addr("0.0.0.0", 0, (struct sockaddr_in *)&ss);
        r = uv_tcp_bind(&s->tcp, (struct sockaddr *)&ss, 0);
    }
    if (r == 0)
        r = uv_listen((uv_stream_t *)&s->tcp, 1024, srv_accept);
    int len = sizeof ss;
    if (r == 0)
        r = uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&ss, &len);
    if (r < 0) {
        uv_close((uv_handle_t *)&s->tcp, srv_closed);
        return r;
    }
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    *out = s;
    return 0;
}

void pf_tcp_server_close(pf_tcp_server_t *s)
{
    while (s->conns)
        srv_conn_close(s->conns);
    uv_close((uv_handle_t *)&s->tcp, srv_closed);
}

/* ---------- the probe ---------- */

enum { PR_RESOLVE, PR_CONNECT, PR_PING, PR_BULK };

struct pf_tcp_probe {
    uv_loop_t *loop;
    uv_getaddrinfo_t gai;
    uv_connect_t creq;
    uv_tcp_t tcp;
    uv_timer_t timer;
    char where[PF_HOST_ADDR + 16];
    char host[PF_HOST_ADDR];
    uint16_t port;
    uint64_t bytes, timeout_ms;
    pf_tcp_done_cb done;
    void *arg;
    bool finished, cancelled, gai_pending, tcp_open;
    int open;                  /* handles not yet closed */
    int writes;                /* writes in flight */
    int phase;
    int pings;
    uint64_t sent_at;
    double rtt[PF_TCP_PINGS];
    unsigned char rx[PF_PING_LEN];
    size_t have;
    uint64_t queued, bulk_start;
    char rbuf[4096];
};

static void pr_maybe_free(struct pf_tcp_probe *p)
{
    if (p->finished && p->open == 0 && !p->gai_pending && p->writes == 0)
        free(p);
}

static void pr_closed(uv_handle_t *h)
{
    struct pf_tcp_probe *p = h->data;
    p->open--;
    pr_maybe_free(p);
}

static int pr_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The one end of a probe: the callback (unless cancelled), then every handle closes. */
static void pr_finish(struct pf_tcp_probe *p, const struct pf_figure *f)
{
    if (p->finished)
        return;
    p->finished = true;
    uv_timer_stop(&p->timer);
    if (p->gai_pending)
        uv_cancel((uv_req_t *)&p->gai);
    if (!p->cancelled)
        p->done(p->arg, f);
    uv_close((uv_handle_t *)&p->timer, pr_closed);
    if (p->tcp_open)
        uv_close((uv_handle_t *)&p->tcp, pr_closed);
}

static void pr_fail(struct pf_tcp_probe *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void pr_fail(struct pf_tcp_probe *p, const char *fmt, ...)
{
    struct pf_figure f = {.done = true, .ok = false, .rtt = -1, .bw = -1};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f.reason, sizeof f.reason, fmt, ap);
    va_end(ap);
    pr_finish(p, &f);
}

static void pr_written(uv_write_t *req, int status);

static int pr_send(struct pf_tcp_probe *p, const char *data, size_t len, bool copy)
{
    struct pf_write *w = malloc(sizeof *w);
    if (!w)
        return UV_ENOMEM;
    w->owner = p;
    w->req.data = w;
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    if (copy) {
        memcpy(w->data, data, len);
        b.base = w->data;
    }
    int r = uv_write(&w->req, (uv_stream_t *)&p->tcp, &b, 1, pr_written);
    if (r < 0)
        free(w);
    else
        p->writes++;
    return r;
}

static void pr_ping(struct pf_tcp_probe *p)
{
    char msg[PF_PING_LEN] = {'P'};
    p->have = 0;
    p->sent_at = uv_hrtime();
    int r = pr_send(p, msg, sizeof msg, true);
    if (r < 0)
        pr_fail(p, "write to %s: %s", p->where, uv_strerror(r));
}

/* Keeps PF_WINDOW chunks of the block in flight until all of it is queued. */
static void pr_fill(struct pf_tcp_probe *p)
{
    while (!p->finished && p->writes < PF_WINDOW && p->queued < p->bytes) {
        uint64_t k = p->bytes - p->queued < PF_CHUNK ? p->bytes - p->queued : PF_CHUNK;
        int r = pr_send(p, pf_zeros, (size_t)k, false);
        if (r < 0) {
            pr_fail(p, "write to %s: %s", p->where, uv_strerror(r));
            return;
        }
        p->queued += k;
    }
}

static void pr_written(uv_write_t *req, int status)
{
    struct pf_write *w = req->data;
    struct pf_tcp_probe *p = w->owner;
    free(w);
    p->writes--;
    if (p->finished) {
        pr_maybe_free(p);
        return;
    }
    if (status < 0) {
        pr_fail(p, "write to %s: %s", p->where, uv_strerror(status));
        return;
    }
    if (p->phase == PR_BULK)
        pr_fill(p);
}

static void pr_bulk(struct pf_tcp_probe *p)
{
    unsigned char hdr[9] = {'B'};
    put_u64(hdr + 1, p->bytes);
    p->phase = PR_BULK;
    p->have = 0;
    p->queued = 0;
    p->bulk_start = uv_hrtime();
    int r = pr_send(p, (const char *)hdr, sizeof hdr, true);
    if (r < 0) {
        pr_fail(p, "write to %s: %s", p->where, uv_strerror(r));
        return;
    }
    pr_fill(p);
}

/* The echoes, then the acknowledgement of the block: the figures. */
static void pr_feed(struct pf_tcp_probe *p, const char *data, size_t n)
{
    while (n > 0 && !p->finished) {
        size_t want = p->phase == PR_PING ? PF_PING_LEN : 9;
        size_t k = want - p->have < n ? want - p->have : n;
        memcpy(p->rx + p->have, data, k);
        p->have += k;
        data += k;
        n -= k;
        if (p->have < want)
            return;
        if (p->phase == PR_PING) {
            p->rtt[p->pings++] = (double)(uv_hrtime() - p->sent_at) / 1e9;
            if (p->pings < PF_TCP_PINGS)
                pr_ping(p);
            else
                pr_bulk(p);
            continue;
        }
        uint64_t got = get_u64(p->rx + 1);
        if (p->rx[0] != 'A' || got != p->bytes) {
            pr_fail(p, "%s answered the block of %llu bytes with a count of %llu", p->where,
                    (unsigned long long)p->bytes, (unsigned long long)got);
            return;
        }
        double t = (double)(uv_hrtime() - p->bulk_start) / 1e9;
        struct pf_figure f = {.done = true, .ok = true};
        qsort(p->rtt, PF_TCP_PINGS, sizeof *p->rtt, pr_cmp);
        f.rtt = p->rtt[PF_TCP_PINGS / 2];
        f.bw = t > 0 ? (double)p->bytes / t : -1;
        pr_finish(p, &f);
    }
}

static void pr_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct pf_tcp_probe *p = h->data;
    (void)hint;
    *buf = uv_buf_init(p->rbuf, sizeof p->rbuf);
}

static void pr_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct pf_tcp_probe *p = st->data;
    if (p->finished)
        return;
    if (n == UV_EOF)
        pr_fail(p, "%s closed the connection", p->where);
    else if (n < 0)
        pr_fail(p, "read from %s: %s", p->where, uv_strerror((int)n));
    else if (n > 0)
        pr_feed(p, buf->base, (size_t)n);
}

static void pr_connected(uv_connect_t *req, int status)
{
    struct pf_tcp_probe *p = req->data;
    if (p->finished)
        return;
    if (status < 0) {
        pr_fail(p, "connect to %s: %s", p->where, uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&p->tcp, 1);
    int r = uv_read_start((uv_stream_t *)&p->tcp, pr_alloc, pr_read);
    if (r == 0)
        r = pr_send(p, PF_HELLO, PF_HELLO_LEN, true);
    if (r < 0) {
        pr_fail(p, "connect to %s: %s", p->where, uv_strerror(r));
        return;
    }
    p->phase = PR_PING;
    pr_ping(p);
}

static void pr_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct pf_tcp_probe *p = req->data;
    p->gai_pending = false;
    if (p->finished) {
        uv_freeaddrinfo(res);
        pr_maybe_free(p);
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        pr_fail(p, "%s does not resolve: %s", p->host, status < 0 ? uv_strerror(status) : "no "
                "address");
        return;
    }
    int r = uv_tcp_init(p->loop, &p->tcp);
    if (r == 0) {
        p->tcp.data = p;
        p->tcp_open = true;
        p->open++;
        p->creq.data = p;
        p->phase = PR_CONNECT;
        r = uv_tcp_connect(&p->creq, &p->tcp, res->ai_addr, pr_connected);
    }
    uv_freeaddrinfo(res);
    if (r < 0)
        pr_fail(p, "connect to %s: %s", p->where, uv_strerror(r));
}

static void pr_deadline(uv_timer_t *t)
{
    struct pf_tcp_probe *p = t->data;
    static const char *const what[] = {"resolving", "connecting to", "waiting for echoes from",
                                       "sending the block"};
    if (p->phase == PR_BULK)
        pr_fail(p, "timed out after %.1fs with %s, %llu of %llu bytes written", p->timeout_ms /
                1e3, p->where, (unsigned long long)p->queued, (unsigned long long)p->bytes);
    else
        pr_fail(p, "timed out after %.1fs %s %s", p->timeout_ms / 1e3, what[p->phase], p->where);
}

int pf_tcp_probe(uv_loop_t *loop, const char *host, uint16_t port, uint64_t bytes,
                 uint64_t timeout_ms, pf_tcp_done_cb done, void *arg, pf_tcp_probe_t **out)
{
    struct pf_tcp_probe *p = calloc(1, sizeof *p);
    if (!p)
        return UV_ENOMEM;
    p->loop = loop;
    p->port = port;
    p->bytes = bytes;
    p->timeout_ms = timeout_ms;
    p->done = done;
    p->arg = arg;
    snprintf(p->host, sizeof p->host, "%s", host);
    podrun_hostport_format(host, port, p->where, sizeof p->where);
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->open = 1;
    p->gai.data = p;
    int r = uv_getaddrinfo(loop, &p->gai, pr_resolved, p->host, service, &hints);
    if (r < 0) {
        p->finished = true;
        uv_close((uv_handle_t *)&p->timer, pr_closed);
        return r;
    }
    p->gai_pending = true;
    uv_timer_start(&p->timer, pr_deadline, timeout_ms, 0);
    *out = p;
    return 0;
}

void pf_tcp_probe_cancel(pf_tcp_probe_t *p)
{
    if (p->finished)
        return;
    p->cancelled = true;
    pr_finish(p, NULL);
}
