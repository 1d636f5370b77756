/* tests/unit/rdzv/test_rendezvous.c — the rendezvous API with the store backend: agents and the
 * store-hosting agent in one libuv loop, over real TCP on loopback: a full round, a failure
 * pushed to everyone, an in-place restart with a fresh worker namespace, a finish and a clean
 * close; plus agent loss, host loss, leave, join timeout, and a host that starts after the
 * others. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "rdzv/store/aclient.h"
#include "rdzv/rendezvous.h"

#define NA 4

typedef struct tagent {
    int idx;
    rdzv_agent_t *a;
    int assigned, stopped, finished, lost, closed, left_sent, progress;
    int ending, ending_round, ending_first; /* ending(): count, round, before its record */
    rdzv_assignment_t asg;
    char store_host[128];
    rdzv_decision_t dec;
    rdzv_failure_t f0;
    int lost_err;
    char lost_why[RDZV_LINE_MAX];
} tagent_t;

static uv_loop_t *loop;
static tagent_t ag[NA];
static int verbose;

static void cb_assigned(void *arg, const rdzv_assignment_t *a)
{
    tagent_t *t = arg;
    t->assigned++;
    t->asg = *a;
    snprintf(t->store_host, sizeof t->store_host, "%s", a->store_host);
    t->asg.store_host = t->store_host;
}

static void cb_stopped(void *arg, const rdzv_decision_t *d)
{
    tagent_t *t = arg;
    t->stopped++;
    t->dec = *d;
    t->dec.failures = NULL;
    if (d->n > 0)
        t->f0 = d->failures[0];
    else
        rdzv_failure_init(&t->f0);
}

static void cb_closed(void *arg);
static int close_when_finished;

static void cb_finished(void *arg)
{
    tagent_t *t = arg;
    t->finished++;
    if (close_when_finished) /* what a launcher does: exit as soon as it is told */
        rdzv_agent_close(t->a, cb_closed, t);
}

static void cb_lost(void *arg, int err, const char *why)
{
    tagent_t *t = arg;
    t->lost++;
    t->lost_err = err;
    snprintf(t->lost_why, sizeof t->lost_why, "%s", why);
}

static void cb_progress(void *arg, const char *line)
{
    tagent_t *t = arg;
    t->progress++;
    if (verbose)
        fprintf(stderr, "[agent %d] %s\n", t->idx, line);
}

static void cb_closed(void *arg)
{
    ((tagent_t *)arg)->closed++;
}

static void cb_left(void *arg)
{
    ((tagent_t *)arg)->left_sent++;
}

static void cb_ending(void *arg, int round)
{
    tagent_t *t = arg;
    t->ending_first = t->ending == 0 ? t->stopped + t->finished == 0 : t->ending_first;
    t->ending++;
    t->ending_round = round;
}

static const rdzv_callbacks_t cbs = {cb_assigned, cb_stopped, cb_finished, cb_lost, cb_progress,
                                     cb_ending, NULL};

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop until pred() holds or `seconds` pass; returns pred(). */
static int run_until(int (*pred)(void), double seconds)
{
    uv_timer_t tick;
    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, on_tick, 20, 20);
    uint64_t end = uv_now(loop) + (uint64_t)(seconds * 1000);
    while (!pred() && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return pred();
}

#define ALL(field, n)                                                            \
    static int all_##field##_##n(void)                                           \
    {                                                                            \
        for (int i = 0; i < NA; i++)                                             \
            if (ag[i].a && ag[i].field < n)                                      \
                return 0;                                                        \
        return 1;                                                                \
    }
ALL(assigned, 1)
ALL(assigned, 2)
ALL(finished, 1)
ALL(stopped, 1)

static int all_closed(void)
{
    for (int i = 0; i < NA; i++)
        if (ag[i].a && !ag[i].closed)
            return 0;
    return 1;
}

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

static rdzv_params_t params(int n, int restarts, uint16_t port)
{
    rdzv_params_t p;
    rdzv_params_default(&p);
    p.run_id = "job1";
    p.endpoint_host = "127.0.0.1";
    p.endpoint_port = port;
    p.local_addr = "127.0.0.1";
    p.min_nodes = p.max_nodes = n;
    p.max_restarts = restarts;
    p.join_timeout = 5;
    p.close_timeout = 3;
    p.keep_alive_interval = 0.2;
    p.progress_interval = 0.5;
    return p;
}

