/* rdzv/coordinator.c — the rendezvous coordinator state machine and the record codecs.
 * Protocol: rdzv/rendezvous.h. No I/O here: every effect is an action in the queue. */
#include "rdzv/coordinator.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h> /* isfinite only: no libm */
#include <stdarg.h>
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

double kv_get_double(const char *text, size_t len, const char *k, double def)
{
    char s[64], *end;
    if (kv_get(text, len, k, s, sizeof s) <= 0)
        return def;
    double v = strtod(s, &end);
    return (*end || !isfinite(v)) ? def : v;
}

static int kv_result(const kvbuf_t *b)
{
    return b->overflow ? -ENOSPC : (int)b->len;
}

static int clamp_int(long long v, long long lo, long long hi, int def)
{
    return (v < lo || v > hi) ? def : (int)v;
}

/* ------------------------------------------------------------------------------------------ */
/* records                                                                                     */

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
    return kv_result(&b);
}

int rdzv_desc_decode(const char *text, size_t len, rdzv_desc_rec_t *d)
{
    memset(d, 0, sizeof *d);
    if (kv_get(text, len, "name", d->name, sizeof d->name) < 0)
        return -EINVAL;
    kv_get(text, len, "addr", d->addr, sizeof d->addr);
    kv_get(text, len, "host", d->host, sizeof d->host);
    d->nproc = clamp_int(kv_get_int(text, len, "nproc", -1), 0, 1 << 20, -1);
    d->want_rank = clamp_int(kv_get_int(text, len, "want_rank", -1), -1, 1 << 24, -2);
    d->pid = clamp_int(kv_get_int(text, len, "pid", 0), 0, 1 << 30, 0);
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
    d->n = clamp_int(kv_get_int(text, len, "n", 0), 0, RDZV_MAX_FAILURES, 0);
    for (int i = 0; i < d->n; i++) {
        char pfx[16];
        sfmt(pfx, sizeof pfx, "f%d.", i);
        rdzv_failure_take(text, len, pfx, &failures[i]);
    }
    return d->round < 0 ? -EINVAL : 0;
}

int rdzv_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int r = memcmp(a, b, la);
            if (r)
                return r < 0 ? -1 : 1;
            a += la;
            b += lb;
        } else {
            if (*a != *b)
                return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
            a++;
            b++;
        }
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the coordinator                                                                             */

enum node_state {
    NS_NEW,     /* has written something, never joined */
    NS_JOINED,  /* in the open round */
    NS_WAITING, /* joined while the job was full; joins the next round */
    NS_MEMBER,  /* in the running (or last) round */
    NS_STOPPED, /* member of a stopped round, expected to join the open one */
    NS_GONE,    /* left, lost, silent or rejected */
};

#define HOST_CLOSING "the job store host is shutting down"

enum fail_kind { FK_WORKER, FK_LEFT, FK_LOST, FK_SILENT, FK_JOINED };

/* A node's descriptor as the coordinator keeps it: the strings live in one allocation of
 * their own length (strs), not in three RDZV_NAME_MAX arrays, since a 1000-node job keeps a
 * thousand of these. Before the first join the strings are "". */
typedef struct cdesc {
    const char *name, *addr, *host;
    int nproc, want_rank, pid;
} cdesc_t;

typedef struct cnode {
    uint64_t id, conn;
    char ids[17];
    cdesc_t d;
    char *strs;
    int state, connected, join_k, node_rank, done, exp_idx;
    double last_seen;
} cnode_t;

/* open-addressing map uint64 (non-zero) → int */
typedef struct u64map {
    uint64_t *keys;
    int *vals;
    size_t cap, n;
} u64map_t;

static int u64map_put(u64map_t *m, uint64_t k, int v);

