/* tests/fuzz/fuzz_records.c — libFuzzer target: arbitrary bytes through every rendezvous record
 * decoder (node descriptor, failure, assignment, end of round) and the key=value reader. Nothing
 * may crash or read out of bounds, and whatever a decoder accepts must come back the same from
 * its encoder: encode(decode(encode(decode(x)))) == encode(decode(x)). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/records.h"

#define CAP 65536

/* t2 and t3 must be the same text */
static void same(const char *t2, int n2, const char *t3, int n3)
{
    if (n2 != n3 || (n2 > 0 && memcmp(t2, t3, (size_t)n2) != 0))
        abort();
}

static void desc(const char *d, size_t n, char *t2, char *t3)
{
    rdzv_desc_rec_t a, b;
    if (rdzv_desc_decode(d, n, &a) < 0)
        return;
    int n2 = rdzv_desc_encode(&a, t2, CAP);
    if (n2 < 0 || rdzv_desc_decode(t2, (size_t)n2, &b) < 0)
        abort();
    same(t2, n2, t3, rdzv_desc_encode(&b, t3, CAP));
}

static void failure(const char *d, size_t n, char *t2, char *t3)
{
    rdzv_failure_t a, b;
    if (rdzv_failure_decode(d, n, &a) < 0)
        return;
    int n2 = rdzv_failure_encode(&a, t2, CAP);
    if (n2 < 0 || rdzv_failure_decode(t2, (size_t)n2, &b) < 0)
        abort();
    same(t2, n2, t3, rdzv_failure_encode(&b, t3, CAP));
}

static int assign_encode(const rdzv_assignment_t *a, const char *err, const char *text, char *out)
{
    return err[0] ? rdzv_assign_error_encode(err, text, out, CAP) : rdzv_assign_encode(a, out, CAP);
}

static void assign(const char *d, size_t n, char *t2, char *t3)
{
    rdzv_assignment_t a, b;
    char host[RDZV_NAME_MAX], err[33], text[RDZV_LINE_MAX];
    if (rdzv_assign_decode(d, n, &a, host, sizeof host, err, sizeof err, text, sizeof text) < 0)
        return;
    int n2 = assign_encode(&a, err, text, t2);
    if (n2 < 0 ||
        rdzv_assign_decode(t2, (size_t)n2, &b, host, sizeof host, err, sizeof err, text,
                           sizeof text) < 0)
        abort();
    same(t2, n2, t3, assign_encode(&b, err, text, t3));
}

static void end(const char *d, size_t n, char *t2, char *t3)
{
    static rdzv_failure_t fa[RDZV_MAX_FAILURES], fb[RDZV_MAX_FAILURES];
    rdzv_decision_t a, b;
    int r = rdzv_end_decode(d, n, &a, fa);
    if (r < 0)
        return;
    int n2 = rdzv_end_encode(r == 1 ? NULL : &a, t2, CAP);
    if (n2 < 0 || rdzv_end_decode(t2, (size_t)n2, &b, fb) != r)
        abort();
    same(t2, n2, t3, rdzv_end_encode(r == 1 ? NULL : &b, t3, CAP));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char t2[CAP], t3[CAP];
    const char *d = (const char *)data;
    desc(d, size, t2, t3);
    failure(d, size, t2, t3);
    assign(d, size, t2, t3);
    end(d, size, t2, t3);
    /* the reader with a key taken from the input itself: up to its first '=' */
    char key[64], out[256];
    size_t kl = 0;
    while (kl < size && kl < sizeof key - 1 && d[kl] != '=' && d[kl] != '\n' && d[kl])
        key[kl] = d[kl], kl++;
    key[kl] = '\0';
    kv_get(d, size, key, out, sizeof out);
    kv_get_int(d, size, key, 0);
    kv_get_double(d, size, key, 0);
    return 0;
}
