/* launcher/discover/k8s_discover.c — the agent's Kubernetes discovery (see k8s_discover.h).
 *
 *   [GET this pod: its labels give the selector] ─► WATCH the job's pods ─► READY ─► LOSSES
 *
 * GET is retried with backoff on a lost connection or a server error; 401/403 and a pod that is
 * not there end discovery. While waiting, the plan (k8s_job.h) is made again on every change the
 * watch pushes, and a timer says the current waiting line after 1 s and then every 5 s. Once
 * READY, every pod that has been a usable node of the job is remembered by name and uid; a
 * change that deletes, replaces or fails one of them is reported once. */
#include "launcher/discover/k8s_discover.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/k8s_job.h"

#define DISC_GET_BODY_MAX (4u << 20)
#define DISC_TICK_MS 1000         /* a changed waiting line is said within this */
#define DISC_LINE_EVERY_MS 5000   /* an unchanged one this often */

struct tracked {
    char name[K8S_NAME_MAX + 1];
    char uid[K8S_UID_MAX + 1];
    char ip[K8S_IP_MAX + 1];
    int reported;
};

struct k8s_discover {
    uv_loop_t *loop;
    struct k8s_discover_params p;
    char *selector, *ns, *pod_name;
    const char *selector_from;       /* the operator whose labels gave the selector, or NULL */
    struct k8s_creds creds;
    http_client_t *http;
    http_request_t *get;
    k8s_watch_t *watch;
    uv_timer_t line_timer, retry_timer;
    int handles;                     /* open timers */
    int attempt;                     /* GET failures in a row */
    int ready, dead, closed;
    uint64_t started;
    char line[K8S_PLAN_LINE_MAX];    /* the current waiting line */
    char said[K8S_PLAN_LINE_MAX];    /* the last one said, and when */
    uint64_t said_at;
    char token[16384];
    struct tracked *tracked;
    size_t ntracked, captracked;
};

static void d_get(k8s_discover_t *d);

