/* tests/unit/launcher/preflight/test_tcp.c — one link's tcp check on a loop: figures from a
 * listener that answers, a refused connection, a peer that accepts and never answers (the
 * deadline), and a listener that closes a connection that does not speak its protocol. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "launcher/preflight/tcp.h"

static struct pf_figure got;
static int calls;

static void done(void *arg, const struct pf_figure *f)
{
    (void)arg;
    got = *f;
    calls++;
}

static void run_probe(uv_loop_t *loop, uint16_t port, uint64_t bytes, uint64_t timeout_ms)
{
    pf_tcp_probe_t *p;
    calls = 0;
    memset(&got, 0, sizeof got);
    CHECK_EQ_INT(pf_tcp_probe(loop, "127.0.0.1", port, bytes, timeout_ms, done, NULL, &p), 0);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(calls, 1);
}

/* A socket listening on a free loopback port that never accepts: the kernel completes the
 * handshake, nobody answers. */
static int silent_listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    listen(fd, 4);
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_figures(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    pf_tcp_server_t *s;
    uint16_t port = 0;
    CHECK_EQ_INT(pf_tcp_listen(&loop, "127.0.0.1", &port, &s), 0);
    CHECK(port != 0);
    pf_tcp_probe_t *p;
    calls = 0;
    CHECK_EQ_INT(pf_tcp_probe(&loop, "127.0.0.1", port, 4 << 20, 10000, done, NULL, &p), 0);
    while (calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK(got.done && got.ok);
    CHECK(got.rtt > 0 && got.rtt < 1.0);
    CHECK(got.bw > 1e6);          /* 4 MiB over loopback: far above a MB/s */
    /* an empty block is acknowledged too */
    calls = 0;
    CHECK_EQ_INT(pf_tcp_probe(&loop, "localhost", port, 0, 10000, done, NULL, &p), 0);
    while (calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK(got.ok);
    pf_tcp_server_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);   /* everything closed and freed */
}

static void test_refused_and_silent(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    uint16_t port;
    int fd = silent_listener(&port);
    close(fd);   /* now nobody listens there */
    run_probe(&loop, port, 1024, 5000);
    CHECK(got.done && !got.ok);
    char want[64];
    snprintf(want, sizeof want, "connect to 127.0.0.1:%u: connection refused", port);
    CHECK_EQ_STR(got.reason, want);
    fd = silent_listener(&port);
    run_probe(&loop, port, 1024, 300);
    CHECK(!got.ok);
    snprintf(want, sizeof want, "timed out after 0.3s waiting for echoes from 127.0.0.1:%u", port);
    CHECK_EQ_STR(got.reason, want);
    close(fd);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* Bytes that are not the protocol: the listener closes that connection and serves on. */
static void test_stranger_closed(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    pf_tcp_server_t *s;
    uint16_t port;
    CHECK_EQ_INT(pf_tcp_listen(&loop, NULL, &port, &s), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ_INT(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ_INT(write(fd, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    char buf[16];
    for (int i = 0; i < 50; i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(2000);
    CHECK_EQ_INT(read(fd, buf, sizeof buf), 0);   /* closed */
    close(fd);
    pf_tcp_probe_t *p;
    calls = 0;
    CHECK_EQ_INT(pf_tcp_probe(&loop, "127.0.0.1", port, 1 << 16, 10000, done, NULL, &p), 0);
    while (calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK(got.ok);
    /* a cancelled probe never calls back */
    calls = 0;
    CHECK_EQ_INT(pf_tcp_probe(&loop, "127.0.0.1", port, 1 << 20, 10000, done, NULL, &p), 0);
    pf_tcp_probe_cancel(p);
    pf_tcp_server_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(calls, 0);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

int main(void)
{
    RUN(test_figures);
    RUN(test_refused_and_silent);
    RUN(test_stranger_closed);
    return check_result();
}
