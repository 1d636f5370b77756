/* tests/unit/launcher/operators/test_jobset_ipr.c — what a JobSet's object and watch events
 * say about in-place restart, and what a pod at an attempt does about it (the rules of
 * kubernetes-sigs/jobset's api/jobset/v1alpha2/jobset_types.go and its agent). */
#include <errno.h>
#include <string.h>

#include "launcher/operators/jobset_ipr.h"
#include "tests/unit/check.h"

#define JS(spec, annotations, status)                                                      \
    "{\"apiVersion\":\"jobset.x-k8s.io/v1alpha2\",\"kind\":\"JobSet\",\"metadata\":{"       \
    "\"name\":\"js\",\"namespace\":\"default\",\"resourceVersion\":\"1042\"" annotations "}," \
    "\"spec\":{" spec "},\"status\":{" status "}}"
#define IN_PLACE "\"failurePolicy\":{\"maxRestarts\":3,\"restartStrategy\":\"InPlaceRestart\"}"

static void test_a_jobset_with_in_place_restart(void)
{
    struct jobset_ipr s;
    const char *j = JS(IN_PLACE, "", "\"restarts\":0,\"currentInPlaceRestartAttempt\":2,"
                       "\"previousInPlaceRestartAttempt\":1");
    CHECK_EQ_INT(jobset_ipr_parse(j, strlen(j), &s), 0);
    CHECK(s.in_place && !s.disabled);
    CHECK_EQ_INT(s.current, 2);
    CHECK_EQ_INT(s.previous, 1);
    CHECK_EQ_STR(s.rv, "1042");
    CHECK_EQ_STR(s.terminal, "");
    /* a fresh one: neither attempt set yet */
    j = JS(IN_PLACE, "", "\"restarts\":0");
    CHECK_EQ_INT(jobset_ipr_parse(j, strlen(j), &s), 0);
    CHECK_EQ_INT(s.current, -1);
    CHECK_EQ_INT(s.previous, -1);
    /* ended */
    j = JS(IN_PLACE, "", "\"terminalState\":\"Failed\"");
    CHECK_EQ_INT(jobset_ipr_parse(j, strlen(j), &s), 0);
    CHECK_EQ_STR(s.terminal, "Failed");
}

static void test_jobsets_that_are_passed_through(void)
{
    struct jobset_ipr s;
    const char *recreate = JS("\"failurePolicy\":{\"maxRestarts\":3}", "", "");
    CHECK_EQ_INT(jobset_ipr_parse(recreate, strlen(recreate), &s), 0);
    CHECK(!s.in_place);
    const char *none = JS("\"replicatedJobs\":[]", "", "");
    CHECK_EQ_INT(jobset_ipr_parse(none, strlen(none), &s), 0);
    CHECK(!s.in_place);
    const char *off = JS(IN_PLACE, ",\"annotations\":{\"" JOBSET_DISABLE_KEY "\":\"\"}", "");
    CHECK_EQ_INT(jobset_ipr_parse(off, strlen(off), &s), 0);
    CHECK(s.in_place && s.disabled);
    /* not a JobSet at all */
    CHECK_EQ_INT(jobset_ipr_parse("[1]", 3, &s), -EPROTO);
    CHECK_EQ_INT(jobset_ipr_parse("{\"status\":", 10, &s), -EPROTO);
}

static void test_watch_events(void)
{
    struct jobset_ipr s = {.current = -1, .previous = -1};
    const char *mod = "{\"type\":\"MODIFIED\",\"object\":" JS(
        IN_PLACE, "", "\"currentInPlaceRestartAttempt\":0") "}";
    CHECK_EQ_INT(jobset_ipr_event(mod, strlen(mod), &s), 1);
    CHECK_EQ_INT(s.current, 0);
    const char *bm = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"JobSet\",\"metadata\":"
                     "{\"resourceVersion\":\"2000\"}}}";
    CHECK_EQ_INT(jobset_ipr_event(bm, strlen(bm), &s), 0);
    CHECK_EQ_STR(s.rv, "2000");
    CHECK_EQ_INT(s.current, 0);   /* a bookmark changes nothing else */
    const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                       "\"reason\":\"Expired\"}}";
    CHECK_EQ_INT(jobset_ipr_event(gone, strlen(gone), &s), -ESTALE);
    const char *err = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500}}";
    CHECK_EQ_INT(jobset_ipr_event(err, strlen(err), &s), -EIO);
    CHECK_EQ_INT(jobset_ipr_event("garbage", 7, &s), -EPROTO);
}

static void test_what_a_pod_at_an_attempt_does(void)
{
    static const struct {
        long current, previous, attempt;
        enum jobset_ipr_step step;
    } rows[] = {
        {-1, -1, 0, JOBSET_IPR_WAIT},    /* a fresh JobSet: wait for the others */
        {0, -1, 0, JOBSET_IPR_LIFT},     /* every pod at 0 */
        {0, 0, 1, JOBSET_IPR_WAIT},      /* one pod moved on to 1: the others must follow */
        {0, 0, 0, JOBSET_IPR_BEHIND},    /* ... and 0 is over */
        {1, 0, 1, JOBSET_IPR_LIFT},
        {1, 1, 1, JOBSET_IPR_BEHIND},
        {3, 2, 1, JOBSET_IPR_BEHIND},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct jobset_ipr s = {.current = rows[i].current, .previous = rows[i].previous};
        CHECK_EQ_INT(jobset_ipr_step(&s, rows[i].attempt), rows[i].step);
    }
}

static void test_the_first_attempt(void)
{
    struct jobset_ipr s = {.current = -1, .previous = -1};
    CHECK_EQ_INT(jobset_ipr_first(&s), 0);
    s.current = 2;
    CHECK_EQ_INT(jobset_ipr_first(&s), 3);   /* a pod (re)started into a running JobSet */
    s.previous = 4;
    CHECK_EQ_INT(jobset_ipr_first(&s), 5);   /* never at or below previous */
}

int main(void)
{
    RUN(test_a_jobset_with_in_place_restart);
    RUN(test_jobsets_that_are_passed_through);
    RUN(test_watch_events);
    RUN(test_what_a_pod_at_an_attempt_does);
    RUN(test_the_first_attempt);
    return check_result();
}