static void d_progress(k8s_discover_t *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void d_progress(k8s_discover_t *d, const char *fmt, ...)
{
    if (!d->p.on_progress)
        return;
    char line[K8S_PLAN_LINE_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    d->p.on_progress(d->p.arg, line);
}

/* Gives up: nothing of ours runs any more; the owner closes us. */
static void d_fatal(k8s_discover_t *d, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void d_fatal(k8s_discover_t *d, int err, const char *fmt, ...)
{
    if (d->dead)
        return;
    char line[K8S_PLAN_LINE_MAX + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    d->dead = 1;
    uv_timer_stop(&d->line_timer);
    uv_timer_stop(&d->retry_timer);
    d->p.on_fatal(d->p.arg, err, line, d->ready);
}

/* "1m30s" */
static void fmt_left(uint64_t ms, char *out, size_t cap)
{
    uint64_t s = (ms + 999) / 1000;
    if (s >= 60)
        snprintf(out, cap, "%llum%02llus", (unsigned long long)(s / 60),
                 (unsigned long long)(s % 60));
    else
        snprintf(out, cap, "%llus", (unsigned long long)s);
}

/* Every second while waiting: the waiting line when it changed (or every few seconds when it
 * did not); and the end of the wait. */
static void on_line_timer(uv_timer_t *t)
{
    k8s_discover_t *d = t->data;
    if (d->ready || d->dead)
        return;
    uint64_t now = uv_now(d->loop), waited = now - d->started;
    char left[32] = "";
    if (d->p.timeout_ms && waited >= d->p.timeout_ms) {
        fmt_left(d->p.timeout_ms, left, sizeof left);
        d_fatal(d, -ETIMEDOUT, "kubernetes pods '%s' in namespace %s: not ready within %s: %s",
                d->selector ? d->selector : "?", d->ns, left,
                d->line[0] ? d->line : "no answer from the API server");
        return;
    }
    if (d->p.timeout_ms)
        fmt_left(d->p.timeout_ms - waited, left, sizeof left);
    const char *line = d->line[0] ? d->line : "listing the job's pods";
    if ((d->watch || d->line[0]) &&
        (strcmp(line, d->said) != 0 || now - d->said_at >= DISC_LINE_EVERY_MS)) {
        d_progress(d, "kubernetes: %s%s%s%s", line, left[0] ? " (" : "", left,
                   left[0] ? " left)" : "");
        snprintf(d->said, sizeof d->said, "%s", line);
        d->said_at = now;
    }
    uint64_t next = DISC_TICK_MS;
    if (d->p.timeout_ms && d->p.timeout_ms - waited < next)
        next = d->p.timeout_ms - waited;
    uv_timer_start(&d->line_timer, on_line_timer, next, 0);
}

/* ---- the job's pods: waiting, then losses ---- */

static int usable(const struct k8s_pod *p)
{
    return !p->deleting && p->ready && p->ip[0] && strcmp(p->phase, "Running") == 0;
}

/* Remembers every usable pod not yet known by name and uid: these are the job's nodes. */
static int track_usable(k8s_discover_t *d, const struct k8s_pods *pods)
{
    for (size_t i = 0; i < pods->n; i++) {
        const struct k8s_pod *p = pods->pods[i];
        if (!usable(p) || (d->ns && strcmp(p->ns, d->ns) != 0))
            continue;
        size_t k = 0;
        while (k < d->ntracked &&
               (strcmp(d->tracked[k].name, p->name) || strcmp(d->tracked[k].uid, p->uid)))
            k++;
        if (k < d->ntracked)
            continue;
        if (d->ntracked == d->captracked) {
            size_t cap = d->captracked ? d->captracked * 2 : 16;
            struct tracked *v = realloc(d->tracked, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            d->tracked = v;
            d->captracked = cap;
        }
        struct tracked *tr = &d->tracked[d->ntracked++];
        memset(tr, 0, sizeof *tr);
        memcpy(tr->name, p->name, sizeof tr->name);
        memcpy(tr->uid, p->uid, sizeof tr->uid);
        memcpy(tr->ip, p->ip, sizeof tr->ip);
    }
    return 0;
}

/* Every node of the job whose pod went away since, once each; this pod's own end is not news
 * (its agent is told by SIGTERM). */
static void report_losses(k8s_discover_t *d, const struct k8s_pods *pods)
{
    for (size_t k = 0; k < d->ntracked && !d->closed; k++) {
        struct tracked *tr = &d->tracked[k];
        char why[96];
        if (tr->reported || strcmp(tr->name, d->pod_name) == 0 ||
            !k8s_pod_gone(pods, d->ns, tr->name, tr->uid, why, sizeof why))
            continue;
        tr->reported = 1;
        d->p.on_lost(d->p.arg, tr->name, tr->ip, why);
    }
}

/* The job's pod addresses as they are now, for on_addrs. */
static void report_addrs(k8s_discover_t *d, const struct k8s_pods *pods)
{
    if (!d->p.on_addrs)
        return;
    const char **ips = malloc((pods->n ? pods->n : 1) * sizeof *ips);
    size_t n = 0;
    if (!ips)
        return;
    for (size_t i = 0; i < pods->n; i++) {
        const struct k8s_pod *p = pods->pods[i];
        if (p->ip[0] && !p->deleting && (!d->ns || strcmp(p->ns, d->ns) == 0))
            ips[n++] = p->ip;
    }
    d->p.on_addrs(d->p.arg, ips, n);
    free(ips);
}

static void on_pods(k8s_watch_t *w, const struct k8s_pods *pods, void *arg)
{
    (void)w;
    k8s_discover_t *d = arg;
    if (d->dead)
        return;
    report_addrs(d, pods);
    if (d->dead || d->closed)
        return;
    if (d->ready) {
        report_losses(d, pods);
        if (!d->closed && !d->dead && track_usable(d, pods))
            d_fatal(d, -ENOMEM, "out of memory watching the job's pods");
        return;
    }
    struct k8s_plan_params pp = {d->ns, d->pod_name, d->p.order, d->p.min_nodes,
                                 d->p.max_nodes};
    struct k8s_plan *pl = malloc(sizeof *pl);
    if (!pl || k8s_plan(pods, &pp, pl)) {
        free(pl);
        d_fatal(d, -ENOMEM, "out of memory planning the job's pods");
        return;
    }
    switch (pl->state) {
    case K8S_PLAN_WAIT:
        snprintf(d->line, sizeof d->line, "%s", pl->line);
        break;
    case K8S_PLAN_NO_SELF:
    case K8S_PLAN_NOT_MEMBER:
        d_fatal(d, -EINVAL, "kubernetes pods '%s' in namespace %s: %s; check --k8s-selector, "
                "--k8s-namespace and POD_NAME", d->selector, d->ns, pl->line);
        break;
    case K8S_PLAN_READY: {
        d->ready = 1;
        uv_timer_stop(&d->line_timer);
        if (track_usable(d, pods)) {
            d_fatal(d, -ENOMEM, "out of memory watching the job's pods");
            break;
        }
        struct k8s_found f = {
            .ns = d->ns, .selector = d->selector, .pod_name = pl->self->name,
            .pod_ip = pl->self->ip, .host_name = pl->host->name, .host_ip = pl->host->ip,
            .node_rank = pl->node_rank, .nnodes = pl->nnodes,
        };
        d->p.on_ready(d->p.arg, &f);
        break;
    }
    }
    free(pl);
}

static void on_watch_fatal(k8s_watch_t *w, int err, const char *line, void *arg)
{
    (void)w;
    d_fatal(arg, err, "%s", line);
}

static void on_watch_progress(k8s_watch_t *w, const char *line, void *arg)
{
    (void)w;
    k8s_discover_t *d = arg;
    if (!d->dead)
        d_progress(d, "%s", line);
}

static int watch_begin(k8s_discover_t *d)
{
    struct k8s_watch_params wp = {
        .namespace = d->ns, .label_selector = d->selector, .on_change = on_pods,
        .on_fatal = on_watch_fatal, .on_progress = on_watch_progress, .arg = d,
    };
    return k8s_watch_start(d->loop, d->http, &d->creds, &wp, &d->watch);
}

static void d_start_watch(k8s_discover_t *d)
{
    int rc = watch_begin(d);
    if (rc)
        d_fatal(d, rc, "kubernetes API %s: cannot watch pods: %s", d->creds.server,
                strerror(-rc));
}

/* ---- this pod's labels: the selector ---- */

static void on_retry_timer(uv_timer_t *t)
{
    k8s_discover_t *d = t->data;
    if (!d->dead)
        d_get(d);
}

static void get_retry(k8s_discover_t *d, const char *why)
{
    uint64_t delay = 250ull << (d->attempt < 5 ? d->attempt : 5);
    d->attempt++;
    d_progress(d, "kubernetes API %s: reading pod %s: %s; again in %.1f s", d->creds.server,
               d->pod_name, why, (double)delay / 1000.0);
    uv_timer_start(&d->retry_timer, on_retry_timer, delay, 0);
}

static void on_get_done(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    k8s_discover_t *d = arg;
    d->get = NULL;
    struct k8s_status st;
    const char *msg = res->body && k8s_status_parse(res->body, res->body_len, &st) == 0
                          ? st.message : "";
    char why[512];
    if (res->status || res->http_status >= 500 || res->http_status == 429 ||
        res->http_status == 408) {
        if (res->status)
            snprintf(why, sizeof why, "%s", res->error);
        else
            snprintf(why, sizeof why, "HTTP %ld%s%s", res->http_status, msg[0] ? ": " : "",
                     msg);
        get_retry(d, why);
        return;
    }
    if (res->http_status == 401 || res->http_status == 403) {
        char line[1024];
        k8s_denied_line(&d->creds, d->ns, res->http_status, msg, line, sizeof line);
        d_fatal(d, -EACCES, "%s", line);
        return;
    }
    if (res->http_status == 404) {
        d_fatal(d, -EINVAL, "kubernetes API %s: this pod (%s) is not in namespace %s: set "
                "POD_NAME (downward API metadata.name) and --k8s-namespace, or give "
                "--k8s-selector", d->creds.server, d->pod_name, d->ns);
        return;
    }
    if (res->http_status != 200) {
        d_fatal(d, -EINVAL, "kubernetes API %s: reading pod %s: HTTP %ld%s%s", d->creds.server,
                d->pod_name, res->http_status, msg[0] ? ": " : "", msg);
        return;
    }
    char sel[1024], err[256];
    int rc = k8s_job_selector(res->body ? res->body : "", res->body_len, sel, sizeof sel,
                              &d->selector_from, err, sizeof err);
    if (rc < 0) {
        d_fatal(d, -EINVAL, "pod %s: cannot tell the job's pods from its labels: %s; give "
                "--k8s-selector", d->pod_name, err);
        return;
    }
    if (!(d->selector = strdup(sel))) {
        d_fatal(d, -ENOMEM, "out of memory");
        return;
    }
    d_progress(d, "kubernetes: the job's pods are '%s' in namespace %s (from this pod's %s "
               "labels)", d->selector, d->ns, d->selector_from);
    d_start_watch(d);
}

static int get_begin(k8s_discover_t *d)
{
    char url[1024];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/%s/pods/%s", d->creds.server, d->ns,
             d->pod_name);
    struct http_request_opts o = {
        .url = url, .bearer_token = k8s_creds_token(&d->creds, d->token, sizeof d->token),
        .tls = &d->creds.tls,
        .headers = (const char *const[]){"Accept: application/json", NULL},
        .timeout_ms = 30000, .max_body = DISC_GET_BODY_MAX, .mode = HTTP_BODY_BUFFER,
        .on_done = on_get_done, .arg = d,
    };
    return http_request_start(d->http, &o, &d->get);
}

static void d_get(k8s_discover_t *d)
{
    int rc = get_begin(d);
    if (rc)
        d_fatal(d, rc, "kubernetes API %s: cannot start a request: %s", d->creds.server,
                strerror(-rc));
}

/* ---- lifetime ---- */

/* A DNS label or subdomain: what a pod or namespace name may be, so it goes into a URL as is. */
static int dns_name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > K8S_NAME_MAX)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

static void d_free(k8s_discover_t *d)
{
    k8s_creds_free(&d->creds);
    free(d->selector);
    free(d->ns);
    free(d->pod_name);
    free(d->tracked);
    free(d);
}

static void on_handle_closed(uv_handle_t *h)
{
    k8s_discover_t *d = h->data;
    if (--d->handles == 0)
        d_free(d);
}

int k8s_discover_start(uv_loop_t *loop, const struct k8s_discover_params *p,
                       k8s_discover_t **out, char *err, size_t err_cap)
{
    if (!p->on_ready || !p->on_lost || !p->on_fatal || p->min_nodes < 1 ||
        p->max_nodes < p->min_nodes) {
        snprintf(err, err_cap, "kubernetes discovery: bad parameters");
        return -EINVAL;
    }
    if (!dns_name_ok(p->pod_name)) {
        snprintf(err, err_cap, "kubernetes discovery: this pod's name '%s' is not a pod name; "
                 "set POD_NAME from the downward API (metadata.name)",
                 p->pod_name ? p->pod_name : "");
        return -EINVAL;
    }
    k8s_discover_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, err_cap, "out of memory");
        return -ENOMEM;
    }
    d->loop = loop;
    d->p = *p;
    int rc = k8s_creds_load(p->src, &d->creds, err, err_cap);
    if (rc) {
        free(d);
        return rc;
    }
    const char *ns = p->ns && *p->ns ? p->ns : d->creds.namespace;
    if (!dns_name_ok(ns)) {
        snprintf(err, err_cap, "kubernetes discovery: '%s' is not a namespace name; give "
                 "--k8s-namespace", ns ? ns : "");
        k8s_creds_free(&d->creds);
        free(d);
        return -EINVAL;
    }
    d->ns = strdup(ns);
    d->pod_name = strdup(p->pod_name);
    d->selector = p->selector && *p->selector ? strdup(p->selector) : NULL;
    rc = !d->ns || !d->pod_name || (p->selector && *p->selector && !d->selector) ? -ENOMEM : 0;
    if (!rc)
        rc = http_client_new(loop, &d->http);
    if (rc) {
        snprintf(err, err_cap, "kubernetes discovery: cannot start: %s",
                 rc == -ELIBACC ? http_library_error() : strerror(-rc));
        d_free(d);
        return rc;
    }
    uv_timer_init(loop, &d->line_timer);
    uv_timer_init(loop, &d->retry_timer);
    d->line_timer.data = d->retry_timer.data = d;
    d->handles = 2;
    d->started = uv_now(loop);
    rc = d->selector ? watch_begin(d) : get_begin(d);
    if (rc) {
        snprintf(err, err_cap, "kubernetes API %s: cannot start a request: %s", d->creds.server,
                 strerror(-rc));
        k8s_discover_close(d);
        return rc;
    }
    uv_timer_start(&d->line_timer, on_line_timer, DISC_TICK_MS, 0);
    *out = d;
    return 0;
}

void k8s_discover_close(k8s_discover_t *d)
{
    if (!d || d->closed)
        return;
    d->closed = d->dead = 1;
    k8s_watch_stop(d->watch);
    d->watch = NULL;
    http_request_cancel(d->get);
    d->get = NULL;
    http_client_close(d->http);
    d->http = NULL;
    uv_close((uv_handle_t *)&d->line_timer, on_handle_closed);
    uv_close((uv_handle_t *)&d->retry_timer, on_handle_closed);
}
