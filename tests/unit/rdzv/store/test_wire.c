/* tests/unit/rdzv/store/test_wire.c — the codec: both op tables, incremental parsing, limits,
 * encoders, and the byte examples recorded from torch 1.13's client (reference/torch.md 1.3). */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/store/wire.h"

static const wire_limits_t lim = {8192, 8 << 20, 128 * 1024, 1 << 30};

/* hex string → bytes */
static size_t unhex(const char *h, char *out)
{
    size_t n = 0;
    while (h[0] && h[1]) {
        if (h[0] == ' ') {
            h++;
            continue;
        }
        char b[3] = {h[0], h[1], 0};
        out[n++] = (char)strtol(b, NULL, 16);
        h += 2;
    }
    return n;
}

/* Every prefix of a complete request must say "need more", never an error or a bogus parse. */
static void check_prefixes(wire_dialect_t d, const char *buf, size_t len)
{
    wire_req_t q;
    for (size_t i = 0; i < len; i++) {
        size_t need = 0;
        ssize_t r = wire_parse(d, buf, i, &lim, &q, &need);
        CHECK_EQ_INT(r, 0);
        CHECK(need > i && need <= len);
    }
}

static void test_v1_add_example(void)
{
    char b[64];
    size_t n = unhex("03 0500000000000000 696e69742f 0100000000000000", b);
    wire_req_t q;
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, NULL), (ssize_t)n);
    CHECK_EQ_INT(q.op, WIRE_ADD);
    CHECK_EQ_INT(q.key.len, 5);
    CHECK(memcmp(q.key.p, "init/", 5) == 0);
    CHECK_EQ_INT(q.num, 1);
    check_prefixes(WIRE_V1, b, n);
    /* and the encoder writes the same bytes */
    wire_buf_t e = {0};
    CHECK_EQ_INT(wire_put_op(&e, WIRE_V1, WIRE_ADD), 0);
    wire_put_str(&e, "init/", 5);
    wire_put_i64(&e, 1);
    CHECK_EQ_INT(e.len, n);
    CHECK(memcmp(e.p, b, n) == 0);
    wire_buf_free(&e);
}

static void test_v1_set_example(void)
{
    char b[64];
    size_t n = unhex("00 0200000000000000 2f6b 0100000000000000 76", b);
    wire_req_t q;
    CHECK_EQ_INT(wire_sniff(b, n), WIRE_V1);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, NULL), (ssize_t)n);
    CHECK_EQ_INT(q.op, WIRE_SET);
    CHECK(q.key.len == 2 && memcmp(q.key.p, "/k", 2) == 0);
    CHECK(q.val.len == 1 && q.val.p[0] == 'v');
    check_prefixes(WIRE_V1, b, n);
}

static void test_v2_hello(void)
{
    char b[64];
    size_t n = unhex("00 CEF7853C 0D 39300000", b);
    CHECK_EQ_INT(wire_sniff(b, 1), WIRE_UNKNOWN);
    CHECK_EQ_INT(wire_sniff(b, 4), WIRE_UNKNOWN);
    CHECK_EQ_INT(wire_sniff(b, 5), WIRE_V2);
    CHECK_EQ_INT(wire_sniff(b, n), WIRE_V2);
    wire_req_t q;
    CHECK_EQ_INT(wire_parse(WIRE_V2, b, n, &lim, &q, NULL), 5);
    CHECK_EQ_INT(q.op, WIRE_VALIDATE);
    CHECK_EQ_INT(q.u32, WIRE_MAGIC);
    CHECK_EQ_INT(wire_parse(WIRE_V2, b + 5, n - 5, &lim, &q, NULL), 5);
    CHECK_EQ_INT(q.op, WIRE_PING);
    CHECK_EQ_INT(q.u32, 12345);
    /* a wrong magic is an error */
    b[1] = 0x11;
    CHECK_EQ_INT(wire_sniff(b, n), WIRE_V1);
    CHECK_EQ_INT(wire_parse(WIRE_V2, b, n, &lim, &q, NULL), PODRUN_EMAGIC);
}

static void test_op_tables(void)
{
    /* 1.13 numbering */
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_SET), 0);
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_GETNUMKEYS), 6);
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_WATCH_KEY), 7);
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_DELETE_KEY), 8);
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_PING), -1);
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_VALIDATE), -1);
    /* 2.x numbering */
    CHECK_EQ_INT(wire_opcode(WIRE_V2, WIRE_SET), 1);
    CHECK_EQ_INT(wire_opcode(WIRE_V2, WIRE_CANCEL_WAIT), 12);
    CHECK_EQ_INT(wire_opcode(WIRE_V2, WIRE_PING), 13);
    CHECK_EQ_INT(wire_opcode(WIRE_V2, WIRE_QUEUE_LEN), 16);
    CHECK_EQ_INT(wire_opcode(WIRE_V2, WIRE_BARRIER), 18);
    CHECK_EQ_INT(wire_opcode(WIRE_V2, WIRE_WATCH_KEY), -1);
    CHECK_EQ_INT(wire_opcode(WIRE_V1, WIRE_BARRIER), -1);
    wire_req_t q;
    char b[1] = {9};
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, 1, &lim, &q, NULL), PODRUN_EBADOP);
    b[0] = 19;
    CHECK_EQ_INT(wire_parse(WIRE_V2, b, 1, &lim, &q, NULL), PODRUN_EBADOP);
    b[0] = 'G'; /* "GET / HTTP/1.1" */
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, 1, &lim, &q, NULL), PODRUN_EBADOP);
    b[0] = 6; /* 1.13 GETNUMKEYS: no arguments */
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, 1, &lim, &q, NULL), 1);
    CHECK_EQ_INT(q.op, WIRE_GETNUMKEYS);
}

