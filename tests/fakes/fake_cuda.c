/* tests/fakes/fake_cuda.c — libcuda.so.1 (the driver API) or, built with FAKE_CUDART,
 * libcudart.so (the runtime), that only record their use.
 *
 * Each entry point appends its name to the file named by $PODRUN_FAKE_CUDA_LOG, and loading the
 * library appends "load <library>", so a test can prove that a process neither called into CUDA
 * nor loaded it. The entry points are the ones that initialise CUDA or ask it about devices; every
 * one answers "no device". */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
FAKE_ENTRY(cudaGetDeviceCount, int *count)
FAKE_ENTRY(cudaSetDevice, int dev)
FAKE_ENTRY(cudaGetDevice, int *dev)
FAKE_ENTRY(cudaGetDeviceProperties, void *prop, int dev)
FAKE_ENTRY(cudaGetDeviceProperties_v2, void *prop, int dev)
FAKE_ENTRY(cudaDeviceGetPCIBusId, char *buf, int len, int dev)
FAKE_ENTRY(cudaMalloc, void **p, size_t size)
FAKE_ENTRY(cudaFree, void *p)
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
