/* tests/unit/rdzv/test_relay_udp.c — relay sockets on a loop over loopback (rdzv/relay_udp.c):
 * a parent's datagram reaches its child, which hands it on to its own child before taking it;
 * once per round; a stranger's datagram, another round's, another rank's, or (with a token) an
 * unsigned or wrongly signed one is dropped; a root sends what the store gave it. */
#include <string.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "rdzv/relay_udp.h"

#define N 3 /* 0 the root, 1 its child, 2 the child's child */

static relay_udp_t *r[N];
static int taken[N], taken_round[N];
static char taken_body[N][128];
static int order[8], n_order;
static uv_loop_t *loop;

static void on_taken(void *arg, int round, const char *body, size_t blen)
{
    int i = (int)(intptr_t)arg;
    taken[i]++;
    taken_round[i] = round;
    snprintf(taken_body[i], sizeof taken_body[i], "%.*s", (int)blen, body);
    if (n_order < 8)
        order[n_order++] = i;
}

static relay_ep_t ep(int i)
{
    relay_ep_t e = {i, relay_udp_port(r[i]), "127.0.0.1"};
    return e;
}

/* A chain 0 -> 1 -> 2 in round `round`. */
static void link_chain(int round)
{
    for (int i = 0; i < N; i++) {
        relay_links_t l;
        memset(&l, 0, sizeof l);
        if (i > 0) {
            l.fed = 1;
            l.parent = ep(i - 1);
        }
        if (i + 1 < N) {
            l.n = 1;
            l.child[0] = ep(i + 1);
        }
        relay_udp_links(r[i], round, i, &l);
    }
}

static void open_all(const auth_key_t *key)
{
    memset(taken, 0, sizeof taken);
    n_order = 0;
    for (int i = 0; i < N; i++)
        CHECK_EQ_INT(relay_udp_open(loop, "127.0.0.1", key, "job1", on_taken, (void *)(intptr_t)i,
                                    &r[i]), 0);
}

static int closed;
static void on_closed(void *arg)
{
    (void)arg;
    closed++;
}

