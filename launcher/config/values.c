/* launcher/config/values.c — parse and format for each kind of value (see values.h). */
#include "launcher/config/values.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"
#include "rdzv/etcd/json.h"

#define FIELD(c, s, type) ((type *)((char *)(c) + (s)->off))
#define CFIELD(c, s, type) ((const type *)((const char *)(c) + (s)->off))

/* One line about a bad input into err, and -EINVAL. */
#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

/* A copy of text in *out: 0 or -ENOMEM. */
static int dup_text(const char *text, char **out)
{
    *out = strdup(text);
    return *out ? 0 : -ENOMEM;
}

/* ---- the small parsers ---------------------------------------------------------------------- */

int cfg_parse_duration(const char *s, uint64_t *ms)
{
    if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '.' && isdigit((unsigned char)s[1]))))
        return -EINVAL; /* also keeps out "-1", " 1", "nan", "inf" */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -EINVAL;
    double scale = 1000;
    if (!*end || !strcmp(end, "s"))
        scale = 1000;
    else if (!strcmp(end, "ms"))
        scale = 1;
    else if (!strcmp(end, "m"))
        scale = 60000;
    else if (!strcmp(end, "h"))
        scale = 3600000;
    else
        return -EINVAL;
    double r = v * scale;
    if (r > 30.0 * 24 * 3600 * 1000) /* a month bounds every wait */
        return -ERANGE;
    *ms = (uint64_t)(r + 0.5);
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on", "True", "TRUE", "Yes", "YES",
                                      "ON"};
    static const char *const no[] = {"0", "false", "no", "off", "False", "FALSE", "No", "NO",
                                     "OFF"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (!strcmp(s, yes[i])) {
            *out = true;
            return 0;
        }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (!strcmp(s, no[i])) {
            *out = false;
            return 0;
        }
    return -EINVAL;
}

/* Copies the next item of a non-empty "a,b,c" list at *p into item and moves *p past it and its
 * comma; -EINVAL for an empty or overlong item or a trailing comma. */
static int next_item(const char **p, char *item, size_t cap)
{
    size_t n = strcspn(*p, ",");
    if (n == 0 || n >= cap)
        return -EINVAL;
    memcpy(item, *p, n);
    item[n] = 0;
    *p += n;
    if (**p == ',' && !*++*p)
        return -EINVAL;
    return 0;
}

/* One "LR:N" item of a stream spec: its local rank and mask. */
static int stdspec_item(char *item, long *lr, long *mask)
{
    char *colon = strchr(item, ':');
    if (!colon)
        return -EINVAL;
    *colon = 0;
    if (podrun_parse_int(item, 0, CFG_MAX_NPROC - 1, lr) || podrun_parse_int(colon + 1, 0, 3, mask))
        return -EINVAL;
    return 0;
}

/* "N" (all local ranks) or "LR:N,LR:N" with N in 0..3: with mask NULL only the syntax is
 * checked; else every local rank's mask is filled (-ERANGE: *bad is not below nproc). */
static int stdspec_walk(const char *spec, int nproc, uint8_t *mask, long *bad)
{
    long v, lr;
    if (!strchr(spec, ':')) {
        if (podrun_parse_int(spec, 0, 3, &v))
            return -EINVAL;
        if (mask)
            memset(mask, (int)v, (size_t)nproc);
        return 0;
    }
    for (const char *p = spec; *p;) {
        char item[32];
        if (next_item(&p, item, sizeof item) || stdspec_item(item, &lr, &v))
            return -EINVAL;
        if (mask && lr >= nproc) {
            *bad = lr;
            return -ERANGE;
        }
        if (mask)
            mask[lr] = (uint8_t)v;
    }
    return 0;
}

int cfg_stdspec_expand(const char *spec, int nproc, uint8_t *mask, long *bad)
{
    memset(mask, 0, (size_t)nproc);
    return spec ? stdspec_walk(spec, nproc, mask, bad) : 0;
}

int cfg_ranks_parse(const char *s, int n, bool *mark, long *bad)
{
    if (!*s)
        return -EINVAL;
    for (const char *p = s; *p;) {
        char item[16];
        long v;
        if (next_item(&p, item, sizeof item) || podrun_parse_int(item, 0, CFG_MAX_NPROC - 1, &v))
            return -EINVAL;
        if (v >= n) {
            *bad = v;
            return -ERANGE;
        }
        if (mark)
            mark[v] = true;
    }
    return 0;
}

