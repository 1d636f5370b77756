/* tests/bench/loadgen_phases.c — the phases of a tests/bench/rdzv_loadgen.c run (join, steady,
 * spares, failures, done), what they measure, the JSON report, and main (see rdzv_loadgen.c). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "rdzv/records.h"
#include "rdzv/rendezvous.h"
#include "tests/bench/loadgen.h"

/* ---- phases ---- */


static int all_joined_sent(void)
{
    return connected >= connect_limit;
}

static int want_round;
static int all_assigned(void)
{
    if (want_round < rounds_cap && assigned_in[want_round] < n_members)
        return 0; /* the scan below once they might all be in */
    for (int i = 0; i < n_members; i++)
        if (agents[i].state != A_OUT && agents[i].assigned_round < want_round)
            return 0;
    return 1;
}

static int members_assigned_count(int round)
{
    int n = 0;
    for (int i = 0; i < n_agents; i++)
        n += agents[i].assigned_round >= round && agents[i].state == A_RUNNING;
    return n;
}

static int all_over(void)
{
    for (int i = 0; i < n_agents; i++)
        if (agents[i].state != A_FINISHED && agents[i].state != A_OUT &&
            agents[i].state != A_STOPPED)
            return 0;
    return 1;
}

/* Everything a run prints. */
static struct {
    double join_s, round_s, round0_msgs, cpu, spare_cpu;
    double round_host_cpu, round_self_cpu; /* CPU seconds of the failure rounds, all together */
    long rss, hwm, spare_rss;
    int disturbed, rounds, finished;
    double *push50, *push99, *pushmax, *dec99, *restart, *msgs;
    double *hpush0, *hpush50, *hpush99, *hcpu, *hnet; /* --hold rounds: the push alone, the host's CPU ms */
    int held;
} res = {.join_s = -1, .round_s = -1, .cpu = -1, .spare_cpu = -1, .rss = -1, .hwm = -1,
         .spare_rss = -1};

static int sampled;

static void sample(int round)
{
    long keys = host_keys();
    printf("%s{\"round\": %d, \"keys\": %ld, \"rss_kib\": %ld, \"fds\": %ld}",
           sampled++ ? ", " : "\"soak\": [", round, keys, proc_status_kib(O.host_pid, "VmRSS"), proc_fds(O.host_pid));
    fflush(stdout);
}

/* 1. every member connects and joins; the round's time from the last join. */
static int phase_join(void)
{
    uint64_t t0 = now_ns();
    connect_limit = n_members;
    if (run_until(all_joined_sent, 120) < 0)
        return -1;
    uint64_t t_last_join = 0, t_all = 0;
    for (int i = 0; i < n_members; i++)
        if (agents[i].t_join > t_last_join)
            t_last_join = agents[i].t_join;
    want_round = 0;
    if (run_until(all_assigned, 120) < 0)
        return -1;
    uint64_t s = 0;
    for (int i = 0; i < n_members; i++) {
        if (agents[i].t_assigned > t_all)
            t_all = agents[i].t_assigned;
        s += agents[i].sent + agents[i].recv;
    }
    res.round_s = (double)(t_all - t_last_join) / 1e9;
    res.join_s = (double)(t_last_join - t0) / 1e9;
    res.round0_msgs = (double)s / n_members;
    fprintf(stderr, "k=%d: joined in %.3f s, round %.3f s after the last join\n", O.k,
            res.join_s, res.round_s);
    return 0;
}

/* 2. heartbeats only: the host's CPU share and memory. */
static void phase_steady(void)
{
    double c0 = proc_cpu_s(O.host_pid);
    run_for(O.steady);
    res.cpu = (proc_cpu_s(O.host_pid) - c0) / O.steady;
    res.rss = proc_status_kib(O.host_pid, "VmRSS");
    res.hwm = proc_status_kib(O.host_pid, "VmHWM");
    fprintf(stderr, "k=%d: steady %.1f s: host CPU %.1f %% of one core, RSS %ld KiB\n", O.k,
            O.steady, 100 * res.cpu, res.rss);
}

/* 3. spares join the running round: nobody of the round may notice. */
static int phase_spares(void)
{
    connect_limit = n_agents;
    if (run_until(all_joined_sent, 120) < 0)
        return -1;
    run_for(1);
    double s0 = proc_cpu_s(O.host_pid);
    run_for(O.steady);
    res.spare_cpu = (proc_cpu_s(O.host_pid) - s0) / O.steady;
    res.spare_rss = proc_status_kib(O.host_pid, "VmRSS");
    for (int i = 0; i < n_members; i++)
        res.disturbed += agents[i].woken_round >= 0 || agents[i].assigned_round != 0;
    fprintf(stderr, "k=%d: +%d spares: host CPU %.1f %% of one core, RSS %ld KiB, %d members "
                    "disturbed\n",
            O.k, O.spares, 100 * res.spare_cpu, res.spare_rss, res.disturbed);
    return 0;
}

