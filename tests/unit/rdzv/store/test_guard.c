/* tests/unit/rdzv/store/test_guard.c — the store's guards over real TCP on one loop: the async
 * client's token handshake against the server (same token, another, none on either side), what
 * an authenticated and an unauthenticated connection may do with podrun's keys, the write rule
 * for the coordinator's keys, and the allow-list at accept. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "rdzv/store/aclient.h"
#include "rdzv/store/server.h"
#include "rdzv/store/wire.h"
#include "tests/unit/rdzv/store/loop_client.h"

static store_server_t *srv;
static char lastlog[512];
static int nlogs;

static void on_log(void *arg, const char *line)
{
    (void)arg;
    snprintf(lastlog, sizeof lastlog, "%s", line);
    nlogs++;
}

static auth_key_t key_of(const char *t)
{
    auth_key_t k;
    char err[200];
    CHECK_EQ_INT(auth_key_from_token(t, strlen(t), "test", &k, err, sizeof err), 0);
    return k;
}

/* Connects with `key` (NULL: checks that the store asks for none); the connect status. */
static int try_connect(const auth_key_t *key, store_aclient_t **out)
{
    res_t r = {0};
    store_aclient_t *c = NULL;
    CHECK_EQ_INT(store_aclient_connect(loop, "127.0.0.1", store_server_port(srv), 3000, on_conn,
                                       &r, &c), 0);
    store_aclient_auth(c, key);
    spin(&r.done, 5000);
    CHECK(r.done);
    *out = r.status == 0 ? c : NULL;
    return r.status;
}

static int only_records(void *arg, const char *key, size_t klen, char *why, size_t cap)
{
    (void)arg, (void)why, (void)cap;
    return klen >= 10 && memcmp(key, "podrun/j/n", 10) == 0;
}

static void test_handshake(void)
{
    auth_key_t k = key_of("the job's token, 32 bytes or so"), other = key_of("another token!!!!");
    store_server_guard(srv, &k, only_records, NULL);
    store_aclient_t *c;
    CHECK_EQ_INT(try_connect(&k, &c), 0);
    /* authenticated: podrun's keys are readable, agents' records writable */
    store_server_set(srv, "podrun/j/status", 15, "waiting", 7);
    res_t g = {0}, s = {0}, g2 = {0};
    store_aclient_get(c, "podrun/j/status", on_reply, &g);
    store_aclient_set(c, "podrun/j/n/rec", "1", 1, on_reply, &s);
    store_aclient_get(c, "podrun/j/n/rec", on_reply, &g2);
    spin(&g2.done, 3000);
    CHECK_EQ_STR(g.val, "waiting");
    CHECK_EQ_STR(g2.val, "1");
    /* ... but not the coordinator's: the connection goes, with one line */
    int before = nlogs;
    res_t w = {0}, after = {0};
    store_aclient_set(c, "podrun/j/r/0/end", "x", 1, on_reply, &w);
    store_aclient_get(c, "podrun/j/status", on_reply, &after);
    spin(&after.done, 3000);
    CHECK(after.status < 0);
    CHECK_EQ_INT(nlogs, before + 1);
    CHECK(strstr(lastlog, "podrun/j/r/0/end") && strstr(lastlog, "no client writes"));
    const char *v;
    size_t vl;
    CHECK_EQ_INT(store_server_get(srv, "podrun/j/r/0/end", 16, &v, &vl), 0);
    store_aclient_close(c);

    /* another token: the client notices before it proves anything; no token: told so */
    CHECK_EQ_INT(try_connect(&other, &c), PODRUN_EAUTH);
    CHECK_EQ_INT(try_connect(NULL, &c), PODRUN_EAUTHNEEDED);
    /* a store without a token, a client with one */
    store_server_guard(srv, NULL, NULL, NULL);
    CHECK_EQ_INT(try_connect(&k, &c), PODRUN_EAUTHOPEN);
    CHECK_EQ_INT(try_connect(NULL, &c), 0);
    store_aclient_close(c);
}

