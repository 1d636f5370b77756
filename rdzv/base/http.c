/* rdzv/base/http.c — libcurl's multi-socket interface on a libuv loop (rdzv/base/http.h).
 *
 * libcurl says which sockets it wants watched (socket callback -> one uv_poll per socket) and
 * when it wants to run next (timer callback -> the client's one uv_timer); each poll event or
 * timer expiry is handed back to curl_multi_socket_action, after which finished transfers are
 * collected from curl_multi_info_read.
 *
 * libcurl forbids adding or removing an easy handle from inside its own callbacks, and the only
 * user code that runs inside libcurl is on_data (the write callback). So a request started or
 * cancelled while the client is inside curl_multi_socket_action is only marked, and the marks are
 * settled right after that call returns. Likewise, closing the client from any callback only
 * marks it; the teardown runs when the outermost dispatch unwinds.
 *
 * Every request has its own uv_timer (the idle timeout) even when unused, so that a request's
 * memory has exactly one release path: the timer's close callback. The client is freed when its
 * last handle (timer, polls, request timers) has closed. */
#include "rdzv/base/http.h"

/* CURLOPT_PROTOCOLS is the way to name the protocols before libcurl 7.85 (below) */
#define CURL_DISABLE_DEPRECATION
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_MAX_BODY_DEFAULT (4u << 20)
#define HTTP_MAX_BODY_LIMIT ((size_t)1 << 30)    /* keeps the buffer arithmetic far from overflow */
#define HTTP_CONNECT_TIMEOUT_DEFAULT_MS 10000

struct http_sock {
    uv_poll_t poll;
    http_client_t *c;
    curl_socket_t fd;
    struct http_sock *prev, *next;
};

struct http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;           /* libcurl's wake-up */
    int in_curl;                /* inside curl_multi_socket_action: no add/remove allowed */
    int depth;                  /* nested dispatches that may run user callbacks */
    int closing;
    int torn_down;
    size_t handles;             /* open uv handles; the client is freed when closing and 0 */
    size_t active;
    http_request_t *reqs;       /* started, not finished or cancelled */
    struct http_sock *socks;
};

struct http_request {
    http_client_t *c;
    http_request_t *prev, *next;
    CURL *easy;
    struct curl_slist *hdrs;
    uv_timer_t idle;
    int idle_ms;
    enum http_body_mode mode;
    size_t max;
    http_data_cb on_data;
    http_done_cb on_done;
    void *arg;
    unsigned added : 1;         /* in the multi handle */
    unsigned cancelled : 1;
    unsigned finishing : 1;     /* on_done is running or has run */
    int streaming;              /* -1: undecided (no body byte yet), 1: to on_data, 0: buffer */
    int err;                    /* decided by the client or a callback; wins over libcurl's code */
    char *buf;
    size_t len, cap;
    char errtext[160];
    char curl_err[CURL_ERROR_SIZE];
    int pem_fd[3];              /* memfds holding PEM text for a libcurl without blobs, or -1 */
};

static unsigned http_global_users;

/* podrun runs with whatever libcurl the image has (rdzv/base/curl_dl.c), and the one-file build is
 * built against older headers (Debian 11's 7.74), so the options newer than 7.71 are named by their
 * numbers, which are libcurl's ABI; a libcurl that does not know one answers
 * CURLE_UNKNOWN_OPTION and the older way is taken (request_set_pem, request_set_protocols). */
#ifndef CURLOPT_PROTOCOLS_STR /* 7.85 */
#define CURLOPT_PROTOCOLS_STR ((CURLoption)(CURLOPTTYPE_STRINGPOINT + 318))
#endif
#ifndef CURLOPT_CAINFO_BLOB /* 7.77 */
#define CURLOPT_CAINFO_BLOB ((CURLoption)(CURLOPTTYPE_BLOB + 309))
#endif
#if LIBCURL_VERSION_NUM < 0x074d00 /* 7.77 */
#define CURLE_SSL_CLIENTCERT ((CURLcode)98)
#endif

/* ---- error values ---- */

