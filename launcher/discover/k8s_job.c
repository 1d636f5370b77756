/* launcher/discover/k8s_job.c — the job's nodes among the pods (launcher/discover/k8s_job.h). */
#include "launcher/discover/k8s_job.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"
#include "rdzv/base/text.h"

/* Alive: could be (or become) a node of this job. A pod being deleted or finished cannot. */
static int pod_alive(const struct k8s_pod *p)
{
    return !p->deleting && strcmp(p->phase, "Succeeded") != 0 && strcmp(p->phase, "Failed") != 0;
}

/* Usable as a node now: the rendezvous can reach it. */
static int pod_usable(const struct k8s_pod *p)
{
    return pod_alive(p) && p->ready && p->ip[0] && strcmp(p->phase, "Running") == 0;
}

/* "NAME (why: detail)" for each of the job's pods that is not usable, the first few by name. */
static void name_unready(char *line, size_t cap, const struct k8s_pod *const *job, int n)
{
    int named = 0, more = 0;
    for (int i = 0; i < n; i++) {
        const struct k8s_pod *p = job[i];
        if (pod_usable(p))
            continue;
        if (named == K8S_PLAN_NAMED) {
            more++;
            continue;
        }
        const char *why = p->why[0] ? p->why : p->ip[0] ? "not Ready" : "no IP yet";
        text_appendf(line, cap, "%s%s (%s%s%.120s)", named ? ", " : "", p->name, why,
                 p->why_detail[0] ? ": " : "", p->why_detail);
        named++;
    }
    if (more)
        text_appendf(line, cap, " and %d more", more);
}

/* The waiting line: how many are there, who is not and why, how many do not exist yet. */
static void wait_line(struct k8s_plan *out, const struct k8s_plan_params *p,
                      const struct k8s_pod *const *job, int njob)
{
    char *line = out->line;
    size_t cap = sizeof out->line;
    line[0] = '\0';
    if (p->min_nodes == p->max_nodes)
        text_appendf(line, cap, "%d/%d pods Running and Ready", out->ready, p->max_nodes);
    else
        text_appendf(line, cap, "%d pods Running and Ready, waiting for at least %d (at most %d)",
                 out->ready, p->min_nodes, p->max_nodes);
    if (out->ready < njob) {
        text_appendf(line, cap, "; not yet: ");
        name_unready(line, cap, job, njob);
    }
    if (njob < p->min_nodes || (p->min_nodes == p->max_nodes && njob < p->max_nodes)) {
        int missing = p->min_nodes - njob;
        text_appendf(line, cap, "; %d more pod%s not created yet", missing,
                     missing == 1 ? "" : "s");
    }
    if (out->self && !pod_usable(out->self))
        text_appendf(line, cap, "; this pod is %s",
                     out->self->why[0] ? out->self->why : "not Ready");
}

