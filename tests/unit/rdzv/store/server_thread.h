/* tests/unit/rdzv/store/server_thread.h — a store server on its own loop in a background thread,
 * for tests whose clients block; plus raw-socket helpers for byte-level tests. */
#ifndef PODRUN_TESTS_SERVER_THREAD_H
#define PODRUN_TESTS_SERVER_THREAD_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "rdzv/store/server.h"

typedef struct srv_thread {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t th;
    uv_sem_t ready;
    store_server_t *srv;
    store_limits_t lim;
    uint16_t port;
    int err;
    /* the server's log lines, joined by newlines (the server thread writes, tests read) */
    uv_mutex_t log_mu;
    char log[8192];
    size_t log_len;
    int log_lines;
} srv_thread_t;

static inline void st_on_log(void *arg, const char *line)
{
    srv_thread_t *t = arg;
    uv_mutex_lock(&t->log_mu);
    int n = snprintf(t->log + t->log_len, sizeof t->log - t->log_len, "%s\n", line);
    if (n > 0 && (size_t)n < sizeof t->log - t->log_len)
        t->log_len += (size_t)n;
    t->log_lines++;
    uv_mutex_unlock(&t->log_mu);
}

/* How many lines the server has logged; the last one into out. */
static inline int st_last_log(srv_thread_t *t, char *out, size_t cap)
{
    uv_mutex_lock(&t->log_mu);
    int n = t->log_lines;
    const char *end = t->log + t->log_len, *p = end;
    if (p > t->log)
        p--; /* the last newline */
    while (p > t->log && p[-1] != '\n')
        p--;
    snprintf(out, cap, "%.*s", (int)(end - p), p);
    uv_mutex_unlock(&t->log_mu);
    return n;
}

static inline void st_on_stop(uv_async_t *a)
{
    srv_thread_t *t = a->data;
    store_server_close(t->srv, NULL, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

static inline void st_main(void *arg)
{
    srv_thread_t *t = arg;
    uv_loop_init(&t->loop);
    uv_async_init(&t->loop, &t->stop, st_on_stop);
    t->stop.data = t;
    podrun_log_t log = {st_on_log, t};
    t->err = store_server_start(&t->loop, "127.0.0.1", t->port, &t->lim, &log, &t->srv);
    if (t->err == 0)
        t->port = store_server_port(t->srv);
    uv_sem_post(&t->ready);
    if (t->err == 0)
        uv_run(&t->loop, UV_RUN_DEFAULT);
    else
        uv_close((uv_handle_t *)&t->stop, NULL), uv_run(&t->loop, UV_RUN_DEFAULT);
    uv_loop_close(&t->loop);
}

/* Starts a server on 127.0.0.1:port (0: any) with lim (NULL: defaults). */
static inline int st_start(srv_thread_t *t, const store_limits_t *lim, uint16_t port)
{
    memset(t, 0, sizeof *t);
    signal(SIGPIPE, SIG_IGN);
    if (lim)
        t->lim = *lim;
    else
        store_limits_default(&t->lim);
    t->port = port;
    uv_mutex_init(&t->log_mu);
    uv_sem_init(&t->ready, 0);
    uv_thread_create(&t->th, st_main, t);
    uv_sem_wait(&t->ready);
    return t->err;
}

static inline void st_stop(srv_thread_t *t)
{
    uv_async_send(&t->stop);
    uv_thread_join(&t->th);
    uv_sem_destroy(&t->ready);
    uv_mutex_destroy(&t->log_mu);
}

/* ---- raw sockets ---- */

static inline int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline void raw_send(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

/* Reads exactly n bytes within timeout_ms; returns how many arrived (fewer on timeout or EOF),
 * or -1 when the peer closed before any byte. */
static inline ssize_t raw_recv(int fd, void *p, size_t n, int timeout_ms)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, timeout_ms) <= 0)
            break;
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r <= 0)
            return got ? (ssize_t)got : -1;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* 1 when the server closed the connection (EOF or reset) within timeout_ms. */
static inline int raw_closed(int fd, int timeout_ms)
{
    char b[256];
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, timeout_ms) <= 0)
            return 0;
        ssize_t r = recv(fd, b, sizeof b, 0);
        if (r <= 0)
            return 1;
    }
}

#endif