static const struct {
    CURLcode code;
    int err;
} curl_errors[] = {
    {CURLE_COULDNT_RESOLVE_HOST, -EHOSTUNREACH},
    {CURLE_COULDNT_RESOLVE_PROXY, -EHOSTUNREACH},
    {CURLE_COULDNT_CONNECT, -ECONNREFUSED},
    {CURLE_OPERATION_TIMEDOUT, -ETIMEDOUT},
    {CURLE_PEER_FAILED_VERIFICATION, -EKEYREJECTED},
    {CURLE_SSL_CONNECT_ERROR, -EPROTO},
    {CURLE_SSL_CLIENTCERT, -EPROTO},
    {CURLE_WEIRD_SERVER_REPLY, -EPROTO},
    {CURLE_HTTP2, -EPROTO},
    {CURLE_BAD_CONTENT_ENCODING, -EPROTO},
    {CURLE_GOT_NOTHING, -ECONNRESET},
    {CURLE_RECV_ERROR, -ECONNRESET},
    {CURLE_SEND_ERROR, -ECONNRESET},
    {CURLE_PARTIAL_FILE, -ECONNRESET},
    {CURLE_URL_MALFORMAT, -EINVAL},
    {CURLE_UNSUPPORTED_PROTOCOL, -EINVAL},
    {CURLE_SSL_CERTPROBLEM, -EINVAL},
    {CURLE_SSL_CACERT_BADFILE, -EINVAL},
    {CURLE_SSL_CIPHER, -EINVAL},
    {CURLE_SSL_ENGINE_NOTFOUND, -EINVAL},
    {CURLE_SSL_ENGINE_SETFAILED, -EINVAL},
    {CURLE_BAD_FUNCTION_ARGUMENT, -EINVAL},
    {CURLE_OUT_OF_MEMORY, -ENOMEM},
};

/* The code a finished transfer's CURLcode stands for. A refused connect keeps the OS's own
 * reason (refused, unreachable) when libcurl saw one. */
static int http_error_from_curl(CURLcode code, CURL *easy)
{
    if (code == CURLE_OK)
        return 0;
    if (code == CURLE_COULDNT_CONNECT) {
        long os = 0;
        if (curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os) == CURLE_OK && os > 0)
            return -(int)os;
    }
    for (size_t i = 0; i < sizeof curl_errors / sizeof curl_errors[0]; i++)
        if (curl_errors[i].code == code)
            return curl_errors[i].err;
    return -EIO;
}

/* Records the client's own failure for r (the first one wins). */
static void request_set_error(http_request_t *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void request_set_error(http_request_t *r, int err, const char *fmt, ...)
{
    if (r->err)
        return;
    r->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->errtext, sizeof r->errtext, fmt, ap);
    va_end(ap);
}

/* ---- handle bookkeeping ---- */

static void client_free_if_done(http_client_t *c)
{
    if (!c->torn_down || c->handles > 0)
        return;
    free(c);
    if (--http_global_users == 0)
        curl_global_cleanup();
}

static void handle_closed(uv_handle_t *h)
{
    http_client_t *c = h->data;
    c->handles--;
    client_free_if_done(c);
}

static void sock_closed(uv_handle_t *h)
{
    struct http_sock *s = (struct http_sock *)h;
    http_client_t *c = s->c;
    free(s);
    c->handles--;
    client_free_if_done(c);
}

static void sock_close(struct http_sock *s)
{
    http_client_t *c = s->c;
    if (s->prev)
        s->prev->next = s->next;
    else
        c->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    uv_close((uv_handle_t *)&s->poll, sock_closed);
}

static void request_closed(uv_handle_t *h)
{
    http_request_t *r = h->data;
    http_client_t *c = r->c;
    free(r);
    c->handles--;
    client_free_if_done(c);
}

static void request_unlink(http_request_t *r)
{
    http_client_t *c = r->c;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->active--;
}

static void request_close_pems(http_request_t *r)
{
    for (int i = 0; i < 3; i++) {
        if (r->pem_fd[i] >= 0)
            close(r->pem_fd[i]);
        r->pem_fd[i] = -1;
    }
}

/* Releases everything r holds; its memory goes when its timer has closed. r is already unlinked
 * and out of the multi handle. */
static void request_release(http_request_t *r)
{
    if (r->easy)
        curl_easy_cleanup(r->easy);
    r->easy = NULL;
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    request_close_pems(r);
    free(r->buf);
    r->buf = NULL;
    uv_close((uv_handle_t *)&r->idle, request_closed);
}

static void request_detach(http_request_t *r)
{
    if (r->added)
        curl_multi_remove_handle(r->c->multi, r->easy);
    r->added = 0;
    request_unlink(r);
}

/* ---- body handling ---- */