static int woken_count(int round)
{
    if (round < rounds_cap)
        return woken_in[round];
    int n = 0;
    for (int i = 0; i < n_agents; i++)
        n += agents[i].woken_round == round;
    return n;
}

/* Held rejoins go out: the push of a --hold round is over. */
static void release_rejoins(void)
{
    holding = 0;
    release_gen++; /* each thread, this one in its next poll_once, sends its agents' */
}

/* One failure in the running round and the restart after it; 0, or -1 if it did not restart.
 * A held round (--hold) keeps every rejoin back until the push has reached every member, so
 * that the host's CPU time from the failure report to then is the push's alone
 * (/proc/PID/schedstat); its restart is not counted. */
static int one_failure(int r, uint64_t *lat, uint64_t *lat2, int held)
{
    int round = -1, f = -1;
    for (int i = 0; i < n_agents; i++)
        if (agents[i].state == A_RUNNING && agents[i].round > round)
            round = agents[i].round;
    for (int j = 0; j < n_agents && f < 0; j++) {
        int i = (int)((r * 7919L + j) % n_agents);
        if (agents[i].state == A_RUNNING && agents[i].round == round && mine(&agents[i]))
            f = i;
    }
    if (f < 0) {
        error_once(NULL, "no running member to fail");
        return -1;
    }
    int members = members_assigned_count(round), have;
    uint64_t m0 = 0, m1 = 0, tmax = 0;
    for (int i = 0; i < n_agents; i++)
        m0 += agents[i].sent + agents[i].recv;
    uint64_t tf = now_ns(), end = tf + ns(60);
    int64_t h0 = proc_run_ns(O.host_pid);
    holding = held;
    t_first_go = 0;
    send_fail(&agents[f]);
    if (held) {
        while (woken_count(round) < members && !errors && now_ns() < end)
            poll_once(10);
        double win = (double)(now_ns() - tf) / 1e6;
        res.hcpu[r] = (double)(proc_run_ns(O.host_pid) - h0) / 1e6;
        /* less what the host spends anyway over that time (the heartbeats: phase 2's share) */
        res.hnet[r] = res.hcpu[r] - (res.cpu > 0 ? res.cpu * win : 0);
        release_rejoins();
    }
    /* every member of `round` ends up in round+1 (or waiting for room in it) */
    while ((have = round + 1 < rounds_cap ? assigned_in[round + 1]
                                          : members_assigned_count(round + 1)) < members &&
           !errors && now_ns() < end)
        poll_once(10);
    if (have < members)
        return -1;
    int n = 0;
    for (int i = 0; i < n_agents; i++) {
        agent_t *a = &agents[i];
        if (a->woken_round == round && a->t_woken >= tf) {
            lat[n] = a->t_woken - tf;
            lat2[n++] = a->t_decided - tf;
        }
        if (a->assigned_round == round + 1 && a->t_assigned > tmax)
            tmax = a->t_assigned;
        m1 += a->sent + a->recv;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    qsort(lat2, (size_t)n, sizeof *lat2, cmp_u64);
    if (held) {
        res.hpush50[r] = pct_ms(lat, n, 0.5);
        res.hpush99[r] = pct_ms(lat, n, 0.99);
        res.hpush0[r] = pct_ms(lat, n, 0);
        fprintf(stderr, "k=%d held round %d: push first %.1f p50 %.1f p99 %.1f ms, host CPU "
                "%.2f ms (%.2f ms beyond the heartbeats' share)\n", O.k, round, res.hpush0[r],
                res.hpush50[r], res.hpush99[r], res.hcpu[r], res.hnet[r]);
        return 0;
    }
    res.push50[r] = pct_ms(lat, n, 0.5);
    res.push99[r] = pct_ms(lat, n, 0.99);
    res.pushmax[r] = pct_ms(lat, n, 1.0);
    res.dec99[r] = pct_ms(lat2, n, 0.99);
    res.restart[r] = (double)(tmax - tf) / 1e6;
    res.msgs[r] = (double)(m1 - m0) / members;
    char tree[160] = ""; /* where the restart's time went, when it came through the tree */
    if (t_first_go > tf && t_last_gather > tf)
        sfmt(tree, sizeof tree, "; the last gather written at %.1f ms, the first go read at %.1f",
             (double)(t_last_gather - tf) / 1e6, (double)(t_first_go - tf) / 1e6);
    if (O.rounds <= 20 || r % 100 == 0)
        fprintf(stderr, "k=%d round %d: push p50 %.1f p99 %.1f max %.1f ms, decision p99 %.1f "
                        "ms, restart %.1f ms, %.1f messages per agent%s\n",
                O.k, round, res.push50[r], res.push99[r], res.pushmax[r], res.dec99[r],
                res.restart[r], res.msgs[r], tree);
    return 0;
}

/* 4. failures, one at a time; the soak's samples every O.sample rounds. */
static void phase_failures(void)
{
    size_t n = (size_t)O.rounds + 1;
    res.push50 = calloc(n, sizeof(double));
    res.push99 = calloc(n, sizeof(double));
    res.pushmax = calloc(n, sizeof(double));
    res.dec99 = calloc(n, sizeof(double));
    res.restart = calloc(n, sizeof(double));
    res.msgs = calloc(n, sizeof(double));
    uint64_t *lat = malloc((size_t)n_agents * sizeof *lat),
             *lat2 = malloc((size_t)n_agents * sizeof *lat2);
    if (O.sample)
        sample(0);
    size_t nh = (size_t)O.hold + 1;
    res.hpush0 = calloc(nh, sizeof(double));
    res.hpush50 = calloc(nh, sizeof(double));
    res.hpush99 = calloc(nh, sizeof(double));
    res.hcpu = calloc(nh, sizeof(double));
    res.hnet = calloc(nh, sizeof(double));
    for (int r = 0; r < O.hold; r++) {
        if (one_failure(r, lat, lat2, 1) < 0)
            break;
        res.held = r + 1;
    }
    double h0 = proc_cpu_s(O.host_pid), s0 = self_cpu_s();
    for (int r = 0; r < O.rounds; r++) {
        if (one_failure(r, lat, lat2, 0) < 0)
            break;
        res.rounds = r + 1;
        if (O.sample && (r + 1) % O.sample == 0)
            sample(r + 1);
    }
    res.round_host_cpu = proc_cpu_s(O.host_pid) - h0;
    res.round_self_cpu = self_cpu_s() - s0;
    if (O.sample)
        printf("], ");
    free(lat);
    free(lat2);
}

/* 5. every member reports done and the host's worker exits 0: the job finishes. */
static void phase_done(void)
{
    done_gen++; /* each thread, this one in its next poll_once, sends its agents' */
    poll_once(0);
    if (O.done_file[0]) {
        FILE *df = fopen(O.done_file, "w");
        if (df)
            fclose(df);
    }
    res.finished = run_until(all_over, 60) == 0;
}

static void report(void)
{
    int n = res.rounds, h = res.held;
    printf("\"relay\": %d, \"threads\": %d, \"k\": %d, \"heartbeat_s\": %.3f, \"spares\": %d, \"join_s\": %.4f, \"round_s\": %.4f, "
           "\"round0_msgs_per_agent\": %.2f, \"steady_s\": %.1f, \"host_cpu\": %.4f, "
           "\"host_rss_kib\": %ld, \"host_hwm_kib\": %ld, \"spare_cpu\": %.4f, "
           "\"spare_rss_kib\": %ld, \"disturbed\": %d, \"rounds\": %d, \"push_p50_ms\": %.2f, "
           "\"push_p99_ms\": %.2f, \"push_max_ms\": %.2f, \"decision_p99_ms\": %.2f, "
           "\"restart_ms\": %.2f, \"msgs_per_agent_round\": %.2f, \"finished\": %d, "
           "\"rounds_host_cpu_s\": %.3f, \"rounds_loadgen_cpu_s\": %.3f, "
           "\"held\": %d, \"held_push_first_ms\": %.2f, \"held_push_p50_ms\": %.2f, \"held_push_p99_ms\": %.2f, "
           "\"push_host_cpu_ms\": %.3f, \"push_host_cpu_net_ms\": %.3f, \"relayed\": %ld, \"polled\": %ld, \"relay_sent\": %ld, "
           "\"relay_lost\": %ld, \"relay_bad\": %ld, \"tree_joined\": %ld, \"gathers\": %ld, "
           "\"go_relayed\": %ld, \"go_read\": %ld, \"tree_fallbacks\": %ld, "
           "\"errors\": %ld, \"first_error\": \"%s\"}\n",
           !O.no_relay, O.threads, O.k, (double)hb_ns / 1e9, O.spares, res.join_s, res.round_s, res.round0_msgs, O.steady, res.cpu, res.rss,
           res.hwm, res.spare_cpu, res.spare_rss, res.disturbed, n,
           n ? median_of(res.push50, n) : -1, n ? median_of(res.push99, n) : -1,
           n ? median_of(res.pushmax, n) : -1, n ? median_of(res.dec99, n) : -1,
           n ? median_of(res.restart, n) : -1, n ? median_of(res.msgs, n) : -1, res.finished,
           res.round_host_cpu, res.round_self_cpu, h,
           h ? median_of(res.hpush0, h) : -1, h ? median_of(res.hpush50, h) : -1, h ? median_of(res.hpush99, h) : -1,
           h ? median_of(res.hcpu, h) : -1, h ? median_of(res.hnet, h) : -1, relayed, polled, relay_sent, relay_lost, relay_bad,
           tree_joined, gathers, go_relayed, go_read, tree_fallbacks, errors, first_error);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: rdzv_loadgen --port P --run-id ID --host-pid PID --k K [--spares M] "
            "[--rounds R] [--steady S] [--interval S] [--sample N] [--done-file FILE] [--hold H]\n"
            "       [--no-relay] [--threads T]\n"
            "       rdzv_loadgen --worker FILE\n");
    exit(2);
}

