/* tests/unit/rdzv/test_member.c — one node's side of the rendezvous (rdzv/member.c) against a
 * fake transport: what each input means, that every callback runs once, and `closed` last. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/member.h"

/* ---- the fake transport and what the launcher is told ---- */

typedef struct fake {
    rdzv_member_t m; /* first: it is a member */
    int put_rc, join_rc, assigned_rc;
    int puts, joins, halts, ticks, closes, releases, acks;
    char key[320], val[2048]; /* the last put or join */
    size_t vlen;
} fake_t;

static char events[1024]; /* what happened, in order: "join assigned-hook assigned ..." */
static int n_assigned, n_stopped, n_finished, n_lost, n_closed, n_sent, lost_err;
static char lost_why[RDZV_LINE_MAX], last_line[RDZV_LINE_MAX];
static rdzv_assignment_t got_as;
static rdzv_decision_t got_d;

static void ev(const char *what)
{
    size_t n = strlen(events);
    snprintf(events + n, sizeof events - n, "%s%s", n ? " " : "", what);
}

static void keep(fake_t *f, const char *key, const char *val, size_t len)
{
    snprintf(f->key, sizeof f->key, "%s", key);
    size_t n = len < sizeof f->val - 1 ? len : sizeof f->val - 1;
    memcpy(f->val, val, n);
    f->val[n] = '\0';
    f->vlen = n;
}

static int f_put(rdzv_member_t *m, const char *key, const char *val, size_t len, int ack)
{
    fake_t *f = (fake_t *)m;
    if (f->put_rc < 0)
        return f->put_rc;
    f->puts++;
    f->acks += ack;
    keep(f, key, val, len);
    ev(ack ? "put-ack" : "put");
    return 0;
}

static int f_join(rdzv_member_t *m, const char *key, const char *val, size_t len)
{
    fake_t *f = (fake_t *)m;
    f->joins++;
    keep(f, key, val, len);
    ev("join");
    return f->join_rc;
}

static void f_join_extra(rdzv_member_t *m, kvbuf_t *b)
{
    (void)m;
    kv_add_int(b, "store_port", 4242);
}

static int f_assigned(rdzv_member_t *m, const char *val, size_t len)
{
    (void)val, (void)len;
    ev("assigned-hook");
    return ((fake_t *)m)->assigned_rc;
}

static void f_tick(rdzv_member_t *m)
{
    ((fake_t *)m)->ticks++;
}

static void f_halt(rdzv_member_t *m)
{
    ((fake_t *)m)->halts++;
}

static void f_close(rdzv_member_t *m)
{
    ((fake_t *)m)->closes++;
    ev("transport-close");
    member_close_handles(m);
}

static int releases; /* the fake is freed with the member: counted outside it */
static void f_release(rdzv_member_t *m)
{
    (void)m;
    releases++;
    ev("release");
}

static const rdzv_transport_t fake_transport = {
    .what = "the fake store",
    .put = f_put,
    .join = f_join,
    .join_extra = f_join_extra,
    .assigned = f_assigned,
    .tick = f_tick,
    .halt = f_halt,
    .close = f_close,
    .release = f_release,
};

static const rdzv_backend_t fake_backend = {.name = "fake"};

static void on_assigned(void *arg, const rdzv_assignment_t *a)
{
    (void)arg;
    n_assigned++;
    got_as = *a;
    ev("assigned");
}

static void on_stopped(void *arg, const rdzv_decision_t *d)
{
    (void)arg;
    n_stopped++;
    got_d = *d;
    ev("stopped");
}

static void on_finished(void *arg)
{
    (void)arg;
    n_finished++;
    ev("finished");
}

static void on_lost(void *arg, int err, const char *why)
{
    (void)arg;
    n_lost++;
    lost_err = err;
    snprintf(lost_why, sizeof lost_why, "%s", why);
    ev("lost");
}

