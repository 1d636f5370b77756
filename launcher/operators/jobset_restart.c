/* launcher/operators/jobset_restart.c — JobSet's in-place restart protocol (see
 * jobset_restart.h). */
#include "launcher/operators/jobset_restart.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JR_BACKOFF_MIN_MS 250
#define JR_BACKOFF_MAX_MS 8000
#define JR_TIMEOUT_MS 10000
#define JR_WATCH_S 300

/* ---- on the loop ---- */

struct jobset_restart {
    struct jobset_restart_params p;
    char obj_path[3 * K8S_CLIENT_NAME_MAX];    /* .../jobsets/NAME */
    char list_path[2 * K8S_CLIENT_NAME_MAX];   /* .../jobsets */
    http_request_t *get, *watch, *patch;
    uv_timer_t timer;
    int failures;             /* in a row: the backoff's exponent */
    struct jobset_ipr st;
    bool known;               /* st was read */
    bool active;              /* the protocol is in use */
    long attempt;             /* this pod's, as written; -1 before */
    long want;                /* being written; -1: none */
    bool barrier;             /* up: the job waits for on_go */
    bool closed;
};

static void jr_say(jobset_restart_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jr_say(jobset_restart_t *j, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (j->p.say)
        j->p.say(j->p.arg, line);
}

static void jr_get(jobset_restart_t *j);
static void jr_watch(jobset_restart_t *j);
static void jr_patch(jobset_restart_t *j, long attempt);
static void jr_on_timer(uv_timer_t *t);

static void jr_retry(jobset_restart_t *j, const char *what, const struct http_result *res)
{
    char why[600];
    k8s_client_why(res, why, sizeof why);
    uint64_t delay = (uint64_t)JR_BACKOFF_MIN_MS << (j->failures < 6 ? j->failures : 6);
    if (delay > JR_BACKOFF_MAX_MS)
        delay = JR_BACKOFF_MAX_MS;
    if (j->failures++ == 0 || delay == JR_BACKOFF_MAX_MS)
        jr_say(j, "JobSet %s: %s: %s; again in %.1f s", j->p.jobset, what, why,
               (double)delay / 1000.0);
    uv_timer_start(&j->timer, jr_on_timer, delay, 0);
}

/* The protocol is off for this pod: the job goes on as without it. */
static void jr_pass(jobset_restart_t *j)
{
    j->active = false;
    j->barrier = false;
    j->p.on_go(j->p.arg, -1);
}

/* What the JobSet's status means for this pod now. */
static void jr_evaluate(jobset_restart_t *j)
{
    if (!j->active || j->want >= 0 || j->attempt < 0)
        return;
    enum jobset_ipr_step s = jobset_ipr_step(&j->st, j->attempt);
    if (j->barrier && j->st.terminal[0]) {
        jr_say(j, "JobSet %s: it has ended (%s) while this pod waited at in-place restart "
               "attempt %ld", j->p.jobset, j->st.terminal, j->attempt);
        j->active = false;
        j->p.on_ended(j->p.arg, j->st.terminal);
    } else if (j->barrier && s == JOBSET_IPR_BEHIND) {
        /* a pod went further while this one waited: this one follows without a restart */
        jr_patch(j, j->st.previous + 1);
    } else if (j->barrier && s == JOBSET_IPR_LIFT) {
        j->barrier = false;
        jr_say(j, "JobSet %s: every pod is at in-place restart attempt %ld; the barrier is down",
               j->p.jobset, j->attempt);
        j->p.on_go(j->p.arg, j->attempt);
    } else if (!j->barrier && s == JOBSET_IPR_BEHIND) {
        j->p.on_behind(j->p.arg, j->attempt, j->st.previous);
    }
}

static void jr_patched(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    jobset_restart_t *j = arg;
    j->patch = NULL;
    long want = j->want;
    if (res->status == 0 && res->http_status == 200) {
        j->failures = 0;
        j->want = -1;
        j->attempt = want;
        char cur[24] = "none", prev[24] = "none";
        if (j->st.current >= 0)
            snprintf(cur, sizeof cur, "%ld", j->st.current);
        if (j->st.previous >= 0)
            snprintf(prev, sizeof prev, "%ld", j->st.previous);
        jr_say(j, "JobSet %s: this pod is at in-place restart attempt %ld; waiting for the "
               "JobSet's other pods (current attempt %s, previous %s)", j->p.jobset, want, cur,
               prev);
        jr_evaluate(j);
        return;
    }
    if (res->status == 0 && res->http_status >= 400 && res->http_status < 500 &&
        res->http_status != 409 && res->http_status != 429) {
        char why[600];
        k8s_client_why(res, why, sizeof why);
        jr_say(j, "JobSet %s: cannot write this pod's annotation %s: %s; the job starts without "
               "in-place restart (the service account needs [apiGroups: [\"\"], resources: "
               "[\"pods\"], verbs: [\"patch\"]])", j->p.jobset, JOBSET_ATTEMPT_KEY, why);
        j->want = -1;
        jr_pass(j);
        return;
    }
    jr_retry(j, "writing this pod's in-place restart attempt", res);
}

static void jr_patch(jobset_restart_t *j, long attempt)
{
    char path[3 * K8S_CLIENT_NAME_MAX], body[160];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s?fieldManager=podrun",
             j->p.cl->ns, j->p.cl->pod);
    snprintf(body, sizeof body, "{\"metadata\":{\"annotations\":{\"%s\":\"%ld\"}}}",
             JOBSET_ATTEMPT_KEY, attempt);
    j->want = attempt;
    if (j->patch)
        http_request_cancel(j->patch);
    int r = k8s_client_request(j->p.cl, "PATCH", path, body, "application/merge-patch+json",
                               JR_TIMEOUT_MS, HTTP_BODY_BUFFER, NULL, jr_patched, j, &j->patch);
    if (r) {
        j->patch = NULL;
        struct http_result res = {.status = r, .error = ""};
        jr_retry(j, "writing this pod's in-place restart attempt", &res);
    }
}

