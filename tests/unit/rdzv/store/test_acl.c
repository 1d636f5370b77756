/* tests/unit/rdzv/store/test_acl.c — source-address allow-lists (rdzv/store/acl.h): CIDR blocks of
 * both families, v4-mapped peers of a dual-stack listener, bad entries as one line. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/store/acl.h"

static struct sockaddr_storage addr(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(1234);
    } else {
        CHECK_EQ_INT(inet_pton(AF_INET6, ip, &a6->sin6_addr), 1);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(4321);
    }
    return ss;
}

static int allows(const acl_t *acl, const char *ip)
{
    struct sockaddr_storage ss = addr(ip);
    return acl_allows(acl, (struct sockaddr *)&ss);
}

static void test_blocks(void)
{
    acl_t acl = {0};
    char err[256];
    CHECK_EQ_INT(acl_add_list(&acl, "127.0.0.1, 127.0.0.2/31,10.1.0.0/16,fd00::/8",
                              "--store-allow", NULL, err, sizeof err), 0);
    CHECK_EQ_INT(acl.n, 4);
    CHECK(allows(&acl, "127.0.0.1"));
    CHECK(allows(&acl, "127.0.0.2"));
    CHECK(allows(&acl, "127.0.0.3"));
    CHECK(!allows(&acl, "127.0.0.4"));
    CHECK(!allows(&acl, "127.0.0.9"));
    CHECK(allows(&acl, "10.1.255.7"));
    CHECK(!allows(&acl, "10.2.0.1"));
    CHECK(allows(&acl, "fd12:3456::1"));
    CHECK(!allows(&acl, "fe80::1"));
    /* an IPv4 peer on a dual-stack socket */
    CHECK(allows(&acl, "::ffff:10.1.2.3"));
    CHECK(!allows(&acl, "::ffff:10.9.2.3"));
    /* a block given with host bits set means its network */
    acl_clear(&acl);
    CHECK_EQ_INT(acl_add(&acl, "192.168.7.9/24"), 0);
    CHECK(allows(&acl, "192.168.7.200"));
    CHECK(!allows(&acl, "192.168.8.1"));
    /* /0 is everyone of that family; a v4-mapped block is the v4 block */
    acl_clear(&acl);
    CHECK_EQ_INT(acl_add(&acl, "0.0.0.0/0"), 0);
    CHECK(allows(&acl, "8.8.8.8"));
    CHECK(!allows(&acl, "2001:db8::1"));
    acl_clear(&acl);
    CHECK_EQ_INT(acl_add(&acl, "::ffff:172.16.0.0/108"), 0);
    CHECK(allows(&acl, "172.16.3.4"));
    CHECK(!allows(&acl, "172.32.0.1"));
    /* nothing listed: nobody */
    acl_clear(&acl);
    CHECK(!allows(&acl, "127.0.0.1"));
    acl_free(&acl);
}

static void test_bad(void)
{
    acl_t acl = {0};
    char err[256];
    const char *bad[] = {"10.0.0.0/33", "10.0.0.0/", "10.0.0/8", "fd00::/129", "host.example",
                         "10.0.0.1/-1", "", "10.0.0.1,,10.0.0.2", "1.2.3.4/8x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(acl_add_list(&acl, bad[i], "--store-allow", NULL, err, sizeof err), -EINVAL);
        CHECK(strstr(err, "--store-allow") && strstr(err, "CIDR"));
    }
    /* a bad entry adds nothing, also of the good ones before it */
    CHECK_EQ_INT(acl_add_list(&acl, "10.0.0.1,bogus", "PODRUN_STORE_ALLOW", NULL, err, sizeof err),
                 -EINVAL);
    CHECK(strstr(err, "'bogus'") && strstr(err, "PODRUN_STORE_ALLOW"));
    CHECK_EQ_INT(acl.n, 0);
    /* "job" is a word only where the caller knows the job's addresses */
    int job = 0;
    CHECK_EQ_INT(acl_add_list(&acl, "job", "--store-allow", NULL, err, sizeof err), -EINVAL);
    CHECK_EQ_INT(acl_add_list(&acl, " job , 10.0.0.0/8", "--store-allow", &job, err, sizeof err),
                 0);
    CHECK_EQ_INT(job, 1);
    CHECK_EQ_INT(acl.n, 1);
    acl_free(&acl);
}

static void test_same_ip(void)
{
    struct sockaddr_storage a = addr("10.0.0.5"), b = addr("::ffff:10.0.0.5"),
                            c = addr("10.0.0.6"), d = addr("::1");
    CHECK(acl_same_ip((struct sockaddr *)&a, (struct sockaddr *)&b));
    CHECK(!acl_same_ip((struct sockaddr *)&a, (struct sockaddr *)&c));
    CHECK(!acl_same_ip((struct sockaddr *)&a, (struct sockaddr *)&d));
    CHECK(acl_same_ip((struct sockaddr *)&d, (struct sockaddr *)&d));
}

int main(void)
{
    RUN(test_blocks);
    RUN(test_bad);
    RUN(test_same_ip);
    return check_result();
}
