/* tests/unit/rdzv/test_coordinator.c — the coordinator state machine, driven with explicit times
 * and inspected through its actions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/coordinator.h"
#include "rdzv/status.h"

/* ---- a tiny model of the store and the loop around the coordinator ---- */

#define MAXKV 4096
static struct {
    char *key[MAXKV], *val[MAXKV];
    int n;
    double timer[COORD_T_COUNT];
    char logs[64][RDZV_LINE_MAX];
    int nlogs;
    int deletes, closed;
    long sets; /* COORD_SET actions: the writes that wake WAITs */
    int set_before_delete; /* an assign key set before the workers' keys were deleted */
} W;

static double now = 1000.0;

static void w_reset(void)
{
    for (int i = 0; i < W.n; i++) {
        free(W.key[i]);
        free(W.val[i]);
    }
    memset(&W, 0, sizeof W);
    for (int i = 0; i < COORD_T_COUNT; i++)
        W.timer[i] = -1;
    now = 1000.0;
}

static const char *w_get(const char *key)
{
    for (int i = 0; i < W.n; i++)
        if (strcmp(W.key[i], key) == 0)
            return W.val[i];
    return NULL;
}

static void w_set(const char *key, const char *val)
{
    for (int i = 0; i < W.n; i++)
        if (strcmp(W.key[i], key) == 0) {
            free(W.val[i]);
            W.val[i] = strdup(val);
            return;
        }
    if (W.n < MAXKV) {
        W.key[W.n] = strdup(key);
        W.val[W.n++] = strdup(val);
    }
}

static void w_del(const char *key)
{
    for (int i = 0; i < W.n; i++)
        if (strcmp(W.key[i], key) == 0) {
            free(W.key[i]);
            free(W.val[i]);
            W.key[i] = W.key[--W.n];
            W.val[i] = W.val[W.n];
            return;
        }
}

static void drain(coord_t *c)
{
    coord_action_t a;
    while (coord_next_action(c, &a)) {
        switch (a.kind) {
        case COORD_SET:
            w_set(a.key, a.val);
            W.sets++;
            break;
        case COORD_TIMER:
            W.timer[a.timer] = a.at;
            break;
        case COORD_LOG:
            snprintf(W.logs[W.nlogs % 64], RDZV_LINE_MAX, "%s", a.val);
            W.nlogs++;
            break;
        case COORD_DELETE:
            w_del(a.key);
            break;
        case COORD_DELETE_WORKERS:
            CHECK_EQ_STR(a.key, "podrun/");
            W.deletes++;
            break;
        case COORD_CLOSED:
            W.closed++;
            break;
        }
    }
}

/* Fires every timer due at `now`, in timer order, until none is due. */
static void run_timers(coord_t *c)
{
    for (int guard = 0; guard < 100; guard++) {
        int fired = 0;
        for (int t = 0; t < COORD_T_COUNT; t++)
            if (W.timer[t] >= 0 && W.timer[t] <= now + 1e-9) {
                W.timer[t] = -1;
                coord_on_timer(c, t, now);
                drain(c);
                fired = 1;
            }
        if (!fired)
            return;
    }
}

/* Moves time forward by dt, firing each timer at the time it is due. */
static void advance_raw(coord_t *c, double dt)
{
    double target = now + dt;
    for (;;) {
        int next = -1;
        for (int t = 0; t < COORD_T_COUNT; t++)
            if (W.timer[t] >= 0 && W.timer[t] <= target + 1e-9 &&
                (next < 0 || W.timer[t] < W.timer[next]))
                next = t;
        if (next < 0)
            break;
        if (W.timer[next] > now)
            now = W.timer[next];
        run_timers(c);
    }
    now = target;
}

/* Nodes that joined send heartbeats while time passes, unless a test speaks for them. */
static int auto_hb = 1;
static int hb_on[64];
static void hb(coord_t *c, int i);

static void advance(coord_t *c, double dt)
{
    double target = now + dt;
    while (now < target - 1e-9) {
        if (auto_hb)
            for (int i = 0; i < 64; i++)
                if (hb_on[i])
                    hb(c, i);
        advance_raw(c, target - now < 1 ? target - now : 1);
    }
}

static int mk_segment; /* coord_params.segment_size of the next mk */

static coord_t *mk(int min, int max, int restarts, const char *expected)
{
    w_reset();
    memset(hb_on, 0, sizeof hb_on);
    auto_hb = 1;
    coord_params_t p = {
        .run_id = "job1",
        .min_nodes = min,
        .max_nodes = max,
        .segment_size = mk_segment,
        .max_restarts = restarts,
        .join_timeout = 600,
        .last_call_timeout = 30,
        .close_timeout = 30,
        .keep_alive_interval = 1,
        .keep_alive_max_attempt = 3,
        .progress_interval = 5,
        .store_host = "store.example",
        .store_port = 29400,
        .expected = expected,
    };
    coord_t *c = coord_new(&p, now);
    drain(c);
    return c;
}

/* node i: conn i+1, id 00000000000000<i+1 in hex> */
static void idkey(char *out, size_t cap, int i, const char *what, int num)
{
    if (num >= 0)
        snprintf(out, cap, "podrun/job1/n/%016x/%s/%d", i + 1, what, num);
    else
        snprintf(out, cap, "podrun/job1/n/%016x/%s", i + 1, what);
}

static void wr(coord_t *c, int i, const char *what, int num, const char *val)
{
    char key[128];
    idkey(key, sizeof key, i, what, num);
    coord_on_write(c, (uint64_t)(i + 1), key, strlen(key), val, strlen(val), now);
    drain(c);
}

static const char *join_domain; /* the NVLink domain of the next join, NULL none */

static void join(coord_t *c, int i, const char *name, int nproc, int want, int k)
{
    rdzv_desc_rec_t d = {0};
    if (join_domain)
        snprintf(d.domain, sizeof d.domain, "%s", join_domain);
    char val[1024];
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.addr, sizeof d.addr, "10.0.0.%d", i + 1);
    snprintf(d.host, sizeof d.host, "%s", name);
    d.nproc = nproc;
    d.want_rank = want;
    d.pid = 100 + i;
    CHECK(rdzv_desc_encode(&d, val, sizeof val) > 0);
    wr(c, i, "join", k, val);
    if (i < 64)
        hb_on[i] = 1;
}

static void hb(coord_t *c, int i)
{
    wr(c, i, "hb", -1, "1");
}

static void fail(coord_t *c, int i, int round, int rank, double t, const char *reason)
{
    rdzv_failure_t f;
    char val[2048];
    rdzv_failure_init(&f);
    f.rank = rank;
    f.local_rank = 0;
    f.exit_code = 1;
    f.time = t;
    snprintf(f.reason, sizeof f.reason, "%s", reason);
    snprintf(f.message, sizeof f.message, "ValueError: bad\nline two");
    CHECK(rdzv_failure_encode(&f, val, sizeof val) > 0);
    wr(c, i, "fail", round, val);
}

/* A worker's failure whose exit code is one not to retry (--fatal-exit-codes). */
static void fail_fatal(coord_t *c, int i, int round, int rank, double t)
{
    rdzv_failure_t f;
    char val[2048];
    rdzv_failure_init(&f);
    f.rank = rank;
    f.local_rank = 0;
    f.exit_code = 42;
    f.fatal = 1;
    f.time = t;
    snprintf(f.reason, sizeof f.reason, "exit code 42");
    CHECK(rdzv_failure_encode(&f, val, sizeof val) > 0);
    wr(c, i, "fail", round, val);
}