int cfg_conf_next(const char **p, char *key, size_t cap, const char **val)
{
    *val = NULL;
    while (**p) {
        size_t n = strcspn(*p, ",");
        if (n >= cap)
            return -E2BIG;
        memcpy(key, *p, n);
        key[n] = 0;
        *p += n;
        if (**p == ',')
            (*p)++;
        if (n == 0)
            continue;
        char *eq = strchr(key, '=');
        if (!eq || eq == key)
            return -EINVAL;
        *eq = 0;
        *val = eq + 1;
        return 1;
    }
    return 0;
}

/* ---- one entry per kind ---------------------------------------------------------------------- */

static void drop_text(union cfg_value *v)
{
    free(v->s);
    v->s = NULL;
}

static void store_text(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    char **f = FIELD(c, s, char *);
    free(*f);
    *f = v->s;
    v->s = NULL;
}

static void clear_text(struct cfg *c, const struct cfg_setting *s)
{
    char **f = FIELD(c, s, char *);
    free(*f);
    *f = NULL;
}

static void format_text(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    const char *t = *CFIELD(c, s, char *);
    snprintf(buf, len, "%s", t ? t : "(none)");
}

static void store_int(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    *FIELD(c, s, int) = (int)v->i;
}

static void format_int(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    snprintf(buf, len, "%d", *CFIELD(c, s, int));
}

static int parse_nproc(const struct cfg_setting *s, const char *t, const char *what,
                       union cfg_value *v, char *err, size_t errlen)
{
    /* CFG_NPROC_AUTO.. in order; "xpu" is torch 2.x's */
    static const char *const kinds[] = {"auto", "cpu", "gpu", "gpus-or-1", "xpu"};
    long n;
    (void)s;
    for (int k = 0; k < 5; k++)
        if (!strcmp(t, kinds[k])) {
            v->nproc.kind = CFG_NPROC_AUTO + k;
            return 0;
        }
    if (podrun_parse_int(t, 1, CFG_MAX_NPROC, &n))
        return fail(err, errlen, "%s: expected a number of workers from 1 to %d, 'auto', 'cpu', "
                    "'gpu' or 'xpu'", what, CFG_MAX_NPROC);
    v->nproc.kind = CFG_NPROC_NUMBER;
    v->nproc.n = (int)n;
    return 0;
}

static void store_nproc(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    (void)s;
    c->nproc_kind = (enum cfg_nproc_kind)v->nproc.kind;
    if (v->nproc.kind == CFG_NPROC_NUMBER)
        c->nproc_per_node = v->nproc.n;
}

static void format_nproc(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    static const char *const kind[] = {"", "auto", "cpu", "gpu", "gpus-or-1", "xpu"};
    (void)s;
    if (c->nproc_kind == CFG_NPROC_NUMBER)
        snprintf(buf, len, "%d", c->nproc_per_node);
    else
        snprintf(buf, len, "%d (%s)", c->nproc_per_node, kind[c->nproc_kind]);
}

static int parse_nnodes(const struct cfg_setting *s, const char *t, const char *what,
                        union cfg_value *v, char *err, size_t errlen)
{
    long lo, hi;
    const char *colon = strchr(t, ':');
    (void)s;
    if (colon) {
        char a[24];
        size_t al = (size_t)(colon - t);
        if (al >= sizeof a)
            return fail(err, errlen, "%s: expected N or MIN:MAX, e.g. 2:4", what);
        memcpy(a, t, al);
        a[al] = 0;
        if (podrun_parse_int(a, 1, 65536, &lo) || podrun_parse_int(colon + 1, 1, 65536, &hi))
            return fail(err, errlen, "%s: expected N or MIN:MAX with numbers from 1 to 65536, "
                        "e.g. 2:4", what);
        if (lo > hi)
            return fail(err, errlen, "%s: MIN is larger than MAX; write MIN:MAX, e.g. %ld:%ld",
                        what, hi, lo);
    } else {
        if (podrun_parse_int(t, 1, 65536, &lo))
            return fail(err, errlen, "%s: expected N or MIN:MAX with numbers from 1 to 65536, "
                        "e.g. 2:4", what);
        hi = lo;
    }
    v->nnodes.min = (int)lo;
    v->nnodes.max = (int)hi;
    return 0;
}

