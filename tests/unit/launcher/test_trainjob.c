/* tests/unit/launcher/test_trainjob.c — the TrainJob status reporter (output/trainjob.c) on a loop,
 * against tests/fakes/trainer_api.py run as a program (HTTPS with a CA the openssl CLI makes in a
 * temporary directory; it logs every request it answered, with how many it was handling at once).
 * argv[1] is that script. The servers are stopped by their PIDs at the end.
 *
 * What is checked: never more than one request in flight while changes keep coming (they are
 * folded into the next report), the trainer's progress read through the hook and reported when it
 * changes, the end's report answered before its callback, and a server that never answers holding
 * the end no longer than the request's bound, said in one line. */
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "launcher/output/trainjob.h"

static const char *script;
static char dir[64];

/* ---- the fake server ---- */

struct server {
    pid_t pid;
    int port;
    char log[128], url[256], ca[128], token[128];
};

static int server_start(struct server *s, const char *name, const char *delay)
{
    snprintf(s->log, sizeof s->log, "%s/%s.log", dir, name);
    int fds[2];
    if (pipe(fds))
        return -1;
    s->pid = fork();
    if (s->pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/usr/bin/python3", "python3", script, "--dir", dir, "--log", s->log, "--delay",
              delay, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[64] = {0};
    size_t n = 0;
    while (n < sizeof line - 1 && read(fds[0], line + n, 1) == 1 && line[n] != '\n')
        n++;
    close(fds[0]);
    if (sscanf(line, "PORT %d", &s->port) != 1)
        return -1;
    snprintf(s->url, sizeof s->url, "https://127.0.0.1:%d/apis/trainer.kubeflow.org/v1alpha1/"
             "namespaces/default/trainjobs/podrun-train/status", s->port);
    snprintf(s->ca, sizeof s->ca, "%s/pki/ca.crt", dir);
    snprintf(s->token, sizeof s->token, "%s/token", dir);
    FILE *f = fopen(s->token, "w");
    if (!f)
        return -1;
    fputs("token-1\n", f);
    fclose(f);
    return 0;
}

static void server_stop(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* The server's log: one object per request answered. */
static json_t *server_requests(const struct server *s)
{
    json_t *all = json_array();
    FILE *f = fopen(s->log, "r");
    char line[65536];
    while (f && fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        if (o)
            json_array_append_new(all, o);
    }
    if (f)
        fclose(f);
    return all;
}

/* A report's metric, or NULL. */
static const char *metric(json_t *req, const char *name)
{
    json_t *list = json_object_get(json_object_get(json_object_get(req, "body"),
                                                   "trainerStatus"), "metrics");
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m) {
        if (!strcmp(json_string_value(json_object_get(m, "name")), name))
            return json_string_value(json_object_get(m, "value"));
    }
    return NULL;
}

/* ---- the agent's side ---- */

static uv_loop_t loop;
static struct trainjob *tj;
static long long step = -1;
static int lines, sent;
static char said[1024];

static int progress(void *arg, struct trainjob_progress *out)
{
    (void)arg;
    if (step < 0)
        return -1;
    out->step = step;
    out->percent = (int)(step * 100 / 84);
    return 0;
}

static void say(void *arg, const char *line)
{
    (void)arg;
    lines++;
    snprintf(said, sizeof said, "%s", line);
}

static void on_sent(void *arg)
{
    (void)arg;
    sent++;
    trainjob_close(tj);
    tj = NULL;
}

static void start(const struct server *s, uint64_t interval_ms)
{
    uv_loop_init(&loop);
    step = -1;
    lines = sent = 0;
    said[0] = '\0';
    struct trainjob_params p = {.url = s->url, .ca_file = s->ca, .token_file = s->token,
                                .interval_ms = interval_ms, .max_restarts = 3,
                                .progress = progress, .say = say};
    trainjob_start(&loop, &p, &tj);
    CHECK(tj != NULL);
}

/* A script of the agent's events, one step per timer firing. */
static uv_timer_t steps, guard;
static int at;

static void on_guard(uv_timer_t *t)
{
    (void)t;
    fprintf(stderr, "the test's bound passed\n");
    CHECK(0);
    uv_stop(&loop);
}

static void finish(void)
{
    uv_close((uv_handle_t *)&steps, NULL);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void coalesce_step(uv_timer_t *t)
{
    rdzv_failure_t f;
    switch (at++) {
    case 0:   /* the first report goes at once and the server takes its time */
        trainjob_round(tj, 0, 0, 2, 4, 0);
        uv_timer_start(t, coalesce_step, 20, 0);
        break;
    case 1:   /* meanwhile: a failure, the restart, the next round, all while one is in flight */
        rdzv_failure_init(&f);
        snprintf(f.node_name, sizeof f.node_name, "node-b");
        f.rank = 3;
        snprintf(f.reason, sizeof f.reason, "exit code 1");
        trainjob_failure(tj, &f);
        trainjob_restart(tj, 1);
        trainjob_round(tj, 1, 0, 2, 4, 1);
        uv_timer_start(t, coalesce_step, 700, 0);
        break;
    case 2:   /* the trainer moves on: a report once the hook says so */
        step = 42;
        uv_timer_start(t, coalesce_step, 700, 0);
        break;
    default:
        CHECK_EQ_INT(trainjob_end(tj, "succeeded", 0, on_sent, NULL), 1);
        break;
    }
}

static void test_one_in_flight_and_coalesced(void)
{
    struct server s = {0};
    CHECK_EQ_INT(server_start(&s, "slow", "0.3"), 0);
    start(&s, 50);
    at = 0;
    uv_timer_init(&loop, &steps);
    uv_timer_init(&loop, &guard);
    uv_timer_start(&steps, coalesce_step, 0, 0);
    uv_timer_start(&guard, on_guard, 30000, 0);
    while (!sent && uv_run(&loop, UV_RUN_ONCE))
        ;
    CHECK_EQ_INT(sent, 1);
    finish();
    server_stop(&s);
    json_t *reqs = server_requests(&s);
    size_t n = json_array_size(reqs), i;
    json_t *r;
    /* six changes (round, failure, restart, round, progress, end), at most four reports */
    CHECK(n >= 3 && n <= 4);
    bool round1 = false, step42 = false;
    json_array_foreach(reqs, i, r) {
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "code")), 200);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "concurrent")), 1);
        CHECK_EQ_STR(json_string_value(json_object_get(r, "auth")), "Bearer token-1");
        const char *round = metric(r, "podrun_round");
        if (round && !strcmp(round, "1") && !round1) {
            round1 = true;   /* the changes folded into one report, none lost */
            CHECK_EQ_STR(metric(r, "podrun_restarts"), "1");
            CHECK_EQ_STR(metric(r, "podrun_restarts_left"), "2");
            CHECK_EQ_STR(metric(r, "podrun_failed_rank"), "3");
        }
        CHECK(!(round1 && round && !strcmp(round, "0")));   /* in order */
        if (metric(r, "podrun_step") && !strcmp(metric(r, "podrun_step"), "42")) {
            step42 = true;
            json_t *p = json_object_get(json_object_get(json_object_get(r, "body"),
                                                        "trainerStatus"), "progressPercentage");
            CHECK_EQ_INT(json_integer_value(p), 50);
        }
    }
    CHECK(round1 && step42);
    r = json_array_get(reqs, 0);
    CHECK_EQ_STR(metric(r, "podrun_round"), "0");
    r = json_array_get(reqs, n - 1);
    CHECK_EQ_STR(metric(r, "podrun_state"), "succeeded");
    CHECK_EQ_STR(metric(r, "podrun_exit_code"), "0");
    CHECK_EQ_INT(lines, 0);
    json_decref(reqs);
}