/* Appends to r's buffer, keeping it NUL-terminated and within max_body. */
static int request_buffer(http_request_t *r, const char *p, size_t n)
{
    if (n > r->max - r->len) {
        request_set_error(r, -EMSGSIZE, "response over %zu bytes (the bound for this request)",
                          r->max);
        return -EMSGSIZE;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        if (cap > r->max + 1)
            cap = r->max + 1;
        char *b = realloc(r->buf, cap);
        if (!b) {
            request_set_error(r, -ENOMEM, "out of memory buffering the response");
            return -ENOMEM;
        }
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, p, n);
    r->len += n;
    r->buf[r->len] = '\0';
    return 0;
}

/* Hands one piece to on_data. Non-zero when the request must stop (error or cancelled). */
static int request_deliver(http_request_t *r, const char *p, size_t n)
{
    int rc = r->on_data(r, p, n, r->arg);
    if (r->cancelled)
        return 1;
    if (rc) {
        request_set_error(r, rc < 0 ? rc : -EIO, "the response was refused by its reader");
        return 1;
    }
    return 0;
}

static int request_deliver_line(http_request_t *r, const char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    return request_deliver(r, p, n);
}

/* Splits incoming bytes into lines. Complete lines go out straight from libcurl's buffer when
 * nothing is pending; only a partial line is copied, and it may not outgrow max_body. */
static int request_feed_lines(http_request_t *r, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        if (take > r->max - r->len) {
            request_set_error(r, -EMSGSIZE, "response line over %zu bytes (the bound for this "
                              "request)", r->max);
            return 1;
        }
        if (!nl)
            return request_buffer(r, p, n) ? 1 : 0;
        int stop;
        if (r->len) {
            if (request_buffer(r, p, take))
                return 1;
            size_t line = r->len;
            r->len = 0;
            stop = request_deliver_line(r, r->buf, line);
        } else {
            stop = request_deliver_line(r, p, take);
        }
        if (stop)
            return 1;
        p += take + 1;
        n -= take + 1;
    }
    return 0;
}

static void request_touch(http_request_t *r)
{
    if (r->idle_ms > 0 && !r->cancelled)
        uv_timer_again(&r->idle);
}

static size_t on_curl_header(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    http_request_t *r = ud;
    if (r->cancelled)
        return 0;
    request_touch(r);
    return size * n;
}

static size_t on_curl_write(char *p, size_t size, size_t n, void *ud)
{
    http_request_t *r = ud;
    size_t len = size * n;
    if (r->cancelled || r->err)
        return 0;
    request_touch(r);
    if (r->streaming < 0) {
        long code = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        r->streaming = r->mode != HTTP_BODY_BUFFER && code >= 200 && code < 300;
    }
    int stop;
    if (!r->streaming)
        stop = request_buffer(r, p, len) != 0;
    else if (r->mode == HTTP_BODY_CHUNKS)
        stop = request_deliver(r, p, len);
    else
        stop = request_feed_lines(r, p, len);
    return stop ? 0 : len;
}

/* ---- finishing ---- */

/* Ends r with libcurl's code (or the client's recorded error): on_done runs unless r was
 * cancelled, then r is released. */
static void request_finish(http_request_t *r, CURLcode code)
{
    request_detach(r);
    if (!r->cancelled) {
        struct http_result res = {0};
        r->finishing = 1;
        if (r->err == 0 && code == CURLE_OK && r->streaming == 1 && r->mode == HTTP_BODY_LINES &&
            r->len > 0) {
            size_t n = r->len;
            r->len = 0;
            request_deliver_line(r, r->buf, n);
        }
        if (!r->cancelled) {
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &res.http_status);
            if (r->err) {
                res.status = r->err;
                res.error = r->errtext;
            } else {
                res.status = http_error_from_curl(code, r->easy);
                res.error = code == CURLE_OK ? "" : r->curl_err[0] ? r->curl_err
                                                                  : curl_easy_strerror(code);
            }
            if (r->streaming != 1 && r->buf) {
                res.body = r->buf;
                res.body_len = r->len;
            }
            r->cancelled = 1; /* nothing more may run for r, whatever on_done does */
            r->on_done(r, &res, r->arg);
        }
    }
    request_release(r);
}

