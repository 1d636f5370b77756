/* tests/unit/launcher/health/test_metrics.c — /metrics as Prometheus' text format: label
 * escaping, cumulative histograms, and the whole page of an agent, checked line by line as a
 * scraper reads it (every sample of an announced family, each family announced once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/health/counters.h"
#include "launcher/health/metrics.h"
#include "rdzv/store/wire.h"

static void test_escape_and_values(void)
{
    struct prom p;
    metrics_init(&p);
    metrics_family(&p, "x_total", "counter", "a\\b\nc");
    const char *lab[] = {"node", "a\"b\\c\nd", "k", "v", NULL};
    metrics_sample(&p, "x_total", lab, 3);
    metrics_sample(&p, "x_total", NULL, 0.25);
    metrics_sample(&p, "x_total", NULL, 1.0 / 0.0);
    metrics_sample(&p, "x_total", NULL, 0.0 / 0.0);
    CHECK(!p.oom);
    CHECK_EQ_STR(p.buf, "# HELP x_total a\\\\b\\nc\n# TYPE x_total counter\n"
                        "x_total{node=\"a\\\"b\\\\c\\nd\",k=\"v\"} 3\n"
                        "x_total 0.25\nx_total +Inf\nx_total NaN\n");
    metrics_free(&p);
}

static void test_histogram(void)
{
    static const double bounds[] = {0.1, 1, 10};
    struct prom_histogram h;
    metrics_histogram_init(&h, bounds, 3);
    metrics_histogram_observe(&h, 0.05);
    metrics_histogram_observe(&h, 0.1);   /* le is inclusive */
    metrics_histogram_observe(&h, 5);
    metrics_histogram_observe(&h, 50);
    struct prom p;
    metrics_init(&p);
    metrics_histogram_write(&p, "d_seconds", "d", &h);
    CHECK_EQ_STR(p.buf, "# HELP d_seconds d\n# TYPE d_seconds histogram\n"
                        "d_seconds_bucket{le=\"0.1\"} 2\nd_seconds_bucket{le=\"1\"} 2\n"
                        "d_seconds_bucket{le=\"10\"} 3\nd_seconds_bucket{le=\"+Inf\"} 4\n"
                        "d_seconds_sum 55.15\nd_seconds_count 4\n");
    metrics_free(&p);
}

/* The value of the first sample line that starts with `prefix` (name and labels), or -1. */
static double sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, n) && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return -1;
}

/* Every sample belongs to the family announced last (name, or name_bucket/_sum/_count of a
 * histogram); no family twice. */
static void check_format(const char *text)
{
    char fam[128] = "", type[32] = "", seen[4096] = "|";
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        CHECK(nl != NULL);
        if (!nl)
            return;
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(nl - l), l);
        if (!strncmp(line, "# HELP ", 7)) {
            sscanf(line + 7, "%127s", fam);
            char key[140];
            snprintf(key, sizeof key, "|%s|", fam);
            CHECK(strstr(seen, key) == NULL);
            strncat(seen, key + 1, sizeof seen - strlen(seen) - 1);
        } else if (!strncmp(line, "# TYPE ", 7)) {
            char name[128];
            CHECK_EQ_INT(sscanf(line + 7, "%127s %31s", name, type), 2);
            CHECK_EQ_STR(name, fam);
        } else {
            size_t fl = strlen(fam);
            CHECK(fl > 0 && !strncmp(line, fam, fl));
            const char *rest = line + fl;
            if (!strcmp(type, "histogram") && *rest == '_')
                rest += strspn(rest, "_bucketsumcont");
            CHECK(*rest == ' ' || *rest == '{');
            const char *sp = strrchr(line, ' ');
            char *end;
            strtod(sp + 1, &end);
            CHECK(*end == '\0' || !strcmp(sp + 1, "+Inf") || !strcmp(sp + 1, "NaN"));
        }
        l = nl + 1;
    }
}

