/* tests/unit/rdzv/base/test_http.c — the HTTP(S) client on the loop against a real server.
 *
 * The peer is tests/fakes/http_server.py (Python's http.server + ssl), started twice by this test
 * (HTTPS with a CA made by the openssl CLI in a temporary directory, and plain HTTP) and stopped
 * by its PID at the end. argv[1] is the server script. Each test runs on a fresh loop and client
 * and ends by closing both: uv_loop_close must find no handle left. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "rdzv/base/http.h"

static const char *server_script;
static char pki[64];
static int tls_port, plain_port;
static pid_t servers[2];

static uv_loop_t loop;
static http_client_t *client;

/* ---- the server processes ---- */

static int spawn_server(int plain, pid_t *pid)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    *pid = fork();
    if (*pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/usr/bin/python3", "python3", server_script, "--pki", pki,
              plain ? "--plain" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[64] = {0};
    size_t n = 0;
    while (n < sizeof line - 1) {
        ssize_t k = read(fds[0], line + n, 1);
        if (k <= 0 || line[n] == '\n')
            break;
        n++;
    }
    close(fds[0]);
    int port = 0;
    if (sscanf(line, "PORT %d", &port) != 1)
        return -1;
    return port;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void servers_stop(void)
{
    for (int i = 0; i < 2; i++)
        if (servers[i] > 0) {
            kill(servers[i], SIGTERM);
            waitpid(servers[i], NULL, 0);
        }
    if (pki[0])
        nftw(pki, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static char *read_file(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", pki, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 65536);
    *len = fread(buf, 1, 65535, f);
    fclose(f);
    return buf;
}

static const char *pki_path(const char *name)
{
    static char paths[8][256];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 256, "%s/%s", pki, name);
    return p;
}

/* ---- libcurl loaded at run time (rdzv/base/curl_dl.c) ---- */

/* Whether a libcurl is mapped into this process, read from /proc/self/maps line by line. */
static int libcurl_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "/libcurl") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* libcurl is not mapped before the first client, and then it is, with every call going through
 * to it (the tests below). */
static void test_library_loading(void)
{
    CHECK(!libcurl_mapped());
    uv_loop_t l;
    http_client_t *c;
    uv_loop_init(&l);
    CHECK_EQ_INT(http_client_new(&l, &c), 0);
    CHECK(http_library_error() == NULL);
    CHECK(libcurl_mapped());
    http_client_close(c);
    uv_run(&l, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&l), 0);
}

/* ---- per-test loop and client ---- */

static void setup(void)
{
    uv_loop_init(&loop);
    CHECK_EQ_INT(http_client_new(&loop, &client), 0);
}

static void teardown(void)
{
    if (client)
        http_client_close(client);
    client = NULL;
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* What one request did. */
struct call {
    int done, status, ndata;
    long http_status;
    char body[70000];
    size_t body_len;
    char error[256];
    char data[4096];     /* pieces or lines joined by '|' */
    int cancel_after;    /* cancel in on_data after this many pieces (0: never) */
    int fail_with;       /* on_data returns this on its first call */
    int close_after;     /* close the client in on_data after this many pieces */
    http_request_t *req;
    void (*on_first)(struct call *);
};

static int on_data(http_request_t *r, const char *p, size_t n, void *arg)
{
    struct call *c = arg;
    c->ndata++;
    size_t used = strlen(c->data);
    if (used + n + 2 < sizeof c->data) {
        if (used)
            strcat(c->data, "|");
        strncat(c->data, p, n);
    }
    if (c->ndata == 1 && c->on_first)
        c->on_first(c);
    if (c->fail_with)
        return c->fail_with;
    if (c->cancel_after && c->ndata == c->cancel_after)
        http_request_cancel(r);
    if (c->close_after && c->ndata == c->close_after) {
        http_client_close(client);
        client = NULL;
    }
    return 0;
}

static void on_done(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    struct call *c = arg;
    c->done++;
    c->status = res->status;
    c->http_status = res->http_status;
    snprintf(c->error, sizeof c->error, "%s", res->error);
    c->body_len = res->body_len;
    if (res->body && res->body_len < sizeof c->body)
        memcpy(c->body, res->body, res->body_len + 1);
    if (!res->body)
        c->body[0] = '\0';
}

static int watchdog_fired;
static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    watchdog_fired = 1;
}

