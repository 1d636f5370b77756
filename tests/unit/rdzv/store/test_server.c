/* tests/unit/rdzv/store/test_server.c — the server at the byte level, written from torch's
 * sources: the 2.x dialect (VALIDATE, PING nonce echo, CANCEL_WAIT, MULTI_*, QUEUE_*, LIST,
 * BARRIER), the
 * 1.13 dialect on the same port (WATCH_KEY, abandoned waits), and bad input that must cost only
 * the connection that sent it. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/rdzv/store/server_thread.h"

static srv_thread_t st;

/* A request under construction: opcode, then u64 / u32 / strings, little-endian. */
typedef struct msg {
    char b[4096];
    size_t n;
} msg_t;

static msg_t *op(msg_t *m, int code)
{
    m->b[m->n++] = (char)code;
    return m;
}
static msg_t *u64(msg_t *m, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        m->b[m->n++] = (char)(v >> (8 * i));
    return m;
}
static msg_t *u32(msg_t *m, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        m->b[m->n++] = (char)(v >> (8 * i));
    return m;
}
static msg_t *str(msg_t *m, const char *s)
{
    size_t l = strlen(s);
    u64(m, l);
    memcpy(m->b + m->n, s, l);
    m->n += l;
    return m;
}

enum { V2_VALIDATE = 0, V2_SET, V2_COMPARE_SET, V2_GET, V2_ADD, V2_CHECK, V2_WAIT, V2_GETNUMKEYS,
       V2_DELETE_KEY, V2_APPEND, V2_MULTI_GET, V2_MULTI_SET, V2_CANCEL_WAIT, V2_PING,
       V2_QUEUE_PUSH, V2_QUEUE_POP, V2_QUEUE_LEN, V2_LIST, V2_BARRIER };
enum { V1_SET = 0, V1_COMPARE_SET, V1_GET, V1_ADD, V1_CHECK, V1_WAIT, V1_GETNUMKEYS,
       V1_WATCH_KEY, V1_DELETE_KEY };

static void flush(int fd, msg_t *m)
{
    raw_send(fd, m->b, m->n);
    m->n = 0;
}

/* A validated 2.x connection: VALIDATE + PING, and the nonce must come back. */
static int v2_connect(void)
{
    int fd = raw_connect(st.port);
    msg_t m = {.n = 0};
    u32(op(&m, V2_VALIDATE), 0x3C85F7CE);
    u32(op(&m, V2_PING), 0xA1B2C3D4);
    flush(fd, &m);
    unsigned char echo[4] = {0};
    CHECK_EQ_INT(raw_recv(fd, echo, 4, 2000), 4);
    CHECK(echo[0] == 0xD4 && echo[1] == 0xC3 && echo[2] == 0xB2 && echo[3] == 0xA1);
    return fd;
}

static int64_t recv_i64(int fd)
{
    unsigned char b[8] = {0};
    CHECK_EQ_INT(raw_recv(fd, b, 8, 2000), 8);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return (int64_t)v;
}

/* Reads a u64-length vector into out (NUL-terminated). */
static void recv_vec(int fd, char *out, size_t cap)
{
    int64_t n = recv_i64(fd);
    CHECK(n >= 0 && (size_t)n < cap);
    if (n < 0 || (size_t)n >= cap) {
        out[0] = 0;
        return;
    }
    CHECK_EQ_INT(raw_recv(fd, out, (size_t)n, 2000), n);
    out[n] = 0;
}

/* The next reply is a vector holding `want`. */
static void expect_vec(int fd, const char *want)
{
    char v[256];
    recv_vec(fd, v, sizeof v);
    CHECK_EQ_STR(v, want);
}

static int recv_u8(int fd)
{
    unsigned char c;
    if (raw_recv(fd, &c, 1, 2000) != 1)
        return -1;
    return c;
}

