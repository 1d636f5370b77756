/* rdzv/base/text.h — one bounded text builder: printf-append into a caller's buffer or a growing
 * one, never past its end, with a flag that says the text was cut.
 *
 * Two kinds, one type:
 *  - over a caller's buffer (text_start): writes what fits and keeps the text NUL-terminated;
 *    once a piece does not fit, the text keeps what fitted of it and nothing after it is written.
 *    `need` still counts every byte the whole text would take, so a NULL buffer of cap 0 measures.
 *  - growing (a zero textbuf_t, `textbuf_t b = {0}`): malloc'd, grows as pieces come, up to
 *    TEXT_GROW_MAX bytes; free it with text_free. Out of memory or over the limit is a cut, as
 *    above, so a caller checks one flag for both.
 * A cut text is never silently whole: `cut` is set and stays set. */
#ifndef PODRUN_RDZV_TEXT_H
#define PODRUN_RDZV_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define TEXT_GROW_MAX ((size_t)1 << 24) /* a growing text's most bytes, its NUL included */

typedef struct textbuf {
    char *s;      /* the text, NUL-terminated while cap > 0; NULL in a growing text not yet written */
    size_t len;   /* bytes in s */
    size_t cap;   /* bytes s holds, its NUL included */
    size_t need;  /* bytes the whole text takes: above len once something was cut */
    bool fixed;   /* s is the caller's buffer and does not grow */
    bool cut;     /* a piece did not fit (or memory ran out): the text ends early */
} textbuf_t;

/* A text over buf[0..cap), starting empty ("" in buf when cap > 0). buf may be NULL when cap is 0:
 * then nothing is written and `need` measures. */
textbuf_t text_start(char *buf, size_t cap);

/* Appends s[0..n) / a formatted piece. */
void text_add(textbuf_t *t, const char *s, size_t n);
void text_printf(textbuf_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_vprintf(textbuf_t *t, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Frees a growing text and leaves it empty (a zero textbuf_t again); a fixed one is only emptied. */
void text_free(textbuf_t *t);

/* Appends a formatted piece to the NUL-terminated text already in buf, cut to cap: for a line that
 * several functions add to in turn (a reason, a waiting line). A full buffer is left as it is. */
void text_appendf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
