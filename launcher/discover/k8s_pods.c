/* launcher/discover/k8s_pods.c — PodList, watch events and Status objects into a pod table
 * (launcher/discover/k8s_pods.h) and the node-rank orders.
 *
 * Shapes are those of the core v1 API (k8s.io/api core/v1 Pod, metav1 Status and WatchEvent):
 * only the fields below are read, anything else is ignored, and a field of the wrong JSON type
 * counts as absent, as Kubernetes' own decoders would refuse it before we could see it. */
#include "launcher/discover/k8s_pods.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"

/* ---- reading JSON fields ---- */

static json_t *jpath(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return b ? json_object_get(v, b) : v;
}

static const char *jstr(json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : NULL;
}


/* Copies a string field that must fit (identity, addresses): -EMSGSIZE when it does not, or
 * when it hides a NUL. Absent or not a string: "". */
static int copy_exact(char *dst, size_t cap, json_t *v, const char *what, char *err,
                      size_t err_cap)
{
    dst[0] = '\0';
    if (!json_is_string(v))
        return 0;
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n >= cap || strlen(s) != n) {
        sfmt(err, err_cap, "%s is longer than %zu bytes or holds a NUL", what, cap - 1);
        return -EMSGSIZE;
    }
    memcpy(dst, s, n + 1);
    return 0;
}

/* Copies a text meant for people (messages): cut to fit. */
static void copy_cut(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
}

/* A label or annotation value as an index: decimal digits only, at most 9 of them. */
static int parse_index(const char *s, long *out)
{
    if (!s || !*s || strlen(s) > 9)
        return 0;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 1;
}

/* ---- the operator's index ---- */

/* Where operators put a pod's place in the job, most specific first. A pod gets the first entry
 * whose index key it carries (as a label, else as an annotation). The group and major keys
 * refine it: PyTorchJob numbers masters and workers separately (master-0 is node rank 0, then
 * the workers), JobSet numbers pods within each child Job, LWS workers within each group. */
static const struct index_source {
    const char *index;
    const char *group;          /* a label naming the set the index counts within, or NULL */
    const char *major[2];       /* the set's own number, first found wins, or NULL */
} index_sources[] = {
    {"leaderworkerset.sigs.k8s.io/worker-index", NULL,
     {"leaderworkerset.sigs.k8s.io/group-index", NULL}},
    {"batch.kubernetes.io/job-completion-index", NULL,
     {"jobset.sigs.k8s.io/job-global-index", "jobset.sigs.k8s.io/job-index"}},
    {"training.kubeflow.org/replica-index", "training.kubeflow.org/replica-type", {NULL, NULL}},
    {"volcano.sh/task-index", "volcano.sh/task-spec", {NULL, NULL}},
    {"apps.kubernetes.io/pod-index", NULL, {NULL, NULL}},
};

static const char *meta_value(json_t *meta, const char *key)
{
    const char *v = jstr(json_object_get(json_object_get(meta, "labels"), key));
    return v ? v : jstr(json_object_get(json_object_get(meta, "annotations"), key));
}

static void pod_index(struct k8s_pod *p, json_t *meta)
{
    p->major = -1;
    p->index = -1;
    for (size_t i = 0; i < sizeof index_sources / sizeof index_sources[0]; i++) {
        const struct index_source *s = &index_sources[i];
        if (!parse_index(meta_value(meta, s->index), &p->index))
            continue;
        p->has_index = 1;
        p->index_key = s->index;
        if (s->group)
            copy_cut(p->group, sizeof p->group, meta_value(meta, s->group));
        for (int k = 0; k < 2 && s->major[k]; k++)
            if (parse_index(meta_value(meta, s->major[k]), &p->major))
                break;
        return;
    }
}

/* ---- why a pod is not ready ---- */