static void client_collect(http_client_t *c)
{
    CURLMsg *m;
    int left;
    while (!c->closing && (m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        char *priv = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        if (priv)
            request_finish((http_request_t *)priv, m->data.result);
    }
}

/* Settles what was marked while libcurl was running: cancelled requests leave the multi handle
 * (which also drops any completion message libcurl queued for them), new ones enter it. A
 * request that cannot enter ends through on_done, which may start or cancel others, so each
 * step starts over from the head of the list. */
static void client_settle(http_client_t *c)
{
    for (;;) {
        http_request_t *r = c->reqs;
        while (r && !r->cancelled && r->added)
            r = r->next;
        if (!r || c->closing)
            return;
        if (r->cancelled) {
            request_detach(r);
            request_release(r);
            continue;
        }
        CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
        if (mc == CURLM_OK) {
            r->added = 1;
        } else {
            request_set_error(r, -EIO, "could not start the request: %s",
                              curl_multi_strerror(mc));
            request_finish(r, CURLE_OK);
        }
    }
}

static void client_teardown(http_client_t *c)
{
    while (c->reqs) {
        http_request_t *r = c->reqs;
        r->cancelled = 1;
        request_detach(r);
        request_release(r);
    }
    /* Close the polls before libcurl closes their sockets; curl then finds no socket data. */
    while (c->socks) {
        curl_multi_assign(c->multi, c->socks->fd, NULL);
        sock_close(c->socks);
    }
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    c->torn_down = 1;
    uv_close((uv_handle_t *)&c->timer, handle_closed);
}

static void client_leave(http_client_t *c)
{
    if (--c->depth == 0 && c->closing && !c->torn_down)
        client_teardown(c);
}

/* One turn of libcurl for a socket event or its timer, then whatever that turn finished. */
static void client_action(http_client_t *c, curl_socket_t fd, int flags)
{
    int running;
    if (c->closing)
        return;
    c->depth++;
    c->in_curl = 1;
    curl_multi_socket_action(c->multi, fd, flags, &running);
    c->in_curl = 0;
    client_settle(c);
    client_collect(c);
    client_leave(c);
}

/* ---- libcurl's socket and timer callbacks ---- */

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct http_sock *s = (struct http_sock *)p;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    client_action(s->c, s->fd, flags);
}

