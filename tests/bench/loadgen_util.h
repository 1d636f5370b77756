/* tests/bench/loadgen_util.h — what tests/bench/rdzv_loadgen.c needs besides the agents: a clock,
 * a timer heap, another process's CPU time, memory and descriptors from /proc, percentiles, and
 * the relay sockets of the simulated agents (rdzv/relay.h). */
#ifndef PODRUN_TESTS_BENCH_LOADGEN_UTIL_H
#define PODRUN_TESTS_BENCH_LOADGEN_UTIL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

uint64_t now_ns(void);
uint64_t ns(double s);
/* One line naming what failed and errno, exit 1. */
void die(const char *what) __attribute__((noreturn));
/* p[0..n) appended to the growing buffer *buf of *len bytes in *cap (dies without memory). */
void buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n);

/* A binary heap of timers, earliest first. */
typedef struct tmr {
    uint64_t at;
    int agent, kind, gen;
} tmr_t;
/* one heap per thread of the load generator: each holds its own agents' timers */
extern _Thread_local tmr_t *heap;
extern _Thread_local size_t heap_n;
void heap_push(uint64_t at, int agent, int kind, int gen);
tmr_t heap_pop(void);

/* Process `pid` from /proc: CPU seconds (user + system, clock ticks), CPU time run in ns
 * (schedstat: precise enough for one push), a /proc/PID/status field in KiB, open descriptors.
 * -1 when unreadable. */
double proc_cpu_s(int pid);
int64_t proc_run_ns(int pid);
long proc_status_kib(int pid, const char *field);
long proc_fds(int pid);
/* This process's own CPU seconds. */
double self_cpu_s(void);

int cmp_u64(const void *a, const void *b);
/* The p-th quantile of sorted v[0..n), in ms from ns; -1 for none. */
double pct_ms(uint64_t *v, int n, double p);
/* The median of v[0..n) (sorts v); -1 for none. */
double median_of(double *v, int n);

/* ---- relay sockets: one UDP socket per source address 127.0.0.2-251, shared by the simulated
 * agents of that address (a datagram names its receiver's node rank, rdzv/relay.h) ---- */
#define RELAY_ADDRS 250
/* Opens and binds them; relay_socks_watch adds those of thread t of nt (index % nt == t) to
 * epoll `ep` with data.u64 = RELAY_TAG | index. */
#define RELAY_TAG (1ull << 63)
void relay_socks_open(void);
void relay_socks_watch(int ep, int t, int nt);
uint16_t relay_sock_port(int addr_index);
int relay_sock_fd(int addr_index);
/* Sends `len` bytes from address index `from` to addr:port; 0 or -1 (dropped). */
int relay_sock_send(int from, const struct sockaddr_in *to, const char *msg, size_t len);
/* Reads one datagram waiting on socket `idx` into buf: its length, or -1 when none is left. */
long relay_sock_recv(int idx, char *buf, size_t cap);

#endif