static void test_agent_page(void)
{
    struct health_counters c;
    health_counters_init(&c);
    c.rounds = 2;
    c.restarts_counted = 1;
    c.exits[HEALTH_EXIT_CODE] = 1;
    c.exits[HEALTH_EXIT_STOPPED] = 3;
    metrics_histogram_observe(&c.rdzv_seconds, 0.2);
    metrics_histogram_observe(&c.push_seconds, 0.004);
    struct health_snapshot s = {.state = "running", .healthy = 1, .workers = 4,
                                .workers_running = 4, .round = 1, .node_rank = 0, .nnodes = 3,
                                .world_size = 12, .restart_count = 1, .restarts_used = 1,
                                .max_restarts = 3, .check_on = 1, .check_ok = 1,
                                .check_time = 1795797563.480, .checks = 40,
                                .check_failures = 0};
    s.rdzv.hosting = 1;
    s.rdzv.heartbeats = 17;
    s.rdzv.store_connections = 3;
    s.rdzv.store_ops[WIRE_SET] = 9;
    struct health_labels l = {"1.2.3", "pod \"0\"", "job", "default"};
    struct httpd_stats h = {.answered = {0, 0, 5, 0, 1, 0}, .busy = 2};
    struct prom p;
    metrics_init(&p);
    health_counters_render(&c, &s, &l, &h, &p);
    CHECK(!p.oom);
    check_format(p.buf);
    CHECK(strstr(p.buf, "podrun_info{version=\"1.2.3\",node=\"pod \\\"0\\\"\",run_id=\"job\","
                        "role=\"default\"} 1\n") != NULL);
    CHECK(sample(p.buf, "podrun_agent_state{state=\"running\"}") == 1);
    CHECK(sample(p.buf, "podrun_agent_state{state=\"stopping\"}") == 0);
    CHECK(sample(p.buf, "podrun_world_size") == 12);
    CHECK(sample(p.buf, "podrun_rendezvous_rounds_total") == 2);
    CHECK(sample(p.buf, "podrun_restart_attempt") == 1);
    CHECK(sample(p.buf, "podrun_restarts_used") == 1);
    CHECK(sample(p.buf, "podrun_max_restarts") == 3);
    CHECK(sample(p.buf, "podrun_restarts_total{counted=\"true\"}") == 1);
    CHECK(sample(p.buf, "podrun_worker_exits_total{cause=\"exit_code\"}") == 1);
    CHECK(sample(p.buf, "podrun_worker_exits_total{cause=\"stopped\"}") == 3);
    CHECK(sample(p.buf, "podrun_failure_push_seconds_count") == 1);
    CHECK(sample(p.buf, "podrun_heartbeats_total") == 17);
    CHECK(sample(p.buf, "podrun_store_connections") == 3);
    CHECK(sample(p.buf, "podrun_store_requests_total{op=\"SET\"}") == 9);
    CHECK(sample(p.buf, "podrun_health_requests_total{code=\"2xx\"}") == 5);
    CHECK(sample(p.buf, "podrun_health_refused_total{reason=\"busy\"}") == 2);
    /* the last health check; its time keeps its milliseconds */
    CHECK(strstr(p.buf, "\npodrun_health_check_last_time_seconds 1795797563.48\n") != NULL);
    CHECK(sample(p.buf, "podrun_health_check_ok") == 1);
    CHECK(sample(p.buf, "podrun_health_checks_total") == 40);
    CHECK(sample(p.buf, "podrun_health_check_failures_total") == 0);
    metrics_free(&p);
    /* before the first round and off the host: no round gauges, no store's */
    struct health_snapshot s0 = {.state = "rendezvous", .healthy = 1, .round = -1};
    metrics_init(&p);
    health_counters_render(&c, &s0, &l, &h, &p);
    check_format(p.buf);
    CHECK(strstr(p.buf, "podrun_rendezvous_round ") == NULL);
    CHECK(strstr(p.buf, "podrun_store_keys") == NULL);
    CHECK(sample(p.buf, "podrun_store_hosted") == 0);
    CHECK(strstr(p.buf, "podrun_health_check") == NULL);   /* --health-check-interval 0 */
    metrics_free(&p);
}

int main(void)
{
    RUN(test_escape_and_values);
    RUN(test_histogram);
    RUN(test_agent_page);
    return check_result();
}