static void test_unauthenticated(void)
{
    auth_key_t k = key_of("the job's token, 32 bytes or so");
    store_server_guard(srv, &k, only_records, NULL);
    store_aclient_t *c;
    /* a plain client (as torch's): worker keys work */
    res_t r = {0};
    CHECK_EQ_INT(store_aclient_connect(loop, "127.0.0.1", store_server_port(srv), 3000, on_conn,
                                       &r, &c), 0);
    spin(&r.done, 3000);
    CHECK_EQ_INT(r.status, 0);
    res_t s = {0}, g = {0}, a = {0};
    store_aclient_set(c, "user/key", "v", 1, on_reply, &s);
    store_aclient_get(c, "user/key", on_reply, &g);
    store_aclient_add(c, "user/n", 2, on_reply, &a);
    spin(&a.done, 3000);
    CHECK_EQ_STR(g.val, "v");
    CHECK_EQ_INT(a.status, 0);
    /* a read of podrun's keys closes it with one line naming the peer */
    int before = nlogs;
    res_t p = {0};
    store_aclient_get(c, "podrun/j/status", on_reply, &p);
    spin(&p.done, 3000);
    CHECK(p.status < 0);
    CHECK_EQ_INT(nlogs, before + 1);
    CHECK(strstr(lastlog, "127.0.0.1:") && strstr(lastlog, "did not authenticate"));
    store_aclient_close(c);
    store_server_guard(srv, NULL, NULL, NULL);
}

/* Refuses every write under podrun/, saying why for another run's keys. */
static int other_run(void *arg, const char *key, size_t klen, char *why, size_t cap)
{
    (void)arg;
    if (klen > 13 && memcmp(key, "podrun/other/", 13) == 0)
        snprintf(why, cap, "a node of run 'other' reached this job store");
    return 0;
}

/* A refusal the host can explain is logged with its reason, beside the peer's address. */
static void test_refusal_reason(void)
{
    store_server_guard(srv, NULL, other_run, NULL);
    store_aclient_t *c;
    res_t r = {0};
    CHECK_EQ_INT(store_aclient_connect(loop, "127.0.0.1", store_server_port(srv), 3000, on_conn,
                                       &r, &c), 0);
    spin(&r.done, 3000);
    CHECK_EQ_INT(r.status, 0);
    int before = nlogs;
    res_t w = {0}, after = {0};
    store_aclient_set(c, "podrun/other/n/abc/join/0", "", 0, on_reply, &w);
    store_aclient_get(c, "user/key", on_reply, &after);
    spin(&after.done, 3000);
    CHECK(after.status < 0);
    CHECK_EQ_INT(nlogs, before + 1);
    CHECK(strstr(lastlog, "from 127.0.0.1:") &&
          strstr(lastlog, "refused: a node of run 'other' reached this job store"));
    store_aclient_close(c);
    store_server_guard(srv, NULL, NULL, NULL);
}

