/* rdzv/store/guard.h — who may do what in the job store: the token handshake's answer, the
 * protected prefix "podrun/", the rule for writing under it, and the allow-list at accept.
 *
 * The server (server.c) moves bytes; before a request's handler runs it asks store_guard_check
 * what to do with it, and at accept it asks store_guard_admits. Every decision is made here, from
 * the request and the connection's handshake state alone: no socket, no key space. */
#ifndef PODRUN_STORE_GUARD_H
#define PODRUN_STORE_GUARD_H

#include <stddef.h>
#include <sys/socket.h>

#include "rdzv/store/acl.h"
#include "rdzv/store/auth.h"
#include "rdzv/store/wire.h"

/* Whether a client may write `key` (which lies under "podrun/"). A refusal may say why in
 * why[0..cap) (left empty: the general reason). */
typedef int (*store_may_write_cb)(void *arg, const char *key, size_t klen, char *why,
                                  size_t cap);

/* What the hosting process asked for (store_server_guard, store_server_allow). Zeroed: nothing
 * is guarded and every source is accepted. */
typedef struct store_guard {
    int on, has_key;            /* podrun's keys are guarded; by a token */
    auth_key_t key;
    store_may_write_cb may_write;
    void *arg;
    const acl_t *acl;           /* NULL: every source */
} store_guard_t;

/* Guards podrun's keys with the job's token (`key`, copied; NULL: no token) and the write rule
 * `may_write` (NULL: none). Both NULL: no guard. */
void store_guard_set(store_guard_t *g, const auth_key_t *key, store_may_write_cb may_write,
                     void *arg);

/* What to do with a request, before its handler. */
enum {
    STORE_GUARD_PASS,           /* run its handler */
    STORE_GUARD_HANDSHAKE,      /* a GET of a handshake key: answer it with store_guard_answer */
    STORE_GUARD_HIDE,           /* LIST or GETNUMKEYS of a connection that may not see podrun's
                                   keys: answer as if they did not exist (store_guard_hidden) */
    STORE_GUARD_REFUSE,         /* close the connection; line[0..cap) says why, without the peer */
};
/* The verdict on request q of a connection whose handshake stands at `a`. */
int store_guard_check(const store_guard_t *g, const auth_conn_t *a, const wire_req_t *q,
                      char *line, size_t cap);

/* The answer to a handshake GET (q), with a fresh nonce: 0 and reply[0..*len) to send; or -EACCES
 * with the (empty) reply to send before the connection closes, line[0..cap) saying why; or
 * another negative code with line saying why (nothing to send). */
int store_guard_answer(const store_guard_t *g, auth_conn_t *a, const wire_req_t *q, char *reply,
                       size_t rcap, size_t *len, char *line, size_t cap);

/* Whether `key` is hidden from a connection that did not pass the handshake. */
int store_guard_hidden(const char *key, size_t klen);

/* At accept: whether a connection from `peer` that arrived at `self` (NULL: not known) may stay.
 * The address it arrived at is always allowed: that is this machine reaching its own store. */
int store_guard_admits(const store_guard_t *g, const struct sockaddr *peer,
                       const struct sockaddr *self);

#endif
