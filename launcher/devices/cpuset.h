/* launcher/devices/cpuset.h — CPU sets in the forms the kernel and NVML write them.
 *
 * Pure code. The set type is glibc's cpu_set_t (CPU_SETSIZE = 1024 CPUs), the one
 * sched_getaffinity and sched_setaffinity take. */
#ifndef PODRUN_DEVICES_CPUSET_H
#define PODRUN_DEVICES_CPUSET_H

#include <sched.h>
#include <stddef.h>

/* Parses a kernel CPU list ("0-3,8,10-11", as in sysfs cpulist files and `taskset -c`) into
 * *out. Whitespace around entries is allowed; "" is the empty set. -EINVAL for anything else
 * (a reversed range, a non-number), -ERANGE for a CPU >= CPU_SETSIZE. */
int cpuset_parse(const char *text, cpu_set_t *out);

/* Writes the set as a CPU list ("0-3,8"), "" when empty. -ENOSPC when buf is too small. */
int cpuset_format(const cpu_set_t *set, char *buf, size_t len);

/* Converts NVML's bitmask (64 CPUs per unsigned long, `words` of them) into a set. */
void cpuset_from_mask(const unsigned long *mask, size_t words, cpu_set_t *out);

/* The lowest CPU in the set, -1 when empty. */
int cpuset_first(const cpu_set_t *set);

#endif