static void store_nnodes(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    (void)s;
    c->nnodes_min = v->nnodes.min;
    c->nnodes_max = v->nnodes.max;
}

static void format_nnodes(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    (void)s;
    if (c->nnodes_min == c->nnodes_max)
        snprintf(buf, len, "%d", c->nnodes_min);
    else
        snprintf(buf, len, "%d:%d", c->nnodes_min, c->nnodes_max);
}

static int parse_int(const struct cfg_setting *s, const char *t, const char *what,
                     union cfg_value *v, char *err, size_t errlen)
{
    if (podrun_parse_int(t, s->min, s->max, &v->i))
        return fail(err, errlen, "%s: expected a whole number from %ld to %ld", what, s->min,
                    s->max);
    return 0;
}

static int parse_choice(const struct cfg_setting *s, const char *t, const char *what,
                        union cfg_value *v, char *err, size_t errlen)
{
    for (long i = 0; s->choices[i]; i++)
        if (!strcmp(t, s->choices[i])) {
            v->i = i;
            return 0;
        }
    return fail(err, errlen, "%s: %s", what, s->expect);
}

static void format_choice(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->choices[*CFIELD(c, s, int)]);
}

/* HOST[:PORT], or etcd's members: a list of [http://|https://]HOST[:PORT] items. A list or a
 * URL is kept as given (the backend reads it); host and port are its first item's. */
static int parse_endpoint(const struct cfg_setting *s, const char *t, const char *what,
                          union cfg_value *v, char *err, size_t errlen)
{
    char host[256];
    (void)s;
    v->endpoint.list = NULL;
    if (strchr(t, ',') || strstr(t, "://")) {
        etcd_endpoint_t *ep = malloc(ETCD_MAX_ENDPOINTS * sizeof *ep);
        char why[256];
        if (!ep)
            return -ENOMEM;
        int n = etcd_endpoints_parse(t, 0, ep, ETCD_MAX_ENDPOINTS, why, sizeof why);
        if (n < 0) {
            free(ep);
            return fail(err, errlen, "%s: %s", what, why);
        }
        v->endpoint.port = ep[0].port;
        v->endpoint.port_given = true;
        int r = dup_text(ep[0].host, &v->endpoint.host);
        free(ep);
        if (!r && (r = dup_text(t, &v->endpoint.list)) != 0) {
            free(v->endpoint.host);
            v->endpoint.host = NULL;
        }
        return r;
    }
    if (podrun_hostport_parse(t, host, sizeof host, &v->endpoint.port, &v->endpoint.port_given))
        return fail(err, errlen, "%s: expected HOST or HOST:PORT (port 0-65535), e.g. "
                    "node0:29400; etcd also takes a list, HOST:2379,HOST:2379 or URLs", what);
    return dup_text(host, &v->endpoint.host);
}

static void store_endpoint(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    (void)s;
    free(c->rdzv_host);
    free(c->rdzv_endpoints);
    c->rdzv_host = v->endpoint.host;
    c->rdzv_port = v->endpoint.port;
    c->rdzv_port_given = v->endpoint.port_given;
    c->rdzv_endpoints = v->endpoint.list;
    v->endpoint.host = NULL;
    v->endpoint.list = NULL;
}

static void drop_endpoint(union cfg_value *v)
{
    free(v->endpoint.host);
    free(v->endpoint.list);
    v->endpoint.host = NULL;
    v->endpoint.list = NULL;
}

static void clear_endpoint(struct cfg *c, const struct cfg_setting *s)
{
    (void)s;
    free(c->rdzv_host);
    free(c->rdzv_endpoints);
    c->rdzv_host = NULL;
    c->rdzv_endpoints = NULL;
    c->rdzv_port = 0;
    c->rdzv_port_given = false;
}

static void format_endpoint(const struct cfg *c, const struct cfg_setting *s, char *buf,
                            size_t len)
{
    (void)s;
    if (!c->rdzv_host)
        snprintf(buf, len, "(none)");
    else if (c->rdzv_endpoints)
        snprintf(buf, len, "%s", c->rdzv_endpoints);
    else
        podrun_hostport_format(c->rdzv_host, c->rdzv_port, buf, len);
}

