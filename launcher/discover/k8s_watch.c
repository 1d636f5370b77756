/* launcher/discover/k8s_watch.c — credentials and the list+watch of pods
 * (launcher/discover/k8s_watch.h).
 *
 * The watch is a small state machine on the loop:
 *
 *   LIST (pages of 500, continue tokens) --all pages--> WATCH from the list's resourceVersion
 *   WATCH --stream ends normally (timeoutSeconds)-----> WATCH again from the last version seen
 *   WATCH --ERROR 410 / HTTP 410----------------------> LIST (the history is gone)
 *   any  --connection lost, 5xx, garbage---------------> WAIT (backoff) --> the same step again
 *   any  --401/403 auth_retries times, 4xx-------------> DEAD (on_fatal)
 *
 * Bookmarks move the resourceVersion without changing the table, so a watch that is renewed
 * after a quiet hour still resumes inside the server's history instead of listing again.
 * The backoff doubles from backoff_min_ms to backoff_max_ms (+/-25 % jitter) and starts over
 * once a list completes or a watch delivers. */
#include "launcher/discover/k8s_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/discover/kubeconfig.h"
#include "rdzv/base/common.h"

#define K8S_FILE_MAX (1u << 20)      /* kubeconfig, CA bundle */
#define K8S_TOKEN_MAX 16384
#define K8S_LIST_PAGE 500
#define K8S_LIST_BODY_MAX (64u << 20)
#define K8S_EVENT_MAX (16u << 20)    /* one watch event: a pod is at most ~1.5 MB in etcd */


