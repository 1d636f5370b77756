/* launcher/discover/hostfile.c — hostfiles, DeepSpeed's resource selection, this node's line
 * (grammar, semantics and sources: hostfile.h). */
#include "launcher/discover/hostfile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostlist.h"
#include "rdzv/common.h"

#define QUOTE 80    /* a quoted piece of a line in a message */
#define QNAME 256   /* a quoted file name in a message */

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void quote_str(char *out, size_t cap, const char *s)
{
    hostlist_quote(out, cap, s ? s : "", s ? strlen(s) : 0);
}

/* Reads 1+ digits at p[0..n) as a count, saturating at HOSTFILE_SLOTS_MAX + 1 so that any long
 * number reads as "too large". Returns the digits read (0: none). */
static size_t read_count(const char *p, size_t n, int *v)
{
    size_t i = 0;
    *v = 0;
    for (; i < n && is_digit(p[i]); i++)
        if (*v <= HOSTFILE_SLOTS_MAX)
            *v = *v * 10 + (p[i] - '0');
    if (*v > HOSTFILE_SLOTS_MAX)
        *v = HOSTFILE_SLOTS_MAX + 1;
    return i;
}

/* ---- parsing ---- */

/* One line of text: p[0..n), its number. Lines end at "\n", "\r\n" or "\r". */
struct line {
    const char *p;
    size_t n;
    unsigned no;
};

static int next_line(const char *text, size_t len, size_t *pos, struct line *ln)
{
    size_t i = *pos;
    if (i >= len)
        return 0;
    while (i < len && text[i] != '\n' && text[i] != '\r')
        i++;
    ln->p = text + *pos;
    ln->n = i - *pos;
    ln->no++;
    if (i + 1 < len && text[i] == '\r' && text[i + 1] == '\n')
        i++;
    *pos = i < len ? i + 1 : i;
    return 1;
}

static void strip(const char **p, size_t *n)
{
    while (*n && is_ws(**p))
        (*p)++, (*n)--;
    while (*n && is_ws((*p)[*n - 1]))
        (*n)--;
}

/* What one line said. */
struct parsed {
    const char *host;
    size_t hlen;
    int slots, max_slots;
};

struct parser {
    const char *name; /* quoted file name */
    const struct line *ln;
    char *err;
    size_t errlen;
};

