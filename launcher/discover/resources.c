/* launcher/discover/resources.c — which slots of which hosts a job uses: the pool from a
 * hostfile, and DeepSpeed's --include/--exclude/--num_nodes/--num_gpus (semantics and error
 * texts: resources.h). */
#include "launcher/discover/resources.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostlist.h"
#include "rdzv/base/common.h"

#define QUOTE 80    /* a quoted piece of a line in a message */
#define QNAME 256   /* a quoted file name in a message */

static void quote_str(char *out, size_t cap, const char *s)
{
    hostlist_quote(out, cap, s ? s : "", s ? strlen(s) : 0);
}

/* ---- the pool ---- */

static void pool_text(char *out, size_t cap, const struct resources *r)
{
    hostfile_hosts_text(out, cap, r->count ? &r->nodes[0].host : NULL, sizeof r->nodes[0],
                        r->count);
}

/* Writes an ascending slot list as ranges, "0-3,6", cut with "..." to fit cap. */
static void slots_text(char *out, size_t cap, const int *s, size_t n)
{
    size_t o = 0;
    snprintf(out, cap, "%s", n ? "" : "none");
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && s[j] == s[j - 1] + 1)
            j++;
        char t[32];
        int len = j - i > 1 ? snprintf(t, sizeof t, "%s%d-%d", i ? "," : "", s[i], s[j - 1])
                            : snprintf(t, sizeof t, "%s%d", i ? "," : "", s[i]);
        if (o + (size_t)len + 4 > cap) {
            snprintf(out + o, cap - o, "...");
            return;
        }
        memcpy(out + o, t, (size_t)len + 1);
        o += (size_t)len;
        i = j;
    }
}

/* Appends a node (host and slots copied; slots already ascending and unique). */
static int node_push(struct resources *r, const char *host, unsigned line,
                     const int *slots, size_t n)
{
    if (r->count >= HOSTFILE_HOSTS_MAX)
        return -E2BIG;
    if (r->count == 0 || (r->count & (r->count - 1)) == 0) {
        size_t cap = r->count < 16 ? 16 : r->count * 2;
        struct resources_node *nn = realloc(r->nodes, cap * sizeof *nn);
        if (!nn)
            return -ENOMEM;
        r->nodes = nn;
    }
    struct resources_node *d = &r->nodes[r->count];
    d->host = strdup(host);
    d->slots = malloc(n * sizeof(int) + 1);
    if (!d->host || !d->slots) {
        free(d->host);
        free(d->slots);
        return -ENOMEM;
    }
    memcpy(d->slots, slots, n * sizeof(int));
    d->nslots = n;
    d->line = line;
    r->count++;
    return 0;
}

static int set_source(struct resources *r, const char *source)
{
    if (r->source)
        return 0;
    r->source = strdup(source ? source : "hostfile");
    return r->source ? 0 : -ENOMEM;
}

int resources_from_hostfile(struct resources *r, const struct hostfile *hf, int default_slots,
                            char *err, size_t errlen)
{
    int ids[HOSTFILE_SLOTS_MAX];
    char qname[QNAME], qh[QUOTE];
    memset(r, 0, sizeof *r);
    quote_str(qname, sizeof qname, hf->name);
    for (int i = 0; i < HOSTFILE_SLOTS_MAX; i++)
        ids[i] = i;
    if (set_source(r, hf->name))
        return podrun_failf(-ENOMEM, err, errlen, "%s: out of memory", qname);
    for (size_t i = 0; i < hf->count; i++) {
        const struct hostfile_entry *e = &hf->entries[i];
        int n = e->slots != HOSTFILE_SLOTS_UNSET ? e->slots : default_slots;
        quote_str(qh, sizeof qh, e->host);
        if (n < 0)
            return podrun_failf(-EINVAL, err, errlen,
                        "%s:%u: host %s has no slot count; write it as \"%s slots=N\"", qname,
                        e->line, qh, qh);
        if (n > HOSTFILE_SLOTS_MAX)
            return podrun_failf(-EINVAL, err, errlen,
                        "%s:%u: host %s: %d slots is more than %d", qname,
                        e->line, qh, n, HOSTFILE_SLOTS_MAX);
        int rc = node_push(r, e->host, e->line, ids, (size_t)n);
        if (rc)
            return podrun_failf(rc, err, errlen, "%s: out of memory", qname);
    }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int resources_add(struct resources *r, const char *source, const char *host, unsigned line,
                  const int *slots, size_t nslots, char *err, size_t errlen)
{
    int ids[HOSTFILE_SLOTS_MAX];
    unsigned char seen[HOSTFILE_SLOTS_MAX] = {0};
    size_t n = 0;
    char qh[QUOTE];
    quote_str(qh, sizeof qh, host);
    if (set_source(r, source))
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    for (size_t i = 0; i < nslots; i++) {
        if (slots[i] < 0 || slots[i] >= HOSTFILE_SLOTS_MAX)
            return podrun_failf(-EINVAL, err, errlen,
                        "host %s: slot id %d is not in 0..%d", qh, slots[i],
                        HOSTFILE_SLOTS_MAX - 1);
        if (!seen[slots[i]]++)
            ids[n++] = slots[i];
    }
    qsort(ids, n, sizeof ids[0], cmp_int);
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->nodes[i].host, host) == 0)
            return podrun_failf(-EINVAL, err, errlen,
                    "host %s is listed twice; list each host once", qh);
    int rc = node_push(r, host, line, ids, n);
    if (rc == -E2BIG)
        return podrun_failf(rc, err, errlen,
                "more than %d hosts; split the job", HOSTFILE_HOSTS_MAX);
    return rc ? podrun_failf(rc, err, errlen, "out of memory") : 0;
}

