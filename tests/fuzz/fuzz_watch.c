/* tests/fuzz/fuzz_watch.c — libFuzzer target: what a job you can watch reads from strangers. The
 * health port's request parser on any bytes (never past the buffer; a complete request has a
 * bounded, NUL-terminated path that starts with '/', and a head inside the bytes), the state
 * record that `podrun status` decodes from a store (what it accepts comes back the same from
 * its encoder), and JSON lines of any text (always one JSON string that decodes). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/health/request.h"
#include "launcher/output/jsonline.h"
#include "rdzv/status.h"

static void request(const char *d, size_t n)
{
    struct httpd_request r;
    enum httpd_parse p = httpd_request_parse(d, n, &r);
    if (p != HTTPD_PARSE_DONE)
        return;
    if (r.path[0] != '/' || !memchr(r.path, '\0', sizeof r.path) ||
        !memchr(r.query, '\0', sizeof r.query) || r.head_len == 0 || r.head_len > n ||
        r.minor < 0 || r.minor > 9)
        abort();
    /* the same head again, alone: the same answer */
    struct httpd_request r2;
    if (httpd_request_parse(d, r.head_len, &r2) != HTTPD_PARSE_DONE ||
        strcmp(r.path, r2.path) != 0 || r.head_len != r2.head_len)
        abort();
}

#define NODES 64

static void state(const char *d, size_t n)
{
    static rdzv_status_node_t a[NODES], b[NODES];
    rdzv_status_t s, t;
    if (rdzv_status_decode(d, n, &s, a, NODES) < 0)
        return;
    char *e1 = NULL, *e2 = NULL;
    long l1 = rdzv_status_encode(&s, 0, &e1);
    if (l1 < 0)
        abort();
    if (rdzv_status_decode(e1, (size_t)l1, &t, b, NODES) < 0 || t.n_nodes != s.n_nodes)
        abort();
    long l2 = rdzv_status_encode(&t, 0, &e2);
    if (l2 != l1 || memcmp(e1, e2, (size_t)l1) != 0)
        abort();
    free(e1);
    free(e2);
}

static void json(const char *d, size_t n)
{
    struct jsonbuf b;
    jsonline_init(&b);
    jsonline_str(&b, d, n);
    if (b.oom) {
        jsonline_free(&b);
        return;
    }
    json_error_t e;
    json_t *v = json_loadb(b.buf, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!v || !json_is_string(v) || json_string_length(v) < n / 4)
        abort();
    json_decref(v);
    jsonline_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    request(d, size);
    state(d, size);
    json(d, size);
    return 0;
}
