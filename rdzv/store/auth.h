/* rdzv/store/auth.h — who may use podrun's keys in the job store: the per-job token, the
 * challenge-response that proves an agent's connection holds it, and the rule that says which
 * requests touch podrun's keys. Pure code: no I/O, no globals; the caller brings the random
 * nonces. HMAC-SHA-256 and the constant-time compare are nettle's.
 *
 * The handshake travels as two ordinary GETs of reserved keys under "podrun//auth/" (a run id is
 * never empty, so no job's keys can collide), so it needs nothing the torch wire protocol lacks,
 * and a store that does not know it (torch's own, or podrun's without a token) answers both with
 * an empty value, a plain key miss:
 *
 *   client                                              server (holds K = SHA-256(token))
 *   GET podrun//auth/c/<hex Nc>          ->
 *                                        <-  "<hex Ns> <hex HMAC(K, "podrun-auth-1 server" Nc Ns)>"
 *   (checks the server's MAC: a store that does not hold the token cannot pass for the job's)
 *   GET podrun//auth/p/<hex HMAC(K, "podrun-auth-1 client" Ns Nc)>  ->
 *                                        <-  "ok"   (else "" and the connection is closed)
 *
 * Nc and Ns are 16 random bytes each, Ns fresh for every connection and every challenge, so a
 * recorded proof is worth nothing on another connection (no replay), and the two directions use
 * different labels, so neither side can be used to compute the other's answer. The token itself
 * never travels. */
#ifndef PODRUN_RDZV_AUTH_H
#define PODRUN_RDZV_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv/store/wire.h"

#define AUTH_NONCE_LEN 16
#define AUTH_MAC_LEN 32
#define AUTH_TOKEN_MIN 16          /* bytes: a shorter token is refused, not padded */
#define AUTH_TOKEN_MAX 4096
#define AUTH_KEY_PREFIX "podrun//auth/"
#define AUTH_KEY_MAX 96            /* the longest handshake key, with its NUL */
#define AUTH_REPLY_MAX 100         /* the longest handshake answer, with its NUL */
#define AUTH_PROTECTED_PREFIX "podrun/"

/* The job's secret as the MACs use it: SHA-256 of the token's bytes. */
typedef struct auth_key {
    uint8_t k[32];
} auth_key_t;

/* Reads a token as a file or a variable holds it: surrounding blanks and line ends are not part
 * of it. 0, or -EINVAL with one line in err (empty, shorter than AUTH_TOKEN_MIN, longer than
 * AUTH_TOKEN_MAX) naming `what` (the file or variable) and the fix. */
int auth_key_from_token(const char *text, size_t len, const char *what, auth_key_t *out,
                        char *err, size_t elen);

/* Constant-time equality of two byte strings of length n: 1 when equal. */
int auth_equal(const void *a, const void *b, size_t n);

/* ---- the client's side ---- */

/* The first request's key for nonce nc (NUL-terminated, < AUTH_KEY_MAX). */
void auth_client_hello(const uint8_t nc[AUTH_NONCE_LEN], char *key, size_t cap);

enum {
    AUTH_OPEN = 1, /* the store answered the challenge with a key miss: it asks for no token */
};
/* The server's answer to the hello: checks its MAC and writes the second request's key.
 * 0 (key written), AUTH_OPEN (empty answer), or -EACCES (the store does not hold this token, or
 * the answer is not one). */
int auth_client_prove(const auth_key_t *k, const uint8_t nc[AUTH_NONCE_LEN], const char *reply,
                      size_t rlen, char *key, size_t cap);
/* Whether the answer to the proof says the connection is now the job's. */
int auth_client_accepted(const char *reply, size_t rlen);

/* ---- the server's side ---- */

/* The state a server keeps per connection (zeroed at accept). */
typedef struct auth_conn {
    uint8_t nc[AUTH_NONCE_LEN], ns[AUTH_NONCE_LEN];
    uint8_t state; /* AUTH_S_* */
} auth_conn_t;
enum { AUTH_S_NONE, AUTH_S_CHALLENGED, AUTH_S_OK, AUTH_S_FAILED };

/* Whether a key is one of the handshake's. */
int auth_is_handshake_key(const char *key, size_t klen);

/* Handles a GET of a handshake key on a connection in state *st, with ns a fresh random nonce
 * (used only for a hello). Writes the answer (NUL-terminated, < AUTH_REPLY_MAX) into reply and
 * sets *rlen. Returns 0 when the request was well-formed and answered (st->state tells where the
 * connection now stands: AUTH_S_OK after a good proof), or -EACCES for a wrong proof, a proof
 * without a hello, or a malformed key (reply is then "", and the connection should go). */
int auth_server_answer(const auth_key_t *k, auth_conn_t *st, const uint8_t ns[AUTH_NONCE_LEN],
                       const char *key, size_t klen, char *reply, size_t cap, size_t *rlen);

/* ---- what a request touches ---- */

/* Whether a key lies under prefix p (plen bytes). */
static inline int auth_under(const char *key, size_t klen, const char *p, size_t plen)
{
    size_t i;
    if (klen < plen)
        return 0;
    for (i = 0; i < plen; i++)
        if (key[i] != p[i])
            return 0;
    return 1;
}

/* Whether a request changes the key space: the op table's writes column (wire_op_writes). */
int auth_op_writes(wire_op_t op);

/* Every key a request names, one by one, as the op table's keys column says (LIST and
 * GETNUMKEYS name none: the guard has them answered without podrun's keys instead). */
typedef struct auth_keys {
    const wire_req_t *q;
    wire_iter_t it;
    int done;
} auth_keys_t;
void auth_keys_init(auth_keys_t *ks, const wire_req_t *q);
/* 1 and the next key, or 0 at the end. */
int auth_keys_next(auth_keys_t *ks, wire_str_t *key);

#endif
