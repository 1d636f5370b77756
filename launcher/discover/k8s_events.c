/* launcher/discover/k8s_events.c — Events on this pod (see k8s_events.h). */
#include "launcher/discover/k8s_events.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"

/* ---- on the loop ---- */

struct queued {
    enum k8s_event_kind kind;
    double time;
    char message[K8S_EVENT_MESSAGE_MAX];
};

struct k8s_events {
    struct k8s_client *cl;
    char host[K8S_CLIENT_NAME_MAX];
    void (*say)(void *arg, const char *line);
    void *arg;
    char uid[64];
    bool uid_pending;            /* the pod's GET (for its uid) is in flight */
    http_request_t *req;
    struct queued q[K8S_EVENTS_QUEUE];
    int qhead, qn;
    struct k8s_event_bucket bucket;
    unsigned seq, unsaid;        /* unsaid: events dropped since the last one sent */
    bool denied;                 /* 401/403: nothing more is posted */
    bool down;                   /* the last post failed: said once until one goes through */
    bool closing;
    uv_timer_t timer;            /* the flush's bound */
    void (*flushed)(void *arg);
    void *flush_arg;
};

static void ev_say(k8s_events_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ev_say(k8s_events_t *e, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (e->say)
        e->say(e->arg, line);
}

static void ev_next(k8s_events_t *e);

static void ev_flush_check(k8s_events_t *e)
{
    if (e->flushed && !e->req && !e->uid_pending && (e->qn == 0 || e->denied)) {
        void (*done)(void *) = e->flushed;
        e->flushed = NULL;
        uv_timer_stop(&e->timer);
        done(e->flush_arg);
    }
}

static void ev_posted(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    k8s_events_t *e = arg;
    e->req = NULL;
    char why[600];
    if (res->status == 0 && (res->http_status == 201 || res->http_status == 200)) {
        e->unsaid = 0;
        if (e->down)
            ev_say(e, "kubernetes API %s: Events are posted again", e->cl->creds.server);
        e->down = false;
    } else if (res->status == 0 && (res->http_status == 401 || res->http_status == 403)) {
        k8s_client_why(res, why, sizeof why);
        ev_say(e, "kubernetes API %s: cannot post Events on pod %s: %s; the job goes on "
               "without them (to have them, give the service account (%s) a Role rule "
               "[apiGroups: [\"\"], resources: [\"events\"], verbs: [\"create\"]], as "
               "docker/rbac.yaml does)", e->cl->creds.server, e->cl->pod, why,
               e->cl->creds.origin);
        e->denied = true;
        e->qn = 0;
    } else {
        e->unsaid++;
        if (!e->down) {
            k8s_client_why(res, why, sizeof why);
            ev_say(e, "kubernetes API %s: cannot post an Event on pod %s: %s; the job goes on, "
                   "and its Events are dropped until the API answers", e->cl->creds.server,
                   e->cl->pod, why);
        }
        e->down = true;
    }
    ev_next(e);
    ev_flush_check(e);
}

/* Sends the oldest queued event, if none is in flight. */
static void ev_next(k8s_events_t *e)
{
    while (!e->req && !e->uid_pending && !e->denied && !e->closing && e->qn > 0) {
        struct queued *q = &e->q[e->qhead];
        e->qhead = (e->qhead + 1) % K8S_EVENTS_QUEUE;
        e->qn--;
        char msg[K8S_EVENT_MESSAGE_MAX + 96];
        if (e->unsaid)
            snprintf(msg, sizeof msg, "%s (%u earlier event%s dropped)", q->message, e->unsaid,
                     e->unsaid == 1 ? "" : "s");
        else
            snprintf(msg, sizeof msg, "%s", q->message);
        struct k8s_event_desc d = {
            .ns = e->cl->ns, .pod = e->cl->pod, .uid = e->uid, .host = e->host,
            .kind = q->kind, .message = msg, .time = q->time, .seq = e->seq++,
        };
        char *body = k8s_event_json(&d);
        char path[K8S_CLIENT_NAME_MAX + 40];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", e->cl->ns);
        int r = body ? k8s_client_request(e->cl, "POST", path, body, NULL,
                                          K8S_EVENTS_TIMEOUT_MS, HTTP_BODY_BUFFER, NULL,
                                          ev_posted, e, &e->req)
                     : -ENOMEM;
        free(body);
        if (r) {
            e->req = NULL;
            e->unsaid++;
        }
    }
}

/* The pod's uid, so that `kubectl describe pod` (which asks for its events by uid) shows
 * them; without it (no get on pods) the events still carry the pod's name. */
static void ev_got_pod(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    k8s_events_t *e = arg;
    e->req = NULL;
    e->uid_pending = false;
    if (res->status == 0 && res->http_status == 200 && res->body) {
        json_t *o = json_loadb(res->body, res->body_len, 0, NULL);
        const char *uid = json_string_value(json_object_get(json_object_get(o, "metadata"),
                                                            "uid"));
        if (uid)
            snprintf(e->uid, sizeof e->uid, "%s", uid);
        json_decref(o);
    }
    ev_next(e);
    ev_flush_check(e);
}

int k8s_events_open(struct k8s_client *cl, const char *host,
                    void (*say)(void *arg, const char *line), void *arg, k8s_events_t **out)
{
    k8s_events_t *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->cl = cl;
    snprintf(e->host, sizeof e->host, "%s", host ? host : "");
    e->say = say;
    e->arg = arg;
    k8s_event_bucket_init(&e->bucket, uv_now(cl->loop));
    uv_timer_init(cl->loop, &e->timer);
    e->timer.data = e;
    char path[2 * K8S_CLIENT_NAME_MAX + 40];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", cl->ns, cl->pod);
    e->uid_pending = k8s_client_request(cl, "GET", path, NULL, NULL, K8S_EVENTS_TIMEOUT_MS,
                                        HTTP_BODY_BUFFER, NULL, ev_got_pod, e, &e->req) == 0;
    if (!e->uid_pending)
        e->req = NULL;
    *out = e;
    return 0;
}

void k8s_events_post(k8s_events_t *e, enum k8s_event_kind kind, const char *fmt, ...)
{
    if (!e || e->denied || e->closing)
        return;
    /* the end of the job always goes out: it is the one a person looks for */
    bool final = kind == K8S_EV_SUCCEEDED || kind == K8S_EV_FAILED;
    if ((!final && !k8s_event_bucket_take(&e->bucket, uv_now(e->cl->loop))) ||
        (e->qn == K8S_EVENTS_QUEUE && !final)) {
        e->unsaid++;
        return;
    }
    if (e->qn == K8S_EVENTS_QUEUE) {   /* the final one pushes out the oldest */
        e->qhead = (e->qhead + 1) % K8S_EVENTS_QUEUE;
        e->qn--;
        e->unsaid++;
    }
    struct queued *q = &e->q[(e->qhead + e->qn) % K8S_EVENTS_QUEUE];
    q->kind = kind;
    q->time = podrun_time_epoch();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->message, sizeof q->message, fmt, ap);
    va_end(ap);
    e->qn++;
    ev_next(e);
}

static void ev_flush_bound(uv_timer_t *t)
{
    k8s_events_t *e = t->data;
    void (*done)(void *) = e->flushed;
    e->flushed = NULL;
    if (done)
        done(e->flush_arg);
}

void k8s_events_flush(k8s_events_t *e, int bound_ms, void (*done)(void *arg), void *arg)
{
    e->flushed = done;
    e->flush_arg = arg;
    uv_timer_start(&e->timer, ev_flush_bound, (uint64_t)bound_ms, 0);
    ev_flush_check(e);
}

static void ev_closed(uv_handle_t *h)
{
    free(h->data);
}

void k8s_events_close(k8s_events_t *e)
{
    if (!e)
        return;
    e->closing = true;
    e->flushed = NULL;
    if (e->req)
        http_request_cancel(e->req);
    e->req = NULL;
    uv_close((uv_handle_t *)&e->timer, ev_closed);
}
