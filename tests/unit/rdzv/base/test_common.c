/* tests/unit/rdzv/base/test_common.c — HOST[:PORT], whole numbers, ids, durations, the error table,
 * the log sink. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "rdzv/base/common.h"

static int hp(const char *text, const char *host, int port, bool has_port)
{
    char h[64];
    int p = -1;
    bool given = !has_port;
    int r = podrun_hostport_parse(text, h, sizeof h, &p, &given);
    if (r)
        return r;
    CHECK_EQ_STR(h, host);
    CHECK_EQ_INT(p, port);
    CHECK_EQ_INT(given, has_port);
    return 0;
}

static void test_hostport_parse(void)
{
    CHECK_EQ_INT(hp("node0", "node0", 0, false), 0);
    CHECK_EQ_INT(hp("node0:29400", "node0", 29400, true), 0);
    CHECK_EQ_INT(hp("h:0", "h", 0, true), 0);                /* an explicit free port */
    CHECK_EQ_INT(hp("[::1]:1234", "::1", 1234, true), 0);
    CHECK_EQ_INT(hp("[fe80::1]", "fe80::1", 0, false), 0);
    CHECK_EQ_INT(hp("::1", "::1", 0, false), 0);             /* bare IPv6: no port */
    const char *bad[] = {"", ":80", "h:", "h:port", "h:70000", "h:-1", "[]", "[::1", "[::1]x",
                         "[::1]:", "a b:1", "a/b", " h:1",
                         "x[::1]:5", "[a[b]:1"};
    char h[64];
    int p;
    bool g;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int r = podrun_hostport_parse(bad[i], h, sizeof h, &p, &g);
        if (r != -EINVAL)
            fprintf(stderr, "'%s' parsed\n", bad[i]);
        CHECK_EQ_INT(r, -EINVAL);
    }
    char longhost[80];
    memset(longhost, 'a', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = 0;
    CHECK_EQ_INT(podrun_hostport_parse(longhost, h, sizeof h, &p, &g), -EINVAL);
}

static void test_hostport_format(void)
{
    char out[64];
    podrun_hostport_format("node0", 29400, out, sizeof out);
    CHECK_EQ_STR(out, "node0:29400");
    podrun_hostport_format("::1", 5, out, sizeof out);
    CHECK_EQ_STR(out, "[::1]:5");
    /* what one writes the other reads */
    char h[64];
    int p;
    bool g;
    CHECK_EQ_INT(podrun_hostport_parse(out, h, sizeof h, &p, &g), 0);
    CHECK_EQ_STR(h, "::1");
    CHECK_EQ_INT(p, 5);
}

static void test_parse_int(void)
{
    long v = 7;
    CHECK_EQ_INT(podrun_parse_int("42", 0, 100, &v), 0);
    CHECK_EQ_INT(v, 42);
    CHECK_EQ_INT(podrun_parse_int("-3", -5, 5, &v), 0);
    CHECK_EQ_INT(v, -3);
    CHECK_EQ_INT(podrun_parse_int("101", 0, 100, &v), -ERANGE);
    CHECK_EQ_INT(podrun_parse_int("", 0, 100, &v), -EINVAL);
    CHECK_EQ_INT(podrun_parse_int(" 1", 0, 100, &v), -EINVAL);
    CHECK_EQ_INT(podrun_parse_int("1 ", 0, 100, &v), -EINVAL);
    CHECK_EQ_INT(podrun_parse_int("1x", 0, 100, &v), -EINVAL);
    CHECK_EQ_INT(podrun_parse_int("99999999999999999999", 0, 100, &v), -EINVAL);
    CHECK_EQ_INT(v, -3); /* untouched on error */
}

static void test_random_id(void)
{
    char a[33], b[33];
    podrun_random_id(a, 32);
    podrun_random_id(b, 32);
    CHECK_EQ_INT(strlen(a), 32);
    CHECK(strspn(a, "0123456789abcdef") == 32);
    CHECK(strcmp(a, b) != 0);
    char s[17];
    podrun_random_id(s, 16);
    CHECK_EQ_INT(strlen(s), 16);
    CHECK(strspn(s, "0") < 16);
}

static void test_duration(void)
{
    char s[32];
    podrun_format_duration(590, s, sizeof s);
    CHECK_EQ_STR(s, "9m50s");
    podrun_format_duration(4.2, s, sizeof s);
    CHECK_EQ_STR(s, "5s");
    podrun_format_duration(3720, s, sizeof s);
    CHECK_EQ_STR(s, "1h02m");
    podrun_format_duration(-1, s, sizeof s);
    CHECK_EQ_STR(s, "0s");
}