static void test_validate_and_ping(void)
{
    int fd = v2_connect();
    msg_t m = {.n = 0};
    u32(op(&m, V2_PING), 7);
    u32(op(&m, V2_PING), 8);
    flush(fd, &m);
    unsigned char b[8] = {0};
    CHECK_EQ_INT(raw_recv(fd, b, 8, 2000), 8);
    CHECK(b[0] == 7 && b[4] == 8);
    close(fd);
    /* the VALIDATE magic split over several packets still works */
    fd = raw_connect(st.port);
    raw_send(fd, "\x00\xCE", 2);
    usleep(20000);
    raw_send(fd, "\xF7\x85\x3C\x0D\x01", 5);
    usleep(20000);
    raw_send(fd, "\x00\x00\x00", 3);
    CHECK_EQ_INT(raw_recv(fd, b, 4, 2000), 4);
    CHECK(b[0] == 1 && b[1] == 0);
    close(fd);
}

/* SET key to val and GET it back in one write, with the dialect's opcodes. */
static void set_get(int fd, int set_op, int get_op, const char *key, const char *val)
{
    msg_t m = {.n = 0};
    char v[256];
    str(str(op(&m, set_op), key), val);
    str(op(&m, get_op), key);
    flush(fd, &m);
    recv_vec(fd, v, sizeof v);
    CHECK_EQ_STR(v, val);
}

static void test_v2_ops(void)
{
    int fd = v2_connect();
    msg_t m = {.n = 0};
    set_get(fd, V2_SET, V2_GET, "/a", "va");
    u64(str(op(&m, V2_ADD), "/n"), 41);
    flush(fd, &m);
    CHECK_EQ_INT(recv_i64(fd), 41);
    str(str(str(op(&m, V2_COMPARE_SET), "/a"), "va"), "vb");
    flush(fd, &m);
    expect_vec(fd, "vb");
    str(u64(op(&m, V2_CHECK), 2), "/a");
    str(&m, "/zz");
    flush(fd, &m);
    CHECK_EQ_INT(recv_u8(fd), 1); /* NOT_READY */
    str(str(op(&m, V2_APPEND), "/a"), "+");
    str(op(&m, V2_GET), "/a");
    flush(fd, &m);
    expect_vec(fd, "vb+");
    op(&m, V2_GETNUMKEYS);
    flush(fd, &m);
    int64_t nk = recv_i64(fd);
    CHECK(nk >= 2);
    str(op(&m, V2_DELETE_KEY), "/a");
    str(op(&m, V2_DELETE_KEY), "/a");
    flush(fd, &m);
    CHECK_EQ_INT(recv_i64(fd), 1);
    CHECK_EQ_INT(recv_i64(fd), 0);
    close(fd);
}

static void test_multi(void)
{
    int fd = v2_connect();
    msg_t m = {.n = 0};
    u64(op(&m, V2_MULTI_SET), 2);
    str(str(&m, "/m1"), "one");
    str(str(&m, "/m2"), "two");
    u64(op(&m, V2_MULTI_GET), 3);
    str(str(str(&m, "/m2"), "/none"), "/m1");
    flush(fd, &m);
    expect_vec(fd, "two");
    expect_vec(fd, "");
    expect_vec(fd, "one");
    close(fd);
}

static void test_wait_and_cancel(void)
{
    int a = v2_connect(), b = v2_connect();
    msg_t m = {.n = 0};
    str(u64(op(&m, V2_WAIT), 1), "/cw");
    flush(a, &m);
    unsigned char c;
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0); /* nothing yet */
    op(&m, V2_CANCEL_WAIT);
    flush(a, &m);
    CHECK_EQ_INT(recv_u8(a), 1); /* WAIT_CANCELED */
    /* a set after the cancel sends nothing to a */
    str(str(op(&m, V2_SET), "/cw"), "x");
    u32(op(&m, V2_PING), 5);
    flush(b, &m);
    unsigned char pb[4];
    CHECK_EQ_INT(raw_recv(b, pb, 4, 2000), 4);
    u32(op(&m, V2_PING), 9);
    flush(a, &m);
    unsigned char p[4];
    CHECK_EQ_INT(raw_recv(a, p, 4, 2000), 4);
    CHECK_EQ_INT(p[0], 9); /* in sync: no stray STOP_WAITING */
    /* a real wait, woken by another connection: exactly one STOP_WAITING */
    str(str(u64(op(&m, V2_WAIT), 2), "/w1"), "/w2");
    flush(a, &m);
    str(str(op(&m, V2_SET), "/w1"), "");
    flush(b, &m);
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    u64(str(op(&m, V2_ADD), "/w2"), 1);
    flush(b, &m);
    CHECK_EQ_INT(recv_i64(b), 1);
    CHECK_EQ_INT(recv_u8(a), 0);
    str(str(op(&m, V2_SET), "/w2"), "again");
    flush(b, &m);
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    close(a);
    close(b);
}