static int parse_str(const struct cfg_setting *s, const char *t, const char *what,
                     union cfg_value *v, char *err, size_t errlen)
{
    (void)s;
    if (!*t)
        return fail(err, errlen, "%s: must not be empty", what);
    return dup_text(t, &v->s);
}

static int parse_optstr(const struct cfg_setting *s, const char *t, const char *what,
                        union cfg_value *v, char *err, size_t errlen)
{
    (void)s, (void)what, (void)err, (void)errlen;
    v->s = NULL;
    return *t ? dup_text(t, &v->s) : 0;
}

/* The composite's own value is its keys' (config.c sets them one by one). */
static void format_conf(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    (void)c, (void)s;
    snprintf(buf, len, "(see the keys below)");
}

static int parse_bool_value(const struct cfg_setting *s, const char *t, const char *what,
                            union cfg_value *v, char *err, size_t errlen)
{
    bool b;
    (void)s;
    if (parse_bool(t, &b))
        return fail(err, errlen, "%s: expected 1/0, true/false or yes/no", what);
    v->i = b;
    return 0;
}

static void store_bool(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    *FIELD(c, s, bool) = v->i != 0;
}

static void format_bool(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", *CFIELD(c, s, bool) ? "true" : "false");
}

static void clear_tristate(struct cfg *c, const struct cfg_setting *s)
{
    *FIELD(c, s, int) = -1;
}

static void format_tristate(const struct cfg *c, const struct cfg_setting *s, char *buf,
                            size_t len)
{
    int v = *CFIELD(c, s, int);
    snprintf(buf, len, "%s", v < 0 ? "(from the endpoint)" : v ? "true" : "false");
}

static int parse_dur(const struct cfg_setting *s, const char *t, const char *what,
                     union cfg_value *v, char *err, size_t errlen)
{
    (void)s;
    if (cfg_parse_duration(t, &v->ms))
        return fail(err, errlen, "%s: expected a duration such as 30, 2.5, 500ms, 10m or 1h "
                    "(bare numbers are seconds, at most 30 days)", what);
    return 0;
}

static void store_u64(struct cfg *c, const struct cfg_setting *s, union cfg_value *v)
{
    *FIELD(c, s, uint64_t) = v->ms;
}

static void format_dur(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    uint64_t ms = *CFIELD(c, s, uint64_t);
    if (ms % 1000 == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(buf, len, "%llums", (unsigned long long)ms);
}

static int parse_stdspec(const struct cfg_setting *s, const char *t, const char *what,
                         union cfg_value *v, char *err, size_t errlen)
{
    (void)s;
    if (stdspec_walk(t, 0, NULL, NULL))
        return fail(err, errlen, "%s: expected N or LOCAL_RANK:N,... with N 0-3 (1 stdout, "
                    "2 stderr, 3 both), e.g. 3 or 0:3,1:2", what);
    return dup_text(t, &v->s);
}

static int parse_ranks(const struct cfg_setting *s, const char *t, const char *what,
                       union cfg_value *v, char *err, size_t errlen)
{
    long bad;
    (void)s;
    if (cfg_ranks_parse(t, CFG_MAX_NPROC, NULL, &bad))
        return fail(err, errlen, "%s: expected local ranks separated by commas, e.g. 0,2", what);
    return dup_text(t, &v->s);
}

/* "4096", "64K", "16M", "1G" (powers of 1024; k/m/g too), within the setting's [min, max]. */
static int parse_size(const struct cfg_setting *s, const char *t, const char *what,
                      union cfg_value *v, char *err, size_t errlen)
{
    static const char units[] = "KMGT";
    char *end;
    if (!isdigit((unsigned char)t[0]))
        goto bad;
    errno = 0;
    unsigned long long n = strtoull(t, &end, 10);
    if (errno)
        goto bad;
    if (*end) {
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u || !*u || end[1])
            goto bad;
        for (int shift = 10 * (int)(u - units + 1); shift > 0; shift -= 10) {
            if (n > (~0ULL >> 10))
                goto bad;
            n <<= 10;
        }
    }
    if (n < (unsigned long long)s->min || n > (unsigned long long)s->max)
        goto bad;
    v->ms = n;
    return 0;
bad:
    return fail(err, errlen, "%s: expected a size from %ld to %ld bytes, such as 4096, 64K, 16M "
                "or 1G (powers of 1024)", what, s->min, s->max);
}

