/* tests/unit/launcher/devices/test_cpu.c — the CPU topology read from the fixture machine's sysfs,
 * a PCI device's locality, this process's cpuset, and binding a forked child before exec. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/devices/cpu.h"
#include "launcher/devices/cpuset.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static char root[256];

static void fmt(const cpu_set_t *s, char *buf, size_t len)
{
    cpuset_format(s, buf, len);
}

static void test_topology(void)
{
    struct cpu_topo *t = malloc(sizeof *t);
    sysroot_set(root);
    CHECK_EQ_INT(cpu_topo_read(t), 0);
    char buf[128];
    CHECK_EQ_INT(t->nnodes, 2);
    fmt(&t->node[0], buf, sizeof buf);
    CHECK_EQ_STR(buf, "0-15,32-47");
    fmt(&t->node[1], buf, sizeof buf);
    CHECK_EQ_STR(buf, "16-31,48-63");
    CHECK_EQ_INT(CPU_COUNT(&t->present), 64);
    CHECK_EQ_INT(t->core[33], 1);      /* thread 33 is core 1's second thread */
    CHECK_EQ_INT(t->core[1], 1);
    CHECK_EQ_INT(t->package[20], 1);
    CHECK_EQ_INT(t->package[47], 0);
    CHECK_EQ_INT(t->llc[40], 8);       /* L3 of 8-15,40-47, not the L1/L2 of 8,40 */
    CHECK_EQ_INT(t->llc[63], 24);
    CHECK_EQ_INT(t->core[64], -1);
    free(t);
}

/* Without NUMA information the machine is one node; without /sys/devices/system/cpu, an error. */
static void test_topology_degraded(void)
{
    char r2[256];
    fx_root_make(r2, sizeof r2);
    fx_write(r2, "/sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
    fx_write(r2, "/sys/devices/system/cpu/cpu1/topology/physical_package_id", "0\n");
    sysroot_set(r2);
    struct cpu_topo *t = malloc(sizeof *t);
    CHECK_EQ_INT(cpu_topo_read(t), 0);
    CHECK_EQ_INT(t->nnodes, 1);
    CHECK_EQ_INT(CPU_COUNT(&t->node[0]), 2);
    CHECK_EQ_INT(t->core[0], -1);      /* no siblings file: unknown */
    CHECK_EQ_INT(t->llc[1], -1);
    fx_root_remove(r2);
    fx_root_make(r2, sizeof r2);
    sysroot_set(r2);
    CHECK_EQ_INT(cpu_topo_read(t), -ENOENT);
    fx_root_remove(r2);
    sysroot_set(root);
    free(t);
}

static void test_pci_locality(void)
{
    sysroot_set(root);
    int node;
    cpu_set_t cpus;
    char buf[64];
    CHECK_EQ_INT(cpu_pci_locality(FX_GPU_PCI[5], &node, &cpus), 0);
    CHECK_EQ_INT(node, 1);
    fmt(&cpus, buf, sizeof buf);
    CHECK_EQ_STR(buf, "16-31,48-63");
    fx_write(root, "/sys/bus/pci/devices/0000:01:00.0/numa_node", "-1\n");
    CHECK_EQ_INT(cpu_pci_locality("0000:01:00.0", &node, &cpus), 0);
    CHECK_EQ_INT(node, 0);             /* -1: one node, read as 0 */
    CHECK_EQ_INT(CPU_COUNT(&cpus), 0);
    CHECK_EQ_INT(cpu_pci_locality("0000:ff:00.0", &node, &cpus), -ENOENT);
    CHECK_EQ_INT(node, -1);
}

static void test_allowed(void)
{
    cpu_set_t a, b;
    CHECK_EQ_INT(cpu_allowed(&a), 0);
    sched_getaffinity(0, sizeof b, &b);
    CHECK(CPU_COUNT(&a) >= 1);
    CHECK(CPU_EQUAL(&a, &b));
}

/* A forked child binds itself, as a worker does before exec. */
static void test_bind_self(void)
{
    cpu_set_t allowed;
    cpu_allowed(&allowed);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            last = c;
    pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t one, now;
        CPU_ZERO(&one);
        CPU_SET(last, &one);
        int rc = cpu_bind_self(&one, 0);
        if (rc < 0)
            _exit(10);
        sched_getaffinity(0, sizeof now, &now);
        if (!CPU_EQUAL(&now, &one))
            _exit(11);
        if (rc == 0) {
            int mode = -1;
            unsigned long mask[2] = {0};
            if (syscall(SYS_get_mempolicy, &mode, mask, 128UL, NULL, 0UL) < 0 || mode != 2 ||
                mask[0] != 1UL)
                _exit(12);
        }
        cpu_set_t none;
        CPU_ZERO(&none);
        _exit(cpu_bind_self(&none, -1) == -EINVAL ? 0 : 13);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* A cpuset of `n` CPUs (0..n-1). */
static cpu_set_t first_cpus(int n)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c = 0; c < n; c++)
        CPU_SET(c, &s);
    return s;
}

