/* launcher/devices/cpu.h — the node's CPU topology, as the binding policies need it.
 *
 * Read from sysfs under sysroot.h: NUMA nodes (/sys/devices/system/node/node<N>/cpulist), each
 * CPU's physical core (topology/thread_siblings_list), socket (topology/physical_package_id) and
 * last-level cache (cache/index*, the highest level of a Data or Unified cache). Which CPUs this
 * container may use is sched_getaffinity(2), i.e. the cgroup cpuset. The per-rank sets themselves
 * are computed by binding.h, which is pure. */
#ifndef PODRUN_DEVICES_CPU_H
#define PODRUN_DEVICES_CPU_H

#include <sched.h>
#include <stdbool.h>

#define CPU_MAX_NODES 64

struct cpu_topo {
    int nnodes;                         /* highest NUMA node with CPUs + 1; 0 when unknown */
    cpu_set_t node[CPU_MAX_NODES];      /* each node's CPUs (not yet limited to the cpuset) */
    cpu_set_t present;                  /* CPUs with a topology entry */
    short core[CPU_SETSIZE];            /* lowest CPU of the same physical core, -1 unknown */
    short package[CPU_SETSIZE];         /* socket, -1 unknown */
    short llc[CPU_SETSIZE];             /* lowest CPU sharing the last-level cache, -1 unknown */
};

/* Reads the topology under the sysroot. A machine without NUMA information reads as one node
 * holding every present CPU. Returns 0, or -ENOENT when /sys/devices/system/cpu is missing. */
int cpu_topo_read(struct cpu_topo *t);

/* The CPUs this process may run on (sched_getaffinity of the calling thread). */
int cpu_allowed(cpu_set_t *out);

/* How many CPUs this container may keep busy, and which limit said so. */
struct cpu_usable {
    int n;                  /* min(cpuset, quota), at least 1: what "auto" and "cpu" count */
    int cpuset;             /* CPUs in the affinity mask (the online CPUs when it is empty) */
    long quota_us, period_us;   /* the tightest CPU quota found; quota_us 0: none */
    char quota_file[288];   /* where it was read, under the sysroot's root ("" none) */
};

/* The usable CPUs: the smaller of the cpuset (`allowed`) and the CPU quota rounded down, at
 * least 1. The quota is the cgroup's, found through /proc/self/cgroup and read under the
 * sysroot: cgroup v2's cpu.max ("max 100000", "150000 100000"), v1's cpu.cfs_quota_us
 * (-1: none) over cpu.cfs_period_us, in the process's own cgroup and each one above it (a
 * Kubernetes pod's limit sits above its containers'); the tightest wins. Where the own cgroup's
 * directory is not there (a container that sees its cgroup at the mount's root, without a
 * cgroup namespace), the mount's root is read instead. Never fails: no quota found is no quota. */
void cpu_usable_read(const cpu_set_t *allowed, struct cpu_usable *out);

/* A PCI device's NUMA node and nearby CPUs from /sys/bus/pci/devices/<pci>/{numa_node,
 * local_cpulist}. `pci` is the sysfs form "0000:3b:00.0". A node of -1 (a machine with one node)
 * reads as 0, as torch does; *node stays -1 and *cpus empty when the files are missing. */
int cpu_pci_locality(const char *pci, int *node, cpu_set_t *cpus);

/* Binds the calling process to `cpus` and, when mem_node >= 0, its memory to that node
 * (set_mempolicy MPOL_BIND, what `numactl -m` does for DeepSpeed). Made of system calls only, so a forked child may call it
 * before exec. Returns 0; 1 when the CPUs were bound but the memory policy was refused (a
 * container without CAP_SYS_NICE), as DeepSpeed then binds CPUs only; -errno when the CPU
 * binding failed. */
int cpu_bind_self(const cpu_set_t *cpus, int mem_node);

#endif
