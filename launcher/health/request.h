/* launcher/health/request.h — the one HTTP/1.x request a health port reads: its request line and
 * the end of its head, from any bytes. Pure code: no I/O.
 *
 * The health port answers GET (and HEAD) of a path and closes the connection, so the parser
 * needs the method, the path without its query, and where the head ends; header fields are
 * skipped. A request is bounded by the caller's buffer: httpd_request_parse never reads past len
 * and says "more" until the head is complete. */
#ifndef PODRUN_LAUNCHER_HEALTH_REQUEST_H
#define PODRUN_LAUNCHER_HEALTH_REQUEST_H

#include <stddef.h>

#define HTTPD_PATH_MAX 256

enum httpd_parse {
    HTTPD_PARSE_MORE = 0,   /* the head is not complete yet */
    HTTPD_PARSE_DONE = 1,   /* a whole head: the request is filled */
    HTTPD_PARSE_BAD = -1,   /* not an HTTP/1.x request (400) */
    HTTPD_PARSE_LONG = -2,  /* a path or line longer than the bounds (414) */
};

enum httpd_method { HTTPD_M_OTHER, HTTPD_M_GET, HTTPD_M_HEAD };

struct httpd_request {
    enum httpd_method method;
    char path[HTTPD_PATH_MAX];  /* the target without "?query" or "#fragment", NUL-terminated */
    char query[HTTPD_PATH_MAX]; /* the query without '?', "" when none */
    int minor;                 /* HTTP/1.<minor> */
    size_t head_len;           /* bytes of the head, its blank line included */
};

/* Parses buf[0..len). A request line is METHOD SP TARGET SP HTTP/1.N CRLF (a bare LF is taken
 * too, as most servers do); the head ends at the first empty line. Leading empty lines are
 * skipped (RFC 9112 2.2). An origin-form target ("/path?query") or an absolute-form one
 * ("http://host/path") is accepted. Bytes that are not visible ASCII in the request line, a
 * control byte in a header line, or a version other than 1.x are HTTPD_PARSE_BAD. */
enum httpd_parse httpd_request_parse(const char *buf, size_t len, struct httpd_request *r);

#endif