int k8s_plan(const struct k8s_pods *t, const struct k8s_plan_params *p, struct k8s_plan *out)
{
    memset(out, 0, sizeof *out);
    out->node_rank = -1;
    if (!p->self || p->min_nodes < 1 || p->max_nodes < p->min_nodes)
        return -EINVAL;
    const struct k8s_pod **sorted = malloc((t->n ? t->n : 1) * sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    size_t n = k8s_pods_sorted(t, p->order, sorted), alive = 0;
    for (size_t i = 0; i < n; i++)
        if (pod_alive(sorted[i]))
            sorted[alive++] = sorted[i];
    out->alive = (int)alive;
    int njob = alive < (size_t)p->max_nodes ? (int)alive : p->max_nodes;
    int self_at = -1;
    for (size_t i = 0; i < alive; i++)
        if (strcmp(sorted[i]->name, p->self) == 0 && (!p->ns || !strcmp(sorted[i]->ns, p->ns))) {
            out->self = sorted[i];
            self_at = (int)i;
        }
    for (int i = 0; i < njob; i++)
        out->ready += pod_usable(sorted[i]);

    if (!out->self) {
        out->state = K8S_PLAN_NO_SELF;
        const struct k8s_pod *me = k8s_pods_find(t, p->ns, p->self);
        snprintf(out->line, sizeof out->line, "this pod (%s) %s", p->self,
                 !me ? "is not among the pods the selector matches"
                     : me->deleting ? "is being deleted" : "has finished");
    } else if (p->min_nodes == p->max_nodes) {
        if (njob == p->max_nodes && out->ready == njob) {
            out->state = self_at < njob ? K8S_PLAN_READY : K8S_PLAN_NOT_MEMBER;
            out->nnodes = njob;
            out->node_rank = self_at < njob ? self_at : -1;
        }
    } else if (njob > 0 && pod_usable(sorted[0]) && out->ready >= p->min_nodes &&
               pod_usable(out->self)) {
        out->state = K8S_PLAN_READY;
        out->nnodes = out->ready;
    }
    if (out->state == K8S_PLAN_READY)
        out->host = sorted[0];
    else if (out->state == K8S_PLAN_NOT_MEMBER)
        snprintf(out->line, sizeof out->line, "this pod (%s) is number %d of the %d pods the "
                 "selector matches, beyond --nnodes %d: the job's pods are %s ... %s", p->self,
                 self_at + 1, (int)alive, p->max_nodes, sorted[0]->name,
                 sorted[njob - 1]->name);
    else if (out->state == K8S_PLAN_WAIT)
        wait_line(out, p, sorted, njob);
    free(sorted);
    return 0;
}

int k8s_pod_gone(const struct k8s_pods *t, const char *ns, const char *name, const char *uid,
                 char *buf, size_t cap)
{
    const struct k8s_pod *p = k8s_pods_find(t, ns, name);
    const char *why = NULL;
    char failed[K8S_WHY_MAX + 16];
    if (!p)
        why = "pod deleted";
    else if (uid && uid[0] && p->uid[0] && strcmp(uid, p->uid) != 0)
        why = "pod replaced";
    else if (p->deleting)
        why = "pod being deleted";
    else if (strcmp(p->phase, "Failed") == 0) {
        snprintf(failed, sizeof failed, "pod %s", p->why[0] ? p->why : "Failed");
        why = failed;
    }
    if (!why)
        return 0;
    snprintf(buf, cap, "%s", why);
    return 1;
}

/* ---- the job's selector from a pod's own labels ---- */

static const struct selector_rule {
    const char *operator;
    const char *keys[3];        /* keys[0] must be there; the others join it when present */
} selector_rules[] = {
    {"LeaderWorkerSet", {"leaderworkerset.sigs.k8s.io/name",
                         "leaderworkerset.sigs.k8s.io/group-index", NULL}},
    {"JobSet", {"jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                NULL}},
    {"Kubeflow", {"training.kubeflow.org/job-name", "training.kubeflow.org/operator-name",
                  NULL}},
    {"Volcano", {"volcano.sh/job-name", NULL, NULL}},
    {"Indexed Job", {"batch.kubernetes.io/job-name", NULL, NULL}},
    {"Indexed Job", {"job-name", NULL, NULL}},
    {"PaddleCloud", {"paddle-job", NULL, NULL}},
};

static const char *jstr(json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A label value as the API allows it: at most 63 of [A-Za-z0-9._-], nothing that could change
 * the meaning of the selector it goes into. */
static int label_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n > K8S_LABEL_MAX)
        return 0;
    for (const char *c = v; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-'))
            return 0;
    return 1;
}

int k8s_job_selector(const char *json, size_t len, char *out, size_t cap, const char **which,
                     char *err, size_t err_cap)
{
    if (cap)
        out[0] = '\0';
    json_t *root = k8s_pods_parse_object(json, len, err, err_cap);
    if (!root)
        return -EPROTO;
    int rc = -ENOENT;
    const char *kind = jstr(json_object_get(root, "kind"));
    json_t *labels = json_object_get(json_object_get(root, "metadata"), "labels");
    if (kind && strcmp(kind, "Pod") != 0) {
        sfmt(err, err_cap, "not a Pod (kind %s)", kind);
        rc = -EPROTO;
        goto out;
    }
    for (size_t r = 0; r < sizeof selector_rules / sizeof selector_rules[0]; r++) {
        const struct selector_rule *rule = &selector_rules[r];
        if (!jstr(json_object_get(labels, rule->keys[0])))
            continue;
        textbuf_t o = text_start(out, cap);
        rc = 0;
        for (int k = 0; k < 3 && rule->keys[k] && !rc; k++) {
            const char *v = jstr(json_object_get(labels, rule->keys[k]));
            if (!v)
                continue;
            if (!label_value_ok(v)) {
                sfmt(err, err_cap, "label %s is not a label value", rule->keys[k]);
                rc = -EPROTO;
            }
            text_printf(&o, "%s%s=%s", o.len ? "," : "", rule->keys[k], v);
        }
        if (!rc && o.cut)
            rc = -ENOSPC;
        if (!rc)
            rc = (int)o.len;
        else if (cap)
            out[0] = '\0';
        if (which)
            *which = rule->operator;
        goto out;
    }
    sfmt(err, err_cap, "none of the labels operators give their pods (%s, %s, %s, %s, ...)",
           selector_rules[0].keys[0], selector_rules[1].keys[0], selector_rules[2].keys[0],
           selector_rules[3].keys[0]);
out:
    json_decref(root);
    return rc;
}
