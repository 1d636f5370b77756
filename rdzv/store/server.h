/* rdzv/store/server.h — the job store server: one libuv loop, both torch dialects, one key space.
 *
 * The server is embedded in the agent that hosts the job (and run alone by `podrun store`).
 * Besides serving TCP clients it offers the hosting process two in-process hooks, used by the
 * rendezvous coordinator: an observer that is told of every write under a key prefix and of
 * every close of a connection that wrote such a key, and direct writes that wake remote waiters.
 */
#ifndef PODRUN_RDZV_SERVER_H
#define PODRUN_RDZV_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rdzv/store/acl.h"
#include "rdzv/store/auth.h"
#include "rdzv/store/guard.h"
#include "rdzv/base/common.h"

typedef struct store_limits {
    size_t max_key_len;        /* bytes per key; default 8 KiB */
    size_t max_value_len;      /* bytes per value; default 8 MiB */
    size_t max_keys_per_req;   /* keys in one CHECK/WAIT/MULTI_*; default 128 Ki */
    size_t max_connections;    /* open client connections; default 65536 */
    size_t max_total_bytes;    /* keys + values held; default 1 GiB */
    size_t max_pending_bytes;  /* replies not yet read by their clients plus requests not yet
                                  complete, all connections together; default 256 MiB (0: the
                                  default). One connection may hold at most 2 x max_value_len +
                                  max_key_len + 32 MiB of it (so no single request may be larger);
                                  the connection that would pass either is closed */
} store_limits_t;

void store_limits_default(store_limits_t *lim);

typedef struct store_server store_server_t;

/* Called after a write (SET, COMPARE_SET that swapped, ADD, APPEND, MULTI_SET entry, DELETE_KEY,
 * QUEUE_PUSH) of a key that starts with the observed prefix, after its waiters were woken.
 * conn_id identifies the client connection (never 0; 0 for in-process writes, which are not
 * reported). `val` is the value now stored (NULL for a delete). Returning non-zero says the
 * observer has taken the write: the key is dropped from the key space right after the call, so
 * records only the hosting process reads cost no memory while the job runs. */
typedef int (*store_write_cb)(void *arg, uint64_t conn_id, const char *key, size_t klen,
                              const char *val, size_t vlen);
/* Called when a connection that wrote at least one observed key is closed, for any reason; err
 * is 0 when the peer closed it or the server did, else the socket's error (UV_ETIMEDOUT: the
 * peer's machine stopped acknowledging, see store_server_liveness). */
typedef void (*store_close_cb)(void *arg, uint64_t conn_id, int err);

/* Binds host:port (port 0: ephemeral; host NULL or "": all addresses, IPv6 dual-stack first),
 * listens with a large backlog and starts serving on `loop`. lim NULL: the defaults. The server's
 * lines for a person (a connection closed for bad input or a limit, a small listen backlog) go
 * to `log` (copied; NULL: nowhere). */
int store_server_start(uv_loop_t *loop, const char *host, uint16_t port,
                       const store_limits_t *lim, const podrun_log_t *log, store_server_t **out);
/* The port actually bound. */
uint16_t store_server_port(const store_server_t *s);
/* One observer per server; a second call replaces the first. */
void store_server_observe(store_server_t *s, const char *prefix, store_write_cb on_write,
                          store_close_cb on_close, void *arg);
/* From now on, each connection that writes an observed key is watched by the kernel too: it
 * fails with UV_ETIMEDOUT when what the server sent or its keep-alive probes stay unacknowledged
 * for timeout_ms; probes go out after quiet_ms without a byte from the peer (its heartbeat
 * period; podrun_tcp_liveness). Other connections (the workers') are left alone. */
void store_server_liveness(store_server_t *s, unsigned timeout_ms, unsigned quiet_ms);
/* In-process writes: same semantics as the wire ops, waiters woken, observer not called. They
 * are not bounded by max_total_bytes: the hosting process's own small records must not fail
 * because clients filled the store. */
int store_server_set(store_server_t *s, const char *key, size_t klen, const void *val,
                     size_t vlen);
/* Returns 1 and a pointer into the key space (valid until the next write) if the key exists. */
int store_server_get(store_server_t *s, const char *key, size_t klen, const char **val,
                     size_t *vlen);
/* Deletes one key: 1 if it existed, else 0. */
int store_server_delete(store_server_t *s, const char *key, size_t klen);
/* Deletes every key that does not start with keep_prefix: a fresh namespace for the workers of
 * the next attempt. Returns the number of keys deleted. */
size_t store_server_delete_except(store_server_t *s, const char *keep_prefix);

/* Guards podrun's keys, those under "podrun/" (rdzv/store/auth.h). With `key` (the job's token,
 * copied) only a connection that passed the token handshake may read or write them; LIST and
 * GETNUMKEYS answer the others as if they did not exist, and every other key (the workers')
 * stays open to every torch client. With may_write, a write under "podrun/" that it refuses is
 * refused to every connection, authenticated or not. A refused request closes its connection,
 * with one line naming the peer, and changes nothing. Both NULL: no guard (the default). */
void store_server_guard(store_server_t *s, const auth_key_t *key, store_may_write_cb may_write,
                        void *arg);
/* Refuses at accept, with one line, every connection whose source address is neither in `acl`
 * nor the address it arrived at (this machine reaching its own store). The list stays the
 * caller's, who may change it between connections; NULL: every source is accepted. */
void store_server_allow(store_server_t *s, const acl_t *acl);

/* What the server has done since it started (podrun's /metrics on the host). */
typedef struct store_server_stats {
    size_t connections;         /* open now */
    uint64_t accepted;          /* connections accepted in all */
    uint64_t ops[32];           /* requests handled, by opcode (rdzv/store/wire.h, wire_op_name) */
    size_t keys, bytes;         /* held now */
} store_server_stats_t;
void store_server_stats(const store_server_t *s, store_server_stats_t *out);

/* Stops listening, closes every connection, frees everything once the handles are closed
 * (on_closed, if given, runs then). */
void store_server_close(store_server_t *s, void (*on_closed)(void *arg), void *arg);

#endif