static void test_allow(void)
{
    acl_t acl = {0};
    char err[200];
    CHECK_EQ_INT(acl_add_list(&acl, "10.0.0.0/8", "test", NULL, err, sizeof err), 0);
    /* 127.0.0.1 -> 127.0.0.1 is this machine reaching its own store: always in */
    store_server_allow(srv, &acl);
    store_aclient_t *c;
    CHECK_EQ_INT(try_connect(NULL, &c), 0);
    store_aclient_close(c);
    /* from 127.0.0.2, outside the list: closed at accept with one line */
    int before = nlogs;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    dst.sin_port = htons(store_server_port(srv));
    CHECK_EQ_INT(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    CHECK_EQ_INT(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
    int logged = 0;
    for (int i = 0; i < 100 && nlogs == before; i++)
        spin(&logged, 20);
    CHECK_EQ_INT(nlogs, before + 1);
    CHECK(strstr(lastlog, "refused a connection from 127.0.0.2:") &&
          strstr(lastlog, "allow-list"));
    /* told so (WIRE_REFUSED, 4 bytes), then closed */
    unsigned char b[8];
    CHECK_EQ_INT((int)read(fd, b, sizeof b), 4);
    CHECK_EQ_INT((int)(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24), (int)WIRE_REFUSED);
    CHECK(read(fd, b, 1) <= 0);
    close(fd);
    /* podrun's client from there (store_aclient_source) hears the refusal as what it is */
    res_t r = {0};
    CHECK_EQ_INT(store_aclient_connect(loop, "127.0.0.1", store_server_port(srv), 600, on_conn,
                                       &r, &c), 0);
    CHECK_EQ_INT(store_aclient_source(c, "127.0.0.2"), 0);
    spin(&r.done, 5000);
    CHECK(r.done);
    CHECK_EQ_INT(r.status, PODRUN_EREFUSED);
    /* the list is the caller's: once it holds the source, the source is in */
    CHECK_EQ_INT(acl_add(&acl, "127.0.0.2"), 0);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ_INT(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    CHECK_EQ_INT(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
    before = nlogs;
    spin(&logged, 100);
    CHECK_EQ_INT(nlogs, before);
    close(fd);
    store_server_allow(srv, NULL);
    acl_free(&acl);
}

/* Whether the store has answered fd and closed it: WIRE_REFUSED's 4 bytes, then EOF. */
static int refused_and_closed(int fd)
{
    unsigned char b[8];
    ssize_t n;
    while ((n = recv(fd, b, sizeof b, MSG_DONTWAIT)) > 0)
        ;
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void on_closed_flag(void *arg)
{
    *(int *)arg = 1;
}

/* A scanner's burst of 100 connections from outside the list: each is refused, one line is
 * logged; the rest are counted for the summary (test_hosting.py waits for it). */
static void test_allow_burst(void)
{
    acl_t acl = {0};
    char err[200];
    CHECK_EQ_INT(acl_add_list(&acl, "10.0.0.0/8", "test", NULL, err, sizeof err), 0);
    podrun_log_t log = {on_log, NULL};
    store_server_t *s2;
    CHECK_EQ_INT(store_server_start(loop, "127.0.0.1", 0, NULL, &log, &s2), 0);
    store_server_allow(s2, &acl);
    int before = nlogs, fds[100], closed = 0;
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    dst.sin_port = htons(store_server_port(s2));
    for (int i = 0; i < 100; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        CHECK_EQ_INT(bind(fds[i], (struct sockaddr *)&src, sizeof src), 0);
        CHECK_EQ_INT(connect(fds[i], (struct sockaddr *)&dst, sizeof dst), 0);
    }
    int done[100] = {0};
    for (int round = 0; round < 3000 && closed < 100; round++) {   /* 30 s at most */
        int never = 0;
        spin(&never, 10);
        for (int i = 0; i < 100; i++)
            if (!done[i] && refused_and_closed(fds[i]))
                done[i] = 1, closed++;
    }
    CHECK_EQ_INT(closed, 100);
    CHECK_EQ_INT(nlogs, before + 1);
    CHECK(strstr(lastlog, "refused a connection from 127.0.0.2:") &&
          strstr(lastlog, "more refusals are counted, one line per 10 s"));
    for (int i = 0; i < 100; i++)
        close(fds[i]);
    /* closing the server closes the summary's timer with it */
    int gone = 0;
    store_server_close(s2, on_closed_flag, &gone);
    spin(&gone, 2000);
    CHECK(gone);
    acl_free(&acl);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    podrun_log_t log = {on_log, NULL};
    CHECK_EQ_INT(store_server_start(loop, "127.0.0.1", 0, NULL, &log, &srv), 0);
    RUN(test_handshake);
    RUN(test_unauthenticated);
    RUN(test_refusal_reason);
    RUN(test_allow);
    RUN(test_allow_burst);
    int closed = 0;
    store_server_close(srv, NULL, NULL);
    spin(&closed, 200);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    return check_result();
}
