/* rdzv/status.c — the job's state record for `podrun status` (status.h). Pure: no I/O. */
#include "rdzv/status.h"

#include <errno.h>
#include <math.h> /* isfinite only: no libm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/records.h"
#include "rdzv/badnodes.h"

const char *const rdzv_node_phase_names[RDZV_NODE__COUNT] = {
    [RDZV_NODE_JOINED] = "joined", [RDZV_NODE_WAITING] = "waiting",
    [RDZV_NODE_MEMBER] = "running", [RDZV_NODE_DONE] = "done",
    [RDZV_NODE_STOPPED] = "stopped",
};

/* a node line is at most its escaped strings plus a few numbers, and its health line the
 * escaped finding plus three */
#define NODE_LINE_MAX (4 * RDZV_NAME_MAX + 2 * RDZV_REASON_MAX + 256)
#define HEADER_MAX (RDZV_LINE_MAX * 2 + 4096) /* every header line, escaped, with room */

/* The header: everything but the nodes, as key=value lines. */
static int header_encode(const rdzv_status_t *s, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add(&b, "run_id", s->run_id, RDZV_NAME_MAX - 1);
    kv_add_double(&b, "time", s->time);
    kv_add_double(&b, "started", s->started);
    kv_add_int(&b, "round", s->round);
    kv_add_int(&b, "phase", s->phase);
    kv_add_double(&b, "round_since", s->round_since);
    kv_add(&b, "over", s->over, sizeof s->over - 1);
    kv_add(&b, "line", s->line, RDZV_LINE_MAX - 1);
    kv_add_int(&b, "min_nodes", s->min_nodes);
    kv_add_int(&b, "max_nodes", s->max_nodes);
    kv_add_int(&b, "world_size", s->world_size);
    kv_add_int(&b, "restarts_used", s->restarts_used);
    kv_add_int(&b, "max_restarts", s->max_restarts);
    kv_add_int(&b, "failure_round", s->failure_round);
    if (s->failure_round >= 0) {
        kv_add_int(&b, "failure_action", s->failure_action);
        rdzv_failure_put(&b, "f.", &s->failure);
    }
    kv_add_int(&b, "max_node_failures", s->max_node_failures);
    if (s->n_bad > 0)
        badnodes_put(&b, "bad", s->bad, s->n_bad);
    kv_add_int(&b, "n_total", s->n_total);
    return b.overflow ? -ENOSPC : (int)b.len;
}

/* A node field: '\\', newline and tab escaped, so fields split on tabs and lines on newlines. */
static size_t field_put(char *p, const char *v)
{
    size_t n = 0;
    for (; *v; v++) {
        char e = *v == '\\' ? '\\' : *v == '\n' ? 'n' : *v == '\t' ? 't' : 0;
        if (e) {
            p[n++] = '\\';
            p[n++] = e;
        } else {
            p[n++] = *v;
        }
    }
    return n;
}

/* A node's "health=" line (none while it reported nothing): the bytes written. */
static size_t health_put(char *p, const rdzv_health_t *h)
{
    if (h->state <= RDZV_HEALTH_NONE || h->state >= RDZV_HEALTH__COUNT)
        return 0;
    /* both numbers bounded, so the head fits its 128 bytes */
    double iv = isfinite(h->interval) && h->interval >= 0 && h->interval < 1e9 ? h->interval : 0;
    double t = isfinite(h->checked) && h->checked > 0 && h->checked < 1e12 ? h->checked : 0;
    int k = snprintf(p, 128, "health=%d\t%.3f\t%.3f\t", h->state, iv, t);
    size_t n = k > 0 && k < 128 ? (size_t)k : 0;
    if (!n)
        return 0;
    n += field_put(p + n, h->state == RDZV_HEALTH_FAILED ? h->why : "");
    p[n++] = '\n';
    return n;
}