static int line_fail(const struct parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int line_fail(const struct parser *ps, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return podrun_failf(-EINVAL, ps->err, ps->errlen, "%s:%u: %s", ps->name, ps->ln->no, msg);
}

/* DeepSpeed: `^(\S+)\s+slots=(\d+)` on the stripped line, the rest ignored. */
static int parse_deepspeed(const struct parser *ps, const char *p, size_t n, struct parsed *e)
{
    size_t h = 0, s;
    while (h < n && !is_ws(p[h]))
        h++;
    for (s = h; s < n && is_ws(p[s]); s++)
        ;
    if (s == h || n - s < 7 || memcmp(p + s, "slots=", 6) != 0 || !is_digit(p[s + 6])) {
        char q[QUOTE];
        hostlist_quote(q, sizeof q, p, n);
        return line_fail(ps,
                         "Hostfile contains a bad entry: %s, unable to proceed with launching "
                         "(a line is \"HOSTNAME slots=N\")",
                         q);
    }
    e->host = p;
    e->hlen = h;
    const char *d = p + s + 6;
    size_t dn = read_count(d, n - s - 6, &e->slots);
    if (e->slots > HOSTFILE_SLOTS_MAX) {
        char qd[QUOTE], qh[QUOTE];
        hostlist_quote(qd, sizeof qd, d, dn);
        hostlist_quote(qh, sizeof qh, p, h);
        return line_fail(ps, "slots=%s for host %s is more than %d; slots are one host's GPUs",
                         qd, qh, HOSTFILE_SLOTS_MAX);
    }
    return 0;
}

/* The settings an OpenMPI hostfile line may carry after its host. */
enum key_kind { KEY_SLOTS, KEY_MAX_SLOTS, KEY_IGNORED };
static const struct {
    const char *name;
    enum key_kind kind;
} hostfile_keys[] = {
    {"slots", KEY_SLOTS},          {"cpu", KEY_SLOTS},
    {"count", KEY_SLOTS},          {"max_slots", KEY_MAX_SLOTS},
    {"max-slots", KEY_MAX_SLOTS},  {"slots_max", KEY_MAX_SLOTS},
    {"slots-max", KEY_MAX_SLOTS},  {"max_cpu", KEY_MAX_SLOTS},
    {"max-cpu", KEY_MAX_SLOTS},    {"cpu_max", KEY_MAX_SLOTS},
    {"cpu-max", KEY_MAX_SLOTS},    {"max_count", KEY_MAX_SLOTS},
    {"max-count", KEY_MAX_SLOTS},  {"count_max", KEY_MAX_SLOTS},
    {"count-max", KEY_MAX_SLOTS},  {"username", KEY_IGNORED},
    {"user-name", KEY_IGNORED},    {"user_name", KEY_IGNORED},
    {"boards", KEY_IGNORED},       {"sockets", KEY_IGNORED},
    {"sockets_per_board", KEY_IGNORED}, {"sockets-per-board", KEY_IGNORED},
    {"cores", KEY_IGNORED},        {"cores_per_socket", KEY_IGNORED},
    {"cores-per-socket", KEY_IGNORED}, {"cpu_set", KEY_IGNORED},
    {"cpu-set", KEY_IGNORED},      {"rank", KEY_IGNORED},
    {"slot", KEY_IGNORED},
};

#define ANY_GRAMMAR "a line is HOST, HOST slots=N [max_slots=N] or HOST:N"

static int find_key(const char *k, size_t n)
{
    for (size_t i = 0; i < sizeof hostfile_keys / sizeof hostfile_keys[0]; i++)
        if (strlen(hostfile_keys[i].name) == n && memcmp(hostfile_keys[i].name, k, n) == 0)
            return (int)i;
    return -1;
}

/* One KEY=VALUE after the host. */
static int parse_setting(const struct parser *ps, const char *t, size_t n, struct parsed *e)
{
    char q[QUOTE], qh[QUOTE];
    const char *eq = memchr(t, '=', n);
    int k = eq ? find_key(t, (size_t)(eq - t)) : -1;
    hostlist_quote(q, sizeof q, t, n);
    hostlist_quote(qh, sizeof qh, e->host, e->hlen);
    if (!eq)
        return line_fail(ps, "\"%s\" after host %s is not KEY=VALUE; " ANY_GRAMMAR, q, qh);
    if (k < 0)
        return line_fail(ps, "\"%s\" is not a hostfile setting; " ANY_GRAMMAR, q);
    const char *v = eq + 1;
    size_t vn = n - (size_t)(v - t);
    if (vn == 0)
        return line_fail(ps, "\"%s\" has no value; " ANY_GRAMMAR, q);
    if (hostfile_keys[k].kind == KEY_IGNORED)
        return 0;
    int num;
    if (read_count(v, vn, &num) != vn)
        return line_fail(ps, "\"%s\" for host %s is not a number", q, qh);
    if (num > HOSTFILE_SLOTS_MAX)
        return line_fail(ps, "\"%s\" for host %s is more than %d; slots are one host's GPUs", q,
                         qh, HOSTFILE_SLOTS_MAX);
    int *dst = hostfile_keys[k].kind == KEY_SLOTS ? &e->slots : &e->max_slots;
    if (*dst != HOSTFILE_SLOTS_UNSET)
        return line_fail(ps, "host %s has its %s given twice; give it once", qh,
                         hostfile_keys[k].kind == KEY_SLOTS ? "slots" : "max_slots");
    *dst = num;
    return 0;
}

/* The host token: HOST, or hydra's HOST:N. An IPv6 address has ':' before its last ':' and is
 * a host as a whole. */
static int parse_host(const struct parser *ps, const char *t, size_t n, struct parsed *e)
{
    char q[QUOTE];
    hostlist_quote(q, sizeof q, t, n);
    e->host = t;
    e->hlen = n;
    const char *colon = memrchr(t, ':', n);
    if (colon && !memchr(t, ':', (size_t)(colon - t))) {
        size_t dn = n - (size_t)(colon - t) - 1;
        int num;
        if (read_count(colon + 1, dn, &num) != dn || dn == 0)
            return line_fail(ps, "\"%s\": the count after ':' is not a number; " ANY_GRAMMAR, q);
        if (num > HOSTFILE_SLOTS_MAX)
            return line_fail(ps, "\"%s\" is more than %d slots; slots are one host's GPUs", q,
                             HOSTFILE_SLOTS_MAX);
        e->hlen = (size_t)(colon - t);
        e->slots = num;
    }
    if (e->hlen == 0)
        return line_fail(ps, "\"%s\" has no host name; " ANY_GRAMMAR, q);
    return 0;
}

/* HOSTFILE_ANY: '#' to the end of the line is a comment; spaces around '=' are dropped; then
 * HOST followed by KEY=VALUE tokens. Returns 1 for a line with a host, 0 for none, or an error. */
static int parse_any(const struct parser *ps, const char *p, size_t n, struct parsed *e)
{
    const char *hash = memchr(p, '#', n);
    if (hash)
        n = (size_t)(hash - p);
    strip(&p, &n);
    if (n == 0)
        return 0;
    /* the tokens are read from a copy without the spaces around '=' */
    char buf[HOSTFILE_LINE_MAX + 1];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_ws(p[i])) {
            size_t j = i;
            while (j < n && is_ws(p[j]))
                j++;
            if ((m && buf[m - 1] == '=') || (j < n && p[j] == '=')) {
                i = j - 1;
                continue;
            }
        }
        buf[m++] = p[i];
    }
    size_t t0 = 0;
    while (t0 < m && !is_ws(buf[t0]))
        t0++;
    if (memchr(buf, '=', t0)) {
        char q[QUOTE];
        hostlist_quote(q, sizeof q, buf, t0);
        return line_fail(ps, "\"%s\" has no host name in front; " ANY_GRAMMAR, q);
    }
    /* without '=' nothing was dropped inside the first token: it is p[0..t0), which the entry
     * may point into (buf does not outlive this call) */
    int rc = parse_host(ps, p, t0, e);
    if (rc)
        return rc;
    for (size_t i = t0; i < m;) {
        while (i < m && is_ws(buf[i]))
            i++;
        size_t j = i;
        while (j < m && !is_ws(buf[j]))
            j++;
        if (j > i && (rc = parse_setting(ps, buf + i, j - i, e)) != 0)
            return rc;
        i = j;
    }
    if (e->max_slots != HOSTFILE_SLOTS_UNSET && e->slots != HOSTFILE_SLOTS_UNSET &&
        e->max_slots < e->slots) {
        char qh[QUOTE];
        hostlist_quote(qh, sizeof qh, e->host, e->hlen);
        return line_fail(ps, "host %s has max_slots=%d below slots=%d; raise max_slots", qh,
                         e->max_slots, e->slots);
    }
    return 1;
}

