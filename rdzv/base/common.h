/* rdzv/base/common.h — the small things every part of podrun needs, written once: a clock, random
 * ids, this machine's name, HOST[:PORT] text, whole numbers from text, bounded text, the one
 * error table, and the log sink library modules write to.
 *
 * Nothing here keeps state. The clock, the ids and the host name ask the kernel; everything else
 * is pure. Functions that can fail return 0 or a negative errno. */
#ifndef PODRUN_RDZV_COMMON_H
#define PODRUN_RDZV_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "podrun/store.h" /* the public codes: PODRUN_ETIMEDOUT, PODRUN_ECONNRESET, PODRUN_EPROTO */

/* ---- errors ----
 *
 * Every function in podrun returns 0 (or a count) on success and a negative code on failure, as
 * libuv does: a negative errno, a libuv code (its resolver errors), or one of podrun's own codes
 * below. podrun's own are in one table, with the words podrun_strerror gives them; the public
 * ones keep their errno values (include/podrun/store.h), the others sit in a range that no errno
 * and no libuv code uses. */
#define PODRUN_ERROR_TABLE(X)                                                                    \
    X(PODRUN_ETIMEDOUT, "timed out")                                                             \
    X(PODRUN_ECONNRESET, "connection to the store lost")                                         \
    X(PODRUN_EPROTO, "the store sent a reply this client cannot parse")                          \
    X(PODRUN_EBADOP, "unknown opcode for this dialect")                                          \
    X(PODRUN_ETOOBIG, "a length or count in a request is over the limits")                       \
    X(PODRUN_EMAGIC, "VALIDATE with a wrong magic number")                                       \
    X(PODRUN_EJOINTIMEOUT, "the rendezvous did not complete in time")                            \
    X(PODRUN_ESTORELOST, "the connection to the job store host was lost")                        \
    X(PODRUN_ESTORESILENT, "the job store host stopped answering heartbeats")                    \
    X(PODRUN_EREJECTED, "the rendezvous refused this node")                                      \
    X(PODRUN_EENDED, "the job had already ended when this node joined")                          \
    X(PODRUN_EEXCLUDED, "the job left this node out as a bad node")                              \
    X(PODRUN_EAUTH, "the job store holds another rendezvous token than this node")              \
    X(PODRUN_EAUTHOPEN, "the job store asks for no rendezvous token, but this node has one")      \
    X(PODRUN_EAUTHNEEDED, "the job store asks for a rendezvous token, and this node has none")   \
    X(PODRUN_ERUNID, "the job store belongs to another run than this node's --rdzv-id")    \
    X(PODRUN_EREFUSED, "the job store refused this node's address: it is not in the store's "    \
                       "allow-list (--store-allow)")                                             \
    X(PODRUN_ENOPROGRESS, "the job made no progress in its last attempts and is not restarted")

enum podrun_error {
    PODRUN_EBADOP = -5001,  /* wire: an opcode the connection's dialect does not have */
    PODRUN_ETOOBIG,         /* wire: a length or count beyond the limits */
    PODRUN_EMAGIC,          /* wire: VALIDATE with the wrong magic */
    PODRUN_EJOINTIMEOUT,    /* rendezvous: the round did not fill, or no store, in time */
    PODRUN_ESTORELOST,      /* rendezvous: the connection to the store host was lost */
    PODRUN_ESTORESILENT,    /* rendezvous: the store host stopped answering heartbeats */
    PODRUN_EREJECTED,       /* rendezvous: the coordinator refused this node */
    PODRUN_EENDED,          /* rendezvous: the job had already ended when this node joined */
    PODRUN_EEXCLUDED,       /* rendezvous: the job left this node out (rdzv/badnodes.h) */
    PODRUN_EAUTH,           /* store handshake: the store and this node hold different tokens */
    PODRUN_EAUTHOPEN,       /* store handshake: this node has a token, the store asks for none */
    PODRUN_EAUTHNEEDED,     /* store handshake: the store asks for a token this node lacks */
    PODRUN_ERUNID,          /* rendezvous: the store serves another run id than this node's */
    PODRUN_EREFUSED,        /* store accept: the source address is outside the allow-list */
    PODRUN_ENOPROGRESS,     /* rendezvous: attempts in a row without progress (no restart) */
};

