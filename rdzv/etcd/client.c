/* rdzv/etcd/client.c — etcd v3 over its JSON gateway on the loop (see etcd/client.h).
 *
 * A call or a watch owns one uv_timer (its backoff), so its memory has one release path: the
 * timer's close callback. The client is freed when it is closing and its last such handle has
 * closed. A call's or watch's callback runs with the call unlinked (or the watch marked busy),
 * so the owner may cancel anything or close the client from inside it. */
#include "rdzv/etcd/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"
#include "rdzv/base/http.h"

#define ETCD_TIMEOUT_DEFAULT_MS 5000
#define ETCD_CONNECT_TIMEOUT_MS 2000
#define ETCD_BACKOFF_MAX_MS 1000
#define ETCD_CALL_MAX_BODY (64u << 20)  /* a snapshot of a large job's keys */
#define ETCD_WATCH_MAX_LINE (16u << 20) /* one message of events (a txn of many puts) */

struct etcd_client {
    uv_loop_t *loop;
    http_client_t *http;
    etcd_endpoint_t ep[ETCD_MAX_ENDPOINTS];
    int n_ep, cur;
    struct http_tls tls;
    char *cacert, *cert, *key;
    int timeout_ms, idle_ms;
    int64_t last_ok;        /* monotonic ms of the last answer (or of the client's start) */
    int failing;            /* an attempt failed since then */
    char last_error[320];
    etcd_call_t *calls;
    etcd_watch_t *watches;
    int handles;
    int closing;
};

struct etcd_call {
    etcd_client_t *c;
    etcd_call_t *prev, *next;
    char path[48];
    char *body;
    size_t blen;
    int flags;
    int ep;                 /* the endpoint of the attempt in flight */
    int attempts;           /* failed attempts in a row */
    uint64_t sent;          /* loop time (ms) the attempt in flight was sent */
    http_request_t *req;
    uv_timer_t retry;
    etcd_call_cb cb;
    void *arg;
};

struct etcd_watch {
    etcd_client_t *c;
    etcd_watch_t *prev, *next;
    etcd_watch_spec_t *specs; /* keys in `keys` */
    char *keys;
    int64_t *next_rev;      /* per watcher: the first revision not yet delivered; 0: unknown */
    size_t n;
    int ep, attempts;
    http_request_t *req;
    uv_timer_t retry;
    etcd_watch_cb cb;
    void *arg;
    int busy, cancelled;
    etcd_watch_t *sib;        /* the next stream of the same etcd_watch_start */
};

/* ---- lifetime ---- */

static void client_maybe_free(etcd_client_t *c)
{
    if (c->closing && c->handles == 0) {
        free(c->cacert);
        free(c->cert);
        free(c->key);
        free(c);
    }
}

static void call_closed(uv_handle_t *h)
{
    etcd_call_t *k = h->data;
    etcd_client_t *c = k->c;
    free(k->body);
    free(k);
    c->handles--;
    client_maybe_free(c);
}

static void watch_closed(uv_handle_t *h)
{
    etcd_watch_t *w = h->data;
    etcd_client_t *c = w->c;
    free(w->specs);
    free(w->keys);
    free(w->next_rev);
    free(w);
    c->handles--;
    client_maybe_free(c);
}

static void call_unlink(etcd_call_t *k)
{
    etcd_client_t *c = k->c;
    if (k->prev)
        k->prev->next = k->next;
    else if (c->calls == k)
        c->calls = k->next;
    if (k->next)
        k->next->prev = k->prev;
    k->prev = k->next = NULL;
}