static json_t *condition(json_t *status, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        const char *t = jstr(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

static int condition_true(json_t *status, const char *type)
{
    const char *s = jstr(json_object_get(condition(status, type), "status"));
    return s && strcmp(s, "True") == 0;
}

/* A container that is not running well: waiting with a reason, or terminated. Writes
 * "<prefix><reason>" (or ExitCode:N / Signal:N) and the message; 1 when found. */
static int container_trouble(json_t *st, const char *prefix, struct k8s_pod *p)
{
    json_t *state = json_object_get(st, "state");
    json_t *w = json_object_get(state, "waiting");
    json_t *term = json_object_get(state, "terminated");
    const char *reason = NULL, *msg = NULL;
    char code[32] = "";
    if (w) {
        reason = jstr(json_object_get(w, "reason"));
        msg = jstr(json_object_get(w, "message"));
        if (!reason)
            return 0;
    } else if (term) {
        json_int_t exit_code = json_integer_value(json_object_get(term, "exitCode"));
        json_int_t sig = json_integer_value(json_object_get(term, "signal"));
        reason = jstr(json_object_get(term, "reason"));
        msg = jstr(json_object_get(term, "message"));
        if (!reason) {
            if (sig)
                snprintf(code, sizeof code, "Signal:%lld", (long long)sig);
            else
                snprintf(code, sizeof code, "ExitCode:%lld", (long long)exit_code);
            reason = code;
        }
    } else {
        return 0;
    }
    snprintf(p->why, sizeof p->why, "%s%s", prefix, reason);
    copy_cut(p->why_detail, sizeof p->why_detail, msg);
    return 1;
}

/* Init containers run one after another: the first one not finished with exit 0 says why. */
static int init_trouble(json_t *status, struct k8s_pod *p)
{
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(status, "initContainerStatuses"), i, st) {
        json_t *term = jpath(st, "state", "terminated");
        if (term && json_integer_value(json_object_get(term, "exitCode")) == 0 &&
            !json_integer_value(json_object_get(term, "signal")))
            continue;
        /* A waiting init container whose reason is only PodInitializing is on its way. */
        const char *wr = jstr(jpath(jpath(st, "state", "waiting"), "reason", NULL));
        if (!(wr && strcmp(wr, "PodInitializing") == 0) && container_trouble(st, "Init:", p))
            return 1;
        snprintf(p->why, sizeof p->why, "Init:%zu/%zu", i,
                 json_array_size(json_object_get(status, "initContainerStatuses")));
        return 1;
    }
    return 0;
}

/* The short reason and the server's message, in the order a person would look: being deleted,
 * finished, an init container, a container, not scheduled, scheduled but not Ready. */
static void pod_why(struct k8s_pod *p, json_t *status)
{
    p->why[0] = p->why_detail[0] = '\0';
    if (p->deleting) {
        copy_cut(p->why, sizeof p->why, "Terminating");
        return;
    }
    if (p->ready)
        return;
    if (strcmp(p->phase, "Succeeded") == 0) {
        copy_cut(p->why, sizeof p->why, "Succeeded");
        return;
    }
    if (strcmp(p->phase, "Failed") == 0) {
        const char *reason = jstr(json_object_get(status, "reason"));
        snprintf(p->why, sizeof p->why, "Failed%s%s", reason ? ": " : "", reason ? reason : "");
        copy_cut(p->why_detail, sizeof p->why_detail, jstr(json_object_get(status, "message")));
        return;
    }
    if (init_trouble(status, p))
        return;
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(status, "containerStatuses"), i, st)
        if (container_trouble(st, "", p))
            return;
    json_t *sched = condition(status, "PodScheduled");
    if (sched && !condition_true(status, "PodScheduled")) {
        const char *reason = jstr(json_object_get(sched, "reason"));
        snprintf(p->why, sizeof p->why, "Pending: %s", reason ? reason : "not scheduled");
        copy_cut(p->why_detail, sizeof p->why_detail, jstr(json_object_get(sched, "message")));
        return;
    }
    if (strcmp(p->phase, "Running") == 0) {
        copy_cut(p->why, sizeof p->why, "Running: not Ready");
        copy_cut(p->why_detail, sizeof p->why_detail,
                 jstr(json_object_get(condition(status, "Ready"), "message")));
        return;
    }
    copy_cut(p->why, sizeof p->why, p->phase[0] ? p->phase : "no status yet");
    copy_cut(p->why_detail, sizeof p->why_detail, jstr(json_object_get(status, "message")));
}

