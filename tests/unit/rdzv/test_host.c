/* tests/unit/rdzv/test_host.c — the coordinator on a loop (rdzv/host.c) against a fake sink:
 * timers armed and fed back, the one clamp on their delay, log lines forwarded, the writes of a
 * pass handed over whole and in order, and the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/base/common.h"
#include "rdzv/host.h"
#include "rdzv/records.h"

/* ---- the fake sink ---- */

static int passes, closed_calls, lines, writes_total, over_seen, stop_in_apply;
static char order[4096];  /* "S:<key> D:<key> W:<prefix> | ..." : each pass's writes, in order */
static char last_line[512];
static host_t host;

static void f_apply(void *arg, const coord_action_t *w, size_t n, int over)
{
    CHECK(arg == &host);
    passes++;
    over_seen += over;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(order);
        const char *tag = w[i].kind == COORD_SET      ? "S"
                          : w[i].kind == COORD_DELETE ? "D"
                          : w[i].kind == COORD_DELETE_WORKERS ? "W"
                                                              : "?";
        snprintf(order + len, sizeof order - len, "%s:%s ", tag, w[i].key);
        writes_total++;
    }
    if (n) {
        size_t len = strlen(order);
        snprintf(order + len, sizeof order - len, "| ");
    }
    if (stop_in_apply)
        host_stop(&host); /* the sink gave up coordinating: no `closed` after */
}

static void f_log(void *arg, const char *line)
{
    (void)arg;
    lines++;
    snprintf(last_line, sizeof last_line, "%s", line);
}

static void f_closed(void *arg)
{
    (void)arg;
    closed_calls++;
}

static const host_sink_t sink = {f_apply, f_log, f_closed};

static uv_loop_t loop;
static int done_calls;

static void on_done(void *arg)
{
    (void)arg;
    done_calls++;
}

static void reset(void)
{
    passes = closed_calls = lines = writes_total = over_seen = stop_in_apply = done_calls = 0;
    order[0] = last_line[0] = '\0';
}

/* A host with a coordinator of MIN..MAX nodes whose join timeout is `join_timeout` s. */
static void mk(int min, int max, double join_timeout)
{
    reset();
    memset(&host, 0, sizeof host);
    host_init(&host, &loop, &sink, &host);
    coord_params_t p = {
        .run_id = "job",
        .min_nodes = min,
        .max_nodes = max,
        .max_restarts = 3,
        .join_timeout = join_timeout,
        .last_call_timeout = 30,
        .close_timeout = 0.05,
        .keep_alive_interval = 1,
        .keep_alive_max_attempt = 3,
        .progress_interval = 5,
        .store_host = "h",
        .store_port = 29400,
    };
    host.coord = coord_new(&p, podrun_time_epoch());
    CHECK(host.coord != NULL);
    host_run(&host);
}

static void end(void)
{
    host_stop(&host);
    CHECK(host.coord == NULL);
    CHECK_EQ_INT(host_close(&host, on_done, NULL), 1);
    CHECK_EQ_INT(host_close(&host, on_done, NULL), 0); /* once */
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(done_calls, 1);
    host_free(&host);
}

static void join(int i)
{
    rdzv_desc_rec_t d = {0};
    char key[128], val[1024];
    snprintf(d.name, sizeof d.name, "node-%d", i);
    snprintf(d.addr, sizeof d.addr, "10.0.0.%d", i + 1);
    d.nproc = 1;
    d.want_rank = -1;
    int len = rdzv_desc_encode(&d, val, sizeof val);
    CHECK(len > 0);
    snprintf(key, sizeof key, "podrun/job/n/%016x/join/0", i + 1);
    coord_on_write(host.coord, (uint64_t)(i + 1), key, strlen(key), val, (size_t)len,
                   podrun_time_epoch());
    host_run(&host);
}

/* ---- the tests ---- */