static size_t u64_hash(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static int u64map_get(const u64map_t *m, uint64_t k)
{
    if (!m->cap)
        return -1;
    for (size_t i = u64_hash(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == k)
            return m->vals[i];
        if (m->keys[i] == 0)
            return -1;
    }
}

/* Makes room for one more key, so that the next u64map_put cannot fail. */
static int u64map_reserve(u64map_t *m)
{
    if ((m->n + 1) * 2 > m->cap) {
        u64map_t g = {0};
        g.cap = m->cap ? m->cap * 2 : 64;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                u64map_put(&g, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    return 0;
}

static int u64map_put(u64map_t *m, uint64_t k, int v)
{
    if (u64map_reserve(m) < 0)
        return -ENOMEM;
    size_t i = u64_hash(k, m->cap);
    while (m->keys[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->keys[i])
        m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

typedef struct action_store {
    coord_action_t a;
    char *key, *val;
} action_store_t;

struct coord {
    coord_params_t p;
    char *run_id, *store_host, *prefix, *observe_prefix;
    int elastic;

    cnode_t **nodes;
    size_t n_nodes, cap_nodes;
    u64map_t by_id, by_conn;

    /* expected names (params.expected) */
    char **exp_names;
    int *exp_joined;
    int n_exp;

    int round, phase, finished, restarts_used;
    int joined, members, done, waiting, connected;
    int expect_known, expected_missing;
    int last_call_armed;
    double round_opened, join_deadline, last_sweep;
    int *rank_owner; /* node index owning each wanted rank in the open round, -1 */
    int stopped;     /* a reason to stop the running round was seen */
    int decided;     /* ... and the decision was set */
    int stop_counted;
    char stop_why[RDZV_REASON_MAX];
    rdzv_failure_t failures[RDZV_MAX_FAILURES];
    int n_failures;
    char over_kind[16];
    char over_text[RDZV_LINE_MAX];
    int closing, closed_sent;

    action_store_t *q;
    size_t q_len, q_cap, q_pos;
};

/* ---- action queue ---- */

static void q_reset(coord_t *c)
{
    for (size_t i = 0; i < c->q_len; i++) {
        free(c->q[i].key);
        free(c->q[i].val);
    }
    c->q_len = c->q_pos = 0;
    if (c->q_cap > 256) { /* a burst (a round closing on 1000 nodes) is not kept for life */
        free(c->q);
        c->q = NULL;
        c->q_cap = 0;
    }
}

static action_store_t *q_push(coord_t *c, int kind)
{
    if (c->q_len == c->q_cap) {
        size_t nc = c->q_cap ? c->q_cap * 2 : 64;
        action_store_t *nq = realloc(c->q, nc * sizeof *nq);
        if (!nq)
            return NULL;
        c->q = nq;
        c->q_cap = nc;
    }
    action_store_t *s = &c->q[c->q_len++];
    memset(s, 0, sizeof *s);
    s->a.kind = kind;
    return s;
}

static void act_set(coord_t *c, const char *key, const char *val, size_t vlen)
{
    action_store_t *s = q_push(c, COORD_SET);
    if (!s)
        return;
    s->key = strdup(key);
    s->val = malloc(vlen + 1);
    if (!s->key || !s->val) {
        free(s->key);
        free(s->val);
        c->q_len--;
        return;
    }
    memcpy(s->val, val, vlen);
    s->val[vlen] = '\0';
    s->a.key = s->key;
    s->a.val = s->val;
    s->a.vlen = vlen;
}

static void act_timer(coord_t *c, int timer, double at)
{
    action_store_t *s = q_push(c, COORD_TIMER);
    if (s) {
        s->a.timer = timer;
        s->a.at = at;
    }
}

static void act_log(coord_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void act_log(coord_t *c, const char *fmt, ...)
{
    char line[RDZV_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    action_store_t *s = q_push(c, COORD_LOG);
    if (!s)
        return;
    s->val = strdup(line);
    if (!s->val) {
        c->q_len--;
        return;
    }
    s->a.val = s->val;
    s->a.vlen = strlen(line);
}

int coord_next_action(coord_t *c, coord_action_t *a)
{
    if (c->q_pos >= c->q_len)
        return 0;
    *a = c->q[c->q_pos++].a;
    return 1;
}

/* ---- helpers ---- */

static const char *node_label(const cnode_t *n)
{
    return n->d.name[0] ? n->d.name : n->d.addr[0] ? n->d.addr : n->ids;
}

void rdzv_node_key(char *out, size_t cap, const char *prefix, const char *ids, const char *what,
                   int num)
{
    if (num >= 0)
        sfmt(out, cap, "%sn/%s/%s/%d", prefix, ids, what, num);
    else
        sfmt(out, cap, "%sn/%s/%s", prefix, ids, what);
}

static void node_key(const coord_t *c, char *out, size_t cap, const cnode_t *n, const char *what,
                     int num)
{
    rdzv_node_key(out, cap, c->prefix, n->ids, what, num);
}

static void answer_error(coord_t *c, cnode_t *n, const char *kind, const char *text)
{
    char key[256], val[RDZV_LINE_MAX + 64];
    node_key(c, key, sizeof key, n, "assign", n->join_k);
    int len = rdzv_assign_error_encode(kind, text, val, sizeof val);
    if (len >= 0)
        act_set(c, key, val, (size_t)len);
}

static int exp_find(const coord_t *c, const char *name)
{
    for (int i = 0; i < c->n_exp; i++)
        if (strcmp(c->exp_names[i], name) == 0)
            return i;
    return -1;
}

/* Appends `s` to a bounded list "a, b, c" in out; after `max` items counts the rest. */
typedef struct listbuf {
    char *out;
    size_t cap;
    int items, more, max;
} listbuf_t;

static void list_add(listbuf_t *l, const char *s)
{
    if (l->items >= l->max) {
        l->more++;
        return;
    }
    size_t len = strlen(l->out);
    sfmt(l->out + len, l->cap - len, "%s%s", l->items ? ", " : "", s);
    l->items++;
}

static void list_end(listbuf_t *l)
{
    if (l->more) {
        size_t len = strlen(l->out);
        sfmt(l->out + len, l->cap - len, " and %d more", l->more);
    }
}

/* The progress line of the open round; `timed_out` phrases it as the final word. */
static void progress_line(coord_t *c, double now, int timed_out, char *out, size_t cap)
{
    char missing[512] = "", joined[512] = "", left[32];
    listbuf_t lm = {missing, sizeof missing, 0, 0, 8}, lj = {joined, sizeof joined, 0, 0, 8};
    int target, all_ranked = c->joined > 0;

    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_JOINED) {
            list_add(&lj, node_label(n));
            if (n->d.want_rank < 0)
                all_ranked = 0;
        } else if (n->state == NS_STOPPED && c->expect_known) {
            list_add(&lm, node_label(n));
        }
    }
    for (int i = 0; i < c->n_exp && c->round == 0; i++)
        if (!c->exp_joined[i])
            list_add(&lm, c->exp_names[i]);
    if (c->p.min_nodes == c->p.max_nodes)
        target = c->p.max_nodes;
    else if (c->expect_known)
        target = c->joined + c->expected_missing;
    else
        target = c->p.min_nodes;
    if (target > c->p.max_nodes)
        target = c->p.max_nodes;
    if (lm.items == 0 && c->joined < target) {
        if (all_ranked && c->p.min_nodes == c->p.max_nodes) {
            for (int r = 0; r < c->p.max_nodes; r++)
                if (c->rank_owner[r] < 0) {
                    char s[32];
                    sfmt(s, sizeof s, "node rank %d", r);
                    list_add(&lm, s);
                }
        } else {
            sfmt(missing, sizeof missing, "%d more node%s", target - c->joined,
                     target - c->joined == 1 ? "" : "s");
        }
    }
    list_end(&lm);
    list_end(&lj);
    if (!joined[0])
        sfmt(joined, sizeof joined, "none");
    podrun_format_duration(c->join_deadline - now, left, sizeof left);

    if (timed_out) {
        char took[32];
        podrun_format_duration(c->p.join_timeout, took, sizeof took);
        sfmt(out, cap,
                 "rendezvous '%s' round %d timed out after %s: %d/%d nodes joined, still "
                 "waiting for %s (joined: %s)",
                 c->run_id, c->round, took, c->joined, target, missing, joined);
    } else if (c->joined >= c->p.min_nodes && c->joined < target) {
        sfmt(out, cap,
                 "rendezvous '%s' round %d: %d/%d nodes joined (min %d), waiting for %s "
                 "(joined so far: %s; %s left)",
                 c->run_id, c->round, c->joined, target, c->p.min_nodes, missing, joined, left);
    } else if (c->joined >= c->p.min_nodes) {
        char lc[32];
        podrun_format_duration(c->p.last_call_timeout, lc, sizeof lc);
        sfmt(out, cap,
                 "rendezvous '%s' round %d: %d nodes joined (min %d, max %d), last call of %s "
                 "for more (joined so far: %s)",
                 c->run_id, c->round, c->joined, c->p.min_nodes, c->p.max_nodes, lc, joined);
    } else {
        sfmt(out, cap,
                 "rendezvous '%s' round %d: %d/%d nodes joined, waiting for %s (joined so far: "
                 "%s; %s left)",
                 c->run_id, c->round, c->joined, target, missing, joined, left);
    }
}

static void set_status(coord_t *c, const char *line)
{
    char key[256];
    sfmt(key, sizeof key, "%sstatus", c->prefix);
    act_set(c, key, line, strlen(line));
}

static void close_round(coord_t *c, double now);
static void check_close(coord_t *c, double now);

/* The open round's timers (join, last call, progress) are off. */
static void stop_open_timers(coord_t *c)
{
    act_timer(c, COORD_T_JOIN, -1);
    act_timer(c, COORD_T_LAST_CALL, -1);
    act_timer(c, COORD_T_PROGRESS, -1);
    c->last_call_armed = 0;
}

static void go_over(coord_t *c, const char *kind, const char *text)
{
    c->phase = COORD_OVER;
    sfmt(c->over_kind, sizeof c->over_kind, "%s", kind);
    sfmt(c->over_text, sizeof c->over_text, "%s", text);
    stop_open_timers(c);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_WAITING || n->state == NS_JOINED) {
            answer_error(c, n, kind, text);
            n->state = NS_GONE;
        }
    }
    c->waiting = c->joined = 0;
    set_status(c, text);
}

/* Adds a joining node to the open round; 0, or -1 if it was rejected. */
static int admit(coord_t *c, cnode_t *n, int idx, double now)
{
    int want = n->d.want_rank;
    if (want >= c->p.max_nodes) {
        char text[256];
        sfmt(text, sizeof text,
                 "node rank %d of %s is out of range: the job has at most %d nodes (ranks 0..%d)",
                 want, node_label(n), c->p.max_nodes, c->p.max_nodes - 1);
        act_log(c, "rendezvous '%s': rejected %s", c->run_id, text);
        answer_error(c, n, "rejected", text);
        n->state = NS_GONE;
        return -1;
    }
    if (want >= 0 && c->rank_owner[want] >= 0 && c->rank_owner[want] != idx) {
        cnode_t *o = c->nodes[c->rank_owner[want]];
        char text[512];
        sfmt(text, sizeof text,
                 "node rank %d of %s (%s) is already taken by %s (%s): give every node its own "
                 "--node-rank",
                 want, node_label(n), n->d.addr, node_label(o), o->d.addr);
        act_log(c, "rendezvous '%s': rejected %s", c->run_id, text);
        answer_error(c, n, "rejected", text);
        n->state = NS_GONE;
        return -1;
    }
    if (want >= 0)
        c->rank_owner[want] = idx;
    if (n->state == NS_STOPPED)
        c->expected_missing--;
    n->state = NS_JOINED;
    c->joined++;
    n->last_seen = now;
    if (c->round == 0 && c->n_exp) {
        int e = exp_find(c, n->d.name);
        if (e >= 0 && !c->exp_joined[e]) {
            c->exp_joined[e] = 1;
            n->exp_idx = e;
            c->expected_missing--;
        }
    }
    return 0;
}

/* A joined node leaves the open round before it closed. */
static void unadmit(coord_t *c, cnode_t *n, int idx)
{
    c->joined--;
    if (n->d.want_rank >= 0 && n->d.want_rank < c->p.max_nodes &&
        c->rank_owner[n->d.want_rank] == idx)
        c->rank_owner[n->d.want_rank] = -1;
    if (n->exp_idx >= 0 && c->round == 0) {
        c->exp_joined[n->exp_idx] = 0;
        c->expected_missing++;
    }
    n->exp_idx = -1;
}

static void open_round(coord_t *c, int round, double now)
{
    c->round = round;
    c->phase = COORD_OPEN;
    c->joined = 0;
    c->expected_missing = 0;
    c->expect_known = round > 0 || c->n_exp > 0;
    if (round == 0)
        c->expected_missing = c->n_exp;
    c->round_opened = now;
    c->join_deadline = now + c->p.join_timeout;
    c->last_call_armed = 0;
    c->stopped = c->decided = c->stop_counted = 0;
    c->n_failures = 0;
    for (int r = 0; r < c->p.max_nodes; r++)
        c->rank_owner[r] = -1;
    act_timer(c, COORD_T_JOIN, c->join_deadline);
    act_timer(c, COORD_T_LAST_CALL, -1);
    /* the first line soon, so a short wait is explained too; then every progress_interval */
    act_timer(c, COORD_T_PROGRESS,
              now + (c->p.progress_interval < 1 ? c->p.progress_interval : 1));
    /* live members of the previous round are expected back; waiting nodes join right away */
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_MEMBER || n->state == NS_STOPPED) {
            n->state = NS_STOPPED;
            c->expected_missing++;
        }
    }
    c->members = c->done = 0;
    /* ... up to MAX: the rest keep waiting for the round after */
    for (size_t i = 0; i < c->n_nodes && c->joined < c->p.max_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (n->state == NS_WAITING) {
            c->waiting--;
            admit(c, n, (int)i, now);
        }
    }
    check_close(c, now);
}

static int cmp_nodes(const void *pa, const void *pb)
{
    const cnode_t *a = *(cnode_t *const *)pa, *b = *(cnode_t *const *)pb;
    int r = rdzv_natural_cmp(a->d.name, b->d.name);
    if (!r)
        r = rdzv_natural_cmp(a->d.addr, b->d.addr);
    if (!r)
        r = strcmp(a->ids, b->ids);
    return r;
}

static void close_round(coord_t *c, double now)
{
    int n = c->joined;
    cnode_t **v = malloc((size_t)n * sizeof *v), **slot = calloc((size_t)n, sizeof *slot);
    if (!v || !slot) {
        free(v);
        free(slot);
        return; /* the join timer retries */
    }
    int k = 0;
    for (size_t i = 0; i < c->n_nodes && k < n; i++)
        if (c->nodes[i]->state == NS_JOINED)
            v[k++] = c->nodes[i];
    qsort(v, (size_t)n, sizeof *v, cmp_nodes);
    for (int i = 0; i < n; i++)
        if (v[i]->d.want_rank >= 0 && v[i]->d.want_rank < n)
            slot[v[i]->d.want_rank] = v[i];
    int free_i = 0;
    for (int i = 0; i < n; i++) {
        if (v[i]->d.want_rank >= 0 && v[i]->d.want_rank < n)
            continue;
        if (v[i]->d.want_rank >= n)
            act_log(c,
                    "rendezvous '%s' round %d: node rank %d of %s does not fit %d nodes; it gets "
                    "a free one",
                    c->run_id, c->round, v[i]->d.want_rank, node_label(v[i]), n);
        while (slot[free_i])
            free_i++;
        slot[free_i] = v[i];
    }
    long long world = 0;
    for (int i = 0; i < n; i++)
        world += slot[i]->d.nproc;

    /* a fresh namespace for the workers of this attempt, before anyone can start */
    action_store_t *s = q_push(c, COORD_DELETE_WORKERS);
    if (s) {
        s->key = strdup("podrun/");
        s->a.key = s->key;
    }
    long long base = 0;
    for (int i = 0; i < n; i++) {
        cnode_t *m = slot[i];
        rdzv_assignment_t a = {
            .round = c->round,
            .node_rank = i,
            .nnodes = n,
            .rank_base = (int)base,
            .world_size = (int)world,
            .restart_count = c->restarts_used,
            .store_host = c->store_host,
            .store_port = c->p.store_port,
        };
        char key[256], val[512];
        node_key(c, key, sizeof key, m, "assign", m->join_k);
        int len = rdzv_assign_encode(&a, val, sizeof val);
        if (len >= 0)
            act_set(c, key, val, (size_t)len);
        m->state = NS_MEMBER;
        m->node_rank = i;
        m->done = 0;
        m->exp_idx = -1;
        base += m->d.nproc;
    }
    free(v);
    free(slot);
    c->phase = COORD_RUNNING;
    c->members = n;
    c->done = 0;
    c->joined = 0;
    stop_open_timers(c);
    char line[256];
    sfmt(line, sizeof line,
             "rendezvous '%s' round %d complete: %d node%s, world size %lld, restart count %d "
             "(%.3f s)",
             c->run_id, c->round, n, n == 1 ? "" : "s", world, c->restarts_used,
             now - c->round_opened);
    set_status(c, line);
    act_log(c, "%s", line);
}

static void check_close(coord_t *c, double now)
{
    if (c->phase != COORD_OPEN)
        return;
    int n = c->joined;
    if (n >= c->p.max_nodes ||
        (n >= c->p.min_nodes && c->expect_known && c->expected_missing <= 0)) {
        close_round(c, now);
    } else if (n >= c->p.min_nodes && !c->last_call_armed) {
        c->last_call_armed = 1;
        act_timer(c, COORD_T_LAST_CALL, now + c->p.last_call_timeout);
    } else if (n < c->p.min_nodes && c->last_call_armed) {
        c->last_call_armed = 0;
        act_timer(c, COORD_T_LAST_CALL, -1);
    }
}

static int cmp_fail(const void *pa, const void *pb)
{
    const rdzv_failure_t *a = pa, *b = pb;
    return a->time < b->time ? -1 : a->time > b->time ? 1 : 0;
}

static void record_failure(coord_t *c, const rdzv_failure_t *f)
{
    if (c->n_failures < RDZV_MAX_FAILURES) {
        c->failures[c->n_failures++] = *f;
    } else if (f->time < c->failures[RDZV_MAX_FAILURES - 1].time) {
        c->failures[RDZV_MAX_FAILURES - 1] = *f;
    } else {
        return;
    }
    qsort(c->failures, (size_t)c->n_failures, sizeof *f, cmp_fail);
}

static void fail_summary(const rdzv_failure_t *f, char *out, size_t cap)
{
    if (f->rank >= 0)
        sfmt(out, cap, "rank %d on %.60s %.100s", f->rank, f->node_name, f->reason);
    else
        sfmt(out, cap, "%.60s: %.100s", f->node_name, f->reason);
}

/* A reason to stop the running round; `f` may be NULL (a node joined). The decision itself
 * follows on COORD_T_DECIDE, armed for `now`, so that failures reported in the same pass of the
 * loop are sorted in and the root cause is the earliest of them. */
static void stop_round(coord_t *c, int kind, const rdzv_failure_t *f, const char *why,
                       double now)
{
    if (f)
        record_failure(c, f);
    if (c->phase != COORD_RUNNING || c->decided) {
        if (f)
            act_log(c, "rendezvous '%s' round %d: also %s on %s: %s", c->run_id, c->round,
                    kind == FK_WORKER ? "failed" : "lost", f->node_name, f->reason);
        return;
    }
    if (kind == FK_WORKER || !c->elastic)
        c->stop_counted = 1;
    if (c->stopped)
        return;
    c->stopped = 1;
    sfmt(c->stop_why, sizeof c->stop_why, "%s", why);
    act_timer(c, COORD_T_DECIDE, now);
}

/* The job-wide decision, set once in P r/<R>/end. */
static void decide(coord_t *c, double now)
{
    if (c->phase != COORD_RUNNING || !c->stopped || c->decided)
        return;
    c->decided = 1;
    int counted = c->stop_counted;
    rdzv_decision_t d = {0};
    d.round = c->round;
    d.next_round = c->round + 1;
    d.failures = c->failures;
    d.n = c->n_failures;
    d.own = -1;
    if (c->closing || (counted && c->restarts_used >= c->p.max_restarts)) {
        /* a closing store host leaves no store to restart in */
        d.action = RDZV_EXIT;
        d.restart_counted = 0;
    } else {
        d.action = RDZV_RESTART;
        d.restart_counted = counted;
        if (counted)
            c->restarts_used++;
    }
    d.restart_count = c->restarts_used;
    if (d.n > 0)
        fail_summary(&c->failures[0], d.reason, sizeof d.reason);
    else
        sfmt(d.reason, sizeof d.reason, "%s", c->stop_why);

    char key[256], *val = malloc(32768);
    if (!val)
        return;
    sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round);
    int len = rdzv_end_encode(&d, val, 32768);
    if (len >= 0)
        act_set(c, key, val, (size_t)len);
    free(val);
    if (d.action == RDZV_RESTART) {
        act_log(c, "rendezvous '%s' round %d stopped: %s; restarting as round %d (restart %s, "
                   "%d of %d used)",
                c->run_id, c->round, d.reason, c->round + 1, counted ? "counted" : "not counted",
                c->restarts_used, c->p.max_restarts);
        open_round(c, c->round + 1, now);
    } else {
        char text[RDZV_LINE_MAX];
        sfmt(text, sizeof text, "job '%s' stopped in round %d: %s%s", c->run_id, c->round,
             d.reason,
             !c->closing                  ? " (no restarts left)"
             : strstr(d.reason, HOST_CLOSING) ? ""
                                              : " (" HOST_CLOSING ")");
        act_log(c, "%s", text);
        go_over(c, "ended", text);
    }
}