void resources_free(struct resources *r)
{
    for (size_t i = 0; i < r->count; i++) {
        free(r->nodes[i].host);
        free(r->nodes[i].slots);
    }
    free(r->nodes);
    free(r->source);
    memset(r, 0, sizeof *r);
}

/* ---- selection: --include / --exclude / --num_nodes / --num_gpus ---- */

#define SPEC_GRAMMAR                                                                             \
    "NODE_SPEC is NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"

/* What one list said about one pool node. */
struct mention {
    size_t first;      /* index of the NODE_SPEC that first named it */
    int named, whole;  /* named at all; named without slots somewhere */
    int big;           /* smallest slot id >= HOSTFILE_SLOTS_MAX it named, or -1 */
    unsigned char bits[HOSTFILE_SLOTS_MAX / 8];
};

/* One --include or --exclude being read against a pool. */
struct spec {
    const char *flag;
    char q[QUOTE];            /* the quoted list, for messages */
    const struct resources *pool;
    size_t *order;            /* pool indices sorted by host, for lookups */
    struct mention *m;        /* per pool node */
    size_t *seq, nseq;        /* named pool nodes, in the order first named */
    const char *unknown;      /* the first name not in the pool, its length and NODE_SPEC index */
    size_t unknown_len, unknown_at;
    char *err;
    size_t errlen;
};

