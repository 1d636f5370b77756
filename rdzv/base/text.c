/* rdzv/base/text.c — one bounded text builder (rdzv/base/text.h). */
#include "rdzv/base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

textbuf_t text_start(char *buf, size_t cap)
{
    if (buf && cap)
        buf[0] = '\0';
    return (textbuf_t){.s = buf, .cap = buf ? cap : 0, .fixed = true};
}

/* Room for n more bytes and the NUL: a growing text doubles up to TEXT_GROW_MAX. 0 or -1. */
static int room(textbuf_t *t, size_t n)
{
    if (t->len + n < t->cap)
        return 0;
    if (t->fixed || n >= TEXT_GROW_MAX - t->len)
        return -1;
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1)
        cap *= 2;
    if (cap > TEXT_GROW_MAX)
        cap = TEXT_GROW_MAX;
    char *s = realloc(t->s, cap);
    if (!s)
        return -1;
    t->s = s;
    t->cap = cap;
    return 0;
}

/* The piece of n bytes did not fit: keep what did of it (a fixed text), and stop. */
static void cut(textbuf_t *t, const char *s, size_t n)
{
    if (!t->cut && t->fixed && t->cap > t->len + 1 && s) {
        size_t k = t->cap - t->len - 1 < n ? t->cap - t->len - 1 : n;
        memcpy(t->s + t->len, s, k);
        t->len += k;
        t->s[t->len] = '\0';
    }
    t->cut = true;
    t->need += n;
}

void text_add(textbuf_t *t, const char *s, size_t n)
{
    if (t->cut || room(t, n) < 0) {
        cut(t, s, n);
        return;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->need += n;
    t->s[t->len] = '\0';
}

void text_vprintf(textbuf_t *t, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    size_t left = t->cap - t->len;
    int n = t->cut ? vsnprintf(NULL, 0, fmt, ap) : vsnprintf(left ? t->s + t->len : NULL, left,
                                                             fmt, ap);
    if (n < 0) {
        t->cut = true;
    } else if (!t->cut && (size_t)n < left) {
        t->len += (size_t)n;
        t->need += (size_t)n;
    } else if (!t->cut && room(t, (size_t)n) == 0) {
        vsnprintf(t->s + t->len, t->cap - t->len, fmt, again);
        t->len += (size_t)n;
        t->need += (size_t)n;
    } else {
        /* a fixed text already holds what fitted of the piece: vsnprintf wrote it */
        if (!t->cut && t->fixed && left)
            t->len = t->cap - 1;
        else if (t->s && t->cap)
            t->s[t->len] = '\0'; /* a growing text keeps none of a piece it could not hold */
        t->cut = true;
        t->need += (size_t)n;
    }
    va_end(again);
}

void text_printf(textbuf_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    text_vprintf(t, fmt, ap);
    va_end(ap);
}

void text_free(textbuf_t *t)
{
    if (!t->fixed) {
        free(t->s);
        *t = (textbuf_t){0};
        return;
    }
    *t = text_start(t->s, t->cap);
}

void text_appendf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = cap ? strnlen(buf, cap) : 0;
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}
