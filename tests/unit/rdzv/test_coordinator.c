/* tests/unit/rdzv/test_coordinator.c — the coordinator's nodes between rounds (coordinator.c,
 * coordinator_resume.c, coordinator_status.c): heartbeats and lost connections, the end of a
 * job and shutdown, resuming from the store, the keys it keeps, and what status reads, driven
 * with explicit times in the model of coord_world.h and inspected through its actions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/rdzv/coord_world.h"

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
    coord_resume_t rs = {4, COORD_RUNNING, 1, m, 3, NULL, NULL, NULL, 0};
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
    coord_resume_t ro = {2, COORD_OPEN, 1, m, 3, NULL, NULL, NULL, 0};
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
    coord_resume_t ov = {3, COORD_OVER, 0, NULL, 0, "finished", "job 'job1' finished", NULL, 0};
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
    coord_resume_t rb = {1, COORD_RUNNING, 0, &mb, 1, NULL, NULL, NULL, 0};
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
    RUN(test_stopped_node_expected_again);
    RUN(test_shutdown_ends_running_round);
    RUN(test_peer_reported_lost);
    RUN(test_keys_bounded_across_restarts);
    RUN(test_nodes_forgotten_when_gone);
    RUN(test_state_for_status);
    w_reset();
    return check_result();
}
