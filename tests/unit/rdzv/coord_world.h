/* tests/unit/rdzv/coord_world.h — a tiny model of the store and the loop around the coordinator,
 * shared by its unit tests (test_coordinator.c, test_coordinator_round.c): the keys its actions
 * wrote, its timers, its log lines, a clock (`now`), and nodes that join, heartbeat, fail and
 * close their connections at explicit times. Each test program has one copy (static). */
#ifndef PODRUN_TESTS_UNIT_RDZV_COORD_WORLD_H
#define PODRUN_TESTS_UNIT_RDZV_COORD_WORLD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/coordinator.h"
#include "rdzv/status.h"

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

static inline void w_reset(void)
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

static inline const char *w_get(const char *key)
{
    for (int i = 0; i < W.n; i++)
        if (strcmp(W.key[i], key) == 0)
            return W.val[i];
    return NULL;
}

static inline void w_set(const char *key, const char *val)
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

static inline void w_del(const char *key)
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

static inline void drain(coord_t *c)
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
static inline void run_timers(coord_t *c)
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
static inline void advance_raw(coord_t *c, double dt)
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
static inline void hb(coord_t *c, int i);

static inline void advance(coord_t *c, double dt)
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

static int world_max_no_progress; /* max_no_progress of the next coordinator made (0: off) */
static double w_fence; /* the next coordinator's params.fence */

/* A coordinator of a job of min..max nodes, with NVLink segments of `segment` nodes (0: none). */
static inline coord_t *mk_segments(int segment, int min, int max, int restarts,
                                   const char *expected)
{
    w_reset();
    memset(hb_on, 0, sizeof hb_on);
    auto_hb = 1;
    coord_params_t p = {
        .run_id = "job1",
        .min_nodes = min,
        .max_nodes = max,
        .segment_size = segment,
        .max_restarts = restarts,
        .max_no_progress = world_max_no_progress,
        .join_timeout = 600,
        .last_call_timeout = 30,
        .close_timeout = 30,
        .keep_alive_interval = 1,
        .keep_alive_max_attempt = 3,
        .progress_interval = 5,
        .fence = w_fence,
        .store_host = "store.example",
        .store_port = 29400,
        .expected = expected,
    };
    coord_t *c = coord_new(&p, now);
    drain(c);
    return c;
}

static inline coord_t *mk(int min, int max, int restarts, const char *expected)
{
    return mk_segments(0, min, max, restarts, expected);
}

/* node i: conn i+1, id 00000000000000<i+1 in hex> */
static inline void idkey(char *out, size_t cap, int i, const char *what, int num)
{
    if (num >= 0)
        snprintf(out, cap, "podrun/job1/n/%016x/%s/%d", i + 1, what, num);
    else
        snprintf(out, cap, "podrun/job1/n/%016x/%s", i + 1, what);
}

static inline void wr(coord_t *c, int i, const char *what, int num, const char *val)
{
    char key[128];
    idkey(key, sizeof key, i, what, num);
    coord_on_write(c, (uint64_t)(i + 1), key, strlen(key), val, strlen(val), now);
    drain(c);
}

static const char *join_domain; /* the NVLink domain of the next join, NULL none */
static long long join_progress = -1; /* the trainer's progress the next join says, -1 none */
static int join_relay;           /* 1: node i joins with relay port 7000 + i */

static inline void join(coord_t *c, int i, const char *name, int nproc, int want, int k)
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
    d.has_progress = join_progress >= 0;
    d.progress = d.has_progress ? join_progress : 0;
    d.relay_port = join_relay ? 7000 + i : 0;
    CHECK(rdzv_desc_encode(&d, val, sizeof val) > 0);
    wr(c, i, "join", k, val);
    if (i < 64)
        hb_on[i] = 1;
}

static inline void hb(coord_t *c, int i)
{
    wr(c, i, "hb", -1, "1");
}

/* Rank `rank`'s failure record for round `round`, written by node i. */
static inline void fail_as(coord_t *c, int i, int round, int rank, double t, const char *reason,
                           int exit_code, int fatal, const char *message)
{
    rdzv_failure_t f;
    char val[2048];
    rdzv_failure_init(&f);
    f.rank = rank;
    f.local_rank = 0;
    f.exit_code = exit_code;
    f.fatal = fatal;
    f.time = t;
    snprintf(f.reason, sizeof f.reason, "%s", reason);
    snprintf(f.message, sizeof f.message, "%s", message);
    CHECK(rdzv_failure_encode(&f, val, sizeof val) > 0);
    wr(c, i, "fail", round, val);
}

static inline void fail(coord_t *c, int i, int round, int rank, double t, const char *reason)
{
    fail_as(c, i, round, rank, t, reason, 1, 0, "ValueError: bad\nline two");
}

/* A worker's failure whose exit code is one not to retry (--fatal-exit-codes). */
static inline void fail_fatal(coord_t *c, int i, int round, int rank, double t)
{
    fail_as(c, i, round, rank, t, "exit code 42", 42, 1, "");
}

static inline void conn_close(coord_t *c, int i)
{
    if (i < 64)
        hb_on[i] = 0;
    coord_on_close(c, (uint64_t)(i + 1), NULL, now);
    drain(c);
}

/* The assignment of node i's k-th join; returns 1 if assigned, 0 if not yet, -1 if an error
 * (kind in err). */
static inline int assigned(int i, int k, rdzv_assignment_t *a, char *err, size_t ecap, char *text,
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

static inline int node_rank_of(int i, int k)
{
    rdzv_assignment_t a = {0};
    return assigned(i, k, &a, NULL, 0, NULL, 0) == 1 ? a.node_rank : -1;
}

/* Decodes P r/<round>/end: 1 finished, 0 decision, -1 absent. */
static inline int end_of(int round, rdzv_decision_t *d, rdzv_failure_t *f)
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

static inline int logs_contain(const char *s)
{
    for (int i = 0; i < W.nlogs && i < 64; i++)
        if (strstr(W.logs[i], s))
            return 1;
    return 0;
}

/* Starts a fixed-size job of n nodes named worker-<i>, nproc 1, all joined and assigned. */
static inline coord_t *running(int n, int restarts)
{
    coord_t *c = mk(n, n, restarts, NULL);
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        join(c, i, name, 1, -1, 0);
    }
    return c;
}

static inline void rejoin_all(coord_t *c, int n, int k)
{
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        join(c, i, name, 1, -1, k);
    }
}

#endif