static int on_curl_socket(CURL *e, curl_socket_t fd, int what, void *ud, void *sp)
{
    (void)e;
    http_client_t *c = ud;
    struct http_sock *s = sp;
    if (what == CURL_POLL_REMOVE) {
        if (s)
            sock_close(s);
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        if (uv_poll_init_socket(c->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->c = c;
        s->fd = fd;
        s->poll.data = c;
        s->next = c->socks;
        if (c->socks)
            c->socks->prev = s;
        c->socks = s;
        c->handles++;
        curl_multi_assign(c->multi, fd, s);
    }
    int events = 0;
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    if (events)
        uv_poll_start(&s->poll, events, on_poll);
    else
        uv_poll_stop(&s->poll);
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    client_action(t->data, CURL_SOCKET_TIMEOUT, 0);
}

static int on_curl_timer(CURLM *m, long ms, void *ud)
{
    (void)m;
    http_client_t *c = ud;
    if (ms < 0)
        uv_timer_stop(&c->timer);
    else
        uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
    return 0;
}

static void on_idle(uv_timer_t *t)
{
    http_request_t *r = t->data;
    http_client_t *c = r->c;
    if (r->cancelled || c->closing)
        return;
    c->depth++;
    request_set_error(r, -ETIMEDOUT, "no data from the server for %d ms", r->idle_ms);
    request_finish(r, CURLE_OK);
    client_leave(c);
}

/* ---- public API ---- */

#define HTTP_FD_SCAN 1024

/* Which of the descriptors below HTTP_FD_SCAN are open. */
static void http_fds_open(unsigned char open_now[HTTP_FD_SCAN])
{
    for (int fd = 0; fd < HTTP_FD_SCAN; fd++)
        open_now[fd] = fcntl(fd, F_GETFD) != -1;
}

/* The descriptors that were not open before (`before`) get close-on-exec: libcurl 7.x makes the
 * multi handle's wake-up socket pair without it, and a worker would inherit it. Those open
 * before are left as they are: a descriptor podrun was given may be meant for its workers. */
static void http_fds_cloexec_new(const unsigned char before[HTTP_FD_SCAN])
{
    for (int fd = 3; fd < HTTP_FD_SCAN; fd++) {
        int fl = before[fd] ? -1 : fcntl(fd, F_GETFD);
        if (fl != -1 && !(fl & FD_CLOEXEC))
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

int http_client_new(uv_loop_t *loop, http_client_t **out)
{
    unsigned char before[HTTP_FD_SCAN];
    if (http_global_users == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return http_library_error() ? -ELIBACC : -EIO;
    http_global_users++;
    http_client_t *c = calloc(1, sizeof *c);
    if (!c)
        goto nomem;
    c->loop = loop;
    http_fds_open(before);
    c->multi = curl_multi_init();
    http_fds_cloexec_new(before);
    if (!c->multi) {
        free(c);
        goto nomem;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->handles = 1;
    *out = c;
    return 0;
nomem:
    if (--http_global_users == 0)
        curl_global_cleanup();
    return -ENOMEM;
}

void http_client_close(http_client_t *c)
{
    if (!c || c->closing)
        return;
    c->closing = 1;
    if (c->depth == 0)
        client_teardown(c);
}

size_t http_client_active(const http_client_t *c)
{
    return c->active;
}

static int has_line_break(const char *s)
{
    return s && strpbrk(s, "\r\n") != NULL;
}

static int request_add_header(http_request_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int request_add_header(http_request_t *r, const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return -EINVAL;
    struct curl_slist *l = curl_slist_append(r->hdrs, line);
    if (!l)
        return -ENOMEM;
    r->hdrs = l;
    return 0;
}

/* Hands PEM text to libcurl: as a blob, or, where libcurl has no blob options (before 7.71, or
 * 7.77 for the CAs), as a memory file named /proc/self/fd/N that lives as long as the request.
 * The text never touches a disk either way. 0 or a CURLcode. */
static CURLcode request_set_pem(http_request_t *r, int slot, CURLoption blob_opt,
                                CURLoption file_opt, const char *pem, size_t len)
{
    struct curl_blob b = {(void *)pem, len, CURL_BLOB_COPY};
    CURLcode rc = curl_easy_setopt(r->easy, blob_opt, &b);
    if (rc != CURLE_UNKNOWN_OPTION && rc != CURLE_NOT_BUILT_IN)
        return rc;
    int fd = memfd_create("podrun-pem", MFD_CLOEXEC);
    if (fd < 0)
        return CURLE_OUT_OF_MEMORY;
    r->pem_fd[slot] = fd;
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, pem + off, len - off);
        if (n <= 0)
            return CURLE_WRITE_ERROR;
        off += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return curl_easy_setopt(r->easy, file_opt, path);
}

static int request_set_tls(http_request_t *r, const struct http_tls *t)
{
    CURL *e = r->easy;
    int rc = 0;
    if (t->insecure) {
        rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (t->ca_file || t->ca_pem) {
        /* Only the CAs given: not those of the system's CA directory as well. */
        rc |= curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
        if (t->ca_file)
            rc |= curl_easy_setopt(e, CURLOPT_CAINFO, t->ca_file);
        if (t->ca_pem) {
            rc |= curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
            rc |= request_set_pem(r, 0, CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO, t->ca_pem,
                                  t->ca_pem_len);
        }
    }
    if (t->cert_file || t->cert_pem)
        rc |= curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    if (t->cert_file)
        rc |= curl_easy_setopt(e, CURLOPT_SSLCERT, t->cert_file);
    if (t->cert_pem)
        rc |= request_set_pem(r, 1, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERT, t->cert_pem,
                              t->cert_pem_len);
    if (t->key_file || t->key_pem)
        rc |= curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    if (t->key_file)
        rc |= curl_easy_setopt(e, CURLOPT_SSLKEY, t->key_file);
    if (t->key_pem)
        rc |= request_set_pem(r, 2, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEY, t->key_pem,
                              t->key_pem_len);
    return rc ? -EINVAL : 0;
}

/* http and https only: by name since 7.85, by bit mask before. */
static CURLcode request_set_protocols(CURL *e)
{
    CURLcode rc = curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (rc == CURLE_UNKNOWN_OPTION)
        rc = curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    return rc;
}

static int request_set_method(http_request_t *r, const struct http_request_opts *o)
{
    CURL *e = r->easy;
    const char *m = o->method ? o->method : "GET";
    int rc = 0;
    int with_body = o->body || o->body_len > 0;
    if (strcmp(m, "HEAD") == 0)
        rc |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    else if (strcmp(m, "GET") != 0 || with_body)
        rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    if (with_body) {
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
        rc |= curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, o->body ? (const char *)o->body : "");
        int hrc = request_add_header(r, "Content-Type: %s",
                                     o->content_type ? o->content_type : "application/json");
        /* A body is sent at once: no "Expect: 100-continue" round trip. */
        if (!hrc)
            hrc = request_add_header(r, "Expect:");
        if (hrc)
            return hrc;
    }
    return rc ? -EINVAL : 0;
}

/* libcurl opens its sockets without close-on-exec: every worker the agent spawned would inherit
 * the agent's connections (to etcd, to the Kubernetes API), keep them open past the agent's end
 * in whatever it forked, and could speak on them. */
static curl_socket_t http_open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)arg, (void)purpose;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int request_set_options(http_request_t *r, const struct http_request_opts *o)
{
    CURL *e = r->easy;
    int rc = 0;
    int cto = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : HTTP_CONNECT_TIMEOUT_DEFAULT_MS;
    rc |= curl_easy_setopt(e, CURLOPT_URL, o->url);
    rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->curl_err);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_curl_write);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_curl_header);
    rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= request_set_protocols(e);
    rc |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    rc |= curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cto);
    rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(o->timeout_ms > 0 ? o->timeout_ms : 0));
    rc |= curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, http_open_socket);
    /* A watch can sit silent for minutes; keepalive probes find a peer that vanished. */
    rc |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    rc |= curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    if (rc)
        return -EINVAL;
    if (o->tls && (rc = request_set_tls(r, o->tls)) != 0)
        return rc;
    if ((rc = request_set_method(r, o)) != 0)
        return rc;
    if (o->bearer_token && (rc = request_add_header(r, "Authorization: Bearer %s",
                                                     o->bearer_token)) != 0)
        return rc;
    for (const char *const *h = o->headers; h && *h; h++)
        if ((rc = request_add_header(r, "%s", *h)) != 0)
            return rc;
    if (r->hdrs && curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs) != CURLE_OK)
        return -EINVAL;
    return 0;
}

