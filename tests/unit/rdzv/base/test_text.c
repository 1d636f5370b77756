/* tests/unit/rdzv/base/test_text.c — the bounded text builder: a caller's buffer (what fits, the
 * cut flag, measuring), a growing text, and appending to a line already in a buffer. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/base/text.h"

static void test_fixed(void)
{
    char buf[16];
    textbuf_t t = text_start(buf, sizeof buf);
    CHECK_EQ_STR(buf, "");
    text_printf(&t, "%d-%s", 42, "ab");
    text_add(&t, "cd", 2);
    CHECK_EQ_STR(buf, "42-abcd");
    CHECK_EQ_INT(t.len, 7);
    CHECK_EQ_INT(t.need, 7);
    CHECK(!t.cut);
    /* the piece that does not fit keeps what fits of it, and nothing after it is written */
    text_printf(&t, "%s", "0123456789");
    CHECK(t.cut);
    CHECK_EQ_STR(buf, "42-abcd01234567");
    CHECK_EQ_INT(t.len, 15);
    text_add(&t, "x", 1);
    text_printf(&t, "y");
    CHECK_EQ_STR(buf, "42-abcd01234567");
    CHECK_EQ_INT(t.need, 19);
    CHECK(t.cut);
    /* exactly full (15 bytes and the NUL) is not cut */
    t = text_start(buf, sizeof buf);
    text_printf(&t, "%s", "0123456789abcde");
    CHECK(!t.cut);
    text_add(&t, "", 0);
    CHECK(!t.cut);
    text_add(&t, "f", 1);
    CHECK(t.cut);
    CHECK_EQ_STR(buf, "0123456789abcde");
    /* text_add cuts the same way */
    t = text_start(buf, 4);
    text_add(&t, "abcdef", 6);
    CHECK(t.cut);
    CHECK_EQ_STR(buf, "abc");
    /* text_free empties a fixed text and keeps its buffer */
    text_free(&t);
    CHECK(!t.cut && t.len == 0 && t.s == buf && t.cap == 4);
    CHECK_EQ_STR(buf, "");
}

/* No buffer: nothing is written, `need` says how long the text is. */
static void test_measure(void)
{
    textbuf_t t = text_start(NULL, 0);
    text_printf(&t, "%s,%d", "node", 12);
    text_add(&t, "[1-3]", 5);
    CHECK_EQ_INT(t.need, 12);
    CHECK_EQ_INT(t.len, 0);
    CHECK(t.cut);
    char one[1] = {'x'};
    t = text_start(one, 1);
    CHECK_EQ_INT(one[0], '\0');
    text_printf(&t, "a");
    CHECK(t.cut);
    CHECK_EQ_INT(one[0], '\0');
    CHECK_EQ_INT(t.need, 1);
}

static void test_growing(void)
{
    textbuf_t t = {0};
    text_free(&t); /* an unused one frees to nothing */
    for (int i = 0; i < 1000; i++)
        text_printf(&t, "%04d\n", i);
    CHECK(!t.cut);
    CHECK_EQ_INT(t.len, 5000);
    CHECK_EQ_INT(strlen(t.s), 5000);
    CHECK(memcmp(t.s + 4995, "0999\n", 5) == 0);
    text_add(&t, "end", 3);
    CHECK_EQ_STR(t.s + 5000, "end");
    text_free(&t);
    CHECK(t.s == NULL && t.len == 0 && t.cap == 0 && !t.fixed);
    /* past TEXT_GROW_MAX it is cut as a fixed text is, and keeps no part of that piece */
    char *big = malloc(TEXT_GROW_MAX);
    CHECK(big != NULL);
    if (!big)
        return;
    memset(big, 'a', TEXT_GROW_MAX);
    text_add(&t, "head", 4);
    text_add(&t, big, TEXT_GROW_MAX - 5);
    CHECK(!t.cut);
    text_add(&t, "z", 1);
    CHECK(t.cut);
    CHECK_EQ_INT(t.len, TEXT_GROW_MAX - 1);
    text_free(&t);
    text_add(&t, "head", 4);
    text_printf(&t, "%.*s", (int)(TEXT_GROW_MAX - 4), big);
    CHECK(t.cut);
    CHECK_EQ_STR(t.s, "head");
    text_add(&t, "x", 1); /* nothing after a cut */
    CHECK_EQ_STR(t.s, "head");
    CHECK_EQ_INT(t.need, TEXT_GROW_MAX + 1);
    text_free(&t);
    free(big);
}

/* A line that several functions add to in turn. */
static void test_appendf(void)
{
    char line[12] = "a";
    text_appendf(line, sizeof line, "%s%d", "; ", 7);
    CHECK_EQ_STR(line, "a; 7");
    text_appendf(line, sizeof line, "%s", "; 123456789");
    CHECK_EQ_STR(line, "a; 7; 12345");
    text_appendf(line, sizeof line, "more");
    CHECK_EQ_STR(line, "a; 7; 12345");
    text_appendf(line, 0, "x"); /* no room at all: nothing happens */
}

int main(void)
{
    RUN(test_fixed);
    RUN(test_measure);
    RUN(test_growing);
    RUN(test_appendf);
    return check_result();
}