static const int nprocs[NA] = {1, 2, 1, 3};

/* Agent i, told of what happens through `cb`. */
static int start_with(int i, rdzv_params_t p, int is_host, const rdzv_callbacks_t *cb)
{
    char name[32];
    snprintf(name, sizeof name, "node-%d", i);
    rdzv_node_desc_t d = {.name = name, .addr = "127.0.0.1", .nproc = nprocs[i]};
    p.is_host = is_host;
    ag[i].idx = i;
    int rc = rdzv_agent_start(loop, &p, &d, cb, &ag[i], &ag[i].a);
    CHECK_EQ_INT(rc, 0);
    return rc;
}

static int start(int i, rdzv_params_t p, int is_host)
{
    return start_with(i, p, is_host, &cbs);
}

static void close_all(void)
{
    /* non-hosts first, like agents whose launchers exit; the host waits for them */
    for (int i = NA - 1; i >= 0; i--)
        if (ag[i].a && !ag[i].closed)
            rdzv_agent_close(ag[i].a, cb_closed, &ag[i]);
    CHECK(run_until(all_closed, 10));
    memset(ag, 0, sizeof ag);
}

/* A worker's store client, to prove each attempt gets a fresh namespace. */
static store_aclient_t *wc;
static int wc_ready, wc_got;
static char wc_val[64];

static void wc_connected(store_aclient_t *c, int status, void *arg)
{
    (void)c, (void)arg;
    wc_ready = status == 0 ? 1 : -1;
}

static void wc_reply(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                     void *arg)
{
    (void)c, (void)num, (void)arg;
    snprintf(wc_val, sizeof wc_val, "%.*s", (int)len, val ? val : "");
    wc_got = status == 0 ? 1 : -1;
}

static int wc_is_ready(void)
{
    return wc_ready != 0;
}

static int wc_has_reply(void)
{
    return wc_got != 0;
}

