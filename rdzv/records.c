/* rdzv/records.c — the rendezvous records' text form (see records.h). Pure: no I/O. */
#include "rdzv/records.h"
#include "rdzv/badnodes.h"

#include <errno.h>
#include <math.h> /* isfinite only: no libm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* key=value text                                                                              */

void kv_init(kvbuf_t *b, char *buf, size_t cap)
{
    b->buf = buf;
    b->cap = cap;
    b->len = 0;
    b->overflow = 0;
    if (cap)
        buf[0] = '\0';
}

/* Length of v cut to at most vmax bytes without splitting a UTF-8 sequence. */
static size_t cut_len(const char *v, size_t vmax)
{
    size_t n = strlen(v);
    if (vmax == 0 || n <= vmax)
        return n;
    n = vmax;
    while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
        n--;
    return n;
}

void kv_add(kvbuf_t *b, const char *k, const char *v, size_t vmax)
{
    size_t n = cut_len(v ? v : "", vmax), need = strlen(k) + 2, i;
    for (i = 0; i < n; i++)
        need += (v[i] == '\\' || v[i] == '\n') ? 2 : 1;
    if (b->len + need + 1 > b->cap) {
        b->overflow = 1;
        return;
    }
    char *p = b->buf + b->len;
    size_t kl = strlen(k);
    memcpy(p, k, kl);
    p += kl;
    *p++ = '=';
    for (i = 0; i < n; i++) {
        if (v[i] == '\\') {
            *p++ = '\\';
            *p++ = '\\';
        } else if (v[i] == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else {
            *p++ = v[i];
        }
    }
    *p++ = '\n';
    *p = '\0';
    b->len = (size_t)(p - b->buf);
}

void kv_add_int(kvbuf_t *b, const char *k, long long v)
{
    char s[32];
    sfmt(s, sizeof s, "%lld", v);
    kv_add(b, k, s, 0);
}

void kv_add_double(kvbuf_t *b, const char *k, double v)
{
    char s[64];
    sfmt(s, sizeof s, "%.6f", isfinite(v) ? v : 0.0);
    kv_add(b, k, s, 0);
}

int kv_get(const char *text, size_t len, const char *k, char *out, size_t cap)
{
    size_t kl = strlen(k), pos = 0;
    if (cap)
        out[0] = '\0';
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + 1;
        if (ll <= kl || memcmp(line, k, kl) != 0 || line[kl] != '=')
            continue;
        size_t o = 0;
        int n = 0;
        for (size_t i = kl + 1; i < ll; i++) {
            char ch = line[i];
            if (ch == '\\' && i + 1 < ll) {
                i++;
                ch = line[i] == 'n' ? '\n' : line[i];
            }
            if (o + 1 < cap)
                out[o++] = ch;
            n++;
        }
        if (cap)
            out[o] = '\0';
        return n;
    }
    return -1;
}

long long kv_get_int(const char *text, size_t len, const char *k, long long def)
{
    char s[32], *end;
    if (kv_get(text, len, k, s, sizeof s) <= 0)
        return def;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return (errno || *end) ? def : v;
}

int rdzv_seconds_parse(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || v >= RDZV_SECONDS_MAX || v <= -RDZV_SECONDS_MAX)
        return -1;
    *out = v;
    return 0;
}

double kv_get_double(const char *text, size_t len, const char *k, double def)
{
    char s[64];
    double v;
    if (kv_get(text, len, k, s, sizeof s) <= 0 || rdzv_seconds_parse(s, &v))
        return def;
    return v;
}

static int kv_result(const kvbuf_t *b)
{
    return b->overflow ? -ENOSPC : (int)b->len;
}

/* Text from another node ends up in every agent's log and report: control bytes (a terminal's
 * escape sequences, a carriage return that hides a line) become '?'; line ends stay where
 * `lines` allows them (a worker's error message), tabs always. */
static void clean_text(char *s, int lines)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch < 0x20 && ch != '\t' && !(lines && ch == '\n')) || ch == 0x7f)
            *s = '?';
    }
}

static int clamp_int(long long v, long long lo, long long hi, int def)
{
    return (v < lo || v > hi) ? def : (int)v;
}
/* ------------------------------------------------------------------------------------------ */
/* records                                                                                     */