/* Runs the loop until *flag is set, for at most 15 s. */
static void run_until(const int *flag)
{
    uv_timer_t wd;
    uv_timer_init(&loop, &wd);
    watchdog_fired = 0;
    uv_timer_start(&wd, on_watchdog, 15000, 0);
    while (!*flag && !watchdog_fired)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK(!watchdog_fired);
    uv_close((uv_handle_t *)&wd, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

static void on_noop(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop for ms milliseconds. */
static void run_for(int ms)
{
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, on_noop, (uint64_t)ms, 0);
    uint64_t end = uv_now(&loop) + (uint64_t)ms;
    while (uv_now(&loop) < end)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

/* Runs the loop until *count reaches n, for at most 15 s. */
static void run_until_count(const int *count, int n)
{
    for (int waited = 0; *count < n && waited < 15000; waited += 20)
        run_for(20);
    CHECK(*count >= n);
}

static char *url(int tls, const char *path)
{
    static char bufs[4][256];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 256, "%s://localhost:%d%s", tls ? "https" : "http", tls ? tls_port : plain_port,
             path);
    return b;
}

static struct http_tls tls_ca(void)
{
    struct http_tls t = {0};
    t.ca_file = pki_path("ca.crt");
    return t;
}

static int start(struct call *c, struct http_request_opts o)
{
    o.on_done = on_done;
    o.arg = c;
    if (o.mode != HTTP_BODY_BUFFER)
        o.on_data = on_data;
    return http_request_start(client, &o, &c->req);
}

/* ---- tests ---- */

static void test_get_https(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    struct http_tls t = tls_ca();
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(1, "/hello"), .tls = &t}), 0);
    CHECK_EQ_INT(http_client_active(client), 1);
    run_until(&c.done);
    CHECK_EQ_INT(c.status, 0);
    CHECK_EQ_INT(c.http_status, 200);
    CHECK_EQ_STR(c.body, "hello world\n");
    CHECK_EQ_INT(c.body_len, 12);
    CHECK_EQ_STR(c.error, "");
    CHECK_EQ_INT(http_client_active(client), 0);
    teardown();
}

static void test_post_with_token_and_headers(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    struct http_tls t = tls_ca();
    const char *hdrs[] = {"X-Podrun: yes", NULL};
    const char body[] = "{\"key\":\"a2V5\"}";
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.method = "POST", .url = url(1, "/echo"),
                                                      .tls = &t, .bearer_token = "s3cret",
                                                      .headers = hdrs, .body = body,
                                                      .body_len = strlen(body)}), 0);
    run_until(&c.done);
    CHECK_EQ_INT(c.status, 0);
    CHECK_EQ_INT(c.http_status, 200);
    CHECK(strstr(c.body, "\"method\": \"POST\""));
    CHECK(strstr(c.body, "\"auth\": \"Bearer s3cret\""));
    CHECK(strstr(c.body, "\"content_type\": \"application/json\""));
    CHECK(strstr(c.body, "\"expect\": null"));
    CHECK(strstr(c.body, "\"body\": \"{\\\"key\\\":\\\"a2V5\\\"}\""));
    /* PUT with an empty body and a content type of the caller's */
    static struct call d;
    memset(&d, 0, sizeof d);
    CHECK_EQ_INT(start(&d, (struct http_request_opts){.method = "PUT", .url = url(1, "/echo"),
                                                      .tls = &t, .body = "", .body_len = 0,
                                                      .content_type = "text/plain"}), 0);
    run_until(&d.done);
    CHECK(strstr(d.body, "\"method\": \"PUT\""));
    CHECK(strstr(d.body, "\"content_type\": \"text/plain\""));
    CHECK(strstr(d.body, "\"auth\": null"));
    teardown();
}

static void test_plain_http(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.method = "DELETE",
                                                      .url = url(0, "/echo")}), 0);
    run_until(&c.done);
    CHECK_EQ_INT(c.status, 0);
    CHECK_EQ_INT(c.http_status, 200);
    CHECK(strstr(c.body, "\"method\": \"DELETE\""));
    teardown();
}

