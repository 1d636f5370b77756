/* launcher/preflight/codec.c — the preflight check's store values as text (pure; see
 * codec.h). */
#include "launcher/preflight/codec.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PF_VALUE_MAX 4096    /* one decoded value */

void pf_kv_add(textbuf_t *b, const char *key, const char *fmt, ...)
{
    char val[PF_VALUE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    text_add(b, key, strlen(key));
    text_add(b, "=", 1);
    for (const char *p = val; *p; p++) {
        if (*p == '\\')
            text_add(b, "\\\\", 2);
        else if (*p == '\n')
            text_add(b, "\\n", 2);
        else
            text_add(b, p, 1);
    }
    text_add(b, "\n", 1);
}

/* The next line of [*p, end) as key and unescaped value (both NUL-terminated, cut to their
 * buffers is an error). 1 with a line, 0 at the end, -EINVAL for a line without '=' or with a bad
 * escape or an overlong key or value. */
static int pf_next(const char **p, const char *end, char *key, size_t klen, char *val,
                   size_t vlen)
{
    if (*p >= end)
        return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *line_end = nl ? nl : end;
    const char *eq = memchr(*p, '=', (size_t)(line_end - *p));
    if (!eq || eq == *p || (size_t)(eq - *p) >= klen)
        return -EINVAL;
    memcpy(key, *p, (size_t)(eq - *p));
    key[eq - *p] = '\0';
    size_t n = 0;
    for (const char *s = eq + 1; s < line_end; s++) {
        char c = *s;
        if (c == '\0')
            return -EINVAL;
        if (c == '\\') {
            if (++s >= line_end)
                return -EINVAL;
            c = *s == 'n' ? '\n' : *s == '\\' ? '\\' : 0;
            if (!c)
                return -EINVAL;
        }
        if (n + 1 >= vlen)
            return -EINVAL;
        val[n++] = c;
    }
    val[n] = '\0';
    *p = nl ? nl + 1 : end;
    return 1;
}

static int pf_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

static int pf_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < -1 || v > 1e18)
        return -EINVAL;
    *out = v;
    return 0;
}

static int pf_text(const char *s, char *out, size_t len)
{
    size_t n = strlen(s);
    if (n >= len)
        return -EINVAL;
    memcpy(out, s, n + 1);
    return 0;
}

/* Copies as much of s as fits (a reason may be cut; it is for people). */
static void pf_cut(char *out, size_t len, const char *s)
{
    size_t n = strnlen(s, len - 1);
    memcpy(out, s, n);
    out[n] = '\0';
}

/* ---------- node ---------- */

int pf_node_encode(const struct pf_node_rec *r, textbuf_t *out)
{
    pf_kv_add(out, "name", "%s", r->name);
    pf_kv_add(out, "host", "%s", r->host);
    pf_kv_add(out, "port", "%d", r->port);
    pf_kv_add(out, "nproc", "%d", r->nproc);
    pf_kv_add(out, "rank_base", "%d", r->rank_base);
    pf_kv_add(out, "passed", "%d", r->passed ? 1 : 0);
    pf_kv_add(out, "hosts_store", "%d", r->hosts_store ? 1 : 0);
    return out->cut ? -ENOMEM : 0;
}

int pf_node_decode(const char *val, size_t len, struct pf_node_rec *r)
{
    char key[32], v[PF_VALUE_MAX];
    const char *p = val, *end = val + len;
    unsigned seen = 0;
    int rc, passed = 0, host = 0;
    memset(r, 0, sizeof *r);
    while ((rc = pf_next(&p, end, key, sizeof key, v, sizeof v)) > 0) {
        if (!strcmp(key, "name"))
            rc = pf_text(v, r->name, sizeof r->name), seen |= 1;
        else if (!strcmp(key, "host"))
            rc = pf_text(v, r->host, sizeof r->host), seen |= 2;
        else if (!strcmp(key, "port"))
            rc = pf_int(v, 0, 65535, &r->port), seen |= 4;
        else if (!strcmp(key, "nproc"))
            rc = pf_int(v, 1, 1 << 20, &r->nproc), seen |= 8;
        else if (!strcmp(key, "rank_base"))
            rc = pf_int(v, 0, 1 << 30, &r->rank_base), seen |= 16;
        else if (!strcmp(key, "passed"))
            rc = pf_int(v, 0, 1, &passed), seen |= 32;
        else if (!strcmp(key, "hosts_store"))
            rc = pf_int(v, 0, 1, &host), seen |= 64;
        if (rc < 0)
            return -EINVAL;
    }
    r->passed = passed;
    r->hosts_store = host;
    return rc < 0 || seen != 127 ? -EINVAL : 0;
}

