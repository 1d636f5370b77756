/* launcher/devices/cpu.c — the node's CPU topology (see cpu.h). */
#include "launcher/devices/cpu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
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

/* One cgroup directory's quota: v2's "QUOTA PERIOD" in cpu.max, or v1's two files. 0 and the
 * quota in *q, *p; -ENOENT when it sets none (absent, "max", -1) or reads as nonsense. */
static int cpu_quota_at(const char *dir, bool v2, long *q, long *p)
{
    char buf[128];
    if (v2) {
        if (sysroot_read(buf, sizeof buf, "%s/cpu.max", dir) < 0 ||
            sscanf(buf, "%ld %ld", q, p) != 2)
            return -ENOENT;
    } else if (sysroot_read_long(q, "%s/cpu.cfs_quota_us", dir) < 0 ||
               sysroot_read_long(p, "%s/cpu.cfs_period_us", dir) < 0) {
        return -ENOENT;
    }
    return *q > 0 && *p > 0 ? 0 : -ENOENT;
}

/* Walks from the cgroup `path` under the mount `mnt` up to the mount's root, keeping the
 * tightest quota in u. */
static void cpu_quota_walk(struct cpu_usable *u, const char *mnt, const char *path, bool v2)
{
    char dir[256];
    if (snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(path, "/") ? path : "") >= (int)sizeof dir ||
        !sysroot_exists("%s", dir))
        snprintf(dir, sizeof dir, "%s", mnt);   /* no cgroup namespace: the mount is ours */
    for (;;) {
        long q, p;
        /* q/p < u->quota_us/u->period_us, without the division's rounding */
        if (cpu_quota_at(dir, v2, &q, &p) == 0 &&
            (u->quota_us == 0 || (double)q * (double)u->period_us <
                                     (double)u->quota_us * (double)p)) {
            u->quota_us = q;
            u->period_us = p;
            snprintf(u->quota_file, sizeof u->quota_file, "%s/%s", dir,
                     v2 ? "cpu.max" : "cpu.cfs_quota_us");
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= strlen(mnt) || !slash)
            break;
        *slash = '\0';
    }
}

/* Each line of /proc/self/cgroup is "ID:CONTROLLERS:PATH": v2's is "0::PATH", v1's CPU
 * controller is the one whose list holds "cpu" (mounted as /sys/fs/cgroup/cpu,cpuacct, with
 * /sys/fs/cgroup/cpu a link to it, or as /sys/fs/cgroup/cpu alone). */
static void cpu_quota_read(struct cpu_usable *u)
{
    char buf[4096];
    if (sysroot_read(buf, sizeof buf, "/proc/self/cgroup") < 0)
        return;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c2 = '\0';
        const char *ctl = c1 + 1, *path = c2 + 1;
        if (!*ctl) {
            cpu_quota_walk(u, "/sys/fs/cgroup", path, true);
            continue;
        }
        char list[128];
        snprintf(list, sizeof list, ",%s,", ctl);
        if (!strstr(list, ",cpu,"))
            continue;
        char mnt[160];
        snprintf(mnt, sizeof mnt, "/sys/fs/cgroup/%s", ctl);
        if (!sysroot_exists("%s", mnt))
            snprintf(mnt, sizeof mnt, "/sys/fs/cgroup/cpu");
        cpu_quota_walk(u, mnt, path, false);
    }
}

void cpu_usable_read(const cpu_set_t *allowed, struct cpu_usable *out)
{
    memset(out, 0, sizeof *out);
    out->cpuset = CPU_COUNT(allowed);
    if (out->cpuset <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        out->cpuset = n > 0 ? (int)n : 1;
    }
    out->n = out->cpuset;
    cpu_quota_read(out);
    if (out->quota_us > 0) {
        long whole = out->quota_us / out->period_us;
        if (whole < out->n)
            out->n = whole < 1 ? 1 : (int)whole;
    }
}