static void test_ca_in_memory_and_client_certs(void)
{
    setup();
    size_t ca_len = 0, cert_len = 0, key_len = 0;
    char *ca = read_file("ca.crt", &ca_len);
    char *cert = read_file("client.crt", &cert_len);
    char *key = read_file("client.key", &key_len);
    CHECK(ca && cert && key);
    if (!ca || !cert || !key)
        return;
    static struct call anon, files, blobs;
    memset(&anon, 0, sizeof anon);
    memset(&files, 0, sizeof files);
    memset(&blobs, 0, sizeof blobs);
    struct http_tls t0 = {.ca_pem = ca, .ca_pem_len = ca_len};
    struct http_tls t1 = {.ca_file = pki_path("ca.crt"), .cert_file = pki_path("client.crt"),
                          .key_file = pki_path("client.key")};
    struct http_tls t2 = {.ca_pem = ca, .ca_pem_len = ca_len, .cert_pem = cert,
                          .cert_pem_len = cert_len, .key_pem = key, .key_pem_len = key_len};
    CHECK_EQ_INT(start(&anon, (struct http_request_opts){.url = url(1, "/whoami"), .tls = &t0}),
                 0);
    CHECK_EQ_INT(start(&files, (struct http_request_opts){.url = url(1, "/whoami"), .tls = &t1}),
                 0);
    /* the blobs are copied at start: the caller's buffers may go at once */
    CHECK_EQ_INT(start(&blobs, (struct http_request_opts){.url = url(1, "/whoami"), .tls = &t2}),
                 0);
    memset(cert, 0, cert_len);
    memset(key, 0, key_len);
    run_until(&anon.done);
    run_until(&files.done);
    run_until(&blobs.done);
    CHECK_EQ_INT(anon.status, 0);
    CHECK_EQ_STR(anon.body, "anonymous");
    CHECK_EQ_INT(files.status, 0);
    CHECK_EQ_STR(files.body, "podrun-test-client");
    CHECK_EQ_INT(blobs.status, 0);
    CHECK_EQ_STR(blobs.body, "podrun-test-client");
    free(ca);
    free(cert);
    free(key);
    teardown();
}

static void test_tls_verify_failure(void)
{
    setup();
    static struct call other, system_cas, insecure;
    memset(&other, 0, sizeof other);
    memset(&system_cas, 0, sizeof system_cas);
    memset(&insecure, 0, sizeof insecure);
    struct http_tls t = {.ca_file = pki_path("other-ca.crt")};
    struct http_tls ti = {.ca_file = pki_path("other-ca.crt"), .insecure = 1};
    CHECK_EQ_INT(start(&other, (struct http_request_opts){.url = url(1, "/hello"), .tls = &t}), 0);
    CHECK_EQ_INT(start(&system_cas, (struct http_request_opts){.url = url(1, "/hello")}), 0);
    CHECK_EQ_INT(start(&insecure, (struct http_request_opts){.url = url(1, "/hello"), .tls = &ti}),
                 0);
    run_until(&other.done);
    run_until(&system_cas.done);
    run_until(&insecure.done);
    CHECK_EQ_INT(other.status, -EKEYREJECTED);
    CHECK_EQ_INT(other.http_status, 0);
    CHECK(strstr(other.error, "certificate") != NULL);
    CHECK_EQ_INT(system_cas.status, -EKEYREJECTED);
    CHECK_EQ_INT(insecure.status, 0);
    CHECK_EQ_STR(insecure.body, "hello world\n");
    /* a CA file that does not exist is the caller's mistake, not the server's */
    static struct call missing;
    memset(&missing, 0, sizeof missing);
    struct http_tls tm = {.ca_file = "/nonexistent/ca.crt"};
    CHECK_EQ_INT(start(&missing, (struct http_request_opts){.url = url(1, "/hello"), .tls = &tm}),
                 0);
    run_until(&missing.done);
    CHECK_EQ_INT(missing.status, -EINVAL);
    teardown();
}

static int closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

static void test_connection_refused(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/x", closed_port());
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = u}), 0);
    run_until(&c.done);
    CHECK_EQ_INT(c.status, -ECONNREFUSED);
    CHECK_EQ_INT(c.http_status, 0);
    CHECK(c.error[0] != '\0');
    teardown();
}

static struct call release_call;
static void send_release(struct call *c)
{
    (void)c;
    /* The first line is here while the server still holds the rest back: only now is it told
     * to go on. A client that waited for the whole body would never get here. */
    CHECK_EQ_INT(c->done, 0);
    struct http_tls t = tls_ca();
    memset(&release_call, 0, sizeof release_call);
    CHECK_EQ_INT(start(&release_call, (struct http_request_opts){.url = url(1, "/release"),
                                                                 .tls = &t}), 0);
}