/* Reads the usable CPUs of a fresh tree that `build` fills, for a cpuset of `ncpus`. */
static struct cpu_usable usable_in(void (*build)(const char *r), int ncpus)
{
    char r[256];
    struct cpu_usable u;
    fx_root_make(r, sizeof r);
    build(r);
    sysroot_set(r);
    cpu_set_t s = first_cpus(ncpus);
    cpu_usable_read(&s, &u);
    sysroot_set(root);
    fx_root_remove(r);
    return u;
}

/* cgroup v2, a Kubernetes container under its pod: the pod's limit (1.5 CPUs) is tighter than
 * the container's (3), so it decides, rounded down. */
static void v2_nested(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
    fx_write(r, "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "300000 100000\n");
    fx_write(r, "/sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n");
    fx_write(r, "/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
}

/* cgroup v2 in a cgroup namespace: the container's own cgroup is the mount's root. */
static void v2_ns(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "0::/\n");
    fx_write(r, "/sys/fs/cgroup/cpu.max", "100000 100000\n");
}

/* cgroup v2 without a namespace: /proc names the host's path, the mount is the container's. */
static void v2_no_ns(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "0::/system.slice/docker-abc.scope\n");
    fx_write(r, "/sys/fs/cgroup/cpu.max", "250000 100000\n");
}

/* cgroup v2 with no limit anywhere. */
static void v2_max(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "0::/a\n");
    fx_write(r, "/sys/fs/cgroup/a/cpu.max", "max 100000\n");
}

/* A quota under one CPU still leaves one worker. */
static void v2_half(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "0::/\n");
    fx_write(r, "/sys/fs/cgroup/cpu.max", "50000 100000\n");
}

/* cgroup v1, the cpu and cpuacct controllers mounted together. */
static void v1_joint(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "12:memory:/x\n4:cpu,cpuacct:/kubepods/pod1\n0::/\n");
    fx_write(r, "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us", "200000\n");
    fx_write(r, "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us", "100000\n");
    fx_write(r, "/sys/fs/cgroup/cpu,cpuacct/kubepods/cpu.cfs_quota_us", "-1\n");
    fx_write(r, "/sys/fs/cgroup/cpu,cpuacct/kubepods/cpu.cfs_period_us", "100000\n");
}

/* cgroup v1, cpu mounted alone (this is also a cpuacct-named line to be skipped). */
static void v1_alone(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "2:cpuacct:/\n1:cpu:/\n");
    fx_write(r, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000\n");
    fx_write(r, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    fx_write(r, "/sys/fs/cgroup/cpuacct/cpu.cfs_quota_us", "1\n");   /* never read */
    fx_write(r, "/sys/fs/cgroup/cpuacct/cpu.cfs_period_us", "100000\n");
}

/* Nonsense is no quota; no /proc/self/cgroup is no quota. */
static void bad(const char *r)
{
    fx_write(r, "/proc/self/cgroup", "0::/\nnonsense\n");
    fx_write(r, "/sys/fs/cgroup/cpu.max", "zero\n");
}

static void none(const char *r)
{
    (void)r;
}

static void test_usable(void)
{
    struct cpu_usable u = usable_in(v2_nested, 8);
    CHECK_EQ_INT(u.n, 1);
    CHECK_EQ_INT(u.cpuset, 8);
    CHECK_EQ_INT((int)u.quota_us, 150000);
    CHECK_EQ_STR(u.quota_file, "/sys/fs/cgroup/kubepods/pod1/cpu.max");
    u = usable_in(v2_nested, 1);
    CHECK_EQ_INT(u.n, 1);
    u = usable_in(v2_ns, 2);
    CHECK_EQ_INT(u.n, 1);
    CHECK_EQ_STR(u.quota_file, "/sys/fs/cgroup/cpu.max");
    u = usable_in(v2_no_ns, 64);
    CHECK_EQ_INT(u.n, 2);
    u = usable_in(v2_no_ns, 2);   /* a quota of 2.5 above a cpuset of 2: the cpuset decides */
    CHECK_EQ_INT(u.n, 2);
    CHECK_EQ_INT((int)u.quota_us, 250000);
    u = usable_in(v2_max, 4);
    CHECK_EQ_INT(u.n, 4);
    CHECK_EQ_INT((int)u.quota_us, 0);
    CHECK_EQ_STR(u.quota_file, "");
    u = usable_in(v2_half, 4);
    CHECK_EQ_INT(u.n, 1);
    u = usable_in(v1_joint, 16);
    CHECK_EQ_INT(u.n, 2);
    CHECK_EQ_STR(u.quota_file, "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us");
    u = usable_in(v1_alone, 2);
    CHECK_EQ_INT(u.n, 1);
    CHECK_EQ_STR(u.quota_file, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    u = usable_in(bad, 3);
    CHECK_EQ_INT(u.n, 3);
    u = usable_in(none, 5);
    CHECK_EQ_INT(u.n, 5);
    CHECK_EQ_INT((int)u.quota_us, 0);
}

int main(void)
{
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    RUN(test_topology);
    RUN(test_topology_degraded);
    RUN(test_pci_locality);
    RUN(test_allowed);
    RUN(test_bind_self);
    RUN(test_usable);
    fx_root_remove(root);
    return check_result();
}
