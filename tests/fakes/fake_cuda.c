/* tests/fakes/fake_cuda.c — libcuda.so.1 (the driver API) or, built with FAKE_CUDART,
 * libcudart.so (the runtime), that record their use.
 *
 * Each entry point appends its name to the file named by $PODRUN_FAKE_CUDA_LOG, and loading the
 * library appends "load <library>", so a test can prove that a process neither called into CUDA
 * nor loaded it. The entry points are the ones that initialise CUDA or ask it about devices; every
 * one answers "no device" — unless, for the runtime, $PODRUN_FAKE_CUDA_DEVICES=N says there are
 * N devices: then the calls the nccl check makes work, with host memory for device memory and
 * streams that are busy while a fake NCCL operation runs on them (fake_cuda.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fakes/fake_cuda.h"

#ifdef FAKE_CUDART
#define FAKE_LIB "libcudart.so"
#else
#define FAKE_LIB "libcuda.so.1"
#endif

static void fake_record(const char *what)
{
    const char *path = getenv("PODRUN_FAKE_CUDA_LOG");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[128];
    size_t n = strlen(what);
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    memcpy(line, what, n);
    line[n++] = '\n';
    ssize_t w = write(fd, line, n);
    (void)w;
    close(fd);
}

__attribute__((constructor)) static void fake_loaded(void)
{
    fake_record("load " FAKE_LIB);
}

/* The entry points only record their name; their parameters are there for the signature. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define FAKE_ENTRY(name, ...)     \
    int name(__VA_ARGS__);        \
    int name(__VA_ARGS__)         \
    {                             \
        fake_record(#name);       \
        return 100; /* CUDA_ERROR_NO_DEVICE / cudaErrorNoDevice */ \
    }

#ifdef FAKE_CUDART
/* 0 when the runtime plays "no device" (no $PODRUN_FAKE_CUDA_DEVICES). */
static int fake_devices(void)
{
    const char *n = getenv("PODRUN_FAKE_CUDA_DEVICES");
    return n ? atoi(n) : 0;
}

#define FAKE_NO_DEVICE 100   /* cudaErrorNoDevice */

int cudaGetDeviceCount(int *count);
int cudaGetDeviceCount(int *count)
{
    fake_record("cudaGetDeviceCount");
    if (!fake_devices())
        return FAKE_NO_DEVICE;
    *count = fake_devices();
    return 0;
}

int cudaSetDevice(int dev);
int cudaSetDevice(int dev)
{
    fake_record("cudaSetDevice");
    if (!fake_devices())
        return FAKE_NO_DEVICE;
    return dev >= 0 && dev < fake_devices() ? 0 : 101;   /* cudaErrorInvalidDevice */
}

int cudaMalloc(void **p, size_t size);
int cudaMalloc(void **p, size_t size)
{
    fake_record("cudaMalloc");
    if (!fake_devices())
        return FAKE_NO_DEVICE;
    *p = calloc(1, size ? size : 1);
    return *p ? 0 : 2;   /* cudaErrorMemoryAllocation */
}

int cudaFree(void *p);
int cudaFree(void *p)
{
    fake_record("cudaFree");
    free(p);
    return 0;
}

int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
int cudaMemcpy(void *dst, const void *src, size_t n, int kind)
{
    (void)kind;
    fake_record("cudaMemcpy");
    if (!fake_devices())
        return FAKE_NO_DEVICE;
    memcpy(dst, src, n);
    return 0;
}

int cudaStreamCreateWithFlags(struct fake_stream **s, unsigned flags);
int cudaStreamCreateWithFlags(struct fake_stream **s, unsigned flags)
{
    (void)flags;
    fake_record("cudaStreamCreateWithFlags");
    if (!fake_devices())
        return FAKE_NO_DEVICE;
    *s = calloc(1, sizeof **s);
    if (!*s)
        return 2;
    (*s)->magic = FAKE_STREAM_MAGIC;
    return 0;
}

int cudaStreamQuery(struct fake_stream *s);
int cudaStreamQuery(struct fake_stream *s)
{
    static int said;   /* polled every millisecond: recorded once */
    if (!said++)
        fake_record("cudaStreamQuery");
    if (!fake_devices())
        return FAKE_NO_DEVICE;
    if (s && s->busy && s->busy(s->op))
        return 600;   /* cudaErrorNotReady */
    return 0;
}

int cudaStreamDestroy(struct fake_stream *s);
int cudaStreamDestroy(struct fake_stream *s)
{
    fake_record("cudaStreamDestroy");
    if (s)
        free(s->op);   /* the last operation (the fake NCCL frees the ones before it) */
    free(s);
    return 0;
}

const char *cudaGetErrorString(int e);
const char *cudaGetErrorString(int e)
{
    static char buf[64];
    snprintf(buf, sizeof buf, e == FAKE_NO_DEVICE ? "no CUDA-capable device is detected (fake)"
                                                  : "fake CUDA error %d", e);
    return buf;
}

FAKE_ENTRY(cudaGetDevice, int *dev)
FAKE_ENTRY(cudaGetDeviceProperties, void *prop, int dev)
FAKE_ENTRY(cudaGetDeviceProperties_v2, void *prop, int dev)
FAKE_ENTRY(cudaDeviceGetPCIBusId, char *buf, int len, int dev)
FAKE_ENTRY(cudaDeviceSynchronize, void)
FAKE_ENTRY(cudaRuntimeGetVersion, int *v)
FAKE_ENTRY(cudaDriverGetVersion, int *v)
FAKE_ENTRY(cudaInitDevice, int dev, unsigned flags, unsigned rflags)
FAKE_ENTRY(cudaSetDeviceFlags, unsigned flags)
#else
FAKE_ENTRY(cuInit, unsigned flags)
FAKE_ENTRY(cuDriverGetVersion, int *v)
FAKE_ENTRY(cuDeviceGetCount, int *count)
FAKE_ENTRY(cuDeviceGet, int *dev, int ordinal)
FAKE_ENTRY(cuDeviceGetName, char *buf, int len, int dev)
FAKE_ENTRY(cuDeviceGetUuid, void *uuid, int dev)
FAKE_ENTRY(cuDeviceGetUuid_v2, void *uuid, int dev)
FAKE_ENTRY(cuDeviceGetAttribute, int *v, int attr, int dev)
FAKE_ENTRY(cuDeviceGetPCIBusId, char *buf, int len, int dev)
FAKE_ENTRY(cuDevicePrimaryCtxRetain, void **ctx, int dev)
FAKE_ENTRY(cuCtxCreate_v2, void **ctx, unsigned flags, int dev)
FAKE_ENTRY(cuCtxSetCurrent, void *ctx)
FAKE_ENTRY(cuGetProcAddress, const char *sym, void **fn, int ver, unsigned long long flags)
FAKE_ENTRY(cuGetProcAddress_v2, const char *sym, void **fn, int ver, unsigned long long flags, void *status)
FAKE_ENTRY(cuMemAlloc_v2, void **p, size_t size)
#endif