static void on_progress(void *arg, const char *line)
{
    (void)arg;
    snprintf(last_line, sizeof last_line, "%s", line);
}

static void on_ending(void *arg, int round)
{
    (void)arg;
    char w[32];
    snprintf(w, sizeof w, "ending-%d", round);
    ev(w);
}

static void on_closed(void *arg)
{
    (void)arg;
    n_closed++;
    ev("closed");
}

static void on_sent(void *arg)
{
    (void)arg;
    n_sent++;
    ev("sent");
}

static uv_loop_t loop;

/* A member on the test's loop, as a backend's start makes it. */
static fake_t *start(void)
{
    memset(events, 0, sizeof events);
    n_assigned = n_stopped = n_finished = n_lost = n_closed = n_sent = lost_err = 0;
    releases = 0;
    lost_why[0] = last_line[0] = '\0';
    rdzv_params_t p;
    rdzv_params_default(&p);
    p.run_id = "job";
    p.local_addr = ""; /* "" is "not given", as NULL */
    rdzv_node_desc_t self = {.name = "node-a", .addr = "10.0.0.1", .nproc = 4};
    rdzv_callbacks_t cb = {on_assigned, on_stopped, on_finished, on_lost, on_progress,
                           on_ending, NULL};
    fake_t *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    CHECK_EQ_INT(member_init(&f->m, &fake_backend, &fake_transport, &loop, &p, &self, &cb, NULL),
                 0);
    member_timers_init(&f->m);
    return f;
}