static char *str_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* Reads a small file whole (at most max bytes) into a malloc'd NUL-terminated buffer. */
static int read_file(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *buf = malloc(max + 1);
    size_t n = 0;
    int rc = 0;
    if (!buf)
        rc = -ENOMEM;
    while (!rc) {
        ssize_t k = read(fd, buf + n, max + 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = -errno;
        else if (k == 0)
            break;
        else if ((n += (size_t)k) > max)
            rc = -EFBIG;
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
}

/* ---- credentials ---- */

void k8s_source_from_env(struct k8s_source *src)
{
    memset(src, 0, sizeof *src);
    src->service_host = getenv("KUBERNETES_SERVICE_HOST");
    src->service_port = getenv("KUBERNETES_SERVICE_PORT");
    src->kubeconfig = getenv("KUBECONFIG");
    src->home = getenv("HOME");
}

void k8s_creds_free(struct k8s_creds *c)
{
    char **strs[] = {&c->server, &c->namespace, &c->token, &c->token_file, &c->origin,
                     &c->ca_file, &c->ca_pem, &c->cert_file, &c->cert_pem, &c->key_file,
                     &c->key_pem};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        free(*strs[i]);
    memset(c, 0, sizeof *c);
}

static void creds_point_tls(struct k8s_creds *c, int insecure, size_t ca_len, size_t cert_len,
                            size_t key_len)
{
    c->tls = (struct http_tls){
        .ca_file = c->ca_file, .ca_pem = c->ca_pem, .ca_pem_len = ca_len,
        .cert_file = c->cert_file, .cert_pem = c->cert_pem, .cert_pem_len = cert_len,
        .key_file = c->key_file, .key_pem = c->key_pem, .key_pem_len = key_len,
        .insecure = insecure,
    };
}

static int creds_in_cluster(const struct k8s_source *src, struct k8s_creds *c, char *err,
                            size_t err_cap)
{
    const char *dir = src->sa_dir ? src->sa_dir : K8S_SA_DIR;
    if (!src->service_port || !*src->service_port) {
        sfmt(err, err_cap, "KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not");
        return -ENOENT;
    }
    int v6 = strchr(src->service_host, ':') != NULL;
    c->server = str_printf("https://%s%s%s:%s", v6 ? "[" : "", src->service_host, v6 ? "]" : "",
                           src->service_port);
    c->token_file = str_printf("%s/token", dir);
    c->ca_file = str_printf("%s/ca.crt", dir);
    c->origin = str_printf("the in-cluster service account (%s)", dir);
    char *ns_path = str_printf("%s/namespace", dir);
    if (!c->server || !c->token_file || !c->ca_file || !c->origin || !ns_path) {
        free(ns_path);
        return -ENOMEM;
    }
    if (access(c->token_file, R_OK) != 0) {
        sfmt(err, err_cap, "in a cluster (KUBERNETES_SERVICE_HOST=%s) but no service account "
               "token at %s: is automountServiceAccountToken false for this pod?",
               src->service_host, c->token_file);
        free(ns_path);
        return -ENOENT;
    }
    if (access(c->ca_file, R_OK) != 0) {
        sfmt(err, err_cap, "in a cluster but no CA certificate at %s", c->ca_file);
        free(ns_path);
        return -ENOENT;
    }
    char *ns = NULL;
    if (read_file(ns_path, 256, &ns, NULL) == 0) {
        trim(ns);
        if (*ns)
            c->namespace = ns;
        else
            free(ns);
    }
    free(ns_path);
    if (!c->namespace && !(c->namespace = strdup("default")))
        return -ENOMEM;
    creds_point_tls(c, 0, 0, 0, 0);
    return 0;
}

/* A path from a kubeconfig, relative to the directory of the file that named it. */
static char *relative_to(const char *file, const char *path)
{
    if (!path)
        return NULL;
    if (path[0] == '/')
        return strdup(path);
    const char *slash = strrchr(file, '/');
    if (!slash)
        return strdup(path);
    return str_printf("%.*s/%s", (int)(slash - file), file, path);
}

/* The kubeconfig files to read: KUBECONFIG's list (missing files skipped, as kubectl does),
 * else HOME/.kube/config. */
static int kubeconfig_paths(const struct k8s_source *src, char ***paths, size_t *n, char *err,
                            size_t err_cap)
{
    *paths = NULL;
    *n = 0;
    char *list = NULL;
    if (src->kubeconfig && *src->kubeconfig)
        list = strdup(src->kubeconfig);
    else if (src->home && *src->home)
        list = str_printf("%s/.kube/config", src->home);
    else {
        sfmt(err, err_cap, "not in a cluster (KUBERNETES_SERVICE_HOST is not set) and no "
               "kubeconfig (neither KUBECONFIG nor HOME is set)");
        return -ENOENT;
    }
    if (!list)
        return -ENOMEM;
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ':';
    *paths = calloc(cap, sizeof **paths);
    if (!*paths) {
        free(list);
        return -ENOMEM;
    }
    char *save = NULL;
    for (char *tok = strtok_r(list, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
        if (access(tok, F_OK) == 0 && !((*paths)[(*n)++] = strdup(tok))) {
            free(list);
            return -ENOMEM;
        }
    if (*n == 0) {
        sfmt(err, err_cap, "not in a cluster (KUBERNETES_SERVICE_HOST is not set) and no "
               "kubeconfig at %s", src->kubeconfig && *src->kubeconfig ? src->kubeconfig : list);
        free(list);
        return -ENOENT;
    }
    free(list);
    return 0;
}

/* Takes kc's PEM blobs over (they are set to NULL in kc). */
static int creds_from_kubeconfig(struct kubeconfig *kc, char *const *paths, struct k8s_creds *c)
{
    const char *cfile = paths[kc->cluster_from], *ufile = paths[kc->user_from];
    size_t n = strlen(kc->server);
    while (n > 0 && kc->server[n - 1] == '/')
        n--;
    c->server = str_printf("%.*s", (int)n, kc->server);
    c->namespace = strdup(kc->namespace ? kc->namespace : "default");
    c->origin = str_printf("kubeconfig %s, context %s", paths[0], kc->context);
    if (!c->server || !c->namespace || !c->origin)
        return -ENOMEM;
    if ((kc->token && !(c->token = strdup(kc->token))) ||
        (kc->token_file && !(c->token_file = relative_to(ufile, kc->token_file))) ||
        (kc->ca_file && !(c->ca_file = relative_to(cfile, kc->ca_file))) ||
        (kc->cert_file && !(c->cert_file = relative_to(ufile, kc->cert_file))) ||
        (kc->key_file && !(c->key_file = relative_to(ufile, kc->key_file))))
        return -ENOMEM;
    c->ca_pem = kc->ca_data;
    c->cert_pem = kc->cert_data;
    c->key_pem = kc->key_data;
    kc->ca_data = kc->cert_data = kc->key_data = NULL;
    creds_point_tls(c, kc->insecure, kc->ca_data_len, kc->cert_data_len, kc->key_data_len);
    return 0;
}

static int creds_kubeconfig(const struct k8s_source *src, struct k8s_creds *c, char *err,
                            size_t err_cap)
{
    char **paths;
    size_t n;
    int rc = kubeconfig_paths(src, &paths, &n, err, err_cap);
    if (rc) {
        free(paths);
        return rc;
    }
    struct kubeconfig_file **files = calloc(n, sizeof *files);
    size_t parsed = 0;
    rc = files ? 0 : -ENOMEM;
    char perr[200];
    for (; !rc && parsed < n; parsed++) {
        char *text;
        size_t len;
        rc = read_file(paths[parsed], K8S_FILE_MAX, &text, &len);
        if (rc) {
            sfmt(err, err_cap, "kubeconfig %s: %s", paths[parsed], strerror(-rc));
            break;
        }
        rc = kubeconfig_file_parse(text, len, &files[parsed], perr, sizeof perr);
        free(text);
        if (rc) {
            sfmt(err, err_cap, "kubeconfig %s: %s", paths[parsed], perr);
            break;
        }
    }
    struct kubeconfig kc;
    if (!rc) {
        rc = kubeconfig_resolve(files, n, src->context, &kc, perr, sizeof perr);
        if (rc)
            sfmt(err, err_cap, "kubeconfig %s: %s", paths[0], perr);
        else {
            rc = creds_from_kubeconfig(&kc, paths, c);
            kubeconfig_free(&kc);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (files && i < parsed)
            kubeconfig_file_free(files[i]);
        free(paths[i]);
    }
    free(files);
    free(paths);
    return rc;
}

int k8s_creds_load(const struct k8s_source *src, struct k8s_creds *out, char *err,
                   size_t err_cap)
{
    memset(out, 0, sizeof *out);
    int rc = src->service_host && *src->service_host ? creds_in_cluster(src, out, err, err_cap)
                                                     : creds_kubeconfig(src, out, err, err_cap);
    if (rc == -ENOMEM)
        sfmt(err, err_cap, "out of memory reading Kubernetes credentials");
    if (rc)
        k8s_creds_free(out);
    return rc;
}

/* ---- the watch ---- */

enum wstate { W_LISTING, W_WATCHING, W_WAITING, W_DEAD };
enum wnext { NEXT_LIST, NEXT_WATCH };

struct k8s_watch {
    uv_loop_t *loop;
    http_client_t *http;
    const struct k8s_creds *creds;
    struct k8s_watch_params p;
    char *ns;
    char *pods_url;             /* SERVER/api/v1/namespaces/NS/pods */
    char *selectors;            /* "&labelSelector=...&fieldSelector=...", encoded; or "" */
    struct k8s_pods pods, next;
    char cont[K8S_CONTINUE_MAX + 1];
    char token[K8S_TOKEN_MAX];
    http_request_t *req;
    uv_timer_t timer;
    enum wstate state;
    enum wnext after_wait;
    int attempt;                /* failures in a row: the backoff's exponent */
    int auth_failures;
    int relist;                 /* the stream said 410 */
    int gone_streak;            /* watches that met 410 before any event, in a row */
    int synced;
    int stopped;
    int watch_delivered;
    char why[400];              /* why this side ended the stream */
    uint64_t watch_started;
    uint64_t rng;
    unsigned lists, watches;
};

static void w_list(k8s_watch_t *w);
static void w_watch(k8s_watch_t *w);

/* Percent-encodes everything but RFC 3986's unreserved characters. */
static char *url_escape(const char *s)
{
    char *out = malloc(strlen(s) * 3 + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~')
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = '\0';
    return out;
}

static void w_progress(k8s_watch_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void w_progress(k8s_watch_t *w, const char *fmt, ...)
{
    if (!w->p.on_progress)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    w->p.on_progress(w, line, w->p.arg);
}

/* Gives up: no request, no timer, one line to the owner. */
static void w_fatal(k8s_watch_t *w, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void w_fatal(k8s_watch_t *w, int err, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    w->state = W_DEAD;
    http_request_cancel(w->req);
    w->req = NULL;
    uv_timer_stop(&w->timer);
    w->p.on_fatal(w, err, line, w->p.arg);
}

const char *k8s_creds_token(const struct k8s_creds *c, char *buf, size_t cap)
{
    if (c->token_file) {
        char *t = NULL;
        if (cap > 1 && read_file(c->token_file, cap - 1, &t, NULL) == 0 && t) {
            trim(t);
            if (*t && !strpbrk(t, "\r\n"))
                snprintf(buf, cap, "%s", t);
            free(t);
        }
        return cap && buf[0] ? buf : NULL;
    }
    return c->token;
}

void k8s_denied_line(const struct k8s_creds *c, const char *ns, long code, const char *msg,
                     char *out, size_t cap)
{
    snprintf(out, cap, "kubernetes API %s: %ld %s: %s (credentials: %s); the service account "
             "needs a Role in namespace %s with rules [apiGroups: [\"\"], resources: [\"pods\"], "
             "verbs: [\"get\", \"list\", \"watch\"]] and a RoleBinding to it", c->server, code,
             code == 401 ? "Unauthorized" : "Forbidden", msg && *msg ? msg : "denied", c->origin,
             ns);
}

/* The token for the next request: the token file as it is now (it is rotated under us), else
 * the last one read, else the kubeconfig's. */
static const char *w_token(k8s_watch_t *w)
{
    return k8s_creds_token(w->creds, w->token, sizeof w->token);
}

static void on_timer(uv_timer_t *t)
{
    k8s_watch_t *w = t->data;
    if (w->stopped || w->state != W_WAITING)
        return;
    if (w->after_wait == NEXT_LIST)
        w_list(w);
    else
        w_watch(w);
}

/* Tries `next` again after the backoff, saying why. */
static void w_retry(k8s_watch_t *w, enum wnext next, const char *why)
{
    int lo = w->p.backoff_min_ms, hi = w->p.backoff_max_ms;
    uint64_t delay = (uint64_t)lo << (w->attempt < 16 ? w->attempt : 16);
    if (delay > (uint64_t)hi)
        delay = (uint64_t)hi;
    w->rng ^= w->rng << 13, w->rng ^= w->rng >> 7, w->rng ^= w->rng << 17;
    delay = delay * 3 / 4 + (delay > 1 ? w->rng % (delay / 2) : 0);
    w->attempt++;
    w->state = W_WAITING;
    w->after_wait = next;
    w_progress(w, "kubernetes API %s: %s; %s again in %.1f s", w->creds->server, why,
               next == NEXT_LIST ? "listing pods" : "watching", (double)delay / 1000.0);
    uv_timer_start(&w->timer, on_timer, delay, 0);
}

static const char *status_message(const struct http_result *res, struct k8s_status *st)
{
    memset(st, 0, sizeof *st);
    if (res->body && k8s_status_parse(res->body, res->body_len, st) == 0 && st->message[0])
        return st->message;
    return res->http_status == 401 ? "Unauthorized" : res->http_status == 403 ? "Forbidden" : "";
}

/* A response that is neither success nor a transport failure. Returns 1 when handled (fatal or
 * retry scheduled). */
static int w_refused(k8s_watch_t *w, const struct http_result *res, enum wnext next)
{
    long code = res->http_status;
    struct k8s_status st;
    const char *msg = status_message(res, &st);
    if (code == 401 || code == 403) {
        if (++w->auth_failures < w->p.auth_retries) {
            char why[400];
            snprintf(why, sizeof why, "%ld %s", code, msg);
            w_retry(w, next, why);
            return 1;
        }
        char line[1024];
        k8s_denied_line(w->creds, w->ns, code, msg, line, sizeof line);
        w_fatal(w, -EACCES, "%s", line);
        return 1;
    }
    if (code >= 400 && code < 500 && code != 408 && code != 429 && code != 410) {
        w_fatal(w, -EINVAL, "kubernetes API %s: %ld %s%s%s", w->creds->server, code,
                st.reason[0] ? st.reason : "", msg[0] ? ": " : "", msg);
        return 1;
    }
    return 0;
}

/* A transport failure, or an answer worth retrying (5xx, 429): the error, or the status with
 * the server's Status message when it sent one. */
static void w_request_failed(k8s_watch_t *w, const struct http_result *res, enum wnext next)
{
    char why[400];
    struct k8s_status st;
    if (res->status)
        snprintf(why, sizeof why, "%s", res->error[0] ? res->error : strerror(-res->status));
    else
        snprintf(why, sizeof why, "HTTP %ld%s%s", res->http_status,
                 status_message(res, &st)[0] ? ": " : "", st.message);
    w_retry(w, next, why);
}

/* ---- listing ---- */

static void w_list_done(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    k8s_watch_t *w = arg;
    w->req = NULL;
    if (res->status || res->http_status != 200) {
        k8s_pods_clear(&w->next);
        w->cont[0] = '\0';
        if (res->status == 0 && res->http_status == 410)
            w_retry(w, NEXT_LIST, "the list's continue token expired (410)");
        else if (res->status || !w_refused(w, res, NEXT_LIST))
            w_request_failed(w, res, NEXT_LIST);
        return;
    }
    char err[256];
    int rc = k8s_pods_add_list(&w->next, res->body ? res->body : "", res->body_len, w->cont,
                               sizeof w->cont, err, sizeof err);
    if (rc == -EMSGSIZE && w->next.n >= w->next.max) {
        w_fatal(w, -EMSGSIZE, "kubernetes API %s: more than %zu pods match in namespace %s; "
                "narrow the selector", w->creds->server, w->next.max, w->ns);
        return;
    }
    if (rc) {
        k8s_pods_clear(&w->next);
        w->cont[0] = '\0';
        char why[300];
        snprintf(why, sizeof why, "the pod list does not parse: %s", err);
        w_retry(w, NEXT_LIST, why);
        return;
    }
    if (w->cont[0]) {
        w_list(w);
        return;
    }
    /* The last page: the new table replaces the old one. */
    struct k8s_pods old = w->pods;
    w->pods = w->next;
    w->next = old;
    int changed = !w->synced || !k8s_pods_same(&w->pods, &w->next);
    k8s_pods_clear(&w->next);
    w->lists++;
    w->synced = 1;
    w->attempt = 0;
    w->auth_failures = 0;
    if (changed) {
        w->p.on_change(w, &w->pods, w->p.arg);
        if (w->stopped || w->state == W_DEAD)
            return;
    }
    w_watch(w);
}

static void w_list(k8s_watch_t *w)
{
    char *cont = w->cont[0] ? url_escape(w->cont) : NULL;
    char *url = str_printf("%s?limit=%d%s%s%s", w->pods_url, K8S_LIST_PAGE, w->selectors,
                           cont ? "&continue=" : "", cont ? cont : "");
    free(cont);
    w->state = W_LISTING;
    if (!url) {
        w_fatal(w, -ENOMEM, "out of memory listing pods");
        return;
    }
    struct http_request_opts o = {
        .url = url, .bearer_token = w_token(w), .tls = &w->creds->tls,
        .headers = (const char *const[]){"Accept: application/json", NULL},
        .timeout_ms = 60000, .max_body = K8S_LIST_BODY_MAX,
        .mode = HTTP_BODY_BUFFER, .on_done = w_list_done, .arg = w,
    };
    int rc = http_request_start(w->http, &o, &w->req);
    free(url);
    if (rc)
        w_fatal(w, rc, "kubernetes API %s: cannot start a request: %s", w->creds->server,
                strerror(-rc));
}

/* ---- watching ---- */

static int w_event(http_request_t *r, const char *line, size_t len, void *arg)
{
    (void)r;
    k8s_watch_t *w = arg;
    if (len == 0)
        return 0;
    struct k8s_event *ev = malloc(sizeof *ev);
    if (!ev)
        return -ENOMEM;
    char err[256];
    int rc = k8s_event_parse(line, len, ev, err, sizeof err);
    if (rc == 0 && ev->type == K8S_EVENT_ERROR) {
        if (ev->status.code == 410)
            w->relist = 1;
        else
            snprintf(w->why, sizeof w->why, "the watch ended with %d %s: %s", ev->status.code,
                     ev->status.reason, ev->status.message);
        rc = -ESTALE;
    } else if (rc == 0) {
        w->watch_delivered = 1;
        w->gone_streak = 0;
        w->attempt = 0;
        w->auth_failures = 0;
        rc = k8s_pods_apply(&w->pods, ev);
        if (rc == -EMSGSIZE) {
            w_fatal(w, -EMSGSIZE, "kubernetes API %s: more than %zu pods match in namespace %s; "
                    "narrow the selector", w->creds->server, w->pods.max, w->ns);
        } else if (rc == 1) {
            w->p.on_change(w, &w->pods, w->p.arg);
            rc = 0;
        }
    } else {
        snprintf(w->why, sizeof w->why, "a watch event does not parse: %s", err);
    }
    free(ev);
    return rc < 0 ? rc : 0;
}

static void w_watch_done(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    k8s_watch_t *w = arg;
    w->req = NULL;
    if (w->relist || res->http_status == 410) {
        /* Listing again is the cure, unless this watch had just started from a fresh list:
         * then the server is not keeping up, and listing in a loop would not help it. */
        w->relist = 0;
        if (!w->watch_delivered && w->gone_streak++ > 0) {
            w->attempt = w->gone_streak - 1;
            w_retry(w, NEXT_LIST, "410 Gone again right after listing");
            return;
        }
        w_progress(w, "kubernetes API %s: 410 Gone, the watch fell out of the server's history; "
                   "listing pods again", w->creds->server);
        w_list(w);
        return;
    }
    if (res->status == 0 && res->http_status == 200) {
        /* The server's timeoutSeconds: go on from the last version. A stream that ends at once
         * with nothing in it is not progress, so it waits like a failure. */
        uint64_t ran = uv_now(w->loop) - w->watch_started;
        if (w->watch_delivered || ran >= 1000) {
            w_watch(w);
            return;
        }
        w_retry(w, NEXT_WATCH, "the watch ended at once");
        return;
    }
    if (res->status == 0 && w_refused(w, res, NEXT_WATCH))
        return;
    if (w->why[0])
        w_retry(w, NEXT_WATCH, w->why);   /* the stream was ended here, for this reason */
    else
        w_request_failed(w, res, NEXT_WATCH);
}

static void w_watch(k8s_watch_t *w)
{
    char *rv = url_escape(w->pods.rv);
    char *url = rv ? str_printf("%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s"
                                "&timeoutSeconds=%d%s",
                                w->pods_url, rv, w->p.watch_timeout_s, w->selectors)
                   : NULL;
    free(rv);
    w->state = W_WATCHING;
    if (!url) {
        w_fatal(w, -ENOMEM, "out of memory watching pods");
        return;
    }
    struct http_request_opts o = {
        .url = url, .bearer_token = w_token(w), .tls = &w->creds->tls,
        .headers = (const char *const[]){"Accept: application/json", NULL},
        /* The server ends the stream at timeoutSeconds; silence well past it is a dead peer. */
        .idle_timeout_ms = (w->p.watch_timeout_s + 30) * 1000,
        .max_body = K8S_EVENT_MAX, .mode = HTTP_BODY_LINES,
        .on_data = w_event, .on_done = w_watch_done, .arg = w,
    };
    w->watch_started = uv_now(w->loop);
    w->watch_delivered = 0;
    w->why[0] = '\0';
    w->watches++;
    int rc = http_request_start(w->http, &o, &w->req);
    free(url);
    if (rc)
        w_fatal(w, rc, "kubernetes API %s: cannot start a request: %s", w->creds->server,
                strerror(-rc));
}

/* ---- lifetime ---- */

static void w_closed(uv_handle_t *h)
{
    k8s_watch_t *w = h->data;
    k8s_pods_free(&w->pods);
    k8s_pods_free(&w->next);
    free(w->ns);
    free(w->pods_url);
    free(w->selectors);
    free(w);
}

static char *selectors_query(const struct k8s_watch_params *p)
{
    char *l = p->label_selector && *p->label_selector ? url_escape(p->label_selector) : NULL;
    char *f = p->field_selector && *p->field_selector ? url_escape(p->field_selector) : NULL;
    char *q = str_printf("%s%s%s%s", l ? "&labelSelector=" : "", l ? l : "",
                         f ? "&fieldSelector=" : "", f ? f : "");
    free(l);
    free(f);
    return q;
}

int k8s_watch_start(uv_loop_t *loop, http_client_t *http, const struct k8s_creds *creds,
                    const struct k8s_watch_params *p, k8s_watch_t **out)
{
    if (!p->on_change || !p->on_fatal || !creds || !creds->server)
        return -EINVAL;
    k8s_watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->loop = loop;
    w->http = http;
    w->creds = creds;
    w->p = *p;
    w->p.namespace = w->p.label_selector = w->p.field_selector = NULL;
    if (!w->p.backoff_min_ms)
        w->p.backoff_min_ms = 250;
    if (!w->p.backoff_max_ms)
        w->p.backoff_max_ms = 8000;
    if (w->p.backoff_max_ms < w->p.backoff_min_ms)
        w->p.backoff_max_ms = w->p.backoff_min_ms;
    if (w->p.watch_timeout_s <= 0)
        w->p.watch_timeout_s = 300;
    if (w->p.watch_timeout_s > 3600)
        w->p.watch_timeout_s = 3600;
    if (w->p.auth_retries <= 0)
        w->p.auth_retries = 3;
    w->ns = url_escape(p->namespace && *p->namespace ? p->namespace : creds->namespace);
    w->pods_url = w->ns ? str_printf("%s/api/v1/namespaces/%s/pods", creds->server, w->ns) : NULL;
    w->selectors = selectors_query(p);
    if (!w->ns || !w->pods_url || !w->selectors) {
        free(w->ns);
        free(w->pods_url);
        free(w->selectors);
        free(w);
        return -ENOMEM;
    }
    k8s_pods_init(&w->pods, p->max_pods ? p->max_pods : 4096);
    k8s_pods_init(&w->next, w->pods.max);
    w->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)w;
    if (!w->rng)
        w->rng = 1;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    w_list(w);
    *out = w;
    return 0;
}

void k8s_watch_stop(k8s_watch_t *w)
{
    if (!w || w->stopped)
        return;
    w->stopped = 1;
    w->state = W_DEAD;
    http_request_cancel(w->req);
    w->req = NULL;
    uv_close((uv_handle_t *)&w->timer, w_closed);
}

const struct k8s_pods *k8s_watch_pods(const k8s_watch_t *w)
{
    return &w->pods;
}

unsigned k8s_watch_lists(const k8s_watch_t *w)
{
    return w->lists;
}

unsigned k8s_watch_watches(const k8s_watch_t *w)
{
    return w->watches;
}
