/* tests/unit/launcher/devices/test_nic.c — choosing the interface that reaches the master:
 * the pure rules in tables, then the kernel's answers on this host's loopback and, where this
 * test may create a network namespace, on interfaces it makes there (eth9, docker0, veth0). */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/devices/nic.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static unsigned char v4[4];

static const unsigned char *ip4(const char *s)
{
    inet_pton(AF_INET, s, v4);
    return v4;
}

static uint32_t raw(const char *s)
{
    uint32_t r;
    inet_pton(AF_INET, s, &r);
    return r;
}

/* ---------- /proc/net/route ---------- */

static void test_route_proc(void)
{
    char text[1024];
    snprintf(text, sizeof text,
             "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
             "eth0\t%08X\t%08X\t0003\t0\t0\t100\t%08X\t0\t0\t0\n"
             "eth0\t%08X\t00000000\t0001\t0\t0\t100\t%08X\t0\t0\t0\n"
             "eth1\t%08X\t00000000\t0001\t0\t0\t0\t%08X\t0\t0\t0\n"
             "eth2\t%08X\t00000000\t0001\t0\t0\t50\t%08X\t0\t0\t0\n"
             "eth3\t%08X\t00000000\t0000\t0\t0\t0\t%08X\t0\t0\t0\n",
             raw("0.0.0.0"), raw("192.168.0.1"), raw("0.0.0.0"),
             raw("192.168.0.0"), raw("255.255.255.0"),
             raw("10.0.0.0"), raw("255.255.0.0"),
             raw("10.0.0.0"), raw("255.255.0.0"),
             raw("10.0.9.0"), raw("255.255.255.0"));  /* eth3's route is down */
    static const struct {
        const char *dst, *oif;
        int gateway, rc;
    } cases[] = {
        {"8.8.8.8", "eth0", 1, 0},
        {"192.168.0.9", "eth0", 0, 0},
        {"10.0.5.5", "eth1", 0, 0},      /* equal prefixes: the lower metric */
        {"10.0.9.9", "eth1", 0, 0},      /* the longer prefix is down */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nic_route rt;
        CHECK_EQ_INT(nic_route_proc(text, ip4(cases[i].dst), &rt), cases[i].rc);
        CHECK_EQ_STR(rt.oif, cases[i].oif);
        CHECK_EQ_INT(rt.gateway, cases[i].gateway);
    }
    struct nic_route rt;
    const char *no_default = "Iface\tDestination\n";
    CHECK_EQ_INT(nic_route_proc(no_default, ip4("8.8.8.8"), &rt), -ENETUNREACH);
    CHECK(!rt.found);
}

/* The fixture machine's /proc/net/route, as a little-endian kernel writes it. */
static void test_route_proc_fixture(void)
{
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        fprintf(stderr, "skip: the fixture's route table is little-endian\n");
        return;
    }
    char root[256], text[2048];
    fx_root_make(root, sizeof root);
    fx_machine_dgx(root, NULL);
    sysroot_set(root);
    CHECK(sysroot_read(text, sizeof text, "/proc/net/route") > 0);
    struct nic_route rt;
    CHECK_EQ_INT(nic_route_proc(text, ip4("10.0.3.4"), &rt), 0);
    CHECK_EQ_STR(rt.oif, "eth1");
    CHECK_EQ_INT(nic_route_proc(text, ip4("1.1.1.1"), &rt), 0);
    CHECK_EQ_STR(rt.oif, "eth0");
    CHECK(rt.gateway);
    sysroot_set(NULL);
    fx_root_remove(root);
}

/* ---------- pure choices ---------- */

/* "lo:127.0.0.1 eth0:10.0.0.7/down ib0:10.1.0.7/norun" -> addresses (up and running unless
 * marked; "lo" is the loopback interface). */