/* Pipelining behind a WAIT (2.x): a GET sent behind an unanswered WAIT is answered after it,
 * in the same write as the STOP_WAITING; a SET and a PING behind it are handled at once. */
static void test_parked_behind_wait(void)
{
    int a = v2_connect(), b = v2_connect();
    msg_t m = {.n = 0};
    str(u64(op(&m, V2_WAIT), 1), "/pk");
    str(op(&m, V2_GET), "/pk");
    str(str(op(&m, V2_SET), "/pk-side"), "early");
    u32(op(&m, V2_PING), 0x0A0B0C0D);
    flush(a, &m);
    unsigned char p[4];
    CHECK_EQ_INT(raw_recv(a, p, 4, 2000), 4); /* the PING's echo, ahead of the WAIT */
    CHECK(p[0] == 0x0D && p[3] == 0x0A);
    str(op(&m, V2_GET), "/pk-side"); /* the SET behind the WAIT was applied at once */
    flush(b, &m);
    expect_vec(b, "early");
    unsigned char c;
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0); /* the GET waits for the WAIT */
    str(str(op(&m, V2_SET), "/pk"), "value");
    flush(b, &m);
    char both[32];
    CHECK_EQ_INT(raw_recv(a, both, 14, 2000), 14); /* STOP_WAITING, then the GET's vector */
    CHECK_EQ_INT(both[0], 0);
    CHECK_EQ_INT(both[1], 5);
    CHECK(memcmp(both + 9, "value", 5) == 0);

    /* a parked WAIT parks what follows it again; each STOP_WAITING comes in order */
    str(u64(op(&m, V2_WAIT), 1), "/pa");
    str(u64(op(&m, V2_WAIT), 1), "/pb");
    str(op(&m, V2_GET), "/pb");
    u64(str(op(&m, V2_ADD), "/pcount"), 2);
    flush(a, &m);
    str(str(op(&m, V2_SET), "/pa"), "1");
    flush(b, &m);
    CHECK_EQ_INT(recv_u8(a), 0);
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    str(str(op(&m, V2_SET), "/pb"), "bee");
    flush(b, &m);
    CHECK_EQ_INT(recv_u8(a), 0);
    expect_vec(a, "bee");
    CHECK_EQ_INT(recv_i64(a), 2);

    /* CANCEL_WAIT: WAIT_CANCELED, then the parked GET (of a key still missing) */
    str(u64(op(&m, V2_WAIT), 1), "/never");
    str(op(&m, V2_GET), "/pk");
    flush(a, &m);
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    op(&m, V2_CANCEL_WAIT);
    flush(a, &m);
    CHECK_EQ_INT(recv_u8(a), 1);
    expect_vec(a, "value");

    /* the connection's own SET answers its WAIT: the parked GET runs right behind it */
    str(u64(op(&m, V2_WAIT), 1), "/self");
    str(op(&m, V2_GET), "/self");
    str(str(op(&m, V2_SET), "/self"), "me");
    u32(op(&m, V2_PING), 0x11111111);
    flush(a, &m);
    CHECK_EQ_INT(recv_u8(a), 0);
    expect_vec(a, "me");
    CHECK_EQ_INT(raw_recv(a, p, 4, 2000), 4);
    CHECK_EQ_INT(p[0], 0x11);
    close(a);
    close(b);
}

