/* rdzv/store/acl.c — source-address allow-lists (see acl.h). Pure: no I/O. */
#include "rdzv/store/acl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"

static void mask(acl_entry_t *e)
{
    size_t len = e->family == 4 ? 4 : 16;
    for (size_t i = 0; i < len; i++) {
        int keep = (int)e->bits - 8 * (int)i;
        if (keep <= 0)
            e->a[i] = 0;
        else if (keep < 8)
            e->a[i] &= (uint8_t)(0xff << (8 - keep));
    }
}

/* One "ADDR[/BITS]" of len bytes: 0 or -EINVAL. */
static int parse_entry(const char *s, size_t len, acl_entry_t *e)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        char *end;
        *slash = '\0';
        if (!slash[1] || slash[1] == '-' || slash[1] == '+')
            return -EINVAL;
        bits = strtol(slash + 1, &end, 10);
        if (*end)
            return -EINVAL;
    }
    memset(e, 0, sizeof *e);
    if (inet_pton(AF_INET, buf, e->a) == 1) {
        e->family = 4;
        if (bits > 32)
            return -EINVAL;
        e->bits = (uint8_t)(bits < 0 ? 32 : bits);
    } else if (inet_pton(AF_INET6, buf, e->a) == 1) {
        e->family = 6;
        if (bits > 128)
            return -EINVAL;
        e->bits = (uint8_t)(bits < 0 ? 128 : bits);
        /* ::ffff:a.b.c.d/N is the IPv4 block a.b.c.d/(N-96) */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(e->a, mapped, 12) == 0 && e->bits >= 96) {
            memmove(e->a, e->a + 12, 4);
            memset(e->a + 4, 0, 12);
            e->family = 4;
            e->bits = (uint8_t)(e->bits - 96);
        }
    } else {
        return -EINVAL;
    }
    mask(e);
    return 0;
}

static int push(acl_t *acl, const acl_entry_t *e)
{
    if (acl->n == acl->cap) {
        size_t nc = acl->cap ? acl->cap * 2 : 8;
        acl_entry_t *ne = realloc(acl->e, nc * sizeof *ne);
        if (!ne)
            return -ENOMEM;
        acl->e = ne;
        acl->cap = nc;
    }
    acl->e[acl->n++] = *e;
    return 0;
}

int acl_add(acl_t *acl, const char *entry)
{
    acl_entry_t e;
    int r = parse_entry(entry, strlen(entry), &e);
    return r ? r : push(acl, &e);
}

static int blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

int acl_add_list(acl_t *acl, const char *list, const char *what, int *job, char *err,
                 size_t elen)
{
    size_t n0 = acl->n;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *s = p;
        while (len && blank(*s))
            s++, len--;
        while (len && blank(s[len - 1]))
            len--;
        acl_entry_t e;
        if (job && len == 3 && memcmp(s, "job", 3) == 0) {
            *job = 1;
            if (!comma)
                return 0;
            p = comma + 1;
            continue;
        }
        if (parse_entry(s, len, &e) < 0) {
            acl->n = n0;
            sfmt(err, elen,
                 "%s: '%.*s' is not an address or a CIDR block; use e.g. 10.0.0.0/8,fd00::/8,"
                 "192.168.1.7%s",
                 what, (int)(len > 64 ? 64 : len), s, job ? " (job: the job's own pods)" : "");
            return -EINVAL;
        }
        if (push(acl, &e) < 0) {
            acl->n = n0;
            sfmt(err, elen, "%s: out of memory", what);
            return -ENOMEM;
        }
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

void acl_clear(acl_t *acl)
{
    acl->n = 0;
}

void acl_free(acl_t *acl)
{
    free(acl->e);
    acl->e = NULL;
    acl->n = acl->cap = 0;
}

/* The peer as an entry of full length (v4-mapped IPv6 as IPv4): 0, or -EINVAL. */
static int from_sockaddr(const struct sockaddr *sa, acl_entry_t *e)
{
    memset(e, 0, sizeof *e);
    if (sa->sa_family == AF_INET) {
        memcpy(e->a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        e->family = 4;
        e->bits = 32;
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            memcpy(e->a, a6->s6_addr + 12, 4);
            e->family = 4;
            e->bits = 32;
        } else {
            memcpy(e->a, a6->s6_addr, 16);
            e->family = 6;
            e->bits = 128;
        }
        return 0;
    }
    return -EINVAL;
}

int acl_allows(const acl_t *acl, const struct sockaddr *sa)
{
    acl_entry_t p;
    if (from_sockaddr(sa, &p) < 0)
        return 0;
    for (size_t i = 0; i < acl->n; i++) {
        acl_entry_t m = p;
        if (acl->e[i].family != p.family)
            continue;
        m.bits = acl->e[i].bits;
        mask(&m);
        if (memcmp(m.a, acl->e[i].a, 16) == 0)
            return 1;
    }
    return 0;
}

int acl_same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
    acl_entry_t x, y;
    return from_sockaddr(a, &x) == 0 && from_sockaddr(b, &y) == 0 && x.family == y.family &&
           memcmp(x.a, y.a, 16) == 0;
}
