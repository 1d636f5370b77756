/* tests/unit/rdzv/store/test_auth.c — the token handshake (rdzv/store/auth.h): both sides against
 * each other, a known HMAC-SHA-256 answer, replays, wrong tokens, malformed keys, and which keys a
 * request names. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/store/auth.h"

static const uint8_t NC[AUTH_NONCE_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t NS[AUTH_NONCE_LEN] = {0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87,
                                           0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};

static auth_key_t key_of(const char *token)
{
    auth_key_t k;
    char err[256];
    CHECK_EQ_INT(auth_key_from_token(token, strlen(token), "test", &k, err, sizeof err), 0);
    return k;
}

static void test_token(void)
{
    auth_key_t a, b;
    char err[256];
    /* blanks and line ends around it are not part of it */
    a = key_of("0123456789abcdef0123");
    b = key_of("  0123456789abcdef0123\r\n");
    CHECK(memcmp(a.k, b.k, sizeof a.k) == 0);
    b = key_of("0123456789abcdef0124");
    CHECK(memcmp(a.k, b.k, sizeof a.k) != 0);
    CHECK_EQ_INT(auth_key_from_token("short\n", 6, "PODRUN_RDZV_TOKEN", &a, err, sizeof err),
                 -EINVAL);
    CHECK(strstr(err, "PODRUN_RDZV_TOKEN") && strstr(err, "too short") &&
          strstr(err, "openssl rand"));
    CHECK_EQ_INT(auth_key_from_token(" \n", 2, "f", &a, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "empty"));
    static char big[AUTH_TOKEN_MAX + 2];
    memset(big, 'x', sizeof big);
    CHECK_EQ_INT(auth_key_from_token(big, sizeof big, "f", &a, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "too long"));
}

static void test_equal(void)
{
    CHECK(auth_equal("abcd", "abcd", 4));
    CHECK(!auth_equal("abcd", "abce", 4));
    CHECK(auth_equal("", "x", 0));
}

/* The whole exchange; returns the server's state after the proof. */
static int handshake(const char *client_token, const char *server_token, int *client_rc)
{
    auth_key_t kc = key_of(client_token), ks = key_of(server_token);
    auth_conn_t st;
    memset(&st, 0, sizeof st);
    char key[AUTH_KEY_MAX], reply[AUTH_REPLY_MAX], proof[AUTH_KEY_MAX];
    size_t rlen;
    auth_client_hello(NC, key, sizeof key);
    CHECK_EQ_INT(auth_server_answer(&ks, &st, NS, key, strlen(key), reply, sizeof reply, &rlen),
                 0);
    CHECK_EQ_INT(st.state, AUTH_S_CHALLENGED);
    *client_rc = auth_client_prove(&kc, NC, reply, rlen, proof, sizeof proof);
    if (*client_rc != 0) /* the client checks the server first and goes no further */
        return st.state;
    int r = auth_server_answer(&ks, &st, NS, proof, strlen(proof), reply, sizeof reply, &rlen);
    if (r == 0)
        CHECK(auth_client_accepted(reply, rlen));
    return st.state;
}

static void test_exchange(void)
{
    int rc;
    CHECK_EQ_INT(handshake("the job's own token", "the job's own token", &rc), AUTH_S_OK);
    CHECK_EQ_INT(rc, 0);
    /* the client notices a store with another token before it proves anything */
    CHECK_EQ_INT(handshake("the job's own token", "somebody else's token", &rc),
                 AUTH_S_CHALLENGED);
    CHECK_EQ_INT(rc, -EACCES);
    /* an empty answer is a store that does not ask */
    char proof[AUTH_KEY_MAX];
    auth_key_t k = key_of("the job's own token");
    CHECK_EQ_INT(auth_client_prove(&k, NC, "", 0, proof, sizeof proof), AUTH_OPEN);
    CHECK_EQ_INT(auth_client_prove(&k, NC, "garbage", 7, proof, sizeof proof), -EACCES);
    CHECK(!auth_client_accepted("", 0));
    CHECK(!auth_client_accepted("okay", 4));
}

/* The wire form is fixed: the server's MAC for known nonces and token, as a reimplementation
 * (tests/integration/rogue.py, Python's hmac) computes it. */
static void test_known_answer(void)
{
    auth_key_t k = key_of("c0ffeec0ffeec0ffee");
    auth_conn_t st;
    memset(&st, 0, sizeof st);
    char key[AUTH_KEY_MAX], reply[AUTH_REPLY_MAX];
    size_t rlen;
    auth_client_hello(NC, key, sizeof key);
    CHECK_EQ_STR(key, "podrun//auth/c/0102030405060708090a0b0c0d0e0f10");
    CHECK_EQ_INT(auth_server_answer(&k, &st, NS, key, strlen(key), reply, sizeof reply, &rlen),
                 0);
    CHECK_EQ_INT(rlen, 97);
    CHECK_EQ_STR(reply, "f0e1d2c3b4a5968778695a4b3c2d1e0f "
                        "b05df5efdf27742c73aff2d3022ce3a03d0b3d11c222bfbea0e0999f84ded5dd");
}