static void jr_got(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    jobset_restart_t *j = arg;
    j->get = NULL;
    char why[600];
    if (res->status == 0 && (res->http_status == 401 || res->http_status == 403 ||
                             res->http_status == 404)) {
        k8s_client_why(res, why, sizeof why);
        jr_say(j, "JobSet %s: cannot read it: %s; the job starts without in-place restart%s",
               j->p.jobset, why, res->http_status == 404 ? "" :
               " (the service account needs [apiGroups: [\"jobset.x-k8s.io\"], resources: "
               "[\"jobsets\"], verbs: [\"get\", \"list\", \"watch\"]])");
        jr_pass(j);
        return;
    }
    struct jobset_ipr st;
    if (res->status || res->http_status != 200 || !res->body ||
        jobset_ipr_parse(res->body, res->body_len, &st)) {
        jr_retry(j, "reading the JobSet", res);
        return;
    }
    j->failures = 0;
    j->st = st;
    if (!j->known) {
        j->known = true;
        if (!st.in_place || st.disabled) {
            jr_say(j, "JobSet %s: %s; podrun restarts the job in place by itself", j->p.jobset,
                   st.disabled ? "in-place restart is disabled (" JOBSET_DISABLE_KEY ")"
                               : "its restartStrategy is not InPlaceRestart");
            jr_pass(j);
            return;
        }
        j->active = true;
        jr_patch(j, jobset_ipr_first(&st));
    } else {
        jr_evaluate(j);
    }
    if (j->active && !j->closed)
        jr_watch(j);
}

static void jr_get(jobset_restart_t *j)
{
    int r = k8s_client_request(j->p.cl, "GET", j->obj_path, NULL, NULL, JR_TIMEOUT_MS,
                               HTTP_BODY_BUFFER, NULL, jr_got, j, &j->get);
    if (r) {
        j->get = NULL;
        struct http_result res = {.status = r, .error = ""};
        jr_retry(j, "reading the JobSet", &res);
    }
}