static int opts_valid(const struct http_request_opts *o)
{
    if (!o->url || !o->on_done)
        return 0;
    if (o->mode != HTTP_BODY_BUFFER && !o->on_data)
        return 0;
    if (o->mode != HTTP_BODY_BUFFER && o->mode != HTTP_BODY_CHUNKS && o->mode != HTTP_BODY_LINES)
        return 0;
    if (has_line_break(o->bearer_token) || has_line_break(o->method) ||
        has_line_break(o->content_type))
        return 0;
    for (const char *const *h = o->headers; h && *h; h++)
        if (has_line_break(*h))
            return 0;
    return o->idle_timeout_ms >= 0 && o->timeout_ms >= 0 && o->connect_timeout_ms >= 0;
}

int http_request_start(http_client_t *c, const struct http_request_opts *o, http_request_t **out)
{
    if (c->closing)
        return -ESHUTDOWN;
    if (!opts_valid(o))
        return -EINVAL;
    http_request_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->c = c;
    r->idle_ms = o->idle_timeout_ms;
    r->mode = o->mode;
    r->max = o->max_body ? o->max_body : HTTP_MAX_BODY_DEFAULT;
    if (r->max > HTTP_MAX_BODY_LIMIT)
        r->max = HTTP_MAX_BODY_LIMIT;
    r->on_data = o->on_data;
    r->on_done = o->on_done;
    r->arg = o->arg;
    r->streaming = -1;
    r->pem_fd[0] = r->pem_fd[1] = r->pem_fd[2] = -1;
    r->easy = curl_easy_init();
    if (!r->easy) {
        free(r);
        return -ENOMEM;
    }
    int rc = request_set_options(r, o);
    if (rc) {
        curl_slist_free_all(r->hdrs);
        curl_easy_cleanup(r->easy);
        request_close_pems(r);
        free(r);
        return rc;
    }
    uv_timer_init(c->loop, &r->idle);
    r->idle.data = r;
    c->handles++;
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->active++;
    if (r->idle_ms > 0)
        uv_timer_start(&r->idle, on_idle, (uint64_t)r->idle_ms, (uint64_t)r->idle_ms);
    /* Inside libcurl the handle waits for client_settle; elsewhere it enters the multi handle
     * now, and libcurl's timer (set to 0 ms by the add) starts it from the loop. */
    if (!c->in_curl) {
        CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
        if (mc != CURLM_OK) {
            request_unlink(r);
            r->cancelled = 1;
            request_release(r);
            return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
        }
        r->added = 1;
    }
    if (out)
        *out = r;
    return 0;
}

void http_request_cancel(http_request_t *r)
{
    if (!r || r->cancelled || r->finishing)
        return;
    r->cancelled = 1;
    if (r->c->in_curl)
        return; /* client_settle removes it once libcurl has returned */
    request_detach(r);
    request_release(r);
}
