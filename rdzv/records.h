/* rdzv/records.h — the rendezvous records' text form, shared by the agents and the coordinator.
 * Pure code: no I/O, no globals; every input is bounded and every decoder takes any bytes.
 *
 * A record is "key=value\n" lines; in values '\\' and newline are escaped as "\\\\" and "\\n".
 * Every field has a bounded length (the RDZV_*_MAX of rendezvous.h); longer text is cut, at a
 * UTF-8 boundary. Decoders take the first line of each key, ignore keys they do not know, and
 * clamp numbers to their field's range (a value out of range is treated as absent), so a record
 * from a newer or broken peer is read as far as it makes sense and never beyond. The records:
 *   node descriptor   what an agent sends when it joins (name, addresses, nproc, wanted rank)
 *   failure           one failure of a node or a worker (also inside an end record)
 *   assignment        the coordinator's answer to a join: ranks and the store, or an error
 *   end               how a round ended: "finished", or the job-wide stop decision */
#ifndef PODRUN_RDZV_RECORDS_H
#define PODRUN_RDZV_RECORDS_H

#include <stddef.h>

#include "rdzv/base/common.h"
#include "rdzv/rendezvous.h"

/* A run's keys lie under "podrun/<id>/", <id> being the run id with '%' and '/' written as
 * "%25" and "%2F": any id torchrun takes ("exp/1") is one path component, and no run's keys lie
 * under another's ("exp" and "exp/1"). Writes that prefix; its length, or -ENAMETOOLONG when
 * the escaped id is longer than RDZV_RUN_ID_MAX (out is then ""). */
#define RDZV_RUN_ID_MAX 128
int rdzv_run_prefix(char *out, size_t cap, const char *run_id);

/* The key of a node's record: "<prefix>n/<ids>/<what>[/<num>]" (num < 0: none), prefix being
 * "podrun/<run_id>/" and ids the node's 16 hex digits. Agents write these and the coordinator
 * answers on them. */
void rdzv_node_key(char *out, size_t cap, const char *prefix, const char *ids, const char *what,
                   int num);

/* 1 when key[0..klen) is a record an agent writes, "<prefix>n/<16 hex>/" followed by join/<k>,
 * hb, health, fail/<R>, done/<R>, leave, peer/<R> or gather/<s> (numbers decimal, at most 2^30): the only keys under
 * "podrun/" a client may write. Every other key there is the coordinator's answer. */
int rdzv_agent_record_key(const char *key, size_t klen, const char *prefix);

/* ---- key=value text ---- */

typedef struct kvbuf {
    char *buf;
    size_t cap, len;
    int overflow; /* 1 if something did not fit (what fit is kept, lines stay whole) */
} kvbuf_t;

void kv_init(kvbuf_t *b, char *buf, size_t cap);
/* Appends "k=v\n" with v escaped; v is cut to vmax bytes (0: no cut) before escaping. */
void kv_add(kvbuf_t *b, const char *k, const char *v, size_t vmax);
void kv_add_int(kvbuf_t *b, const char *k, long long v);
void kv_add_double(kvbuf_t *b, const char *k, double v);
/* Finds the first line "k=..." in text[0..len) and unescapes its value into out (cut to cap-1,
 * always NUL-terminated). Returns the unescaped length, or -1 if the key is absent. */
int kv_get(const char *text, size_t len, const char *k, char *out, size_t cap);
/* Integer value of k, or `def` if absent or not a number. */
long long kv_get_int(const char *text, size_t len, const char *k, long long def);
/* Seconds (a time or a duration) of k, or `def` if absent or not such a number
 * (rdzv_seconds_parse). */
double kv_get_double(const char *text, size_t len, const char *k, double def);
/* A number of seconds from another node: the whole text a finite number under RDZV_SECONDS_MAX
 * in size (about 31.7 million years), so that what a record says prints back the same. 0 if it
 * is one. */
#define RDZV_SECONDS_MAX 1e15
int rdzv_seconds_parse(const char *text, double *out);

/* ---- records ---- */

typedef struct rdzv_desc_rec {
    char name[RDZV_NAME_MAX], addr[RDZV_NAME_MAX], host[RDZV_NAME_MAX];
    int nproc, want_rank, pid;
    int service;   /* its workers are services the job does not wait for; "service=1" */
    char domain[RDZV_NAME_MAX]; /* its NVLink domain ("<cluster uuid>/<clique>"), "" none: sent
                                   only when set, so a record without it reads as before */
    int has_progress;           /* the trainer's progress as the node read it before joining */
    long long progress;         /* (--progress-file), 0..2^62: sent only when it has one */
    int relay_port; /* the UDP port on addr where it takes the round's end (rdzv/relay.h); 0:
                       it does not relay, and waits on the store itself. "relay=<port>" */
} rdzv_desc_rec_t;

#define RDZV_PROGRESS_MAX (1LL << 62) /* a progress value above it reads as none */

/* Each encoder returns the length written (< cap) or -ENOSPC. */
int rdzv_desc_encode(const rdzv_desc_rec_t *d, char *buf, size_t cap);
int rdzv_desc_decode(const char *text, size_t len, rdzv_desc_rec_t *d); /* 0 or -EINVAL */

/* A failure record; `pfx` prefixes every key ("" alone, "f3." inside a decision). */
void rdzv_failure_put(kvbuf_t *b, const char *pfx, const rdzv_failure_t *f);
void rdzv_failure_take(const char *text, size_t len, const char *pfx, rdzv_failure_t *f);
int rdzv_failure_encode(const rdzv_failure_t *f, char *buf, size_t cap);
int rdzv_failure_decode(const char *text, size_t len, rdzv_failure_t *f);

/* A node's health-check record, sent when its state changed: state, interval, why, and the
 * last check's age ("ago", seconds by the sender's clock), so that the reader places it on its
 * own clock: decode sets h->checked = now - ago (0 when no check has run). */
int rdzv_health_encode(const rdzv_health_t *h, double now, char *buf, size_t cap);
int rdzv_health_decode(const char *text, size_t len, double now, rdzv_health_t *h); /* 0, -EINVAL */
/* A heartbeat's value after a check: "ago=<s>" (the same clock rule); decode gives the check's
 * time on the reader's clock, or 0 when the value holds none (an empty heartbeat). */
int rdzv_health_ago_encode(double checked, double now, char *buf, size_t cap);
double rdzv_health_ago_decode(const char *text, size_t len, double now);

/* An assignment or, when `error` is non-NULL, an error answer ("timeout", "rejected", "ended",
 * "finished") with a text. */
int rdzv_assign_encode(const rdzv_assignment_t *a, char *buf, size_t cap);
int rdzv_assign_error_encode(const char *error, const char *text, char *buf, size_t cap);
/* Fills a (store_host points into host_buf); error_out gets the error kind ("" for none) and
 * text_out the error text. Returns 0 or -EINVAL. */
int rdzv_assign_decode(const char *text, size_t len, rdzv_assignment_t *a, char *host_buf,
                       size_t host_cap, char *error_out, size_t ecap, char *text_out,
                       size_t tcap);

/* The end of a round: finished (d NULL) or a decision. */
int rdzv_end_encode(const rdzv_decision_t *d, char *buf, size_t cap);
/* Returns 1 for "finished", 0 for a decision (failures must hold RDZV_MAX_FAILURES records; d->own
 * is left -1), -EINVAL for garbage. */
int rdzv_end_decode(const char *text, size_t len, rdzv_decision_t *d, rdzv_failure_t *failures);

#endif