/* ---------- figure ---------- */

int pf_figure_encode(const struct pf_figure *f, textbuf_t *out)
{
    pf_kv_add(out, "ok", "%d", f->ok ? 1 : 0);
    pf_kv_add(out, "rtt", "%.9g", f->rtt);
    pf_kv_add(out, "bw", "%.9g", f->bw);
    pf_kv_add(out, "reason", "%s", f->reason);
    return out->cut ? -ENOMEM : 0;
}

int pf_figure_decode(const char *val, size_t len, struct pf_figure *f)
{
    char key[32], v[PF_VALUE_MAX];
    const char *p = val, *end = val + len;
    unsigned seen = 0;
    int rc, ok = 0;
    memset(f, 0, sizeof *f);
    f->rtt = f->bw = -1;
    while ((rc = pf_next(&p, end, key, sizeof key, v, sizeof v)) > 0) {
        if (!strcmp(key, "ok"))
            rc = pf_int(v, 0, 1, &ok), seen |= 1;
        else if (!strcmp(key, "rtt"))
            rc = pf_double(v, &f->rtt), seen |= 2;
        else if (!strcmp(key, "bw"))
            rc = pf_double(v, &f->bw), seen |= 4;
        else if (!strcmp(key, "reason"))
            pf_cut(f->reason, sizeof f->reason, v), seen |= 8;
        if (rc < 0)
            return -EINVAL;
    }
    if (rc < 0 || seen != 15)
        return -EINVAL;
    f->ok = ok;
    f->done = true;
    return 0;
}

/* ---------- plan ---------- */

int pf_plan_encode(bool skip, const struct pf_link *links, int n, textbuf_t *out)
{
    if (skip)
        pf_kv_add(out, "skip", "1");
    for (int i = 0; i < n; i++)
        pf_kv_add(out, "link", "%d %d", links[i].a, links[i].b);
    if (!skip && n == 0)
        pf_kv_add(out, "links", "0");
    return out->cut ? -ENOMEM : 0;
}

int pf_plan_decode(const char *val, size_t len, int nnodes, struct pf_plan_rec *pl)
{
    char key[16], v[64];
    const char *p = val, *end = val + len;
    int rc, cap = 0;
    bool any = false;
    memset(pl, 0, sizeof *pl);
    while ((rc = pf_next(&p, end, key, sizeof key, v, sizeof v)) > 0) {
        any = true;
        if (!strcmp(key, "skip")) {
            pl->skip = true;
        } else if (!strcmp(key, "link")) {
            int a, b, used;
            if (sscanf(v, "%d %d%n", &a, &b, &used) != 2 || v[used] || a < 0 || b < 0 ||
                a >= nnodes || b >= nnodes || a == b || pl->nlinks >= PF_LINKS_MAX)
                goto bad;
            if (pl->nlinks == cap) {
                cap = cap ? 2 * cap : 16;
                struct pf_link *l2 = realloc(pl->links, (size_t)cap * sizeof *l2);
                if (!l2)
                    goto bad;
                pl->links = l2;
            }
            pl->links[pl->nlinks++] = (struct pf_link){a, b};
        }
    }
    if (rc < 0 || !any)
        goto bad;
    return 0;
bad:
    pf_plan_free(pl);
    return -EINVAL;
}

void pf_plan_free(struct pf_plan_rec *p)
{
    free(p->links);
    memset(p, 0, sizeof *p);
}

/* ---------- verdict ---------- */

void pf_verdict_begin(textbuf_t *b, int nodes, bool skip)
{
    pf_kv_add(b, "nodes", "%d", nodes);
    if (skip)
        pf_kv_add(b, "skip", "1");
}

void pf_verdict_host_bad(textbuf_t *b)
{
    pf_kv_add(b, "host_bad", "1");
}

void pf_verdict_bad(textbuf_t *b, int rank, const char *name, const char *kind,
                    const char *reason)
{
    char n[PF_NAME_MAX], k[32];
    snprintf(n, sizeof n, "%s", name);
    snprintf(k, sizeof k, "%s", kind);
    for (char *c = n; *c; c++)
        if (*c == '\t')
            *c = ' ';
    for (char *c = k; *c; c++)
        if (*c == '\t')
            *c = ' ';
    pf_kv_add(b, "bad", "%d\t%s\t%s\t%s", rank, n, k, reason);
}

void pf_verdict_line(textbuf_t *b, const char *text)
{
    pf_kv_add(b, "line", "%s", text);
}