/* Not node rank 0: nothing is sent, and the end has nothing to wait for. */
static void test_other_ranks_do_not_report(void)
{
    struct server s = {0};
    CHECK_EQ_INT(server_start(&s, "rank1", "0"), 0);
    start(&s, 50);
    trainjob_round(tj, 0, 1, 2, 4, 0);
    CHECK_EQ_INT(trainjob_end(tj, "succeeded", 0, on_sent, NULL), 0);
    trainjob_close(tj);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    server_stop(&s);
    json_t *reqs = server_requests(&s);
    CHECK_EQ_INT(json_array_size(reqs), 0);
    CHECK_EQ_INT(sent, 0);
    json_decref(reqs);
}

/* A server that never answers: the end's report gives up at its bound, said once. */
static void test_silent_server_bounds_the_end(void)
{
    struct server s = {0};
    CHECK_EQ_INT(server_start(&s, "silent", "60"), 0);
    start(&s, 50);
    uv_timer_init(&loop, &steps);
    uv_timer_init(&loop, &guard);
    uv_timer_start(&guard, on_guard, 30000, 0);
    trainjob_round(tj, 0, 0, 1, 2, 0);
    trainjob_failure(tj, &(rdzv_failure_t){.rank = -1, .reason = "agent lost"});
    CHECK_EQ_INT(trainjob_end(tj, "failed", 171, on_sent, NULL), 1);
    uint64_t t0 = uv_now(&loop);
    while (!sent && uv_run(&loop, UV_RUN_ONCE))
        ;
    CHECK_EQ_INT(sent, 1);
    /* the end's report went in place of the round's, and gave up at its bound */
    CHECK(uv_now(&loop) - t0 <= TRAINJOB_REQUEST_MS + 2000);
    CHECK_EQ_INT(lines, 1);
    CHECK(strstr(said, "TrainJob status: cannot report to the server") != NULL);
    finish();
    server_stop(&s);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_trainjob tests/fakes/trainer_api.py\n");
        return 2;
    }
    script = argv[1];
    snprintf(dir, sizeof dir, "/tmp/podrun-trainjob-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_one_in_flight_and_coalesced);
    RUN(test_other_ranks_do_not_report);
    RUN(test_silent_server_bounds_the_end);
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return check_result();
}
