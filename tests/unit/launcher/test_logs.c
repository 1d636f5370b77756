/* tests/unit/launcher/test_logs.c — the console line prefix template; where an over-long line
 * is cut. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/output/logs.h"

static void test_prefix(void)
{
    char buf[64];
    CHECK_EQ_INT(logs_expand_prefix("[rank ${rank}]:", 12, 3, "r", buf, sizeof buf), 0);
    CHECK_EQ_STR(buf, "[rank 12]:");
    CHECK_EQ_INT(logs_expand_prefix("[${role_name}${local_rank}]:${x}", 12, 3, "r", buf,
                                   sizeof buf), 0);
    CHECK_EQ_STR(buf, "[r3]:${x}");
    CHECK(logs_expand_prefix("${rank}${rank}${rank}", 123456, 0, "r", buf, 8) < 0);
    char host[64] = "", want[80];
    CHECK_EQ_INT(gethostname(host, sizeof host - 1), 0);
    snprintf(want, sizeof want, "%s:12: ", host);
    CHECK_EQ_INT(logs_expand_prefix("${hostname}:${rank}: ", 12, 3, "r", buf, sizeof buf), 0);
    CHECK_EQ_STR(buf, want);
    /* string.Template's other forms, as torch substitutes them */
    CHECK_EQ_INT(logs_expand_prefix("$role_name$local_rank|$rank_x|$$rank|${rank|$", 12, 3, "r",
                                   buf, sizeof buf), 0);
    CHECK_EQ_STR(buf, "r3|$rank_x|$rank|${rank|$");
}

/* A cut never leaves part of a character behind: 2-, 3- and 4-byte characters across the end,
 * each byte of them; whole characters, ASCII and bytes that are not UTF-8 are cut at the end. */
static void test_utf8_cut(void)
{
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (int c = 0; c < 3; c++) {
        size_t w = strlen(chars[c]);
        char buf[16];
        memcpy(buf, "abcd", 4);
        memcpy(buf + 4, chars[c], w);
        for (size_t have = 1; have < w; have++)
            CHECK_EQ_INT((int)logs_utf8_cut(buf, 4 + have), 4);   /* cut before the lead */
        CHECK_EQ_INT((int)logs_utf8_cut(buf, 4 + w), (int)(4 + w));   /* whole: all of it */
        CHECK_EQ_INT((int)logs_utf8_cut(buf, 4), 4);
    }
    CHECK_EQ_INT((int)logs_utf8_cut("\xe2\x82", 2), 2);   /* nothing before it: all */
    CHECK_EQ_INT((int)logs_utf8_cut("ab\x80\x80\x80\x80", 6), 6);   /* not UTF-8 */
    CHECK_EQ_INT((int)logs_utf8_cut("ab\xff", 3), 3);
    CHECK_EQ_INT((int)logs_utf8_cut("", 0), 0);
}

int main(void)
{
    RUN(test_prefix);
    RUN(test_utf8_cut);
    return check_result();
}