/* The words for any code a podrun function returned: podrun's own from the table, an errno's
 * from the C library, libuv's own (resolver failures) from libuv. Never NULL. */
const char *podrun_strerror(int err);
/* The table's name of one of podrun's own codes ("PODRUN_EBADOP"), or NULL. */
const char *podrun_err_name(int err);

/* ---- logging ----
 *
 * Library modules never print: a line they have for a person (one line, no newline) goes to the
 * sink the program gave them, which decides where it goes and how it is prefixed. */
typedef struct podrun_log {
    void (*fn)(void *arg, const char *line);
    void *arg;
} podrun_log_t;

/* Formats one line and hands it to log->fn; nothing happens when log or log->fn is NULL. */
void podrun_logf(const podrun_log_t *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- clock ---- */

/* Wall-clock seconds since the epoch: what records and reports carry between machines. */
double podrun_time_epoch(void);
/* Monotonic milliseconds: deadlines, which must not move with the wall clock. */
int64_t podrun_time_mono_ms(void);

/* ---- ids ---- */

/* Fills out with `digits` random lowercase hex digits and a NUL (cap >= digits + 1); never all
 * zeros, so an id is never mistaken for "none". Random bytes come from getrandom(2); if the
 * kernel has none to give, the clock and the pid stand in (ids must differ, not be secret). */
void podrun_random_id(char *out, size_t digits);

/* ---- sockets ---- */

/* Lets the kernel tell whether the peer of TCP socket `fd` is reachable: a connection whose data
 * or keep-alive probes go unacknowledged for timeout_ms fails with ETIMEDOUT (TCP_USER_TIMEOUT,
 * and keep-alive probes once it has been quiet for the longer of half of that and quiet_ms, the
 * period at which the connection carries something anyway: a connection that heartbeats sends
 * no probes). The peer's kernel acknowledges even while the peer process is stopped or busy, so
 * this notices a lost machine or a cut network, not a slow process. 0 or -errno. */
int podrun_tcp_liveness(int fd, unsigned timeout_ms, unsigned quiet_ms);

/* ---- this machine ---- */

/* gethostname(2), always NUL-terminated; "" and -errno when it fails. */
int podrun_hostname(char *out, size_t cap);

/* ---- text ---- */

/* A whole number in [min, max]: decimal digits with an optional sign and nothing around them.
 * -EINVAL for anything else (also leading blanks), -ERANGE outside the range. */
int podrun_parse_int(const char *s, long min, long max, long *out);

/* HOST, HOST:PORT, [V6] or [V6]:PORT; an address with more than one ':' and no brackets is a bare
 * IPv6 host. The host is non-empty and holds no blanks, '/', '[' or ']'. *port is 0 and *has_port false when
 * no port is named; a port is 0..65535. Returns 0 or -EINVAL (also for a host longer than
 * host_cap - 1). */
int podrun_hostport_parse(const char *text, char *host, size_t host_cap, int *port,
                          bool *has_port);
/* "host:port", or "[host]:port" for an IPv6 address, cut to cap. */
void podrun_hostport_format(const char *host, int port, char *out, size_t cap);

/* Writes one line (cut to len; a line break of a quoted input becomes a space) into err when err
 * is given, and returns code: how the parsers of podrun's inputs report what was wrong with one,
 * e.g. "--nnodes 'x': expected N or MIN:MAX". */
int podrun_failf(int code, char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* snprintf that is meant to cut: every caller's buffer is bounded and a cut line is fine. No
 * buffer (NULL or cap 0) writes nothing, for callers whose error text is optional. */
static inline void sfmt(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void sfmt(char *out, size_t cap, const char *fmt, ...)
{
    if (!out || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

/* Names for a line, "a, b, c and 4 more": the first `max` items are written into out (which
 * starts as ""), the rest only counted; textlist_end adds the count. Cut to cap. */
typedef struct textlist {
    char *out;
    size_t cap;
    int items, more, max;
} textlist_t;
void textlist_add(textlist_t *l, const char *s);
void textlist_end(textlist_t *l);

/* "9m50s", "1h02m", "5s": a duration for humans, rounded up to whole seconds. */
void podrun_format_duration(double seconds, char *out, size_t cap);

#endif