/* The host's worker: runs until SIGTERM or until FILE exists, then exits 0. */
static int worker(const char *file)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct timespec d = {0, 20 * 1000000};
    for (;;) {
        if (sigtimedwait(&set, NULL, &d) == SIGTERM || access(file, F_OK) == 0)
            return 0;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", 1, 0, 'p'},     {"run-id", 1, 0, 'r'},   {"host-pid", 1, 0, 'H'},
        {"k", 1, 0, 'k'},        {"spares", 1, 0, 's'},   {"rounds", 1, 0, 'R'},
        {"steady", 1, 0, 'S'},   {"interval", 1, 0, 'i'}, {"sample", 1, 0, 'N'},
        {"done-file", 1, 0, 'd'}, {"worker", 1, 0, 'w'},  {"host", 1, 0, 'h'},
        {"burst", 1, 0, 'b'},    {"hold", 1, 0, 'o'},
        {"no-relay", 0, 0, 'n'}, {"threads", 1, 0, 't'}, {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'p': O.port = atoi(optarg); break;
        case 'r': snprintf(O.run_id, sizeof O.run_id, "%s", optarg); break;
        case 'H': O.host_pid = atoi(optarg); break;
        case 'k': O.k = atoi(optarg); break;
        case 's': O.spares = atoi(optarg); break;
        case 'R': O.rounds = atoi(optarg); break;
        case 'S': O.steady = atof(optarg); break;
        case 'i': O.interval = atof(optarg); break;
        case 'N': O.sample = atoi(optarg); break;
        case 'd': snprintf(O.done_file, sizeof O.done_file, "%s", optarg); break;
        case 'w': return worker(optarg);
        case 'h': snprintf(O.host, sizeof O.host, "%s", optarg); break;
        case 'b': O.burst = atoi(optarg); break;
        case 'o': O.hold = atoi(optarg); break;
        case 'n': O.no_relay = 1; break;
        case 't': O.threads = atoi(optarg); break;
        default: usage();
        }
    }
    if (!O.port || !O.run_id[0] || !O.host_pid || O.k < 2 || O.spares < 0 || O.rounds < 0 ||
        O.threads < 1 || O.threads > RELAY_ADDRS)
        usage();
    rdzv_params_t hp;
    rdzv_params_default(&hp);
    hp.keep_alive_interval = O.interval;
    hp.min_nodes = hp.max_nodes = O.k;
    hb_ns = rdzv_heartbeat_ms(&hp) * 1000000;
    signal(SIGPIPE, SIG_IGN);
    srand48((long)now_ns());
    snprintf(prefix, sizeof prefix, "podrun/%s/", O.run_id);
    by_rank = malloc((size_t)(O.k + O.spares) * sizeof *by_rank);
    rounds_cap = O.rounds + O.hold + 64;
    assigned_in = calloc((size_t)rounds_cap, sizeof *assigned_in);
    woken_in = calloc((size_t)rounds_cap, sizeof *woken_in);
    if (!assigned_in || !woken_in)
        die("setup");
    if (!by_rank)
        die("setup");
    memset(by_rank, 0xff, (size_t)(O.k + O.spares) * sizeof *by_rank);
    relay_socks_open();
    n_members = O.k - 1;
    n_agents = n_members + O.spares;
    agents = calloc((size_t)n_agents, sizeof *agents);
    if (!agents)
        die("setup");
    for (int i = 0; i < n_agents; i++) {
        agent_t *a = &agents[i];
        a->idx = i;
        a->spare = i >= n_members;
        a->assigned_round = a->woken_round = -1;
        podrun_random_id(a->ids, 16);
        snprintf(a->name, sizeof a->name, "sim-%d", i);
        snprintf(a->addr, sizeof a->addr, "127.0.0.%d", 2 + i % 250);
        a->c.fd = -1;
        a->relay_round = a->go_round = -1;
    }
    threads_start();
    printf("{");
    if (phase_join() == 0) {
        phase_steady();
        if (O.spares == 0 || phase_spares() == 0) {
            phase_failures();
            phase_done();
        }
    }
    report();
    return errors ? 1 : 0;
}