/* ---- one pod ---- */

static int pod_parse(json_t *o, struct k8s_pod *p, char *err, size_t err_cap)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(o)) {
        sfmt(err, err_cap, "a pod is not a JSON object");
        return -EPROTO;
    }
    json_t *meta = json_object_get(o, "metadata");
    json_t *spec = json_object_get(o, "spec");
    json_t *status = json_object_get(o, "status");
    int rc = 0;
    if ((rc = copy_exact(p->name, sizeof p->name, json_object_get(meta, "name"),
                         "metadata.name", err, err_cap)) ||
        (rc = copy_exact(p->ns, sizeof p->ns, json_object_get(meta, "namespace"),
                         "metadata.namespace", err, err_cap)) ||
        (rc = copy_exact(p->uid, sizeof p->uid, json_object_get(meta, "uid"), "metadata.uid",
                         err, err_cap)) ||
        (rc = copy_exact(p->rv, sizeof p->rv, json_object_get(meta, "resourceVersion"),
                         "metadata.resourceVersion", err, err_cap)) ||
        (rc = copy_exact(p->phase, sizeof p->phase, json_object_get(status, "phase"),
                         "status.phase", err, err_cap)) ||
        (rc = copy_exact(p->ip, sizeof p->ip, json_object_get(status, "podIP"), "status.podIP",
                         err, err_cap)) ||
        (rc = copy_exact(p->node, sizeof p->node, json_object_get(spec, "nodeName"),
                         "spec.nodeName", err, err_cap)) ||
        (rc = copy_exact(p->hostname, sizeof p->hostname, json_object_get(spec, "hostname"),
                         "spec.hostname", err, err_cap)) ||
        (rc = copy_exact(p->subdomain, sizeof p->subdomain, json_object_get(spec, "subdomain"),
                         "spec.subdomain", err, err_cap)))
        return rc;
    if (!p->name[0]) {
        sfmt(err, err_cap, "a pod without metadata.name");
        return -EPROTO;
    }
    json_t *del = json_object_get(meta, "deletionTimestamp");
    p->deleting = del && !json_is_null(del);
    p->ready = condition_true(status, "Ready");
    json_t *cs = json_object_get(status, "containerStatuses");
    size_t i;
    json_t *c;
    p->containers_ready = json_array_size(cs) > 0;
    json_array_foreach(cs, i, c) {
        if (!json_is_true(json_object_get(c, "ready")))
            p->containers_ready = 0;
        json_int_t n = json_integer_value(json_object_get(c, "restartCount"));
        if (n > 0 && n < 1000000 && p->restarts < 1000000000)
            p->restarts += (int)n;
    }
    pod_index(p, meta);
    pod_why(p, status);
    return 0;
}

/* ---- the table: pod pointers kept sorted by (namespace, name) ---- */

void k8s_pods_init(struct k8s_pods *t, size_t max)
{
    memset(t, 0, sizeof *t);
    t->max = max && max < K8S_PODS_LIMIT ? max : K8S_PODS_LIMIT;
}

void k8s_pods_clear(struct k8s_pods *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->pods[i]);
    t->n = 0;
    t->rv[0] = '\0';
}

void k8s_pods_free(struct k8s_pods *t)
{
    k8s_pods_clear(t);
    free(t->pods);
    t->pods = NULL;
    t->cap = 0;
}

static int key_cmp(const char *ns, const char *name, const struct k8s_pod *p)
{
    int c = strcmp(ns, p->ns);
    return c ? c : strcmp(name, p->name);
}

/* The slot of ns/name, or where it would go (*found = 0). The API lists pods in key order, so
 * a list arrives sorted and every insert lands at the end. */
