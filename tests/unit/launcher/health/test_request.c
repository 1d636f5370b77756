/* tests/unit/launcher/health/test_request.c — the health port's request parser: whole requests,
 * requests in pieces, and the bytes it must refuse at once rather than wait on. */
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/health/request.h"

static enum httpd_parse parse(const char *s, struct httpd_request *r)
{
    return httpd_request_parse(s, strlen(s), r);
}

static void test_get(void)
{
    struct httpd_request r;
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: x:1\r\nUser-Agent: kube-probe/1.29\r\n\r\n";
    CHECK_EQ_INT(parse(req, &r), HTTPD_PARSE_DONE);
    CHECK_EQ_INT(r.method, HTTPD_M_GET);
    CHECK_EQ_STR(r.path, "/healthz");
    CHECK_EQ_STR(r.query, "");
    CHECK_EQ_INT(r.minor, 1);
    CHECK_EQ_INT(r.head_len, strlen(req));
    /* a query, a fragment, HEAD, HTTP/1.0 and bare LFs */
    CHECK_EQ_INT(parse("HEAD /metrics?name[]=x#top HTTP/1.0\n\n", &r), HTTPD_PARSE_DONE);
    CHECK_EQ_INT(r.method, HTTPD_M_HEAD);
    CHECK_EQ_STR(r.path, "/metrics");
    CHECK_EQ_STR(r.query, "name[]=x");
    CHECK_EQ_INT(r.minor, 0);
    /* absolute form, with and without a path */
    CHECK_EQ_INT(parse("GET http://10.0.0.1:9000/metrics HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_DONE);
    CHECK_EQ_STR(r.path, "/metrics");
    CHECK_EQ_INT(parse("GET http://10.0.0.1:9000 HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_DONE);
    CHECK_EQ_STR(r.path, "/");
    /* leading empty lines are skipped */
    CHECK_EQ_INT(parse("\r\n\r\nGET / HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_DONE);
    /* other methods parse (the server answers 405) */
    CHECK_EQ_INT(parse("POST /healthz HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_DONE);
    CHECK_EQ_INT(r.method, HTTPD_M_OTHER);
}

/* Byte by byte, the parser says "more" until the blank line, then the same answer. */
static void test_pieces(void)
{
    const char req[] = "GET /metrics HTTP/1.1\r\nAccept: text/plain\r\n\r\n";
    struct httpd_request r;
    size_t n = strlen(req);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_INT(httpd_request_parse(req, i, &r), HTTPD_PARSE_MORE);
    CHECK_EQ_INT(httpd_request_parse(req, n, &r), HTTPD_PARSE_DONE);
    CHECK_EQ_STR(r.path, "/metrics");
}

static void test_bad(void)
{
    struct httpd_request r;
    /* not HTTP, found before any newline: refused at once, not after the timeout */
    CHECK_EQ_INT(parse("\x16\x03\x01\x02\x00", &r), HTTPD_PARSE_BAD);   /* a TLS hello */
    CHECK_EQ_INT(parse("\x01\x02", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET / HTTP/2.0\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET / FTP/1.1\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET /\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET  / HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse(" GET / HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET /a\x7f HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET ftp:x HTTP/1.1\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n", &r), HTTPD_PARSE_BAD);
    CHECK_EQ_INT(parse("\rX", &r), HTTPD_PARSE_BAD);
    /* a path longer than the bounds */
    char big[HTTPD_PATH_MAX + 64];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    strcpy(big + HTTPD_PATH_MAX + 5, " HTTP/1.1\r\n\r\n");
    CHECK_EQ_INT(parse(big, &r), HTTPD_PARSE_LONG);
}

int main(void)
{
    RUN(test_get);
    RUN(test_pieces);
    RUN(test_bad);
    return check_result();
}
