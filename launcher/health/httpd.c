/* launcher/health/httpd.c — the health port's HTTP server (httpd.h).
 *
 * A connection's life: accepted (its timer armed for timeout_ms) -> reading the head into its own
 * buffer -> one answer written -> shut down and closed. Two handles per connection (the socket
 * and its timer); the connection is freed when both have closed. The server itself is freed when
 * it is closing and its listener and every connection are gone. */
#include "launcher/health/httpd.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum conn_state { C_READING, C_WRITING, C_CLOSING };

struct conn {
    struct httpd *d;
    struct conn *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    enum conn_state state;
    int handles;            /* open handles of the two */
    char *out;              /* the answer being written */
    size_t len;
    char buf[];             /* max_request bytes of request head */
};

struct httpd {
    uv_loop_t *loop;
    uv_tcp_t listener;
    struct httpd_limits lim;
    httpd_handler handler;
    void *arg;
    struct conn *conns;
    struct httpd_stats st;
    int port;
    int closing;
    int listener_open;
};

static void maybe_free(struct httpd *d)
{
    if (d->closing && !d->listener_open && !d->conns)
        free(d);
}

static void conn_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->handles > 0)
        return;
    struct httpd *d = c->d;
    if (c->prev)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    d->st.open--;
    free(c->out);
    free(c);
    maybe_free(d);
}

static void conn_close(struct conn *c)
{
    if (c->state == C_CLOSING)
        return;
    c->state = C_CLOSING;
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    conn_close(req->data);
}

/* The answer is out: no more to say, so the write side is shut and the connection closed. */
static void on_written(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    if (c->state != C_WRITING)
        return;
    c->sreq.data = c;
    if (status < 0 || uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
        conn_close(c);
}

/* Writes status line, headers and (except for HEAD) the body in one write, then closes. Takes
 * body (malloc'ed or NULL). */
static void conn_answer(struct conn *c, int status, const char *ctype, char *body, size_t blen,
                        int head_only)
{
    struct httpd *d = c->d;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                      status, reason_phrase(status), ctype, blen);
    size_t bl = head_only ? 0 : blen;
    c->out = malloc((size_t)hl + bl);
    if (!c->out) {
        free(body);
        conn_close(c);
        return;
    }
    memcpy(c->out, head, (size_t)hl);
    if (bl)
        memcpy(c->out + hl, body, bl);
    free(body);
    c->len = (size_t)hl + bl;
    d->st.answered[status / 100 < 6 ? status / 100 : 5]++;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->state = C_WRITING;
    c->wreq.data = c;
    uv_buf_t b = uv_buf_init(c->out, (unsigned)c->len);
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
        conn_close(c);
}

/* An error answer of our own: a line of text. */
static void conn_error(struct conn *c, int status, const char *text)
{
    size_t n = strlen(text);
    char *body = malloc(n + 1);
    if (body)
        memcpy(body, text, n + 1);
    c->d->st.bad += status == 400 || status == 414 || status == 431;
    conn_answer(c, status, "text/plain; charset=utf-8", body, body ? n : 0, 0);
}

/* A whole head arrived: the handler answers GET and HEAD. */
static void conn_request(struct conn *c, const struct httpd_request *req)
{
    if (req->method == HTTPD_M_OTHER) {
        conn_error(c, 405, "only GET and HEAD are served here\n");
        return;
    }
    struct httpd_reply r = {500, "text/plain; charset=utf-8", NULL, 0};
    c->d->handler(c->d->arg, req, &r);
    conn_answer(c, r.status, r.content_type, r.body, r.len, req->method == HTTPD_M_HEAD);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct conn *c = h->data;
    size_t room = c->d->lim.max_request - c->len;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)room);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    struct conn *c = s->data;
    if (c->state != C_READING)
        return;
    if (n < 0) {   /* EOF before a whole head, or an error: nobody to answer */
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    struct httpd_request req;
    switch (httpd_request_parse(c->buf, c->len, &req)) {
    case HTTPD_PARSE_DONE:
        conn_request(c, &req);
        break;
    case HTTPD_PARSE_BAD:
        conn_error(c, 400, "not an HTTP/1.x request\n");
        break;
    case HTTPD_PARSE_LONG:
        conn_error(c, 414, "the path is too long\n");
        break;
    case HTTPD_PARSE_MORE:
        if (c->len >= c->d->lim.max_request)
            conn_error(c, 431, "the request head is too long\n");
        break;
    }
}