static int spec_fail(const struct spec *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int spec_fail(const struct spec *s, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return podrun_failf(code, s->err, s->errlen, "%s \"%s\": %s", s->flag, s->q, msg);
}

static int cmp_pool(const void *a, const void *b, void *pool)
{
    const struct resources_node *n = ((const struct resources *)pool)->nodes;
    return strcmp(n[*(const size_t *)a].host, n[*(const size_t *)b].host);
}

/* The pool index of host p[0..n), or -1. */
static long pool_find(const struct spec *s, const char *p, size_t n)
{
    size_t lo = 0, hi = s->pool->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *h = s->pool->nodes[s->order[mid]].host;
        int c = strncmp(h, p, n);
        if (c == 0)
            c = h[n] != '\0';
        if (c == 0)
            return (long)s->order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Reads one slot list "0,2,5" into m (syntax only; ids are checked against the pool later). */
static int spec_slots(struct spec *s, const char *node, size_t nn, const char *p, size_t n,
                      struct mention *m)
{
    char qn[QUOTE];
    hostlist_quote(qn, sizeof qn, node, nn);
    if (n == 0)
        return spec_fail(s, -EINVAL, "\"%s\" has no slot after ':'; " SPEC_GRAMMAR, qn);
    for (const char *e = p + n; p <= e;) {
        const char *c = memchr(p, ',', (size_t)(e - p));
        size_t len = c ? (size_t)(c - p) : (size_t)(e - p);
        int v = 0;
        size_t i = 0;
        while (i < len && (p[i] >= '0' && p[i] <= '9') && i < 9)
            v = v * 10 + (p[i++] - '0');
        if (len == 0 || i != len) {
            char qs[QUOTE];
            hostlist_quote(qs, sizeof qs, p, len);
            return spec_fail(s, -EINVAL,
                             "slot \"%s\" in \"%s\" is not a slot number; " SPEC_GRAMMAR, qs,
                             qn);
        }
        if (m && v < HOSTFILE_SLOTS_MAX)
            m->bits[v / 8] |= (unsigned char)(1u << (v % 8));
        else if (m && (m->big < 0 || v < m->big))
            m->big = v;
        p += len + 1;
    }
    return 0;
}

/* Reads a whole list: syntax first (DeepSpeed fails in int() before checking any host), then
 * each named pool node is recorded once, in the order first named. */
static int spec_read(struct spec *s, const char *text)
{
    size_t k = 0;
    for (const char *p = text, *end = text + strlen(text); p <= end; k++) {
        const char *at = memchr(p, '@', (size_t)(end - p));
        size_t len = at ? (size_t)(at - p) : (size_t)(end - p);
        const char *colon = memchr(p, ':', len);
        size_t nn = colon ? (size_t)(colon - p) : len;
        char qn[QUOTE];
        hostlist_quote(qn, sizeof qn, p, len);
        if (len == 0)
            return spec_fail(s, -EINVAL, "empty NODE_SPEC (an '@' too many); " SPEC_GRAMMAR);
        if (nn == 0)
            return spec_fail(s, -EINVAL, "\"%s\" has no host name; " SPEC_GRAMMAR, qn);
        if (colon && memchr(colon + 1, ':', len - nn - 1))
            return spec_fail(s, -EINVAL, "\"%s\" has more than one ':'; " SPEC_GRAMMAR, qn);
        long i = pool_find(s, p, nn);
        struct mention *m = i >= 0 ? &s->m[i] : NULL;
        if (m && !m->named) {
            m->named = 1;
            m->first = k;
            m->big = -1;
            s->seq[s->nseq++] = (size_t)i;
        }
        if (!m && !s->unknown) {
            s->unknown = p;
            s->unknown_len = nn;
            s->unknown_at = k;
        }
        int rc = colon ? spec_slots(s, p, len, colon + 1, len - nn - 1, m) : 0;
        if (rc)
            return rc;
        if (m && !colon)
            m->whole = 1;
        p += len + 1;
    }
    return 0;
}

static int not_found(const struct spec *s)
{
    char qh[QUOTE], hosts[512], qname[QNAME];
    hostlist_quote(qh, sizeof qh, s->unknown, s->unknown_len);
    pool_text(hosts, sizeof hosts, s->pool);
    quote_str(qname, sizeof qname, s->pool->source);
    return spec_fail(s, -EINVAL, "Hostname '%s' not found in hostfile (hosts in %s: %s)", qh,
                     qname, hosts);
}

/* DeepSpeed's checks, in its order: hosts in the order first named, each host's slots
 * ascending; a name missing from the pool fails when its turn comes. */
static int spec_check(const struct spec *s)
{
    for (size_t k = 0; k < s->nseq; k++) {
        const struct mention *m = &s->m[s->seq[k]];
        const struct resources_node *node = &s->pool->nodes[s->seq[k]];
        unsigned char has[HOSTFILE_SLOTS_MAX / 8] = {0};
        if (s->unknown && s->unknown_at < m->first)
            return not_found(s);
        for (size_t i = 0; i < node->nslots; i++)
            has[node->slots[i] / 8] |= (unsigned char)(1u << (node->slots[i] % 8));
        int bad = -1;
        for (int v = 0; v < HOSTFILE_SLOTS_MAX && bad < 0; v++)
            if ((m->bits[v / 8] >> (v % 8) & 1) && !(has[v / 8] >> (v % 8) & 1))
                bad = v;
        if (bad < 0)
            bad = m->big;
        if (bad >= 0) {
            char qh[QUOTE], have[128];
            quote_str(qh, sizeof qh, node->host);
            slots_text(have, sizeof have, node->slots, node->nslots);
            return spec_fail(s, -EINVAL, "No slot '%d' specified on host '%s' (it has slots %s)",
                             bad, qh, have);
        }
    }
    return s->unknown ? not_found(s) : 0;
}

/* The slots a node keeps: include keeps the named ones (all if named alone), exclude drops them
 * (the node if named alone). Returns how many went into out. */
static size_t spec_keep(const struct resources_node *node, const struct mention *m, int include,
                        int *out)
{
    size_t n = 0;
    if (include && !m->named)
        return 0;
    for (size_t i = 0; i < node->nslots; i++) {
        int v = node->slots[i];
        int named = m->whole || (m->bits[v / 8] >> (v % 8) & 1);
        if (include ? named : !named)
            out[n++] = v;
    }
    return n;
}

static int select_list(struct resources *out, const struct resources *pool,
                       const char *flag, const char *text, int include, char *err, size_t errlen)
{
    struct spec s = {.flag = flag, .pool = pool, .err = err, .errlen = errlen};
    int rc = 0, ids[HOSTFILE_SLOTS_MAX];
    quote_str(s.q, sizeof s.q, text);
    s.order = malloc(pool->count * sizeof *s.order + 1);
    s.seq = calloc(pool->count + 1, sizeof *s.seq);
    s.m = calloc(pool->count + 1, sizeof *s.m);
    if (!s.order || !s.seq || !s.m) {
        rc = podrun_failf(-ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < pool->count; i++)
        s.order[i] = i;
    qsort_r(s.order, pool->count, sizeof *s.order, cmp_pool, (void *)pool);
    if ((rc = spec_read(&s, text)) != 0 || (rc = spec_check(&s)) != 0)
        goto done;
    for (size_t i = 0; i < pool->count && !rc; i++) {
        size_t n = spec_keep(&pool->nodes[i], &s.m[i], include, ids);
        if (n && node_push(out, pool->nodes[i].host, pool->nodes[i].line, ids, n))
            rc = podrun_failf(-ENOMEM, err, errlen, "out of memory");
    }
done:
    free(s.order);
    free(s.seq);
    free(s.m);
    return rc;
}

int resources_select(struct resources *out, const struct resources *pool,
                    const struct resources_select *sel, char *err, size_t errlen)
{
    static const struct resources_select none = {NULL, NULL, -1, -1};
    const char *inc, *exc;
    char qi[QUOTE], qe[QUOTE], qname[QNAME];
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!sel)
        sel = &none;
    inc = sel->include && *sel->include ? sel->include : NULL;
    exc = sel->exclude && *sel->exclude ? sel->exclude : NULL;
    quote_str(qi, sizeof qi, inc);
    quote_str(qe, sizeof qe, exc);
    quote_str(qname, sizeof qname, pool->source);
    if (set_source(out, pool->source))
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    if ((sel->num_nodes >= 0 || sel->num_gpus >= 0) && (inc || exc))
        return podrun_failf(-EINVAL, err, errlen,
                    "%s with %s: Cannot specify num_nodes/gpus with include/exclude (choose "
                    "resources one way)",
                    sel->num_nodes >= 0 ? "--num_nodes" : "--num_gpus",
                    inc ? "--include" : "--exclude");
    if (inc && exc)
        return podrun_failf(-EINVAL, err, errlen,
                    "--include \"%s\" and --exclude \"%s\": include_str and exclude_str are "
                    "mutually exclusive. (give one of them)",
                    qi, qe);
    if (sel->num_nodes == 0 || sel->num_gpus == 0)
        return podrun_failf(-EINVAL, err, errlen, "%s 0: give at least 1 (or leave it out for all)",
                    sel->num_nodes == 0 ? "--num_nodes" : "--num_gpus");
    if (inc || exc) {
        rc = select_list(out, pool, inc ? "--include" : "--exclude", inc ? inc : exc, !!inc, err,
                         errlen);
        if (rc)
            return rc;
    } else {
        size_t n = pool->count;
        if (sel->num_nodes > 0 && (size_t)sel->num_nodes < n)
            n = (size_t)sel->num_nodes;
        for (size_t i = 0; i < n; i++) {
            const struct resources_node *node = &pool->nodes[i];
            size_t k = node->nslots;
            if (sel->num_gpus > 0) {
                char qh[QUOTE];
                quote_str(qh, sizeof qh, node->host);
                if ((size_t)sel->num_gpus > k)
                    return podrun_failf(-EINVAL, err, errlen,
                                "--num_gpus %d: host %s has only %zu slots (%s); lower "
                                "--num_gpus or give the host more slots",
                                sel->num_gpus, qh, k, qname);
                k = (size_t)sel->num_gpus;
            }
            if (node_push(out, node->host, node->line, node->slots, k))
                return podrun_failf(-ENOMEM, err, errlen, "out of memory");
        }
    }
    size_t total = 0;
    for (size_t i = 0; i < out->count; i++)
        total += out->nodes[i].nslots;
    if (total == 0) {
        char hosts[512];
        pool_text(hosts, sizeof hosts, pool);
        if (inc || exc)
            return podrun_failf(-EINVAL, err, errlen,
                        "%s \"%s\" leaves no slot to run on (hosts in %s: %s); select at least "
                        "one",
                        inc ? "--include" : "--exclude", inc ? qi : qe, qname, hosts);
        return podrun_failf(-EINVAL, err, errlen,
                    "%s: no host has a slot (hosts: %s); give at least one host slots=N", qname,
                    hosts);
    }
    return 0;
}
