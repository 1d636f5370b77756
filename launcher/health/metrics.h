/* launcher/health/metrics.h — Prometheus' text exposition format (version 0.0.4), written into a
 * growing buffer, and the histograms podrun keeps. Pure code: no I/O.
 *
 * A family is announced once (# HELP, # TYPE) and followed by its samples; label values are
 * escaped here (backslash, double quote, newline), so any node name or reason can be a label. A
 * buffer that ran out of memory says so (oom) and is not served. */
#ifndef PODRUN_LAUNCHER_HEALTH_METRICS_H
#define PODRUN_LAUNCHER_HEALTH_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct prom {
    char *buf;
    size_t len, cap;
    int oom;
};

void metrics_init(struct prom *p);
void metrics_free(struct prom *p);

/* "# HELP name help\n# TYPE name type\n"; type is counter, gauge or histogram. */
void metrics_family(struct prom *p, const char *name, const char *type, const char *help);
/* "name{k1="v1",k2="v2"} value\n": labels are NULL-terminated name/value pairs (NULL: none). */
void metrics_sample(struct prom *p, const char *name, const char *const *labels, double value);

#define PROM_MAX_BUCKETS 16

/* Observations against fixed upper bounds (seconds); counts[i] are per bucket, not cumulative:
 * the text is. The last bucket is +Inf. */
struct prom_histogram {
    const double *bounds;   /* ascending, n of them */
    int n;
    uint64_t counts[PROM_MAX_BUCKETS + 1];
    double sum;
    uint64_t count;
};

void metrics_histogram_init(struct prom_histogram *h, const double *bounds, int n);
void metrics_histogram_observe(struct prom_histogram *h, double v);
/* The family with its _bucket{le=...} (cumulative, +Inf last), _sum and _count samples. */
void metrics_histogram_write(struct prom *p, const char *name, const char *help,
                             const struct prom_histogram *h);

#endif