static void addrs(const char *spec, struct nic_addrs *a)
{
    memset(a, 0, sizeof *a);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        struct nic_addr *x = &a->a[a->n++];
        char *colon = strchr(tok, ':'), *slash = strchr(tok, '/');
        *colon = '\0';
        if (slash)
            *slash = '\0';
        snprintf(x->name, sizeof x->name, "%s", tok);
        x->family = strchr(colon + 1, ':') ? AF_INET6 : AF_INET;
        inet_pton(x->family, colon + 1, x->addr);
        x->flags = IFF_UP | IFF_RUNNING | (strcmp(tok, "lo") == 0 ? IFF_LOOPBACK : 0);
        if (slash && strcmp(slash + 1, "down") == 0)
            x->flags &= ~(unsigned)(IFF_UP | IFF_RUNNING);
        if (slash && strcmp(slash + 1, "norun") == 0)
            x->flags &= ~(unsigned)IFF_RUNNING;
    }
}

static void test_nccl_auto(void)
{
    static const struct {
        const char *spec, *want;
    } cases[] = {
        {"lo:127.0.0.1 eth0:10.0.0.7", "eth0"},
        {"lo:127.0.0.1 eth0:10.0.0.7 veth12:10.244.0.1 docker0:172.17.0.1", "eth0,veth12"},
        {"lo:127.0.0.1 eth0:10.0.0.7 ib0:10.1.0.7", "ib0"},
        {"lo:127.0.0.1 eth0:10.0.0.7 ib0:10.1.0.7/norun", "eth0"},
        {"lo:127.0.0.1 docker0:172.17.0.1", "docker0"},
        {"lo:127.0.0.1 virbr0:192.168.122.1", "lo"},
        {"lo:127.0.0.1 lo:::1 eth0:10.0.0.7 eth0:fe80::1", "eth0"},
        {"eth0:10.0.0.7/down", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nic_addrs a;
        char out[160];
        addrs(cases[i].spec, &a);
        nic_nccl_auto(&a, out, sizeof out);
        CHECK_EQ_STR(out, cases[i].want);
    }
}

static void test_choose_table(void)
{
    static const char *const host =
        "lo:127.0.0.1 eth0:10.0.0.7 eth1:192.168.5.7 docker0:172.17.0.1 veth3:10.244.0.1";
    static const struct {
        const char *spec, *master, *oif;
        int gateway, has_route;
        const char *want, *reason;
        int local, agrees;
    } cases[] = {
        /* the route decides */
        {host, "10.0.0.9", "eth0", 0, 1, "eth0", "the route to MASTER_ADDR 10.0.0.9 goes through eth0", 0, 0},
        {host, "8.8.8.8", "eth1", 1, 1, "eth1", "goes through eth1", 0, 0},
        /* the master is this node: the interface holding the address, not lo */
        {host, "192.168.5.7", "lo", 0, 1, "eth1", "eth1 holds MASTER_ADDR 192.168.5.7: this node hosts the master", 1, 0},
        {host, "127.0.0.1", "lo", 0, 1, "lo", "loopback address", 1, 0},
        {host, "127.0.0.2", "lo", 0, 1, "lo", "loopback address", 1, 0},
        /* a bridge on-link is where the master is; through a gateway it is a guess */
        {host, "172.17.0.5", "docker0", 0, 1, "docker0", "goes through docker0", 0, 0},
        {host, "10.9.9.9", "docker0", 1, 1, "eth0", "the route to it goes through docker0 via a gateway", 0, 0},
        {host, "10.9.9.9", "veth3", 1, 1, "eth0", "through veth3 via a gateway", 0, 0},
        /* no route: the first up interface that is not lo/docker/veth/virbr */
        {host, "10.9.9.9", "", 0, 0, "eth0", "no usable route to MASTER_ADDR 10.9.9.9: eth0 is the first", 0, 0},
        {"lo:127.0.0.1 veth1:10.1.0.1 eth0:10.0.0.7/down eth2:10.2.0.7", "10.9.9.9", "", 0, 0, "eth2", "eth2 is the first", 0, 0},
        {"lo:127.0.0.1 docker0:172.17.0.1", "10.9.9.9", "", 0, 0, "", "no up interface besides", 0, 0},
        /* NCCL alone would pick the same interface and nothing else */
        {"lo:127.0.0.1 eth0:10.0.0.7", "10.0.0.9", "eth0", 0, 1, "eth0", "goes through eth0", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nic_addrs a;
        struct nic_route rt = {0};
        struct nic_choice c;
        addrs(cases[i].spec, &a);
        rt.found = cases[i].has_route;
        snprintf(rt.oif, sizeof rt.oif, "%s", cases[i].oif);
        rt.gateway = cases[i].gateway;
        nic_choose(&a, &rt, AF_INET, ip4(cases[i].master), &c);
        int before = check_failures;
        CHECK_EQ_STR(c.ifname, cases[i].want);
        CHECK(strstr(c.reason, cases[i].reason) != NULL);
        CHECK_EQ_INT(c.master_local, cases[i].local);
        CHECK_EQ_INT(c.nccl_agrees, cases[i].agrees);
        CHECK_EQ_STR(c.master, cases[i].master);
        if (check_failures != before)
            fprintf(stderr, "  case %zu: %s -> %s (%s)\n", i, cases[i].master, c.ifname, c.reason);
    }
}

static void test_choose_addresses(void)
{
    struct nic_addrs a;
    addrs("lo:127.0.0.1 eth0:10.0.0.7 eth0:10.0.0.8", &a);
    struct nic_route rt = {.found = true, .oif = "eth0", .has_src = true};
    memcpy(rt.src, ip4("10.0.0.8"), 4);
    struct nic_choice c;
    nic_choose(&a, &rt, AF_INET, ip4("10.0.0.9"), &c);
    CHECK_EQ_STR(c.addr, "10.0.0.8");    /* the kernel's source address */
    CHECK(strstr(c.reason, "(source 10.0.0.8)") != NULL);
    nic_choose(&a, &rt, AF_INET, ip4("10.0.0.7"), &c);
    CHECK_EQ_STR(c.addr, "10.0.0.7");    /* the master's own address */
    /* IPv6 */
    addrs("lo:::1 eth0:fe80::1 eth0:2001:db8::7", &a);
    unsigned char m6[16];
    inet_pton(AF_INET6, "2001:db8::7", m6);
    struct nic_route none = {0};
    nic_choose(&a, &none, AF_INET6, m6, &c);
    CHECK_EQ_STR(c.ifname, "eth0");
    CHECK(c.master_local);
    inet_pton(AF_INET6, "2001:db8::9", m6);
    nic_choose(&a, &none, AF_INET6, m6, &c);
    CHECK_EQ_STR(c.ifname, "eth0");
    CHECK_EQ_STR(c.addr, "fe80::1");   /* first address of that interface */
}

/* ---------- the kernel ---------- */

static void test_loopback_host(void)
{
    struct nic_choice c;
    char err[256];
    CHECK_EQ_INT(nic_for_master("127.0.0.1", &c, err, sizeof err), 0);
    CHECK_EQ_STR(c.ifname, "lo");
    CHECK(c.master_local);
    CHECK_EQ_INT(nic_for_master("localhost", &c, err, sizeof err), 0);
    CHECK(c.master_local);
    CHECK_EQ_INT(nic_for_master("no-such-host.invalid", &c, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "MASTER_ADDR no-such-host.invalid does not resolve") == err);
    char ifname[IF_NAMESIZE];
    CHECK_EQ_INT(nic_ifname_for_addr("127.0.0.1", ifname, sizeof ifname), 0);
    CHECK_EQ_STR(ifname, "lo");
    CHECK_EQ_INT(nic_ifname_for_addr("192.0.2.55", ifname, sizeof ifname), -ENOENT);
    CHECK_EQ_INT(nic_ifname_for_addr("eth0", ifname, sizeof ifname), -EINVAL);
    struct nic_route rt;
    unsigned char lo6[16] = {[15] = 1};
    if (nic_route_get(AF_INET6, lo6, &rt) == 0) {
        CHECK(rt.local);
        CHECK_EQ_STR(rt.oif, "lo");
    }
    CHECK_EQ_INT(nic_route_get(AF_INET, ip4("127.0.0.1"), &rt), 0);
    CHECK(rt.local);
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* In a fresh network namespace: eth9 10.77.0.2/24 with the default route, docker0 172.17.0.1/16,
 * veth0 10.88.0.1/24. Exits with the number of
 * failed checks, or 77 when a namespace cannot be made here. */
static int netns_child(void)
{
    if (unshare(CLONE_NEWNET) < 0)
        return 77;
    /* veth pairs (the peers stay address-less) stand for the real kinds; IPv6 off so no
     * link-local addresses join the interface list */
    if (run("echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 && "
            "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && ip link set lo up && "
            "ip link add eth9 type veth peer name eth9p && ip link add docker0 type veth peer "
            "name docker0p && ip link add veth0 type veth peer name veth0p && "
            "for i in eth9 eth9p docker0 docker0p veth0 veth0p; do ip link set $i up; done && "
            "ip addr add 10.77.0.2/24 dev eth9 && ip addr add 172.17.0.1/16 dev docker0 && "
            "ip addr add 10.88.0.1/24 dev veth0 && ip route add default via 10.77.0.1 dev eth9") != 0)
        return 77;
    int before = check_failures, count0 = check_count;
    struct nic_choice c;
    char err[256];
    CHECK_EQ_INT(nic_for_master("10.1.2.3", &c, err, sizeof err), 0);
    CHECK_EQ_STR(c.ifname, "eth9");
    CHECK_EQ_STR(c.addr, "10.77.0.2");
    CHECK(strstr(c.reason, "goes through eth9 (source 10.77.0.2)") != NULL);
    CHECK_EQ_STR(c.nccl_auto, "eth9,veth0");   /* NCCL alone would also take veth0 */
    CHECK(!c.nccl_agrees);
    nic_for_master("172.17.0.5", &c, err, sizeof err);
    CHECK_EQ_STR(c.ifname, "docker0");          /* the master is on this host's bridge */
    nic_for_master("10.77.0.2", &c, err, sizeof err);
    CHECK_EQ_STR(c.ifname, "eth9");
    CHECK(c.master_local);
    char ifname[IF_NAMESIZE];
    CHECK_EQ_INT(nic_ifname_for_addr("10.88.0.1", ifname, sizeof ifname), 0);
    CHECK_EQ_STR(ifname, "veth0");
    /* a default route through the bridge is not trusted */
    run("ip route replace default via 172.17.0.254 dev docker0");
    nic_for_master("10.1.2.3", &c, err, sizeof err);
    CHECK_EQ_STR(c.ifname, "eth9");
    CHECK(strstr(c.reason, "through docker0 via a gateway") != NULL);
    /* no route at all */
    run("ip route del default");
    nic_for_master("10.1.2.3", &c, err, sizeof err);
    CHECK_EQ_STR(c.ifname, "eth9");
    CHECK(strstr(c.reason, "no usable route") != NULL);
    struct nic_route rt;
    CHECK(nic_route_get(AF_INET, ip4("10.1.2.3"), &rt) < 0);
    fprintf(stderr, "     in a network namespace: %d checks, %d failed\n", check_count - count0,
            check_failures - before);
    return check_failures - before;
}

static void test_netns(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(netns_child());
    int st;
    waitpid(pid, &st, 0);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (rc == 77) {
        fprintf(stderr, "skip: no network namespace (needs CAP_SYS_ADMIN and iproute2)\n");
        return;
    }
    check_count++;
    check_failures += rc;
}

int main(void)
{
    RUN(test_route_proc);
    RUN(test_route_proc_fixture);
    RUN(test_nccl_auto);
    RUN(test_choose_table);
    RUN(test_choose_addresses);
    RUN(test_loopback_host);
    RUN(test_netns);
    return check_result();
}