/* Closes the member and runs the loop until it is freed; `closed` must be the last event. */
static void finish(fake_t *f)
{
    member_close(&f->m.base, on_closed, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(n_closed, 1);
    CHECK_EQ_INT(releases, 1);
    const char *last = strrchr(events, ' ');
    CHECK_EQ_STR(last ? last + 1 : events, "closed");
}

static int encode_assign(int round, int node_rank, char *buf, size_t cap)
{
    rdzv_assignment_t a = {.round = round, .node_rank = node_rank, .nnodes = 2, .rank_base = 0,
                           .world_size = 8, .restart_count = 0, .store_host = "h",
                           .store_port = 29400};
    return rdzv_assign_encode(&a, buf, cap);
}

/* Joined and assigned round `round` as node rank 1. */
static void assign(fake_t *f, int round)
{
    char buf[512];
    int len = encode_assign(round, 1, buf, sizeof buf);
    member_on_assign(&f->m, buf, (size_t)len);
}

/* ---- the tests ---- */

static void test_init(void)
{
    fake_t *f = start();
    CHECK_EQ_STR(f->m.name, "node-a");
    CHECK_EQ_STR(f->m.addr, "10.0.0.1");
    CHECK(f->m.local_addr == NULL); /* one rule: "" is NULL */
    CHECK(f->m.expected == NULL);
    CHECK_EQ_STR(f->m.prefix, "podrun/job/");
    CHECK_EQ_STR(f->m.p.run_id, "job");
    CHECK(f->m.p.run_id == f->m.run_id); /* the member's copy, not the caller's */
    CHECK_EQ_INT(strlen(f->m.id), 16);
    CHECK_EQ_INT(f->m.state, MS_STARTING);
    CHECK_EQ_INT(f->m.node_rank, -1);
    finish(f);
    CHECK_EQ_STR(events, "transport-close release closed");
}

static void test_join_record(void)
{
    fake_t *f = start();
    CHECK_EQ_INT(member_join(&f->m), 0);
    CHECK_EQ_INT(f->m.state, MS_JOINING);
    char want[320];
    snprintf(want, sizeof want, "podrun/job/n/%s/join/0", f->m.id);
    CHECK_EQ_STR(f->key, want);
    rdzv_desc_rec_t d;
    CHECK_EQ_INT(rdzv_desc_decode(f->val, f->vlen, &d), 0);
    CHECK_EQ_STR(d.name, "node-a");
    CHECK_EQ_STR(d.addr, "10.0.0.1");
    CHECK_EQ_INT(d.nproc, 4);
    CHECK_EQ_INT(kv_get_int(f->val, f->vlen, "store_port", 0), 4242); /* join_extra */
    CHECK_EQ_INT(n_lost, 0);
    finish(f);
}

static void test_join_fails(void)
{
    fake_t *f = start();
    f->join_rc = -ENOTCONN;
    CHECK_EQ_INT(member_join(&f->m), -ENOTCONN);
    CHECK_EQ_INT(n_lost, 1);
    CHECK_EQ_INT(lost_err, PODRUN_ESTORELOST);
    CHECK_EQ_STR(lost_why, "could not send the join to the fake store");
    CHECK_EQ_INT(f->m.state, MS_DEAD);
    finish(f);
    CHECK_EQ_INT(n_lost, 1);
}

static void test_assignment(void)
{
    fake_t *f = start();
    member_join(&f->m);
    assign(f, 3);
    CHECK_EQ_INT(n_assigned, 1);
    CHECK_EQ_INT(f->m.state, MS_RUNNING);
    CHECK_EQ_INT(f->m.round, 3);
    CHECK_EQ_INT(f->m.node_rank, 1);
    CHECK_EQ_INT(got_as.world_size, 8);
    CHECK_EQ_STR(events, "join assigned-hook assigned"); /* the transport first */
    assign(f, 3); /* a second answer is not a second assignment */
    CHECK_EQ_INT(n_assigned, 1);
    finish(f);
    CHECK_EQ_INT(n_assigned, 1);
    CHECK_EQ_INT(n_lost, 0);
}

static void test_assignment_ignored(void)
{
    fake_t *f = start();
    assign(f, 0); /* not joining yet */
    CHECK_EQ_INT(n_assigned, 0);
    member_join(&f->m);
    member_on_assign(&f->m, "", 0); /* a cancelled wait's empty answer */
    CHECK_EQ_INT(f->m.state, MS_JOINING);
    CHECK_EQ_INT(n_lost, 0);
    finish(f);
}

static void test_assignment_errors(void)
{
    static const struct {
        const char *err;
        int code;
    } cases[] = {{"timeout", PODRUN_EJOINTIMEOUT}, {"rejected", PODRUN_EREJECTED},
                 {"ended", PODRUN_EENDED}, {"noprogress", PODRUN_ENOPROGRESS}};
    char buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fake_t *f = start();
        member_join(&f->m);
        int len = rdzv_assign_error_encode(cases[i].err, "why it is so", buf, sizeof buf);
        member_on_assign(&f->m, buf, (size_t)len);
        CHECK_EQ_INT(n_lost, 1);
        CHECK_EQ_INT(lost_err, cases[i].code);
        CHECK_EQ_STR(lost_why, "why it is so");
        CHECK_EQ_INT(f->m.state, MS_DEAD);
        CHECK_EQ_INT(f->halts, 1);
        member_fail(&f->m, PODRUN_ESTORELOST, "again"); /* lost runs once */
        CHECK_EQ_INT(n_lost, 1);
        finish(f);
        CHECK_EQ_INT(n_assigned, 0);
    }
    /* "finished" is not an error: the job is done, this node exits 0 with it */
    fake_t *f = start();
    member_join(&f->m);
    int len = rdzv_assign_error_encode("finished", "the job is done", buf, sizeof buf);
    member_on_assign(&f->m, buf, (size_t)len);
    CHECK_EQ_INT(n_finished, 1);
    CHECK_EQ_INT(n_lost, 0);
    CHECK_EQ_INT(f->m.state, MS_FINISHED);
    CHECK_EQ_STR(last_line, "the job is done");
    CHECK(member_done_anyway(&f->m));
    finish(f);
    /* garbage */
    f = start();
    member_join(&f->m);
    member_on_assign(&f->m, "garbage", 7);
    CHECK_EQ_INT(n_lost, 1);
    CHECK_EQ_STR(lost_why, "unreadable assignment from the fake store");
    finish(f);
}