/* Checks what every line must be (no NUL or control byte, not too long), then parses it with
 * the dialect. Returns 1 (a host), 0 (blank or comment) or a negative error. */
static int parse_line(const struct parser *ps, enum hostfile_dialect d, struct parsed *e)
{
    const char *p = ps->ln->p;
    size_t n = ps->ln->n;
    *e = (struct parsed){"", 0, HOSTFILE_SLOTS_UNSET, HOSTFILE_SLOTS_UNSET};
    if (n > HOSTFILE_LINE_MAX)
        return line_fail(ps, "line is longer than %d bytes; a line names one host",
                         HOSTFILE_LINE_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 && !is_ws((char)c)) || c == 0x7f)
            return line_fail(ps, "control byte 0x%02x; a hostfile is plain text", c);
    }
    strip(&p, &n);
    int rc;
    if (d == HOSTFILE_DEEPSPEED) {
        if (n == 0 || p[0] == '#')
            return 0;
        rc = parse_deepspeed(ps, p, n, e);
        if (rc)
            return rc;
    } else if ((rc = parse_any(ps, p, n, e)) <= 0) {
        return rc;
    }
    if (e->hlen > HOSTFILE_NAME_MAX) {
        char qh[QUOTE];
        hostlist_quote(qh, sizeof qh, e->host, e->hlen);
        return line_fail(ps, "host name %s is longer than %d bytes", qh, HOSTFILE_NAME_MAX);
    }
    return 1;
}

