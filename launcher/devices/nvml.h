/* launcher/devices/nvml.h — the one table of the NVML entry points podrun uses, for GPU
 * discovery (gpu.c), GPU memory before a restart (gpumem.c) and the checks during a run
 * (gpuwatch.c).
 *
 * The library (libnvidia-ml.so.1, never CUDA) is opened and its symbols bound once per name and
 * process, the first time any of them asks; after that every caller gets the same table. It stays
 * loaded until the process exits: NVML's own nvmlInit_v2/nvmlShutdown, which each caller pairs
 * around its use, are what is counted, as the driver documents. A library that cannot be loaded,
 * or that lacks an entry point every caller needs, is not remembered: the next call tries again
 * (a driver installed meanwhile is found). The optional entry points (NULL when the installed
 * driver is older) are the callers' to check; nvml_need names the one a caller cannot do
 * without, in the same words as a missing required symbol (dl.h). */
#ifndef PODRUN_DEVICES_NVML_H
#define PODRUN_DEVICES_NVML_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/devices/dl.h"
#include "launcher/devices/nvml_abi.h"

#define NVML_SONAME "libnvidia-ml.so.1"

struct nvml {
    dl_lib_t lib;
    /* every caller's: bound or the load fails */
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    /* optional in the table; required by some callers (nvml_need) */
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    const char *(*error_string)(nvmlReturn_t);
    /* discovery (gpu.c) */
    nvmlReturn_t (*pci_v3)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*pci_v2)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*minor)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*mig_max)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*gi_id)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*ci_id)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*cpu_scoped)(nvmlDevice_t, unsigned int, unsigned long *, unsigned int);
    nvmlReturn_t (*cpu_affinity)(nvmlDevice_t, unsigned int, unsigned long *);
    nvmlReturn_t (*mem_affinity)(nvmlDevice_t, unsigned int, unsigned long *, unsigned int);
    nvmlReturn_t (*fabric_v)(nvmlDevice_t, nvmlGpuFabricInfoV_t *);
    nvmlReturn_t (*fabric)(nvmlDevice_t, nvmlGpuFabricInfo_t *);
    /* memory in use (gpumem.c) */
    nvmlReturn_t (*procs_v3)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
    nvmlReturn_t (*procs_v1)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *);
    /* the checks during a run (gpuwatch.c) */
    nvmlReturn_t (*set_create)(nvmlEventSet_t *);
    nvmlReturn_t (*set_free)(nvmlEventSet_t);
    nvmlReturn_t (*reg)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
    nvmlReturn_t (*ecc_total)(nvmlDevice_t, int, int, unsigned long long *);
    nvmlReturn_t (*pending)(nvmlDevice_t, int *);
};

/* The table of `soname` (NULL: NVML_SONAME) into *out: 0, or -ENOENT with "NAME: <dlerror>" or
 * "NAME: no symbol SYM" in err. */
int nvml_load(const char *soname, const struct nvml **out, char *err, size_t elen);
/* 0 when `have` (the caller's required entry point is bound), else -ENOENT with
 * "NAME: no symbol SYM" in err. */
int nvml_need(const struct nvml *n, bool have, const char *sym, char *err, size_t elen);

#endif
