/* launcher/preflight/nccl_abi.h — the few NCCL and CUDA runtime types the nccl check uses, as the
 * libraries define them, so podrun builds without either installed (both are dlopen'ed by the
 * check's helper process only).
 *
 * NCCL (nccl.h): results, the 128-byte unique id, and ncclConfig_t. A config is read by the
 * library up to the `size` it carries, and only the fields that existed in the `version` it
 * carries count (later ones take their defaults), so podrun passes the 2.14 layout — size, magic,
 * version, blocking — as a 2.14 config: every NCCL from 2.14 on reads it the same way. Older NCCL
 * has no ncclCommInitRankConfig, which the check then names as missing. */
#ifndef PODRUN_PREFLIGHT_NCCL_ABI_H
#define PODRUN_PREFLIGHT_NCCL_ABI_H

#include <stddef.h>

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm *ncclComm_t;

#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_VERSION_2_14 21400   /* NCCL_VERSION(2, 14, 0) */

typedef struct {
    size_t size;            /* sizeof this struct: the library copies no more */
    unsigned int magic;
    unsigned int version;   /* the layout's: fields of later versions keep their defaults */
    int blocking;
} ncclConfig_t;

enum { ncclFloat32 = 7 };   /* ncclDataType_t */
enum { ncclSum = 0 };       /* ncclRedOp_t */

/* CUDA runtime (cuda_runtime_api.h) */
typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorNotReady = 600 };
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
enum { cudaStreamNonBlocking = 1 };

#endif