static void test_assigned_hook_fails(void)
{
    fake_t *f = start();
    f->assigned_rc = -ENOTCONN;
    member_join(&f->m);
    assign(f, 0);
    CHECK_EQ_INT(n_assigned, 0);
    CHECK_EQ_INT(n_lost, 1);
    CHECK_EQ_STR(lost_why, "could not wait on the fake store");
    finish(f);
}

static int encode_stop(int round, const char *own_name, char *buf, size_t cap)
{
    rdzv_failure_t fl[2];
    memset(fl, 0, sizeof fl);
    snprintf(fl[0].node_name, sizeof fl[0].node_name, "node-b");
    fl[0].node_rank = 0;
    snprintf(fl[1].node_name, sizeof fl[1].node_name, "%s", own_name);
    fl[1].node_rank = 1;
    rdzv_decision_t d = {.action = RDZV_RESTART, .round = round, .n = 2, .failures = fl,
                         .own = -1, .next_round = round + 1};
    snprintf(d.reason, sizeof d.reason, "a worker failed");
    return rdzv_end_encode(&d, buf, cap);
}

static void test_end_of_round(void)
{
    char buf[4096];
    fake_t *f = start();
    member_join(&f->m);
    assign(f, 2);
    member_on_ending(&f->m, 2);
    int len = encode_stop(1, "node-a", buf, sizeof buf);
    member_on_end(&f->m, 1, buf, (size_t)len); /* an older round's: nothing */
    CHECK_EQ_INT(n_stopped, 0);
    len = encode_stop(2, "node-a", buf, sizeof buf);
    member_on_end(&f->m, 2, buf, (size_t)len);
    CHECK_EQ_INT(n_stopped, 1);
    CHECK_EQ_INT(got_d.action, RDZV_RESTART);
    CHECK_EQ_INT(got_d.own, 1); /* this node's own record, by rank and name */
    CHECK_EQ_INT(f->m.state, MS_STOPPED);
    CHECK_EQ_INT(f->m.stop_action, RDZV_RESTART);
    CHECK_EQ_STR(events, "join assigned-hook assigned ending-2 stopped");
    member_on_end(&f->m, 2, buf, (size_t)len); /* read twice (a resync): once */
    CHECK_EQ_INT(n_stopped, 1);
    finish(f);
}

static void test_end_before_assignment(void)
{
    char buf[4096];
    fake_t *f = start();
    member_join(&f->m);
    int len = rdzv_end_encode(NULL, buf, sizeof buf); /* finished */
    member_on_end(&f->m, 0, buf, (size_t)len);
    CHECK_EQ_INT(n_finished, 0); /* kept until the assignment comes */
    assign(f, 0);
    CHECK_EQ_INT(n_assigned, 1);
    CHECK_EQ_INT(n_finished, 1);
    CHECK_EQ_INT(f->m.state, MS_FINISHED);
    CHECK_EQ_STR(events, "join assigned-hook assigned finished");
    finish(f);
    /* another round's end does not end this one */
    f = start();
    member_join(&f->m);
    member_on_end(&f->m, 0, buf, (size_t)len);
    assign(f, 1);
    CHECK_EQ_INT(n_finished, 0);
    CHECK_EQ_INT(f->m.state, MS_RUNNING);
    member_on_end(&f->m, 1, "garbage", 7);
    CHECK_EQ_INT(n_lost, 1);
    CHECK_EQ_STR(lost_why, "unreadable end-of-round record from the fake store");
    finish(f);
}