static int jr_line(http_request_t *r, const char *line, size_t len, void *arg)
{
    (void)r;
    jobset_restart_t *j = arg;
    if (len == 0)
        return 0;
    struct jobset_ipr st = j->st;
    int rc = jobset_ipr_event(line, len, &st);
    if (rc < 0)
        return rc;   /* ends the stream: read the JobSet again */
    j->st = st;
    if (rc == 1)
        jr_evaluate(j);
    return 0;
}

static void jr_watched(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    jobset_restart_t *j = arg;
    j->watch = NULL;
    if (res->status == 0 && res->http_status == 200) {
        jr_watch(j);   /* the server's timeoutSeconds: go on from the last version */
        return;
    }
    /* 410, an ERROR event, a lost connection: read the JobSet again, then watch from there */
    if (res->status == -ESTALE || res->http_status == 410) {
        jr_get(j);
        return;
    }
    jr_retry(j, "watching the JobSet", res);
}

static void jr_watch(jobset_restart_t *j)
{
    if (j->watch)
        return;
    char path[4 * K8S_CLIENT_NAME_MAX + 200];
    snprintf(path, sizeof path, "%s?watch=1&allowWatchBookmarks=true&fieldSelector="
             "metadata.name%%3D%s&resourceVersion=%s&timeoutSeconds=%d", j->list_path,
             j->p.jobset, j->st.rv, JR_WATCH_S);
    int rc = k8s_client_request(j->p.cl, "GET", path, NULL, NULL, 0, HTTP_BODY_LINES, jr_line,
                                jr_watched, j, &j->watch);
    if (rc) {
        j->watch = NULL;
        struct http_result res = {.status = rc, .error = ""};
        jr_retry(j, "watching the JobSet", &res);
    }
}

/* After a backoff: whatever failed is done again from the JobSet's object. */
static void jr_on_timer(uv_timer_t *t)
{
    jobset_restart_t *j = t->data;
    if (j->closed)
        return;
    /* a patch to retry, and a watch to start again (it may have failed while a patch ran) */
    if (j->want >= 0 && !j->patch)
        jr_patch(j, j->want);
    if (!j->get && !j->watch)
        jr_get(j);
}

int jobset_restart_start(const struct jobset_restart_params *p, jobset_restart_t **out)
{
    if (!p->jobset || !*p->jobset || strlen(p->jobset) >= K8S_CLIENT_NAME_MAX ||
        strpbrk(p->jobset, "/?&%# "))
        return -EINVAL;
    jobset_restart_t *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->p = *p;
    j->attempt = j->want = -1;
    j->barrier = true;
    snprintf(j->list_path, sizeof j->list_path,
             "/apis/jobset.x-k8s.io/v1alpha2/namespaces/%s/jobsets", p->cl->ns);
    snprintf(j->obj_path, sizeof j->obj_path, "%s/%s", j->list_path, p->jobset);
    uv_timer_init(p->cl->loop, &j->timer);
    j->timer.data = j;
    jr_get(j);
    *out = j;
    return 0;
}

bool jobset_restart_next(jobset_restart_t *j)
{
    if (!j || !j->active)
        return false;
    long next = (j->want > j->attempt ? j->want : j->attempt) + 1;
    if (next <= j->st.previous)
        next = j->st.previous + 1;
    j->barrier = true;
    jr_patch(j, next);
    return true;
}

bool jobset_restart_lifted(const jobset_restart_t *j)
{
    return !j || !j->barrier;
}

long jobset_restart_attempt(const jobset_restart_t *j)
{
    return j ? j->attempt : -1;
}

static void jr_closed(uv_handle_t *h)
{
    free(h->data);
}

void jobset_restart_close(jobset_restart_t *j)
{
    if (!j)
        return;
    j->closed = true;
    if (j->get)
        http_request_cancel(j->get);
    if (j->watch)
        http_request_cancel(j->watch);
    if (j->patch)
        http_request_cancel(j->patch);
    uv_close((uv_handle_t *)&j->timer, jr_closed);
}