int rdzv_run_prefix(char *out, size_t cap, const char *run_id)
{
    char id[RDZV_RUN_ID_MAX + 1];
    size_t n = 0;
    for (const char *c = run_id; *c; c++) {
        const char *esc = *c == '%' ? "%25" : *c == '/' ? "%2F" : NULL;
        size_t k = esc ? 3 : 1;
        if (n + k > RDZV_RUN_ID_MAX) {
            if (cap)
                out[0] = '\0';
            return -ENAMETOOLONG;
        }
        memcpy(id + n, esc ? esc : c, k);
        n += k;
    }
    id[n] = '\0';
    int len = snprintf(out, cap, "podrun/%s/", id);
    if (len < 0 || (size_t)len >= cap) {
        if (cap)
            out[0] = '\0';
        return -ENAMETOOLONG;
    }
    return len;
}

void rdzv_node_key(char *out, size_t cap, const char *prefix, const char *ids, const char *what,
                   int num)
{
    if (num >= 0)
        sfmt(out, cap, "%sn/%s/%s/%d", prefix, ids, what, num);
    else
        sfmt(out, cap, "%sn/%s/%s", prefix, ids, what);
}

/* Decimal digits only, no sign, no leading zero, at most 2^30. */
static int record_num(const char *p, size_t n)
{
    long v = 0;
    if (n == 0 || n > 10 || (p[0] == '0' && n > 1))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    return v <= (1L << 30);
}

int rdzv_agent_record_key(const char *key, size_t klen, const char *prefix)
{
    static const struct {
        const char *what;
        int num;
    } kinds[] = {{"join", 1}, {"hb", 0}, {"fail", 1}, {"done", 1}, {"leave", 0}, {"peer", 1},
                 {"health", 0}, {"gather", 1}};
    size_t pl = strlen(prefix);
    if (klen < pl + 2 + 17 || memcmp(key, prefix, pl) != 0 || memcmp(key + pl, "n/", 2) != 0)
        return 0;
    const char *id = key + pl + 2;
    for (int i = 0; i < 16; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    if (id[16] != '/')
        return 0;
    const char *w = id + 17, *end = key + klen;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        size_t wl = strlen(kinds[i].what);
        if ((size_t)(end - w) < wl || memcmp(w, kinds[i].what, wl) != 0)
            continue;
        const char *rest = w + wl;
        if (!kinds[i].num)
            return rest == end;
        return rest < end && *rest == '/' && record_num(rest + 1, (size_t)(end - rest - 1));
    }
    return 0;
}

int rdzv_desc_encode(const rdzv_desc_rec_t *d, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add(&b, "name", d->name, RDZV_NAME_MAX - 1);
    kv_add(&b, "addr", d->addr, RDZV_NAME_MAX - 1);
    kv_add(&b, "host", d->host, RDZV_NAME_MAX - 1);
    kv_add_int(&b, "nproc", d->nproc);
    kv_add_int(&b, "want_rank", d->want_rank);
    kv_add_int(&b, "pid", d->pid);
    if (d->service)   /* only then: a record without it is what every other node sends */
        kv_add_int(&b, "service", 1);
    if (d->domain[0])
        kv_add(&b, "domain", d->domain, RDZV_NAME_MAX - 1);
    if (d->has_progress)
        kv_add_int(&b, "progress", d->progress);
    if (d->relay_port > 0)
        kv_add_int(&b, "relay", d->relay_port);
    return kv_result(&b);
}

int rdzv_desc_decode(const char *text, size_t len, rdzv_desc_rec_t *d)
{
    memset(d, 0, sizeof *d);
    if (kv_get(text, len, "name", d->name, sizeof d->name) < 0)
        return -EINVAL;
    kv_get(text, len, "addr", d->addr, sizeof d->addr);
    kv_get(text, len, "host", d->host, sizeof d->host);
    kv_get(text, len, "domain", d->domain, sizeof d->domain);
    clean_text(d->name, 0), clean_text(d->addr, 0), clean_text(d->host, 0);
    clean_text(d->domain, 0);
    d->nproc = clamp_int(kv_get_int(text, len, "nproc", -1), 0, 1 << 20, -1);
    d->want_rank = clamp_int(kv_get_int(text, len, "want_rank", -1), -1, 1 << 24, -2);
    d->pid = clamp_int(kv_get_int(text, len, "pid", 0), 0, 1 << 30, 0);
    d->service = kv_get_int(text, len, "service", 0) == 1;
    d->progress = kv_get_int(text, len, "progress", -1);
    d->has_progress = d->progress >= 0 && d->progress <= RDZV_PROGRESS_MAX;
    if (!d->has_progress)
        d->progress = 0;
    d->relay_port = clamp_int(kv_get_int(text, len, "relay", 0), 1, 65535, 0);
    if (d->nproc < 0 || d->want_rank < -1)
        return -EINVAL;
    return 0;
}

