/* launcher/discover/hostlist.c — SLURM-style host lists (grammar and choices: hostlist.h).
 *
 * Expansion works in two passes over each item. The first validates it and computes, without
 * producing anything, how many names it gives and how long the longest is; only when the whole
 * list is known to fit the bounds is one block allocated and the second pass writes the names.
 * A list like "n[0-999999999999]" or "a[1-99999]b[1-99999]" is therefore refused in O(length)
 * time and no memory. */
#include "launcher/discover/hostlist.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"
#include "rdzv/base/text.h"

typedef unsigned long long u64;

/* One piece of an item: literal text, or the inside of one bracket group. */
struct seg {
    const char *p;
    size_t n;
    int group;
};

/* One item once validated: its pieces, how many names it gives, its longest name. */
struct item {
    const char *p;
    size_t n;
    struct seg seg[HOSTLIST_NAME_MAX + 1];
    size_t nseg;
    u64 count;
    size_t maxlen;
};

struct range {
    u64 lo, hi;
    int width; /* digits written for lo: the zero padding every name of the range gets */
};

static int is_sep(int c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

void hostlist_quote(char *out, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int esc = c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
        size_t need = esc ? 4 : 1;
        if (o + need + 4 > cap) {
            if (o + 4 <= cap) {
                memcpy(out + o, "...", 3);
                o += 3;
            }
            break;
        }
        if (esc) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

/* Digits in v written without padding (0 has one). */
static int ndigits(u64 v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Reads DIGITS at p[0..n): 1..HOSTLIST_DIGITS_MAX digits and nothing else. Returns 0, -EINVAL
 * (empty or not a digit) or -ERANGE (too many digits). */
static int read_num(const char *p, size_t n, u64 *v)
{
    if (n == 0)
        return -EINVAL;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i]))
            return -EINVAL;
        *v = *v * 10 + (u64)(p[i] - '0');
    }
    return n > HOSTLIST_DIGITS_MAX ? -ERANGE : 0;
}

/* Parses one range "N" or "LOW-HIGH" at p[0..n). Returns 0, -EINVAL, -ERANGE or -EDOM (LOW >
 * HIGH). Both bounds fit 18 digits, so hi + 1 never overflows. */
static int read_range(const char *p, size_t n, struct range *r)
{
    const char *dash = memchr(p, '-', n);
    size_t nlo = dash ? (size_t)(dash - p) : n;
    int rc = read_num(p, nlo, &r->lo);
    if (rc)
        return rc;
    r->width = (int)nlo;
    r->hi = r->lo;
    if (dash && (rc = read_num(dash + 1, n - nlo - 1, &r->hi)) != 0)
        return rc;
    return r->lo > r->hi ? -EDOM : 0;
}

/* Where the range starting at p ends inside a group text p..end (at ',' or end). */
static const char *range_end(const char *p, const char *end)
{
    const char *c = memchr(p, ',', (size_t)(end - p));
    return c ? c : end;
}

/* Validates one bracket group's inside; adds up its names (stopping early past `limit`) and the
 * widest number it writes. Errors name the range and the item. */