static void test_error_table(void)
{
    /* podrun's own codes: their own words and names, distinct from each other */
    static const int own[] = {PODRUN_ETIMEDOUT, PODRUN_ECONNRESET, PODRUN_EPROTO, PODRUN_EBADOP,
                              PODRUN_ETOOBIG, PODRUN_EMAGIC, PODRUN_EJOINTIMEOUT,
                              PODRUN_ESTORELOST, PODRUN_ESTORESILENT, PODRUN_EREJECTED,
                              PODRUN_EENDED, PODRUN_ENOPROGRESS};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
        CHECK(podrun_err_name(own[i]) != NULL);
        CHECK(strncmp(podrun_err_name(own[i]), "PODRUN_E", 8) == 0);
        for (size_t j = 0; j < i; j++)
            CHECK(own[i] != own[j]);
        /* beyond the public three, no errno and no libuv code means the same number */
        if (i >= 3)
            CHECK(own[i] < -4095);
    }
    CHECK_EQ_STR(podrun_err_name(PODRUN_EBADOP), "PODRUN_EBADOP");
    CHECK_EQ_STR(podrun_strerror(PODRUN_ETIMEDOUT), "timed out");
    CHECK_EQ_STR(podrun_strerror(PODRUN_ESTORESILENT),
                 "the job store host stopped answering heartbeats");
    /* anything else: the C library's words for an errno, libuv's for its own codes */
    CHECK(podrun_err_name(-ENOMEM) == NULL);
    CHECK_EQ_STR(podrun_strerror(-ENOMEM), strerror(ENOMEM));
    CHECK_EQ_STR(podrun_strerror(UV_EAI_NONAME), uv_strerror(UV_EAI_NONAME));
    CHECK_EQ_STR(podrun_strerror(UV_EOF), uv_strerror(UV_EOF));
}

static void test_textlist(void)
{
    char out[64] = "";
    textlist_t l = {out, sizeof out, 0, 0, 2};
    textlist_end(&l);
    CHECK_EQ_STR(out, "");
    textlist_add(&l, "a");
    textlist_add(&l, "b");
    textlist_add(&l, "c");
    textlist_add(&l, "d");
    textlist_end(&l);
    CHECK_EQ_STR(out, "a, b and 2 more");
    char tiny[6] = "";
    textlist_t t = {tiny, sizeof tiny, 0, 0, 8};
    textlist_add(&t, "worker-1");
    textlist_add(&t, "worker-2");
    CHECK_EQ_STR(tiny, "worke"); /* cut, never past the buffer */
}

static char logged[256];
static void on_line(void *arg, const char *line)
{
    (*(int *)arg)++;
    snprintf(logged, sizeof logged, "%s", line);
}

/* Keep-alive probes start after half the timeout, or after the peer's heartbeat period where
 * that is longer; the timeout itself (TCP_USER_TIMEOUT) is the same either way. */
static void keepalive_of(unsigned timeout_ms, unsigned quiet_ms, int *idle, unsigned *user)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    CHECK_EQ_INT(podrun_tcp_liveness(fd, timeout_ms, quiet_ms), 0);
    socklen_t l = sizeof *idle;
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle, &l);
    l = sizeof *user;
    getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, user, &l);
    close(fd);
}

static void test_tcp_liveness(void)
{
    int idle = 0;
    unsigned user = 0;
    keepalive_of(3000, 1000, &idle, &user);
    CHECK_EQ_INT(idle, 1);
    CHECK_EQ_INT((int)user, 3000);
    keepalive_of(3000, 8000, &idle, &user); /* a node of a 16,384-node job */
    CHECK_EQ_INT(idle, 8);
    CHECK_EQ_INT((int)user, 3000);
    keepalive_of(10000, 0, &idle, &user);
    CHECK_EQ_INT(idle, 5);
    keepalive_of(3000, 2500, &idle, &user);
    CHECK_EQ_INT(idle, 3);
}

static void test_log_sink(void)
{
    int n = 0;
    podrun_log_t log = {on_line, &n};
    podrun_logf(&log, "closing %d of %s", 3, "7");
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_STR(logged, "closing 3 of 7");
    podrun_logf(NULL, "nowhere");
    podrun_log_t none = {NULL, NULL};
    podrun_logf(&none, "nowhere");
    CHECK_EQ_INT(n, 1);
}

int main(void)
{
    RUN(test_error_table);
    RUN(test_log_sink);
    RUN(test_hostport_parse);
    RUN(test_hostport_format);
    RUN(test_parse_int);
    RUN(test_random_id);
    RUN(test_duration);
    RUN(test_textlist);
    RUN(test_tcp_liveness);
    return check_result();
}