static void close_all(void)
{
    closed = 0;
    for (int i = 0; i < N; i++)
        relay_udp_close(r[i], on_closed, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(closed, N);
}

/* Runs the loop until `until` datagrams were taken in all, or a bound of 2 s of polls. */
static void run_until_taken(int until)
{
    for (int i = 0; i < 200; i++) {
        int n = 0;
        for (int j = 0; j < N; j++)
            n += taken[j];
        if (n >= until)
            return;
        uv_run(loop, UV_RUN_NOWAIT);
        uv_sleep(10); /* poll interval: the datagrams are already in the kernel's queues */
    }
}

/* Sends a datagram to node `to` from a socket of its own (not the parent's). */
static void send_as_stranger(int round, int to, const char *body, const auth_key_t *key)
{
    relay_udp_t *s;
    CHECK_EQ_INT(relay_udp_open(loop, "127.0.0.1", key, "job1", on_taken, (void *)(intptr_t)7, &s), 0);
    relay_links_t l;
    memset(&l, 0, sizeof l);
    l.n = 1;
    l.child[0] = ep(to);
    relay_udp_links(s, round, 99, &l);
    CHECK_EQ_INT(relay_udp_forward(s, round, body, strlen(body)), 1);
    closed = 0;
    relay_udp_close(s, on_closed, NULL);
}

static void chain(const auth_key_t *key)
{
    open_all(key);
    link_chain(5);
    const char *rec = "end=stop\naction=restart\nround=5\n";
    /* the root has it from the store: it sends it on (once per round) */
    CHECK_EQ_INT(relay_udp_forward(r[0], 5, rec, strlen(rec)), 1);
    CHECK_EQ_INT(relay_udp_forward(r[0], 5, rec, strlen(rec)), 0);
    run_until_taken(2);
    CHECK_EQ_INT(taken[0], 0); /* the root's own came from the store, not a datagram */
    CHECK_EQ_INT(taken[1], 1);
    CHECK_EQ_INT(taken[2], 1);
    CHECK_EQ_INT(taken_round[2], 5);
    CHECK_EQ_STR(taken_body[2], rec);
    CHECK_EQ_INT(order[0], 1); /* the child took it, after sending it on, then its child */
    CHECK_EQ_INT(relay_udp_dropped(r[1]), 0);
    /* a stranger, another round, another rank: dropped, and the round is still taken once */
    send_as_stranger(5, 2, rec, NULL);
    relay_links_t l;
    memset(&l, 0, sizeof l);
    l.n = 1;
    l.child[0] = ep(2);
    l.child[0].node_rank = 1; /* addressed to rank 1 at node 2's socket */
    relay_udp_links(r[0], 6, 0, &l);
    CHECK_EQ_INT(relay_udp_forward(r[0], 6, rec, strlen(rec)), 1); /* round 6: node 2 runs 5 */
    for (int i = 0; i < 20; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        uv_sleep(10); /* poll interval: let the three datagrams be read */
    }
    CHECK_EQ_INT(taken[2], 1);
    CHECK(relay_udp_dropped(r[2]) >= (key ? 1u : 2u));
    close_all();
}

static void test_chain_no_token(void)
{
    chain(NULL);
}

static void test_chain_token(void)
{
    auth_key_t k;
    char err[128];
    CHECK_EQ_INT(auth_key_from_token("0123456789abcdef0123", 20, "t", &k, err, sizeof err), 0);
    chain(&k);
    /* signed under another key: dropped even from the parent's own socket */
    auth_key_t other;
    CHECK_EQ_INT(auth_key_from_token("0123456789abcdef0124", 20, "t", &other, err, sizeof err), 0);
    open_all(&k);
    relay_udp_close(r[0], NULL, NULL);
    CHECK_EQ_INT(relay_udp_open(loop, "127.0.0.1", &other, "job1", on_taken, NULL, &r[0]), 0);
    link_chain(3);
    CHECK_EQ_INT(relay_udp_forward(r[0], 3, "end=finished\n", 13), 1);
    for (int i = 0; i < 20; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        uv_sleep(10); /* poll interval: let the datagram be read */
    }
    CHECK_EQ_INT(taken[1], 0);
    CHECK_EQ_INT(relay_udp_dropped(r[1]), 1);
    close_all();
}

/* The restart (relay.h): joins go up the chain once each node has its children's, the root's
 * to the store; a go comes down once; a node that gives up on its parent sends what it holds
 * to the store itself. */
static char gathered[N][1024];
static size_t gathered_len[N];
static int gather_calls[N], went[N];

static void on_gather_cb(void *arg, const char *e, size_t len)
{
    int i = (int)(intptr_t)arg;
    if (gathered_len[i] + len <= sizeof gathered[i]) {
        memcpy(gathered[i] + gathered_len[i], e, len);
        gathered_len[i] += len;
    }
    gather_calls[i]++;
}

static void on_go_cb(void *arg, const char *b, size_t len)
{
    (void)b, (void)len;
    went[(int)(intptr_t)arg]++;
}

static void polls(int n)
{
    for (int i = 0; i < n; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        uv_sleep(10); /* poll interval: the datagrams are already in the kernel's queues */
    }
}

static void test_gather_and_go(void)
{
    open_all(NULL);
    memset(gathered_len, 0, sizeof gathered_len);
    memset(gather_calls, 0, sizeof gather_calls);
    memset(went, 0, sizeof went);
    for (int i = 0; i < N; i++)
        relay_udp_on_restart(r[i], on_gather_cb, on_go_cb, (void *)(intptr_t)i);
    link_chain(5);
    char e1[128], e2[128];
    int n1 = relay_entry_put(e1, sizeof e1, "0000000000000002", 1, "name=b\n", 7);
    int n2 = relay_entry_put(e2, sizeof e2, "0000000000000003", 1, "name=c\n", 7);
    relay_udp_rejoin(r[2], e2, (size_t)n2); /* a leaf: up at once */
    relay_udp_rejoin(r[0], NULL, 0);        /* the root joins the store itself */
    polls(20);
    CHECK_EQ_INT(gather_calls[0], 0); /* node 1 holds its child's join until it rejoins */
    relay_udp_rejoin(r[1], e1, (size_t)n1);
    for (int i = 0; i < 100 && !gather_calls[0]; i++)
        polls(1);
    CHECK_EQ_INT(gather_calls[0], 1);
    CHECK_EQ_INT((int)gathered_len[0], n1 + n2);
    const char *p = gathered[0], *end = gathered[0] + gathered_len[0], *rec;
    uint64_t id;
    int k;
    size_t len;
    CHECK_EQ_INT(relay_entry_next(&p, end, &id, &k, &rec, &len), 0);
    CHECK(id == 3);
    CHECK_EQ_INT(relay_entry_next(&p, end, &id, &k, &rec, &len), 0);
    CHECK(id == 2 && p == end);
    CHECK(gather_calls[1] == 0 && gather_calls[2] == 0);
    const char *go = "round=6\nrestart_count=1\nmode=inplace\n";
    relay_udp_go(r[0], go, strlen(go));
    relay_udp_go(r[0], go, strlen(go)); /* once per round */
    for (int i = 0; i < 100 && !went[2]; i++)
        polls(1);
    polls(5);
    CHECK(went[0] == 0 && went[1] == 1 && went[2] == 1);
    /* the next round: node 1 gives up on its parent with its child's join in hand */
    link_chain(6);
    relay_udp_rejoin(r[2], e2, (size_t)n2);
    polls(20);
    relay_udp_direct(r[1]);
    CHECK_EQ_INT(gather_calls[1], 1);
    CHECK_EQ_INT((int)gathered_len[1], n2);
    CHECK_EQ_INT(gather_calls[0], 1);
    close_all();
}

static void test_open_needs_numeric_address(void)
{
    relay_udp_t *s;
    CHECK(relay_udp_open(loop, "localhost", NULL, "job1", on_taken, NULL, &s) < 0);
    CHECK(relay_udp_open(loop, NULL, NULL, "job1", on_taken, NULL, &s) < 0);
    CHECK(relay_udp_open(loop, "192.0.2.1", NULL, "job1", on_taken, NULL, &s) < 0); /* not ours */
    uv_run(loop, UV_RUN_DEFAULT);
}

int main(void)
{
    loop = uv_default_loop();
    RUN(test_chain_no_token);
    RUN(test_chain_token);
    RUN(test_gather_and_go);
    RUN(test_open_needs_numeric_address);
    uv_loop_close(loop);
    return check_result();
}