static int check_group(const struct item *it, const struct seg *s, u64 limit, u64 *count,
                       size_t *width, const char *what, char *err, size_t errlen)
{
    char qi[80], qr[80];
    const char *end = s->p + s->n;
    *count = 0;
    *width = 0;
    hostlist_quote(qi, sizeof qi, it->p, it->n);
    if (s->n == 0)
        return podrun_failf(-EINVAL, err, errlen,
                    "%s: empty brackets in \"%s\"; put numbers in them, e.g. node[1-4]", what, qi);
    for (const char *p = s->p; p <= end;) {
        const char *e = range_end(p, end);
        struct range r;
        int rc = read_range(p, (size_t)(e - p), &r);
        hostlist_quote(qr, sizeof qr, p, (size_t)(e - p));
        if (rc == -EDOM)
            return podrun_failf(-EINVAL, err, errlen,
                        "%s: range \"%s\" in \"%s\" runs backwards; write it LOW-HIGH", what, qr,
                        qi);
        if (rc == -ERANGE)
            return podrun_failf(-ERANGE, err, errlen,
                        "%s: number in \"%s\" of \"%s\" has more than %d digits; host numbers are "
                        "shorter",
                        what, qr, qi, HOSTLIST_DIGITS_MAX);
        if (rc)
            return podrun_failf(-EINVAL, err, errlen,
                        "%s: bad range \"%s\" in \"%s\"; a range is N or LOW-HIGH in digits, "
                        "ranges joined by ',' as in node[01-04,07]",
                        what, qr, qi);
        *count += r.hi - r.lo + 1;
        if (*count > limit)
            return podrun_failf(-E2BIG, err, errlen,
                        "%s: \"%s\" names more than %llu hosts; list fewer", what, qi, limit);
        size_t w = (size_t)ndigits(r.hi);
        if ((size_t)r.width > w)
            w = (size_t)r.width;
        if (w > *width)
            *width = w;
        p = e + 1;
    }
    return 0;
}

/* Splits item text into pieces and checks it: brackets balanced and not nested, no stray ']',
 * no control byte, every group valid, at most `limit` names, no name over HOSTLIST_NAME_MAX. */
static int check_item(struct item *it, u64 limit, const char *what, char *err, size_t errlen)
{
    char qi[80];
    const char *p = it->p, *end = it->p + it->n;
    hostlist_quote(qi, sizeof qi, it->p, it->n);
    it->nseg = 0;
    it->count = 1;
    it->maxlen = 0;
    while (p < end) {
        struct seg *s = &it->seg[it->nseg];
        size_t width;
        if (*p == '[') {
            const char *close = memchr(p + 1, ']', (size_t)(end - p - 1));
            const char *open = memchr(p + 1, '[', (size_t)(end - p - 1));
            if (!close)
                return podrun_failf(-EINVAL, err, errlen,
                            "%s: '[' without ']' in \"%s\"; close the range, e.g. node[1-4]",
                            what, qi);
            if (open && open < close)
                return podrun_failf(-EINVAL, err, errlen,
                            "%s: '[' inside brackets in \"%s\"; brackets do not nest", what, qi);
            *s = (struct seg){p + 1, (size_t)(close - p - 1), 1};
            u64 n;
            int rc = check_group(it, s, limit, &n, &width, what, err, errlen);
            if (rc)
                return rc;
            /* both factors are <= limit <= HOSTLIST_NAMES_MAX: the product cannot overflow */
            it->count *= n;
            if (it->count > limit)
                return podrun_failf(-E2BIG, err, errlen,
                            "%s: \"%s\" names more than %llu hosts; list fewer", what, qi, limit);
            p = close + 1;
        } else {
            const char *q = p;
            while (q < end && *q != '[') {
                if (*q == ']')
                    return podrun_failf(-EINVAL, err, errlen,
                                "%s: ']' without '[' in \"%s\"; a range is written name[1-4]",
                                what, qi);
                if (is_ctl((unsigned char)*q))
                    return podrun_failf(-EINVAL, err, errlen,
                                "%s: control byte 0x%02x in \"%s\"; host names are plain text",
                                what, (unsigned char)*q, qi);
                q++;
            }
            *s = (struct seg){p, (size_t)(q - p), 0};
            width = s->n;
            p = q;
        }
        it->maxlen += width;
        it->nseg++;
        /* every piece adds at least one byte, so this bound also bounds nseg */
        if (it->maxlen > HOSTLIST_NAME_MAX)
            return podrun_failf(-ENAMETOOLONG, err, errlen,
                        "%s: \"%s\" gives names longer than %d bytes; host names are shorter",
                        what, qi, HOSTLIST_NAME_MAX);
    }
    return 0;
}

/* Finds the next item at or after *pos: separators outside brackets end it. Returns 0 at the
 * end of the text. A '[' whose ']' never comes takes the rest of the text, for check_item to
 * report. */
