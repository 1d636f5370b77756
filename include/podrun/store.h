/* podrun/store.h — a blocking client for podrun's job store.
 *
 * The job store speaks PyTorch's TCPStore wire protocol. This client speaks the 2.x dialect
 * (VALIDATE + PING on connect, one connection per client), so it works against `podrun store`,
 * against podrun agents (every job's store) and against torch >= 2.4's own TCPStore servers.
 * Build against it with `pkg-config --cflags --libs podrun`.
 *
 * Keys are sent as given: unlike torch's C++ client no "/" prefix is added, so the key torch's
 * `store.set("k", ...)` writes is "/k" here. Keys are NUL-terminated strings; values are bytes.
 *
 * Errors. Every function returns 0 (or a count, or 1 for "yes") on success and a negative code
 * on failure: PODRUN_ETIMEDOUT when a deadline passed, PODRUN_ECONNRESET when the server went
 * away, PODRUN_EPROTO when the server answered something this client cannot parse, or a negative
 * errno (-ENOMEM, -EINVAL, a connect error). podrun_store_strerror names any of them. After any
 * error but PODRUN_ETIMEDOUT from podrun_store_wait the connection is unusable: close it.
 *
 * Values returned through `char **` / `size_t *` pairs are malloc'd and NUL-terminated (the NUL
 * is not counted); free them with free().
 *
 * A client is one connection and is not thread-safe: one call at a time per client. */
#ifndef PODRUN_STORE_H
#define PODRUN_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PODRUN_EXTERN __attribute__((visibility("default")))
#else
#define PODRUN_EXTERN
#endif

/* Error codes beyond errno (their values are the matching negative errno). */
#define PODRUN_ETIMEDOUT  (-110) /* a deadline passed */
#define PODRUN_ECONNRESET (-104) /* the server closed the connection, or it broke */
#define PODRUN_EPROTO     (-71)  /* a reply this client cannot parse */

typedef struct podrun_store podrun_store_t;

/* Connects to HOST:PORT (a name, an IPv4 or an IPv6 address). While the name does not resolve
 * or the connection is refused, retries with exponential backoff (500 ms, x1.5, +/-50 % jitter,
 * capped at 10 s) until timeout_ms has passed (<= 0: one attempt). On success *out is a
 * connected client that has checked the server speaks the protocol (a PING answered).
 *
 * timeout_ms > 0 is also the I/O timeout of the client: sending a request and receiving its
 * reply may take at most that long, or the call returns PODRUN_ETIMEDOUT (and the connection is
 * unusable), so a server that stopped answering cannot block the caller forever. The wait of
 * podrun_store_wait has its own timeout instead. timeout_ms <= 0: no I/O timeout. */
PODRUN_EXTERN int podrun_store_connect(const char *host, uint16_t port, int timeout_ms,
                                       podrun_store_t **out);
/* Closes the connection and frees the client. NULL is fine. */
PODRUN_EXTERN void podrun_store_close(podrun_store_t *s);

/* Sets key to val[0..len). The protocol has no reply to a SET: 0 means the request was sent.
 * The next call that has a reply (or podrun_store_ping) is behind it on the server. */
PODRUN_EXTERN int podrun_store_set(podrun_store_t *s, const char *key, const void *val,
                                   size_t len);
/* The value of key in *val / *len. A missing key reads as empty (0, *len = 0), as the libuv
 * server answers; podrun_store_wait first when the key may not exist yet. */
PODRUN_EXTERN int podrun_store_get(podrun_store_t *s, const char *key, char **val, size_t *len);
/* Adds delta to the decimal integer stored at key (a missing key counts as 0) and returns the
 * sum in *result (may be NULL). The server closes the connection when the value is not an
 * integer (PODRUN_ECONNRESET), as torch's servers do. */
PODRUN_EXTERN int podrun_store_add(podrun_store_t *s, const char *key, int64_t delta,
                                   int64_t *result);
/* torch's compare-and-set. Key present: set to `desired` if its value equals `expected`. Key
 * missing: set to `desired` if `expected` is empty, else nothing changes. *cur (malloc'd) is the
 * server's answer: the value now stored, `desired` when the swap happened, or `expected` for a
 * missing key that was not created (torch's answer; the key still does not exist). */
PODRUN_EXTERN int podrun_store_compare_set(podrun_store_t *s, const char *key,
                                           const void *expected, size_t elen, const void *desired,
                                           size_t dlen, char **cur, size_t *curlen);
/* 1 when every one of keys[0..n) exists, 0 otherwise. */
PODRUN_EXTERN int podrun_store_check(podrun_store_t *s, const char *const *keys, size_t n);
/* Blocks until every one of keys[0..n) exists (0) or timeout_ms passes (negative: no limit;
 * PODRUN_ETIMEDOUT). On timeout the wait is cancelled on the server (CANCEL_WAIT), so the
 * connection stays usable. */
PODRUN_EXTERN int podrun_store_wait(podrun_store_t *s, const char *const *keys, size_t n,
                                    int timeout_ms);
/* Deletes key: 1 if it existed, 0 if it did not. */
PODRUN_EXTERN int podrun_store_delete(podrun_store_t *s, const char *key);
/* The number of keys in the store in *n. */
PODRUN_EXTERN int podrun_store_num_keys(podrun_store_t *s, int64_t *n);
/* Appends val[0..len) to key's value, creating the key if missing. No reply, as SET. */
PODRUN_EXTERN int podrun_store_append(podrun_store_t *s, const char *key, const void *val,
                                      size_t len);
/* The values of keys[0..n) in vals[i] / lens[i] (malloc'd each; a missing key: empty). On an
 * error no value is left allocated. */
PODRUN_EXTERN int podrun_store_multi_get(podrun_store_t *s, const char *const *keys, size_t n,
                                         char **vals, size_t *lens);
/* Sets keys[i] to vals[i][0..lens[i]) for i < n, in order. No reply, as SET. */
PODRUN_EXTERN int podrun_store_multi_set(podrun_store_t *s, const char *const *keys,
                                         const void *const *vals, const size_t *lens, size_t n);
/* A round trip: sends a nonce and checks that the server echoes it. After a SET, a successful
 * ping means the SET was applied. */
PODRUN_EXTERN int podrun_store_ping(podrun_store_t *s);

/* A short text for any code these functions return. Never NULL. */
PODRUN_EXTERN const char *podrun_store_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
