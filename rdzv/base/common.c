/* rdzv/base/common.c — clock, ids, host name, HOST[:PORT], numbers from text, the error table and
 * the log sink (see common.h). */
#include "rdzv/base/common.h"

#include <ctype.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

double podrun_time_epoch(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int64_t podrun_time_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void podrun_random_id(char *out, size_t digits)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[64];
    size_t n = (digits + 1) / 2;
    if (n > sizeof b)
        n = sizeof b, digits = 2 * sizeof b;
    for (;;) {
        if (getrandom(b, n, 0) != (ssize_t)n) {
            /* no entropy to be had: ids only need to differ between agents and runs */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t v = ((uint64_t)getpid() << 40) ^ (uint64_t)ts.tv_nsec ^
                         ((uint64_t)ts.tv_sec << 20);
            for (size_t i = 0; i < n; i++, v = v * 0x9e3779b97f4a7c15ull + 1)
                b[i] = (unsigned char)(v >> 56);
        }
        int zero = 1;
        for (size_t i = 0; i < digits; i++) {
            unsigned nib = i % 2 ? b[i / 2] & 15 : b[i / 2] >> 4;
            out[i] = hex[nib];
            zero &= nib == 0;
        }
        out[digits] = '\0';
        if (!zero)
            return;
    }
}

int podrun_tcp_liveness(int fd, unsigned timeout_ms, unsigned quiet_ms)
{
    unsigned half = timeout_ms / 2000, quiet = (quiet_ms + 999) / 1000;
    int on = 1, idle = (int)(quiet > half ? quiet : half), intvl = 1, cnt = (int)(timeout_ms / 1000);
    if (idle < 1)
        idle = 1;
    if (cnt < 1)
        cnt = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof timeout_ms) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) < 0)
        return -errno;
    return 0;
}

int podrun_hostname(char *out, size_t cap)
{
    if (!cap)
        return -EINVAL;
    out[0] = '\0';
    if (gethostname(out, cap - 1) < 0) {
        out[0] = '\0';
        return -errno;
    }
    out[cap - 1] = '\0';
    return 0;
}

int podrun_parse_int(const char *s, long min, long max, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s)
        return -EINVAL;
    if (v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int podrun_hostport_parse(const char *text, char *host, size_t host_cap, int *port,
                          bool *has_port)
{
    const char *h = text, *p = NULL; /* the host's first byte, and the port's text if any */
    size_t hl;
    long v = 0;
    if (text[0] == '[') {
        const char *rb = strchr(text, ']');
        if (!rb || rb == text + 1 || (rb[1] && rb[1] != ':'))
            return -EINVAL;
        h = text + 1;
        hl = (size_t)(rb - h);
        p = rb[1] ? rb + 2 : NULL;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon && strchr(text, ':') != colon)
            colon = NULL; /* a bare IPv6 address */
        hl = colon ? (size_t)(colon - text) : strlen(text);
        p = colon ? colon + 1 : NULL;
    }
    if (hl == 0 || hl >= host_cap || (p && podrun_parse_int(p, 0, 65535, &v)))
        return -EINVAL;
    for (size_t i = 0; i < hl; i++)
        if (isspace((unsigned char)h[i]) || strchr("/[]", h[i]))
            return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)v;
    *has_port = p != NULL;
    return 0;
}

void podrun_hostport_format(const char *host, int port, char *out, size_t cap)
{
    if (strchr(host, ':'))
        sfmt(out, cap, "[%s]:%d", host, port);
    else
        sfmt(out, cap, "%s:%d", host, port);
}

int podrun_failf(int code, char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
        /* one line whatever the input it quotes holds */
        for (char *p = err; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
    }
    return code;
}

void textlist_add(textlist_t *l, const char *s)
{
    if (l->items >= l->max) {
        l->more++;
        return;
    }
    size_t len = strlen(l->out);
    sfmt(l->out + len, l->cap - len, "%s%s", l->items ? ", " : "", s);
    l->items++;
}

void textlist_end(textlist_t *l)
{
    if (l->more) {
        size_t len = strlen(l->out);
        sfmt(l->out + len, l->cap - len, " and %d more", l->more);
    }
}

void podrun_format_duration(double seconds, char *out, size_t cap)
{
    /* rounded up without ceil(): libm would be loaded for this alone (~400 KiB resident) */
    long s = seconds <= 0 ? 0 : seconds >= 1e15 ? (long)1e15 : (long)seconds;
    if (s < 1e15 && (double)s < seconds)
        s++;
    if (s < 60)
        sfmt(out, cap, "%lds", s);
    else if (s < 3600)
        sfmt(out, cap, "%ldm%02lds", s / 60, s % 60);
    else
        sfmt(out, cap, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

static const struct {
    int code;
    const char *name, *text;
} errors[] = {
#define PODRUN_ERROR_ROW(code, text) {code, #code, text},
    PODRUN_ERROR_TABLE(PODRUN_ERROR_ROW)
#undef PODRUN_ERROR_ROW
};

const char *podrun_err_name(int err)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].code == err)
            return errors[i].name;
    return NULL;
}

const char *podrun_strerror(int err)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].code == err)
            return errors[i].text;
    /* errno values are small; libuv's own codes (uv/errno.h) start at -3000 */
    if (err < 0 && err > -3000)
        return strerror(-err);
    return uv_strerror(err);
}

void podrun_logf(const podrun_log_t *log, const char *fmt, ...)
{
    if (!log || !log->fn)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log->fn(log->arg, line);
}