long rdzv_status_encode(const rdzv_status_t *s, size_t max_len, char **out)
{
    size_t per_node = NODE_LINE_MAX;
    size_t cap = HEADER_MAX + (size_t)(s->n_nodes > 0 ? s->n_nodes : 0) * per_node;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    int hl = header_encode(s, buf, HEADER_MAX);
    if (hl < 0) {
        free(buf);
        return -ENOMEM;
    }
    size_t len = (size_t)hl;
    for (int i = 0; i < s->n_nodes; i++) {
        const rdzv_status_node_t *n = &s->nodes[i];
        char line[NODE_LINE_MAX];
        int k = snprintf(line, sizeof line, "node=%d\t%d\t%d\t%d\t%.3f\t",
                         n->phase, n->node_rank, n->rank_base, n->nproc,
                         isfinite(n->last_seen) ? n->last_seen : 0.0);
        size_t ll = (size_t)k;
        ll += field_put(line + ll, n->name);
        line[ll++] = '\t';
        ll += field_put(line + ll, n->addr);
        line[ll++] = '\n';
        ll += health_put(line + ll, &n->health);
        if (max_len && len + ll + 1 > max_len)
            break; /* the rest are counted in n_total only */
        memcpy(buf + len, line, ll);
        len += ll;
    }
    buf[len] = '\0';
    *out = buf;
    return (long)len;
}

/* Copies the escaped field [p, q) into out (cap with the NUL), unescaping. */
static void field_take(const char *p, const char *q, char *out, size_t cap)
{
    size_t o = 0;
    for (; p < q; p++) {
        char c = *p;
        if (c == '\\' && p + 1 < q) {
            p++;
            c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        }
        if (o + 1 < cap)
            out[o++] = c;
    }
    out[o] = '\0';
}

/* One "node=" line's fields [p, q) into n: 0, or -1 when it is not one (it is skipped). */
static int node_decode(const char *p, const char *q, rdzv_status_node_t *n)
{
    const char *f[7];
    int nf = 0;
    f[nf++] = p;
    for (const char *c = p; c < q && nf < 7; c++) {
        if (*c == '\\' && c + 1 < q)
            c++;
        else if (*c == '\t')
            f[nf++] = c + 1;
    }
    if (nf != 7)
        return -1;
    long v[4];
    for (int i = 0; i < 4; i++) {
        char num[24], *end;
        size_t l = (size_t)(f[i + 1] - 1 - f[i]);
        if (l == 0 || l >= sizeof num)
            return -1;
        memcpy(num, f[i], l);
        num[l] = '\0';
        v[i] = strtol(num, &end, 10);
        if (*end || v[i] < -1 || v[i] > 1 << 24)
            return -1;
    }
    if (v[0] < 0 || v[0] >= RDZV_NODE__COUNT)
        return -1;
    char num[40];
    double seen;
    size_t l = (size_t)(f[5] - 1 - f[4]);
    if (l >= sizeof num)
        return -1;
    memcpy(num, f[4], l);
    num[l] = '\0';
    if (rdzv_seconds_parse(num, &seen))
        return -1;
    memset(&n->health, 0, sizeof n->health);   /* a "health=" line may follow */
    n->phase = (int)v[0];
    n->node_rank = (int)v[1];
    n->rank_base = (int)v[2];
    n->nproc = (int)v[3];
    n->last_seen = seen;
    field_take(f[5], f[6] - 1, n->name, sizeof n->name);
    field_take(f[6], q, n->addr, sizeof n->addr);
    return 0;
}

