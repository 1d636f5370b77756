/* launcher/devices/visible.h — which of the node's GPUs CUDA will show a worker, and in what
 * order.
 *
 * Pure code: the GPU list (gpu.h) and three environment values in, the visible devices out.
 *
 * NVIDIA_VISIBLE_DEVICES is the container runtime's: it is applied when the container is
 * created and GPUs inside are renumbered from 0. podrun applies it again only where that cannot
 * be wrong: "none", "void" and "" mean no GPU; UUIDs filter by UUID; host indices filter only
 * when NVML sees more GPUs than the list names (a privileged container or a bare host, where the
 * runtime did not filter); "all", unset and a device-list path mean every GPU.
 *
 * CUDA_VISIBLE_DEVICES follows CUDA's own reading, as torch mirrors it: unset is every device;
 * "" is none; a list of indices, or of GPU-/MIG- UUID prefixes (each matching exactly one
 * device), kept in the order given; the first entry that is invalid, ambiguous, past the last
 * device or of another kind ends the list; a device named twice empties it.
 *
 * CUDA_DEVICE_ORDER: PCI_BUS_ID numbers devices in PCI order, which podrun knows. The default,
 * FASTEST_FIRST, ranks devices with a heuristic CUDA does not publish; podrun can only say that
 * devices of one model rank in PCI order. So on a node whose GPUs differ (or with MIG devices,
 * which differ in size) the CUDA ordinal of each device is unknown to podrun unless the list
 * names devices by UUID: `order_known` says which case holds. A worker given one device by UUID
 * (per-rank visibility) sees exactly that device, whatever the order.
 *
 * MIG: a GPU with MIG enabled contributes its MIG devices, not itself; one without MIG devices
 * contributes nothing. */
#ifndef PODRUN_DEVICES_VISIBLE_H
#define PODRUN_DEVICES_VISIBLE_H

#include <stdbool.h>

#include "launcher/devices/gpu.h"

struct gpu_slot {
    int gpu;                     /* index into gpu_list.dev */
    int mig;                     /* index into that GPU's migs[], -1: the whole GPU */
    char token[GPU_UUID_LEN];    /* the CUDA_VISIBLE_DEVICES value that gives a worker exactly
                                    this device: its UUID, else its ordinal with the variable
                                    unset */
};

struct gpu_visible {
    int n;
    struct gpu_slot slot[GPU_MAX];   /* slot i is CUDA device i of a worker that inherits */
    bool order_known;                /* whether slot i is known to be CUDA's device i */
    bool mig;                        /* some slot is a MIG device */
    char note[GPU_NOTE_LEN];         /* what was applied or dropped, and why; "" none */
};

struct gpu_visible_env {
    const char *nvidia_visible_devices;  /* NULL: unset */
    const char *cuda_visible_devices;
    const char *cuda_device_order;
};

/* Resolves the visible devices. Returns 0, or -EINVAL for a NULL argument. */
int visible_resolve(const struct gpu_list *g, const struct gpu_visible_env *env,
                    struct gpu_visible *out);

#endif
