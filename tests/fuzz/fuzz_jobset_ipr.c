/* tests/fuzz/fuzz_jobset_ipr.c — what a JobSet says about in-place restart
 * (launcher/operators/jobset_ipr.c). The input is read as the API server's answers are: as a
 * JobSet object, then line by line as watch events on the state it gave. No input may crash,
 * leak or read out of bounds; an attempt read is -1 or more, the resourceVersion is a bounded
 * string, and a pod's first attempt is always past the previous attempt. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/operators/jobset_ipr.h"

static void check(const struct jobset_ipr *s)
{
    if (s->current < -1 || s->previous < -1 || memchr(s->rv, '\0', sizeof s->rv) == NULL ||
        memchr(s->terminal, '\0', sizeof s->terminal) == NULL)
        abort();
    if (jobset_ipr_first(s) <= s->previous)
        abort();
    (void)jobset_ipr_step(s, jobset_ipr_first(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jobset_ipr s = {.current = -1, .previous = -1};
    if (jobset_ipr_parse((const char *)data, size, &s) == 0)
        check(&s);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (jobset_ipr_event(p, n, &s) >= 0)
            check(&s);
        p += n + 1;
    }
    return 0;
}