/* timeout_ms since accept: a client that is too slow to send or to read goes. */
static void on_timeout(uv_timer_t *t)
{
    struct conn *c = t->data;
    c->d->st.timeouts++;
    conn_close(c);
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct httpd *d = server->data;
    if (status < 0 || d->closing)
        return;
    if (d->st.open >= (size_t)d->lim.max_conns) {
        /* taken off the listen queue and closed at once: a flood costs its own sockets only */
        uv_tcp_t *t = malloc(sizeof *t);
        if (!t)
            return;
        uv_tcp_init(d->loop, t);
        uv_accept(server, (uv_stream_t *)t);
        d->st.busy++;
        uv_close((uv_handle_t *)t, on_refused_closed);
        return;
    }
    struct conn *c = calloc(1, sizeof *c + d->lim.max_request);
    if (!c)
        return;
    c->d = d;
    uv_tcp_init(d->loop, &c->tcp);
    uv_timer_init(d->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = d->conns;
    if (d->conns)
        d->conns->prev = c;
    d->conns = c;
    d->st.open++;
    d->st.accepted++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, on_timeout, d->lim.timeout_ms, 0);
}

/* host:port, or every address: [::] dual-stack where the kernel has IPv6, else 0.0.0.0. */
static int bind_listener(struct httpd *d, const char *host, int port)
{
    struct sockaddr_storage ss;
    if (host && *host) {
        if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) &&
            uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss))
            return -EINVAL;
        return uv_tcp_bind(&d->listener, (const struct sockaddr *)&ss, 0);
    }
    uv_ip6_addr("::", port, (struct sockaddr_in6 *)&ss);
    int r = uv_tcp_bind(&d->listener, (const struct sockaddr *)&ss, 0);
    if (r == UV_EAFNOSUPPORT || r == UV_EADDRNOTAVAIL) {
        uv_ip4_addr("0.0.0.0", port, (struct sockaddr_in *)&ss);
        r = uv_tcp_bind(&d->listener, (const struct sockaddr *)&ss, 0);
    }
    return r;
}

static void on_listener_closed(uv_handle_t *h)
{
    struct httpd *d = h->data;
    d->listener_open = 0;
    maybe_free(d);
}

int httpd_start(uv_loop_t *loop, const char *host, int port, const struct httpd_limits *lim,
                httpd_handler handler, void *arg, struct httpd **out)
{
    struct httpd *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->loop = loop;
    d->lim = (struct httpd_limits){16, 8192, 5000};
    if (lim) {
        if (lim->max_conns > 0)
            d->lim.max_conns = lim->max_conns;
        if (lim->max_request >= 64)
            d->lim.max_request = lim->max_request;
        if (lim->timeout_ms > 0)
            d->lim.timeout_ms = lim->timeout_ms;
    }
    d->handler = handler;
    d->arg = arg;
    uv_tcp_init(loop, &d->listener);
    d->listener.data = d;
    d->listener_open = 1;
    int r = bind_listener(d, host, port);
    if (!r)
        r = uv_listen((uv_stream_t *)&d->listener, 128, on_connection);
    if (r) {
        d->closing = 1;
        uv_close((uv_handle_t *)&d->listener, on_listener_closed);
        return r;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&d->listener, (struct sockaddr *)&ss, &len);
    d->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    *out = d;
    return 0;
}

int httpd_port(const struct httpd *d)
{
    return d->port;
}

void httpd_stats(const struct httpd *d, struct httpd_stats *out)
{
    *out = d->st;
}

void httpd_close(struct httpd *d)
{
    if (!d || d->closing)
        return;
    d->closing = 1;
    uv_close((uv_handle_t *)&d->listener, on_listener_closed);
    for (struct conn *c = d->conns; c; c = c->next)
        conn_close(c);
}
