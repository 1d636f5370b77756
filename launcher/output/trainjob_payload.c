/* launcher/output/trainjob_payload.c — the body of a TrainJob status report (see the header). */
#include "launcher/output/trainjob_payload.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/output/jsonline.h"

size_t trainjob_value(const char *text, char *buf, size_t cap)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t n = strcspn(text, "\n"), used = 0, chars = 0;
    size_t keep[TRAINJOB_VALUE_MAX + 1];   /* bytes used after each character */
    if (!cap)
        return 0;
    while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < n && chars <= TRAINJOB_VALUE_MAX;) {
        size_t k = jsonline_utf8_len(p + i, n - i);
        char one[4] = {'?'};
        size_t w = 1;
        if (k == 1 && (p[i] < 0x20 || p[i] == 0x7f))
            one[0] = ' ';
        else if (k == 1)
            one[0] = (char)p[i];
        else if (k)
            memcpy(one, p + i, w = k);
        i += k ? k : 1;
        if (used + w + 1 > cap)
            break;
        memcpy(buf + used, one, w);
        used += w;
        keep[chars++] = used;
    }
    if (chars > TRAINJOB_VALUE_MAX) {   /* one character too many: cut, and say so */
        used = keep[TRAINJOB_VALUE_MAX - 4];
        memcpy(buf + used, "...", 3);
        used += 3;
    }
    buf[used] = '\0';
    return used;
}

/* Appends {"name": name, "value": text as trainjob_value makes it}; nothing for an empty value
 * (the CRD wants at least one character). */
static int add_metric(json_t *list, const char *name, const char *text)
{
    char v[4 * (TRAINJOB_VALUE_MAX + 1) + 1];
    if (!trainjob_value(text, v, sizeof v))
        return 0;
    json_t *m = json_pack("{s:s,s:s}", "name", name, "value", v);
    return m && !json_array_append_new(list, m) ? 0 : -ENOMEM;
}

static int add_int(json_t *list, const char *name, long long value)
{
    char v[24];
    snprintf(v, sizeof v, "%lld", value);
    return add_metric(list, name, v);
}

/* The root cause: where it happened, what, and the worker's own words. */
static int add_root(json_t *list, const rdzv_failure_t *f)
{
    int r = add_metric(list, "podrun_failed_node", f->node_name[0] ? f->node_name : f->host);
    if (!r && f->rank >= 0)
        r = add_int(list, "podrun_failed_rank", f->rank);
    if (!r)
        r = add_metric(list, "podrun_failure", f->reason);
    if (!r)
        r = add_metric(list, "podrun_failure_message", f->message);
    return r;
}

static int add_metrics(json_t *list, const struct trainjob_view *v)
{
    int r = add_metric(list, "podrun_state", v->state);
    if (!r && v->round >= 0) {
        r = add_int(list, "podrun_round", v->round);
        r = r ? r : add_int(list, "podrun_nodes", v->nodes);
        r = r ? r : add_int(list, "podrun_workers", v->workers);
    }
    int left = v->max_restarts - v->restarts;
    r = r ? r : add_int(list, "podrun_restarts", v->restarts);
    r = r ? r : add_int(list, "podrun_restarts_left", left > 0 ? left : 0);
    if (!r && v->root)
        r = add_root(list, v->root);
    if (!r && v->exit_code >= 0)
        r = add_int(list, "podrun_exit_code", v->exit_code);
    if (!r && v->progress.step >= 0)
        r = add_int(list, "podrun_step", v->progress.step);
    return r;
}

int trainjob_payload(const struct trainjob_view *v, char **out)
{
    *out = NULL;
    char when[32];
    time_t t = (time_t)v->time;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);   /* metav1.Time: RFC 3339, UTC */
    json_t *metrics = json_array();
    json_t *status = json_object();
    json_t *body = json_object();
    int r = metrics && status && body ? add_metrics(metrics, v) : -ENOMEM;
    if (!r && v->progress.percent >= 0)
        r = json_object_set_new(status, "progressPercentage",
                                json_integer(v->progress.percent > 100 ? 100 : v->progress.percent))
                ? -ENOMEM : 0;
    if (!r && (json_object_set(status, "metrics", metrics) ||
               json_object_set_new(status, "lastUpdatedTime", json_string(when)) ||
               json_object_set(body, "trainerStatus", status)))
        r = -ENOMEM;
    if (!r && !(*out = json_dumps(body, JSON_COMPACT)))
        r = -ENOMEM;
    json_decref(metrics);
    json_decref(status);
    json_decref(body);
    return r;
}