/* Appends a copy of s to *arr (of *n). */
static int pf_push(char ***arr, int *n, const char *s)
{
    char **a2 = realloc(*arr, (size_t)(*n + 1) * sizeof **arr);
    if (!a2)
        return -ENOMEM;
    *arr = a2;
    if (!(a2[*n] = strdup(s)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

int pf_verdict_decode(const char *val, size_t len, struct pf_verdict_rec *vr)
{
    char key[16], v[PF_VALUE_MAX];
    const char *p = val, *end = val + len;
    int rc, nb = 0, nk = 0, nr = 0;
    bool nodes = false;
    memset(vr, 0, sizeof *vr);
    while ((rc = pf_next(&p, end, key, sizeof key, v, sizeof v)) > 0) {
        if (!strcmp(key, "nodes")) {
            if (pf_int(v, 1, 1 << 20, &vr->nodes))
                goto bad;
            nodes = true;
        } else if (!strcmp(key, "skip")) {
            vr->skip = true;
        } else if (!strcmp(key, "host_bad")) {
            vr->host_bad = true;
        } else if (!strcmp(key, "bad")) {
            char *t1 = strchr(v, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            char *t3 = t2 ? strchr(t2 + 1, '\t') : NULL;
            int rank;
            if (!t3 || vr->nbad >= PF_LINKS_MAX)
                goto bad;
            *t1 = *t2 = *t3 = '\0';
            if (pf_int(v, 0, 1 << 20, &rank))
                goto bad;
            int *b2 = realloc(vr->bad, (size_t)(vr->nbad + 1) * sizeof *b2);
            if (!b2)
                goto bad;
            vr->bad = b2;
            vr->bad[vr->nbad++] = rank;
            if (pf_push(&vr->bad_name, &nb, t1 + 1) || pf_push(&vr->bad_kind, &nk, t2 + 1) ||
                pf_push(&vr->bad_reason, &nr, t3 + 1))
                goto bad;
        } else if (!strcmp(key, "line")) {
            if (vr->nlines >= PF_LINKS_MAX || pf_push(&vr->lines, &vr->nlines, v))
                goto bad;
        }
    }
    if (rc < 0 || !nodes || nb != vr->nbad || nk != vr->nbad || nr != vr->nbad)
        goto bad;
    for (int i = 0; i < vr->nbad; i++)
        if (vr->bad[i] >= vr->nodes)
            goto bad;
    return 0;
bad:
    /* a failed push leaves the name/kind/reason counts behind nbad: free what exists */
    for (int i = 0; i < nb; i++)
        free(vr->bad_name[i]);
    for (int i = 0; i < nk; i++)
        free(vr->bad_kind[i]);
    for (int i = 0; i < nr; i++)
        free(vr->bad_reason[i]);
    free(vr->bad);
    free(vr->bad_name);
    free(vr->bad_kind);
    free(vr->bad_reason);
    for (int i = 0; i < vr->nlines; i++)
        free(vr->lines[i]);
    free(vr->lines);
    memset(vr, 0, sizeof *vr);
    return -EINVAL;
}

void pf_verdict_free(struct pf_verdict_rec *v)
{
    for (int i = 0; i < v->nbad; i++) {
        free(v->bad_name[i]);
        free(v->bad_kind[i]);
        free(v->bad_reason[i]);
    }
    free(v->bad);
    free(v->bad_name);
    free(v->bad_kind);
    free(v->bad_reason);
    for (int i = 0; i < v->nlines; i++)
        free(v->lines[i]);
    free(v->lines);
    memset(v, 0, sizeof *v);
}

/* ---------- the nccl helper's line ---------- */

int pf_helper_line_parse(const char *line, struct pf_figure *f)
{
    memset(f, 0, sizeof *f);
    f->rtt = f->bw = -1;
    double busbw, algbw, secs;
    int version, used = 0;
    if (sscanf(line, "ok busbw=%lf algbw=%lf seconds=%lf version=%d%n", &busbw, &algbw, &secs,
               &version, &used) == 4 && (line[used] == '\0' || line[used] == '\n')) {
        if (!(busbw >= 0 && busbw < 1e18))
            return -EINVAL;
        f->done = f->ok = true;
        f->bw = busbw;
        return 0;
    }
    char stage[32];
    if (sscanf(line, "fail stage=%31s %n", stage, &used) == 1 && used > 0) {
        size_t n = strcspn(line + used, "\n");
        f->done = true;
        snprintf(f->reason, sizeof f->reason, "%s: %.*s", stage, (int)(n < 215 ? n : 215),
                 line + used);
        return 0;
    }
    return -EINVAL;
}
