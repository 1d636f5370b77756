/* podrun/store.h — a blocking client for the job store.
 *
 * The job store speaks PyTorch's TCPStore wire protocol. This client speaks the 2.x dialect
 * (VALIDATE + PING on connect, one connection per client), so it works against `podrun store`,
 * against podrun agents and against torch >= 2.4's own TCPStore servers.
 *
 * Keys are sent as given: unlike torch's C++ client no "/" prefix is added, so a key written here
 * as "/k" is the key torch's `store.set("k", …)` writes.
 *
 * Every function returns 0 (or a non-negative count) on success and a negative errno-style code
 * on failure: PODRUN_ETIMEDOUT when a wait ran out, PODRUN_ECONNRESET when the server went away,
 * PODRUN_EPROTO when the server answered something this client cannot parse, -ENOMEM, -EINVAL.
 * After any error but PODRUN_ETIMEDOUT from podrun_store_wait the connection is unusable and the
 * caller should podrun_store_close it. Values returned through `char **` / `size_t *` pairs are
 * malloc'd and NUL-terminated (the NUL is not counted); free them with free(). */
#ifndef PODRUN_STORE_H
#define PODRUN_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PODRUN_ETIMEDOUT  (-110)
#define PODRUN_ECONNRESET (-104)
#define PODRUN_EPROTO     (-71)

typedef struct podrun_store podrun_store_t;

/* Connects to HOST:PORT. While the name does not resolve or the connection is refused, retries
 * with exponential backoff (500 ms, x1.5, +/-50 % jitter, capped at 10 s) until timeout_ms has
 * passed (0: one attempt). On success *out is a connected, validated client.
 *
 * timeout_ms > 0 is also the I/O timeout of the client: sending a request and receiving its
 * reply may take at most that long, or the call returns PODRUN_ETIMEDOUT (and the connection is
 * unusable), so a server that stopped answering cannot block the caller forever. The wait of
 * podrun_store_wait has its own timeout instead. timeout_ms <= 0: no I/O timeout. */
int podrun_store_connect(const char *host, uint16_t port, int timeout_ms, podrun_store_t **out);
void podrun_store_close(podrun_store_t *s);

int podrun_store_set(podrun_store_t *s, const char *key, const void *val, size_t len);
/* GET of a missing key returns 0 with *len = 0 (the libuv server's answer); wait first when the
 * key may not exist yet. */
int podrun_store_get(podrun_store_t *s, const char *key, char **val, size_t *len);
int podrun_store_add(podrun_store_t *s, const char *key, int64_t delta, int64_t *result);
/* torch's semantics: see the server's op table in rdzv/wire.h. *cur receives what the server
 * answered: `desired` when the swap happened. */
int podrun_store_compare_set(podrun_store_t *s, const char *key, const void *expected,
                             size_t elen, const void *desired, size_t dlen, char **cur,
                             size_t *curlen);
/* 1 when every key exists, 0 otherwise. */
int podrun_store_check(podrun_store_t *s, const char *const *keys, size_t n);
/* Blocks until every key exists or timeout_ms passes (negative: no limit). On timeout the wait
 * is cancelled on the server (CANCEL_WAIT), so the connection stays usable. */
int podrun_store_wait(podrun_store_t *s, const char *const *keys, size_t n, int timeout_ms);
/* Returns 1 if the key existed and was deleted, 0 if it did not exist. */
int podrun_store_delete(podrun_store_t *s, const char *key);
int podrun_store_num_keys(podrun_store_t *s, int64_t *n);
int podrun_store_append(podrun_store_t *s, const char *key, const void *val, size_t len);
/* vals[i]/lens[i] receive each value (missing: empty). */
int podrun_store_multi_get(podrun_store_t *s, const char *const *keys, size_t n, char **vals,
                           size_t *lens);
int podrun_store_multi_set(podrun_store_t *s, const char *const *keys, const void *const *vals,
                           const size_t *lens, size_t n);
/* Round trip: sends a nonce and checks that the server echoes it. */
int podrun_store_ping(podrun_store_t *s);

/* A short text for a code returned above. */
const char *podrun_store_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
