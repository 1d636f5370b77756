/* rdzv/common.h — the small things every part of podrun needs, written once: a clock, random
 * ids, this machine's name, HOST[:PORT] text, whole numbers from text, and bounded text.
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

/* ---- this machine ---- */

/* gethostname(2), always NUL-terminated; "" and -errno when it fails. */
int podrun_hostname(char *out, size_t cap);

/* ---- text ---- */

/* A whole number in [min, max]: decimal digits with an optional sign and nothing around them.
 * -EINVAL for anything else (also leading blanks), -ERANGE outside the range. */
int podrun_parse_int(const char *s, long min, long max, long *out);

/* HOST, HOST:PORT, [V6] or [V6]:PORT; an address with more than one ':' and no brackets is a bare
 * IPv6 host. The host is non-empty and holds no blanks or '/'. *port is 0 and *has_port false when
 * no port is named; a port is 0..65535. Returns 0 or -EINVAL (also for a host longer than
 * host_cap - 1). */
int podrun_hostport_parse(const char *text, char *host, size_t host_cap, int *port,
                          bool *has_port);
/* "host:port", or "[host]:port" for an IPv6 address, cut to cap. */
void podrun_hostport_format(const char *host, int port, char *out, size_t cap);

/* snprintf that is meant to cut: every caller's buffer is bounded and a cut line is fine. */
static inline void sfmt(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void sfmt(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

/* "9m50s", "1h02m", "5s": a duration for humans, rounded up to whole seconds. */
void podrun_format_duration(double seconds, char *out, size_t cap);

#endif
