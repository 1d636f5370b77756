/* rdzv/store/keyspace.h — the job store's keys, values, queues, waiters and watchers. Pure code: no
 * I/O.
 *
 * Keys and values are opaque bytes. Values are kept NUL-terminated (the NUL is not counted), so
 * a value read back can be used as a C string when it holds text.
 *
 * Waits: a WAIT on keys that do not all exist yet becomes a waiter with a counter of keys still
 * missing, linked from each missing key; a BARRIER that is not yet complete becomes a waiter
 * linked from its (existing) key. A write of a key walks only that key's links and decrements
 * their counters; a counter reaching zero completes the wait (the on_ready callback runs once).
 * Nothing ever scans all waiters.
 *
 * Clients are "owners": a small struct embedded in the connection that chains its waits and
 * watches, so closing a connection or CANCEL_WAIT frees exactly what it holds.
 *
 * Callbacks run synchronously inside the keyspace call that caused them and must not call back
 * into the keyspace.
 *
 * Byte accounting: every key held (also keys that exist only because someone waits on them or
 * watches them), every value and every queued item count towards `max_bytes`; a write that would
 * pass it fails with -ENOSPC and changes nothing. */
#ifndef PODRUN_RDZV_KEYSPACE_H
#define PODRUN_RDZV_KEYSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv/base/list.h"
#include "rdzv/store/wire.h"

typedef struct keyspace keyspace_t;

/* Zeroed: an owner with nothing. */
typedef struct ks_owner {
    list_head_t waiters; /* its waits not yet complete */
    list_head_t watches; /* its WATCH_KEYs */
} ks_owner_t;

/* A wait of `owner` completed: all its keys exist now. */
typedef void (*ks_ready_cb)(void *arg, ks_owner_t *owner);
/* A watched key changed (1.13 WATCH_KEY): type is WIRE_KEY_CREATED, _UPDATED or _DELETED; old/new are
 * the values before and after (empty when the key did not exist / was deleted). */
typedef void (*ks_watch_cb)(void *arg, ks_owner_t *owner, int type, const char *key, size_t klen,
                            const char *old, size_t oldlen, const char *nval, size_t newlen);

int keyspace_new(size_t max_bytes, ks_ready_cb on_ready, ks_watch_cb on_watch, void *arg,
                 keyspace_t **out);
/* Frees everything; owners still holding waits must not be used with it afterwards. */
void keyspace_free(keyspace_t *ks);

int keyspace_set(keyspace_t *ks, const char *key, size_t klen, const char *val, size_t vlen);
/* keyspace_set past max_bytes (the bytes still count): for the hosting process's own records. */
int keyspace_set_unbounded(keyspace_t *ks, const char *key, size_t klen, const char *val,
                           size_t vlen);
/* 1 and the value (valid until the next write) when the key exists, 0 when it does not. */
int keyspace_get(keyspace_t *ks, const char *key, size_t klen, const char **val, size_t *vlen);
/* The stored value is the decimal text of the sum, as torch's std::to_string writes it; a missing
 * key counts as 0. The old value is read like std::stoll: leading blanks, a sign, digits, and
 * anything after the digits ignored. -EINVAL when it has no digits, -ERANGE when it or the sum
 * does not fit in an int64. */
int keyspace_add(keyspace_t *ks, const char *key, size_t klen, int64_t delta, int64_t *out);
/* BARRIER (torch 2.15 has it; 2.8 does not): one more arrival at key, counted like ADD 1 (*count: the new value).
 * Returns 1 when the count reached `world` (everyone waiting on the key is released), 0 when a
 * waiter was registered for owner (on_ready runs at the next write of the key: the arrival that
 * completes the barrier, or any SET, ADD, APPEND ... of it), or -EINVAL/-ERANGE (the value is
 * not a number, as for ADD), -ENOMEM, -ENOSPC. */
int keyspace_barrier(keyspace_t *ks, ks_owner_t *owner, const char *key, size_t klen,
                     int64_t world, int64_t *count);
/* torch's COMPARE_SET: key missing and `expected` empty: the key is set to `desired`; key missing
 * and `expected` non-empty: nothing changes and `expected` is answered (torch calls this lying);
 * key present: replaced by `desired` if it equals `expected`. *cur and *curlen: the answer (points
 * into the keyspace or into the arguments). Returns 1 when `desired` was stored, 0 when nothing
 * changed, or a negative error. */
int keyspace_compare_set(keyspace_t *ks, const char *key, size_t klen, const char *exp,
                         size_t elen, const char *des, size_t dlen, const char **cur,
                         size_t *curlen);
/* Appends to the value; creates the key if missing. */
int keyspace_append(keyspace_t *ks, const char *key, size_t klen, const char *val, size_t vlen);
/* 1 if the key existed (it is gone now), 0 otherwise. Waiters stay: they wait for a new write. */
int keyspace_delete(keyspace_t *ks, const char *key, size_t klen);
size_t keyspace_num_keys(const keyspace_t *ks);
size_t keyspace_bytes(const keyspace_t *ks);

/* 1 when every key exists (a key with a non-empty queue counts), 0 otherwise. */
int keyspace_check(keyspace_t *ks, const wire_str_t *keys, size_t n);
/* 1 when every key exists now (no waiter is made), 0 when a waiter was registered for owner
 * (on_ready runs later), or -ENOMEM/-ENOSPC. */
int keyspace_wait(keyspace_t *ks, ks_owner_t *owner, const wire_str_t *keys, size_t n);
/* Drops every pending wait of owner (CANCEL_WAIT); returns how many there were. */
size_t keyspace_cancel_waits(keyspace_t *ks, ks_owner_t *owner);
/* Registers owner to be told of every change to key (1.13 WATCH_KEY). */
int keyspace_watch(keyspace_t *ks, ks_owner_t *owner, const char *key, size_t klen);
/* Drops all waits and watches of owner: call when its connection closes. */
void keyspace_release(keyspace_t *ks, ks_owner_t *owner);

/* Queues (torch >= 2.8). A push wakes the oldest waiter on the key. */
int keyspace_queue_push(keyspace_t *ks, const char *key, size_t klen, const char *val,
                        size_t vlen);
/* Pops the oldest item into *item (malloc'd, free() it; *ilen its length) and returns the queue
 * length before the pop; 0 (and *item NULL) when the queue is empty. */
int64_t keyspace_queue_pop(keyspace_t *ks, const char *key, size_t klen, char **item,
                           size_t *ilen);
int64_t keyspace_queue_len(keyspace_t *ks, const char *key, size_t klen);

/* Calls fn for every existing key (in no particular order); stops early when fn returns non-0. */
int keyspace_foreach(keyspace_t *ks, int (*fn)(void *arg, const char *key, size_t klen,
                                               const char *val, size_t vlen), void *arg);
/* Deletes every key (and queue) that does not start with keep_prefix; returns how many. */
size_t keyspace_delete_except(keyspace_t *ks, const char *keep, size_t keeplen);

#endif