static void test_replay(void)
{
    auth_key_t k = key_of("the job's own token");
    auth_conn_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    char key[AUTH_KEY_MAX], reply[AUTH_REPLY_MAX], proof[AUTH_KEY_MAX];
    size_t rlen;
    auth_client_hello(NC, key, sizeof key);
    auth_server_answer(&k, &a, NS, key, strlen(key), reply, sizeof reply, &rlen);
    CHECK_EQ_INT(auth_client_prove(&k, NC, reply, rlen, proof, sizeof proof), 0);
    CHECK_EQ_INT(auth_server_answer(&k, &a, NS, proof, strlen(proof), reply, sizeof reply, &rlen),
                 0);
    /* the same hello on another connection gets another server nonce: the old proof fails */
    uint8_t ns2[AUTH_NONCE_LEN];
    memcpy(ns2, NS, sizeof ns2);
    ns2[0] ^= 1;
    auth_server_answer(&k, &b, ns2, key, strlen(key), reply, sizeof reply, &rlen);
    CHECK_EQ_INT(auth_server_answer(&k, &b, ns2, proof, strlen(proof), reply, sizeof reply,
                                    &rlen), -EACCES);
    CHECK_EQ_INT(rlen, 0);
    CHECK_EQ_INT(b.state, AUTH_S_FAILED);
    /* a failed connection stays failed, even with a good hello */
    CHECK_EQ_INT(auth_server_answer(&k, &b, ns2, key, strlen(key), reply, sizeof reply, &rlen),
                 -EACCES);
    /* a proof without a hello */
    auth_conn_t c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(auth_server_answer(&k, &c, NS, proof, strlen(proof), reply, sizeof reply, &rlen),
                 -EACCES);
}

static void test_malformed(void)
{
    auth_key_t k = key_of("the job's own token");
    char reply[AUTH_REPLY_MAX];
    size_t rlen;
    const char *bad[] = {
        "podrun//auth/c/0102",                                      /* short nonce */
        "podrun//auth/c/0102030405060708090a0b0c0d0e0f1000",        /* long */
        "podrun//auth/c/0102030405060708090A0B0C0D0E0F10",          /* upper case */
        "podrun//auth/c/zz02030405060708090a0b0c0d0e0f10",
        "podrun//auth/x/0102030405060708090a0b0c0d0e0f10",          /* no such step */
        "podrun//auth/p/00",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        auth_conn_t st;
        memset(&st, 0, sizeof st);
        CHECK_EQ_INT(auth_server_answer(&k, &st, NS, bad[i], strlen(bad[i]), reply, sizeof reply,
                                        &rlen), -EACCES);
        CHECK_EQ_INT(st.state, AUTH_S_FAILED);
    }
    CHECK(auth_is_handshake_key("podrun//auth/c/", 15));
    CHECK(!auth_is_handshake_key("podrun/job/auth/c/", 18));
}

static void test_request_keys(void)
{
    wire_buf_t b = {0};
    const char *keys[] = {"a", "podrun/x"};
    wire_put_op(&b, WIRE_V2, WIRE_WAIT);
    wire_put_keys(&b, keys, 2);
    wire_limits_t lim = {1024, 1024, 16, 1 << 20};
    wire_req_t q;
    CHECK(wire_parse(WIRE_V2, b.p, b.len, &lim, &q, NULL) > 0);
    auth_keys_t ks;
    wire_str_t k;
    auth_keys_init(&ks, &q);
    CHECK(auth_keys_next(&ks, &k) && k.len == 1 && !memcmp(k.p, "a", 1));
    CHECK(auth_keys_next(&ks, &k) && k.len == 8 && !memcmp(k.p, "podrun/x", 8));
    CHECK(!auth_keys_next(&ks, &k));
    /* MULTI_SET: the keys, not the values */
    b.len = 0;
    wire_put_op(&b, WIRE_V2, WIRE_MULTI_SET);
    wire_put_u64(&b, 2);
    wire_put_str(&b, "k1", 2), wire_put_str(&b, "podrun/v", 8);
    wire_put_str(&b, "podrun/k2", 9), wire_put_str(&b, "v", 1);
    CHECK(wire_parse(WIRE_V2, b.p, b.len, &lim, &q, NULL) > 0);
    auth_keys_init(&ks, &q);
    CHECK(auth_keys_next(&ks, &k) && k.len == 2);
    CHECK(auth_keys_next(&ks, &k) && k.len == 9 && !memcmp(k.p, "podrun/k2", 9));
    CHECK(!auth_keys_next(&ks, &k));
    /* one key; none */
    b.len = 0;
    wire_put_op(&b, WIRE_V2, WIRE_ADD);
    wire_put_str(&b, "podrun/hb", 9), wire_put_i64(&b, 1);
    CHECK(wire_parse(WIRE_V2, b.p, b.len, &lim, &q, NULL) > 0);
    auth_keys_init(&ks, &q);
    CHECK(auth_keys_next(&ks, &k) && k.len == 9);
    CHECK(!auth_keys_next(&ks, &k));
    CHECK(auth_op_writes(WIRE_ADD) && auth_op_writes(WIRE_QUEUE_POP) &&
          !auth_op_writes(WIRE_GET) && !auth_op_writes(WIRE_WAIT));
    b.len = 0;
    wire_put_op(&b, WIRE_V2, WIRE_LIST);
    CHECK(wire_parse(WIRE_V2, b.p, b.len, &lim, &q, NULL) > 0);
    auth_keys_init(&ks, &q);
    CHECK(!auth_keys_next(&ks, &k));
    wire_buf_free(&b);
}

int main(void)
{
    RUN(test_token);
    RUN(test_equal);
    RUN(test_exchange);
    RUN(test_known_answer);
    RUN(test_replay);
    RUN(test_malformed);
    RUN(test_request_keys);
    return check_result();
}
