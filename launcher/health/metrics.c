/* launcher/health/metrics.c — Prometheus text exposition (metrics.h). */
#include "launcher/health/metrics.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void metrics_init(struct prom *p)
{
    memset(p, 0, sizeof *p);
}

void metrics_free(struct prom *p)
{
    free(p->buf);
    metrics_init(p);
}

/* Makes room for n more bytes and the NUL; 0, or -1 (and oom) without memory. */
static int room(struct prom *p, size_t n)
{
    if (p->oom)
        return -1;
    if (p->len + n + 1 <= p->cap)
        return 0;
    size_t cap = p->cap ? p->cap : 4096;
    while (cap < p->len + n + 1)
        cap *= 2;
    char *b = realloc(p->buf, cap);
    if (!b) {
        p->oom = 1;
        return -1;
    }
    p->buf = b;
    p->cap = cap;
    return 0;
}

static void put(struct prom *p, const char *s, size_t n)
{
    if (room(p, n))
        return;
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = '\0';
}

static void putf(struct prom *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct prom *p, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(p, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* HELP text escapes backslash and newline; a label value also the double quote. */
static void put_escaped(struct prom *p, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            put(p, "\\\\", 2);
        else if (*s == '\n')
            put(p, "\\n", 2);
        else if (quote && *s == '"')
            put(p, "\\\"", 2);
        else
            put(p, s, 1);
    }
}

/* A sample value: integers as integers, others with enough digits, and the special values
 * spelled as the format has them. */
static void put_value(struct prom *p, double v)
{
    if (v != v)
        put(p, "NaN", 3);
    else if (v > DBL_MAX || v < -DBL_MAX)
        put(p, v > 0 ? "+Inf" : "-Inf", 4);
    else if (v > -1e15 && v < 1e15 && v == (double)(long long)v)
        putf(p, "%.0f", v);
    else if (v >= 1e6 || v <= -1e6)
        putf(p, "%.15g", v);   /* an epoch time keeps its milliseconds */
    else
        putf(p, "%.9g", v);
}

void metrics_family(struct prom *p, const char *name, const char *type, const char *help)
{
    putf(p, "# HELP %s ", name);
    put_escaped(p, help, 0);
    putf(p, "\n# TYPE %s %s\n", name, type);
}

void metrics_sample(struct prom *p, const char *name, const char *const *labels, double value)
{
    put(p, name, strlen(name));
    if (labels && labels[0]) {
        put(p, "{", 1);
        for (int i = 0; labels[i] && labels[i + 1]; i += 2) {
            if (i)
                put(p, ",", 1);
            putf(p, "%s=\"", labels[i]);
            put_escaped(p, labels[i + 1], 1);
            put(p, "\"", 1);
        }
        put(p, "}", 1);
    }
    put(p, " ", 1);
    put_value(p, value);
    put(p, "\n", 1);
}

void metrics_histogram_init(struct prom_histogram *h, const double *bounds, int n)
{
    memset(h, 0, sizeof *h);
    h->bounds = bounds;
    h->n = n < PROM_MAX_BUCKETS ? n : PROM_MAX_BUCKETS;
}

void metrics_histogram_observe(struct prom_histogram *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void metrics_histogram_write(struct prom *p, const char *name, const char *help,
                             const struct prom_histogram *h)
{
    char sample[160], le[32];
    metrics_family(p, name, "histogram", help);
    snprintf(sample, sizeof sample, "%s_bucket", name);
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->counts[i];
        if (i < h->n)
            snprintf(le, sizeof le, "%g", h->bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        const char *labels[] = {"le", le, NULL};
        metrics_sample(p, sample, labels, (double)cum);
    }
    snprintf(sample, sizeof sample, "%s_sum", name);
    metrics_sample(p, sample, NULL, h->sum);
    snprintf(sample, sizeof sample, "%s_count", name);
    metrics_sample(p, sample, NULL, (double)h->count);
}