static void test_full_cycle(void)
{
    rdzv_params_t p = params(NA, 1, 0);
    if (start(0, p, 1) < 0)
        return;
    p.endpoint_port = rdzv_agent_store_port(ag[0].a);
    CHECK(p.endpoint_port != 0);
    for (int i = 1; i < NA; i++)
        start(i, p, 0);
    CHECK(run_until(all_assigned_1, 10));

    /* ranks: every node rank once, global ranks contiguous per node in node-rank order */
    int seen[NA] = {0}, base[NA];
    for (int i = 0; i < NA; i++) {
        CHECK_EQ_INT(ag[i].asg.round, 0);
        CHECK_EQ_INT(ag[i].asg.nnodes, NA);
        CHECK_EQ_INT(ag[i].asg.world_size, 7);
        CHECK_EQ_INT(ag[i].asg.restart_count, 0);
        CHECK_EQ_INT(ag[i].asg.store_port, p.endpoint_port);
        CHECK_EQ_STR(ag[i].asg.store_host, "127.0.0.1");
        seen[ag[i].asg.node_rank]++;
        base[ag[i].asg.node_rank] = ag[i].asg.rank_base;
        CHECK_EQ_INT(ag[i].asg.node_rank, i); /* node-0 < node-1 < ... */
    }
    for (int r = 0; r < NA; r++)
        CHECK_EQ_INT(seen[r], 1);
    CHECK_EQ_INT(base[0], 0);
    CHECK_EQ_INT(base[1], 1);
    CHECK_EQ_INT(base[2], 3);
    CHECK_EQ_INT(base[3], 4);

    /* a worker key written during round 0 */
    wc_ready = wc_got = 0;
    store_aclient_connect(loop, "127.0.0.1", p.endpoint_port, 2000, wc_connected, NULL, &wc);
    CHECK(run_until(wc_is_ready, 5) && wc_ready == 1);
    store_aclient_set(wc, "/worker/key", "v0", 2, NULL, NULL);
    store_aclient_get(wc, "/worker/key", wc_reply, NULL);
    CHECK(run_until(wc_has_reply, 5));
    CHECK_EQ_STR(wc_val, "v0");

    /* a worker on node 2 fails: everyone is told, with the same root cause */
    rdzv_failure_t f;
    rdzv_failure_init(&f);
    f.rank = 3;
    f.local_rank = 0;
    f.exit_code = 1;
    snprintf(f.reason, sizeof f.reason, "exited with code 1");
    snprintf(f.message, sizeof f.message, "RuntimeError: boom");
    CHECK_EQ_INT(rdzv_agent_report_failure(ag[2].a, &f), 0);
    CHECK(run_until(all_stopped_1, 5));
    for (int i = 0; i < NA; i++) {
        CHECK_EQ_INT(ag[i].dec.action, RDZV_RESTART);
        CHECK_EQ_INT(ag[i].dec.n, 1);
        CHECK_EQ_INT(ag[i].dec.next_round, 1);
        CHECK_EQ_INT(ag[i].dec.restart_count, 1);
        CHECK_EQ_STR(ag[i].f0.node_name, "node-2");
        CHECK_EQ_INT(ag[i].f0.rank, 3);
        CHECK_EQ_INT(ag[i].f0.node_rank, 2);
        CHECK_EQ_STR(ag[i].f0.message, "RuntimeError: boom");
        CHECK_EQ_INT(ag[i].dec.own, i == 2 ? 0 : -1);
        /* the end of the round was known before its record was read */
        CHECK_EQ_INT(ag[i].ending, 1);
        CHECK_EQ_INT(ag[i].ending_round, 0);
        CHECK_EQ_INT(ag[i].ending_first, 1);
    }
    /* local workers gone: everyone rejoins, round 1 closes at once */
    for (int i = 0; i < NA; i++)
        CHECK_EQ_INT(rdzv_agent_rejoin(ag[i].a), 0);
    CHECK(run_until(all_assigned_2, 5));
    for (int i = 0; i < NA; i++) {
        CHECK_EQ_INT(ag[i].asg.round, 1);
        CHECK_EQ_INT(ag[i].asg.restart_count, 1);
        CHECK_EQ_INT(ag[i].asg.node_rank, i);
    }
    /* the previous attempt's worker keys are gone */
    wc_got = 0;
    store_aclient_get(wc, "/worker/key", wc_reply, NULL);
    CHECK(run_until(wc_has_reply, 5));
    CHECK_EQ_STR(wc_val, "");
    store_aclient_close(wc);

    for (int i = 0; i < NA; i++)
        CHECK_EQ_INT(rdzv_agent_report_done(ag[i].a), 0);
    CHECK(run_until(all_finished_1, 5));
    for (int i = 0; i < NA; i++)
        CHECK_EQ_INT(ag[i].lost, 0);
    /* the host closes first here, yet stays up until the others are gone */
    rdzv_agent_close(ag[0].a, cb_closed, &ag[0]);
    uv_run(loop, UV_RUN_NOWAIT);
    CHECK_EQ_INT(ag[0].closed, 0);
    for (int i = 1; i < NA; i++)
        rdzv_agent_close(ag[i].a, cb_closed, &ag[i]);
    CHECK(run_until(all_closed, 5));
    for (int i = 0; i < NA; i++)
        CHECK_EQ_INT(ag[i].lost, 0);
    memset(ag, 0, sizeof ag);
}

/* Agent 0 hosts, the others join it; 1 once every agent has its assignment. */
static int start_job(rdzv_params_t p)
{
    start(0, p, 1);
    p.endpoint_port = rdzv_agent_store_port(ag[0].a);
    for (int i = 1; i < NA; i++)
        start(i, p, 0);
    return run_until(all_assigned_1, 10);
}

static int others_stopped(void)
{
    for (int i = 0; i < NA; i++)
        if (i != 3 && !ag[i].stopped)
            return 0;
    return 1;
}

/* t was told the job exits, the root cause being `node` for `reason`. */
static void check_exit(const tagent_t *t, const char *node, const char *reason)
{
    CHECK_EQ_INT(t->dec.action, RDZV_EXIT);
    CHECK_EQ_STR(t->f0.node_name, node);
    CHECK_EQ_STR(t->f0.reason, reason);
}

static void test_agent_lost_and_leave(void)
{
    rdzv_params_t p = params(NA, 0, 0);
    CHECK(start_job(p));
    /* an agent dies without a word: its closed connection stops everyone else at once */
    rdzv_agent_close(ag[3].a, cb_closed, &ag[3]);
    CHECK(run_until(others_stopped, 5));
    check_exit(&ag[1], "node-3", "agent lost: connection closed");
    CHECK_EQ_INT(ag[1].f0.node_rank, 3);
    close_all();

    /* leave (SIGTERM): the others hear the reason, the leaver's message is sent */
    p = params(NA, 0, 0);
    CHECK(start_job(p));
    CHECK_EQ_INT(rdzv_agent_leave(ag[3].a, "SIGTERM", cb_left, &ag[3]), 0);
    CHECK(run_until(others_stopped, 5));
    CHECK_EQ_INT(ag[3].left_sent, 1);
    CHECK_EQ_STR(ag[0].f0.reason, "agent left: SIGTERM");
    CHECK_EQ_INT(ag[3].lost, 0);
    close_all();
}

