/* tests/bench/loadgen_util.c — see loadgen_util.h. */
#include "tests/bench/loadgen_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- clock ---- */

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void die(const char *what)
{
    fprintf(stderr, "rdzv_loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

void buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n > *cap) {
        *cap = (*len + n) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf)
            die("realloc");
    }
    memcpy(*buf + *len, p, n);
    *len += n;
}

uint64_t ns(double s)
{
    return (uint64_t)(s * 1e9);
}

/* ---- timers: heartbeats and progress lines, in a binary heap ---- */

_Thread_local tmr_t *heap;
_Thread_local size_t heap_n;
static _Thread_local size_t heap_cap;

void heap_push(uint64_t at, int agent, int kind, int gen)
{
    if (heap_n == heap_cap) {
        heap_cap = heap_cap ? 2 * heap_cap : 1024;
        heap = realloc(heap, heap_cap * sizeof *heap);
        if (!heap)
            die("realloc");
    }
    size_t i = heap_n++;
    heap[i] = (tmr_t){at, agent, kind, gen};
    while (i > 0 && heap[(i - 1) / 2].at > heap[i].at) {
        tmr_t t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

tmr_t heap_pop(void)
{
    tmr_t top = heap[0];
    heap[0] = heap[--heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_n && heap[l].at < heap[m].at)
            m = l;
        if (r < heap_n && heap[r].at < heap[m].at)
            m = r;
        if (m == i)
            break;
        tmr_t t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
    return top;
}

double proc_cpu_s(int pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long proc_status_kib(int pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f)
        return -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = atol(line + fl + 1);
    fclose(f);
    return v;
}

long proc_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    long n = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int64_t proc_run_ns(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
    FILE *f = fopen(path, "r");
    long long v = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%lld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* This process's own CPU seconds: on one machine the load generator's time is part of every
 * latency, so the JSON says how much of it there was. */
double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

double pct_ms(uint64_t *v, int n, double p)
{
    if (n == 0)
        return -1;
    int i = (int)ceil(p * n) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return (double)v[i] / 1e6;
}

/* The median of v[0..n) (sorts v); -1 for none. */
double median_of(double *v, int n)
{
    if (n <= 0)
        return -1;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

/* ---- relay sockets ---- */

static int rfd[RELAY_ADDRS];
static uint16_t rport[RELAY_ADDRS];

void relay_socks_open(void)
{
    for (int i = 0; i < RELAY_ADDRS; i++) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)i)};
        socklen_t l = sizeof sa;
        int big = 4 << 20;
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &l) < 0)
            die("relay socket");
        /* as much as the kernel gives (net.core.rmem_max): a burst of a push is ~66 datagrams
         * per address at 16k agents */
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        rfd[i] = fd;
        rport[i] = ntohs(sa.sin_port);
    }
}

void relay_socks_watch(int ep, int t, int nt)
{
    for (int i = t; i < RELAY_ADDRS; i += nt) {
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = RELAY_TAG | (uint64_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, rfd[i], &e) < 0)
            die("epoll_ctl");
    }
}

uint16_t relay_sock_port(int i)
{
    return rport[i];
}

int relay_sock_fd(int i)
{
    return rfd[i];
}

int relay_sock_send(int from, const struct sockaddr_in *to, const char *msg, size_t len)
{
    return sendto(rfd[from], msg, len, 0, (const struct sockaddr *)to, sizeof *to) == (ssize_t)len
               ? 0 : -1;
}

long relay_sock_recv(int idx, char *buf, size_t cap)
{
    ssize_t n = recv(rfd[idx], buf, cap, 0);
    return n < 0 ? -1 : (long)n;
}