/* A node-level failure record for `n`. */
static void node_failure(const cnode_t *n, const char *reason, double now, rdzv_failure_t *f)
{
    rdzv_failure_init(f);
    sfmt(f->host, sizeof f->host, "%s", n->d.addr[0] ? n->d.addr : n->d.host);
    sfmt(f->node_name, sizeof f->node_name, "%s", node_label(n));
    f->node_rank = n->node_rank;
    f->time = now;
    sfmt(f->reason, sizeof f->reason, "%s", reason);
}

static void maybe_closed(coord_t *c);

/* `n` is out of the job (left, lost, silent). */
static void node_gone(coord_t *c, cnode_t *n, int idx, int kind, const char *reason, double now)
{
    /* A silent node (cut off, host down) may never close its connection: a closing store must
     * not wait close_timeout for it. */
    if (kind == FK_SILENT && n->connected) {
        n->connected = 0;
        c->connected--;
        maybe_closed(c);
    }
    switch (n->state) {
    case NS_JOINED:
        unadmit(c, n, idx);
        if (kind == FK_SILENT)
            answer_error(c, n, "rejected", reason);
        n->state = NS_GONE;
        act_log(c, "rendezvous '%s' round %d: %s dropped out before the round closed: %s",
                c->run_id, c->round, node_label(n), reason);
        check_close(c, now);
        break;
    case NS_STOPPED:
        c->expected_missing--;
        n->state = NS_GONE;
        act_log(c, "rendezvous '%s' round %d: %s will not rejoin: %s", c->run_id, c->round,
                node_label(n), reason);
        check_close(c, now);
        break;
    case NS_WAITING:
        c->waiting--;
        if (kind == FK_SILENT)
            answer_error(c, n, "rejected", reason);
        n->state = NS_GONE;
        break;
    case NS_MEMBER:
        n->state = NS_GONE;
        if (c->phase == COORD_RUNNING && !n->done) {
            rdzv_failure_t f;
            char why[RDZV_REASON_MAX + RDZV_NAME_MAX];
            node_failure(n, reason, now, &f);
            sfmt(why, sizeof why, "%s: %s", node_label(n), reason);
            stop_round(c, kind, &f, why, now);
        }
        break;
    default:
        n->state = NS_GONE;
        break;
    }
}

