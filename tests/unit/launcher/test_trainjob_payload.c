/* tests/unit/launcher/test_trainjob_payload.c — the body of a TrainJob status report: an
 * UpdateTrainJobStatusRequest whose fields have the Trainer's names and JSON types (int32
 * numbers, string metric values of 1-64 characters, an RFC 3339 time), whatever text a failure
 * carried. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/output/trainjob_payload.h"

static json_t *payload(const struct trainjob_view *v)
{
    char *s = NULL;
    CHECK_EQ_INT(trainjob_payload(v, &s), 0);
    json_error_t e;
    json_t *o = s ? json_loads(s, 0, &e) : NULL;
    CHECK(o != NULL);
    free(s);
    return o;
}

/* The metric's value, or NULL; every metric is a {name, value} pair of non-empty strings of at
 * most 64 characters (bytes here are at most 4 per character). */
static const char *metric(json_t *body, const char *name)
{
    json_t *list = json_object_get(json_object_get(body, "trainerStatus"), "metrics");
    size_t i;
    json_t *m;
    const char *found = NULL;
    json_array_foreach(list, i, m) {
        CHECK_EQ_INT(json_object_size(m), 2);
        const char *n = json_string_value(json_object_get(m, "name"));
        const char *v = json_string_value(json_object_get(m, "value"));
        CHECK(n && v && *n && *v && strlen(n) <= 64 && strlen(v) <= 4 * 64);
        if (n && !strcmp(n, name))
            found = v;
    }
    return found;
}

static struct trainjob_view view(void)
{
    return (struct trainjob_view){.state = "running", .round = 2, .nodes = 4, .workers = 32,
                                  .restarts = 1, .max_restarts = 3, .exit_code = -1,
                                  .progress = {-1, -1}, .time = 1790000000.75};
}

static void test_running(void)
{
    struct trainjob_view v = view();
    json_t *o = payload(&v);
    CHECK_EQ_INT(json_object_size(o), 1);
    json_t *ts = json_object_get(o, "trainerStatus");
    /* only the Go struct's fields: nothing podrun does not know */
    CHECK_EQ_INT(json_object_size(ts), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(ts, "lastUpdatedTime")),
                 "2026-09-21T14:13:20Z");
    CHECK(json_object_get(ts, "progressPercentage") == NULL);
    CHECK_EQ_STR(metric(o, "podrun_state"), "running");
    CHECK_EQ_STR(metric(o, "podrun_round"), "2");
    CHECK_EQ_STR(metric(o, "podrun_nodes"), "4");
    CHECK_EQ_STR(metric(o, "podrun_workers"), "32");
    CHECK_EQ_STR(metric(o, "podrun_restarts"), "1");
    CHECK_EQ_STR(metric(o, "podrun_restarts_left"), "2");
    CHECK(metric(o, "podrun_exit_code") == NULL);
    CHECK(metric(o, "podrun_step") == NULL);
    CHECK(metric(o, "podrun_failed_rank") == NULL);
    CHECK_EQ_INT(json_array_size(json_object_get(ts, "metrics")), 6);
    json_decref(o);
}

/* The trainer's progress: a percentage is the Trainer's own field, an int32 in 0-100; a step is
 * a metric. */
static void test_progress(void)
{
    struct trainjob_view v = view();
    v.progress = (struct trainjob_progress){.step = 12345678901LL, .percent = 45};
    json_t *o = payload(&v);
    json_t *p = json_object_get(json_object_get(o, "trainerStatus"), "progressPercentage");
    CHECK(json_is_integer(p));
    CHECK_EQ_INT(json_integer_value(p), 45);
    CHECK_EQ_STR(metric(o, "podrun_step"), "12345678901");
    json_decref(o);
    v.progress.percent = 130;   /* never past what the CRD takes */
    o = payload(&v);
    p = json_object_get(json_object_get(o, "trainerStatus"), "progressPercentage");
    CHECK_EQ_INT(json_integer_value(p), 100);
    json_decref(o);
}

/* The end, with the last failure's root cause: where, what, the worker's words, each within the
 * CRD's 64 characters; a node-level failure has no rank; restarts left never below 0. */
static void test_end_with_root_cause(void)
{
    rdzv_failure_t f;
    rdzv_failure_init(&f);
    snprintf(f.node_name, sizeof f.node_name, "trainjob-node-0-1");
    f.rank = 9;
    snprintf(f.reason, sizeof f.reason, "exit code 1");
    snprintf(f.message, sizeof f.message, "torch.OutOfMemoryError: CUDA out of memory. Tried to "
             "allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB\n  File \"train.py\"");
    struct trainjob_view v = view();
    v.state = "failed";
    v.restarts = 4;
    v.root = &f;
    v.exit_code = 170;
    json_t *o = payload(&v);
    CHECK_EQ_STR(metric(o, "podrun_state"), "failed");
    CHECK_EQ_STR(metric(o, "podrun_exit_code"), "170");
    CHECK_EQ_STR(metric(o, "podrun_restarts_left"), "0");
    CHECK_EQ_STR(metric(o, "podrun_failed_node"), "trainjob-node-0-1");
    CHECK_EQ_STR(metric(o, "podrun_failed_rank"), "9");
    CHECK_EQ_STR(metric(o, "podrun_failure"), "exit code 1");
    CHECK_EQ_STR(metric(o, "podrun_failure_message"),
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate...");
    json_decref(o);
    /* a node lost: no rank, no message; the host when the name is not known */
    rdzv_failure_init(&f);
    snprintf(f.host, sizeof f.host, "10.0.0.7");
    snprintf(f.reason, sizeof f.reason, "agent lost: connection closed");
    o = payload(&v);
    CHECK_EQ_STR(metric(o, "podrun_failed_node"), "10.0.0.7");
    CHECK(metric(o, "podrun_failed_rank") == NULL);
    CHECK(metric(o, "podrun_failure_message") == NULL);
    json_decref(o);
}

/* Any bytes a worker wrote become a value the API takes: its first line, at most 64 characters
 * (not bytes), control characters as spaces, what is not UTF-8 as '?', never cut inside a
 * character. */
static void test_values(void)
{
    char buf[4 * (TRAINJOB_VALUE_MAX + 1) + 1];
    CHECK_EQ_INT(trainjob_value("", buf, sizeof buf), 0);
    CHECK_EQ_INT(trainjob_value("\nsecond line", buf, sizeof buf), 0);
    trainjob_value("a\tb\x01" "c\xff" "d \r\nrest", buf, sizeof buf);
    CHECK_EQ_STR(buf, "a b c?d");
    /* 64 characters of two bytes each pass whole; 65 are cut to 61 and "..." */
    char in[200] = "";
    for (int i = 0; i < 64; i++)
        strcat(in, "\xc3\xa9");
    CHECK_EQ_INT(trainjob_value(in, buf, sizeof buf), 128);
    CHECK_EQ_STR(buf, in);
    strcat(in, "x");
    CHECK_EQ_INT(trainjob_value(in, buf, sizeof buf), 61 * 2 + 3);
    CHECK(!strcmp(buf + 122, "..."));
    /* overlong and surrogate forms are not UTF-8 */
    trainjob_value("\xc0\xaf" "\xed\xa0\x80" "ok", buf, sizeof buf);
    json_t *j = json_stringn(buf, strlen(buf));
    CHECK(j != NULL);
    json_decref(j);
    CHECK_EQ_STR(buf, "?????ok");
}

int main(void)
{
    RUN(test_running);
    RUN(test_progress);
    RUN(test_end_with_root_cause);
    RUN(test_values);
    return check_result();
}
