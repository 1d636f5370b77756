/* tests/bench/store_loadgen.c — a TCPStore load generator for benchmarks.
 *
 * Speaks the torch 1.13 or 2.x dialect over N connections, each with one request in flight
 * (as torch's client does), from one epoll loop. Modes:
 *   --op set|get|add --conns N --seconds S   throughput and latency; prints one JSON line
 *   --storm N                                N clients connect, ADD a counter, WAIT for a key
 *                                            that the last one to arrive sets; prints the time
 *                                            until every client got its STOP_WAITING
 *   --idle N                                 opens N idle connections, prints "ready", holds
 *                                            them until stdin closes (for memory per connection)
 * SET has no reply in the protocol, so a SET is measured as SET followed by GETNUMKEYS in the
 * same write (the server answers after it applied the SET). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { OP_SET, OP_GET, OP_ADD, OP_WAIT, OP_HELLO };
enum { V1_SET = 0, V1_GET = 2, V1_ADD = 3, V1_WAIT = 5, V1_NUMKEYS = 6 };
enum { V2_SET = 1, V2_GET = 3, V2_ADD = 4, V2_WAIT = 6, V2_NUMKEYS = 7, V2_PING = 13 };

typedef struct conn {
    int fd;
    int op;         /* what the reply in flight answers */
    int connected;
    int done;
    uint64_t t0;
    size_t rlen;
    char rbuf[256];
} conn_t;

static int dialect = 1;
static char host[64] = "127.0.0.1";
static int port;
static size_t vlen = 32;
static char run_tag[32];
static int spread = 1; /* --spread 0: every client from the same source address */

#define HIST_MAX 200000 /* microseconds */
static uint64_t hist[HIST_MAX + 1];
static uint64_t nsamples;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static size_t put_u64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
    return 8;
}

static size_t put_str(char *p, const char *s, size_t n)
{
    put_u64(p, n);
    memcpy(p + 8, s, n);
    return 8 + n;
}

static uint64_t get_u64(const char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}

static int code(int v1, int v2)
{
    return dialect == 1 ? v1 : v2;
}

/* Encodes request `op` for connection i into p; returns its length. */
static size_t build(int op, int i, char *p)
{
    char key[96];
    size_t n = 0, kl;
    static char val[4096];
    memset(val, 'v', sizeof val);
    switch (op) {
    case OP_HELLO:
        p[n++] = 0;
        p[n++] = (char)0xCE, p[n++] = (char)0xF7, p[n++] = (char)0x85, p[n++] = 0x3C;
        p[n++] = V2_PING;
        memcpy(p + n, "\x01\x02\x03\x04", 4);
        return n + 4;
    case OP_SET:
        kl = (size_t)snprintf(key, sizeof key, "/bench/%s/%d", run_tag, i);
        p[n++] = (char)code(V1_SET, V2_SET);
        n += put_str(p + n, key, kl);
        n += put_str(p + n, val, vlen);
        p[n++] = (char)code(V1_NUMKEYS, V2_NUMKEYS);
        return n;
    case OP_GET:
        kl = (size_t)snprintf(key, sizeof key, "/bench/%s/%d", run_tag, i);
        p[n++] = (char)code(V1_GET, V2_GET);
        return n + put_str(p + n, key, kl);
    case OP_ADD:
        kl = (size_t)snprintf(key, sizeof key, "/bench/%s/counter", run_tag);
        p[n++] = (char)code(V1_ADD, V2_ADD);
        n += put_str(p + n, key, kl);
        return n + put_u64(p + n, 1);
    case OP_WAIT:
        kl = (size_t)snprintf(key, sizeof key, "/bench/%s/go", run_tag);
        p[n++] = (char)code(V1_WAIT, V2_WAIT);
        n += put_u64(p + n, 1);
        return n + put_str(p + n, key, kl);
    }
    return 0;
}

/* Bytes of a complete reply to op in buf, or 0 if incomplete. */
static size_t reply_len(int op, const char *b, size_t n)
{
    switch (op) {
    case OP_HELLO: return n >= 4 ? 4 : 0;
    case OP_WAIT: return n >= 1 ? 1 : 0;
    case OP_SET: case OP_ADD: return n >= 8 ? 8 : 0;
    case OP_GET:
        if (n < 8)
            return 0;
        return n >= 8 + get_u64(b) ? 8 + get_u64(b) : 0;
    }
    return 0;
}