/* BARRIER (torch 2.15): arrivals counted in the key; the last one answers everyone, what was
 * sent behind a waiting BARRIER runs after it; a cancelled one stays counted and silent. */
static void test_barrier(void)
{
    int a = v2_connect(), b = v2_connect();
    msg_t m = {.n = 0};
    u64(str(op(&m, V2_BARRIER), "/bar"), 2);
    str(op(&m, V2_GET), "/bar");
    flush(a, &m);
    unsigned char c;
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    u64(str(op(&m, V2_BARRIER), "/bar"), 2);
    flush(b, &m);
    CHECK_EQ_INT(recv_u8(b), 0); /* the last arrival: at once */
    CHECK_EQ_INT(recv_u8(a), 0);
    expect_vec(a, "2");

    u64(str(op(&m, V2_BARRIER), "/bc"), 2);
    flush(a, &m);
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    op(&m, V2_CANCEL_WAIT);
    flush(a, &m);
    CHECK_EQ_INT(recv_u8(a), 1);
    u64(str(op(&m, V2_BARRIER), "/bc"), 2);
    flush(b, &m);
    CHECK_EQ_INT(recv_u8(b), 0); /* the cancelled arrival still counts */
    u32(op(&m, V2_PING), 3);
    flush(a, &m);
    unsigned char p[4];
    CHECK_EQ_INT(raw_recv(a, p, 4, 2000), 4);
    CHECK_EQ_INT(p[0], 3); /* no STOP_WAITING for the cancelled one */

    /* a value that is not a number costs that connection, with one line */
    char line[512];
    int before = st_last_log(&st, line, sizeof line);
    str(str(op(&m, V2_SET), "/btext"), "abc");
    u64(str(op(&m, V2_BARRIER), "/btext"), 2);
    flush(b, &m);
    CHECK(raw_closed(b, 2000));
    CHECK_EQ_INT(st_last_log(&st, line, sizeof line), before + 1);
    CHECK(strstr(line, "BARRIER on a key whose value is not a 64-bit integer") != NULL);
    close(a);
    close(b);
}

static void test_queues(void)
{
    int fd = v2_connect();
    msg_t m = {.n = 0};
    str(op(&m, V2_QUEUE_POP), "/q");
    flush(fd, &m);
    CHECK_EQ_INT(recv_i64(fd), 0); /* empty: the length only */
    str(str(op(&m, V2_QUEUE_PUSH), "/q"), "first");
    str(str(op(&m, V2_QUEUE_PUSH), "/q"), "second");
    str(op(&m, V2_QUEUE_LEN), "/q");
    str(op(&m, V2_QUEUE_POP), "/q");
    flush(fd, &m);
    CHECK_EQ_INT(recv_i64(fd), 2);
    CHECK_EQ_INT(recv_i64(fd), 2);
    expect_vec(fd, "first");
    /* a blocking pop waits on the key; a push wakes it */
    int b = v2_connect();
    str(u64(op(&m, V2_WAIT), 1), "/q2");
    flush(b, &m);
    str(str(op(&m, V2_QUEUE_PUSH), "/q2"), "x");
    flush(fd, &m);
    CHECK_EQ_INT(recv_u8(b), 0);
    close(fd);
    close(b);
}

static void test_list(void)
{
    int fd = v2_connect();
    msg_t m = {.n = 0};
    str(str(op(&m, V2_SET), "/listed"), "1");
    op(&m, V2_GETNUMKEYS);
    op(&m, V2_LIST);
    flush(fd, &m);
    int64_t n = recv_i64(fd);
    CHECK_EQ_INT(recv_i64(fd), n);
    int found = 0;
    for (int64_t i = 0; i < n; i++) {
        char k[256];
        recv_vec(fd, k, sizeof k);
        found += strcmp(k, "/listed") == 0;
    }
    CHECK_EQ_INT(found, 1);
    close(fd);
}