void rdzv_failure_init(rdzv_failure_t *f)
{
    memset(f, 0, sizeof *f);
    f->node_rank = f->rank = f->local_rank = -1;
    f->exit_code = -1;
}

static void pkey(char *out, size_t cap, const char *pfx, const char *k)
{
    sfmt(out, cap, "%s%s", pfx, k);
}

void rdzv_failure_put(kvbuf_t *b, const char *pfx, const rdzv_failure_t *f)
{
    char k[48];
    pkey(k, sizeof k, pfx, "host"), kv_add(b, k, f->host, RDZV_NAME_MAX - 1);
    pkey(k, sizeof k, pfx, "node"), kv_add(b, k, f->node_name, RDZV_NAME_MAX - 1);
    pkey(k, sizeof k, pfx, "node_rank"), kv_add_int(b, k, f->node_rank);
    pkey(k, sizeof k, pfx, "rank"), kv_add_int(b, k, f->rank);
    pkey(k, sizeof k, pfx, "local_rank"), kv_add_int(b, k, f->local_rank);
    pkey(k, sizeof k, pfx, "exit_code"), kv_add_int(b, k, f->exit_code);
    pkey(k, sizeof k, pfx, "signo"), kv_add_int(b, k, f->signo);
    pkey(k, sizeof k, pfx, "time"), kv_add_double(b, k, f->time);
    pkey(k, sizeof k, pfx, "reason"), kv_add(b, k, f->reason, RDZV_REASON_MAX - 1);
    pkey(k, sizeof k, pfx, "message"), kv_add(b, k, f->message, RDZV_MESSAGE_MAX - 1);
    if (f->permanent)   /* only when set: records without it read as they always did */
        pkey(k, sizeof k, pfx, "permanent"), kv_add_int(b, k, 1);
    if (f->fatal)   /* only when set: a record without it reads as it always did */
        pkey(k, sizeof k, pfx, "fatal"), kv_add_int(b, k, f->fatal);
    if (f->exclude)
        pkey(k, sizeof k, pfx, "exclude"), kv_add_int(b, k, 1);
}

void rdzv_failure_take(const char *text, size_t len, const char *pfx, rdzv_failure_t *f)
{
    char k[48];
    rdzv_failure_init(f);
    pkey(k, sizeof k, pfx, "host"), kv_get(text, len, k, f->host, sizeof f->host);
    pkey(k, sizeof k, pfx, "node"), kv_get(text, len, k, f->node_name, sizeof f->node_name);
    pkey(k, sizeof k, pfx, "node_rank");
    f->node_rank = clamp_int(kv_get_int(text, len, k, -1), -1, 1 << 24, -1);
    pkey(k, sizeof k, pfx, "rank");
    f->rank = clamp_int(kv_get_int(text, len, k, -1), -1, 1 << 30, -1);
    pkey(k, sizeof k, pfx, "local_rank");
    f->local_rank = clamp_int(kv_get_int(text, len, k, -1), -1, 1 << 20, -1);
    pkey(k, sizeof k, pfx, "exit_code");
    f->exit_code = clamp_int(kv_get_int(text, len, k, -1), -1, 255, -1);
    pkey(k, sizeof k, pfx, "signo");
    f->signo = clamp_int(kv_get_int(text, len, k, 0), 0, 128, 0);
    pkey(k, sizeof k, pfx, "time"), f->time = kv_get_double(text, len, k, 0);
    pkey(k, sizeof k, pfx, "reason"), kv_get(text, len, k, f->reason, sizeof f->reason);
    pkey(k, sizeof k, pfx, "message"), kv_get(text, len, k, f->message, sizeof f->message);
    pkey(k, sizeof k, pfx, "permanent"), f->permanent = kv_get_int(text, len, k, 0) == 1;
    pkey(k, sizeof k, pfx, "fatal");
    f->fatal = clamp_int(kv_get_int(text, len, k, 0), 0, RDZV_FATAL_ASKED, 0);
    pkey(k, sizeof k, pfx, "exclude"), f->exclude = kv_get_int(text, len, k, 0) == 1;
    clean_text(f->host, 0), clean_text(f->node_name, 0), clean_text(f->reason, 0);
    clean_text(f->message, 1);
}