static void test_reports(void)
{
    fake_t *f = start();
    rdzv_failure_t fl;
    memset(&fl, 0, sizeof fl);
    fl.exit_code = 3;
    CHECK_EQ_INT(member_report_failure(&f->m.base, &fl), -EINVAL); /* no round yet */
    CHECK_EQ_INT(member_report_done(&f->m.base), -EINVAL);
    CHECK_EQ_INT(member_report_peer_lost(&f->m.base, "b", "10.0.0.2", "gone"), -EINVAL);
    CHECK_EQ_INT(f->puts, 0);
    member_join(&f->m);
    assign(f, 5);
    char want[320];
    CHECK_EQ_INT(member_report_failure(&f->m.base, &fl), 0);
    snprintf(want, sizeof want, "podrun/job/n/%s/fail/5", f->m.id);
    CHECK_EQ_STR(f->key, want);
    rdzv_failure_t g;
    CHECK_EQ_INT(rdzv_failure_decode(f->val, f->vlen, &g), 0);
    CHECK_EQ_STR(g.node_name, "node-a"); /* filled in */
    CHECK_EQ_STR(g.host, "10.0.0.1");
    CHECK(g.time > 0);
    CHECK_EQ_INT(member_report_peer_lost(&f->m.base, "b", "10.0.0.2", "gone"), 0);
    snprintf(want, sizeof want, "podrun/job/n/%s/peer/5", f->m.id);
    CHECK_EQ_STR(f->key, want);
    char reason[64];
    CHECK(kv_get(f->val, f->vlen, "reason", reason, sizeof reason) == 4);
    CHECK_EQ_INT(member_report_done(&f->m.base), 0);
    snprintf(want, sizeof want, "podrun/job/n/%s/done/5", f->m.id);
    CHECK_EQ_STR(f->key, want);
    CHECK_EQ_STR(f->val, "1");
    f->put_rc = -ENOTCONN; /* the transport's error is the caller's */
    CHECK_EQ_INT(member_report_done(&f->m.base), -ENOTCONN);
    f->put_rc = 0;
    /* a stopped round still takes a failure report, not done */
    char buf[4096];
    int len = encode_stop(5, "node-a", buf, sizeof buf);
    member_on_end(&f->m, 5, buf, (size_t)len);
    CHECK_EQ_INT(member_report_failure(&f->m.base, &fl), 0);
    CHECK_EQ_INT(member_report_done(&f->m.base), -EINVAL);
    CHECK_EQ_INT(f->acks, 0);
    finish(f);
}

static void test_leave(void)
{
    fake_t *f = start();
    member_join(&f->m);
    assign(f, 0);
    CHECK_EQ_INT(member_leave(&f->m.base, NULL, on_sent, NULL), 0);
    CHECK_EQ_INT(f->acks, 1);
    char want[320];
    snprintf(want, sizeof want, "podrun/job/n/%s/leave", f->m.id);
    CHECK_EQ_STR(f->key, want);
    CHECK_EQ_STR(f->val, "shutting down");
    CHECK_EQ_INT(n_sent, 0); /* never from inside the call */
    CHECK_EQ_INT(f->halts, 1);
    CHECK(member_done_anyway(&f->m));
    CHECK_EQ_INT(member_leave(&f->m.base, "again", on_sent, NULL), -EALREADY);
    /* reports while leaving still go out: the round's end may need them */
    CHECK_EQ_INT(member_report_done(&f->m.base), 0);
    member_leave_sent(&f->m);
    member_leave_sent(&f->m); /* `sent` runs once */
    CHECK_EQ_INT(n_sent, 1);
    finish(f);
    CHECK_EQ_INT(n_sent, 1);
}

static void test_leave_unsent(void)
{
    fake_t *f = start();
    f->put_rc = -ENOTCONN;
    CHECK_EQ_INT(member_leave(&f->m.base, "bye", on_sent, NULL), 0);
    CHECK_EQ_INT(n_sent, 0);
    uv_run(&loop, UV_RUN_NOWAIT); /* from the loop, at once */
    CHECK_EQ_INT(n_sent, 1);
    finish(f);
    CHECK_EQ_INT(n_sent, 1);
    /* closed before the loop ran the deferred `sent`: `closed` is still the last word */
    f = start();
    f->put_rc = -ENOTCONN;
    member_leave(&f->m.base, "bye", on_sent, NULL);
    finish(f);
}

