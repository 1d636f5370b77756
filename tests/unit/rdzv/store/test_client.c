/* tests/unit/rdzv/store/test_client.c — the blocking C client (podrun/store.h) against the
 * server, every operation, in the 2.x dialect; connect retry and wait timeouts. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "tests/unit/check.h"
#include "podrun/store.h"
#include "tests/unit/rdzv/store/server_thread.h"

static srv_thread_t st;

static podrun_store_t *conn(void)
{
    podrun_store_t *s = NULL;
    int r = podrun_store_connect("127.0.0.1", st.port, 5000, &s);
    CHECK_EQ_INT(r, 0);
    return s;
}

static long long ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_set_get(void)
{
    podrun_store_t *s = conn();
    char *v;
    size_t n;
    CHECK_EQ_INT(podrun_store_set(s, "/k", "value", 5), 0);
    CHECK_EQ_INT(podrun_store_get(s, "/k", &v, &n), 0);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_STR(v, "value");
    free(v);
    CHECK_EQ_INT(podrun_store_get(s, "/missing", &v, &n), 0); /* empty, connection kept */
    CHECK_EQ_INT(n, 0);
    free(v);
    CHECK_EQ_INT(podrun_store_ping(s), 0);
    /* a value larger than one read */
    size_t big = 3 << 20;
    char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (char)(i * 7);
    CHECK_EQ_INT(podrun_store_set(s, "/big", b, big), 0);
    CHECK_EQ_INT(podrun_store_get(s, "/big", &v, &n), 0);
    CHECK(n == big && memcmp(v, b, big) == 0);
    free(v);
    free(b);
    podrun_store_close(s);
}

/* COMPARE_SET of "/cs" from `expected` to `desired`: the server answers `answer`. */
static void cas(podrun_store_t *s, const char *expected, const char *desired, const char *answer)
{
    char *v;
    size_t n;
    CHECK_EQ_INT(podrun_store_compare_set(s, "/cs", expected, strlen(expected), desired,
                                          strlen(desired), &v, &n), 0);
    CHECK_EQ_STR(v, answer);
    free(v);
}

static void test_add_compare_set(void)
{
    podrun_store_t *s = conn();
    int64_t r = 0;
    CHECK_EQ_INT(podrun_store_add(s, "/cnt", 3, &r), 0);
    CHECK_EQ_INT(r, 3);
    CHECK_EQ_INT(podrun_store_add(s, "/cnt", -1, &r), 0);
    CHECK_EQ_INT(r, 2);
    char *v;
    size_t n;
    CHECK_EQ_INT(podrun_store_get(s, "/cnt", &v, &n), 0);
    CHECK_EQ_STR(v, "2");
    free(v);
    cas(s, "x", "y", "x"); /* missing, expected not empty: nothing set, expected answered */
    cas(s, "", "y", "y");  /* missing, expected empty: created */
    cas(s, "y", "z", "z"); /* swapped */
    cas(s, "y", "w", "z"); /* not swapped: the value now */
    podrun_store_close(s);
}

static void test_check_delete_numkeys_append(void)
{
    podrun_store_t *s = conn();
    const char *ks[] = {"/c1", "/c2"};
    int64_t before, after;
    CHECK_EQ_INT(podrun_store_num_keys(s, &before), 0);
    CHECK_EQ_INT(podrun_store_check(s, ks, 2), 0);
    podrun_store_set(s, "/c1", "", 0);
    podrun_store_append(s, "/c2", "ab", 2);
    podrun_store_append(s, "/c2", "cd", 2);
    CHECK_EQ_INT(podrun_store_check(s, ks, 2), 1);
    char *v;
    size_t n;
    podrun_store_get(s, "/c2", &v, &n);
    CHECK_EQ_STR(v, "abcd");
    free(v);
    CHECK_EQ_INT(podrun_store_num_keys(s, &after), 0);
    CHECK_EQ_INT(after, before + 2);
    CHECK_EQ_INT(podrun_store_delete(s, "/c1"), 1);
    CHECK_EQ_INT(podrun_store_delete(s, "/c1"), 0);
    CHECK_EQ_INT(podrun_store_check(s, ks, 2), 0);
    podrun_store_close(s);
}

static void test_multi(void)
{
    podrun_store_t *s = conn();
    const char *keys[] = {"/m1", "/m2", "/m3"};
    const void *vals[] = {"one", "", "three"};
    size_t lens[] = {3, 0, 5};
    CHECK_EQ_INT(podrun_store_multi_set(s, keys, vals, lens, 3), 0);
    const char *get[] = {"/m3", "/nope", "/m1"};
    char *out[3];
    size_t ol[3];
    CHECK_EQ_INT(podrun_store_multi_get(s, get, 3, out, ol), 0);
    CHECK_EQ_STR(out[0], "three");
    CHECK_EQ_INT(ol[1], 0);
    CHECK_EQ_STR(out[2], "one");
    for (int i = 0; i < 3; i++)
        free(out[i]);
    podrun_store_close(s);
}