int rdzv_failure_encode(const rdzv_failure_t *f, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    rdzv_failure_put(&b, "", f);
    return kv_result(&b);
}

int rdzv_failure_decode(const char *text, size_t len, rdzv_failure_t *f)
{
    rdzv_failure_take(text, len, "", f);
    return kv_get(text, len, "reason", NULL, 0) < 0 ? -EINVAL : 0;
}

const char *const rdzv_health_names[RDZV_HEALTH__COUNT] = {
    [RDZV_HEALTH_NONE] = "-",      [RDZV_HEALTH_OFF] = "off", [RDZV_HEALTH_IDLE] = "idle",
    [RDZV_HEALTH_WAITING] = "waiting", [RDZV_HEALTH_OK] = "ok", [RDZV_HEALTH_FAILED] = "failed",
};

/* Seconds since `checked`, never negative (a clock stepped back between the check and now). */
static double age_since(double checked, double now)
{
    return now > checked ? now - checked : 0;
}

int rdzv_health_encode(const rdzv_health_t *h, double now, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add_int(&b, "state", h->state);
    kv_add_double(&b, "interval", h->interval);
    if (h->checked > 0)
        kv_add_double(&b, "ago", age_since(h->checked, now));
    if (h->state == RDZV_HEALTH_FAILED)
        kv_add(&b, "why", h->why, RDZV_REASON_MAX - 1);
    return kv_result(&b);
}

int rdzv_health_decode(const char *text, size_t len, double now, rdzv_health_t *h)
{
    memset(h, 0, sizeof *h);
    h->state = clamp_int(kv_get_int(text, len, "state", 0), 0, RDZV_HEALTH__COUNT - 1, 0);
    if (h->state == RDZV_HEALTH_NONE)
        return -EINVAL;
    double iv = kv_get_double(text, len, "interval", 0);
    h->interval = iv >= 0 && iv <= 1e7 ? iv : 0;
    h->checked = rdzv_health_ago_decode(text, len, now);
    if (h->state == RDZV_HEALTH_FAILED) {
        kv_get(text, len, "why", h->why, sizeof h->why);
        clean_text(h->why, 0);
    }
    return 0;
}

int rdzv_health_ago_encode(double checked, double now, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add_double(&b, "ago", age_since(checked, now));
    return kv_result(&b);
}

double rdzv_health_ago_decode(const char *text, size_t len, double now)
{
    double ago = len ? kv_get_double(text, len, "ago", -1) : -1;
    return ago >= 0 && ago <= 1e7 ? now - ago : 0;
}

int rdzv_assign_encode(const rdzv_assignment_t *a, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add_int(&b, "round", a->round);
    kv_add_int(&b, "node_rank", a->node_rank);
    kv_add_int(&b, "nnodes", a->nnodes);
    kv_add_int(&b, "rank_base", a->rank_base);
    kv_add_int(&b, "world_size", a->world_size);
    kv_add_int(&b, "restart_count", a->restart_count);
    kv_add(&b, "store_host", a->store_host ? a->store_host : "", RDZV_NAME_MAX - 1);
    kv_add_int(&b, "store_port", a->store_port);
    return kv_result(&b);
}

int rdzv_assign_error_encode(const char *error, const char *text, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add(&b, "error", error, 32);
    kv_add(&b, "text", text, RDZV_LINE_MAX - 1);
    return kv_result(&b);
}

