/* launcher/discover/k8s_event.c — the Event object and the rate limit (see k8s_event.h). */
#include "launcher/discover/k8s_event.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *reason;
    bool warning;
} k8s_event_kinds[K8S_EV_KINDS] = {
    [K8S_EV_ROUND] = {"RendezvousComplete", false},
    [K8S_EV_FAILURE] = {"WorkerFailed", true},
    [K8S_EV_RESTART] = {"RestartingInPlace", false},
    [K8S_EV_SUCCEEDED] = {"JobSucceeded", false},
    [K8S_EV_FAILED] = {"JobFailed", true},
};

const char *k8s_event_reason(enum k8s_event_kind k, bool *warning)
{
    if ((unsigned)k >= K8S_EV_KINDS)
        k = K8S_EV_FAILED;
    if (warning)
        *warning = k8s_event_kinds[k].warning;
    return k8s_event_kinds[k].reason;
}

static void rfc3339(double t, char *out, size_t cap)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* client-go's recorder names an Event "<object>.<nanoseconds in hex>"; the pod's part is cut so
 * that the name stays a DNS subdomain (253). seq keeps two events of one nanosecond apart. */
char *k8s_event_json(const struct k8s_event_desc *d)
{
    bool warning;
    const char *reason = k8s_event_reason(d->kind, &warning);
    char name[300], ts[40];
    unsigned long long ns = (unsigned long long)(d->time * 1e9) + d->seq;
    snprintf(name, sizeof name, "%.200s.%llx", d->pod, ns);
    rfc3339(d->time, ts, sizeof ts);
    json_t *involved = json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", "v1", "kind", "Pod",
                                 "namespace", d->ns, "name", d->pod);
    if (involved && d->uid && *d->uid)
        json_object_set_new(involved, "uid", json_string(d->uid));
    json_t *source = json_pack("{s:s}", "component", "podrun");
    if (source && d->host && *d->host)
        json_object_set_new(source, "host", json_string(d->host));
    /* json_string refuses invalid UTF-8, and a worker's message may hold anything: then its
     * bytes above ASCII become '?' */
    json_t *msg = json_string(d->message);
    if (!msg) {
        char ascii[K8S_EVENT_MESSAGE_MAX + 128];
        size_t i = 0;
        for (; d->message[i] && i < sizeof ascii - 1; i++)
            ascii[i] = (unsigned char)d->message[i] < 0x80 ? d->message[i] : '?';
        ascii[i] = '\0';
        msg = json_string(ascii);
    }
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:o, s:s, s:o, s:s, s:s, s:i, "
                          "s:s, s:s}",
                          "apiVersion", "v1", "kind", "Event",
                          "metadata", "name", name, "namespace", d->ns,
                          "involvedObject", involved, "reason", reason, "message", msg,
                          "type", warning ? "Warning" : "Normal", "source", source,
                          "firstTimestamp", ts, "lastTimestamp", ts, "count", 1,
                          "reportingComponent", "podrun", "reportingInstance", d->pod);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

void k8s_event_bucket_init(struct k8s_event_bucket *b, uint64_t now)
{
    b->tokens = K8S_EVENT_BURST;
    b->last = now;
}

bool k8s_event_bucket_take(struct k8s_event_bucket *b, uint64_t now)
{
    if (now > b->last) {
        uint64_t gained = (now - b->last) / K8S_EVENT_REFILL_MS;
        if (gained) {
            b->tokens = b->tokens + gained >= K8S_EVENT_BURST ? K8S_EVENT_BURST
                                                               : b->tokens + (int)gained;
            b->last += gained * K8S_EVENT_REFILL_MS;
        }
        if (b->tokens == K8S_EVENT_BURST)
            b->last = now;
    }
    if (b->tokens <= 0)
        return false;
    b->tokens--;
    return true;
}