static void test_v1_dialect(void)
{
    int fd = raw_connect(st.port);
    /* the bytes torch 1.13 sends for ADD "init/" 1 */
    raw_send(fd, "\x03\x05\x00\x00\x00\x00\x00\x00\x00init/\x01\x00\x00\x00\x00\x00\x00\x00", 22);
    int64_t first = recv_i64(fd);
    CHECK(first >= 1);
    msg_t m = {.n = 0};
    set_get(fd, V1_SET, V1_GET, "/v1", "x");
    str(op(&m, V1_DELETE_KEY), "/v1");
    flush(fd, &m);
    CHECK_EQ_INT(recv_i64(fd), 1);
    close(fd);
}

static void test_v1_watch(void)
{
    int w = raw_connect(st.port), c = raw_connect(st.port);
    msg_t m = {.n = 0};
    str(op(&m, V1_WATCH_KEY), "/watched");
    flush(w, &m);
    CHECK_EQ_INT(recv_u8(w), 3); /* KEY_CALLBACK_REGISTERED */
    str(str(op(&m, V1_SET), "/watched"), "new");
    flush(c, &m);
    CHECK_EQ_INT(recv_u8(w), 1); /* KEY_CREATED */
    expect_vec(w, "/watched");
    expect_vec(w, "");
    expect_vec(w, "new");
    close(w);
    close(c);
}

static void test_v1_abandoned_wait(void)
{
    /* a 1.13 client whose WAIT timed out sends its next WAIT: only that one is answered */
    int a = raw_connect(st.port), b = raw_connect(st.port);
    msg_t m = {.n = 0};
    str(u64(op(&m, V1_WAIT), 1), "/ab1");
    flush(a, &m);
    str(u64(op(&m, V1_WAIT), 1), "/ab2");
    flush(a, &m);
    str(str(op(&m, V1_SET), "/ab1"), "");
    op(&m, V1_GETNUMKEYS);
    flush(b, &m);
    recv_i64(b);
    unsigned char c;
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    str(str(op(&m, V1_SET), "/ab2"), "");
    flush(b, &m);
    CHECK_EQ_INT(recv_u8(a), 0);
    CHECK_EQ_INT(raw_recv(a, &c, 1, 100), 0);
    close(a);
    close(b);
}

/* After each kind of bad input the offender is dropped and a bystander is still served. */
static void bystander_ok(int by)
{
    msg_t m = {.n = 0};
    u32(op(&m, V2_PING), 77);
    flush(by, &m);
    unsigned char p[4] = {0};
    CHECK_EQ_INT(raw_recv(by, p, 4, 2000), 4);
    CHECK_EQ_INT(p[0], 77);
}

