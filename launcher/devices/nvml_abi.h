/* launcher/devices/nvml_abi.h — the part of NVML's C interface podrun calls.
 *
 * podrun builds without the driver's headers; these declarations follow NVML's public nvml.h
 * (types, values, and the one struct podrun reads, nvmlPciInfo_t). The functions are reached
 * through dlopen("libnvidia-ml.so.1") only. */
#ifndef PODRUN_DEVICES_NVML_ABI_H
#define PODRUN_DEVICES_NVML_ABI_H

#include <stddef.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1

/* nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3 (busId is "00000000:3B:00.0"); _v2 fills the
 * same numeric fields, which is all podrun reads. */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

_Static_assert(offsetof(nvmlPciInfo_t, domain) == 16, "nvmlPciInfo_t.domain");
_Static_assert(offsetof(nvmlPciInfo_t, bus) == 20, "nvmlPciInfo_t.bus");
_Static_assert(offsetof(nvmlPciInfo_t, device) == 24, "nvmlPciInfo_t.device");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t size");

/* nvmlMemory_t, as nvmlDeviceGetMemoryInfo fills it (bytes). */
typedef struct nvmlMemory_st {
    unsigned long long total, free, used;
} nvmlMemory_t;

/* nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v3 (and _v2); the unversioned v1
 * function fills the first two fields only, 16 bytes a process (nvmlProcessInfo_v1_t). */
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t size");

/* The NVLink fabric a GPU belongs to (multi-node NVLink, e.g. GB200 NVL72): GPUs with the same
 * clusterUuid and cliqueId share one NVLink domain. Valid once state is COMPLETED and status is
 * NVML_SUCCESS. nvmlDeviceGetGpuFabricInfoV takes the versioned struct (version set by the caller);
 * the older nvmlDeviceGetGpuFabricInfo the unversioned one. */
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef unsigned char nvmlGpuFabricState_t;
typedef struct nvmlGpuFabricInfo_st {
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;
typedef struct nvmlGpuFabricInfo_v2_st {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
} nvmlGpuFabricInfoV_t;
#define nvmlGpuFabricInfo_v2 ((unsigned int)(sizeof(nvmlGpuFabricInfoV_t) | (2u << 24)))

_Static_assert(offsetof(nvmlGpuFabricInfo_t, cliqueId) == 20, "nvmlGpuFabricInfo_t.cliqueId");
_Static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t size");
_Static_assert(offsetof(nvmlGpuFabricInfoV_t, cliqueId) == 24, "nvmlGpuFabricInfoV_t.cliqueId");
_Static_assert(offsetof(nvmlGpuFabricInfoV_t, state) == 28, "nvmlGpuFabricInfoV_t.state");
_Static_assert(sizeof(nvmlGpuFabricInfoV_t) == 36, "nvmlGpuFabricInfoV_t size");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t size");

/* Events (nvmlEventSetWait_v2): a critical Xid's number is in eventData. */
typedef struct nvmlEventSet_st *nvmlEventSet_t;
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t size");

/* nvmlDeviceGetTotalEccErrors: uncorrected errors since the driver loaded (volatile). */
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_FEATURE_ENABLED 1

#endif
