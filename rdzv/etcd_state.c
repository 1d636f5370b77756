/* rdzv/etcd_state.c — the etcd backend's record of the job's state (see etcd_state.h). */
#include "rdzv/etcd_state.h"
#include "rdzv/badnodes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const phases[] = {NULL, "open", "running", "over"};

/* Bytes one percent-encoded field may take. */
#define FIELD_MAX (3 * RDZV_NAME_MAX)
/* Bytes one member line may take: the id, seven numbers, three fields, blanks. */
#define MEMBER_LINE_MAX (32 + 7 * 12 + 3 * FIELD_MAX)

static int plain(unsigned char c)
{
    return c > ' ' && c < 0x7f && c != '%' && c != '\\';
}

/* s percent-encoded at p; returns the bytes written. An empty string is "%" alone, so every
 * field is a non-empty token. */
static size_t pct_encode(char *p, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (!*s) {
        p[o++] = '%';
        return o;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (plain(c)) {
            p[o++] = (char)c;
        } else {
            p[o++] = '%';
            p[o++] = hex[c >> 4];
            p[o++] = hex[c & 15];
        }
    }
    return o;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decodes the token t[0..n) into out (cut to cap - 1, never a NUL inside); -1 if malformed. */
static int pct_decode(const char *t, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (n == 1 && t[0] == '%') {
        out[0] = '\0';
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int h = hexval(t[i + 1]), l = hexval(t[i + 2]);
            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return -1;
            c = (char)(h * 16 + l);
            i += 2;
        } else if (!plain((unsigned char)c)) {
            return -1;
        }
        if (o + 1 < cap)
            out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

int etcd_state_encode(const etcd_state_t *s, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (s->phase < ETCD_PHASE_OPEN || s->phase > ETCD_PHASE_OVER || s->n_members < 0 ||
        s->n_members > ETCD_STATE_MAX_MEMBERS)
        return -EINVAL;
    size_t cap = 1024 + 3 * RDZV_LINE_MAX + 2 * RDZV_NAME_MAX +
                 2 * RDZV_MAX_BAD_NODES * (RDZV_NAME_MAX + 48) +
                 (size_t)s->n_members * (MEMBER_LINE_MAX + 4);
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    kvbuf_t b;
    kv_init(&b, buf, cap);
    kv_add_int(&b, "round", s->round);
    kv_add(&b, "phase", phases[s->phase], 0);
    kv_add_int(&b, "restarts", s->restarts);
    if (s->phase == ETCD_PHASE_RUNNING) {
        kv_add_int(&b, "nnodes", s->nnodes);
        kv_add_int(&b, "world", s->world_size);
        kv_add(&b, "store_host", s->store_host, RDZV_NAME_MAX - 1);
        kv_add_int(&b, "store_port", s->store_port);
    }
    if (s->phase == ETCD_PHASE_OVER) {
        kv_add(&b, "over_kind", s->over_kind, sizeof s->over_kind - 1);
        kv_add(&b, "over_text", s->over_text, RDZV_LINE_MAX - 1);
    }
    if (s->n_bad > 0)
        badnodes_put(&b, "bad", s->bad, s->n_bad);
    for (int i = 0; i < s->n_members && !b.overflow; i++) {
        const etcd_member_t *m = &s->members[i];
        char *p = b.buf + b.len;
        int n = snprintf(p, b.cap - b.len, "m=%.16s %d %d %d %d %d %d ", m->id, m->node_rank,
                         m->rank_base, m->join_k, m->d.nproc, m->d.want_rank, m->d.pid);
        if (n < 0 || (size_t)n + 3 * FIELD_MAX + 4 >= b.cap - b.len) {
            b.overflow = 1;
            break;
        }
        p += n;
        p += pct_encode(p, m->d.name);
        *p++ = ' ';
        p += pct_encode(p, m->d.addr);
        *p++ = ' ';
        p += pct_encode(p, m->d.host);
        *p++ = '\n';
        *p = '\0';
        b.len = (size_t)(p - b.buf);
    }
    if (b.overflow) {
        free(buf);
        return -EINVAL;
    }
    *out = buf;
    *len = b.len;
    return 0;
}

/* The next blank-separated token of line[*pos..n). */
static int token(const char *line, size_t n, size_t *pos, const char **t, size_t *tl)
{
    size_t i = *pos;
    while (i < n && line[i] == ' ')
        i++;
    size_t s = i;
    while (i < n && line[i] != ' ')
        i++;
    if (i == s)
        return -1;
    *t = line + s;
    *tl = i - s;
    *pos = i;
    return 0;
}

static int token_int(const char *line, size_t n, size_t *pos, long min, long max, int *out)
{
    const char *t;
    size_t tl;
    char num[16];
    long v;
    if (token(line, n, pos, &t, &tl) || tl >= sizeof num)
        return -1;
    memcpy(num, t, tl);
    num[tl] = '\0';
    if (podrun_parse_int(num, min, max, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* One "m=" line (without "m=") into m. */
static int member_decode(const char *line, size_t n, etcd_member_t *m)
{
    size_t pos = 0;
    const char *t;
    size_t tl;
    memset(m, 0, sizeof *m);
    if (token(line, n, &pos, &t, &tl) || tl != 16)
        return -1;
    for (size_t i = 0; i < 16; i++)
        if (hexval(t[i]) < 0)
            return -1;
    memcpy(m->id, t, 16);
    if (token_int(line, n, &pos, 0, 1 << 20, &m->node_rank) ||
        token_int(line, n, &pos, 0, 1 << 30, &m->rank_base) ||
        token_int(line, n, &pos, 0, 1 << 30, &m->join_k) ||
        token_int(line, n, &pos, 0, 1 << 20, &m->d.nproc) ||
        token_int(line, n, &pos, -1, 1 << 20, &m->d.want_rank) ||
        token_int(line, n, &pos, 0, 1 << 30, &m->d.pid))
        return -1;
    char *fields[] = {m->d.name, m->d.addr, m->d.host};
    for (int f = 0; f < 3; f++)
        if (token(line, n, &pos, &t, &tl) || pct_decode(t, tl, fields[f], RDZV_NAME_MAX))
            return -1;
    return token(line, n, &pos, &t, &tl) == 0 ? -1 : 0; /* nothing after the last field */
}

int etcd_state_decode(const char *text, size_t len, etcd_state_t *s)
{
    memset(s, 0, sizeof *s);
    char ph[16];
    if (kv_get(text, len, "phase", ph, sizeof ph) < 0)
        return -EINVAL;
    for (int i = ETCD_PHASE_OPEN; i <= ETCD_PHASE_OVER; i++)
        if (strcmp(ph, phases[i]) == 0)
            s->phase = i;
    long long round = kv_get_int(text, len, "round", -1);
    long long restarts = kv_get_int(text, len, "restarts", -1);
    if (!s->phase || round < 0 || round > (1 << 30) || restarts < 0 || restarts > (1 << 30))
        return -EINVAL;
    s->round = (int)round;
    s->restarts = (int)restarts;
    long long v = kv_get_int(text, len, "nnodes", 0);
    s->nnodes = v >= 0 && v <= (1 << 20) ? (int)v : 0;
    v = kv_get_int(text, len, "world", 0);
    s->world_size = v >= 0 && v <= (1 << 30) ? (int)v : 0;
    v = kv_get_int(text, len, "store_port", 0);
    s->store_port = v >= 0 && v <= 65535 ? (int)v : 0;
    kv_get(text, len, "store_host", s->store_host, sizeof s->store_host);
    kv_get(text, len, "over_kind", s->over_kind, sizeof s->over_kind);
    kv_get(text, len, "over_text", s->over_text, sizeof s->over_text);
    s->n_bad = badnodes_take(text, len, "bad", s->bad, RDZV_MAX_BAD_NODES);

    int cap = 0;
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + 1;
        if (ll < 2 || line[0] != 'm' || line[1] != '=')
            continue;
        if (s->n_members == ETCD_STATE_MAX_MEMBERS)
            return -EINVAL;
        if (s->n_members == cap) {
            int nc = cap ? 2 * cap : 16;
            etcd_member_t *nm = realloc(s->members, (size_t)nc * sizeof *nm);
            if (!nm)
                return -ENOMEM;
            s->members = nm;
            cap = nc;
        }
        if (member_decode(line + 2, ll - 2, &s->members[s->n_members]) < 0)
            return -EINVAL;
        s->n_members++;
    }
    return 0;
}

void etcd_state_free(etcd_state_t *s)
{
    free(s->members);
    s->members = NULL;
    s->n_members = 0;
}
