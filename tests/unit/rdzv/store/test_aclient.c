/* tests/unit/rdzv/store/test_aclient.c — the libuv client and the server on one loop: pipelined
 * requests, waits with timeouts (CANCEL_WAIT keeps the FIFO in sync), connect backoff, loss of
 * the server, and the server's in-process hooks (observer, direct writes, delete_except). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
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

static store_aclient_t *connect_ok(uint16_t port)
{
    res_t r = {0};
    store_aclient_t *c = NULL;
    CHECK_EQ_INT(store_aclient_connect(loop, "127.0.0.1", port, 3000, on_conn, &r, &c), 0);
    CHECK_EQ_INT(r.done, 0); /* never from inside the call */
    spin(&r.done, 5000);
    CHECK(r.done && r.status == 0);
    return c;
}

static void test_ops(void)
{
    store_aclient_t *c = connect_ok(store_server_port(srv));
    res_t s = {0}, g = {0}, a = {0}, d = {0};
    seq = 0;
    CHECK_EQ_INT(store_aclient_set(c, "/k", "v1", 2, on_reply, &s), 0);
    CHECK_EQ_INT(store_aclient_get(c, "/k", on_reply, &g), 0);
    CHECK_EQ_INT(store_aclient_add(c, "/n", 5, on_reply, &a), 0);
    CHECK_EQ_INT(store_aclient_delete(c, "/k", on_reply, &d), 0);
    spin(&d.done, 3000);
    CHECK(s.done && s.status == 0);
    CHECK_EQ_STR(g.val, "v1");
    CHECK_EQ_INT(a.num, 5);
    CHECK_EQ_INT(d.num, 1);
    CHECK(s.order < g.order && g.order < a.order && a.order < d.order); /* FIFO */
    store_aclient_close(c);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void test_wait(void)
{
    store_aclient_t *c = connect_ok(store_server_port(srv));
    const char *k[] = {"/aw"};
    res_t w1 = {0}, g = {0}, w2 = {0};
    seq = 0;
    CHECK_EQ_INT(store_aclient_wait(c, k, 1, 150, on_reply, &w1), 0);
    CHECK_EQ_INT(store_aclient_get(c, "/n", on_reply, &g), 0); /* held behind the wait */
    spin(&g.done, 3000);
    CHECK_EQ_INT(w1.status, PODRUN_ETIMEDOUT);
    CHECK_EQ_STR(g.val, "5");
    CHECK(w1.order < g.order);
    /* an in-process write wakes a remote waiter */
    CHECK_EQ_INT(store_aclient_wait(c, k, 1, -1, on_reply, &w2), 0);
    spin(&w2.done, 100);
    CHECK_EQ_INT(w2.done, 0);
    CHECK_EQ_INT(store_server_set(srv, "/aw", 3, "yes", 3), 0);
    spin(&w2.done, 3000);
    CHECK(w2.done && w2.status == 0);
    const char *v;
    size_t vl;
    CHECK_EQ_INT(store_server_get(srv, "/aw", 3, &v, &vl), 1);
    CHECK(vl == 3 && memcmp(v, "yes", 3) == 0);
    store_aclient_close(c);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* One connection carries a long WAIT, the GET of its key, records and heartbeats: the GET sent
 * with the WAIT comes back with it, a SET behind it is applied at once and a PING's echo is not
 * held up by it. */
static void test_pipelined_behind_wait(void)
{
    store_aclient_t *c = connect_ok(store_server_port(srv));
    const char *k[] = {"/pw"};
    res_t w = {0}, g = {0}, s = {0}, p = {0}, g2 = {0};
    seq = 0;
    CHECK_EQ_INT(store_aclient_wait(c, k, 1, -1, on_reply, &w), 0);
    CHECK_EQ_INT(store_aclient_get(c, "/pw", on_reply, &g), 0);
    CHECK_EQ_INT(store_aclient_set(c, "/pw-side", "x", 1, on_reply, &s), 0);
    CHECK_EQ_INT(store_aclient_ping(c, on_reply, &p), 0);
    spin(&p.done, 3000);
    CHECK(p.done && p.status == 0);
    CHECK_EQ_INT(w.done + g.done, 0);
    uint64_t heard = store_aclient_last_heard(c);
    CHECK(heard > 0);
    const char *v;
    size_t vl;
    CHECK_EQ_INT(store_server_get(srv, "/pw-side", 8, &v, &vl), 1); /* applied already */
    CHECK_EQ_INT(store_server_set(srv, "/pw", 3, "now", 3), 0);
    spin(&g.done, 3000);
    CHECK(w.done && w.status == 0);
    CHECK_EQ_STR(g.val, "now");
    CHECK(p.order < w.order && w.order < g.order);
    /* and the connection stays in step: a later GET gets its own answer */
    CHECK_EQ_INT(store_aclient_get(c, "/pw-side", on_reply, &g2), 0);
    spin(&g2.done, 3000);
    CHECK_EQ_STR(g2.val, "x");
    store_aclient_close(c);
    uv_run(loop, UV_RUN_NOWAIT);
}

static int writes, closes;
static uint64_t last_conn;
static char last_key[64], last_val[64];

static int obs_consume; /* what obs_write answers: 1 takes the write, dropping the key */

static int obs_write(void *arg, uint64_t conn, const char *key, size_t klen, const char *val,
                     size_t vlen)
{
    (void)arg;
    writes++;
    last_conn = conn;
    snprintf(last_key, sizeof last_key, "%.*s", (int)klen, key);
    snprintf(last_val, sizeof last_val, "%.*s", val ? (int)vlen : 6, val ? val : "(null)");
    return obs_consume;
}

static void obs_close(void *arg, uint64_t conn, int err)
{
    (void)arg, (void)err;
    if (conn == last_conn)
        closes++;
}

static void test_observer(void)
{
    store_server_observe(srv, "podrun/", obs_write, obs_close, NULL);
    store_aclient_t *c = connect_ok(store_server_port(srv));
    res_t a = {0}, b = {0}, d = {0};
    store_aclient_set(c, "/other", "x", 1, on_reply, &a);
    store_aclient_add(c, "podrun/count", 2, on_reply, &b);
    spin(&b.done, 3000);
    CHECK_EQ_INT(writes, 1);
    CHECK(last_conn != 0);
    CHECK_EQ_STR(last_key, "podrun/count");
    CHECK_EQ_STR(last_val, "2");
    store_aclient_delete(c, "podrun/count", on_reply, &d);
    spin(&d.done, 3000);
    CHECK_EQ_INT(writes, 2);
    CHECK_EQ_STR(last_val, "(null)");
    store_server_set(srv, "podrun/inproc", 13, "x", 1); /* in-process writes are not reported */
    CHECK_EQ_INT(writes, 2);
    /* a write the observer takes is reported with its value, then gone from the key space */
    const char *v;
    size_t vl;
    obs_consume = 1;
    res_t e = {0}, f = {0};
    store_aclient_add(c, "podrun/hb", 5, on_reply, &e);
    spin(&e.done, 3000);
    CHECK_EQ_INT(writes, 3);
    CHECK_EQ_STR(last_val, "5");
    CHECK_EQ_INT(store_server_get(srv, "podrun/hb", 9, &v, &vl), 0);
    store_aclient_add(c, "podrun/hb", 5, on_reply, &f);   /* counts from nothing again */
    spin(&f.done, 3000);
    CHECK_EQ_STR(last_val, "5");
    obs_consume = 0;
    store_aclient_close(c);
    for (int i = 0; i < 20 && closes == 0; i++)
        uv_run(loop, UV_RUN_NOWAIT), spin(&closes, 50);
    CHECK_EQ_INT(closes, 1);
    /* a fresh namespace for the next attempt */
    store_server_set(srv, "podrun/keep", 11, "1", 1);
    store_server_set(srv, "/worker/x", 9, "1", 1);
    CHECK(store_server_delete_except(srv, "podrun/") >= 1);
    CHECK_EQ_INT(store_server_get(srv, "/worker/x", 9, &v, &vl), 0);
    CHECK_EQ_INT(store_server_get(srv, "podrun/keep", 11, &v, &vl), 1);
    store_server_observe(srv, "", NULL, NULL, NULL);
}

static void test_lost(void)
{
    store_server_t *s2;
    CHECK_EQ_INT(store_server_start(loop, "127.0.0.1", 0, NULL, NULL, &s2), 0);
    store_aclient_t *c = connect_ok(store_server_port(s2));
    res_t lost = {0}, w = {0}, cw = {0}, after = {0};
    store_aclient_on_lost(c, on_conn, &lost);
    const char *k[] = {"/never"};
    store_aclient_wait(c, k, 1, -1, on_reply, &w);
    spin(&w.done, 50);
    /* a CANCEL_WAIT the server never answers fails with the rest */
    CHECK_EQ_INT(store_aclient_cancel_wait(c, on_reply, &cw), 0);
    store_server_close(s2, NULL, NULL);
    spin(&lost.done, 3000);
    CHECK(lost.done);
    CHECK_EQ_INT(w.status, PODRUN_ECONNRESET);
    CHECK(cw.done && cw.status == PODRUN_ECONNRESET);
    CHECK_EQ_INT(store_aclient_get(c, "/x", on_reply, &after), PODRUN_ECONNRESET);
    store_aclient_close(c);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* Closing the client answers every request that has no answer yet, at once, in order: a
 * CANCEL_WAIT too (a caller that counts its requests, as the rendezvous does, would otherwise
 * wait for ever for the one that never came back). */
static void test_close_answers_every_request(void)
{
    store_aclient_t *c = connect_ok(store_server_port(srv));
    const char *k[] = {"/close-never"};
    res_t w = {0}, cw = {0}, g = {0}, p = {0};
    seq = 0;
    CHECK_EQ_INT(store_aclient_wait(c, k, 1, -1, on_reply, &w), 0);
    CHECK_EQ_INT(store_aclient_get(c, "/close-never", on_reply, &g), 0);
    CHECK_EQ_INT(store_aclient_cancel_wait(c, on_reply, &cw), 0);
    CHECK_EQ_INT(store_aclient_ping(c, on_reply, &p), 0);
    store_aclient_close(c);
    CHECK(w.done && g.done && cw.done && p.done);
    CHECK_EQ_INT(w.status, UV_ECANCELED);
    CHECK_EQ_INT(g.status, UV_ECANCELED);
    CHECK_EQ_INT(cw.status, UV_ECANCELED);
    CHECK_EQ_INT(p.status, UV_ECANCELED);
    CHECK(w.order < g.order && g.order < cw.order);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* A server that does the handshake and then answers the first request with one chosen byte. */
typedef struct wrong_server {
    uv_tcp_t listener, conn;
    char in[64];
    size_t n;
    int greeted, answered;
    char answer;
} wrong_server_t;

static void ws_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    wrong_server_t *w = h->data;
    (void)hint;
    *b = uv_buf_init(w->in + w->n, (unsigned)(sizeof w->in - w->n));
}

static void ws_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    wrong_server_t *w = s->data;
    (void)b;
    if (nread <= 0)
        return;
    w->n += (size_t)nread;
    /* VALIDATE + magic, PING + nonce: the echo of the nonce lets the client in */
    if (!w->greeted && w->n >= 10) {
        uv_buf_t echo = uv_buf_init(w->in + 6, 4);
        CHECK_EQ_INT(uv_try_write(s, &echo, 1), 4);
        w->greeted = 1;
        w->n -= 10;
        memmove(w->in, w->in + 10, w->n);
    }
    if (w->greeted && w->n > 0 && !w->answered) {
        uv_buf_t one = uv_buf_init(&w->answer, 1);
        CHECK_EQ_INT(uv_try_write(s, &one, 1), 1);
        w->answered = 1;
    }
    if (w->n == sizeof w->in)
        w->n = 0;
}

static void ws_accept(uv_stream_t *l, int status)
{
    wrong_server_t *w = l->data;
    CHECK_EQ_INT(status, 0);
    uv_tcp_init(loop, &w->conn);
    w->conn.data = w;
    CHECK_EQ_INT(uv_accept(l, (uv_stream_t *)&w->conn), 0);
    uv_read_start((uv_stream_t *)&w->conn, ws_alloc, ws_read);
}

static uint16_t ws_start(wrong_server_t *w, char answer)
{
    memset(w, 0, sizeof *w);
    w->answer = answer;
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_init(loop, &w->listener);
    w->listener.data = w;
    CHECK_EQ_INT(uv_tcp_bind(&w->listener, (const struct sockaddr *)&sa, 0), 0);
    CHECK_EQ_INT(uv_listen((uv_stream_t *)&w->listener, 4, ws_accept), 0);
    int len = sizeof sa;
    uv_tcp_getsockname(&w->listener, (struct sockaddr *)&sa, &len);
    return ntohs(sa.sin_port);
}

static void ws_stop(wrong_server_t *w)
{
    uv_close((uv_handle_t *)&w->listener, NULL);
    uv_close((uv_handle_t *)&w->conn, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* An answer that does not fit the request drops the link, and the request whose answer it was
 * still gets its callback: a WAIT answered "cancelled" with no CANCEL_WAIT out, and a
 * CANCEL_WAIT answered "stop waiting". */
static void test_wrong_answer_fails_the_request(void)
{
    for (int cancel = 0; cancel < 2; cancel++) {
        wrong_server_t w;
        uint16_t port = ws_start(&w, cancel ? WIRE_STOP_WAITING : WIRE_WAIT_CANCELED);
        store_aclient_t *c = connect_ok(port);
        res_t lost = {0}, r = {0};
        store_aclient_on_lost(c, on_conn, &lost);
        const char *k[] = {"/wrong"};
        if (cancel)
            CHECK_EQ_INT(store_aclient_cancel_wait(c, on_reply, &r), 0);
        else
            CHECK_EQ_INT(store_aclient_wait(c, k, 1, -1, on_reply, &r), 0);
        spin(&lost.done, 3000);
        CHECK_EQ_INT(lost.status, PODRUN_EPROTO);
        CHECK(r.done && r.status == PODRUN_ECONNRESET);
        store_aclient_close(c);
        ws_stop(&w);
    }
}

static store_server_t *late;
static uint16_t late_port;
static void start_late(uv_timer_t *t)
{
    (void)t;
    CHECK_EQ_INT(store_server_start(loop, "127.0.0.1", late_port, NULL, NULL, &late), 0);
}

static void test_backoff(void)
{
    store_server_t *probe;
    store_server_start(loop, "127.0.0.1", 0, NULL, NULL, &probe);
    late_port = store_server_port(probe);
    store_server_close(probe, NULL, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    /* refused until the timeout */
    res_t r = {0};
    store_aclient_t *c;
    uint64_t t0 = uv_now(loop);
    store_aclient_connect(loop, "127.0.0.1", late_port, 300, on_conn, &r, &c);
    spin(&r.done, 5000);
    uv_update_time(loop);
    CHECK(r.done && r.status < 0);
    CHECK(uv_now(loop) - t0 >= 250);
    /* the server appears 300 ms into a 5 s connect */
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, start_late, 300, 0);
    c = connect_ok(late_port);
    store_aclient_close(c);
    uv_close((uv_handle_t *)&t, NULL);
    store_server_close(late, NULL, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* A connect that hangs (the server's backlog is full) ends as a timeout, not as the
 * cancellation of the attempt that timed out. */
static void test_connect_hangs_times_out(void)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 0) == 0);
    getsockname(l, (struct sockaddr *)&a, &al);
    int f1 = socket(AF_INET, SOCK_STREAM, 0), f2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(connect(f1, (struct sockaddr *)&a, sizeof a) == 0);
    connect(f2, (struct sockaddr *)&a, sizeof a); /* fills the backlog */
    res_t r = {0};
    store_aclient_t *c;
    CHECK_EQ_INT(store_aclient_connect(loop, "127.0.0.1", ntohs(a.sin_port), 1200, on_conn, &r, &c),
                 0);
    spin(&r.done, 10000);
    CHECK(r.done);
    CHECK_EQ_INT(r.status, PODRUN_ETIMEDOUT);
    uv_run(loop, UV_RUN_NOWAIT);
    close(f1);
    close(f2);
    close(l);
}

/* Clients that filled the store cannot make the hosting process's own records fail. */
static void test_inprocess_write_when_full(void)
{
    store_limits_t lim;
    store_limits_default(&lim);
    lim.max_total_bytes = 256;
    store_server_t *s2;
    CHECK_EQ_INT(store_server_start(loop, "127.0.0.1", 0, &lim, NULL, &s2), 0);
    store_aclient_t *c = connect_ok(store_server_port(s2));
    char big[300];
    memset(big, 'x', sizeof big);
    res_t a = {0}, g = {0};
    store_aclient_set(c, "/fill", big, 200, on_reply, &a);
    spin(&a.done, 3000);
    CHECK_EQ_INT(store_server_set(s2, "podrun/j/r/0/end", 16, big, sizeof big), 0);
    store_aclient_get(c, "podrun/j/r/0/end", on_reply, &g);
    spin(&g.done, 3000);
    CHECK(g.done && g.status == 0 && g.val[0] == 'x');
    store_aclient_close(c);
    store_server_close(s2, NULL, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    if (store_server_start(loop, "127.0.0.1", 0, NULL, NULL, &srv) != 0)
        return 1;
    RUN(test_ops);
    RUN(test_wait);
    RUN(test_pipelined_behind_wait);
    RUN(test_observer);
    RUN(test_lost);
    RUN(test_close_answers_every_request);
    RUN(test_wrong_answer_fails_the_request);
    RUN(test_backoff);
    RUN(test_inprocess_write_when_full);
    RUN(test_connect_hangs_times_out);
    int closed = 0;
    store_server_close(srv, NULL, NULL);
    (void)closed;
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
    return check_result();
}