static cnode_t *node_for(coord_t *c, uint64_t conn, uint64_t id, const char *ids, int *idx,
                         double now)
{
    int i = u64map_get(&c->by_id, id);
    if (i >= 0) {
        cnode_t *n = c->nodes[i];
        if (n->conn != conn)
            return NULL; /* someone else's id: ignore */
        *idx = i;
        return n;
    }
    if (u64map_get(&c->by_conn, conn) >= 0)
        return NULL; /* one agent per connection */
    if (c->n_nodes == c->cap_nodes) {
        size_t nc = c->cap_nodes ? c->cap_nodes * 2 : 64;
        cnode_t **nn = realloc(c->nodes, nc * sizeof *nn);
        if (!nn)
            return NULL;
        c->nodes = nn;
        c->cap_nodes = nc;
    }
    cnode_t *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->d.name = n->d.addr = n->d.host = "";
    n->id = id;
    n->conn = conn;
    memcpy(n->ids, ids, 16);
    n->state = NS_NEW;
    n->connected = 1;
    n->node_rank = -1;
    n->exp_idx = -1;
    n->last_seen = now;
    i = (int)c->n_nodes;
    /* both maps or neither: an index in one without the node would be read out of bounds */
    if (u64map_reserve(&c->by_id) < 0 || u64map_reserve(&c->by_conn) < 0) {
        free(n);
        return NULL;
    }
    u64map_put(&c->by_id, id, i);
    u64map_put(&c->by_conn, conn, i);
    c->nodes[c->n_nodes++] = n;
    c->connected++;
    *idx = i;
    return n;
}