static void conn_close(coord_t *c, int i)
{
    if (i < 64)
        hb_on[i] = 0;
    coord_on_close(c, (uint64_t)(i + 1), NULL, now);
    drain(c);
}

/* The assignment of node i's k-th join; returns 1 if assigned, 0 if not yet, -1 if an error
 * (kind in err). */
static int assigned(int i, int k, rdzv_assignment_t *a, char *err, size_t ecap, char *text,
                    size_t tcap)
{
    char key[128], host[RDZV_NAME_MAX], e[32], t[RDZV_LINE_MAX];
    idkey(key, sizeof key, i, "assign", k);
    const char *v = w_get(key);
    if (!v)
        return 0;
    if (!err) {
        err = e;
        ecap = sizeof e;
    }
    if (!text) {
        text = t;
        tcap = sizeof t;
    }
    CHECK_EQ_INT(rdzv_assign_decode(v, strlen(v), a, host, sizeof host, err, ecap, text, tcap),
                 0);
    return err[0] ? -1 : 1;
}

static int node_rank_of(int i, int k)
{
    rdzv_assignment_t a = {0};
    return assigned(i, k, &a, NULL, 0, NULL, 0) == 1 ? a.node_rank : -1;
}

/* Decodes P r/<round>/end: 1 finished, 0 decision, -1 absent. */
static int end_of(int round, rdzv_decision_t *d, rdzv_failure_t *f)
{
    char key[64];
    snprintf(key, sizeof key, "podrun/job1/r/%d/end", round);
    const char *v = w_get(key);
    if (!v)
        return -1;
    rdzv_decision_t dd;
    rdzv_failure_t ff[RDZV_MAX_FAILURES];
    return rdzv_end_decode(v, strlen(v), d ? d : &dd, f ? f : ff);
}

static int logs_contain(const char *s)
{
    for (int i = 0; i < W.nlogs && i < 64; i++)
        if (strstr(W.logs[i], s))
            return 1;
    return 0;
}

/* Starts a fixed-size job of n nodes named worker-<i>, nproc 1, all joined and assigned. */
static coord_t *running(int n, int restarts)
{
    coord_t *c = mk(n, n, restarts, NULL);
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        join(c, i, name, 1, -1, 0);
    }
    return c;
}

/* ---- tests ---- */

static void test_join_fixed_closes_at_max(void)
{
    coord_t *c = mk(3, 3, 0, NULL);
    join(c, 0, "worker-10", 1, -1, 0);
    join(c, 1, "worker-2", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), -1); /* not yet */
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    join(c, 2, "worker-1", 1, -1, 0);
    /* closed the moment the last one joined, ranks in natural order */
    CHECK_EQ_INT(node_rank_of(2, 0), 0);
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    CHECK_EQ_INT(W.deletes, 1);
    rdzv_assignment_t a = {0};
    assigned(0, 0, &a, NULL, 0, NULL, 0);
    CHECK_EQ_INT(a.nnodes, 3);
    CHECK_EQ_INT(a.world_size, 3);
    CHECK_EQ_INT(a.restart_count, 0);
    CHECK_EQ_INT(a.store_port, 29400);
    CHECK(W.timer[COORD_T_JOIN] < 0 && W.timer[COORD_T_PROGRESS] < 0);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK_EQ_INT(info.members, 3);
    coord_free(c);
}

