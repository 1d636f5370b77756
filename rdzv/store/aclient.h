/* rdzv/store/aclient.h — an asynchronous job-store client on the agent's libuv loop.
 *
 * Speaks the 2.x dialect. Requests are pipelined: they are written in the order they are made
 * and their replies are matched in that order. A WAIT holds every later reply on its connection
 * until it is answered, so long waits belong on a connection of their own.
 *
 * Every callback gets status 0 or a negative code (PODRUN_ETIMEDOUT, PODRUN_ECONNRESET,
 * PODRUN_EPROTO from podrun/store.h, or a libuv error). Pending requests get PODRUN_ECONNRESET
 * when the connection is lost; then on_lost (if set) runs once. Callbacks never run from inside
 * the call that queued the request. */
#ifndef PODRUN_RDZV_ACLIENT_H
#define PODRUN_RDZV_ACLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "podrun/store.h"
#include "rdzv/store/auth.h"

typedef struct store_aclient store_aclient_t;

typedef void (*store_aclient_cb)(store_aclient_t *c, int status, void *arg);
/* For replies: `val`/`len` hold a GET/COMPARE_SET value (valid only during the call), `num` an
 * ADD result or a DELETE count. */
typedef void (*store_reply_cb)(store_aclient_t *c, int status, const char *val, size_t len,
                               int64_t num, void *arg);

/* Connects with the same backoff as podrun_store_connect (name not resolving, refused) until
 * timeout_ms; connected(c, 0, arg) once validated. On failure connected gets the error and the
 * client is freed after the callback returns. */
int store_aclient_connect(uv_loop_t *loop, const char *host, uint16_t port, int timeout_ms,
                          store_aclient_cb connected, void *arg, store_aclient_t **out);
/* While connecting: the error of the last attempt whose TCP connection was accepted but whose
 * hello (VALIDATE) got no store's answer — something else holds the port —, or 0. */
int store_aclient_hello_error(const store_aclient_t *c);
/* Makes every connection attempt pass the token handshake (rdzv/store/auth.h) before `connected`
 * runs: with `key`, the store must prove it holds the same token and accept this client's
 * proof; with NULL, the store must not ask for a token. Otherwise `connected` gets
 * PODRUN_EAUTH (another token), PODRUN_EAUTHOPEN (the store asks for none) or PODRUN_EAUTHNEEDED
 * (it asks for one), without further attempts. Call it right after store_aclient_connect. */
void store_aclient_auth(store_aclient_t *c, const auth_key_t *key);
/* Connects from `addr` (an IPv4 or IPv6 address this machine holds; NULL: the kernel picks)
 * where the store is on this machine (store_aclient_is_local): a store's allow-list then sees
 * this node's advertised address, not the loopback address such a connection would come from
 * (several agents on one machine). Towards another machine the kernel's choice stands: the
 * outgoing interface's address, which the store can answer. Destinations of the same family
 * only. -EINVAL when addr is not an address. Call right after connect. */
int store_aclient_source(store_aclient_t *c, const char *addr);
/* 1 when the address is loopback or one of this machine's interfaces holds it. */
int store_aclient_is_local(const struct sockaddr *sa);
/* Instead of backing off, retries every interval_ms (jittered by +-50%) until the deadline: a
 * joining agent connects within one interval of the server's start, and the load it puts on a
 * refused port or an unanswered name is bounded by the interval. Call right after connect. */
void store_aclient_retry_every(store_aclient_t *c, unsigned interval_ms);
/* The kernel notices a lost server machine or a cut network: the connection is lost when what
 * was sent, or a keep-alive probe sent after quiet_ms without a byte from the server, stays
 * unacknowledged for timeout_ms (podrun_tcp_liveness); 0: the kernel's defaults. Applies now if
 * connected, else once connected. */
void store_aclient_liveness(store_aclient_t *c, unsigned timeout_ms, unsigned quiet_ms);
/* Called once when an established connection is lost: status PODRUN_ECONNRESET (closed),
 * PODRUN_EPROTO, or the socket's error (UV_ETIMEDOUT: see store_aclient_liveness). */
void store_aclient_on_lost(store_aclient_t *c, store_aclient_cb on_lost, void *arg);

/* SET has no reply on the wire: cb runs when the request has been written. */
int store_aclient_set(store_aclient_t *c, const char *key, const void *val, size_t len,
                      store_reply_cb cb, void *arg);
int store_aclient_get(store_aclient_t *c, const char *key, store_reply_cb cb, void *arg);
int store_aclient_add(store_aclient_t *c, const char *key, int64_t delta, store_reply_cb cb,
                      void *arg);
int store_aclient_delete(store_aclient_t *c, const char *key, store_reply_cb cb, void *arg);
/* cb(status 0) when every key exists; PODRUN_ETIMEDOUT after timeout_ms (< 0: none), in which
 * case the wait is cancelled on the server and the connection stays usable. A timed WAIT goes out
 * only once no other WAIT is out, and what is made after it is held back until it is answered. */
int store_aclient_wait(store_aclient_t *c, const char *const *keys, size_t n, int timeout_ms,
                       store_reply_cb cb, void *arg);

/* Cancels the untimed WAITs out on this connection: each gets UV_ECANCELED unless its key came
 * first, and what was sent behind them is answered as if they had been answered (a GET of a
 * missing key answers empty). cb(status 0) once the server confirmed. -EINVAL while a timed WAIT
 * is out (it cancels itself). */
int store_aclient_cancel_wait(store_aclient_t *c, store_reply_cb cb, void *arg);
/* PING: cb(status 0) when the server echoed the nonce, which proves it alive and serving. The
 * echo is not held up by an unanswered WAIT on the connection. */
int store_aclient_ping(store_aclient_t *c, store_reply_cb cb, void *arg);
/* The loop time (uv_now, ms) when the last byte from the server arrived; 0 before any. */
uint64_t store_aclient_last_heard(const store_aclient_t *c);

/* Closes the connection; pending callbacks run with UV_ECANCELED, then the client is freed.
 * on_lost does not run. A SET whose bytes were still being written gets its callback later,
 * from the loop, after this returns: 0 if they went out, else UV_ECANCELED. */
void store_aclient_close(store_aclient_t *c);

#endif