static void send_req(conn_t *c, int op, int i)
{
    char buf[8192];
    size_t n = build(op, i, buf);
    c->op = op;
    c->t0 = now_us();
    c->rlen = 0;
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(c->fd, buf + off, n - off);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            perror("write");
            exit(1);
        }
        off += (size_t)w;
    }
}

static void raise_nofile(void)
{
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

static int open_conn(int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        perror("socket");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* Many clients from one address make the kernel hunt for free ephemeral ports on every
     * connect (quadratic in the number of clients). Real clients come from many hosts, so
     * spread them over loopback source addresses 127.0.0.2... */
    if (spread && !strncmp(host, "127.", 4)) {
        static unsigned next;
        struct sockaddr_in src = {0};
        src.sin_family = AF_INET;
        src.sin_addr.s_addr = htonl(0x7f000002u + (next++ % 250));
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        bind(fd, (struct sockaddr *)&src, sizeof src);
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
        perror("connect");
        exit(1);
    }
    return fd;
}

/* Reads what is there; returns 1 when c's reply is complete, -1 on EOF. */
static int read_reply(conn_t *c, size_t *len)
{
    for (;;) {
        ssize_t r = read(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen);
        if (r == 0)
            return -1;
        if (r < 0)
            return errno == EAGAIN ? 0 : -1;
        c->rlen += (size_t)r;
        size_t n = reply_len(c->op, c->rbuf, c->rlen);
        if (n) {
            *len = n;
            return 1;
        }
        if (c->rlen == sizeof c->rbuf) {
            fprintf(stderr, "loadgen: reply too large\n");
            exit(1);
        }
    }
}

static double pct(double p)
{
    uint64_t want = (uint64_t)(p * (double)nsamples), acc = 0;
    for (size_t i = 0; i <= HIST_MAX; i++) {
        acc += hist[i];
        if (acc > want)
            return (double)i;
    }
    return HIST_MAX;
}

/* Connects n clients (blocking), runs the handshake, makes each one's key exist. */
static conn_t *setup(int n, int epfd)
{
    conn_t *cs = calloc((size_t)n, sizeof *cs);
    for (int i = 0; i < n; i++) {
        cs[i].fd = open_conn(0);
        if (dialect == 2) {
            size_t len;
            send_req(&cs[i], OP_HELLO, i);
            while (read_reply(&cs[i], &len) != 1)
                ;
        }
        size_t len;
        send_req(&cs[i], OP_SET, i);
        while (read_reply(&cs[i], &len) != 1)
            ;
        fcntl(cs[i].fd, F_SETFL, fcntl(cs[i].fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(epfd, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }
    return cs;
}

static int throughput(int n, int op, double seconds)
{
    int epfd = epoll_create1(0);
    conn_t *cs = setup(n, epfd);
    struct epoll_event evs[1024];
    uint64_t start = now_us(), warm = start + 300000, end = warm + (uint64_t)(seconds * 1e6);
    uint64_t count = 0;
    for (int i = 0; i < n; i++)
        send_req(&cs[i], op, i);
    for (;;) {
        int k = epoll_wait(epfd, evs, 1024, 100);
        uint64_t t = now_us();
        if (t >= end)
            break;
        for (int e = 0; e < k; e++) {
            int i = (int)evs[e].data.u32;
            size_t len;
            int r = read_reply(&cs[i], &len);
            if (r < 0) {
                fprintf(stderr, "loadgen: server closed a connection\n");
                return 1;
            }
            if (r == 0)
                continue;
            if (t >= warm) {
                uint64_t us = t - cs[i].t0;
                hist[us > HIST_MAX ? HIST_MAX : us]++;
                nsamples++;
                count++;
            }
            send_req(&cs[i], op, i);
        }
    }
    double secs = (double)(now_us() - warm) / 1e6;
    static const char *names[] = {"set", "get", "add"};
    printf("{\"op\": \"%s\", \"conns\": %d, \"dialect\": %d, \"ops_per_s\": %.0f, "
           "\"p50_us\": %.0f, \"p99_us\": %.0f}\n",
           names[op], n, dialect, (double)count / secs, pct(0.50), pct(0.99));
    for (int i = 0; i < n; i++)
        close(cs[i].fd);
    free(cs);
    return 0;
}

/* N clients at once: connect, (2.x: VALIDATE+PING), ADD, WAIT; the one whose ADD returns N sets
 * the key everyone waits for. */
static int storm(int n)
{
    int epfd = epoll_create1(0);
    conn_t *cs = calloc((size_t)n, sizeof *cs);
    struct epoll_event *evs = calloc(4096, sizeof *evs);
    uint64_t t0 = now_us();
    for (int i = 0; i < n; i++) {
        cs[i].fd = open_conn(1);
        struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(epfd, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }
    int released = 0;
    uint64_t last_connect = 0;
    while (released < n) {
        int k = epoll_wait(epfd, evs, 4096, 60000);
        if (k <= 0) {
            fprintf(stderr, "loadgen: storm stalled with %d of %d released\n", released, n);
            return 1;
        }
        for (int e = 0; e < k; e++) {
            int i = (int)evs[e].data.u32;
            conn_t *c = &cs[i];
            if (!c->connected) {
                int err = 0;
                socklen_t sl = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
                if (err) {
                    fprintf(stderr, "loadgen: connect: %s\n", strerror(err));
                    return 1;
                }
                c->connected = 1;
                last_connect = now_us();
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
                epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
                send_req(c, dialect == 2 ? OP_HELLO : OP_ADD, i);
                continue;
            }
            size_t len;
            int r = read_reply(c, &len);
            if (r < 0) {
                fprintf(stderr, "loadgen: server closed a connection\n");
                return 1;
            }
            if (r == 0)
                continue;
            if (c->op == OP_HELLO) {
                send_req(c, OP_ADD, i);
            } else if (c->op == OP_ADD) {
                uint64_t v = get_u64(c->rbuf);
                if (v == (uint64_t)n) { /* the last one to arrive opens the gate */
                    char buf[256], key[96];
                    size_t m = 0, kl = (size_t)snprintf(key, sizeof key, "/bench/%s/go",
                                                         run_tag);
                    buf[m++] = (char)code(V1_SET, V2_SET);
                    m += put_str(buf + m, key, kl);
                    m += put_str(buf + m, "1", 1);
                    if (write(c->fd, buf, m) != (ssize_t)m)
                        return 1;
                }
                send_req(c, OP_WAIT, i);
            } else if (c->op == OP_WAIT) {
                c->done = 1;
                released++;
            }
        }
    }
    uint64_t t1 = now_us();
    printf("{\"storm\": %d, \"dialect\": %d, \"seconds\": %.3f, \"connect_seconds\": %.3f}\n", n,
           dialect, (double)(t1 - t0) / 1e6, (double)(last_connect - t0) / 1e6);
    for (int i = 0; i < n; i++)
        close(cs[i].fd);
    free(cs);
    free(evs);
    return 0;
}

static int idle(int n)
{
    int *fds = calloc((size_t)n, sizeof *fds);
    for (int i = 0; i < n; i++) {
        fds[i] = open_conn(0);
        if (dialect == 2) {
            conn_t c = {.fd = fds[i]};
            size_t len;
            send_req(&c, OP_HELLO, i);
            while (read_reply(&c, &len) != 1)
                ;
        }
    }
    printf("ready\n");
    fflush(stdout);
    char b[16];
    while (read(0, b, sizeof b) > 0)
        ;
    return 0;
}

int main(int argc, char **argv)
{
    int conns = 1, op = OP_GET, storm_n = 0, idle_n = 0;
    double seconds = 2;
    raise_nofile();
    snprintf(run_tag, sizeof run_tag, "%d", (int)getpid());
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (!strcmp(f, "--host")) snprintf(host, sizeof host, "%s", v);
        else if (!strcmp(f, "--port")) port = atoi(v);
        else if (!strcmp(f, "--dialect")) dialect = atoi(v);
        else if (!strcmp(f, "--conns")) conns = atoi(v);
        else if (!strcmp(f, "--seconds")) seconds = atof(v);
        else if (!strcmp(f, "--value-len")) vlen = (size_t)atoi(v);
        else if (!strcmp(f, "--storm")) storm_n = atoi(v);
        else if (!strcmp(f, "--idle")) idle_n = atoi(v);
        else if (!strcmp(f, "--spread")) spread = atoi(v);
        else if (!strcmp(f, "--op")) op = !strcmp(v, "set") ? OP_SET : !strcmp(v, "add") ? OP_ADD : OP_GET;
        else {
            fprintf(stderr, "loadgen: unknown flag %s\n", f);
            return 2;
        }
    }
    if (!port || (dialect != 1 && dialect != 2) || vlen > 4000) {
        fprintf(stderr, "usage: store_loadgen --port P [--dialect 1|2] [--op set|get|add "
                        "--conns N --seconds S | --storm N | --idle N]\n");
        return 2;
    }
    if (storm_n)
        return storm(storm_n);
    if (idle_n)
        return idle(idle_n);
    return throughput(conns, op, seconds);
}
