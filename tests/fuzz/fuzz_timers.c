/* tests/fuzz/fuzz_timers.c — libFuzzer target: arbitrary bytes as torch timer requests, line by
 * line, into a table of timers. Nothing may crash or read out of bounds; an accepted request has
 * a valid pid and a one-line scope; the table stays within TIMERS_MAX and every timer taken out
 * as expired had expired. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/watch/timers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct timer_table t;
    timers_table_init(&t);
    const char *p = (const char *)data, *end = p + size;
    char why[64];
    int lr = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        struct timer_req r;
        if (timers_parse(p, len, &r, why, sizeof why) == 0) {
            if (r.pid < 1 || strchr(r.scope, '\n') || r.signo < 0 || r.signo > 64)
                abort();
            timers_apply(&t, &r, lr++ % 4, 0);
        }
        p += len + 1;
    }
    if (t.n > TIMERS_MAX)
        abort();
    double now = timers_next(&t);
    struct timer_entry e;
    while (timers_take_expired(&t, now, &e))
        if (e.expiration > now)
            abort();
    timers_forget_rank(&t, 1);
    timers_table_free(&t);
    return 0;
}
