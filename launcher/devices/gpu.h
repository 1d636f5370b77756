/* launcher/devices/gpu.h — the node's NVIDIA GPUs, found without CUDA.
 *
 * A process that has initialised CUDA cannot fork a child that uses CUDA, so the agent never
 * loads libcuda or libcudart. It asks NVML (dlopen("libnvidia-ml.so.1"), shut down again before
 * returning) and, when NVML is missing or fails, reads /proc/driver/nvidia/gpus/<pci>/information,
 * and then counts /dev/nvidia<minor>. All paths go through sysroot.h.
 *
 * The result is a plain struct with no handles in it: the agent fills it once at start, and it
 * can be copied, compared, or handed to a child as is. Which of the GPUs CUDA will show a worker
 * (NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) is visible.h's concern. */
#ifndef PODRUN_DEVICES_GPU_H
#define PODRUN_DEVICES_GPU_H

#include <sched.h>
#include <stdbool.h>

#define GPU_MAX 64          /* CUDA enumerates at most 64 devices per process */
#define GPU_MIG_MAX 8       /* MIG devices per GPU (7 on A100/H100) */
#define GPU_UUID_LEN 96     /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define GPU_NAME_LEN 96
#define GPU_PCI_LEN 16      /* "0000:3b:00.0" */
#define GPU_NOTE_LEN 512
#define GPU_FABRIC_LEN 64  /* "<cluster uuid>/<clique id>" */

enum gpu_source {
    GPU_SOURCE_NONE,        /* no GPU found: a CPU-only node */
    GPU_SOURCE_NVML,
    GPU_SOURCE_PROCFS,      /* /proc/driver/nvidia/gpus */
    GPU_SOURCE_DEV,         /* /dev/nvidia<minor> only: a count, no identity */
};

struct gpu_mig {
    char uuid[GPU_UUID_LEN];    /* "MIG-…" as CUDA_VISIBLE_DEVICES takes it */
    int gpu_instance;           /* GPU instance id, -1 unknown */
    int compute_instance;       /* compute instance id, -1 unknown */
};

struct gpu_dev {
    int index;                  /* NVML index, or the fallback's enumeration order */
    char uuid[GPU_UUID_LEN];    /* "GPU-…", "" unknown */
    char name[GPU_NAME_LEN];    /* model, "" unknown */
    char pci[GPU_PCI_LEN];      /* sysfs form "dddd:bb:dd.f", lower case; "" unknown */
    int minor;                  /* N of /dev/nvidiaN (not a CUDA ordinal), -1 unknown */
    int numa_node;              /* -1 unknown; a single-node machine's -1 in sysfs reads as 0 */
    cpu_set_t cpus;             /* CPUs near the GPU; empty when unknown */
    int mig;                    /* 1 MIG enabled, 0 disabled, -1 unknown or unsupported */
    int nmig;
    struct gpu_mig migs[GPU_MIG_MAX];
};

struct gpu_list {
    enum gpu_source source;
    int n;
    struct gpu_dev dev[GPU_MAX];
    char note[GPU_NOTE_LEN];    /* why a richer source was not used, devices skipped; "" none */
    char fabric[GPU_FABRIC_LEN]; /* the NVLink domain of the first GPU whose fabric registration
                                    completed, "<cluster uuid>/<clique id>"; "" none (NVML only) */
};

struct gpu_opts {
    const char *nvml_lib;       /* NULL: "libnvidia-ml.so.1" */
    bool skip_nvml;             /* go straight to /proc and /dev */
};

/* Fills *out with the node's GPUs in PCI bus order (NVML's own order). Never fails: a node
 * without GPUs gives n == 0 and GPU_SOURCE_NONE, and what went wrong on the way is in out->note.
 * NVML is initialised and shut down inside the call, so a child forked afterwards starts clean.
 * Returns 0, or -EINVAL for a NULL argument. */
int gpu_discover(const struct gpu_opts *opts, struct gpu_list *out);

/* The short name of a source, for reports: "NVML", "/proc/driver/nvidia", "/dev/nvidia*", "none". */
const char *gpu_source_name(enum gpu_source s);

#endif