/* The largest unit that divides the value exactly, so the text sets the same value again. */
static void format_size(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    uint64_t n = *CFIELD(c, s, uint64_t);
    int u = -1;
    while (n && u < 3 && n % 1024 == 0) {
        n /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%llu", (unsigned long long)n);
    else
        snprintf(buf, len, "%llu%c", (unsigned long long)n, units[u]);
}

static int parse_optport(const struct cfg_setting *s, const char *t, const char *what,
                         union cfg_value *v, char *err, size_t errlen)
{
    (void)s;
    if (!*t || !strcmp(t, "off")) {
        v->i = -1;
        return 0;
    }
    if (podrun_parse_int(t, 0, 65535, &v->i))
        return fail(err, errlen, "%s: expected a port from 0 to 65535 (0: a free one) or 'off'",
                    what);
    return 0;
}

static void clear_optport(struct cfg *c, const struct cfg_setting *s)
{
    *FIELD(c, s, int) = -1;
}

static void format_optport(const struct cfg *c, const struct cfg_setting *s, char *buf,
                           size_t len)
{
    int v = *CFIELD(c, s, int);
    if (v < 0)
        snprintf(buf, len, "off");
    else
        snprintf(buf, len, "%d", v);
}

/* ---- signal lists (--signals-to-handle) ------------------------------------------------------ */

/* The signals a list may name: those podrun watches as PID 1 (init.h), which are the ones a
 * launcher is sent to stop or to pass on. */
static const struct {
    const char *name;
    int signo;
} signames[] = {
    {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT}, {"SIGHUP", SIGHUP}, {"SIGQUIT", SIGQUIT},
    {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
};

int cfg_signals_parse(const char *s, uint64_t *mask, char *bad, size_t badlen)
{
    const char *p = s;
    uint64_t m = 0;
    if (bad && badlen)
        bad[0] = '\0';
    while (*p) {
        size_t n = strcspn(p, ",");
        while (n && isspace((unsigned char)*p)) /* torch strips each name */
            p++, n--;
        size_t e = n;
        while (e && isspace((unsigned char)p[e - 1]))
            e--;
        size_t i = 0, off = e >= 3 && !strncmp(p, "SIG", 3) ? 3 : 0;
        for (; i < sizeof signames / sizeof *signames; i++)
            if (strlen(signames[i].name + 3) == e - off && !memcmp(signames[i].name + 3, p + off,
                                                                   e - off))
                break;
        if (e == 0 || i == sizeof signames / sizeof *signames) {
            if (bad && badlen)
                snprintf(bad, badlen, "%.*s", (int)(e < 64 ? e : 64), p);
            return -EINVAL;
        }
        m |= 1ull << signames[i].signo;
        p += n;
        if (*p == ',')
            p++;
    }
    if (!m)
        return -EINVAL;
    if (mask)
        *mask = m;
    return 0;
}

static int parse_signals(const struct cfg_setting *s, const char *t, const char *what,
                         union cfg_value *v, char *err, size_t errlen)
{
    char bad[80];
    (void)s;
    if (cfg_signals_parse(t, NULL, bad, sizeof bad))
        return fail(err, errlen, "%s: %s%s%sexpected signal names separated by commas from "
                    "SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2", what,
                    bad[0] ? "'" : "", bad,
                    bad[0] ? "' is not one; " : "");
    return dup_text(t, &v->s);
}

/* One item of a code list: N or N-M, 1 <= N <= M <= 255. */
static int code_item(const char *p, size_t n, int *lo, int *hi)
{
    char buf[16];
    while (n && isspace((unsigned char)*p))
        p++, n--;
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    if (n == 0 || n >= sizeof buf)
        return -EINVAL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    long a = strtol(buf, &end, 10), b = a;
    if (end == buf || (*end && *end != '-'))
        return -EINVAL;
    if (*end == '-') {
        char *e2, *q = end + 1;
        b = strtol(q, &e2, 10);
        if (e2 == q || *e2)
            return -EINVAL;
    }
    if (a < 1 || b > 255 || a > b || !isdigit((unsigned char)buf[0]))
        return -EINVAL;
    *lo = (int)a, *hi = (int)b;
    return 0;
}

int cfg_codes_parse(const char *s, uint64_t mask[4], char *bad, size_t badlen)
{
    uint64_t m[4] = {0};
    if (bad && badlen)
        bad[0] = '\0';
    for (const char *p = s ? s : ""; *p;) {
        size_t n = strcspn(p, ",");
        int lo, hi;
        if (code_item(p, n, &lo, &hi)) {
            if (bad && badlen)
                snprintf(bad, badlen, "%.*s", (int)(n < 64 ? n : 64), p);
            return -EINVAL;
        }
        for (int c = lo; c <= hi; c++)
            m[c / 64] |= 1ull << (c % 64);
        p += n;
        if (*p == ',')
            p++;
    }
    if (mask)
        memcpy(mask, m, sizeof m);
    return 0;
}

bool cfg_codes_has(const uint64_t mask[4], int code)
{
    return code > 0 && code < 256 && (mask[code / 64] >> (code % 64)) & 1;
}

static int parse_codes(const struct cfg_setting *s, const char *t, const char *what,
                       union cfg_value *v, char *err, size_t errlen)
{
    char bad[80];
    (void)s;
    v->s = NULL;
    if (cfg_codes_parse(t, NULL, bad, sizeof bad))
        return fail(err, errlen, "%s: '%s' is not an exit code; expected codes 1-255 or ranges "
                    "N-M separated by commas, e.g. 3,42,64-78", what, bad);
    return *t ? dup_text(t, &v->s) : 0;
}

size_t cfg_filters_split(const char *s, char *buf, size_t cap, const char **items, size_t max)
{
    size_t n = 0, o = 0;
    if (!s || !*s || !cap)
        return 0;
    items[n++] = buf;
    for (const char *p = s; *p && o + 1 < cap; p++) {
        if (p[0] == ',' && p[1] == ',') {   /* ",," is a comma inside a filter */
            buf[o++] = ',';
            p++;
        } else if (*p == ',') {
            buf[o++] = '\0';
            if (n == max)
                return n;
            items[n++] = buf + o;
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = '\0';
    /* an empty filter would match every line: torch's list has none after a trailing comma */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i][0])
            items[k++] = items[i];
    return k;
}

static int parse_pybool(const struct cfg_setting *s, const char *t, const char *what,
                        union cfg_value *v, char *err, size_t errlen)
{
    bool b;
    (void)s;
    if (parse_bool(t, &b))
        return fail(err, errlen, "%s: expected 1/0, true/false or yes/no", what);
    return dup_text(b ? "True" : "False", &v->s);
}

#define TEXT(parse) {parse, store_text, drop_text, clear_text, format_text, false}

const struct cfg_type cfg_types[CFG_T__COUNT] = {
    [CFG_T_NPROC] = {parse_nproc, store_nproc, NULL, NULL, format_nproc, false},
    [CFG_T_NNODES] = {parse_nnodes, store_nnodes, NULL, NULL, format_nnodes, false},
    [CFG_T_INT] = {parse_int, store_int, NULL, NULL, format_int, false},
    [CFG_T_CHOICE] = {parse_choice, store_int, NULL, NULL, format_choice, false},
    [CFG_T_ENDPOINT] = {parse_endpoint, store_endpoint, drop_endpoint, clear_endpoint,
                        format_endpoint, false},
    [CFG_T_STR] = TEXT(parse_str),
    [CFG_T_OPTSTR] = TEXT(parse_optstr),
    [CFG_T_CONF] = {NULL, NULL, NULL, NULL, format_conf, false},
    [CFG_T_BOOL] = {parse_bool_value, store_bool, NULL, NULL, format_bool, true},
    [CFG_T_TRISTATE] = {parse_bool_value, store_int, NULL, clear_tristate, format_tristate,
                        false},
    [CFG_T_DUR] = {parse_dur, store_u64, NULL, NULL, format_dur, false},
    [CFG_T_STDSPEC] = TEXT(parse_stdspec),
    [CFG_T_RANKS] = TEXT(parse_ranks),
    [CFG_T_SIZE] = {parse_size, store_u64, NULL, NULL, format_size, false},
    [CFG_T_OPTPORT] = {parse_optport, store_int, NULL, clear_optport, format_optport, false},
    [CFG_T_SIGNALS] = TEXT(parse_signals),
    [CFG_T_CODES] = TEXT(parse_codes),
    [CFG_T_PYBOOL] = {parse_pybool, store_text, drop_text, clear_text, format_text, true},
};
