/* launcher/output/jsonline.c — JSON lines (jsonline.h). */
#include "launcher/output/jsonline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void jsonline_init(struct jsonbuf *b)
{
    memset(b, 0, sizeof *b);
}

void jsonline_free(struct jsonbuf *b)
{
    free(b->buf);
    jsonline_init(b);
}

static void put(struct jsonbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

void jsonline_raw(struct jsonbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

size_t jsonline_utf8_len(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (!len || len > n || s[0] > 0xF4)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) ||
        (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

void jsonline_str(struct jsonbuf *b, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    put(b, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named)
                put(b, named, 2);
            else {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                put(b, esc, 6);
            }
            i++;
        } else {
            size_t n = jsonline_utf8_len(p + i, len - i);
            if (n) {
                put(b, (const char *)p + i, n);
                i += n;
            } else {
                put(b, "\\ufffd", 6);
                i++;
            }
        }
    }
    put(b, "\"", 1);
}

void jsonline_field(struct jsonbuf *b, int first, const char *key, const char *value)
{
    put(b, first ? "{" : ",", 1);
    jsonline_str(b, key, strlen(key));
    put(b, ":", 1);
    jsonline_str(b, value ? value : "", value ? strlen(value) : 0);
}

void jsonline_field_num(struct jsonbuf *b, int first, const char *key, double value)
{
    char num[40];
    put(b, first ? "{" : ",", 1);
    jsonline_str(b, key, strlen(key));
    if (value != value || value > 1e300 || value < -1e300)
        snprintf(num, sizeof num, ":null");
    else if (value > -9e15 && value < 9e15 && value == (double)(long long)value)
        snprintf(num, sizeof num, ":%lld", (long long)value);
    else
        snprintf(num, sizeof num, ":%.17g", value);
    put(b, num, strlen(num));
}

void jsonline_log(struct jsonbuf *b, double time, const char *source, const char *node,
                  const char *run_id, const char *text, size_t len)
{
    time_t sec = (time_t)time;
    int ms = (int)((time - (double)sec) * 1000.0);
    if (ms < 0 || ms > 999)
        ms = 0;
    struct tm tm;
    char ts[40];
    gmtime_r(&sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03dZ", ms);
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    jsonline_field(b, 1, "time", ts);
    jsonline_field(b, 0, "source", source);
    if (node && *node)
        jsonline_field(b, 0, "node", node);
    if (run_id && *run_id)
        jsonline_field(b, 0, "run_id", run_id);
    put(b, ",\"msg\":", 7);
    jsonline_str(b, text, len);
    put(b, "}\n", 2);
}