static void test_last_call_min_max(void)
{
    coord_t *c = mk(2, 4, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    join(c, 1, "b", 1, -1, 0);
    CHECK(W.timer[COORD_T_LAST_CALL] > 1029.9 && W.timer[COORD_T_LAST_CALL] < 1030.1);
    advance(c, 10);
    join(c, 2, "c", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), -1);
    advance(c, 19);
    CHECK_EQ_INT(node_rank_of(0, 0), -1);
    advance(c, 1.5);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    CHECK_EQ_INT(node_rank_of(2, 0), 2);
    rdzv_assignment_t a = {0};
    assigned(1, 0, &a, NULL, 0, NULL, 0);
    CHECK_EQ_INT(a.nnodes, 3);
    coord_free(c);

    /* a joined node dropping out below MIN cancels the last call */
    c = mk(2, 4, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    CHECK(W.timer[COORD_T_LAST_CALL] > 0);
    conn_close(c, 1);
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    coord_free(c);
}

static void test_max_reached_elastic(void)
{
    coord_t *c = mk(2, 3, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    join(c, 2, "c", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(1, 0), 1); /* no last call needed at MAX */
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    coord_free(c);
}

static void test_expected_names_close_early(void)
{
    coord_t *c = mk(2, 8, 0, "n-1, n-2,n-3");
    join(c, 0, "n-3", 1, -1, 0);
    join(c, 1, "n-1", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), -1);
    advance(c, 5); /* progress names the one missing */
    CHECK(logs_contain("2/3 nodes joined (min 2), waiting for n-2"));
    join(c, 2, "n-2", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    coord_free(c);
}

static void test_given_ranks(void)
{
    coord_t *c = mk(3, 3, 0, NULL);
    join(c, 0, "z", 1, 2, 0);
    join(c, 1, "y", 1, 0, 0);
    join(c, 3, "dup", 1, 0, 0); /* rank 0 taken */
    join(c, 4, "far", 1, 7, 0); /* out of range */
    char err[32], text[RDZV_LINE_MAX];
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(3, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "rejected");
    CHECK(strstr(text, "node rank 0") && strstr(text, "already taken by y"));
    CHECK_EQ_INT(assigned(4, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK(strstr(text, "out of range"));
    join(c, 2, "x", 1, 1, 0);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    CHECK_EQ_INT(node_rank_of(1, 0), 0);
    CHECK_EQ_INT(node_rank_of(2, 0), 1);
    coord_free(c);
}

static void test_mixed_nproc(void)
{
    coord_t *c = mk(3, 3, 0, NULL);
    join(c, 0, "n-1", 4, -1, 0);
    join(c, 1, "n-3", 1, -1, 0);
    join(c, 2, "n-2", 2, -1, 0);
    rdzv_assignment_t a[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(assigned(i, 0, &a[i], NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a[0].rank_base, 0);
    CHECK_EQ_INT(a[2].rank_base, 4);
    CHECK_EQ_INT(a[1].rank_base, 6);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(a[i].world_size, 7);
    coord_free(c);
}

static void test_join_timeout_names_missing(void)
{
    coord_t *c = mk(4, 4, 0, NULL);
    join(c, 0, "w0", 1, 0, 0);
    join(c, 1, "w2", 1, 2, 0);
    advance(c, 5);
    CHECK(logs_contain("rendezvous 'job1' round 0: 2/4 nodes joined, waiting for node rank 1, "
                       "node rank 3 (joined so far: w0, w2; 9m59s left)"));
    char st[RDZV_LINE_MAX];
    const char *v = w_get("podrun/job1/status");
    CHECK(v && strstr(v, "2/4 nodes joined"));
    advance(c, 595);
    rdzv_assignment_t a = {0};
    char err[32], text[RDZV_LINE_MAX];
    CHECK_EQ_INT(assigned(0, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "timeout");
    snprintf(st, sizeof st, "%s", text);
    CHECK(strstr(st, "timed out after 10m00s: 2/4 nodes joined, still waiting for node rank 1, "
                      "node rank 3 (joined: w0, w2)"));
    CHECK_EQ_INT(assigned(1, 0, &a, err, sizeof err, text, sizeof text), -1);
    /* a late node hears the same */
    join(c, 2, "w1", 1, 1, 0);
    CHECK_EQ_INT(assigned(2, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "timeout");
    coord_free(c);

    /* without ranks or names: counts */
    c = mk(3, 3, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    advance(c, 5);
    CHECK(logs_contain("1/3 nodes joined, waiting for 2 more nodes (joined so far: a;"));
    coord_free(c);
}

static void test_failure_root_cause(void)
{
    coord_t *c = running(4, 1);
    /* two reports in the same pass of the loop: the earlier failure is the root cause */
    fail(c, 2, 0, 2, 2000.50, "exited with code 1");
    fail(c, 1, 0, 1, 2000.25, "exited with code 7");
    CHECK_EQ_INT(end_of(0, NULL, NULL) , -1); /* decided on the next pass */
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.n, 2);
    CHECK_EQ_STR(f[0].node_name, "worker-1");
    CHECK_EQ_INT(f[0].rank, 1);
    CHECK_EQ_INT(f[0].node_rank, 1);
    CHECK_EQ_STR(f[0].host, "10.0.0.2");
    CHECK_EQ_STR(f[0].message, "ValueError: bad\nline two");
    CHECK_EQ_STR(f[1].node_name, "worker-2");
    CHECK_EQ_STR(d.reason, "rank 1 on worker-1 exited with code 7");
    CHECK_EQ_INT(d.restart_counted, 1);
    CHECK_EQ_INT(d.next_round, 1);
    /* set once: a later report does not change what everyone read */
    char before[4096];
    snprintf(before, sizeof before, "%s", w_get("podrun/job1/r/0/end"));
    fail(c, 3, 0, 3, 1999.0, "exited with code 9");
    CHECK_EQ_STR(w_get("podrun/job1/r/0/end"), before);
    coord_free(c);
}

static void rejoin_all(coord_t *c, int n, int k)
{
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        join(c, i, name, 1, -1, k);
    }
}

/* A failure that no restart can help (the program cannot be started) ends the job with restarts
 * left, and says so in the record every agent reads. */
static void test_permanent_failure_exits(void)
{
    coord_t *c = running(2, 1);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES], g;
    char val[2048];
    rdzv_failure_init(&g);
    g.rank = 1;
    g.exit_code = 127;
    g.time = now;
    g.permanent = 1;
    snprintf(g.reason, sizeof g.reason, "cannot run 'x': No such file or directory");
    CHECK(rdzv_failure_encode(&g, val, sizeof val) > 0);
    wr(c, 1, "fail", 0, val);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.n, 1);
    CHECK_EQ_INT(f[0].permanent, 1);
    coord_free(c);
}

static void test_restart_counting(void)
{
    coord_t *c = running(3, 1);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    fail(c, 0, 0, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.restart_count, 1);
    int deletes = W.deletes;
    /* everyone rejoins: round 1 closes at once, fresh worker namespace, count 1 */
    join(c, 0, "worker-0", 1, -1, 1);
    join(c, 1, "worker-1", 1, -1, 1);
    CHECK_EQ_INT(node_rank_of(0, 1), -1);
    join(c, 2, "worker-2", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(2, 1, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 1);
    CHECK_EQ_INT(a.restart_count, 1);
    CHECK_EQ_INT(a.node_rank, 2); /* stable across restarts */
    CHECK_EQ_INT(W.deletes, deletes + 1);
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);
    /* second failure: restarts used up → exit */
    fail(c, 1, 1, 1, now, "exited with code 2");
    run_timers(c);
    CHECK_EQ_INT(end_of(1, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.restart_counted, 0);
    /* nobody can join an ended job */
    join(c, 5, "late", 1, -1, 0);
    char err[32];
    CHECK_EQ_INT(assigned(5, 0, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "ended");
    coord_free(c);
}

/* An exit code not to retry ends the job with restarts left, and uses none of them; the record
 * every agent reads says so, so each agent exits with the same code. */
static void test_fatal_failure_exits_without_restart(void)
{
    coord_t *c = running(3, 5);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    fail(c, 0, 0, 0, now, "exit code 1");          /* an ordinary failure first... */
    fail_fatal(c, 2, 0, 2, now + 0.5);               /* ...and a fatal one in the same pass */
    run_timers(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.restart_counted, 0);
    CHECK_EQ_INT(d.restart_count, 0);
    CHECK_EQ_INT(d.n, 2);
    CHECK(!f[0].fatal && f[1].fatal);
    CHECK_EQ_INT(f[1].exit_code, 42);
    coord_free(c);
}

static void test_membership_change_not_counted(void)
{
    coord_t *c = mk(2, 4, 0, NULL);
    rejoin_all(c, 3, 0);
    advance(c, 30);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    /* a node leaves (SIGTERM): restart, not counted, even with max_restarts 0 */
    wr(c, 2, "leave", -1, "SIGTERM");
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.restart_counted, 0);
    CHECK_EQ_INT(d.restart_count, 0);
    CHECK_EQ_STR(f[0].reason, "agent left: SIGTERM");
    /* the two survivors rejoin: round 1 closes without a last call */
    rejoin_all(c, 2, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(1, 1, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.nnodes, 2);
    CHECK_EQ_INT(a.restart_count, 0);
    /* a new node joins the running elastic job: restart for it, not counted */
    join(c, 3, "worker-3", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(1, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.n, 0);
    CHECK(strstr(d.reason, "worker-3 joined"));
    rejoin_all(c, 2, 2);
    CHECK_EQ_INT(assigned(3, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 2);
    CHECK_EQ_INT(a.nnodes, 3);
    CHECK_EQ_INT(a.node_rank, 2);
    coord_free(c);
}

static void join_in(coord_t *c, int i, const char *domain, const char *name)
{
    join_domain = domain;
    join(c, i, name, 1, -1, 0);
    join_domain = NULL;
}

/* --segment-size 2, 4 nodes: 3 of domain A, 2 of B, 1 of C. Two of A and both of B run, with
 * the nodes of each domain on contiguous node ranks; the third of A waits as a spare; C, too
 * small for a segment, is named and left out. */
static void test_segments_fixed(void)
{
    mk_segment = 2;
    coord_t *c = mk(4, 4, 0, NULL);
    mk_segment = 0;
    join_in(c, 0, "B/1", "n-1");
    join_in(c, 1, "A/1", "n-2");
    join_in(c, 2, "C/1", "n-3");
    join_in(c, 3, "A/1", "n-4");
    join_in(c, 4, "A/1", "n-5");
    CHECK_EQ_INT(node_rank_of(1, 0), -1); /* 5 joined, but only 2 in whole segments */
    join_in(c, 5, "B/1", "n-6");
    CHECK_EQ_INT(node_rank_of(1, 0), 0);
    CHECK_EQ_INT(node_rank_of(3, 0), 1);
    CHECK_EQ_INT(node_rank_of(0, 0), 2);
    CHECK_EQ_INT(node_rank_of(5, 0), 3);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(4, 0, &a, NULL, 0, NULL, 0), 0);   /* n-5: a spare, no answer */
    CHECK_EQ_INT(assigned(2, 0, &a, NULL, 0, NULL, 0), 0);
    CHECK(logs_contain("n-5 waits as a spare"));
    CHECK(logs_contain("NVLink domain C/1 has 1 node, fewer than --segment-size 2: left out"));
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.members, 4);
    CHECK_EQ_INT(info.waiting, 2);
    coord_free(c);
}

/* Elastic 2:4 with segments of 2: the round closes with one segment; a single node of another
 * domain does not restart it, the second one does (a new whole segment). */
static void test_segments_elastic_restart(void)
{
    mk_segment = 2;
    coord_t *c = mk(2, 4, 0, NULL);
    mk_segment = 0;
    join_in(c, 0, "A/1", "a-1");
    CHECK(W.timer[COORD_T_LAST_CALL] < 0);   /* one node is no segment: no last call yet */
    join_in(c, 1, "A/1", "a-2");
    CHECK(W.timer[COORD_T_LAST_CALL] > 0);
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    join_in(c, 2, "B/1", "b-1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    join_in(c, 3, "B/1", "b-2");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);   /* membership change: round 1 takes both */
    coord_free(c);
}

/* A restart keeps the nodes that ran: a spare that sorts first does not push a survivor out. */
static void test_segments_restart_keeps_survivors(void)
{
    mk_segment = 2;
    coord_t *c = mk(2, 2, 2, NULL);
    mk_segment = 0;
    join_in(c, 0, "A/1", "a-2");
    join_in(c, 1, "A/1", "a-3");
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    join_in(c, 2, "A/1", "a-1");   /* a spare */
    fail(c, 0, 0, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    join_domain = "A/1";
    join(c, 0, "a-2", 1, -1, 1);
    CHECK_EQ_INT(node_rank_of(0, 1), -1);   /* full, but a-3 is expected back: it waits */
    CHECK(W.timer[COORD_T_LAST_CALL] > 0);
    join(c, 1, "a-3", 1, -1, 1);
    join_domain = NULL;
    CHECK_EQ_INT(node_rank_of(0, 1), 0);
    CHECK_EQ_INT(node_rank_of(1, 1), 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(2, 0, &a, NULL, 0, NULL, 0), 0);
    /* a member that is gone is not waited for: the spare takes its place at once */
    fail(c, 1, 1, 1, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(1, NULL, NULL), 0);
    conn_close(c, 1);
    join_domain = "A/1";
    join(c, 0, "a-2", 1, -1, 2);
    join_domain = NULL;
    CHECK_EQ_INT(node_rank_of(2, 0), 0);
    CHECK_EQ_INT(node_rank_of(0, 2), 1);
    coord_free(c);
}

static void test_full_job_waits(void)
{
    coord_t *c = running(2, 1);
    join(c, 5, "spare", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1); /* full: no restart for it */
    CHECK(logs_contain("spare waits for the next round"));
    conn_close(c, 1); /* a node dies: restart, the spare takes its place */
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_STR(f[0].reason, "agent lost: connection closed");
    CHECK_EQ_INT(d.restart_counted, 1);
    join(c, 0, "worker-0", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(5, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.nnodes, 2);
    coord_free(c);
}

/* A node whose connection stays open but says nothing is slow, not lost, for the hang bound
 * (10 windows: 30 s at 1 s x 3); then it is hung. A cut network or a dead machine closes the
 * connection after one window (the kernel's part: test_conn_timed_out). */
static void test_heartbeat_loss(void)
{
    coord_t *c = running(3, 0);
    auto_hb = 0;
    /* node 2 quiet for 10 s (a busy or stopped agent), then back: nothing happens */
    for (int s = 0; s < 10; s++) {
        hb(c, 0);
        hb(c, 1);
        advance(c, 1);
    }
    hb(c, 2);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    for (int s = 0; s < 30; s++) {
        hb(c, 0);
        hb(c, 1);
        advance(c, 1);
    }
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    hb(c, 0);
    hb(c, 1);
    advance(c, 1); /* node 2 silent for 31 s now */
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_STR(f[0].node_name, "worker-2");
    CHECK_EQ_STR(f[0].reason, "node silent for 30 s");
    coord_free(c);

    /* a node waiting for its round to close is held to the same bound */
    c = mk(3, 3, 0, NULL);
    auto_hb = 0;
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    for (int s = 0; s < 31; s++) {
        hb(c, 0);
        advance(c, 1);
    }
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.joined, 1);
    rdzv_assignment_t a = {0};
    char err[32], text[256];
    CHECK_EQ_INT(assigned(1, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(text, "node silent for 30 s");
    coord_free(c);

    /* a stalled loop (sweep 40 s late) is not everyone's silence */
    c = running(2, 0);
    now += 40;
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    coord_free(c);
}

/* The kernel gave up on a node's connection (nothing acknowledged for a window): it is lost at
 * once, with that reason. */
static void test_conn_timed_out(void)
{
    coord_t *c = running(3, 0);
    coord_on_close(c, 3, "unreachable, nothing acknowledged for 3 s", now);
    drain(c);
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_STR(f[0].node_name, "worker-2");
    CHECK_EQ_STR(f[0].reason, "agent lost: unreachable, nothing acknowledged for 3 s");
    coord_free(c);
}

/* Node i's health check in the state `podrun status` is shown. */
static rdzv_health_t health_of(coord_t *c, int i)
{
    rdzv_status_t st;
    rdzv_status_node_t nodes[8];
    char want[32];
    snprintf(want, sizeof want, "10.0.0.%d", i + 1);
    coord_state(c, now, &st, nodes, 8);
    for (int k = 0; k < st.n_nodes; k++)
        if (strcmp(nodes[k].addr, want) == 0)
            return nodes[k].health;
    return (rdzv_health_t){0};
}

/* A node's health record is kept for `podrun status` (its check placed on this clock by its
 * age), a heartbeat's age moves the time of the last check, a failed check's finding is kept
 * until the next record, and none of it stops the round. */
static void test_health_for_status(void)
{
    coord_t *c = running(2, 0);
    char val[512];
    rdzv_health_t h = {RDZV_HEALTH_OK, 5, 100.0, ""};
    CHECK(rdzv_health_encode(&h, 100.5, val, sizeof val) > 0);
    wr(c, 0, "health", -1, val);
    rdzv_health_t g = health_of(c, 0);
    CHECK_EQ_INT(g.state, RDZV_HEALTH_OK);
    CHECK(g.interval == 5 && g.checked == now - 0.5);
    CHECK_EQ_INT(health_of(c, 1).state, RDZV_HEALTH_NONE);
    advance(c, 1);
    wr(c, 0, "hb", -1, "ago=0.25\n");
    CHECK(health_of(c, 0).checked == now - 0.25);
    wr(c, 0, "hb", -1, "");   /* a heartbeat without a check leaves the time */
    CHECK(health_of(c, 0).checked == now - 0.25);
    wr(c, 1, "hb", -1, "ago=0.1\n");   /* no state reported yet: nothing to move */
    CHECK_EQ_INT(health_of(c, 1).state, RDZV_HEALTH_NONE);
    h = (rdzv_health_t){RDZV_HEALTH_FAILED, 5, 200.0, "GPU 3 (GPU-1...): Xid 79, fallen off"};
    CHECK(rdzv_health_encode(&h, 200.0, val, sizeof val) > 0);
    wr(c, 1, "health", -1, val);
    g = health_of(c, 1);
    CHECK_EQ_INT(g.state, RDZV_HEALTH_FAILED);
    CHECK_EQ_STR(g.why, "GPU 3 (GPU-1...): Xid 79, fallen off");
    CHECK(end_of(0, NULL, NULL) < 0);   /* a record, not a failure: the round runs on */
    h = (rdzv_health_t){RDZV_HEALTH_OFF, 0, 0, ""};
    CHECK(rdzv_health_encode(&h, 200.0, val, sizeof val) > 0);
    wr(c, 1, "health", -1, val);
    g = health_of(c, 1);
    CHECK(g.state == RDZV_HEALTH_OFF && g.why[0] == '\0' && g.checked == 0);
    coord_free(c);
}

static void test_conn_closed_without_done(void)
{
    coord_t *c = running(3, 0);
    wr(c, 0, "done", 0, "1");
    conn_close(c, 0); /* done, then gone: no failure */
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    conn_close(c, 1); /* not done: the job stops at once */
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_STR(f[0].reason, "agent lost: connection closed");
    CHECK_EQ_STR(f[0].node_name, "worker-1");
    CHECK_EQ_INT(f[0].node_rank, 1);
    CHECK_EQ_INT(f[0].rank, -1);
    coord_free(c);
}

static void peer(coord_t *c, int i, int round, const char *name, const char *addr)
{
    char val[512];
    kvbuf_t b;
    kv_init(&b, val, sizeof val);
    kv_add(&b, "name", name, 0);
    kv_add(&b, "addr", addr, 0);
    kv_add(&b, "reason", "pod deleted", 0);
    wr(c, i, "peer", round, val);
}

/* A member's report that another node's pod is gone stops the round as that node's closed
 * connection would, at once; reports about non-members, about a node already done, for another
 * round, or from a node outside the round change nothing. */
static void test_peer_reported_lost(void)
{
    coord_t *c = running(4, 0);
    join(c, 7, "spare", 1, -1, 0);                 /* waits: not a member */
    peer(c, 0, 1, "worker-2", "");                 /* another round */
    peer(c, 0, 0, "nobody", "10.9.9.9");           /* no such member */
    peer(c, 7, 0, "worker-2", "");                 /* the reporter is not a member */
    peer(c, 0, 0, "worker-0", "");                 /* itself */
    wr(c, 3, "done", 0, "1");
    peer(c, 0, 0, "worker-3", "");                 /* done already */
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    peer(c, 1, 0, "", "10.0.0.3");                 /* worker-2 by its address */
    peer(c, 0, 0, "worker-2", "10.0.0.3");         /* the same, seen by another: one record */
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_INT(d.n, 1);
    CHECK_EQ_STR(f[0].node_name, "worker-2");
    CHECK_EQ_INT(f[0].node_rank, 2);
    CHECK_EQ_INT(f[0].rank, -1);
    CHECK_EQ_STR(f[0].reason, "agent lost: pod deleted (seen by worker-1)");
    /* its real close later is no second failure */
    conn_close(c, 2);
    CHECK_EQ_INT(end_of(1, NULL, NULL), -1);
    coord_free(c);
}

static void test_all_done_finished(void)
{
    coord_t *c = running(3, 0);
    join(c, 7, "spare", 1, -1, 0);
    wr(c, 0, "done", 0, "1");
    wr(c, 1, "done", 0, "1");
    wr(c, 1, "done", 0, "1"); /* a repeat counts once */
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    wr(c, 2, "done", 0, "1");
    rdzv_decision_t d = {0};
    CHECK_EQ_INT(end_of(0, &d, NULL), 1);
    rdzv_assignment_t a = {0};
    char err[32];
    CHECK_EQ_INT(assigned(7, 0, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "finished");
    coord_info_t info;
    coord_info(c, &info);
    CHECK(info.finished);
    coord_free(c);
}

/* Service nodes (parameter servers): the job has finished once every other member is done; a
 * service node's own "done" neither counts nor is needed, but a service node lost before the end
 * stops the round like any member. */
static void test_service_nodes_not_waited_for(void)
{
    coord_t *c = mk(4, 4, 0, NULL);
    for (int i = 0; i < 4; i++) {
        rdzv_desc_rec_t d = {0};
        char val[1024], name[32];
        snprintf(name, sizeof name, "%s-%d", i < 2 ? "pserver" : "trainer", i);
        snprintf(d.name, sizeof d.name, "%s", name);
        snprintf(d.addr, sizeof d.addr, "10.0.0.%d", i + 1);
        snprintf(d.host, sizeof d.host, "%s", name);
        d.nproc = 1;
        d.want_rank = -1;
        d.service = i < 2;
        CHECK(rdzv_desc_encode(&d, val, sizeof val) > 0);
        CHECK((strstr(val, "service=1") != NULL) == (i < 2));
        wr(c, i, "join", 0, val);
        hb_on[i] = 1;
    }
    wr(c, 2, "done", 0, "1");
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    wr(c, 0, "done", 0, "1");                 /* a service's done: not what the job waits for */
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    wr(c, 3, "done", 0, "1");
    rdzv_decision_t d = {0};
    CHECK_EQ_INT(end_of(0, &d, NULL), 1);     /* finished with pserver-1 still running */
    CHECK(logs_contain("2 service nodes to stop"));
    coord_free(c);
    /* a service node lost while the trainers run is the job's failure */
    c = mk(2, 2, 0, NULL);
    for (int i = 0; i < 2; i++) {
        rdzv_desc_rec_t dd = {0};
        char val[1024];
        snprintf(dd.name, sizeof dd.name, "n%d", i);
        snprintf(dd.addr, sizeof dd.addr, "10.0.1.%d", i + 1);
        dd.nproc = 1;
        dd.want_rank = -1;
        dd.service = i == 0;
        CHECK(rdzv_desc_encode(&dd, val, sizeof val) > 0);
        wr(c, i, "join", 0, val);
        hb_on[i] = 1;
    }
    conn_close(c, 0);
    run_timers(c);
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    coord_free(c);
}

static void test_shutdown_waits_for_agents(void)
{
    coord_t *c = running(3, 0);
    for (int i = 0; i < 3; i++)
        wr(c, i, "done", 0, "1");
    coord_shutdown(c, now);
    drain(c);
    CHECK_EQ_INT(W.closed, 0);
    conn_close(c, 0);
    conn_close(c, 1);
    CHECK_EQ_INT(W.closed, 0);
    conn_close(c, 2);
    CHECK_EQ_INT(W.closed, 1);
    coord_free(c);

    /* closing with a round open: the joined hear it at once */
    c = mk(3, 3, 0, NULL);
    join(c, 0, "a", 1, -1, 0);
    coord_shutdown(c, now);
    drain(c);
    rdzv_assignment_t a = {0};
    char err[32], text[256];
    CHECK_EQ_INT(assigned(0, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "ended");
    CHECK(strstr(text, "shutting down") != NULL);
    coord_free(c);

    /* closing with a decision pending: it is made now */
    c = running(2, 0);
    fail(c, 1, 0, 1, now, "exited with code 1");
    coord_shutdown(c, now);
    drain(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    coord_free(c);

    /* bounded by close_timeout */
    c = running(2, 0);
    coord_shutdown(c, now);
    drain(c);
    advance(c, 29);
    CHECK_EQ_INT(W.closed, 0);
    advance(c, 2);
    CHECK_EQ_INT(W.closed, 1);
    CHECK(logs_contain("still connected: worker-0, worker-1"));
    coord_free(c);
}

/* A node dropped as silent that comes back is watched again: its closed connection stops the
 * round instead of leaving the job waiting for it forever. */
static void test_silent_node_rejoins(void)
{
    coord_t *c = running(2, 3);
    auto_hb = 0;
    for (int s = 0; s < 31; s++) {
        hb(c, 0);
        advance(c, 1);
    }
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    auto_hb = 1;
    rejoin_all(c, 2, 1);
    CHECK_EQ_INT(node_rank_of(1, 1), 1);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.connected, 2);
    wr(c, 0, "done", 1, "1");
    conn_close(c, 1);
    run_timers(c);
    CHECK_EQ_INT(end_of(1, &d, f), 0);
    CHECK_EQ_STR(f[0].reason, "agent lost: connection closed");
    CHECK_EQ_STR(f[0].node_name, "worker-1");
    coord_free(c);
}

/* Nodes that waited while the job was full fill the next round only up to MAX. */
static void test_waiting_nodes_capped_at_max(void)
{
    coord_t *c = mk(1, 2, 3, NULL);
    join(c, 0, "a", 1, -1, 0);
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(0, 0), 0);
    join(c, 1, "b", 1, -1, 0);
    join(c, 2, "c", 1, -1, 0);
    join(c, 3, "d", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    rdzv_assignment_t a = {0};
    int n = 0;
    for (int i = 1; i <= 3; i++)
        if (assigned(i, 0, &a, NULL, 0, NULL, 0) == 1) {
            CHECK_EQ_INT(a.round, 1);
            CHECK_EQ_INT(a.nnodes, 2);
            n++;
        }
    CHECK_EQ_INT(n, 2);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK_EQ_INT(info.members, 2);
    CHECK_EQ_INT(info.waiting, 1);
    coord_free(c);
}

/* A node that sat out a round (still stopped from an earlier one) is expected like any other:
 * its own rejoin does not close an elastic round before the rest are back. */
static void test_stopped_node_expected_again(void)
{
    coord_t *c = mk(1, 3, 5, NULL);
    join(c, 0, "a", 1, -1, 0);
    join(c, 1, "b", 1, -1, 0);
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    fail(c, 0, 0, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    join(c, 0, "a", 1, -1, 1); /* b keeps its heartbeat but sits round 1 out */
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(0, 1), 0);
    fail(c, 0, 1, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(1, NULL, NULL), 0);
    join(c, 1, "b", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(1, 1, &a, NULL, 0, NULL, 0), 0); /* a is expected back */
    join(c, 0, "a", 1, -1, 2);
    CHECK_EQ_INT(assigned(1, 1, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 2);
    CHECK_EQ_INT(a.nnodes, 2);
    coord_free(c);
}

/* Once the store host shuts down no round can come: a running round ends with an exit
 * decision, and later leaves or closes open nothing. */
static void test_shutdown_ends_running_round(void)
{
    coord_t *c = running(2, 3);
    coord_shutdown(c, now);
    drain(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK(strstr(d.reason, "shutting down") != NULL);
    wr(c, 0, "leave", -1, "SIGTERM");
    conn_close(c, 1);
    run_timers(c);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_OVER);
    CHECK(W.timer[COORD_T_JOIN] < 0 && W.timer[COORD_T_PROGRESS] < 0);
    CHECK_EQ_INT(end_of(1, NULL, NULL), -1);
    coord_free(c);

    /* a stop seen before the shutdown still ends the job, never in a restart */
    c = running(2, 3);
    conn_close(c, 1);
    coord_shutdown(c, now);
    drain(c);
    CHECK_EQ_INT(end_of(0, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_EXIT);
    CHECK_EQ_STR(f[0].reason, "agent lost: connection closed");
    join(c, 0, "worker-0", 1, -1, 1);
    rdzv_assignment_t a = {0};
    char err[32];
    CHECK_EQ_INT(assigned(0, 1, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "ended");
    coord_free(c);
}

static void test_bad_input_ignored(void)
{
    coord_t *c = mk(2, 2, 0, NULL);
    const char *keys[] = {"podrun/job1/n/zz/join/0", "podrun/job1/n/0000000000000001",
                          "podrun/job1/n/0000000000000001/join/x", "podrun/other/n/1/join/0",
                          "podrun/job1/n/0000000000000000/join/0"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        coord_on_write(c, 9, keys[i], strlen(keys[i]), "name=a\n", 7, now);
        drain(c);
    }
    /* an unreadable descriptor is answered, not crashed on */
    wr(c, 0, "join", 0, "garbage");
    rdzv_assignment_t a = {0};
    char err[32];
    CHECK_EQ_INT(assigned(0, 0, &a, err, sizeof err, NULL, 0), -1);
    CHECK_EQ_STR(err, "rejected");
    /* someone else's id on another connection is ignored */
    char key[128];
    idkey(key, sizeof key, 0, "leave", -1);
    coord_on_write(c, 77, key, strlen(key), "x", 1, now);
    drain(c);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.joined, 0);
    coord_free(c);
}

/* A coordinator resumed where another left the job (the etcd backend's takeover): in a running
 * round, a member whose agent is gone stops the round, counted against the restarts already
 * used; the next round expects the survivors back and keeps their ranks. Resumed open, the last
 * round's members are expected; resumed over, a late joiner gets the job's last word. */
static void member(coord_member_t *m, char *ids, int i, const char *name, int rank)
{
    snprintf(ids, 17, "%016x", i + 1);
    memset(m, 0, sizeof *m);
    m->id = ids;
    snprintf(m->d.name, sizeof m->d.name, "%s", name);
    snprintf(m->d.addr, sizeof m->d.addr, "10.0.0.%d", i + 1);
    m->d.nproc = 1;
    m->d.want_rank = -1;
    m->node_rank = rank;
}

static void test_resume(void)
{
    coord_member_t m[3];
    char ids[3][17], name[32];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        member(&m[i], ids[i], i, name, i);
    }
    /* running round 4, 1 of 2 restarts used; worker-0 (the old coordinator) is gone */
    coord_t *c = mk(3, 3, 2, NULL);
    coord_resume_t rs = {4, COORD_RUNNING, 1, m, 3, NULL, NULL};
    CHECK_EQ_INT(coord_resume(c, &rs, now), 0);
    drain(c);
    CHECK(W.timer[COORD_T_JOIN] < 0);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.round, 4);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK_EQ_INT(info.members, 3);
    conn_close(c, 0);
    run_timers(c);
    rdzv_decision_t d = {0};
    rdzv_failure_t f[RDZV_MAX_FAILURES] = {0};
    CHECK_EQ_INT(end_of(4, &d, f), 0);
    CHECK_EQ_INT(d.action, RDZV_RESTART);
    CHECK_EQ_INT(d.restart_count, 2);
    CHECK_EQ_STR(f[0].node_name, "worker-0");
    CHECK_EQ_INT(f[0].node_rank, 0);
    /* round 5 expects worker-1 and worker-2 back (MIN 3 still needs a third node) */
    join(c, 1, "worker-1", 1, -1, 5);
    join(c, 2, "worker-2", 1, -1, 5);
    CHECK_EQ_INT(node_rank_of(1, 5), -1);
    advance(c, 1.5);
    CHECK(logs_contain("round 5: 2/3 nodes joined, waiting for 1 more node"));
    join(c, 5, "spare", 1, -1, 0);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(5, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 5);
    CHECK_EQ_INT(a.restart_count, 2);
    coord_free(c);

    /* resumed open (round 2 after a decision): the last round's members are expected back,
     * and a member that is gone is expected no longer */
    c = mk(2, 3, 1, NULL);
    coord_resume_t ro = {2, COORD_OPEN, 1, m, 3, NULL, NULL};
    CHECK_EQ_INT(coord_resume(c, &ro, now), 0);
    drain(c);
    CHECK(W.timer[COORD_T_JOIN] > now);
    join(c, 1, "worker-1", 1, -1, 3);
    join(c, 2, "worker-2", 1, -1, 3);
    CHECK_EQ_INT(node_rank_of(1, 3), -1); /* worker-0 is still expected */
    conn_close(c, 0);
    CHECK_EQ_INT(node_rank_of(1, 3), 0);
    CHECK_EQ_INT(node_rank_of(2, 3), 1);
    CHECK_EQ_INT(assigned(2, 3, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 2);
    CHECK_EQ_INT(a.restart_count, 1);
    coord_free(c);

    /* resumed over: a late joiner is told what the job's end was */
    c = mk(1, 3, 0, NULL);
    coord_resume_t ov = {3, COORD_OVER, 0, NULL, 0, "finished", "job 'job1' finished"};
    CHECK_EQ_INT(coord_resume(c, &ov, now), 0);
    drain(c);
    join(c, 7, "late", 1, -1, 0);
    char err[32], text[RDZV_LINE_MAX];
    CHECK_EQ_INT(assigned(7, 0, &a, err, sizeof err, text, sizeof text), -1);
    CHECK_EQ_STR(err, "finished");
    CHECK_EQ_STR(text, "job 'job1' finished");
    coord_info(c, &info);
    CHECK_EQ_STR(info.over_kind, "finished");
    /* only before any input, and with ids that are ids */
    CHECK_EQ_INT(coord_resume(c, &ov, now), -EINVAL);
    coord_free(c);
    c = mk(1, 3, 0, NULL);
    char bad[] = "xyz";
    coord_member_t mb = m[0];
    mb.id = bad;
    coord_resume_t rb = {1, COORD_RUNNING, 0, &mb, 1, NULL, NULL};
    CHECK_EQ_INT(coord_resume(c, &rb, now), -EINVAL);
    coord_free(c);
}

static int keys_with(const char *part)
{
    int n = 0;
    for (int i = 0; i < W.n; i++)
        n += strstr(W.key[i], part) != NULL;
    return n;
}

/* Hundreds of counted restarts: the store keeps each node's latest answer and the last
 * RDZV_KEEP_ROUNDS end records, nothing that grows with the rounds. */
static void test_keys_bounded_across_restarts(void)
{
    coord_t *c = running(4, 1000);
    int rounds = 300;
    for (int r = 0; r < rounds; r++) {
        fail(c, r % 4, r, r % 4, now, "exited with code 1");
        run_timers(c);
        CHECK_EQ_INT(end_of(r, NULL, NULL), 0);
        rejoin_all(c, 4, r + 1);
        CHECK_EQ_INT(node_rank_of(3, r + 1), 3);
    }
    CHECK_EQ_INT(keys_with("/assign/"), 4);
    CHECK_EQ_INT(keys_with("/end"), RDZV_KEEP_ROUNDS);
    for (int r = rounds - RDZV_KEEP_ROUNDS; r < rounds; r++)
        CHECK_EQ_INT(end_of(r, NULL, NULL), 0);
    CHECK_EQ_INT(end_of(rounds - RDZV_KEEP_ROUNDS - 1, NULL, NULL), -1);
    CHECK(W.n <= 4 + RDZV_KEEP_ROUNDS + 1); /* + the status line */
    /* a node whose connection closed has no answer left in the store */
    conn_close(c, 2);
    CHECK_EQ_INT(keys_with("/assign/"), 3);
    coord_free(c);
}

/* Agents coming and going: nodes that joined an elastic job and left, and spares that waited
 * for room in a full job and went away, are forgotten, and leave no key behind. */
static void test_nodes_forgotten_when_gone(void)
{
    coord_info_t info;
    coord_t *c = mk(2, 3, 0, NULL);
    rejoin_all(c, 2, 0);
    advance(c, 31);
    CHECK_EQ_INT(node_rank_of(1, 0), 1);
    int k = 1;
    for (int j = 0; j < 400; j++, k++) {
        int spot = 100 + j; /* a new agent every time, as a spot node coming back would be */
        join(c, spot, "worker-9", 1, -1, 0);
        run_timers(c);
        rejoin_all(c, 2, k);
        CHECK_EQ_INT(node_rank_of(spot, 0), 2);
        conn_close(c, spot);
        run_timers(c);
        rejoin_all(c, 2, ++k);
        CHECK_EQ_INT(node_rank_of(1, k), 1);
    }
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK(info.nodes <= 2 + 2 * 16 + 2);
    CHECK_EQ_INT(keys_with("/assign/"), 2);
    coord_free(c);

    /* a full job: spares wait and go, the running round never notices */
    c = running(2, 0);
    for (int j = 0; j < 400; j++) {
        join(c, 100 + j, "spare", 1, -1, 0);
        conn_close(c, 100 + j);
    }
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    coord_info(c, &info);
    CHECK(info.nodes <= 2 + 2 * 16 + 2);
    CHECK_EQ_INT(keys_with("/assign/"), 2);
    /* the members still fail and restart as before */
    fail(c, 0, 0, 0, now, "exited with code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    coord_free(c);
}

/* Thousands of joins in-process, in two different orders: the same node ranks either way, and
 * the coordinator's writes per round are O(K) (one assignment per node plus a constant), so a
 * failure round costs one answer per node, not one per node per event. */
static void big_round(int k, unsigned seed, int *rank_of)
{
    coord_t *c = mk(k, k, 5, NULL);
    int *order = malloc((size_t)k * sizeof *order);
    for (int i = 0; i < k; i++)
        order[i] = i;
    srand(seed);
    for (int i = k - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    char name[32];
    long sets0 = W.sets;
    for (int i = 0; i < k; i++) {
        snprintf(name, sizeof name, "node-%d", order[i]);
        join(c, order[i], name, 1, -1, 0);
    }
    CHECK(W.sets - sets0 <= k + 4);
    for (int i = 0; i < k; i++)
        rank_of[i] = node_rank_of(i, 0);
    /* a failure round: the decision, every node's next assignment, nothing per node per event */
    sets0 = W.sets;
    fail(c, order[0], 0, 0, now, "exited with code 1");
    run_timers(c);
    for (int i = 0; i < k; i++) {
        snprintf(name, sizeof name, "node-%d", order[k - 1 - i]);
        join(c, order[k - 1 - i], name, 1, -1, 1);
    }
    CHECK_EQ_INT(node_rank_of(order[0], 1), rank_of[order[0]]);
    CHECK(W.sets - sets0 <= k + 6);
    free(order);
    coord_free(c);
}

static void test_thousands_of_joins(void)
{
    int k = 2000;
    int *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * sizeof *b);
    big_round(k, 1, a);
    big_round(k, 2, b);
    char seen[2000] = {0};
    for (int i = 0; i < k; i++) {
        CHECK_EQ_INT(a[i], b[i]);
        CHECK(a[i] >= 0 && a[i] < k && !seen[a[i]]);
        if (a[i] >= 0 && a[i] < k)
            seen[a[i]] = 1;
    }
    CHECK_EQ_INT(a[10], 10); /* natural order: node-9 before node-10, not node-10 after node-1 */
    CHECK_EQ_INT(a[1999], 1999);
    free(a);
    free(b);
}

/* A spare waits without touching the running round, takes the place of the first node lost;
 * the second loss finds no spare and the round waits for a node until one comes. */
static void test_two_failures_one_spare(void)
{
    coord_t *c = running(3, 2);
    join(c, 5, "worker-5", 1, -1, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), -1);
    conn_close(c, 0);
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    join(c, 1, "worker-1", 1, -1, 1);
    join(c, 2, "worker-2", 1, -1, 1);
    rdzv_assignment_t a = {0};
    CHECK_EQ_INT(assigned(5, 0, &a, NULL, 0, NULL, 0), 1);
    CHECK_EQ_INT(a.round, 1);
    CHECK_EQ_INT(a.nnodes, 3);
    CHECK_EQ_INT(node_rank_of(5, 0), 2);
    conn_close(c, 1);
    run_timers(c);
    CHECK_EQ_INT(end_of(1, NULL, NULL), 0);
    join(c, 2, "worker-2", 1, -1, 2);
    join(c, 5, "worker-5", 1, -1, 1);
    CHECK_EQ_INT(node_rank_of(2, 2), -1); /* 2 of 3: no spare left, the round waits */
    join(c, 6, "worker-6", 1, -1, 0);
    CHECK_EQ_INT(node_rank_of(2, 2), 0);
    CHECK_EQ_INT(node_rank_of(6, 0), 2);
    coord_free(c);
}

/* The state `podrun status` shows: members in node-rank order with contiguous rank ranges, the
 * restarts used, and the last stop's root cause once there was one. */
static void test_state_for_status(void)
{
    coord_t *c = mk(3, 3, 2, NULL);
    join(c, 0, "worker-c", 2, -1, 0);
    rdzv_status_t st;
    rdzv_status_node_t nodes[8];
    CHECK_EQ_INT(coord_state(c, now, &st, nodes, 8), 0);
    CHECK_EQ_INT(st.phase, RDZV_JOB_OPEN);
    CHECK_EQ_INT(st.n_nodes, 1);
    CHECK_EQ_INT(st.nodes[0].phase, RDZV_NODE_JOINED);
    CHECK_EQ_INT(st.nodes[0].node_rank, -1);
    CHECK_EQ_INT(st.failure_round, -1);
    join(c, 1, "worker-a", 1, -1, 0);
    join(c, 2, "worker-b", 3, -1, 0);
    CHECK_EQ_INT(coord_state(c, now, &st, nodes, 8), 0);
    CHECK_EQ_STR(st.run_id, "job1");
    CHECK_EQ_INT(st.phase, RDZV_JOB_RUNNING);
    CHECK_EQ_INT(st.world_size, 6);
    CHECK_EQ_INT(st.n_nodes, 3);
    CHECK_EQ_INT(st.n_total, 3);
    CHECK_EQ_INT(st.max_restarts, 2);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(st.nodes[i].node_rank, i);
        CHECK_EQ_INT(st.nodes[i].phase, RDZV_NODE_MEMBER);
    }
    /* natural name order: a, b, c, with the ranks each node's workers hold */
    CHECK_EQ_STR(st.nodes[0].name, "worker-a");
    CHECK_EQ_STR(st.nodes[0].addr, "10.0.0.2");
    CHECK_EQ_INT(st.nodes[0].rank_base, 0);
    CHECK_EQ_INT(st.nodes[1].rank_base, 1);
    CHECK_EQ_INT(st.nodes[1].nproc, 3);
    CHECK_EQ_INT(st.nodes[2].rank_base, 4);
    /* only 2 asked for: the third is counted, not listed */
    CHECK_EQ_INT(coord_state(c, now, &st, nodes, 2), 0);
    CHECK_EQ_INT(st.n_nodes, 2);
    CHECK_EQ_INT(st.n_total, 3);
    /* a failure: the job restarts, the state names the root cause and the restart used */
    fail(c, 2, 0, 4, now, "exited with code 3");
    run_timers(c);
    CHECK_EQ_INT(coord_state(c, now, &st, nodes, 8), 0);
    CHECK_EQ_INT(st.restarts_used, 1);
    CHECK_EQ_INT(st.failure_round, 0);
    CHECK_EQ_INT(st.failure_action, RDZV_RESTART);
    CHECK_EQ_INT(st.failure.rank, 4);
    CHECK_EQ_STR(st.failure.node_name, "worker-b");
    CHECK_EQ_STR(st.failure.reason, "exited with code 3");
    CHECK(st.phase != RDZV_JOB_RUNNING);
    coord_free(c);
}

int main(void)
{
    RUN(test_join_fixed_closes_at_max);
    RUN(test_permanent_failure_exits);
    RUN(test_last_call_min_max);
    RUN(test_max_reached_elastic);
    RUN(test_expected_names_close_early);
    RUN(test_given_ranks);
    RUN(test_mixed_nproc);
    RUN(test_join_timeout_names_missing);
    RUN(test_failure_root_cause);
    RUN(test_restart_counting);
    RUN(test_fatal_failure_exits_without_restart);
    RUN(test_membership_change_not_counted);
    RUN(test_full_job_waits);
    RUN(test_segments_fixed);
    RUN(test_segments_elastic_restart);
    RUN(test_segments_restart_keeps_survivors);
    RUN(test_heartbeat_loss);
    RUN(test_conn_timed_out);
    RUN(test_conn_closed_without_done);
    RUN(test_health_for_status);
    RUN(test_all_done_finished);
    RUN(test_service_nodes_not_waited_for);
    RUN(test_shutdown_waits_for_agents);
    RUN(test_bad_input_ignored);
    RUN(test_resume);
    RUN(test_silent_node_rejoins);
    RUN(test_waiting_nodes_capped_at_max);
    RUN(test_stopped_node_expected_again);
    RUN(test_shutdown_ends_running_round);
    RUN(test_peer_reported_lost);
    RUN(test_keys_bounded_across_restarts);
    RUN(test_nodes_forgotten_when_gone);
    RUN(test_thousands_of_joins);
    RUN(test_two_failures_one_spare);
    RUN(test_state_for_status);
    w_reset();
    return check_result();
}
