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

int main(void)
{
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    RUN(test_topology);
    RUN(test_topology_degraded);
    RUN(test_pci_locality);
    RUN(test_allowed);
    RUN(test_bind_self);
    fx_root_remove(root);
    return check_result();
}
