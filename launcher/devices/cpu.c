/* launcher/devices/cpu.c — the node's CPU topology (see cpu.h). */
#include "launcher/devices/cpu.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/devices/cpuset.h"
#include "launcher/devices/sysroot.h"

/* set_mempolicy's mode (linux/mempolicy.h), spelled here to keep the uapi header out. */
#define CPU_MPOL_BIND 2

static int cpu_read_set(cpu_set_t *out, const char *path_fmt, int arg)
{
    char buf[4096];
    int rc = sysroot_read(buf, sizeof buf, path_fmt, arg);
    if (rc < 0)
        return rc;
    return cpuset_parse(buf, out);
}

/* The lowest CPU of the highest-level Data or Unified cache of `cpu`, -1 when sysfs has none.
 * Instruction caches are skipped: they never span a core complex. */
static int cpu_llc_leader(int cpu)
{
    int best_level = -1, leader = -1;
    DIR *d = sysroot_opendir("/sys/devices/system/cpu/cpu%d/cache", cpu);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "index", 5) != 0)
            continue;
        char *end;
        long idx = strtol(e->d_name + 5, &end, 10);
        if (end == e->d_name + 5 || *end)
            continue;
        char type[32];
        long level;
        cpu_set_t shared;
        if (sysroot_read(type, sizeof type, "/sys/devices/system/cpu/cpu%d/cache/index%ld/type",
                         cpu, idx) < 0 ||
            (strcmp(type, "Data") != 0 && strcmp(type, "Unified") != 0))
            continue;
        if (sysroot_read_long(&level, "/sys/devices/system/cpu/cpu%d/cache/index%ld/level", cpu,
                              idx) < 0 ||
            level <= best_level)
            continue;
        char buf[4096];
        if (sysroot_read(buf, sizeof buf,
                         "/sys/devices/system/cpu/cpu%d/cache/index%ld/shared_cpu_list", cpu,
                         idx) < 0 ||
            cpuset_parse(buf, &shared) < 0 || cpuset_first(&shared) < 0)
            continue;
        best_level = (int)level;
        leader = cpuset_first(&shared);
    }
    closedir(d);
    return leader;
}

/* Fills the per-CPU fields of every cpuN directory. */
static int cpu_read_cpus(struct cpu_topo *t)
{
    DIR *d = sysroot_opendir("/sys/devices/system/cpu");
    if (!d)
        return -ENOENT;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "cpu", 3) != 0)
            continue;
        char *end;
        long cpu = strtol(e->d_name + 3, &end, 10);
        if (end == e->d_name + 3 || *end || cpu < 0 || cpu >= CPU_SETSIZE)
            continue;
        int c = (int)cpu;
        CPU_SET(c, &t->present);
        cpu_set_t sib;
        if (cpu_read_set(&sib, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                         c) == 0 &&
            cpuset_first(&sib) >= 0)
            t->core[c] = (short)cpuset_first(&sib);
        long pkg;
        if (sysroot_read_long(&pkg, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                              c) == 0 &&
            pkg >= 0 && pkg < 32768)
            t->package[c] = (short)pkg;
        int llc = cpu_llc_leader(c);
        if (llc >= 0)
            t->llc[c] = (short)llc;
    }
    closedir(d);
    return 0;
}

int cpu_topo_read(struct cpu_topo *t)
{
    memset(t, 0, sizeof *t);
    for (int c = 0; c < CPU_SETSIZE; c++)
        t->core[c] = t->package[c] = t->llc[c] = -1;
    int rc = cpu_read_cpus(t);
    if (rc < 0)
        return rc;
    for (int n = 0; n < CPU_MAX_NODES; n++) {
        if (cpu_read_set(&t->node[n], "/sys/devices/system/node/node%d/cpulist", n) < 0)
            CPU_ZERO(&t->node[n]);
        if (CPU_COUNT(&t->node[n]))
            t->nnodes = n + 1;
    }
    if (t->nnodes == 0) {
        /* No NUMA directory (a kernel without CONFIG_NUMA): one node with everything. */
        t->node[0] = t->present;
        t->nnodes = 1;
    }
    return 0;
}

int cpu_allowed(cpu_set_t *out)
{
    CPU_ZERO(out);
    if (sched_getaffinity(0, sizeof *out, out) < 0)
        return -errno;
    return 0;
}

int cpu_pci_locality(const char *pci, int *node, cpu_set_t *cpus)
{
    *node = -1;
    CPU_ZERO(cpus);
    long n;
    int rc = sysroot_read_long(&n, "/sys/bus/pci/devices/%s/numa_node", pci);
    if (rc == 0)
        *node = n < 0 ? 0 : (int)n;
    char buf[4096];
    int rc2 = sysroot_read(buf, sizeof buf, "/sys/bus/pci/devices/%s/local_cpulist", pci);
    if (rc2 >= 0 && cpuset_parse(buf, cpus) < 0)
        CPU_ZERO(cpus);
    return rc < 0 && rc2 < 0 ? rc : 0;
}

int cpu_bind_self(const cpu_set_t *cpus, int mem_node)
{
    if (sched_setaffinity(0, sizeof *cpus, cpus) < 0)
        return -errno;
    if (mem_node < 0)
        return 0;
    unsigned long mask[CPU_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    if (mem_node >= CPU_MAX_NODES)
        return 1;
    mask[mem_node / (8 * sizeof(unsigned long))] |= 1UL << (mem_node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_set_mempolicy, CPU_MPOL_BIND, mask, (unsigned long)CPU_MAX_NODES + 1) < 0)
        return 1;
    return 0;
}
