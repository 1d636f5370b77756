/* tests/unit/launcher/devices/test_sysroot.c — one root for /proc, /sys and /dev. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static char root[256];

static void test_default_root_is_real(void)
{
    CHECK_EQ_INT(sysroot_set(NULL), 0);
    CHECK_EQ_STR(sysroot_get(), "");
    char p[64];
    CHECK_EQ_INT(sysroot_path(p, sizeof p, "/proc/%s", "self"), 0);
    CHECK_EQ_STR(p, "/proc/self");
    CHECK(sysroot_exists("/proc/self/status"));
    CHECK_EQ_INT(sysroot_set("/"), 0);
    CHECK_EQ_STR(sysroot_get(), "");
}

static void test_reads_under_root(void)
{
    char with_slash[300];
    snprintf(with_slash, sizeof with_slash, "%s//", root);
    CHECK_EQ_INT(sysroot_set(with_slash), 0);
    CHECK_EQ_STR(sysroot_get(), root);
    fx_write(root, "/sys/x/value", "  42 \n\n");
    fx_write(root, "/sys/x/text", "4: ACTIVE\n");
    char buf[32];
    CHECK_EQ_INT(sysroot_read(buf, sizeof buf, "/sys/x/%s", "text"), 9);
    CHECK_EQ_STR(buf, "4: ACTIVE");
    long v = 0;
    CHECK_EQ_INT(sysroot_read_long(&v, "/sys/x/value"), 0);
    CHECK_EQ_INT(v, 42);
    fx_write(root, "/sys/x/value", "4x\n");
    CHECK_EQ_INT(sysroot_read_long(&v, "/sys/x/value"), -EINVAL);
    fx_write(root, "/sys/x/value", "-1\n");
    CHECK_EQ_INT(sysroot_read_long(&v, "/sys/x/value"), 0);
    CHECK_EQ_INT(v, -1);
    CHECK_EQ_INT(sysroot_read(buf, sizeof buf, "/sys/x/missing"), -ENOENT);
    CHECK(!sysroot_exists("/proc/self/status"));   /* the fixture has no /proc/self */
    CHECK(sysroot_exists("/sys/x"));
    /* a value longer than the buffer is cut, never overrun */
    fx_write(root, "/sys/x/long", "%s", "0123456789abcdef");
    char small[5];
    CHECK_EQ_INT(sysroot_read(small, sizeof small, "/sys/x/long"), 4);
    CHECK_EQ_STR(small, "0123");
    sysroot_set(NULL);
}

static void test_too_long(void)
{
    char longroot[5000];
    memset(longroot, 'a', sizeof longroot - 1);
    longroot[0] = '/';
    longroot[sizeof longroot - 1] = '\0';
    CHECK_EQ_INT(sysroot_set(root), 0);
    CHECK_EQ_INT(sysroot_set(longroot), -ENAMETOOLONG);
    CHECK_EQ_STR(sysroot_get(), root);   /* the old root stays */
    char p[16];
    CHECK_EQ_INT(sysroot_path(p, sizeof p, "/sys/class/infiniband"), -ENAMETOOLONG);
    sysroot_set(NULL);
}

int main(void)
{
    if (fx_root_make(root, sizeof root) < 0)
        return 1;
    RUN(test_default_root_is_real);
    RUN(test_reads_under_root);
    RUN(test_too_long);
    fx_root_remove(root);
    return check_result();
}
