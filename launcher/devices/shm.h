/* launcher/devices/shm.h — whether /dev/shm is large enough for NCCL and data loaders.
 *
 * Docker gives a container 64 MiB of /dev/shm and Kubernetes the same unless the pod mounts a
 * memory-backed emptyDir there. NCCL's shared-memory transport and PyTorch DataLoader workers
 * then fail mid-run ("unhandled system error", "No space left on device", "Bus error"). podrun
 * checks once at start and warns with the fix. */
#ifndef PODRUN_DEVICES_SHM_H
#define PODRUN_DEVICES_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_MIN_BYTES (1ULL << 30)   /* NCCL's troubleshooting guide asks for --shm-size=1g */

struct shm_info {
    bool mounted;          /* /dev/shm exists (under the sysroot) */
    uint64_t size;         /* bytes */
    uint64_t avail;        /* bytes free to an unprivileged writer */
};

/* statvfs(2) of /dev/shm under the sysroot. 0; -errno other than ENOENT (which reads as not
 * mounted). */
int shm_stat(struct shm_info *out);

/* Pure: 0 when /dev/shm is at least SHM_MIN_BYTES; 1 with one line in msg naming the size and the
 * fix otherwise. */
int shm_verdict(const struct shm_info *s, char *msg, size_t len);

#endif
