/* rdzv/store/auth.c — the job's token and the store handshake (see auth.h). Pure: no I/O.
 *
 * nettle (Debian's nettle-dev) gives HMAC-SHA-256, SHA-256 and a constant-time compare: a small
 * library of primitives only, linked from its archive into a one-file build at the cost of a few
 * kilobytes, where libcrypto would bring its provider machinery along. */
#include "rdzv/store/auth.h"

#include <errno.h>
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "rdzv/base/common.h"

#define LABEL_SERVER "podrun-auth-1 server"
#define LABEL_CLIENT "podrun-auth-1 client"
#define HELLO AUTH_KEY_PREFIX "c/"
#define PROOF AUTH_KEY_PREFIX "p/"

static int is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

int auth_key_from_token(const char *text, size_t len, const char *what, auth_key_t *out,
                        char *err, size_t elen)
{
    while (len && is_blank(text[0]))
        text++, len--;
    while (len && is_blank(text[len - 1]))
        len--;
    if (len < AUTH_TOKEN_MIN || len > AUTH_TOKEN_MAX) {
        sfmt(err, elen,
             "%s: the rendezvous token is %s (%zu bytes; it needs %d to %d): make one with "
             "`openssl rand -hex 32`",
             what, len ? (len < AUTH_TOKEN_MIN ? "too short" : "too long") : "empty", len,
             AUTH_TOKEN_MIN, AUTH_TOKEN_MAX);
        return -EINVAL;
    }
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, len, (const uint8_t *)text);
    sha256_digest(&h, sizeof out->k, out->k);
    return 0;
}

int auth_equal(const void *a, const void *b, size_t n)
{
    return memeql_sec(a, b, n) != 0;
}

/* HMAC(K, label || a || b) with a and b nonces. */
static void mac(const auth_key_t *k, const char *label, const uint8_t *a, const uint8_t *b,
                uint8_t out[AUTH_MAC_LEN])
{
    struct hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, sizeof k->k, k->k);
    hmac_sha256_update(&h, strlen(label), (const uint8_t *)label);
    hmac_sha256_update(&h, AUTH_NONCE_LEN, a);
    hmac_sha256_update(&h, AUTH_NONCE_LEN, b);
    hmac_sha256_digest(&h, AUTH_MAC_LEN, out);
}

static void hex_put(char *out, const uint8_t *b, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
}