static void test_delay_clamp(void)
{
    double now = 1700000000.0;
    CHECK_EQ_INT(host_timer_delay(now - 5, now), 0);          /* due: at once */
    CHECK_EQ_INT(host_timer_delay(now, now), 0);
    CHECK_EQ_INT(host_timer_delay(now + 0.0015, now), 2);     /* late by a ms, never early */
    CHECK_EQ_INT(host_timer_delay(now + 10, now), 10001);
    /* a year away (the etcd leader's sweep that is off) and beyond: the one clamp */
    CHECK_EQ_INT(host_timer_delay(now + 365.0 * 24 * 3600, now), 4000000001ULL);
    CHECK_EQ_INT(host_timer_delay(now + 1e30, now), 4000000001ULL);
}

static void test_timers_armed(void)
{
    mk(2, 2, 600);
    /* a new coordinator arms its sweep and the open round's join timeout */
    CHECK(uv_is_active((uv_handle_t *)&host.timer[COORD_T_SWEEP]));
    CHECK(uv_is_active((uv_handle_t *)&host.timer[COORD_T_JOIN]));
    CHECK(!uv_is_active((uv_handle_t *)&host.timer[COORD_T_CLOSE]));
    uint64_t due = uv_timer_get_due_in(&host.timer[COORD_T_JOIN]);
    CHECK(due > 590000 && due <= 600001);
    host_stop(&host); /* stopping coordinating stops its timers */
    CHECK(!uv_is_active((uv_handle_t *)&host.timer[COORD_T_SWEEP]));
    CHECK(!uv_is_active((uv_handle_t *)&host.timer[COORD_T_JOIN]));
    end();
}

static void test_writes_in_order(void)
{
    mk(2, 2, 600);
    int before = passes;
    join(0);
    CHECK_EQ_INT(passes, before + 1); /* one pass per input, writes or not */
    join(1);                          /* MAX joined: the round closes */
    /* both assignments in one pass, in the coordinator's order, nothing but writes */
    char want[512];
    snprintf(want, sizeof want, "S:podrun/job/n/%016x/assign/0 S:podrun/job/n/%016x/assign/0 ",
             1, 2);
    CHECK(strstr(order, want) != NULL);
    CHECK(strstr(order, "?:") == NULL);
    CHECK_EQ_INT(over_seen, 0);
    CHECK_EQ_INT(closed_calls, 0);
    CHECK(lines > 0); /* the coordinator's line about the round, forwarded */
    CHECK(strstr(last_line, "job") != NULL);
    end();
}

static void test_timer_fires(void)
{
    mk(2, 2, 0.02); /* the join timeout is the behaviour under test */
    join(0);
    order[0] = '\0';
    while (!strstr(order, "assign"))
        uv_run(&loop, UV_RUN_ONCE);
    /* the timeout's answer to the node that joined: through the sink, from the timer */
    char key[128];
    snprintf(key, sizeof key, "S:podrun/job/n/%016x/assign/0", 1);
    CHECK(strstr(order, key) != NULL);
    end();
}

static void test_closed_last(void)
{
    mk(1, 2, 600);
    coord_shutdown(host.coord, podrun_time_epoch());
    host_run(&host);
    if (!closed_calls) /* nobody else was there, else after close_timeout */
        while (!closed_calls)
            uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ_INT(closed_calls, 1);
    CHECK_EQ_INT(over_seen, 1); /* the pass that ends says so */
    end();
    /* a sink that stops coordinating in the last pass gets no `closed` */
    mk(1, 2, 600);
    stop_in_apply = 1;
    coord_shutdown(host.coord, podrun_time_epoch());
    host_run(&host);
    while (host.coord && !closed_calls)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ_INT(closed_calls, 0);
    end();
}

static void test_no_coordinator(void)
{
    reset();
    memset(&host, 0, sizeof host);
    host_init(&host, &loop, &sink, &host);
    host_run(&host); /* nothing to drain, nothing to tell */
    CHECK_EQ_INT(passes, 0);
    end();
}

int main(void)
{
    uv_loop_init(&loop);
    RUN(test_delay_clamp);
    RUN(test_timers_armed);
    RUN(test_writes_in_order);
    RUN(test_timer_fires);
    RUN(test_closed_last);
    RUN(test_no_coordinator);
    uv_loop_close(&loop);
    return check_result();
}