static size_t table_search(const struct k8s_pods *t, const char *ns, const char *name,
                           int *found)
{
    size_t lo = 0, hi = t->n;
    if (hi > 0 && key_cmp(ns, name, t->pods[hi - 1]) > 0) {
        *found = 0;
        return hi;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(ns, name, t->pods[mid]);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = 0;
    return lo;
}

/* Whether two states of a pod differ in anything but the resourceVersion. */
static int pod_same(const struct k8s_pod *a, const struct k8s_pod *b)
{
    return strcmp(a->uid, b->uid) == 0 && strcmp(a->phase, b->phase) == 0 &&
           strcmp(a->ip, b->ip) == 0 && strcmp(a->node, b->node) == 0 &&
           strcmp(a->hostname, b->hostname) == 0 && strcmp(a->subdomain, b->subdomain) == 0 &&
           a->ready == b->ready && a->containers_ready == b->containers_ready &&
           a->deleting == b->deleting && a->has_index == b->has_index &&
           a->restarts == b->restarts && strcmp(a->group, b->group) == 0 &&
           a->major == b->major && a->index == b->index && a->index_key == b->index_key &&
           strcmp(a->why, b->why) == 0 && strcmp(a->why_detail, b->why_detail) == 0;
}

/* Puts p in the table: 1 if that changed it, 0 if an equal state was there, else an error. */
static int table_put(struct k8s_pods *t, const struct k8s_pod *p)
{
    int found;
    size_t at = table_search(t, p->ns, p->name, &found);
    if (found) {
        int changed = !pod_same(t->pods[at], p);
        *t->pods[at] = *p;
        return changed;
    }
    if (t->n >= t->max)
        return -EMSGSIZE;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        if (cap > t->max)
            cap = t->max;
        struct k8s_pod **v = realloc(t->pods, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        t->pods = v;
        t->cap = cap;
    }
    struct k8s_pod *copy = malloc(sizeof *copy);
    if (!copy)
        return -ENOMEM;
    *copy = *p;
    memmove(t->pods + at + 1, t->pods + at, (t->n - at) * sizeof *t->pods);
    t->pods[at] = copy;
    t->n++;
    return 1;
}

/* Removes ns/name; a DELETED event for an older pod of the same name (another uid) that was
 * already replaced leaves the new one alone. */
static int table_del(struct k8s_pods *t, const struct k8s_pod *p)
{
    int found;
    size_t at = table_search(t, p->ns, p->name, &found);
    if (!found || (p->uid[0] && t->pods[at]->uid[0] && strcmp(p->uid, t->pods[at]->uid) != 0))
        return 0;
    free(t->pods[at]);
    memmove(t->pods + at, t->pods + at + 1, (t->n - at - 1) * sizeof *t->pods);
    t->n--;
    return 1;
}

int k8s_pods_same(const struct k8s_pods *a, const struct k8s_pods *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (key_cmp(a->pods[i]->ns, a->pods[i]->name, b->pods[i]) != 0 ||
            !pod_same(a->pods[i], b->pods[i]))
            return 0;
    return 1;
}

const struct k8s_pod *k8s_pods_find(const struct k8s_pods *t, const char *ns, const char *name)
{
    if (ns) {
        int found;
        size_t at = table_search(t, ns, name, &found);
        return found ? t->pods[at] : NULL;
    }
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->pods[i]->name, name) == 0)
            return t->pods[i];
    return NULL;
}

/* ---- list, event, status ---- */

json_t *k8s_pods_parse_object(const char *text, size_t len, char *err, size_t err_cap)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        sfmt(err, err_cap, "not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    else if (!json_is_object(root)) {
        sfmt(err, err_cap, "not a JSON object");
        json_decref(root);
        root = NULL;
    }
    return root;
}

