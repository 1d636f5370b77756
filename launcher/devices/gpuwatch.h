/* launcher/devices/gpuwatch.h — this node's GPUs watched through NVML while the workers run.
 *
 * NVML is opened once (gpuwatch_open) and each check costs a few driver calls per GPU: the
 * critical-Xid events that arrived since the last check, taken with a zero wait
 * (nvmlEventSetWait_v2), the volatile uncorrectable ECC count, compared with the one at open,
 * and whether retired pages wait for a reset that did not at open (a GPU that started the run so
 * has been running that way; it is the change that is news). NVML_ERROR_GPU_IS_LOST from any of them is a GPU
 * fallen off the bus. Never CUDA. */
#ifndef PODRUN_DEVICES_GPUWATCH_H
#define PODRUN_DEVICES_GPUWATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/devices/nvml.h"

#define GPUWATCH_MAX 64
#define GPUWATCH_EVENTS 64   /* events taken per check: a storm is not drained in one go */

struct gpuwatch {
    const struct nvml *nv;   /* the process's one NVML table (nvml.h) */
    bool open;
    nvmlEventSet_t set;   /* NULL: no event support */
    unsigned n;
    struct {
        nvmlDevice_t h;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        unsigned long long ecc;   /* uncorrected errors at open */
        bool ecc_known, pending_known;
        bool pending;             /* retired pages were pending at open already */
    } gpu[GPUWATCH_MAX];
};

/* Opens NVML (soname NULL: libnvidia-ml.so.1), registers every GPU for critical Xid events and
 * notes its ECC count. 0; -ENOENT without NVML or its driver, -ENODEV when it fails; why in
 * err. Zero GPUs is not an error (nothing to watch). */
int gpuwatch_open(struct gpuwatch *w, const char *soname, char *err, size_t elen);
/* One check: 0 when every GPU is well; 1 with "GPU 3 (GPU-8932f937...): Xid 79, fallen off the
 * bus" in why for the first that is not. A non-critical Xid is named in note ("" if none). */
int gpuwatch_check(struct gpuwatch *w, char *why, size_t len, char *note, size_t nlen);
void gpuwatch_close(struct gpuwatch *w);

#endif
