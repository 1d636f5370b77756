/* tests/unit/launcher/test_logs.c — the console line prefix template. */
#include <string.h>

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
}

int main(void)
{
    RUN(test_prefix);
    return check_result();
}