static int others_lost(void)
{
    for (int i = 1; i < NA; i++)
        if (!ag[i].lost)
            return 0;
    return 1;
}

static int others_stopped_1(void)
{
    for (int i = 1; i < NA; i++)
        if (!ag[i].stopped)
            return 0;
    return 1;
}

/* The host in a process of its own, so that it can be stopped or killed. */
static pid_t fork_host(rdzv_params_t p)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    uv_loop_t l;
    uv_loop_init(&l);
    rdzv_node_desc_t d = {.name = "node-0", .addr = "127.0.0.1", .nproc = 1};
    rdzv_callbacks_t none = {0};
    rdzv_agent_t *a;
    p.is_host = 1;
    if (rdzv_agent_start(&l, &p, &d, &none, NULL, &a) < 0)
        _exit(1);
    uv_run(&l, UV_RUN_DEFAULT);
    _exit(0);
}

static void test_host_lost(void)
{
    rdzv_params_t p = params(NA, 2, 0);
    CHECK(start_job(p));
    /* the host's agent goes while the job runs: the others are told before the store closes,
     * and told to exit, for there is no store left to restart in */
    rdzv_agent_close(ag[0].a, cb_closed, &ag[0]);
    CHECK(run_until(others_stopped_1, 5));
    check_exit(&ag[1], "127.0.0.1", "the job store host is shutting down");
    close_all();

    /* the host process dies (kill -9): everyone else notices the lost connection at once; a
     * host stopped for longer than the hang bound (10 windows of 0.2 s x 3) is hung */
    static const int sigs[] = {SIGKILL, SIGSTOP};
    for (int s = 0; s < 2; s++) {
        p = params(NA, 0, free_port());
        pid_t pid = fork_host(p);
        ag[0].a = NULL;
        for (int i = 1; i < NA; i++)
            start(i, p, 0);
        CHECK(run_until(all_assigned_1, 10));
        kill(pid, sigs[s]);
        CHECK(run_until(others_lost, sigs[s] == SIGKILL ? 5 : 10));
        for (int i = 1; i < NA; i++)
            CHECK_EQ_INT(ag[i].lost_err, sigs[s] == SIGKILL ? PODRUN_ESTORELOST
                                                            : PODRUN_ESTORESILENT);
        if (sigs[s] == SIGSTOP)
            CHECK(strstr(ag[1].lost_why, "did not answer for 6 s") != NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close_all();
    }
}

static int nobody_lost(void)
{
    for (int i = 1; i < NA; i++)
        if (ag[i].lost)
            return 0;
    return 0;
}

/* A host stopped for twice the heartbeat window (SIGSTOP, then SIGCONT) is slow, not gone: its
 * connection stays open and its kernel acknowledges, so the job goes on and finishes. */
static void test_host_stalled(void)
{
    rdzv_params_t p = params(NA, 0, free_port());
    pid_t pid = fork_host(p);
    ag[0].a = NULL;
    for (int i = 1; i < NA; i++)
        start(i, p, 0);
    CHECK(run_until(all_assigned_1, 10));
    kill(pid, SIGSTOP);
    run_until(nobody_lost, 1.2); /* 2 x (0.2 s x 3) */
    kill(pid, SIGCONT);
    run_until(nobody_lost, 1.0);
    for (int i = 1; i < NA; i++) {
        CHECK_EQ_INT(ag[i].lost, 0);
        CHECK_EQ_INT(ag[i].stopped, 0);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close_all();
}

static int some_lost(void)
{
    for (int i = 0; i < NA - 1; i++)
        if (!ag[i].lost)
            return 0;
    return 1;
}

static void test_join_timeout(void)
{
    rdzv_params_t p = params(NA, 0, 0);
    p.join_timeout = 1.5;
    p.want_rank = 0;
    start(0, p, 1);
    p.endpoint_port = rdzv_agent_store_port(ag[0].a);
    p.want_rank = 1;
    start(1, p, 0);
    p.want_rank = 3;
    start(2, p, 0);
    CHECK(run_until(some_lost, 5));
    CHECK(ag[0].progress >= 2); /* the host's own lines */
    CHECK(ag[1].progress >= 1); /* read from the status key */
    for (int i = 0; i < NA - 1; i++) {
        CHECK_EQ_INT(ag[i].lost_err, PODRUN_EJOINTIMEOUT);
        CHECK(strstr(ag[i].lost_why, "3/4 nodes joined, still waiting for node rank 2") != NULL);
    }
    close_all();
}

static void test_host_starts_last(void)
{
    uint16_t port = free_port();
    rdzv_params_t p = params(NA, 0, port);
    for (int i = 1; i < NA; i++)
        start(i, p, 0);
    /* the others retry while nobody listens */
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, on_tick, 300, 0);
    uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    CHECK_EQ_INT(ag[1].lost, 0);
    start(0, p, 1);
    CHECK(run_until(all_assigned_1, 10));
    for (int i = 0; i < NA; i++)
        CHECK_EQ_INT(ag[i].asg.nnodes, NA);
    close_when_finished = 1;
    for (int i = 0; i < NA; i++)
        rdzv_agent_report_done(ag[i].a);
    CHECK(run_until(all_closed, 5));
    for (int i = 0; i < NA; i++) {
        CHECK_EQ_INT(ag[i].finished, 1);
        CHECK_EQ_INT(ag[i].lost, 0);
    }
    close_when_finished = 0;
    memset(ag, 0, sizeof ag);
}

static void on_closed_flag(void *arg)
{
    *(int *)arg = 1;
}

/* A waiting node's progress tick asks the store for the status behind a CANCEL_WAIT; the node
 * closed (the job finished without it, or it was told to stop) before that was answered must
 * still close: every request it counts gets its callback, the CANCEL_WAIT too. */
static uv_timer_t on_tick_timer;
static int tick_armed;

static void close_waiter(uv_timer_t *t)
{
    (void)t;
    rdzv_agent_close(ag[1].a, cb_closed, &ag[1]);
}

static void progress_then_close(void *arg, const char *line)
{
    cb_progress(arg, line);
    if (((tagent_t *)arg)->idx != 1 || !tick_armed || strstr(line, "waiting for the job store"))
        return;
    tick_armed = 0;
    /* the next tick is due within one interval (50 ms) and close_waiter no earlier: with the
     * loop held up past both, they run in one pass, the tick first, and the close comes while
     * the tick's requests are on the wire */
    uv_timer_start(&on_tick_timer, close_waiter, 50, 0);
    usleep(80 * 1000);
}

static int waiter_closed(void)
{
    return ag[1].closed;
}

static void test_closed_while_asking_for_progress(void)
{
    rdzv_params_t p = params(NA, 0, 0);
    p.progress_interval = 0.05;
    start(0, p, 1);
    p.endpoint_port = rdzv_agent_store_port(ag[0].a);
    rdzv_callbacks_t cb = cbs;
    cb.progress = progress_then_close;
    uv_timer_init(loop, &on_tick_timer);
    tick_armed = 1;
    start_with(1, p, 0, &cb);
    CHECK(run_until(waiter_closed, 5));
    CHECK_EQ_INT(tick_armed, 0);
    CHECK_EQ_INT(ag[1].lost, 0);
    uv_close((uv_handle_t *)&on_tick_timer, NULL);
    close_all();
}

static void test_endpoint_is_local(void)
{
    char hn[256] = "";
    gethostname(hn, sizeof hn - 1);
    CHECK_EQ_INT(rdzv_endpoint_is_local("127.0.0.2", "127.0.0.2"), 1);
    CHECK_EQ_INT(rdzv_endpoint_is_local("127.0.0.2", "127.0.0.3"), 0); /* agents sharing lo */
    CHECK_EQ_INT(rdzv_endpoint_is_local("localhost", NULL), 1);
    CHECK_EQ_INT(rdzv_endpoint_is_local(hn, NULL), 1);
    CHECK_EQ_INT(rdzv_endpoint_is_local("store.invalid", NULL), 0);
    CHECK_EQ_INT(rdzv_endpoint_is_local("", NULL), 0);
    /* a name that resolves to --local-addr; to another loopback address it is not this agent's */
    CHECK_EQ_INT(rdzv_endpoint_is_local("localhost", "127.0.0.1"), 1);
    CHECK_EQ_INT(rdzv_endpoint_is_local("localhost", "127.0.0.2"), 0);
    CHECK_EQ_INT(rdzv_endpoint_is_local("::1", NULL), 1);
    /* without --local-addr, any interface's address is this node's (bare metal, SLURM) */
    uv_interface_address_t *ifs;
    int n;
    char ip[64];
    CHECK_EQ_INT(uv_interface_addresses(&ifs, &n), 0);
    for (int i = 0; i < n; i++) {
        if (ifs[i].is_internal || ifs[i].address.address4.sin_family != AF_INET)
            continue;
        uv_ip4_name(&ifs[i].address.address4, ip, sizeof ip);
        CHECK_EQ_INT(rdzv_endpoint_is_local(ip, NULL), 1);
        CHECK_EQ_INT(rdzv_endpoint_is_local(ip, "127.0.0.2"), 0);
    }
    uv_free_interface_addresses(ifs, n);
    CHECK_EQ_INT(rdzv_endpoint_is_local("198.51.100.254", NULL), 0);   /* TEST-NET-2: nobody's */
}

static int never(void)
{
    return 0;
}

/* The heartbeat period grows with the job past RDZV_HEARTBEAT_RATE nodes, at most H / 3; an
 * agent of such a job heartbeats that much less often. */
static void test_heartbeat_period(void)
{
    rdzv_params_t p;
    rdzv_params_default(&p);
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 1000);
    p.max_nodes = RDZV_HEARTBEAT_RATE;
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 1000);
    p.max_nodes = RDZV_HEARTBEAT_RATE + 1;
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 2000);
    p.max_nodes = 16384;
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 8000);
    p.max_nodes = 1 << 20; /* never past a third of H (10 x 3 s) */
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 10000);
    p.keep_alive_interval = 0.25;
    p.max_nodes = 3 * RDZV_HEARTBEAT_RATE;
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 750);
    p.keep_alive_max_attempt = 1;
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 750); /* H / 3 = 833 ms */
    p.max_nodes = 4 * RDZV_HEARTBEAT_RATE;
    CHECK_EQ_INT((int)rdzv_heartbeat_ms(&p), 833);

    /* a host waiting in a job of up to 3 x RDZV_HEARTBEAT_RATE nodes with a 0.2 s interval:
     * heartbeats 0.6 s apart, so at most 3 in 1.3 s where a small job's would send 7 */
    p = params(1, 0, 0);
    p.max_nodes = 3 * RDZV_HEARTBEAT_RATE;
    start(0, p, 1);
    run_until(never, 1.3);
    rdzv_stats_t st;
    rdzv_agent_stats(ag[0].a, &st);
    CHECK(st.heartbeats >= 1);
    CHECK(st.heartbeats <= 3);
    close_all();
}

