/* tests/unit/launcher/devices/test_nic.c — the interface that holds an address. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "devices/nic.h"

static void test_loopback(void)
{
    char name[32] = "";
    CHECK_EQ_INT(nic_for_addr("127.0.0.1", name, sizeof name), 0);
    CHECK_EQ_STR(name, "lo");
    CHECK_EQ_INT(nic_for_addr("192.0.2.77", name, sizeof name), -ENOENT); /* TEST-NET-1 */
    CHECK_EQ_INT(nic_for_addr("not-an-address", name, sizeof name), -EINVAL);
    CHECK_EQ_INT(nic_for_addr(NULL, name, sizeof name), -EINVAL);
}

int main(void)
{
    RUN(test_loopback);
    return check_result();
}
