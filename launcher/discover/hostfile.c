/* launcher/discover/hostfile.c — hostfiles and this node's line (grammar, semantics and sources:
 * hostfile.h). */
#include "launcher/discover/hostfile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostlist.h"
#include "launcher/discover/resources.h"
#include "rdzv/base/common.h"

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

/* ---- naming hosts in a message ---- */

void hostfile_hosts_text(char *out, size_t cap, const void *host, size_t stride,
                         size_t count)
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

int hostfile_find_self(const struct hostfile *hf, const struct resources *active,
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
        hostfile_hosts_text(hosts, sizeof hosts, hf->count ? &hf->entries[0].host : NULL,
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
