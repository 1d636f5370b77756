/* launcher/output/jsonline.h — one JSON object per line, for podrun's own lines under --log-format json
 * and `podrun status --json`. Pure code: no I/O.
 *
 * Strings are escaped as RFC 8259 asks (quote, backslash, control characters) and any byte that
 * is not part of valid UTF-8 becomes U+FFFD, so whatever a worker wrote into its error file, the
 * line stays JSON a collector can read. */
#ifndef PODRUN_LAUNCHER_JSONLINE_H
#define PODRUN_LAUNCHER_JSONLINE_H

#include <stddef.h>

/* A growing buffer; oom set once memory ran out (what was written stays valid text). */
struct jsonbuf {
    char *buf;
    size_t len, cap;
    int oom;
};

/* The length of the valid UTF-8 sequence at s (at most n bytes, n >= 1), 0 if there is none:
 * the shortest form only, no surrogates, nothing above U+10FFFF. */
size_t jsonline_utf8_len(const unsigned char *s, size_t n);
void jsonline_init(struct jsonbuf *b);
void jsonline_free(struct jsonbuf *b);
void jsonline_raw(struct jsonbuf *b, const char *s);
/* s[0..len) as a quoted JSON string. */
void jsonline_str(struct jsonbuf *b, const char *s, size_t len);
/* ,"key":"value" (or {"key":... when first is set). */
void jsonline_field(struct jsonbuf *b, int first, const char *key, const char *value);
void jsonline_field_num(struct jsonbuf *b, int first, const char *key, double value);

/* {"time":"2026-01-02T03:04:05.678Z","source":S,"node":N,"run_id":R,"msg":M}\n, where time is
 * epoch seconds, msg is text[0..len) without its trailing newlines, and node/run_id are left out
 * when NULL or empty. */
void jsonline_log(struct jsonbuf *b, double time, const char *source, const char *node,
                  const char *run_id, const char *text, size_t len);

#endif
