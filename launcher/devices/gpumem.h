/* launcher/devices/gpumem.h — how much memory this node's GPUs hold, and which processes hold
 * it, from NVML (dlopen'ed, initialised and shut down inside each call, as gpu.c does).
 *
 * Asked before a restart: a worker that has exited may leave its GPU memory held for a while
 * (the driver tears the context down, or a child of the worker still holds it), and a new worker
 * started on top of it runs out of memory. Never CUDA: NVML only. */
#ifndef PODRUN_DEVICES_GPUMEM_H
#define PODRUN_DEVICES_GPUMEM_H

#include <stddef.h>
#include <stdint.h>

/* The memory used on all of this node's GPUs together into *used; with holders, "GPU 0: pid
 * 1234 (python3) 3.1 GiB; ..." (cut to hlen). soname NULL: libnvidia-ml.so.1. 0, or a negative
 * errno (-ENOENT: no NVML; -ENODEV: NVML failed) with why in err. */
int gpumem_used(const char *soname, uint64_t *used, char *holders, size_t hlen, char *err,
                size_t elen);

#endif