int rdzv_assign_decode(const char *text, size_t len, rdzv_assignment_t *a, char *host_buf,
                       size_t host_cap, char *error_out, size_t ecap, char *text_out,
                       size_t tcap)
{
    memset(a, 0, sizeof *a);
    if (kv_get(text, len, "error", error_out, ecap) >= 0) {
        kv_get(text, len, "text", text_out, tcap);
        if (tcap)
            clean_text(text_out, 0);
        return error_out[0] ? 0 : -EINVAL;
    }
    if (ecap)
        error_out[0] = '\0';
    if (tcap)
        text_out[0] = '\0';
    a->round = clamp_int(kv_get_int(text, len, "round", -1), 0, 1 << 30, -1);
    a->nnodes = clamp_int(kv_get_int(text, len, "nnodes", -1), 1, 1 << 24, -1);
    a->node_rank = clamp_int(kv_get_int(text, len, "node_rank", -1), 0, 1 << 24, -1);
    a->world_size = clamp_int(kv_get_int(text, len, "world_size", -1), 0, 1 << 30, -1);
    a->rank_base = clamp_int(kv_get_int(text, len, "rank_base", -1), 0, 1 << 30, -1);
    a->restart_count = clamp_int(kv_get_int(text, len, "restart_count", -1), 0, 1 << 30, -1);
    a->store_port = (uint16_t)clamp_int(kv_get_int(text, len, "store_port", 0), 0, 65535, 0);
    kv_get(text, len, "store_host", host_buf, host_cap);
    a->store_host = host_buf;
    if (a->round < 0 || a->nnodes < 0 || a->node_rank < 0 || a->node_rank >= a->nnodes ||
        a->world_size < 0 || a->rank_base < 0 || a->rank_base > a->world_size ||
        a->restart_count < 0)
        return -EINVAL;
    return 0;
}

int rdzv_end_encode(const rdzv_decision_t *d, char *buf, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, buf, cap);
    if (!d) {
        kv_add(&b, "end", "finished", 0);
        return kv_result(&b);
    }
    kv_add(&b, "end", "stop", 0);
    kv_add(&b, "action", d->action == RDZV_EXIT ? "exit" : "restart", 0);
    kv_add_int(&b, "round", d->round);
    kv_add_int(&b, "next_round", d->next_round);
    kv_add_int(&b, "counted", d->restart_counted);
    kv_add_int(&b, "restart_count", d->restart_count);
    kv_add(&b, "reason", d->reason, RDZV_REASON_MAX - 1);
    int n = d->n < RDZV_MAX_FAILURES ? d->n : RDZV_MAX_FAILURES;
    kv_add_int(&b, "n", n);
    for (int i = 0; i < n; i++) {
        char pfx[16];
        sfmt(pfx, sizeof pfx, "f%d.", i);
        rdzv_failure_put(&b, pfx, &d->failures[i]);
    }
    if (d->n_bad > 0)   /* only when there are: an end record without it reads as before */
        badnodes_put(&b, "bad", d->bad, d->n_bad);
    return kv_result(&b);
}

int rdzv_end_decode(const char *text, size_t len, rdzv_decision_t *d, rdzv_failure_t *failures)
{
    char end[16], act[16];
    memset(d, 0, sizeof *d);
    d->failures = failures;
    d->own = -1;
    if (kv_get(text, len, "end", end, sizeof end) < 0)
        return -EINVAL;
    if (strcmp(end, "finished") == 0)
        return 1;
    if (strcmp(end, "stop") != 0 || kv_get(text, len, "action", act, sizeof act) < 0)
        return -EINVAL;
    if (strcmp(act, "exit") == 0)
        d->action = RDZV_EXIT;
    else if (strcmp(act, "restart") == 0)
        d->action = RDZV_RESTART;
    else
        return -EINVAL;
    d->round = clamp_int(kv_get_int(text, len, "round", -1), 0, 1 << 30, -1);
    d->next_round = clamp_int(kv_get_int(text, len, "next_round", -1), 0, 1 << 30, -1);
    d->restart_counted = kv_get_int(text, len, "counted", 0) ? 1 : 0;
    d->restart_count = clamp_int(kv_get_int(text, len, "restart_count", 0), 0, 1 << 30, 0);
    kv_get(text, len, "reason", d->reason, sizeof d->reason);
    clean_text(d->reason, 0);
    d->n = clamp_int(kv_get_int(text, len, "n", 0), 0, RDZV_MAX_FAILURES, 0);
    for (int i = 0; i < d->n; i++) {
        char pfx[16];
        sfmt(pfx, sizeof pfx, "f%d.", i);
        rdzv_failure_take(text, len, pfx, &failures[i]);
    }
    d->n_bad = badnodes_take(text, len, "bad", d->bad, RDZV_MAX_BAD_NODES);
    return d->round < 0 ? -EINVAL : 0;
}