/* A "health=" line's fields [p, q) into h: 0, or -1 when it is not one (it is skipped). */
static int health_decode(const char *p, const char *q, rdzv_health_t *h)
{
    char num[3][40], *end;
    const char *f = p;
    for (int i = 0; i < 3; i++) {
        const char *t = memchr(f, '\t', (size_t)(q - f));
        if (!t || (size_t)(t - f) >= sizeof num[i] || t == f)
            return -1;
        memcpy(num[i], f, (size_t)(t - f));
        num[i][t - f] = '\0';
        f = t + 1;
    }
    long st = strtol(num[0], &end, 10);
    if (*end || st <= RDZV_HEALTH_NONE || st >= RDZV_HEALTH__COUNT)
        return -1;
    double iv, t;
    if (rdzv_seconds_parse(num[1], &iv) || iv < 0 || rdzv_seconds_parse(num[2], &t) || t < 0)
        return -1;
    memset(h, 0, sizeof *h);
    h->state = (int)st;
    h->interval = iv;
    h->checked = t;
    field_take(f, q, h->why, sizeof h->why);
    for (char *c = h->why; *c; c++)   /* one line in a table: no control bytes */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return 0;
}

static int clamp(long long v, long long lo, long long hi, int def)
{
    return v < lo || v > hi ? def : (int)v;
}

int rdzv_status_decode(const char *text, size_t len, rdzv_status_t *s, rdzv_status_node_t *nodes,
                       size_t cap)
{
    memset(s, 0, sizeof *s);
    s->nodes = nodes;
    s->failure_round = -1;
    rdzv_failure_init(&s->failure);
    if (kv_get(text, len, "run_id", s->run_id, sizeof s->run_id) <= 0 || !s->run_id[0])
        return -EINVAL;   /* a value of NUL bytes is no name either */
    s->time = kv_get_double(text, len, "time", 0);
    s->started = kv_get_double(text, len, "started", 0);
    s->round = clamp(kv_get_int(text, len, "round", 0), 0, 1 << 30, 0);
    s->phase = clamp(kv_get_int(text, len, "phase", 0), 0, RDZV_JOB_OVER, 0);
    s->round_since = kv_get_double(text, len, "round_since", 0);
    kv_get(text, len, "over", s->over, sizeof s->over);
    kv_get(text, len, "line", s->line, sizeof s->line);
    s->min_nodes = clamp(kv_get_int(text, len, "min_nodes", 0), 0, 1 << 24, 0);
    s->max_nodes = clamp(kv_get_int(text, len, "max_nodes", 0), 0, 1 << 24, 0);
    s->world_size = clamp(kv_get_int(text, len, "world_size", 0), 0, 1 << 30, 0);
    s->restarts_used = clamp(kv_get_int(text, len, "restarts_used", 0), 0, 1 << 30, 0);
    s->max_restarts = clamp(kv_get_int(text, len, "max_restarts", 0), 0, 1 << 30, 0);
    s->failure_round = clamp(kv_get_int(text, len, "failure_round", -1), -1, 1 << 30, -1);
    if (s->failure_round >= 0) {
        s->failure_action = clamp(kv_get_int(text, len, "failure_action", 0), 0, 2, 0);
        rdzv_failure_take(text, len, "f.", &s->failure);
    }
    s->max_node_failures = clamp(kv_get_int(text, len, "max_node_failures", 0), 0, 1 << 30, 0);
    s->n_bad = badnodes_take(text, len, "bad", s->bad, RDZV_MAX_BAD_NODES);
    s->n_total = clamp(kv_get_int(text, len, "n_total", 0), 0, 1 << 24, 0);
    /* the nodes, in one pass over the lines */
    size_t pos = 0;
    int seen = 0;
    rdzv_status_node_t *last = NULL;   /* the node a "health=" line belongs to */
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + 1;
        if (ll >= 7 && memcmp(line, "health=", 7) == 0) {
            /* belongs to the node line just before it */
            if (last && health_decode(line + 7, line + ll, &last->health) < 0)
                last->health.state = RDZV_HEALTH_NONE;
            continue;
        }
        last = NULL;
        if (ll < 5 || memcmp(line, "node=", 5) != 0)
            continue;
        rdzv_status_node_t n;
        if (node_decode(line + 5, line + ll, &n) < 0)
            continue;
        if ((size_t)s->n_nodes < cap) {
            nodes[s->n_nodes] = n;
            last = &nodes[s->n_nodes++];
        }
        seen++;
    }
    if (s->n_total < seen)
        s->n_total = seen;
    return 0;
}
