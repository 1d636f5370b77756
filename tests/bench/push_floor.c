/* tests/bench/push_floor.c — the floor under the failure push of tests/bench/scale_bench.py: what
 * one small write to each of K loopback TCP connections costs on this machine, with nothing else
 * done per connection. The job store pushes a decision to K waiting agents the same way (one
 * write per waiter, STOP_WAITING and the answer of the GET parked behind the WAIT), so no store
 * that keeps one connection per agent can push faster than this.
 *
 *   push_floor [--k K] [--bytes B] [--rounds R] [--writer-cpu C] [--reader-cpu C] [--udp]
 *
 * The writer (this process, on --writer-cpu) accepts K connections that a reader process (on
 * --reader-cpu) opens from 127.0.0.2-251, as the simulated agents do; per round it writes B
 * bytes to every connection in one pass, and the reader, in an epoll loop, reads them. Prints one
 * JSON object: per round the writer's pass and the time until the reader has read the last
 * byte, medians over the rounds, and the writer's CPU time per write.
 *
 * With --udp the same K messages go as K datagrams from one UDP socket to 250 sockets of the
 * reader on 127.0.0.2-251, as the relay tree sends a decision (rdzv/relay.h): the floor of a
 * push that keeps no connection per message. A datagram the kernel dropped is counted ("lost";
 * the reader stops waiting 1 s after the last one). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int K = 16384, BYTES = 40, ROUNDS = 5, WCPU = 1, RCPU = 0, UDP = 0;
#define UDP_ADDRS 250

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set); /* best effort: one CPU machines run unpinned */
}

static void die(const char *what)
{
    fprintf(stderr, "push_floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The reader: K connections, then per round the time the last of K * BYTES bytes arrived,
 * written to `out` as a double. */
static void reader(uint16_t port, int ready, int out)
{
    pin(RCPU);
    int ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1");
    for (int i = 0; i < K; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in src = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)(i % 250))};
        struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) < 0)
            die("reader socket");
        if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS)
            die("connect");
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
    char c = 1;
    if (write(ready, &c, 1) != 1)
        die("write");
    struct epoll_event evs[512];
    char buf[4096];
    for (int r = 0; r < ROUNDS; r++) {
        long want = (long)K * BYTES, got = 0;
        while (got < want) {
            int n = epoll_wait(ep, evs, 512, -1);
            for (int i = 0; i < n; i++) {
                ssize_t m = read(evs[i].data.fd, buf, sizeof buf);
                if (m > 0)
                    got += m;
            }
        }
        double t = now_s();
        if (write(out, &t, sizeof t) != sizeof t)
            die("write");
    }
    _exit(0);
}

/* The --udp reader: 250 sockets, their ports to `ready`, then per round the time the last of K
 * datagrams arrived (or the last before a quiet second) and how many did not, to `out`. */
static void reader_udp(int ready, int out)
{
    pin(RCPU);
    int ep = epoll_create1(0);
    uint16_t ports[UDP_ADDRS];
    for (int i = 0; i < UDP_ADDRS; i++) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)i)};
        socklen_t l = sizeof a;
        int big = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
            getsockname(fd, (struct sockaddr *)&a, &l) < 0)
            die("reader socket");
        ports[i] = a.sin_port;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
    if (write(ready, ports, sizeof ports) != sizeof ports)
        die("write");
    struct epoll_event evs[512];
    char buf[4096];
    for (int r = 0; r < ROUNDS; r++) {
        long got = 0;
        double t = 0;
        while (got < K) {
            int n = epoll_wait(ep, evs, 512, got ? 1000 : -1);
            if (n == 0)
                break;
            for (int i = 0; i < n; i++)
                while (read(evs[i].data.fd, buf, sizeof buf) > 0)
                    got++, t = now_s();
        }
        double lost = (double)(K - got);
        if (write(out, &t, sizeof t) != sizeof t || write(out, &lost, sizeof lost) != sizeof lost)
            die("write");
    }
    _exit(0);
}