static void test_stream_incremental(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    c.on_first = send_release;
    struct http_tls t = tls_ca();
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(1, "/stream"), .tls = &t,
                                                      .mode = HTTP_BODY_LINES}), 0);
    run_until(&c.done);
    run_until(&release_call.done);
    CHECK_EQ_INT(c.status, 0);
    CHECK_EQ_INT(c.http_status, 200);
    CHECK_EQ_STR(c.data, "first|second|third");
    CHECK_EQ_INT(c.body_len, 0);
    CHECK_EQ_INT(release_call.http_status, 200);
    teardown();
}

static void test_lines_across_chunks(void)
{
    setup();
    static struct call lines, chunks;
    memset(&lines, 0, sizeof lines);
    memset(&chunks, 0, sizeof chunks);
    CHECK_EQ_INT(start(&lines, (struct http_request_opts){.url = url(0, "/split"),
                                                          .mode = HTTP_BODY_LINES}), 0);
    CHECK_EQ_INT(start(&chunks, (struct http_request_opts){.url = url(0, "/split"),
                                                           .mode = HTTP_BODY_CHUNKS}), 0);
    run_until(&lines.done);
    run_until(&chunks.done);
    CHECK_EQ_STR(lines.data, "abcd|efgh");
    CHECK_EQ_INT(lines.ndata, 2);
    CHECK_EQ_INT(chunks.status, 0);
    /* pieces as they came, nothing lost or added */
    char joined[64] = {0};
    size_t j = 0;
    for (const char *p = chunks.data; *p && j < sizeof joined - 1; p++)
        if (*p != '|')
            joined[j++] = *p;
    CHECK_EQ_STR(joined, "abcd\nefgh\n");
    CHECK(chunks.ndata >= 1);
    teardown();
}

static void test_timeouts(void)
{
    setup();
    static struct call idle, overall;
    memset(&idle, 0, sizeof idle);
    memset(&overall, 0, sizeof overall);
    CHECK_EQ_INT(start(&idle, (struct http_request_opts){.url = url(0, "/silent"),
                                                         .idle_timeout_ms = 300,
                                                         .mode = HTTP_BODY_LINES}), 0);
    CHECK_EQ_INT(start(&overall, (struct http_request_opts){.url = url(0, "/nothing"),
                                                            .timeout_ms = 300}), 0);
    run_until(&idle.done);
    run_until(&overall.done);
    CHECK_EQ_INT(idle.status, -ETIMEDOUT);
    CHECK_EQ_INT(idle.http_status, 200);
    CHECK(strstr(idle.error, "300 ms") != NULL);
    CHECK_EQ_INT(overall.status, -ETIMEDOUT);
    CHECK_EQ_INT(overall.http_status, 0);
    /* the idle timer restarts with every byte: a stream that keeps talking is not cut */
    static struct call busy;
    memset(&busy, 0, sizeof busy);
    busy.cancel_after = 25;
    CHECK_EQ_INT(start(&busy, (struct http_request_opts){.url = url(0, "/forever"),
                                                         .idle_timeout_ms = 200,
                                                         .mode = HTTP_BODY_LINES}), 0);
    run_until_count(&busy.ndata, 25);
    CHECK_EQ_INT(busy.done, 0);
    CHECK_EQ_INT(busy.ndata, 25);
    teardown();
}

