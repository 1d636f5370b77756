/* tests/unit/launcher/devices/test_cpuset.c — CPU lists as sysfs and taskset write them, and
 * NVML's bitmasks. */
#include <errno.h>

#include "tests/unit/check.h"
#include "launcher/devices/cpuset.h"

static void test_parse_format_table(void)
{
    static const struct {
        const char *in;
        int rc;
        const char *out;   /* formatted back */
        int count;
    } cases[] = {
        {"0-3,8,10-11", 0, "0-3,8,10-11", 7},
        {"0-15,32-47\n", 0, "0-15,32-47", 32},
        {" 3 , 1 ,2", 0, "1-3", 3},
        {"", 0, "", 0},
        {"\n", 0, "", 0},
        {"5", 0, "5", 1},
        {"0,1,2,4", 0, "0-2,4", 4},
        {"1023", 0, "1023", 1},
        {"1024", -ERANGE, NULL, 0},
        {"99999999999", -ERANGE, NULL, 0},
        {"3-1", -EINVAL, NULL, 0},
        {"a", -EINVAL, NULL, 0},
        {"1,,2", -EINVAL, NULL, 0},
        {"1-", -EINVAL, NULL, 0},
        {"-1", -EINVAL, NULL, 0},
        {"1;2", -EINVAL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cpu_set_t s;
        int rc = cpuset_parse(cases[i].in, &s);
        CHECK_EQ_INT(rc, cases[i].rc);
        if (rc != 0)
            continue;
        char buf[256];
        CHECK_EQ_INT(cpuset_format(&s, buf, sizeof buf), 0);
        CHECK_EQ_STR(buf, cases[i].out);
        CHECK_EQ_INT(CPU_COUNT(&s), cases[i].count);
    }
}

static void test_format_small_buffer(void)
{
    cpu_set_t s;
    CHECK_EQ_INT(cpuset_parse("0-3,8,10-11", &s), 0);
    char buf[6];
    CHECK_EQ_INT(cpuset_format(&s, buf, sizeof buf), -ENOSPC);
    CHECK_EQ_STR(buf, "0-3,8");   /* what fitted, whole entries only */
}

static void test_nvml_mask(void)
{
    unsigned long mask[3] = {0xffUL, 0, 1UL};  /* CPUs 0-7 and 128 */
    cpu_set_t s;
    cpuset_from_mask(mask, 3, &s);
    char buf[64];
    cpuset_format(&s, buf, sizeof buf);
    CHECK_EQ_STR(buf, "0-7,128");
    CHECK_EQ_INT(cpuset_first(&s), 0);
    CPU_ZERO(&s);
    CHECK_EQ_INT(cpuset_first(&s), -1);
}

int main(void)
{
    RUN(test_parse_format_table);
    RUN(test_format_small_buffer);
    RUN(test_nvml_mask);
    return check_result();
}