static int node_set_desc(cnode_t *n, const rdzv_desc_rec_t *d)
{
    size_t ln = strlen(d->name) + 1, la = strlen(d->addr) + 1, lh = strlen(d->host) + 1;
    char *s = malloc(ln + la + lh);
    if (!s)
        return -ENOMEM;
    memcpy(s, d->name, ln);
    memcpy(s + ln, d->addr, la);
    memcpy(s + ln + la, d->host, lh);
    free(n->strs);
    n->strs = s;
    n->d.name = s;
    n->d.addr = s + ln;
    n->d.host = s + ln + la;
    n->d.nproc = d->nproc;
    n->d.want_rank = d->want_rank;
    n->d.pid = d->pid;
    return 0;
}

static void on_join(coord_t *c, cnode_t *n, int idx, int k, const char *val, size_t vlen,
                    double now)
{
    rdzv_desc_rec_t d;
    n->join_k = k;
    if (rdzv_desc_decode(val, vlen, &d) < 0) {
        answer_error(c, n, "rejected", "unreadable node descriptor");
        return;
    }
    if (n->state == NS_JOINED || n->state == NS_WAITING)
        return; /* a repeated join changes nothing but the key it is answered on */
    if (n->state == NS_MEMBER && c->phase == COORD_RUNNING) {
        answer_error(c, n, "rejected", "joined again while its round is running");
        return;
    }
    if (node_set_desc(n, &d) < 0) {
        answer_error(c, n, "rejected", "the job store host is out of memory");
        return;
    }
    if (c->phase == COORD_OVER) {
        answer_error(c, n, c->over_kind, c->over_text);
        n->state = NS_GONE;
        return;
    }
    if (n->state == NS_GONE || n->state == NS_MEMBER)
        n->state = NS_NEW;
    if (c->phase == COORD_OPEN) {
        if (admit(c, n, idx, now) == 0)
            check_close(c, now);
        return;
    }
    /* running: wait for the next round; an elastic job with room restarts for it now */
    n->state = NS_WAITING;
    c->waiting++;
    if (c->elastic && c->members + c->waiting <= c->p.max_nodes && !c->stopped) {
        char why[RDZV_REASON_MAX];
        sfmt(why, sizeof why, "membership change: %.100s joined", node_label(n));
        stop_round(c, FK_JOINED, NULL, why, now);
    } else {
        act_log(c, "rendezvous '%s': %s waits for the next round (round %d is running with %d "
                   "of at most %d nodes)",
                c->run_id, node_label(n), c->round, c->members, c->p.max_nodes);
    }
}