static int next_item(const char *text, size_t *pos, struct item *it)
{
    size_t i = *pos;
    while (text[i] && is_sep((unsigned char)text[i]))
        i++;
    if (!text[i])
        return 0;
    size_t start = i;
    int depth = 0;
    for (; text[i]; i++) {
        if (text[i] == '[')
            depth = 1;
        else if (text[i] == ']')
            depth = 0;
        else if (!depth && is_sep((unsigned char)text[i]))
            break;
    }
    it->p = text + start;
    it->n = i - start;
    *pos = i;
    return 1;
}

struct emitter {
    char **names;
    char *block;
    size_t count, used;
};

/* Writes every name of `it` whose first `len` bytes are already in buf, pieces i.. varying the
 * rightmost group fastest. Recursion depth is at most nseg (<= HOSTLIST_NAME_MAX). */
static void emit(struct emitter *em, const struct item *it, size_t i, char *buf, size_t len)
{
    if (i == it->nseg) {
        char *dst = em->block + em->used;
        memcpy(dst, buf, len);
        dst[len] = '\0';
        em->names[em->count++] = dst;
        em->used += len + 1;
        return;
    }
    const struct seg *s = &it->seg[i];
    if (!s->group) {
        memcpy(buf + len, s->p, s->n);
        emit(em, it, i + 1, buf, len + s->n);
        return;
    }
    const char *end = s->p + s->n;
    for (const char *p = s->p; p <= end;) {
        const char *e = range_end(p, end);
        struct range r;
        read_range(p, (size_t)(e - p), &r); /* validated by check_group */
        for (u64 v = r.lo; v <= r.hi; v++) {
            int w = snprintf(buf + len, HOSTLIST_DIGITS_MAX + 2, "%0*llu", r.width, v);
            emit(em, it, i + 1, buf, len + (size_t)w);
        }
        p = e + 1;
    }
}

int hostlist_expand(const char *text, size_t max_names, const char *what, struct hostlist *out,
                    char *err, size_t errlen)
{
    struct item *it = malloc(sizeof *it);
    u64 limit = max_names && max_names < HOSTLIST_NAMES_MAX ? max_names : HOSTLIST_NAMES_MAX;
    u64 total = 0, bytes = 0;
    size_t pos = 0;
    int rc = 0;
    out->count = 0;
    out->names = NULL;
    if (!what)
        what = "hostlist";
    if (!text)
        text = "";
    if (!it)
        return podrun_failf(-ENOMEM, err, errlen, "%s: out of memory", what);
    /* pass 1: validate, count names and bytes */
    while (next_item(text, &pos, it)) {
        if ((rc = check_item(it, limit, what, err, errlen)) != 0)
            goto done;
        if (it->count > limit - total) {
            char q[80];
            hostlist_quote(q, sizeof q, text, strlen(text));
            rc = podrun_failf(-E2BIG, err, errlen,
                      "%s: \"%s\" names more than %llu hosts; list fewer",
                      what, q, limit);
            goto done;
        }
        total += it->count;
        bytes += it->count * (it->maxlen + 1);
    }
    if (total == 0)
        goto done;
    /* pass 2: one block holds the pointer array and then the names */
    char **names = malloc(total * sizeof(char *) + bytes);
    if (!names) {
        rc = podrun_failf(-ENOMEM, err, errlen, "%s: out of memory for %llu names", what, total);
        goto done;
    }
    struct emitter em = {names, (char *)(names + total), 0, 0};
    char buf[HOSTLIST_NAME_MAX + HOSTLIST_DIGITS_MAX + 2];
    pos = 0;
    while (next_item(text, &pos, it)) {
        check_item(it, limit, what, NULL, 0);
        emit(&em, it, 0, buf, 0);
    }
    out->count = em.count;
    out->names = names;
done:
    free(it);
    return rc;
}

void hostlist_free(struct hostlist *hl)
{
    free(hl->names);
    hl->names = NULL;
    hl->count = 0;
}

/* ---- compression ---- */

