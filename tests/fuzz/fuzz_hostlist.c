/* tests/fuzz/fuzz_hostlist.c — libFuzzer target: arbitrary text through hostlist_expand; every
 * list that expands must compress and expand back to the same names, and every error must be
 * one line. Nothing may crash, leak, hang or read out of bounds. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostlist.h"

#define MAX_NAMES 4096 /* keeps one run fast; the bound itself is what is exercised */

static void one_line(const char *err)
{
    if (!err[0] || strchr(err, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512], *text = malloc(size + 1);
    struct hostlist a, b;
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int rc = hostlist_expand(text, MAX_NAMES, "fuzz", &a, err, sizeof err);
    if (rc) {
        one_line(err);
        if (a.count || a.names)
            abort();
    } else if (a.count) {
        /* compression never writes more than the names joined by commas */
        size_t cap = 1;
        for (size_t i = 0; i < a.count; i++) {
            size_t len = strlen(a.names[i]);
            if (!len || len > HOSTLIST_NAME_MAX)
                abort();
            cap += len + 1;
        }
        char *out = malloc(cap);
        if (hostlist_compress((const char *const *)a.names, a.count, out, cap) < 0)
            abort();
        if (hostlist_expand(out, MAX_NAMES, "fuzz", &b, err, sizeof err) != 0 ||
            b.count != a.count)
            abort();
        for (size_t i = 0; i < a.count; i++)
            if (strcmp(a.names[i], b.names[i]) != 0)
                abort();
        hostlist_free(&b);
        /* a short buffer is cut, never overrun */
        char small[16];
        int c = hostlist_compress((const char *const *)a.names, a.count, small, sizeof small);
        if ((c < 0 && c != -ENOSPC) || strlen(small) >= sizeof small)
            abort();
        free(out);
    }
    hostlist_free(&a);
    free(text);
    return 0;
}