static void on_done(coord_t *c, cnode_t *n, int r)
{
    if (n->state != NS_MEMBER || c->phase != COORD_RUNNING || r != c->round || n->done)
        return;
    n->done = 1;
    if (++c->done < c->members || c->stopped)
        return;
    char key[256], val[64];
    sfmt(key, sizeof key, "%sr/%d/end", c->prefix, c->round);
    int len = rdzv_end_encode(NULL, val, sizeof val);
    if (len >= 0)
        act_set(c, key, val, (size_t)len);
    c->finished = 1;
    char text[256];
    sfmt(text, sizeof text, "job '%s' finished: all %d nodes done in round %d", c->run_id,
             c->members, c->round);
    act_log(c, "%s", text);
    go_over(c, "finished", text);
}

static void on_fail(coord_t *c, cnode_t *n, int r, const char *val, size_t vlen, double now)
{
    if (n->state != NS_MEMBER || r != c->round)
        return;
    rdzv_failure_t f;
    rdzv_failure_decode(val, vlen, &f);
    if (!f.host[0])
        sfmt(f.host, sizeof f.host, "%s", n->d.addr);
    if (!f.node_name[0])
        sfmt(f.node_name, sizeof f.node_name, "%s", node_label(n));
    f.node_rank = n->node_rank;
    if (!f.reason[0])
        sfmt(f.reason, sizeof f.reason, "failed");
    if (f.time <= 0)
        f.time = now;
    char why[RDZV_REASON_MAX];
    fail_summary(&f, why, sizeof why);
    stop_round(c, FK_WORKER, &f, why, now);
}

