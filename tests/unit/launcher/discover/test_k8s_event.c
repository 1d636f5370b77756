/* tests/unit/launcher/discover/test_k8s_event.c — the Event object podrun posts on its pod, and
 * the rate limit's bucket. */
#include <jansson.h>
#include <stdlib.h>

#include "launcher/discover/k8s_event.h"
#include "tests/unit/check.h"

static json_t *event(enum k8s_event_kind kind, const char *msg, const char *uid,
                     const char *host)
{
    struct k8s_event_desc d = {
        .ns = "team-a", .pod = "js-workers-0-1", .uid = uid, .host = host, .kind = kind,
        .message = msg, .time = 1765000000.25, .seq = 7,
    };
    char *s = k8s_event_json(&d);
    CHECK(s != NULL);
    json_t *o = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    CHECK(o != NULL);
    return o;
}

static const char *str(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static void test_the_event_kubectl_shows_on_the_pod(void)
{
    json_t *o = event(K8S_EV_FAILURE, "rank 1 on js-workers-0-1: exit code 3", "u-1", "node-7");
    CHECK_EQ_STR(str(o, "apiVersion", NULL), "v1");
    CHECK_EQ_STR(str(o, "kind", NULL), "Event");
    CHECK_EQ_STR(str(o, "metadata", "namespace"), "team-a");
    /* client-go's naming: the object, a dot, nanoseconds in hex */
    CHECK_EQ_STR(str(o, "metadata", "name"), "js-workers-0-1.187e8a261b773207");
    CHECK_EQ_STR(str(o, "involvedObject", "kind"), "Pod");
    CHECK_EQ_STR(str(o, "involvedObject", "apiVersion"), "v1");
    CHECK_EQ_STR(str(o, "involvedObject", "name"), "js-workers-0-1");
    CHECK_EQ_STR(str(o, "involvedObject", "namespace"), "team-a");
    CHECK_EQ_STR(str(o, "involvedObject", "uid"), "u-1");
    CHECK_EQ_STR(str(o, "reason", NULL), "WorkerFailed");
    CHECK_EQ_STR(str(o, "type", NULL), "Warning");
    CHECK_EQ_STR(str(o, "message", NULL), "rank 1 on js-workers-0-1: exit code 3");
    CHECK_EQ_STR(str(o, "source", "component"), "podrun");
    CHECK_EQ_STR(str(o, "source", "host"), "node-7");
    CHECK_EQ_STR(str(o, "firstTimestamp", NULL), "2025-12-06T05:46:40Z");
    CHECK_EQ_STR(str(o, "lastTimestamp", NULL), "2025-12-06T05:46:40Z");
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "count")), 1);
    CHECK_EQ_STR(str(o, "reportingComponent", NULL), "podrun");
    json_decref(o);
    /* without a uid or a node: those fields are left out, not empty */
    o = event(K8S_EV_ROUND, "round 0", "", "");
    CHECK(json_object_get(json_object_get(o, "involvedObject"), "uid") == NULL);
    CHECK(json_object_get(json_object_get(o, "source"), "host") == NULL);
    CHECK_EQ_STR(str(o, "type", NULL), "Normal");
    CHECK_EQ_STR(str(o, "reason", NULL), "RendezvousComplete");
    json_decref(o);
}

static void test_every_kind_has_its_reason(void)
{
    static const struct {
        enum k8s_event_kind k;
        const char *reason;
        bool warning;
    } rows[] = {
        {K8S_EV_ROUND, "RendezvousComplete", false}, {K8S_EV_FAILURE, "WorkerFailed", true},
        {K8S_EV_RESTART, "RestartingInPlace", false}, {K8S_EV_SUCCEEDED, "JobSucceeded", false},
        {K8S_EV_FAILED, "JobFailed", true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        bool w = !rows[i].warning;
        CHECK_EQ_STR(k8s_event_reason(rows[i].k, &w), rows[i].reason);
        CHECK(w == rows[i].warning);
    }
}

static void test_a_message_that_is_not_utf8_still_goes_out(void)
{
    json_t *o = event(K8S_EV_FAILURE, "bad \xff\xfe bytes \"quoted\"\n", "", "");
    CHECK_EQ_STR(str(o, "message", NULL), "bad ?? bytes \"quoted\"\n");
    json_decref(o);
}

static void test_the_bucket_allows_a_burst_then_one_per_refill(void)
{
    struct k8s_event_bucket b;
    k8s_event_bucket_init(&b, 1000);
    for (int i = 0; i < K8S_EVENT_BURST; i++)
        CHECK(k8s_event_bucket_take(&b, 1000 + (uint64_t)i));
    CHECK(!k8s_event_bucket_take(&b, 1100));
    CHECK(!k8s_event_bucket_take(&b, 1000 + K8S_EVENT_REFILL_MS - 1));
    CHECK(k8s_event_bucket_take(&b, 1000 + K8S_EVENT_REFILL_MS));
    CHECK(!k8s_event_bucket_take(&b, 1000 + K8S_EVENT_REFILL_MS + 1));
    /* a long quiet fills it up again, to the burst and no further */
    uint64_t later = 1000 + 100ULL * K8S_EVENT_REFILL_MS;
    int n = 0;
    while (k8s_event_bucket_take(&b, later))
        n++;
    CHECK_EQ_INT(n, K8S_EVENT_BURST);
}

int main(void)
{
    RUN(test_the_event_kubectl_shows_on_the_pod);
    RUN(test_every_kind_has_its_reason);
    RUN(test_a_message_that_is_not_utf8_still_goes_out);
    RUN(test_the_bucket_allows_a_burst_then_one_per_refill);
    return check_result();
}