static void test_cancel_mid_stream(void)
{
    setup();
    static struct call c, check;
    memset(&c, 0, sizeof c);
    memset(&check, 0, sizeof check);
    c.cancel_after = 3;
    struct http_tls t = tls_ca();
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(1, "/forever"), .tls = &t,
                                                      .mode = HTTP_BODY_LINES}), 0);
    run_until_count(&c.ndata, 3);
    CHECK_EQ_INT(http_client_active(client), 0);
    run_for(200);
    CHECK_EQ_INT(c.ndata, 3);   /* nothing after the cancel */
    CHECK_EQ_INT(c.done, 0);    /* and no completion */
    CHECK_EQ_STR(c.data, "tick 0|tick 1|tick 2");
    /* the server saw the connection go */
    CHECK_EQ_INT(start(&check, (struct http_request_opts){.url = url(1, "/forever_closed"),
                                                          .tls = &t}), 0);
    run_until(&check.done);
    CHECK_EQ_STR(check.body, "closed");

    /* cancelled from outside any callback of the request */
    static struct call d;
    memset(&d, 0, sizeof d);
    CHECK_EQ_INT(start(&d, (struct http_request_opts){.url = url(1, "/forever"), .tls = &t,
                                                      .mode = HTTP_BODY_LINES}), 0);
    run_until_count(&d.ndata, 2);
    http_request_cancel(d.req);
    int seen = d.ndata;
    run_for(150);
    CHECK_EQ_INT(d.ndata, seen);
    CHECK_EQ_INT(d.done, 0);
    /* and before it ever reached the server */
    static struct call e;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(start(&e, (struct http_request_opts){.url = url(1, "/hello"), .tls = &t}), 0);
    http_request_cancel(e.req);
    run_for(100);
    CHECK_EQ_INT(e.done, 0);
    teardown();
}

static void test_oversize(void)
{
    setup();
    static struct call big, fits, line, plenty;
    memset(&big, 0, sizeof big);
    memset(&fits, 0, sizeof fits);
    memset(&line, 0, sizeof line);
    memset(&plenty, 0, sizeof plenty);
    CHECK_EQ_INT(start(&big, (struct http_request_opts){.url = url(0, "/big?n=65537"),
                                                        .max_body = 65536}), 0);
    CHECK_EQ_INT(start(&fits, (struct http_request_opts){.url = url(0, "/big?n=65536"),
                                                         .max_body = 65536}), 0);
    CHECK_EQ_INT(start(&line, (struct http_request_opts){.url = url(0, "/longline?n=200000"),
                                                         .max_body = 65536,
                                                         .mode = HTTP_BODY_LINES}), 0);
    /* a stream far larger than the bound is fine when each line is within it */
    plenty.cancel_after = 40;
    CHECK_EQ_INT(start(&plenty, (struct http_request_opts){.url = url(0, "/forever"),
                                                           .max_body = 16,
                                                           .mode = HTTP_BODY_LINES}), 0);
    run_until(&big.done);
    run_until(&fits.done);
    run_until(&line.done);
    CHECK_EQ_INT(big.status, -EMSGSIZE);
    CHECK(strstr(big.error, "65536 bytes") != NULL);
    CHECK_EQ_INT(fits.status, 0);
    CHECK_EQ_INT(fits.body_len, 65536);
    CHECK_EQ_INT(line.status, -EMSGSIZE);
    CHECK_EQ_STR(line.data, "ok");
    run_until_count(&plenty.ndata, 40);
    CHECK_EQ_INT(plenty.done, 0);
    teardown();
}

static void test_error_status_while_streaming(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(0, "/status/410"),
                                                      .mode = HTTP_BODY_LINES}), 0);
    run_until(&c.done);
    CHECK_EQ_INT(c.status, 0);
    CHECK_EQ_INT(c.http_status, 410);
    CHECK_EQ_INT(c.ndata, 0);           /* the error object is not a stream item */
    CHECK_EQ_STR(c.body, "{\"code\": 410}");
    teardown();
}

static void test_reader_error(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    c.fail_with = -EPROTO;
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(0, "/forever"),
                                                      .mode = HTTP_BODY_LINES}), 0);
    run_until(&c.done);
    CHECK_EQ_INT(c.ndata, 1);
    CHECK_EQ_INT(c.status, -EPROTO);
    teardown();
}

static struct call chained;
static void start_chained(struct call *c)
{
    (void)c;
    memset(&chained, 0, sizeof chained);
    CHECK_EQ_INT(start(&chained, (struct http_request_opts){.url = url(0, "/hello")}), 0);
}

static void test_start_from_stream_callback(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    c.on_first = start_chained;
    c.cancel_after = 1;
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(0, "/forever"),
                                                      .mode = HTTP_BODY_LINES}), 0);
    run_until(&chained.done);
    CHECK_EQ_INT(chained.status, 0);
    CHECK_EQ_STR(chained.body, "hello world\n");
    CHECK_EQ_INT(c.done, 0);
    teardown();
}