void coord_on_write(coord_t *c, uint64_t conn, const char *key, size_t klen, const char *val,
                    size_t vlen, double now)
{
    q_reset(c);
    size_t pl = strlen(c->observe_prefix);
    if (klen <= pl + 17 || memcmp(key, c->observe_prefix, pl) != 0 || key[pl + 16] != '/')
        return;
    char ids[17], rest[64];
    memcpy(ids, key + pl, 16);
    ids[16] = '\0';
    char *end;
    uint64_t id = strtoull(ids, &end, 16);
    if (*end || id == 0 || klen - pl - 17 >= sizeof rest)
        return;
    memcpy(rest, key + pl + 17, klen - pl - 17);
    rest[klen - pl - 17] = '\0';

    char *slash = strchr(rest, '/');
    long num = -1;
    if (slash) {
        *slash = '\0';
        num = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || num < 0 || num > (1L << 30))
            return;
    }
    enum { OP_HB, OP_JOIN, OP_DONE, OP_FAIL, OP_LEAVE, OP_COUNT };
    static const char *const ops[OP_COUNT] = {"hb", "join", "done", "fail", "leave"};
    int op = 0;
    while (op < OP_COUNT && strcmp(rest, ops[op]) != 0)
        op++;
    if (op == OP_COUNT)
        return;
    int idx;
    cnode_t *n = node_for(c, conn, id, ids, &idx, now);
    if (!n)
        return;
    n->last_seen = now;
    /* a write proves the connection open, also for a node dropped as silent that came back:
     * its close must count again */
    if (!n->connected) {
        n->connected = 1;
        c->connected++;
    }
    switch (op) {
    case OP_JOIN:
        if (num >= 0)
            on_join(c, n, idx, (int)num, val, vlen, now);
        break;
    case OP_DONE:
        if (num >= 0)
            on_done(c, n, (int)num);
        break;
    case OP_FAIL:
        if (num >= 0)
            on_fail(c, n, (int)num, val, vlen, now);
        break;
    case OP_LEAVE:
        if (n->state != NS_GONE) {
            char why[RDZV_REASON_MAX], r[64];
            size_t l = vlen < sizeof r - 1 ? vlen : sizeof r - 1;
            memcpy(r, val ? val : "", val ? l : 0);
            r[val ? l : 0] = '\0';
            sfmt(why, sizeof why, "agent left: %s", r[0] ? r : "shutting down");
            node_gone(c, n, idx, FK_LEFT, why, now);
        }
        break;
    default: /* a heartbeat: last_seen is all */
        break;
    }
}

static void maybe_closed(coord_t *c)
{
    if (c->closing && !c->closed_sent && c->connected <= 0) {
        c->closed_sent = 1;
        act_timer(c, COORD_T_CLOSE, -1);
        q_push(c, COORD_CLOSED);
    }
}

void coord_on_close(coord_t *c, uint64_t conn, double now)
{
    q_reset(c);
    int idx = u64map_get(&c->by_conn, conn);
    if (idx < 0)
        return;
    cnode_t *n = c->nodes[idx];
    if (!n->connected)
        return;
    n->connected = 0;
    c->connected--;
    if (n->state != NS_GONE && !(n->state == NS_MEMBER && c->phase == COORD_OVER))
        node_gone(c, n, idx, FK_LOST, "agent lost: connection closed", now);
    maybe_closed(c);
}

static void sweep(coord_t *c, double now)
{
    double limit = c->p.keep_alive_interval * c->p.keep_alive_max_attempt;
    /* a late sweep means this loop was stalled, not that every node went silent */
    if (now - c->last_sweep > 2 * c->p.keep_alive_interval) {
        for (size_t i = 0; i < c->n_nodes; i++)
            c->nodes[i]->last_seen = now;
    }
    c->last_sweep = now;
    for (size_t i = 0; i < c->n_nodes; i++) {
        cnode_t *n = c->nodes[i];
        if (!n->connected || n->state == NS_GONE || n->state == NS_NEW)
            continue;
        if (n->state == NS_MEMBER && (n->done || c->phase == COORD_OVER))
            continue;
        /* A node without running workers costs nobody anything while it is quiet, and one
         * wrongly dropped from a forming round costs the whole job: give it three times as
         * long. A dead agent is noticed by its closed connection anyway. */
        double lim = n->state == NS_MEMBER ? limit : 3 * limit;
        if (now - n->last_seen > lim) {
            char why[64];
            sfmt(why, sizeof why, "node silent for %g s", lim);
            node_gone(c, n, (int)i, FK_SILENT, why, now);
        }
    }
    act_timer(c, COORD_T_SWEEP, now + c->p.keep_alive_interval);
}