int k8s_pods_add_list(struct k8s_pods *t, const char *json, size_t len, char *cont,
                      size_t cont_cap, char *err, size_t err_cap)
{
    if (cont && cont_cap)
        cont[0] = '\0';
    json_t *root = k8s_pods_parse_object(json, len, err, err_cap);
    if (!root)
        return -EPROTO;
    int rc = 0;
    const char *kind = jstr(json_object_get(root, "kind"));
    json_t *items = json_object_get(root, "items");
    json_t *meta = json_object_get(root, "metadata");
    if ((kind && strcmp(kind, "PodList") != 0) || !(json_is_array(items) || json_is_null(items))) {
        sfmt(err, err_cap, "not a PodList (kind %s)", kind ? kind : "missing");
        rc = -EPROTO;
        goto out;
    }
    char rv[K8S_RV_MAX + 1];
    if ((rc = copy_exact(rv, sizeof rv, json_object_get(meta, "resourceVersion"),
                         "metadata.resourceVersion", err, err_cap)))
        goto out;
    if (cont && cont_cap &&
        (rc = copy_exact(cont, cont_cap, json_object_get(meta, "continue"), "metadata.continue",
                         err, err_cap)))
        goto out;
    size_t i;
    json_t *item;
    struct k8s_pod pod;
    json_array_foreach(items, i, item) {
        if ((rc = pod_parse(item, &pod, err, err_cap)) < 0)
            goto out;
        if ((rc = table_put(t, &pod)) < 0) {
            sfmt(err, err_cap, "more than %zu pods", t->max);
            goto out;
        }
    }
    rc = 0;
    memcpy(t->rv, rv, sizeof rv);
out:
    json_decref(root);
    return rc;
}

static int status_from(json_t *o, struct k8s_status *st)
{
    memset(st, 0, sizeof *st);
    const char *kind = jstr(json_object_get(o, "kind"));
    json_t *code = json_object_get(o, "code");
    if (!kind || strcmp(kind, "Status") != 0 || !json_is_integer(code))
        return -EPROTO;
    json_int_t c = json_integer_value(code);
    st->code = c > 0 && c < 1000 ? (int)c : 0;
    copy_cut(st->reason, sizeof st->reason, jstr(json_object_get(o, "reason")));
    copy_cut(st->message, sizeof st->message, jstr(json_object_get(o, "message")));
    return 0;
}

int k8s_status_parse(const char *json, size_t len, struct k8s_status *st)
{
    json_t *root = k8s_pods_parse_object(json, len, NULL, 0);
    if (!root)
        return -EPROTO;
    int rc = status_from(root, st);
    json_decref(root);
    return rc;
}

static const char *const event_types[] = {
    [K8S_EVENT_ADDED] = "ADDED",
    [K8S_EVENT_MODIFIED] = "MODIFIED",
    [K8S_EVENT_DELETED] = "DELETED",
    [K8S_EVENT_BOOKMARK] = "BOOKMARK",
    [K8S_EVENT_ERROR] = "ERROR",
};

int k8s_event_parse(const char *json, size_t len, struct k8s_event *ev, char *err,
                    size_t err_cap)
{
    memset(ev, 0, sizeof *ev);
    json_t *root = k8s_pods_parse_object(json, len, err, err_cap);
    if (!root)
        return -EPROTO;
    int rc = -EPROTO;
    const char *type = jstr(json_object_get(root, "type"));
    json_t *obj = json_object_get(root, "object");
    size_t t = 0;
    while (type && t < sizeof event_types / sizeof event_types[0] && strcmp(type, event_types[t]))
        t++;
    if (!type || t == sizeof event_types / sizeof event_types[0] || !json_is_object(obj)) {
        sfmt(err, err_cap, "not a watch event (type %s)", type ? type : "missing");
        goto out;
    }
    ev->type = (enum k8s_event_type)t;
    switch (ev->type) {
    case K8S_EVENT_ERROR:
        if ((rc = status_from(obj, &ev->status)) < 0)
            sfmt(err, err_cap, "an ERROR event without a Status");
        break;
    case K8S_EVENT_BOOKMARK:
        rc = copy_exact(ev->rv, sizeof ev->rv, jpath(obj, "metadata", "resourceVersion"),
                        "metadata.resourceVersion", err, err_cap);
        break;
    default:
        if ((rc = pod_parse(obj, &ev->pod, err, err_cap)) == 0)
            memcpy(ev->rv, ev->pod.rv, sizeof ev->rv);
        break;
    }
out:
    json_decref(root);
    return rc;
}