static int nib(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

/* Exactly 2n lower-case hex digits into n bytes: 0, or -EINVAL. */
static int hex_get(const char *s, size_t slen, uint8_t *out, size_t n)
{
    if (slen != 2 * n)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        int hi = nib(s[2 * i]), lo = nib(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* "<prefix><hex of b>" into key. */
static void hex_key(char *key, size_t cap, const char *prefix, const uint8_t *b, size_t n)
{
    char hex[2 * AUTH_MAC_LEN + 1];
    hex_put(hex, b, n);
    hex[2 * n] = '\0';
    sfmt(key, cap, "%s%s", prefix, hex);
}

void auth_client_hello(const uint8_t nc[AUTH_NONCE_LEN], char *key, size_t cap)
{
    hex_key(key, cap, HELLO, nc, AUTH_NONCE_LEN);
}

int auth_client_prove(const auth_key_t *k, const uint8_t nc[AUTH_NONCE_LEN], const char *reply,
                      size_t rlen, char *key, size_t cap)
{
    if (rlen == 0)
        return AUTH_OPEN;
    uint8_t ns[AUTH_NONCE_LEN], got[AUTH_MAC_LEN], want[AUTH_MAC_LEN];
    if (rlen != 2 * AUTH_NONCE_LEN + 1 + 2 * AUTH_MAC_LEN || reply[2 * AUTH_NONCE_LEN] != ' ' ||
        hex_get(reply, 2 * AUTH_NONCE_LEN, ns, sizeof ns) < 0 ||
        hex_get(reply + 2 * AUTH_NONCE_LEN + 1, 2 * AUTH_MAC_LEN, got, sizeof got) < 0)
        return -EACCES;
    mac(k, LABEL_SERVER, nc, ns, want);
    if (!auth_equal(got, want, AUTH_MAC_LEN))
        return -EACCES;
    mac(k, LABEL_CLIENT, ns, nc, want);
    hex_key(key, cap, PROOF, want, AUTH_MAC_LEN);
    return 0;
}

int auth_client_accepted(const char *reply, size_t rlen)
{
    return rlen == 2 && memcmp(reply, "ok", 2) == 0;
}

int auth_is_handshake_key(const char *key, size_t klen)
{
    return auth_under(key, klen, AUTH_KEY_PREFIX, sizeof AUTH_KEY_PREFIX - 1);
}

int auth_server_answer(const auth_key_t *k, auth_conn_t *st, const uint8_t ns[AUTH_NONCE_LEN],
                       const char *key, size_t klen, char *reply, size_t cap, size_t *rlen)
{
    const size_t hl = sizeof HELLO - 1, pl = sizeof PROOF - 1;
    uint8_t m[AUTH_MAC_LEN], want[AUTH_MAC_LEN];
    *rlen = 0;
    if (cap)
        reply[0] = '\0';
    if (st->state == AUTH_S_FAILED || cap < AUTH_REPLY_MAX)
        return -EACCES;
    if (auth_under(key, klen, HELLO, hl)) {
        uint8_t nc[AUTH_NONCE_LEN];
        if (hex_get(key + hl, klen - hl, nc, sizeof nc) < 0) {
            st->state = AUTH_S_FAILED;
            return -EACCES;
        }
        memcpy(st->nc, nc, sizeof nc);
        memcpy(st->ns, ns, AUTH_NONCE_LEN);
        if (st->state != AUTH_S_OK)
            st->state = AUTH_S_CHALLENGED;
        mac(k, LABEL_SERVER, st->nc, st->ns, m);
        hex_put(reply, st->ns, AUTH_NONCE_LEN);
        reply[2 * AUTH_NONCE_LEN] = ' ';
        hex_put(reply + 2 * AUTH_NONCE_LEN + 1, m, AUTH_MAC_LEN);
        *rlen = 2 * AUTH_NONCE_LEN + 1 + 2 * AUTH_MAC_LEN;
        reply[*rlen] = '\0';
        return 0;
    }
    if (auth_under(key, klen, PROOF, pl) && st->state != AUTH_S_NONE &&
        hex_get(key + pl, klen - pl, m, sizeof m) == 0) {
        mac(k, LABEL_CLIENT, st->ns, st->nc, want);
        if (auth_equal(m, want, AUTH_MAC_LEN)) {
            st->state = AUTH_S_OK;
            memcpy(reply, "ok", 3);
            *rlen = 2;
            return 0;
        }
    }
    st->state = AUTH_S_FAILED;
    return -EACCES;
}

int auth_op_writes(wire_op_t op)
{
    return wire_op_writes(op);
}

void auth_keys_init(auth_keys_t *ks, const wire_req_t *q)
{
    ks->q = q;
    ks->done = 0;
    wire_iter_init(&ks->it, q->list);
}

int auth_keys_next(auth_keys_t *ks, wire_str_t *key)
{
    wire_str_t val;
    if (ks->done)
        return 0;
    switch (wire_op_keys(ks->q->op)) {   /* the op table's keys column */
    case WIRE_KEYS_LIST:
        if (wire_list_next(&ks->it, key, NULL))
            return 1;
        break;
    case WIRE_KEYS_PAIRS:
        if (wire_list_next(&ks->it, key, &val))
            return 1;
        break;
    case WIRE_KEYS_ONE:
        *key = ks->q->key;
        ks->done = 1;
        return 1;
    case WIRE_KEYS_NONE:
        break;
    }
    ks->done = 1;
    return 0;
}
