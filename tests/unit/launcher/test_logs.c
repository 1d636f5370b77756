/* tests/unit/launcher/test_logs.c — the console line prefix template. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/logs.h"

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

int main(void)
{
    RUN(test_prefix);
    return check_result();
}