int k8s_pods_apply(struct k8s_pods *t, const struct k8s_event *ev)
{
    int rc = 0;
    switch (ev->type) {
    case K8S_EVENT_ADDED:
    case K8S_EVENT_MODIFIED:
        rc = table_put(t, &ev->pod);
        break;
    case K8S_EVENT_DELETED:
        rc = table_del(t, &ev->pod);
        break;
    case K8S_EVENT_BOOKMARK:
        break;
    default:
        return -EINVAL;
    }
    if (rc >= 0 && ev->rv[0])
        memcpy(t->rv, ev->rv, sizeof t->rv);
    return rc;
}

/* ---- orders ---- */

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

int k8s_name_cmp(const char *a, const char *b)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    long zeros = 0;   /* first difference in leading zeros: the tie-break */
    while (*x && *y) {
        if (!is_digit(*x) || !is_digit(*y)) {
            if (*x != *y)
                return *x < *y ? -1 : 1;
            x++, y++;
            continue;
        }
        const unsigned char *xs = x, *ys = y;
        while (*xs == '0')
            xs++;
        while (*ys == '0')
            ys++;
        const unsigned char *xe = xs, *ye = ys;
        while (is_digit(*xe))
            xe++;
        while (is_digit(*ye))
            ye++;
        if (xe - xs != ye - ys)
            return xe - xs < ye - ys ? -1 : 1;
        int c = memcmp(xs, ys, (size_t)(xe - xs));
        if (c)
            return c < 0 ? -1 : 1;
        if (!zeros)
            zeros = (xs - x) - (ys - y);
        x = xe, y = ye;
    }
    if (*x || *y)
        return *x ? 1 : -1;
    return zeros < 0 ? -1 : zeros > 0;
}

static int cmp_tail(const struct k8s_pod *p, const struct k8s_pod *q)
{
    int c = k8s_name_cmp(p->name, q->name);
    if (!c)
        c = strcmp(p->ns, q->ns);
    if (!c)
        c = strcmp(p->uid, q->uid);
    return c;
}

static int cmp_long(long a, long b)
{
    return a < b ? -1 : a > b;
}

static int cmp_by_index(const void *a, const void *b)
{
    const struct k8s_pod *p = *(const struct k8s_pod *const *)a;
    const struct k8s_pod *q = *(const struct k8s_pod *const *)b;
    if (p->has_index != q->has_index)
        return p->has_index ? -1 : 1;
    int c = 0;
    if (p->has_index && !(c = k8s_name_cmp(p->group, q->group)) &&
        !(c = cmp_long(p->major, q->major)))
        c = cmp_long(p->index, q->index);
    return c ? c : cmp_tail(p, q);
}

static int cmp_by_name(const void *a, const void *b)
{
    return cmp_tail(*(const struct k8s_pod *const *)a, *(const struct k8s_pod *const *)b);
}

static int cmp_by_ip(const void *a, const void *b)
{
    const struct k8s_pod *p = *(const struct k8s_pod *const *)a;
    const struct k8s_pod *q = *(const struct k8s_pod *const *)b;
    if (!p->ip[0] != !q->ip[0])
        return p->ip[0] ? -1 : 1;
    int c = strcmp(p->ip, q->ip);
    return c ? c : cmp_tail(p, q);
}

size_t k8s_pods_sorted(const struct k8s_pods *t, enum k8s_order order,
                       const struct k8s_pod **out)
{
    static int (*const cmp[])(const void *, const void *) = {
        [K8S_ORDER_INDEX] = cmp_by_index,
        [K8S_ORDER_NAME] = cmp_by_name,
        [K8S_ORDER_IP] = cmp_by_ip,
    };
    for (size_t i = 0; i < t->n; i++)
        out[i] = t->pods[i];
    if (t->n > 1)
        qsort(out, t->n, sizeof *out, cmp[order <= K8S_ORDER_IP ? order : K8S_ORDER_INDEX]);
    return t->n;
}

/* ---- the phase k8s_tools.py compares with ---- */

const char *k8s_pod_status(const struct k8s_pod *p)
{
    return p->deleting ? "Terminating" : p->phase;
}
