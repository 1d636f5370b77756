/* launcher/health/request.c — the request line and head of one HTTP/1.x request (request.h). */
#include "launcher/health/request.h"

#include <string.h>

/* The end of the line starting at p (its '\n'), or NULL when the buffer ends first. */
static const char *line_end(const char *p, const char *end)
{
    return p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
}

/* A request-line byte: visible ASCII (the separators are single spaces). */
static int visible(unsigned char c)
{
    return c > 0x20 && c < 0x7f;
}

/* Copies [p, q) into out (cap bytes with the NUL); 0, or -1 when it does not fit. */
static int copy_bounded(const char *p, const char *q, char *out, size_t cap)
{
    size_t n = (size_t)(q - p);
    if (n >= cap)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

/* METHOD SP TARGET SP HTTP/1.N in [p, q) (the line without its CR LF). */
static enum httpd_parse parse_request_line(const char *p, const char *q, struct httpd_request *r)
{
    const char *sp1 = memchr(p, ' ', (size_t)(q - p));
    if (!sp1 || sp1 == p)
        return HTTPD_PARSE_BAD;
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(q - t));
    if (!sp2 || sp2 == t)
        return HTTPD_PARSE_BAD;
    for (const char *c = p; c < q; c++)
        if (c != sp1 && c != sp2 && !visible((unsigned char)*c))
            return HTTPD_PARSE_BAD;
    size_t ml = (size_t)(sp1 - p);
    r->method = ml == 3 && !memcmp(p, "GET", 3)    ? HTTPD_M_GET
                : ml == 4 && !memcmp(p, "HEAD", 4) ? HTTPD_M_HEAD
                                                   : HTTPD_M_OTHER;
    const char *v = sp2 + 1;
    if (q - v != 8 || memcmp(v, "HTTP/1.", 7) || v[7] < '0' || v[7] > '9')
        return HTTPD_PARSE_BAD;
    r->minor = v[7] - '0';
    /* absolute form: the path starts at the first '/' after "scheme://authority" */
    if (*t != '/') {
        const char *s = memchr(t, ':', (size_t)(sp2 - t));
        if (!s || sp2 - s < 3 || s[1] != '/' || s[2] != '/')
            return HTTPD_PARSE_BAD;
        const char *slash = memchr(s + 3, '/', (size_t)(sp2 - (s + 3)));
        if (!slash) { /* "http://host": the root */
            r->path[0] = '/';
            return HTTPD_PARSE_DONE;
        }
        t = slash;
    }
    const char *frag = memchr(t, '#', (size_t)(sp2 - t));
    const char *tend = frag ? frag : sp2;
    const char *qm = memchr(t, '?', (size_t)(tend - t));
    if (copy_bounded(t, qm ? qm : tend, r->path, sizeof r->path) ||
        copy_bounded(qm ? qm + 1 : tend, tend, r->query, sizeof r->query))
        return HTTPD_PARSE_LONG;
    return HTTPD_PARSE_DONE;
}

enum httpd_parse httpd_request_parse(const char *buf, size_t len, struct httpd_request *r)
{
    const char *p = buf, *end = buf + len;
    memset(r, 0, sizeof *r);
    /* leading empty lines (a client's CRLF after a previous body) */
    while (p < end && (*p == '\r' || *p == '\n')) {
        if (*p == '\r' && (p + 1 == end || p[1] != '\n'))
            return p + 1 == end ? HTTPD_PARSE_MORE : HTTPD_PARSE_BAD;
        p += *p == '\r' ? 2 : 1;
    }
    const char *nl = line_end(p, end);
    if (!nl) {
        /* no line yet: bytes that cannot start a request are refused now, not after a timeout */
        for (const char *c = p; c < end; c++)
            if (*c != ' ' && *c != '\r' && !visible((unsigned char)*c))
                return HTTPD_PARSE_BAD;
        return HTTPD_PARSE_MORE;
    }
    const char *q = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    enum httpd_parse rl = parse_request_line(p, q, r);
    if (rl != HTTPD_PARSE_DONE)
        return rl;
    /* header fields up to the empty line; only their bytes are checked */
    for (p = nl + 1;;) {
        nl = line_end(p, end);
        if (!nl)
            return HTTPD_PARSE_MORE;
        q = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (q == p) {
            r->head_len = (size_t)(nl + 1 - buf);
            return HTTPD_PARSE_DONE;
        }
        for (const char *c = p; c < q; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                return HTTPD_PARSE_BAD;
        p = nl + 1;
    }
}