/* The API picks the backend by name; one it does not know is refused before anything starts. */
static void test_backend_by_name(void)
{
    rdzv_params_t p = params(1, 0, 0);
    rdzv_node_desc_t d = {.name = "node-0", .addr = "127.0.0.1", .nproc = 1};
    rdzv_callbacks_t none = {0};
    rdzv_agent_t *a = (rdzv_agent_t *)&p; /* must come back NULL */
    p.is_host = 1;
    p.backend = "zookeeper";
    CHECK_EQ_INT(rdzv_agent_start(loop, &p, &d, &none, NULL, &a), -EINVAL);
    CHECK(a == NULL);
    p.backend = "store";
    CHECK_EQ_INT(rdzv_agent_start(loop, &p, &d, &none, NULL, &a), 0);
    CHECK(a != NULL);
    int closed = 0;
    rdzv_agent_close(a, on_closed_flag, &closed);
    while (!closed)
        uv_run(loop, UV_RUN_ONCE);
}

int main(void)
{
    verbose = getenv("RDZV_TEST_VERBOSE") != NULL;
    loop = uv_default_loop();
    RUN(test_endpoint_is_local);
    RUN(test_backend_by_name);
    RUN(test_heartbeat_period);
    RUN(test_full_cycle);
    RUN(test_agent_lost_and_leave);
    RUN(test_host_lost);
    RUN(test_host_stalled);
    RUN(test_join_timeout);
    RUN(test_host_starts_last);
    RUN(test_closed_while_asking_for_progress);
    uv_run(loop, UV_RUN_NOWAIT);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
    return check_result();
}