static int cmp_entry_ptr(const void *a, const void *b)
{
    const struct hostfile_entry *x = *(const struct hostfile_entry *const *)a;
    const struct hostfile_entry *y = *(const struct hostfile_entry *const *)b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Finds the repeated host whose second line comes first (the one a line-by-line reader meets
 * first): *second gets that line and *first the host's first line; *second stays NULL without a
 * repeat. O(n log n), so a long file costs no quadratic time. Returns 0 or -ENOMEM. */
static int first_repeat(const struct hostfile *hf, const struct hostfile_entry **first,
                        const struct hostfile_entry **second)
{
    const struct hostfile_entry **v = malloc(hf->count * sizeof *v + 1);
    *second = NULL;
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < hf->count; i++)
        v[i] = &hf->entries[i];
    qsort(v, hf->count, sizeof *v, cmp_entry_ptr);
    /* v[i] is the second line of its host when it equals v[i-1] but not v[i-2] */
    for (size_t i = 1; i < hf->count; i++)
        if (strcmp(v[i]->host, v[i - 1]->host) == 0 &&
            (i < 2 || strcmp(v[i - 2]->host, v[i]->host) != 0) &&
            (!*second || v[i]->line < (*second)->line)) {
            *second = v[i];
            *first = v[i - 1];
        }
    free(v);
    return 0;
}

static int repeat_fail(enum hostfile_dialect d, const char *qname, const struct hostfile_entry *a,
                       const struct hostfile_entry *b, char *err, size_t errlen)
{
    char qh[QUOTE];
    quote_str(qh, sizeof qh, b->host);
    if (d == HOSTFILE_DEEPSPEED)
        return podrun_failf(-EINVAL, err, errlen,
                    "%s:%u: Hostfile contains multiple entries for %s, unable to proceed with "
                    "launching (line %u has it too; list each host once)",
                    qname, b->line, qh, a->line);
    return podrun_failf(-EINVAL, err, errlen,
                "%s:%u: host %s is listed twice (lines %u and %u); list each host once", qname,
                b->line, qh, a->line, b->line);
}

int hostfile_parse(struct hostfile *hf, const char *text, size_t len,
                   enum hostfile_dialect dialect, const char *name, char *err, size_t errlen)
{
    char qname[QNAME];
    size_t pos = 0, cap = 0, used = 0;
    struct line ln = {NULL, 0, 0};
    struct parser ps = {qname, &ln, err, errlen};
    int rc = 0;
    memset(hf, 0, sizeof *hf);
    quote_str(qname, sizeof qname, name ? name : "hostfile");
    hf->name = strdup(name ? name : "hostfile");
    hf->store = malloc(len + 1);
    if (!hf->name || !hf->store)
        return podrun_failf(-ENOMEM, err, errlen, "%s: out of memory", qname);
    /* every line stops at the first error; repeats among the lines before it come first */
    while (next_line(text, len, &pos, &ln)) {
        struct parsed e;
        rc = parse_line(&ps, dialect, &e);
        if (rc == 0)
            continue;
        if (rc < 0)
            break;
        rc = 0;
        if (hf->count == HOSTFILE_HOSTS_MAX) {
            rc = podrun_failf(-E2BIG, err, errlen,
                      "%s:%u: more than %d hosts; split the job", qname,
                      ln.no, HOSTFILE_HOSTS_MAX);
            break;
        }
        if (hf->count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct hostfile_entry *ne = realloc(hf->entries, ncap * sizeof *ne);
            if (!ne) {
                rc = podrun_failf(-ENOMEM, err, errlen, "%s: out of memory", qname);
                break;
            }
            hf->entries = ne;
            cap = ncap;
        }
        /* a name and its NUL never take more than its line and line break: store fits len+1 */
        char *h = hf->store + used;
        memcpy(h, e.host, e.hlen);
        h[e.hlen] = '\0';
        used += e.hlen + 1;
        hf->entries[hf->count++] = (struct hostfile_entry){h, e.slots, e.max_slots, ln.no};
    }
    const struct hostfile_entry *a = NULL, *b = NULL;
    if (hf->count > 1 && first_repeat(hf, &a, &b) < 0)
        return podrun_failf(-ENOMEM, err, errlen, "%s: out of memory", qname);
    if (b)
        return repeat_fail(dialect, qname, a, b, err, errlen);
    if (rc)
        return rc;
    if (hf->count == 0) {
        if (dialect == HOSTFILE_DEEPSPEED)
            return podrun_failf(-EINVAL, err, errlen,
                        "%s: Hostfile is empty or not formatted correctly, unable to proceed "
                        "with launching. (add one \"HOSTNAME slots=N\" line per host)",
                        qname);
        return podrun_failf(-EINVAL, err, errlen,
                    "%s: no host in it (only blank lines and comments); list one host per line",
                    qname);
    }
    return 0;
}