static void test_close_with_requests_in_flight(void)
{
    setup();
    static struct call a, b, d;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&d, 0, sizeof d);
    struct http_tls t = tls_ca();
    CHECK_EQ_INT(start(&a, (struct http_request_opts){.url = url(1, "/forever"), .tls = &t,
                                                      .mode = HTTP_BODY_LINES}), 0);
    CHECK_EQ_INT(start(&b, (struct http_request_opts){.url = url(0, "/nothing")}), 0);
    run_until_count(&a.ndata, 2);
    http_client_close(client);
    client = NULL;
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(a.done + b.done, 0);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);

    /* closed from inside a stream callback */
    setup();
    d.close_after = 2;
    CHECK_EQ_INT(start(&d, (struct http_request_opts){.url = url(0, "/forever"),
                                                      .mode = HTTP_BODY_LINES}), 0);
    CHECK_EQ_INT(start(&b, (struct http_request_opts){.url = url(0, "/nothing")}), 0);
    uv_run(&loop, UV_RUN_DEFAULT);     /* returns once every handle is closed */
    CHECK_EQ_INT(d.ndata, 2);
    CHECK_EQ_INT(d.done + b.done, 0);
    CHECK(client == NULL);
    teardown();
}

static void test_many_at_once(void)
{
    setup();
    static struct call c[24];
    memset(c, 0, sizeof c);
    struct http_tls t = tls_ca();
    for (int i = 0; i < 24; i++)
        CHECK_EQ_INT(start(&c[i], (struct http_request_opts){.url = url(i % 2, "/hello"),
                                                             .tls = &t}), 0);
    for (int i = 0; i < 24; i++) {
        run_until(&c[i].done);
        CHECK_EQ_INT(c[i].http_status, 200);
    }
    /* and again, on the kept-alive connections */
    for (int i = 0; i < 24; i++) {
        memset(&c[i], 0, sizeof c[i]);
        CHECK_EQ_INT(start(&c[i], (struct http_request_opts){.url = url(i % 2, "/hello"),
                                                             .tls = &t}), 0);
    }
    for (int i = 0; i < 24; i++) {
        run_until(&c[i].done);
        CHECK_EQ_STR(c[i].body, "hello world\n");
    }
    teardown();
}

static void test_bad_options(void)
{
    setup();
    static struct call c;
    memset(&c, 0, sizeof c);
    const char *bad[] = {"X-Evil: a\r\nX-Injected: b", NULL};
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = NULL}), -EINVAL);
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(0, "/"), .headers = bad}),
                 -EINVAL);
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = url(0, "/"),
                                                      .bearer_token = "tok\n"}), -EINVAL);
    struct http_request_opts o = {.url = url(0, "/"), .mode = HTTP_BODY_LINES, .on_done = on_done};
    CHECK_EQ_INT(http_request_start(client, &o, NULL), -EINVAL);   /* streaming needs on_data */
    CHECK_EQ_INT(http_client_active(client), 0);
    /* a URL libcurl cannot use is reported through on_done */
    CHECK_EQ_INT(start(&c, (struct http_request_opts){.url = "ftp://127.0.0.1/x"}), 0);
    run_until(&c.done);
    CHECK_EQ_INT(c.status, -EINVAL);
    teardown();
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_http tests/fakes/http_server.py\n");
        return 2;
    }
    server_script = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(pki, sizeof pki, "/tmp/podrun-http-XXXXXX");
    if (!mkdtemp(pki)) {
        perror("mkdtemp");
        return 1;
    }
    tls_port = spawn_server(0, &servers[0]);
    plain_port = spawn_server(1, &servers[1]);
    if (tls_port <= 0 || plain_port <= 0) {
        fprintf(stderr, "test_http: the test server did not start\n");
        servers_stop();
        return 1;
    }
    RUN(test_library_loading);
    RUN(test_get_https);
    RUN(test_post_with_token_and_headers);
    RUN(test_plain_http);
    RUN(test_ca_in_memory_and_client_certs);
    RUN(test_tls_verify_failure);
    RUN(test_connection_refused);
    RUN(test_stream_incremental);
    RUN(test_lines_across_chunks);
    RUN(test_timeouts);
    RUN(test_cancel_mid_stream);
    RUN(test_oversize);
    RUN(test_error_status_while_streaming);
    RUN(test_reader_error);
    RUN(test_start_from_stream_callback);
    RUN(test_close_with_requests_in_flight);
    RUN(test_many_at_once);
    RUN(test_bad_options);
    servers_stop();
    return check_result();
}