static void watch_unlink(etcd_watch_t *w)
{
    etcd_client_t *c = w->c;
    if (w->prev)
        w->prev->next = w->next;
    else if (c->watches == w)
        c->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

/* Ends k for good: its request and timer stop, its memory goes with the timer. */
static void call_release(etcd_call_t *k)
{
    call_unlink(k);
    if (k->req)
        http_request_cancel(k->req);
    k->req = NULL;
    uv_timer_stop(&k->retry);
    uv_close((uv_handle_t *)&k->retry, call_closed);
}

static void watch_release(etcd_watch_t *w)
{
    watch_unlink(w);
    if (w->req)
        http_request_cancel(w->req);
    w->req = NULL;
    uv_timer_stop(&w->retry);
    uv_close((uv_handle_t *)&w->retry, watch_closed);
}

/* ---- health and endpoints ---- */

static void client_ok(etcd_client_t *c)
{
    c->last_ok = podrun_time_mono_ms();
    c->failing = 0;
}

static void watch_send(etcd_watch_t *w);

/* An attempt on endpoint ep failed: remember why, and if ep is the current endpoint, move on to
 * the next one; watch streams still on ep follow at once (they may not notice a member that
 * stopped answering until much later). */
static void client_failed(etcd_client_t *c, int ep, const char *why)
{
    c->failing = 1;
    sfmt(c->last_error, sizeof c->last_error, "%s: %s", c->ep[ep].url, why);
    if (ep != c->cur || c->n_ep < 2)
        return;
    c->cur = (c->cur + 1) % c->n_ep;
    for (etcd_watch_t *w = c->watches; w; w = w->next) {
        if (w->req && w->ep == ep && !w->busy) {
            http_request_cancel(w->req);
            w->req = NULL;
            watch_send(w);
        }
    }
}

/* How long to wait before attempt number `attempts` (1 after the first failure): nothing while
 * there are endpoints not yet tried in this run, then 50 ms doubling to 1 s. */
static uint64_t backoff_ms(const etcd_client_t *c, int attempts)
{
    if (attempts < c->n_ep)
        return 0;
    int k = attempts - c->n_ep;
    uint64_t ms = 50u << (k > 5 ? 5 : k);
    return ms > ETCD_BACKOFF_MAX_MS ? ETCD_BACKOFF_MAX_MS : ms;
}

/* The reason an HTTP exchange failed, or NULL when it brought an answer (r parsed, *kind 0 for
 * an answer and 1 for an error answer etcd would give again). */
static const char *exchange_failure(const struct http_result *res, etcd_resp_t *r, int *kind,
                                    char *buf, size_t cap)
{
    *kind = 0;
    if (res->status < 0) {
        sfmt(buf, cap, "%s", res->error && *res->error ? res->error : podrun_strerror(res->status));
        return buf;
    }
    int pr = res->body ? etcd_resp_parse(res->body, res->body_len, r) : -EPROTO;
    if (pr == 1) {
        if (etcd_code_transient(r->code)) {
            sfmt(buf, cap, "%s", r->error);
            return buf;
        }
        *kind = 1;
        return NULL;
    }
    if (pr == 0 && res->http_status >= 200 && res->http_status < 300)
        return NULL;
    etcd_resp_free(r);
    /* not etcd's JSON: a proxy's page, a server without the v3 gateway, a cut answer */
    char first[80] = "";
    if (res->body) {
        size_t i = 0;
        for (; i < res->body_len && i < sizeof first - 1 && res->body[i] != '\n'; i++)
            first[i] = (unsigned char)res->body[i] < ' ' ? ' ' : res->body[i];
        first[i] = '\0';
    }
    sfmt(buf, cap, "HTTP %ld: %s", res->http_status, first[0] ? first : "not an etcd answer");
    return buf;
}

/* ---- calls ---- */

static void call_send(etcd_call_t *k);

static void on_call_retry(uv_timer_t *t)
{
    call_send(t->data);
}

/* The attempt failed with `why`: try again (on the next endpoint, after the backoff), or, for an
 * ETCD_CALL_ONCE call that has tried every endpoint, give up. */
static void call_failed(etcd_call_t *k, const char *why)
{
    etcd_client_t *c = k->c;
    client_failed(c, k->ep, why);
    k->attempts++;
    if ((k->flags & ETCD_CALL_ONCE) && k->attempts >= c->n_ep) {
        etcd_resp_t r;
        memset(&r, 0, sizeof r);
        sfmt(r.error, sizeof r.error, "%s", c->last_error);
        call_unlink(k);
        k->cb(k->arg, -ETIMEDOUT, &r);
        call_release(k);
        return;
    }
    uv_timer_start(&k->retry, on_call_retry, backoff_ms(c, k->attempts), 0);
}

static void on_call_done(http_request_t *req, const struct http_result *res, void *arg)
{
    (void)req;
    etcd_call_t *k = arg;
    etcd_client_t *c = k->c;
    k->req = NULL;
    etcd_resp_t r;
    int kind;
    char why[256];
    memset(&r, 0, sizeof r);
    const char *fail = exchange_failure(res, &r, &kind, why, sizeof why);
    if (fail) {
        call_failed(k, fail);
        return;
    }
    client_ok(c);
    r.sent_ms = k->sent;
    call_unlink(k); /* the owner may cancel or close anything from its callback */
    k->cb(k->arg, kind, &r);
    etcd_resp_free(&r);
    call_release(k);
}

static void call_send(etcd_call_t *k)
{
    etcd_client_t *c = k->c;
    char url[400];
    k->ep = c->cur;
    k->sent = uv_now(c->loop);
    sfmt(url, sizeof url, "%s/v3/%s", c->ep[k->ep].url, k->path);
    struct http_request_opts o = {
        .method = "POST",
        .url = url,
        .body = k->body,
        .body_len = k->blen,
        .tls = c->ep[k->ep].tls ? &c->tls : NULL,
        .connect_timeout_ms = c->timeout_ms < ETCD_CONNECT_TIMEOUT_MS ? c->timeout_ms
                                                                       : ETCD_CONNECT_TIMEOUT_MS,
        .timeout_ms = c->timeout_ms,
        .idle_timeout_ms = (k->flags & ETCD_CALL_BULK) ? 0 : c->idle_ms,
        .max_body = ETCD_CALL_MAX_BODY,
        .on_done = on_call_done,
        .arg = k,
    };
    int r = http_request_start(c->http, &o, &k->req);
    if (r < 0) {
        k->req = NULL;
        call_failed(k, podrun_strerror(r));
    }
}

int etcd_call(etcd_client_t *c, const char *path, char *body, int flags, etcd_call_cb cb,
              void *arg, etcd_call_t **out)
{
    if (out)
        *out = NULL;
    if (!body)
        return -ENOMEM;
    if (c->closing || !cb || strlen(path) >= sizeof ((etcd_call_t *)0)->path) {
        free(body);
        return c->closing ? -ESHUTDOWN : -EINVAL;
    }
    etcd_call_t *k = calloc(1, sizeof *k);
    if (!k) {
        free(body);
        return -ENOMEM;
    }
    k->c = c;
    sfmt(k->path, sizeof k->path, "%s", path);
    k->body = body;
    k->blen = strlen(body);
    k->flags = flags;
    k->cb = cb;
    k->arg = arg;
    uv_timer_init(c->loop, &k->retry);
    k->retry.data = k;
    c->handles++;
    k->next = c->calls;
    if (c->calls)
        c->calls->prev = k;
    c->calls = k;
    call_send(k);
    if (out)
        *out = k;
    return 0;
}

void etcd_call_cancel(etcd_call_t *k)
{
    if (k)
        call_release(k);
}

/* ---- watches ---- */

static void on_watch_retry(uv_timer_t *t)
{
    watch_send(t->data);
}

/* The stream broke (or etcd said no): it starts again on the current endpoint from where it
 * was, after the backoff. */
static void watch_failed(etcd_watch_t *w, const char *why)
{
    client_failed(w->c, w->ep, why);
    w->attempts++;
    uv_timer_start(&w->retry, on_watch_retry, backoff_ms(w->c, w->attempts), 0);
}

/* Drops the events of watcher i that were delivered already (a stream resumed on another
 * member starts at the first revision not delivered, but a member may repeat the one it was
 * sending when the last stream broke) and moves the watcher's revision past the rest. The
 * events of one transaction share a revision, and etcd never splits a revision between
 * messages, so the floor is the one the message found. */
static void watch_filter(etcd_watch_t *w, size_t i, etcd_resp_t *m)
{
    size_t keep = 0;
    int64_t floor = w->next_rev[i];
    for (size_t e = 0; e < m->n; e++) {
        if (m->kvs[e].mod_rev < floor)
            continue;
        if (m->kvs[e].mod_rev + 1 > w->next_rev[i])
            w->next_rev[i] = m->kvs[e].mod_rev + 1;
        m->kvs[keep++] = m->kvs[e];
    }
    m->n = keep;
}

/* One message of the stream. */
static int on_watch_line(http_request_t *req, const char *line, size_t len, void *arg)
{
    (void)req;
    etcd_watch_t *w = arg;
    if (len == 0)
        return 0;
    etcd_resp_t m;
    int pr = etcd_resp_parse(line, len, &m);
    if (pr != 0) {
        char why[300];
        sfmt(why, sizeof why, "watch: %s", pr == 1 ? m.error : "a message that is not etcd's");
        etcd_resp_free(&m);
        http_request_cancel(w->req);
        w->req = NULL;
        watch_failed(w, why);
        return 0;
    }
    client_ok(w->c);
    w->attempts = 0;
    size_t i = 0;
    while (i < w->n && w->specs[i].watch_id != m.watch_id)
        i++;
    if (i == w->n) { /* not one of ours */
        etcd_resp_free(&m);
        return 0;
    }
    if (m.created && !w->next_rev[i])
        w->next_rev[i] = m.revision + 1; /* from now on: what follows this revision */
    watch_filter(w, i, &m);
    if (m.canceled && m.compact_rev <= 0) {
        /* etcd ended one watcher for its own reason: start the stream again */
        char why[300];
        sfmt(why, sizeof why, "watch canceled: %s", m.cancel_reason[0] ? m.cancel_reason : "?");
        etcd_resp_free(&m);
        http_request_cancel(w->req);
        w->req = NULL;
        watch_failed(w, why);
        return 0;
    }
    if (m.n == 0 && !m.created && !m.canceled) {
        etcd_resp_free(&m);
        return 0;
    }
    w->busy++;
    w->cb(w->arg, &m);
    w->busy--;
    etcd_resp_free(&m);
    if (w->cancelled && !w->busy)
        watch_release(w);
    return 0;
}

static void on_watch_done(http_request_t *req, const struct http_result *res, void *arg)
{
    (void)req;
    etcd_watch_t *w = arg;
    w->req = NULL;
    char why[300];
    if (res->status < 0)
        sfmt(why, sizeof why, "watch: %s", res->error);
    else if (res->http_status < 200 || res->http_status >= 300)
        sfmt(why, sizeof why, "watch: HTTP %ld", res->http_status);
    else
        sfmt(why, sizeof why, "watch: the stream ended");
    watch_failed(w, why);
}

static void watch_send(etcd_watch_t *w)
{
    etcd_client_t *c = w->c;
    for (size_t i = 0; i < w->n; i++)
        w->specs[i].start_rev = w->next_rev[i];
    char *body = etcd_req_watch(w->specs, w->n);
    char url[400];
    w->ep = c->cur;
    sfmt(url, sizeof url, "%s/v3/watch", c->ep[w->ep].url);
    struct http_request_opts o = {
        .method = "POST",
        .url = url,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .tls = c->ep[w->ep].tls ? &c->tls : NULL,
        .connect_timeout_ms = c->timeout_ms < ETCD_CONNECT_TIMEOUT_MS ? c->timeout_ms
                                                                       : ETCD_CONNECT_TIMEOUT_MS,
        .max_body = ETCD_WATCH_MAX_LINE,
        .mode = HTTP_BODY_LINES,
        .on_data = on_watch_line,
        .on_done = on_watch_done,
        .arg = w,
    };
    int r = body ? http_request_start(c->http, &o, &w->req) : -ENOMEM;
    free(body);
    if (r < 0) {
        w->req = NULL;
        watch_failed(w, podrun_strerror(r));
    }
}

/* One stream of watchers spec[0..n), started; NULL without memory. */
static etcd_watch_t *watch_new(etcd_client_t *c, const etcd_watch_spec_t *spec, size_t n,
                               etcd_watch_cb cb, void *arg)
{
    etcd_watch_t *w = calloc(1, sizeof *w);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += spec[i].klen + (spec[i].end ? spec[i].elen : 0);
    if (w) {
        w->specs = calloc(n, sizeof *w->specs);
        w->next_rev = calloc(n, sizeof *w->next_rev);
        w->keys = malloc(bytes ? bytes : 1);
    }
    if (!w || !w->specs || !w->next_rev || !w->keys) {
        if (w) {
            free(w->specs);
            free(w->next_rev);
            free(w->keys);
        }
        free(w);
        return NULL;
    }
    char *p = w->keys;
    for (size_t i = 0; i < n; i++) {
        w->specs[i] = spec[i];
        memcpy(p, spec[i].key, spec[i].klen);
        w->specs[i].key = p;
        p += spec[i].klen;
        if (spec[i].end) {
            memcpy(p, spec[i].end, spec[i].elen);
            w->specs[i].end = p;
            p += spec[i].elen;
        }
        w->next_rev[i] = spec[i].start_rev > 0 ? spec[i].start_rev : 0;
    }
    w->c = c;
    w->n = n;
    w->cb = cb;
    w->arg = arg;
    uv_timer_init(c->loop, &w->retry);
    w->retry.data = w;
    c->handles++;
    w->next = c->watches;
    if (c->watches)
        c->watches->prev = w;
    c->watches = w;
    watch_send(w);
    return w;
}

/* The watchers go on as few streams as etcd's gateway takes whole (etcd_watch_group); the
 * handle is the first stream, which leads to the others. */
int etcd_watch_start(etcd_client_t *c, const etcd_watch_spec_t *spec, size_t n,
                     etcd_watch_cb cb, void *arg, etcd_watch_t **out)
{
    *out = NULL;
    if (c->closing)
        return -ESHUTDOWN;
    if (!n || !cb)
        return -EINVAL;
    etcd_watch_t *first = NULL, **tail = &first;
    for (size_t i = 0; i < n;) {
        size_t k = etcd_watch_group(spec + i, n - i);
        etcd_watch_t *w = watch_new(c, spec + i, k, cb, arg);
        if (!w) {
            etcd_watch_cancel(first);
            return -ENOMEM;
        }
        *tail = w;
        tail = &w->sib;
        i += k;
    }
    *out = first;
    return 0;
}

static void watch_cancel_one(etcd_watch_t *w)
{
    if (w->cancelled)
        return;
    w->cancelled = 1;
    if (w->busy) { /* inside its own callback: the stream stops now, the memory after */
        watch_unlink(w);
        if (w->req)
            http_request_cancel(w->req);
        w->req = NULL;
        uv_timer_stop(&w->retry);
        return;
    }
    watch_release(w);
}

void etcd_watch_cancel(etcd_watch_t *w)
{
    while (w) {
        etcd_watch_t *sib = w->sib; /* a released stream's memory goes with its timer, later */
        watch_cancel_one(w);
        w = sib;
    }
}

/* ---- the client ---- */

static int copy_opt(char **dst, const char *src)
{
    *dst = NULL;
    if (!src || !*src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

int etcd_client_new(uv_loop_t *loop, const etcd_client_conf_t *conf, etcd_client_t **out)
{
    *out = NULL;
    if (conf->n_endpoints < 1 || conf->n_endpoints > ETCD_MAX_ENDPOINTS)
        return -EINVAL;
    etcd_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->n_ep = conf->n_endpoints;
    memcpy(c->ep, conf->endpoints, (size_t)c->n_ep * sizeof *c->ep);
    c->cur = (conf->first % c->n_ep + c->n_ep) % c->n_ep;
    c->timeout_ms = conf->timeout_ms > 0 ? conf->timeout_ms : ETCD_TIMEOUT_DEFAULT_MS;
    c->idle_ms = conf->idle_ms > 0 && conf->idle_ms < c->timeout_ms ? conf->idle_ms : 0;
    c->last_ok = podrun_time_mono_ms();
    int r = copy_opt(&c->cacert, conf->cacert);
    if (!r)
        r = copy_opt(&c->cert, conf->cert);
    if (!r)
        r = copy_opt(&c->key, conf->key);
    if (!r)
        r = http_client_new(loop, &c->http);
    if (r) {
        free(c->cacert);
        free(c->cert);
        free(c->key);
        free(c);
        return r;
    }
    c->tls.ca_file = c->cacert;
    c->tls.cert_file = c->cert;
    c->tls.key_file = c->key;
    *out = c;
    return 0;
}

void etcd_client_close(etcd_client_t *c)
{
    if (!c || c->closing)
        return;
    c->closing = 1;
    while (c->calls)
        call_release(c->calls);
    while (c->watches) {
        etcd_watch_t *w = c->watches;
        w->cancelled = 1;
        if (w->busy) {
            watch_unlink(w);
            if (w->req)
                http_request_cancel(w->req);
            w->req = NULL;
            uv_timer_stop(&w->retry);
        } else {
            watch_release(w);
        }
    }
    http_client_close(c->http);
    c->http = NULL;
    client_maybe_free(c);
}

int64_t etcd_client_failing_ms(const etcd_client_t *c, char *why, size_t cap)
{
    if (why && cap)
        sfmt(why, cap, "%s", c->failing ? c->last_error : "");
    if (!c->failing)
        return 0;
    int64_t d = podrun_time_mono_ms() - c->last_ok;
    return d > 0 ? d : 1;
}

const char *etcd_client_endpoint(const etcd_client_t *c)
{
    return c->ep[c->cur].url;
}

const char *etcd_client_last_error(const etcd_client_t *c)
{
    return c->last_error;
}