static void test_limits(void)
{
    char b[64];
    wire_req_t q;
    size_t need = 0;
    /* a key length of 2^60 is refused at once, before any of its bytes */
    size_t n = unhex("02 0000000000000010", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, &need), PODRUN_ETOOBIG);
    /* key just over the limit */
    n = unhex("02 0120000000000000", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, &need), PODRUN_ETOOBIG);
    /* key at the limit: fine, needs its bytes */
    n = unhex("02 0020000000000000", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, &need), 0);
    CHECK_EQ_INT(need, 9 + 8192);
    /* value over 8 MiB */
    n = unhex("00 0100000000000000 6b 0100800000000000", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, &need), PODRUN_ETOOBIG);
    /* too many keys in a WAIT */
    n = unhex("05 0100020000000000", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, &need), PODRUN_ETOOBIG);
    /* the 2.x handshake read as 1.13 is a SET with a ~1 GB key length: refused */
    n = unhex("00 CEF7853C 0D 39300000", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &lim, &q, &need), PODRUN_ETOOBIG);
    /* a whole-request limit */
    wire_limits_t small = lim;
    small.max_request = 20;
    n = unhex("00 0800000000000000 6b6b6b6b6b6b6b6b 0800000000000000", b);
    CHECK_EQ_INT(wire_parse(WIRE_V1, b, n, &small, &q, &need), PODRUN_ETOOBIG);
}

static void test_multi(void)
{
    wire_buf_t e = {0};
    wire_put_op(&e, WIRE_V2, WIRE_MULTI_SET);
    wire_put_u64(&e, 2);
    wire_put_str(&e, "a", 1);
    wire_put_str(&e, "1", 1);
    wire_put_str(&e, "bb", 2);
    wire_put_str(&e, "", 0);
    wire_put_op(&e, WIRE_V2, WIRE_MULTI_GET); /* a second request behind it */
    wire_put_u64(&e, 1);
    wire_put_str(&e, "a", 1);
    wire_req_t q;
    ssize_t r = wire_parse(WIRE_V2, e.p, e.len, &lim, &q, NULL);
    CHECK(r > 0 && (size_t)r < e.len);
    CHECK_EQ_INT(q.op, WIRE_MULTI_SET);
    CHECK_EQ_INT(q.n, 2);
    wire_iter_t it;
    wire_str_t k, v;
    wire_iter_init(&it, q.list);
    CHECK(wire_list_next(&it, &k, &v) && k.len == 1 && v.len == 1 && v.p[0] == '1');
    CHECK(wire_list_next(&it, &k, &v) && k.len == 2 && v.len == 0);
    CHECK(!wire_list_next(&it, &k, &v));
    check_prefixes(WIRE_V2, e.p, (size_t)r);
    ssize_t r2 = wire_parse(WIRE_V2, e.p + r, e.len - (size_t)r, &lim, &q, NULL);
    CHECK_EQ_INT(r + r2, e.len);
    CHECK_EQ_INT(q.op, WIRE_MULTI_GET);
    wire_buf_free(&e);
}

static void test_replies(void)
{
    char b[64];
    wire_reply_t rep;
    size_t need = 0;
    size_t n = unhex("0300000000000000 616263", b);
    CHECK_EQ_INT(wire_reply_parse(WIRE_R_VEC, 0, b, n, &lim, &rep, NULL), (ssize_t)n);
    CHECK(rep.val.len == 3 && memcmp(rep.val.p, "abc", 3) == 0);
    CHECK_EQ_INT(wire_reply_parse(WIRE_R_VEC, 0, b, 9, &lim, &rep, &need), 0);
    CHECK_EQ_INT(need, 11);
    n = unhex("0000000000000000", b); /* QUEUE_POP of an empty queue: just the length */
    CHECK_EQ_INT(wire_reply_parse(WIRE_R_QPOP, 0, b, n, &lim, &rep, NULL), 8);
    CHECK_EQ_INT(rep.num, 0);
    n = unhex("0200000000000000 0100000000000000 78", b);
    CHECK_EQ_INT(wire_reply_parse(WIRE_R_QPOP, 0, b, n, &lim, &rep, NULL), (ssize_t)n);
    CHECK_EQ_INT(rep.num, 2);
    CHECK(rep.val.len == 1 && rep.val.p[0] == 'x');
    n = unhex("0100000000000000 78 0000000000000000", b);
    CHECK_EQ_INT(wire_reply_parse(WIRE_R_VECS, 2, b, n, &lim, &rep, NULL), (ssize_t)n);
    n = unhex("39300000", b);
    CHECK_EQ_INT(wire_reply_parse(WIRE_R_U32, 0, b, n, &lim, &rep, NULL), 4);
    CHECK_EQ_INT(rep.u32, 12345);
    CHECK_EQ_INT(wire_reply_shape(WIRE_CANCEL_WAIT), WIRE_R_U8);
    CHECK_EQ_INT(wire_reply_shape(WIRE_SET), WIRE_R_NONE);
    CHECK_EQ_INT(wire_reply_shape(WIRE_MULTI_GET), WIRE_R_VECS);
}

int main(void)
{
    RUN(test_v1_add_example);
    RUN(test_v1_set_example);
    RUN(test_v2_hello);
    RUN(test_op_tables);
    RUN(test_limits);
    RUN(test_multi);
    RUN(test_replies);
    return check_result();
}