static void test_bad_input(void)
{
    int by = v2_connect();
    static const struct {
        const char *what;
        const char *bytes;
        size_t n;
        const char *said; /* in the one line the server logs for it */
    } bad[] = {
        {"http", "GET / HTTP/1.0\r\n\r\n", 18, "unknown opcode 0x47 for the torch 1.13"},
        {"tls hello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11, "unknown opcode"},
        {"v1 huge key", "\x02\xff\xff\xff\xff\xff\xff\xff\x7f", 9, "over the limits"},
        {"v2 unknown op", "\x00\xCE\xF7\x85\x3C\x63", 6, "unknown opcode 0x63 for the torch 2.x"},
        {"v2 bad magic", "\x00\xCE\xF7\x85\x3C\x00\x01\x02\x03\x04", 10, "wrong magic"},
        {"v2 huge value", "\x00\xCE\xF7\x85\x3C\x01\x01\x00\x00\x00\x00\x00\x00\x00k"
                          "\x00\x00\x00\x01\x00\x00\x00\x00", 23, "over the limits"},
        {"v2 too many keys", "\x00\xCE\xF7\x85\x3C\x06\x00\x00\x00\x01\x00\x00\x00\x00", 14,
         "over the limits"},
        {"v1 add on text", "\x00\x01\x00\x00\x00\x00\x00\x00\x00t\x01\x00\x00\x00\x00\x00\x00"
                           "\x00x\x03\x01\x00\x00\x00\x00\x00\x00\x00t\x01\x00\x00\x00\x00\x00"
                           "\x00\x00", 37, "ADD on a key whose value is not a 64-bit integer"},
    };
    char line[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int before = st_last_log(&st, line, sizeof line);
        int fd = raw_connect(st.port);
        raw_send(fd, bad[i].bytes, bad[i].n);
        int closed = raw_closed(fd, 2000);
        if (!closed)
            fprintf(stderr, "not closed after: %s\n", bad[i].what);
        CHECK(closed);
        close(fd);
        bystander_ok(by);
        /* one line through the log sink, naming the connection and why it went */
        CHECK_EQ_INT(st_last_log(&st, line, sizeof line), before + 1);
        CHECK(strncmp(line, "closing connection ", 19) == 0 && strstr(line, "127.0.0.1:"));
        if (!strstr(line, bad[i].said))
            fprintf(stderr, "%s: '%s' lacks '%s'\n", bad[i].what, line, bad[i].said);
        CHECK(strstr(line, bad[i].said) != NULL);
    }
    /* truncated frames and vanishing peers: a half-sent request, then gone; a waiter gone */
    int fd = raw_connect(st.port);
    raw_send(fd, "\x00\x10\x00\x00\x00\x00\x00\x00\x00/trunc", 15);
    close(fd);
    fd = raw_connect(st.port);
    raw_send(fd, "\x05\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00/gone", 21);
    usleep(20000);
    close(fd);
    bystander_ok(by);
    msg_t m = {.n = 0};
    str(str(op(&m, V2_SET), "/gone"), "now"); /* wakes nobody, harms nobody */
    flush(by, &m);
    bystander_ok(by);
    close(by);
}

static void test_limits(void)
{
    srv_thread_t small;
    store_limits_t lim;
    store_limits_default(&lim);
    lim.max_key_len = 16;
    lim.max_value_len = 32;
    lim.max_connections = 3;
    lim.max_total_bytes = 100;
    CHECK_EQ_INT(st_start(&small, &lim, 0), 0);
    int a = raw_connect(small.port);
    msg_t m = {.n = 0};
    str(str(op(&m, V1_SET), "/0123456789abcdef"), "x"); /* key 17 bytes */
    flush(a, &m);
    CHECK(raw_closed(a, 2000));
    close(a);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect(small.port);
        str(str(op(&m, V1_SET), "/k"), "v");
        op(&m, V1_GETNUMKEYS);
        flush(fds[i], &m);
        CHECK_EQ_INT(recv_i64(fds[i]), 1);
    }
    int extra = raw_connect(small.port); /* the fourth is refused */
    CHECK(extra < 0 || raw_closed(extra, 2000));
    if (extra >= 0)
        close(extra);
    /* the store fills up: that write costs its connection */
    for (int i = 0; i < 4; i++) {
        char key[8];
        snprintf(key, sizeof key, "/f%d", i);
        str(str(op(&m, V1_SET), key), "0123456789012345678901234567890");
    }
    flush(fds[0], &m);
    CHECK(raw_closed(fds[0], 2000));
    op(&m, V1_GETNUMKEYS);
    flush(fds[1], &m);
    CHECK(recv_i64(fds[1]) >= 1);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    st_stop(&small);
}

int main(void)
{
    if (st_start(&st, NULL, 0) != 0)
        return 1;
    RUN(test_validate_and_ping);
    RUN(test_v2_ops);
    RUN(test_multi);
    RUN(test_wait_and_cancel);
    RUN(test_parked_behind_wait);
    RUN(test_barrier);
    RUN(test_queues);
    RUN(test_list);
    RUN(test_v1_dialect);
    RUN(test_v1_watch);
    RUN(test_v1_abandoned_wait);
    RUN(test_bad_input);
    RUN(test_limits);
    st_stop(&st);
    return check_result();
}
