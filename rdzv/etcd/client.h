/* rdzv/etcd/client.h — an etcd v3 client on the agent's libuv loop, over rdzv/base/http.c and
 * etcd's JSON gateway (rdzv/etcd/json.h). No thread, no blocking call, no polling.
 *
 * One client talks to one etcd cluster through a list of its members' endpoints. Requests go to
 * the current endpoint; a request that fails there — no connection, a timeout, an answer that is
 * not etcd's, or an error a retry can get past (no leader, leader changed, overloaded) — moves
 * the client to the next endpoint and is sent again: at once while there are endpoints it has
 * not tried, then with a backoff that grows to 1 s. A call is retried until it succeeds or etcd
 * refuses it for good (a missing lease, a bad request); deciding how long etcd may fail is the
 * caller's (etcd_client_failing_ms). Watch streams follow the current endpoint and, after any
 * break, resume on the next one from the revision after the last event they delivered, so an
 * event is delivered once, in order, whichever member sent it.
 *
 * Callbacks never run from inside the call that started or cancelled something, and nothing
 * runs for a call or a watch once it has been cancelled or the client closed. */
#ifndef PODRUN_RDZV_ETCD_CLIENT_H
#define PODRUN_RDZV_ETCD_CLIENT_H

#include <stdint.h>
#include <uv.h>

#include "rdzv/etcd/json.h"

typedef struct etcd_client etcd_client_t;
typedef struct etcd_call etcd_call_t;
typedef struct etcd_watch etcd_watch_t;

typedef struct etcd_client_conf {
    const etcd_endpoint_t *endpoints;
    int n_endpoints;
    int first;                 /* the endpoint to start with (spreads agents over members) */
    const char *cacert, *cert, *key; /* PEM files for https endpoints; NULL: system CAs, no
                                        client certificate */
    int timeout_ms;            /* one attempt of one call; 0: 5 s */
    int idle_ms;               /* an attempt during which no byte came for this long fails (a
                                  member that holds the connection but answers nothing is left
                                  well before a lease runs out); 0: only timeout_ms */
} etcd_client_conf_t;

int etcd_client_new(uv_loop_t *loop, const etcd_client_conf_t *conf, etcd_client_t **out);
/* Cancels every call and watch (nothing runs for them) and closes the client; its memory goes
 * once the loop has closed its handles. */
void etcd_client_close(etcd_client_t *c);

/* 0 while etcd answers; once an attempt has failed, the milliseconds since the last answer (or
 * since the client started, before any), with what went wrong last (endpoint, reason) in why. */
int64_t etcd_client_failing_ms(const etcd_client_t *c, char *why, size_t cap);
/* The URL of the endpoint requests go to now, and the last failure seen ("" before any). */
const char *etcd_client_endpoint(const etcd_client_t *c);
const char *etcd_client_last_error(const etcd_client_t *c);

/* The answer to a call: status 0 with r the answer; 1 with r an error answer etcd will give
 * again (r->code, r->error: a lease that does not exist, a request it refuses); negative when
 * the call gave up (ETCD_CALL_ONCE: every endpoint failed once) with the last reason in r->error.
 * r and what it points to are valid during the call. */
typedef void (*etcd_call_cb)(void *arg, int status, const etcd_resp_t *r);

enum etcd_call_flags {
    ETCD_CALL_ONCE = 1, /* each endpoint once, then give up (for the last words of a closing
                           agent, which must not wait) */
    ETCD_CALL_BULK = 2, /* an answer etcd may take long to start (every record of a large job):
                           bounded by timeout_ms alone, not by idle_ms */
};

/* POSTs body (taken: freed by the client, also on error) to /v3/<path> ("kv/put",
 * "lease/keepalive", ...). *out, if given, is the call's handle until cb runs. 0, -EINVAL,
 * -ENOMEM, -ESHUTDOWN. */
int etcd_call(etcd_client_t *c, const char *path, char *body, int flags, etcd_call_cb cb,
              void *arg, etcd_call_t **out);
void etcd_call_cancel(etcd_call_t *k);

/* A message of a watch stream: created, events (kvs; op 1 marks a DELETE), or canceled — with
 * compact_rev > 0 when the revision to resume from is gone (compacted): the watch has stopped
 * and the caller must read what it missed and watch again. */
typedef void (*etcd_watch_cb)(void *arg, const etcd_resp_t *m);

/* Starts n watchers (specs copied; each needs a distinct watch_id > 0): on one stream, or on
 * several where their create requests would not fit in what etcd's gateway reads first
 * (etcd_watch_group). Every stream calls cb; cancelling the handle stops them all. */
int etcd_watch_start(etcd_client_t *c, const etcd_watch_spec_t *w, size_t n, etcd_watch_cb cb,
                     void *arg, etcd_watch_t **out);
void etcd_watch_cancel(etcd_watch_t *w);

#endif