static void test_rejoin(void)
{
    char buf[4096];
    fake_t *f = start();
    member_join(&f->m);
    CHECK_EQ_INT(member_rejoin(&f->m.base), -EINVAL); /* not stopped */
    assign(f, 0);
    int len = encode_stop(0, "node-a", buf, sizeof buf);
    member_on_end(&f->m, 0, buf, (size_t)len);
    CHECK_EQ_INT(member_rejoin(&f->m.base), 0);
    CHECK_EQ_INT(f->m.join_k, 1);
    CHECK_EQ_INT(f->m.state, MS_JOINING);
    char want[320];
    snprintf(want, sizeof want, "podrun/job/n/%s/join/1", f->m.id);
    CHECK_EQ_STR(f->key, want);
    CHECK(uv_is_active((uv_handle_t *)&f->m.prog_timer)); /* progress again while joining */
    assign(f, 1);
    CHECK_EQ_INT(n_assigned, 2);
    CHECK(!uv_is_active((uv_handle_t *)&f->m.prog_timer));
    finish(f);
    /* told to exit: no rejoin */
    f = start();
    member_join(&f->m);
    assign(f, 0);
    rdzv_decision_t d = {.action = RDZV_EXIT, .round = 0, .own = -1};
    len = rdzv_end_encode(&d, buf, sizeof buf);
    member_on_end(&f->m, 0, buf, (size_t)len);
    CHECK_EQ_INT(f->m.stop_action, RDZV_EXIT);
    CHECK_EQ_INT(member_rejoin(&f->m.base), -EINVAL);
    CHECK(member_done_anyway(&f->m));
    finish(f);
}

static void test_progress_timer(void)
{
    fake_t *f = start();
    f->m.p.progress_interval = 0.001; /* the tick is the behaviour under test */
    member_start_progress(&f->m);
    while (f->ticks < 2)
        uv_run(&loop, UV_RUN_ONCE);
    member_fail(&f->m, PODRUN_ESTORELOST, "gone");
    CHECK(!uv_is_active((uv_handle_t *)&f->m.prog_timer)); /* lost: no more lines */
    finish(f);
}

static void test_close(void)
{
    fake_t *f = start();
    member_join(&f->m);
    member_close(&f->m.base, on_closed, NULL);
    member_close(&f->m.base, on_closed, NULL); /* once */
    CHECK_EQ_INT(f->closes, 1);
    member_fail(&f->m, PODRUN_ESTORELOST, "closing"); /* nothing after close */
    assign(f, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(n_lost, 0);
    CHECK_EQ_INT(n_assigned, 0);
    CHECK_EQ_INT(n_closed, 1);
    /* a request still owed a callback keeps the member until it is answered */
    f = start();
    f->m.pending = 1;
    member_close(&f->m.base, on_closed, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(n_closed, 0);
    f->m.pending--;
    member_maybe_free(&f->m);
    CHECK_EQ_INT(n_closed, 1);
    CHECK_EQ_INT(releases, 1);
}

int main(void)
{
    uv_loop_init(&loop);
    RUN(test_init);
    RUN(test_join_record);
    RUN(test_join_fails);
    RUN(test_assignment);
    RUN(test_assignment_ignored);
    RUN(test_assignment_errors);
    RUN(test_assigned_hook_fails);
    RUN(test_end_of_round);
    RUN(test_end_before_assignment);
    RUN(test_reports);
    RUN(test_leave);
    RUN(test_leave_unsent);
    RUN(test_rejoin);
    RUN(test_progress_timer);
    RUN(test_close);
    uv_loop_close(&loop);
    return check_result();
}