/* A name split for compression: prefix length, and for a numeric tail its value and the
 * paddings that write it back unchanged: widths lo..hi (a zero-padded tail allows only its own
 * length; an unpadded one any width up to its length). */
struct split {
    size_t plen;
    int numeric;
    u64 v;
    int wlo, whi;
};

static struct split split_name(const char *s, size_t n)
{
    struct split sp = {n, 0, 0, 0, 0};
    size_t i = n;
    while (i > 0 && is_digit(s[i - 1]))
        i--;
    if (i == n || n - i > HOSTLIST_DIGITS_MAX)
        return sp;
    read_num(s + i, n - i, &sp.v);
    sp.plen = i;
    sp.numeric = 1;
    int len = (int)(n - i);
    sp.whi = len;
    sp.wlo = len > ndigits(sp.v) ? len : 1;
    return sp;
}

static void put_num(textbuf_t *b, u64 v, int width)
{
    text_printf(b, "%0*llu", width, v);
}

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n > HOSTLIST_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (is_ctl((unsigned char)s[i]) || is_sep((unsigned char)s[i]) || s[i] == '[' ||
            s[i] == ']')
            return 0;
    return 1;
}

/* Writes names[i..j) — all numeric with one prefix — as prefix[r,r,...]: each range extends
 * while the next value is one more and a common padding still writes every member back. The
 * range is written with the widest such padding, which is also what expansion reads back from
 * its low end. */
static void put_group(textbuf_t *b, const char *const *names, const struct split *sp, size_t i,
                      size_t j)
{
    text_add(b, names[i], sp[i].plen);
    text_add(b, "[", 1);
    for (size_t k = i; k < j;) {
        u64 hi = sp[k].v;
        int wlo = sp[k].wlo, whi = sp[k].whi;
        size_t m = k + 1;
        while (m < j && sp[m].v == hi + 1 && sp[m].wlo <= whi && sp[m].whi >= wlo) {
            wlo = sp[m].wlo > wlo ? sp[m].wlo : wlo;
            whi = sp[m].whi < whi ? sp[m].whi : whi;
            hi++;
            m++;
        }
        if (k > i)
            text_add(b, ",", 1);
        put_num(b, sp[k].v, whi);
        if (m - k > 1) {
            text_add(b, "-", 1);
            put_num(b, hi, whi);
        }
        k = m;
    }
    text_add(b, "]", 1);
}

int hostlist_compress(const char *const *names, size_t count, char *out, size_t cap)
{
    struct split *sp = count ? malloc(count * sizeof *sp) : NULL;
    if (count && !sp)
        return -ENOMEM;
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(names[i]);
        if (!valid_name(names[i], n)) {
            free(sp);
            return -EINVAL;
        }
        sp[i] = split_name(names[i], n);
    }
    textbuf_t b = text_start(out, cap);
    for (size_t i = 0; i < count;) {
        size_t j = i + 1;
        if (sp[i].numeric)
            while (j < count && sp[j].numeric && sp[j].plen == sp[i].plen &&
                   memcmp(names[j], names[i], sp[i].plen) == 0)
                j++;
        /* brackets only where they are shorter: "[1,7]" is longer than "1,7" */
        textbuf_t dry = text_start(NULL, 0);
        size_t plain = 0;
        for (size_t k = i; k < j; k++)
            plain += strlen(names[k]) + (k > i);
        if (j - i > 1)
            put_group(&dry, names, sp, i, j);
        if (i > 0)
            text_add(&b, ",", 1);
        if (j - i > 1 && dry.need < plain)
            put_group(&b, names, sp, i, j);
        else
            for (size_t k = i; k < j; k++) {
                if (k > i)
                    text_add(&b, ",", 1);
                text_add(&b, names[k], strlen(names[k]));
            }
        i = j;
    }
    free(sp);
    if (b.need >= cap || b.need > INT_MAX)
        return -ENOSPC; /* out holds what fitted (cap 0: not even the NUL) */
    return (int)b.len;
}