void hostfile_free(struct hostfile *hf)
{
    free(hf->name);
    free(hf->entries);
    free(hf->store);
    memset(hf, 0, sizeof *hf);
}

/* ---- resources ---- */

/* Writes "a, b, c" naming count hosts, cut with "... (N in all)" to fit cap. The names are
 * the `host` fields of an array of entries or nodes: host points at the first one and stride
 * is the size of an element. */
static void hosts_text(char *out, size_t cap, const void *host, size_t stride, size_t count)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        char q[QUOTE];
        quote_str(q, sizeof q, *(const char *const *)((const char *)host + i * stride));
        if (o + strlen(q) + 2 + 24 > cap) {
            snprintf(out + o, cap - o, "%s... (%zu in all)", i ? ", " : "", count);
            return;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", q);
    }
}

static void pool_text(char *out, size_t cap, const struct hostfile_resources *r)
{
    hosts_text(out, cap, r->count ? &r->nodes[0].host : NULL, sizeof r->nodes[0], r->count);
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
static int node_push(struct hostfile_resources *r, const char *host, unsigned line,
                     const int *slots, size_t n)
{
    if (r->count >= HOSTFILE_HOSTS_MAX)
        return -E2BIG;
    if (r->count == 0 || (r->count & (r->count - 1)) == 0) {
        size_t cap = r->count < 16 ? 16 : r->count * 2;
        struct hostfile_node *nn = realloc(r->nodes, cap * sizeof *nn);
        if (!nn)
            return -ENOMEM;
        r->nodes = nn;
    }
    struct hostfile_node *d = &r->nodes[r->count];
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

static int set_source(struct hostfile_resources *r, const char *source)
{
    if (r->source)
        return 0;
    r->source = strdup(source ? source : "hostfile");
    return r->source ? 0 : -ENOMEM;
}

int hostfile_resources_from(struct hostfile_resources *r, const struct hostfile *hf,
                            int default_slots, char *err, size_t errlen)
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

int hostfile_resources_add(struct hostfile_resources *r, const char *source, const char *host,
                           unsigned line, const int *slots, size_t nslots, char *err,
                           size_t errlen)
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

void hostfile_resources_free(struct hostfile_resources *r)
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
    const struct hostfile_resources *pool;
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
    const struct hostfile_node *n = ((const struct hostfile_resources *)pool)->nodes;
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
        while (i < len && is_digit(p[i]) && i < 9)
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
        const struct hostfile_node *node = &s->pool->nodes[s->seq[k]];
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
static size_t spec_keep(const struct hostfile_node *node, const struct mention *m, int include,
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

static int select_list(struct hostfile_resources *out, const struct hostfile_resources *pool,
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

int hostfile_select(struct hostfile_resources *out, const struct hostfile_resources *pool,
                    const struct hostfile_select *sel, char *err, size_t errlen)
{
    static const struct hostfile_select none = {NULL, NULL, -1, -1};
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
            const struct hostfile_node *node = &pool->nodes[i];
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

/* ---- this node's line ---- */

/* An address in text, as 4 or 16 bytes: "10.0.0.5", "fe80::1", "[fe80::1]", "fe80::1%eth0".
 * Returns the length (4 or 16), or 0 if it is not an address. */
static int addr_parse(const char *s, size_t n, unsigned char out[16])
{
    char buf[64];
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']')
        s++, n -= 2;
    const char *zone = memchr(s, '%', n);
    if (zone)
        n = (size_t)(zone - s);
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, out) == 1)
        return 4;
    if (inet_pton(AF_INET6, buf, out) == 1)
        return 16;
    return 0;
}

static int ci_eq(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn)
        return 0;
    for (size_t i = 0; i < an; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (char)(y - 'A' + 'a');
        if (x != y)
            return 0;
    }
    return 1;
}

/* DNS names: equal ignoring case and one trailing dot; or one has no dot and is the other's
 * first label. */
static int name_eq(const char *a, size_t an, const char *b)
{
    size_t bn = b ? strlen(b) : 0;
    if (an && a[an - 1] == '.')
        an--;
    if (bn && b[bn - 1] == '.')
        bn--;
    if (!an || !bn)
        return 0;
    const char *ad = memchr(a, '.', an), *bd = memchr(b, '.', bn);
    if (ci_eq(a, an, b, bn))
        return 1;
    if (!ad && bd)
        return ci_eq(a, an, b, (size_t)(bd - b));
    if (ad && !bd)
        return ci_eq(a, (size_t)(ad - a), b, bn);
    return 0;
}

/* Does hostfile host h name this machine? */
static int names_self(const char *h, const struct hostfile_self *me)
{
    const char *at = strrchr(h, '@');
    unsigned char a[16], b[16];
    if (at)
        h = at + 1;
    size_t n = strlen(h);
    int alen = addr_parse(h, n, a);
    if (alen) {
        for (size_t i = 0; i < me->naddrs; i++)
            if (me->addrs[i] && addr_parse(me->addrs[i], strlen(me->addrs[i]), b) == alen &&
                memcmp(a, b, (size_t)alen) == 0)
                return 1;
        return 0;
    }
    return name_eq(h, n, me->hostname) || name_eq(h, n, me->fqdn);
}

int hostfile_names_self(const char *host, const struct hostfile_self *me)
{
    return names_self(host, me);
}

/* "w-3, w-3.job.ns.svc, 10.0.0.5": this machine's names for a message. */
static void self_text(char *out, size_t cap, const struct hostfile_self *me)
{
    const char *v[3] = {me->hostname, me->fqdn, NULL};
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < 2 + me->naddrs; i++) {
        const char *s = i < 2 ? v[i] : me->addrs[i - 2];
        char q[QUOTE];
        if (!s || !*s || (i == 1 && me->hostname && strcmp(s, me->hostname) == 0))
            continue;
        quote_str(q, sizeof q, s);
        if (o + strlen(q) + 8 > cap) {
            snprintf(out + o, cap - o, ", ...");
            return;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", q);
    }
    if (!o)
        snprintf(out, cap, "no names");
}

int hostfile_find_self(const struct hostfile *hf, const struct hostfile_resources *active,
                       const struct hostfile_self *self, size_t *entry, size_t *node_rank,
                       char *err, size_t errlen)
{
    char me[256], qname[QNAME];
    size_t hit[2], nhit = 0;
    self_text(me, sizeof me, self);
    quote_str(qname, sizeof qname, hf->name);
    for (size_t i = 0; i < hf->count && nhit < 2; i++)
        if (names_self(hf->entries[i].host, self))
            hit[nhit++] = i;
    if (nhit == 0) {
        char hosts[512];
        hosts_text(hosts, sizeof hosts, hf->count ? &hf->entries[0].host : NULL,
                   sizeof hf->entries[0], hf->count);
        return podrun_failf(-ENOENT, err, errlen,
                    "this pod (%s) is not in hostfile %s (hosts: %s); add its name or address "
                    "to the file",
                    me, qname, hosts);
    }
    const struct hostfile_entry *e = &hf->entries[hit[0]];
    char qh[QUOTE];
    quote_str(qh, sizeof qh, e->host);
    if (nhit == 2) {
        char qh2[QUOTE];
        quote_str(qh2, sizeof qh2, hf->entries[hit[1]].host);
        return podrun_failf(-EEXIST, err, errlen,
                    "this pod (%s) is named by two lines of hostfile %s: line %u (%s) and line "
                    "%u (%s); keep one line per pod",
                    me, qname, e->line, qh, hf->entries[hit[1]].line, qh2);
    }
    *entry = hit[0];
    if (!active) {
        *node_rank = hit[0];
        return 0;
    }
    for (size_t i = 0; i < active->count; i++)
        if (active->nodes[i].line == e->line) {
            *node_rank = i;
            return 0;
        }
    return podrun_failf(-ESRCH, err, errlen,
                "this pod is line %u (%s) of hostfile %s, which the resource selection leaves "
                "out; select it, or do not start podrun in this pod",
                e->line, qh, qname);
}