void coord_on_timer(coord_t *c, int timer, double now)
{
    q_reset(c);
    char line[RDZV_LINE_MAX];
    switch (timer) {
    case COORD_T_JOIN:
        if (c->phase != COORD_OPEN)
            break;
        if (c->joined >= c->p.min_nodes) {
            close_round(c, now);
        } else {
            progress_line(c, now, 1, line, sizeof line);
            act_log(c, "%s", line);
            go_over(c, "timeout", line);
        }
        break;
    case COORD_T_LAST_CALL:
        c->last_call_armed = 0;
        if (c->phase == COORD_OPEN && c->joined >= c->p.min_nodes)
            close_round(c, now);
        break;
    case COORD_T_SWEEP:
        sweep(c, now);
        break;
    case COORD_T_DECIDE:
        decide(c, now);
        break;
    case COORD_T_PROGRESS:
        if (c->phase != COORD_OPEN)
            break;
        progress_line(c, now, 0, line, sizeof line);
        set_status(c, line);
        act_log(c, "%s", line);
        act_timer(c, COORD_T_PROGRESS, now + c->p.progress_interval);
        break;
    case COORD_T_CLOSE:
        if (c->closing && !c->closed_sent) {
            char names[512] = "";
            listbuf_t l = {names, sizeof names, 0, 0, 8};
            for (size_t i = 0; i < c->n_nodes; i++)
                if (c->nodes[i]->connected)
                    list_add(&l, node_label(c->nodes[i]));
            list_end(&l);
            act_log(c, "rendezvous '%s': closing the store with %d agent%s still connected: %s",
                    c->run_id, c->connected, c->connected == 1 ? "" : "s", names);
            c->connected = 0;
            maybe_closed(c);
        }
        break;
    default:
        break;
    }
}

void coord_shutdown(coord_t *c, double now)
{
    q_reset(c);
    if (c->closing)
        return;
    c->closing = 1;
    /* nobody may be left waiting for a decision or a round that can no longer come */
    if (c->phase == COORD_RUNNING && !c->decided) {
        if (!c->stopped) {
            rdzv_failure_t f;
            rdzv_failure_init(&f);
            sfmt(f.host, sizeof f.host, "%s", c->store_host);
            sfmt(f.node_name, sizeof f.node_name, "%s", c->store_host);
            f.time = now;
            sfmt(f.reason, sizeof f.reason, "%s", HOST_CLOSING);
            record_failure(c, &f);
            c->stopped = 1;
            sfmt(c->stop_why, sizeof c->stop_why, "%s", HOST_CLOSING);
        }
        decide(c, now);
    }
    if (c->phase == COORD_OPEN) {
        char text[256];
        sfmt(text, sizeof text, "job '%s': the job store host is shutting down", c->run_id);
        go_over(c, "ended", text);
    }
    act_timer(c, COORD_T_SWEEP, -1);
    stop_open_timers(c);
    act_timer(c, COORD_T_DECIDE, -1);
    if (c->connected > 0)
        act_timer(c, COORD_T_CLOSE, now + c->p.close_timeout);
    maybe_closed(c);
}

const char *coord_observe_prefix(const coord_t *c)
{
    return c->observe_prefix;
}

void coord_info(const coord_t *c, coord_info_t *info)
{
    info->round = c->round;
    info->phase = c->phase;
    info->joined = c->joined;
    info->members = c->members;
    info->waiting = c->waiting;
    info->connected = c->connected;
    info->restarts_used = c->restarts_used;
    info->finished = c->finished;
}

static int parse_expected(coord_t *c, const char *list)
{
    if (!list || !*list)
        return 0;
    int cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    c->exp_names = calloc((size_t)cap, sizeof *c->exp_names);
    c->exp_joined = calloc((size_t)cap, sizeof *c->exp_joined);
    if (!c->exp_names || !c->exp_joined)
        return -ENOMEM;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        while (l && isspace((unsigned char)*p))
            p++, l--;
        while (l && isspace((unsigned char)p[l - 1]))
            l--;
        if (l) {
            char *s = strndup(p, l);
            if (!s)
                return -ENOMEM;
            if (exp_find(c, s) >= 0)
                free(s);
            else
                c->exp_names[c->n_exp++] = s;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

coord_t *coord_new(const coord_params_t *p, double now)
{
    if (!p || !p->run_id || p->min_nodes < 1 || p->max_nodes < p->min_nodes ||
        p->max_nodes > (1 << 20) || p->max_restarts < 0 || p->keep_alive_interval <= 0 ||
        p->keep_alive_max_attempt < 1 || p->progress_interval <= 0)
        return NULL;
    coord_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->p = *p;
    c->run_id = strdup(p->run_id);
    c->store_host = strdup(p->store_host ? p->store_host : "");
    c->rank_owner = malloc((size_t)p->max_nodes * sizeof *c->rank_owner);
    if (c->run_id && (size_t)snprintf(NULL, 0, "podrun/%s/", p->run_id) < 200) {
        if (asprintf(&c->prefix, "podrun/%s/", p->run_id) < 0)
            c->prefix = NULL;
        if (asprintf(&c->observe_prefix, "podrun/%s/n/", p->run_id) < 0)
            c->observe_prefix = NULL;
    }
    if (!c->run_id || !c->store_host || !c->rank_owner || !c->prefix || !c->observe_prefix ||
        parse_expected(c, p->expected) < 0) {
        coord_free(c);
        return NULL;
    }
    c->p.run_id = c->run_id;
    c->p.store_host = c->store_host;
    c->p.expected = NULL;
    c->elastic = p->min_nodes < p->max_nodes;
    c->last_sweep = now;
    act_timer(c, COORD_T_SWEEP, now + p->keep_alive_interval);
    open_round(c, 0, now);
    return c;
}

void coord_free(coord_t *c)
{
    if (!c)
        return;
    q_reset(c);
    free(c->q);
    for (size_t i = 0; i < c->n_nodes; i++) {
        free(c->nodes[i]->strs);
        free(c->nodes[i]);
    }
    free(c->nodes);
    free(c->by_id.keys);
    free(c->by_id.vals);
    free(c->by_conn.keys);
    free(c->by_conn.vals);
    for (int i = 0; i < c->n_exp; i++)
        free(c->exp_names[i]);
    free(c->exp_names);
    free(c->exp_joined);
    free(c->rank_owner);
    free(c->run_id);
    free(c->store_host);
    free(c->prefix);
    free(c->observe_prefix);
    free(c);
}