/* --udp: K datagrams a round from one socket, round robin over the reader's 250. */
static int main_udp(void)
{
    int ready[2], times[2];
    if (pipe(ready) < 0 || pipe(times) < 0)
        die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0)
        reader_udp(ready[1], times[1]);
    pin(WCPU);
    uint16_t ports[UDP_ADDRS];
    if (read(ready[0], ports, sizeof ports) != sizeof ports)
        die("reader");
    struct sockaddr_in to[UDP_ADDRS];
    for (int i = 0; i < UDP_ADDRS; i++)
        to[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = ports[i],
                                     .sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)i)};
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) < 0)
        die("socket");
    char msg[4096];
    memset(msg, 'v', sizeof msg);
    double *pass = calloc((size_t)ROUNDS, sizeof *pass), *last = calloc((size_t)ROUNDS, sizeof *last);
    double cpu = 0, lost = 0;
    for (int r = 0; r < ROUNDS; r++) {
        usleep(200000); /* the reader is back in epoll_wait, as waiting agents are */
        double c0 = cpu_s(), t0 = now_s();
        for (int i = 0; i < K; i++)
            if (sendto(fd, msg, (size_t)BYTES, 0, (struct sockaddr *)&to[i % UDP_ADDRS],
                       sizeof to[0]) != BYTES)
                die("sendto");
        double t1 = now_s();
        cpu += cpu_s() - c0;
        double tl = 0, l = 0;
        if (read(times[0], &tl, sizeof tl) != sizeof tl || read(times[0], &l, sizeof l) != sizeof l)
            die("reader");
        pass[r] = (t1 - t0) * 1e3;
        last[r] = (tl - t0) * 1e3;
        lost += l;
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    printf("{\"mode\": \"udp\", \"k\": %d, \"bytes\": %d, \"rounds\": %d, \"write_pass_ms\": %.2f, "
           "\"last_read_ms\": %.2f, \"writer_cpu_us_per_write\": %.2f, \"lost\": %.0f}\n",
           K, BYTES, ROUNDS, median(pass, ROUNDS), median(last, ROUNDS), cpu / ROUNDS / K * 1e6,
           lost);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"k", 1, 0, 'k'},          {"bytes", 1, 0, 'b'},
                                         {"rounds", 1, 0, 'r'},     {"writer-cpu", 1, 0, 'w'},
                                         {"reader-cpu", 1, 0, 'c'}, {"udp", 0, 0, 'u'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'k': K = atoi(optarg); break;
        case 'b': BYTES = atoi(optarg); break;
        case 'r': ROUNDS = atoi(optarg); break;
        case 'w': WCPU = atoi(optarg); break;
        case 'c': RCPU = atoi(optarg); break;
        case 'u': UDP = 1; break;
        default:
            fprintf(stderr, "usage: push_floor [--k K] [--bytes B] [--rounds R] [--writer-cpu C] "
                            "[--reader-cpu C] [--udp]\n");
            return 2;
        }
    }
    if (K < 1 || BYTES < 1 || BYTES > 4096 || ROUNDS < 1) {
        fprintf(stderr, "push_floor: --k, --bytes (at most 4096) and --rounds must be positive\n");
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)K + 64) {
        fprintf(stderr, "push_floor: %d connections need ulimit -n above %d\n", K, K + 64);
        return 2;
    }
    if (UDP)
        return main_udp();
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 65535) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
        die("listen");
    int ready[2], times[2];
    if (pipe(ready) < 0 || pipe(times) < 0)
        die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(lfd);
        reader(ntohs(sa.sin_port), ready[1], times[1]);
    }
    pin(WCPU);
    int *fds = malloc((size_t)K * sizeof *fds);
    if (!fds)
        die("malloc");
    for (int i = 0; i < K; i++) {
        fds[i] = accept(lfd, NULL, NULL);
        if (fds[i] < 0)
            die("accept");
        int one = 1;
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    char c;
    if (read(ready[0], &c, 1) != 1)
        die("reader");
    char msg[4096];
    memset(msg, 'v', sizeof msg);
    double *pass = calloc((size_t)ROUNDS, sizeof *pass), *last = calloc((size_t)ROUNDS, sizeof *last);
    double cpu = 0;
    for (int r = 0; r < ROUNDS; r++) {
        usleep(200000); /* the reader is back in epoll_wait, as waiting agents are */
        double c0 = cpu_s(), t0 = now_s();
        for (int i = 0; i < K; i++)
            if (write(fds[i], msg, (size_t)BYTES) != BYTES)
                die("write");
        double t1 = now_s();
        cpu += cpu_s() - c0;
        double tl;
        if (read(times[0], &tl, sizeof tl) != sizeof tl)
            die("reader");
        pass[r] = (t1 - t0) * 1e3;
        last[r] = (tl - t0) * 1e3;
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    printf("{\"mode\": \"tcp\", \"k\": %d, \"bytes\": %d, \"rounds\": %d, \"write_pass_ms\": %.2f, "
           "\"last_read_ms\": %.2f, \"writer_cpu_us_per_write\": %.2f}\n",
           K, BYTES, ROUNDS, median(pass, ROUNDS), median(last, ROUNDS),
           cpu / ROUNDS / K * 1e6);
    return 0;
}