static void test_wait_timeout_then_success(void)
{
    podrun_store_t *a = conn(), *b = conn();
    const char *k[] = {"/w1", "/w2"};
    long long t0 = ms_now();
    CHECK_EQ_INT(podrun_store_wait(a, k, 2, 200), PODRUN_ETIMEDOUT);
    CHECK(ms_now() - t0 >= 190);
    /* the connection is still in sync: the next reply is the right one */
    int64_t r;
    CHECK_EQ_INT(podrun_store_add(a, "/wc", 7, &r), 0);
    CHECK_EQ_INT(r, 7);
    podrun_store_set(b, "/w1", "", 0);
    CHECK_EQ_INT(podrun_store_wait(a, k, 2, 100), PODRUN_ETIMEDOUT); /* still one missing */
    podrun_store_set(b, "/w2", "", 0);
    CHECK_EQ_INT(podrun_store_wait(a, k, 2, 2000), 0);
    CHECK_EQ_INT(podrun_store_ping(a), 0);
    podrun_store_close(a);
    podrun_store_close(b);
}

typedef struct later {
    uv_thread_t th;
    const char *key;
    int delay_ms;
} later_t;

static void set_later(void *arg)
{
    later_t *l = arg;
    usleep((useconds_t)l->delay_ms * 1000);
    podrun_store_t *s = conn();
    podrun_store_set(s, l->key, "x", 1);
    podrun_store_ping(s);
    podrun_store_close(s);
}

static void test_wait_woken(void)
{
    podrun_store_t *a = conn();
    later_t l = {.key = "/later", .delay_ms = 100};
    uv_thread_create(&l.th, set_later, &l);
    const char *k[] = {"/later"};
    CHECK_EQ_INT(podrun_store_wait(a, k, 1, 5000), 0);
    uv_thread_join(&l.th);
    podrun_store_close(a);
}

static uint16_t late_port;

static void start_late(void *arg)
{
    usleep(300000);
    st_start(arg, NULL, late_port);
}

static void test_connect_retries(void)
{
    /* nothing listens yet: the client backs off and connects once the server is up */
    srv_thread_t late;
    srv_thread_t probe;
    st_start(&probe, NULL, 0);
    uint16_t port = probe.port;
    st_stop(&probe); /* the port is free again */
    podrun_store_t *s = NULL;
    long long t0 = ms_now();
    CHECK(podrun_store_connect("127.0.0.1", port, 300, &s) < 0); /* refused until timeout */
    CHECK(ms_now() - t0 >= 250);
    CHECK(s == NULL);
    /* server comes up 300 ms into a 5 s connect */
    late_port = port;
    uv_thread_t th;
    uv_thread_create(&th, start_late, &late);
    CHECK_EQ_INT(podrun_store_connect("127.0.0.1", port, 5000, &s), 0);
    if (s) {
        CHECK_EQ_INT(podrun_store_ping(s), 0);
        podrun_store_close(s);
    }
    uv_thread_join(&th);
    st_stop(&late);
    /* a name that does not resolve, one attempt */
    CHECK(podrun_store_connect("no-such-host.invalid", port, 0, &s) < 0);
}

static void test_server_gone(void)
{
    srv_thread_t t2;
    CHECK_EQ_INT(st_start(&t2, NULL, 0), 0);
    podrun_store_t *s = NULL;
    CHECK_EQ_INT(podrun_store_connect("127.0.0.1", t2.port, 1000, &s), 0);
    st_stop(&t2);
    char *v = NULL;
    size_t n;
    CHECK_EQ_INT(podrun_store_get(s, "/x", &v, &n), PODRUN_ECONNRESET);
    podrun_store_close(s);
    CHECK(podrun_store_strerror(PODRUN_ETIMEDOUT) != NULL);
}

/* A server that answers the handshake and then nothing: every call ends within the connect
 * timeout instead of blocking forever. */
static void *silent_server(void *arg)
{
    int l = *(int *)arg, fd = accept(l, NULL, NULL);
    unsigned char b[10];
    size_t got = 0;
    while (fd >= 0 && got < sizeof b) {
        ssize_t n = recv(fd, b + got, sizeof b - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == sizeof b)
        send(fd, b + 6, 4, 0); /* VALIDATE(5) PING(1+4): echo the nonce */
    char sink[4096];
    while (fd >= 0 && recv(fd, sink, sizeof sink, 0) > 0)
        ;
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void test_silent_server_times_out(void)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 4) == 0);
    getsockname(l, (struct sockaddr *)&a, &al);
    pthread_t th;
    pthread_create(&th, NULL, silent_server, &l);
    podrun_store_t *s = NULL;
    CHECK_EQ_INT(podrun_store_connect("127.0.0.1", ntohs(a.sin_port), 300, &s), 0);
    char *v = NULL;
    size_t n;
    long long t0 = ms_now();
    CHECK_EQ_INT(podrun_store_get(s, "/k", &v, &n), PODRUN_ETIMEDOUT);
    CHECK(ms_now() - t0 >= 250 && ms_now() - t0 < 5000);
    podrun_store_close(s);
    pthread_join(th, NULL);
    close(l);
}

int main(void)
{
    if (st_start(&st, NULL, 0) != 0) {
        fprintf(stderr, "cannot start the server\n");
        return 1;
    }
    RUN(test_set_get);
    RUN(test_add_compare_set);
    RUN(test_check_delete_numkeys_append);
    RUN(test_multi);
    RUN(test_wait_timeout_then_success);
    RUN(test_wait_woken);
    RUN(test_connect_retries);
    RUN(test_server_gone);
    RUN(test_silent_server_times_out);
    st_stop(&st);
    return check_result();
}
