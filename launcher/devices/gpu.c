/* launcher/devices/gpu.c — the node's NVIDIA GPUs, found without CUDA (see gpu.h).
 *
 * Order of sources, richest first: NVML; /proc/driver/nvidia/gpus (the NVIDIA container runtime
 * mounts only the container's GPUs there); /dev/nvidia<minor> (a count only — a minor is not a
 * CUDA ordinal). Every source's result is sorted by PCI address, the order NVML and
 * CUDA_DEVICE_ORDER=PCI_BUS_ID use. */
#include "launcher/devices/gpu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/devices/cpu.h"
#include "launcher/devices/cpuset.h"
#include "launcher/devices/nvml.h"
#include "launcher/devices/sysroot.h"

#define GPU_MASK_WORDS (CPU_SETSIZE / (8 * sizeof(unsigned long)))

const char *gpu_source_name(enum gpu_source s)
{
    switch (s) {
    case GPU_SOURCE_NVML: return "NVML";
    case GPU_SOURCE_PROCFS: return "/proc/driver/nvidia";
    case GPU_SOURCE_DEV: return "/dev/nvidia*";
    default: return "none";
    }
}

/* Appends one sentence to the list's note ("; " between them); a full note keeps its start. */
static void gpu_note(struct gpu_list *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gpu_note(struct gpu_list *g, const char *fmt, ...)
{
    size_t used = strlen(g->note);
    if (used + 3 >= sizeof g->note)
        return;
    if (used) {
        memcpy(g->note + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->note + used, sizeof g->note - used, fmt, ap);
    va_end(ap);
}

static const char *gpu_nvml_error(const struct nvml *n, nvmlReturn_t rc)
{
    const char *s = n->error_string ? n->error_string(rc) : NULL;
    return s ? s : "NVML error";
}

/* The one NVML table (nvml.h), with the UUID that names every device; 0 or -ENOENT, why in
 * err. */
static int gpu_nvml_open(const struct nvml **n, const char *soname, char *err, size_t errlen)
{
    int rc = nvml_load(soname, n, err, errlen);
    return rc < 0 ? rc : nvml_need(*n, (*n)->uuid != NULL, "nvmlDeviceGetUUID", err, errlen);
}

/* The GPU's MIG devices, when MIG is enabled. Handles that do not exist (unused slots) are
 * skipped; NVML numbers MIG devices densely but not necessarily from 0 after reconfiguration. */
static void gpu_nvml_migs(const struct nvml *n, nvmlDevice_t h, struct gpu_dev *d)
{
    unsigned int cur = 0, pending = 0, max = 0;
    if (!n->mig_mode || n->mig_mode(h, &cur, &pending) != NVML_SUCCESS)
        return;  /* not supported: d->mig stays -1 */
    d->mig = cur == NVML_DEVICE_MIG_ENABLE;
    if (!d->mig || !n->mig_max || !n->mig_by_index || n->mig_max(h, &max) != NVML_SUCCESS)
        return;
    for (unsigned int i = 0; i < max && d->nmig < GPU_MIG_MAX; i++) {
        nvmlDevice_t m;
        struct gpu_mig *mg = &d->migs[d->nmig];
        if (n->mig_by_index(h, i, &m) != NVML_SUCCESS ||
            n->uuid(m, mg->uuid, sizeof mg->uuid) != NVML_SUCCESS)
            continue;
        unsigned int id;
        mg->gpu_instance = n->gi_id && n->gi_id(m, &id) == NVML_SUCCESS ? (int)id : -1;
        mg->compute_instance = n->ci_id && n->ci_id(m, &id) == NVML_SUCCESS ? (int)id : -1;
        d->nmig++;
    }
}

/* NUMA node and nearby CPUs: NVML's node-scoped affinity first, sysfs for what it cannot say. */
static void gpu_nvml_locality(const struct nvml *n, nvmlDevice_t h, struct gpu_dev *d)
{
    unsigned long mask[GPU_MASK_WORDS];
    memset(mask, 0, sizeof mask);
    if ((n->cpu_scoped &&
         n->cpu_scoped(h, GPU_MASK_WORDS, mask, NVML_AFFINITY_SCOPE_NODE) == NVML_SUCCESS) ||
        (n->cpu_affinity && (memset(mask, 0, sizeof mask),
                             n->cpu_affinity(h, GPU_MASK_WORDS, mask) == NVML_SUCCESS)))
        cpuset_from_mask(mask, GPU_MASK_WORDS, &d->cpus);
    unsigned long nodes[CPU_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    if (n->mem_affinity &&
        n->mem_affinity(h, CPU_MAX_NODES / (8 * sizeof(unsigned long)), nodes,
                        NVML_AFFINITY_SCOPE_NODE) == NVML_SUCCESS) {
        for (int b = 0; b < CPU_MAX_NODES && d->numa_node < 0; b++)
            if ((nodes[b / (8 * sizeof(unsigned long))] >> (b % (8 * sizeof(unsigned long)))) & 1UL)
                d->numa_node = b;
    }
    if (d->pci[0] && (d->numa_node < 0 || CPU_COUNT(&d->cpus) == 0)) {
        int node;
        cpu_set_t cpus;
        cpu_pci_locality(d->pci, &node, &cpus);
        if (d->numa_node < 0)
            d->numa_node = node;
        if (CPU_COUNT(&d->cpus) == 0)
            d->cpus = cpus;
    }
}

/* The GPU's NVLink domain into g->fabric, when it has none yet: the versioned call first, the
 * older one on drivers without it. A GPU whose registration has not completed has no domain. A
 * node whose GPUs report different domains keeps the first and says so in the note. */
static void gpu_nvml_fabric(const struct nvml *n, nvmlDevice_t h, struct gpu_list *g)
{
    nvmlGpuFabricInfoV_t f;
    memset(&f, 0, sizeof f);
    f.version = nvmlGpuFabricInfo_v2;
    nvmlReturn_t rc = n->fabric_v ? n->fabric_v(h, &f) : NVML_ERROR_NOT_SUPPORTED;
    if (rc != NVML_SUCCESS && n->fabric) {
        nvmlGpuFabricInfo_t o;
        memset(&o, 0, sizeof o);
        rc = n->fabric(h, &o);
        memcpy(f.clusterUuid, o.clusterUuid, sizeof f.clusterUuid);
        f.status = o.status;
        f.cliqueId = o.cliqueId;
        f.state = o.state;
    }
    if (rc != NVML_SUCCESS || f.state != NVML_GPU_FABRIC_STATE_COMPLETED ||
        f.status != NVML_SUCCESS)
        return;
    /* an all-zero ClusterUUID is a GPU outside any multi-node NVLink domain (H100 systems
     * without an NVLink switch report it so): taken as a domain, every such node would share it */
    static const unsigned char none[sizeof f.clusterUuid];
    if (!memcmp(f.clusterUuid, none, sizeof none))
        return;
    const unsigned char *u = f.clusterUuid;
    char dom[GPU_FABRIC_LEN];
    snprintf(dom, sizeof dom,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/%u", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15], f.cliqueId);
    if (!g->fabric[0])
        memcpy(g->fabric, dom, sizeof dom);
    else if (strcmp(g->fabric, dom) != 0)
        gpu_note(g, "GPUs of this node are in different NVLink domains (%s, %s); the node "
                    "joins as %s", g->fabric, dom, g->fabric);
}

static void gpu_dev_init(struct gpu_dev *d, int index)
{
    memset(d, 0, sizeof *d);
    d->index = index;
    d->minor = -1;
    d->numa_node = -1;
    d->mig = -1;
}

/* One NVML device; 0, or a negative value when it cannot be used (and the note says why). */
static int gpu_nvml_device(const struct nvml *n, unsigned int i, struct gpu_list *g)
{
    nvmlDevice_t h;
    struct gpu_dev *d = &g->dev[g->n];
    gpu_dev_init(d, (int)i);
    nvmlReturn_t rc = n->by_index(i, &h);
    if (rc == NVML_SUCCESS)
        rc = n->uuid(h, d->uuid, sizeof d->uuid);
    if (rc != NVML_SUCCESS) {
        gpu_note(g, "NVML device %u skipped: %s", i, gpu_nvml_error(n, rc));
        return -ENODEV;
    }
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    if ((n->pci_v3 && n->pci_v3(h, &pci) == NVML_SUCCESS) ||
        (n->pci_v2 && n->pci_v2(h, &pci) == NVML_SUCCESS))
        snprintf(d->pci, sizeof d->pci, "%04x:%02x:%02x.0", pci.domain & 0xffff, pci.bus & 0xff,
                 pci.device & 0x1f);
    if (n->name && n->name(h, d->name, sizeof d->name) != NVML_SUCCESS)
        d->name[0] = '\0';
    unsigned int minor;
    if (n->minor && n->minor(h, &minor) == NVML_SUCCESS)
        d->minor = (int)minor;
    gpu_nvml_migs(n, h, d);
    gpu_nvml_locality(n, h, d);
    gpu_nvml_fabric(n, h, g);
    g->n++;
    return 0;
}

static int gpu_from_nvml(const struct gpu_opts *o, struct gpu_list *g)
{
    const struct nvml *n;
    char err[256];
    const char *soname = o && o->nvml_lib ? o->nvml_lib : NVML_SONAME;
    if (gpu_nvml_open(&n, soname, err, sizeof err) < 0) {
        gpu_note(g, "%s", err);
        return -ENOENT;
    }
    nvmlReturn_t rc = n->init();
    if (rc != NVML_SUCCESS) {
        gpu_note(g, "%s: nvmlInit_v2 failed: %s", soname, gpu_nvml_error(n, rc));
        return -ENODEV;
    }
    unsigned int count = 0;
    rc = n->count(&count);
    if (rc != NVML_SUCCESS)
        gpu_note(g, "%s: nvmlDeviceGetCount_v2 failed: %s", soname, gpu_nvml_error(n, rc));
    else if (count > GPU_MAX) {
        gpu_note(g, "NVML lists %u GPUs; podrun uses the first %d", count, GPU_MAX);
        count = GPU_MAX;
    }
    for (unsigned int i = 0; rc == NVML_SUCCESS && i < count; i++)
        gpu_nvml_device(n, i, g);
    n->shutdown();
    return rc == NVML_SUCCESS ? 0 : -ENODEV;
}

/* The value after "Key:" on a line of an `information` file, trimmed. */
static int gpu_info_field(const char *text, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    for (const char *line = text; *line;) {
        size_t n = strcspn(line, "\n");
        if (n > kl && strncmp(line, key, kl) == 0 && line[kl] == ':') {
            const char *v = line + kl + 1;
            size_t vl = n - kl - 1;
            while (vl > 0 && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl > 0 && isspace((unsigned char)v[vl - 1]))
                vl--;
            if (vl >= len)
                vl = len - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return 0;
        }
        line += n;
        if (*line)
            line++;
    }
    return -ENOENT;
}

/* "0000:3B:00.0" or "00000000:3b:00.0" -> "0000:3b:00.0"; -EINVAL when it is not a PCI address. */
static int gpu_pci_normalize(const char *in, char *out, size_t len)
{
    unsigned int dom, bus, dev, fn;
    char tail;
    if (sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || dom > 0xffff ||
        bus > 0xff || dev > 0x1f || fn > 7)
        return -EINVAL;
    snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

static int gpu_from_procfs(struct gpu_list *g)
{
    DIR *d = sysroot_opendir("/proc/driver/nvidia/gpus");
    if (!d)
        return -ENOENT;
    struct dirent *e;
    while ((e = readdir(d)) && g->n < GPU_MAX) {
        char pci[GPU_PCI_LEN], info[4096], v[GPU_NAME_LEN];
        if (gpu_pci_normalize(e->d_name, pci, sizeof pci) < 0)
            continue;
        struct gpu_dev *dv = &g->dev[g->n];
        gpu_dev_init(dv, g->n);
        memcpy(dv->pci, pci, sizeof pci);
        if (sysroot_read(info, sizeof info, "/proc/driver/nvidia/gpus/%s/information",
                         e->d_name) >= 0) {
            gpu_info_field(info, "Model", dv->name, sizeof dv->name);
            gpu_info_field(info, "GPU UUID", dv->uuid, sizeof dv->uuid);
            if (gpu_info_field(info, "Device Minor", v, sizeof v) == 0)
                dv->minor = atoi(v);
        }
        cpu_pci_locality(dv->pci, &dv->numa_node, &dv->cpus);
        g->n++;
    }
    closedir(d);
    return g->n > 0 ? 0 : -ENOENT;
}

static int gpu_from_dev(struct gpu_list *g)
{
    DIR *d = sysroot_opendir("/dev");
    if (!d)
        return -ENOENT;
    struct dirent *e;
    while ((e = readdir(d)) && g->n < GPU_MAX) {
        if (strncmp(e->d_name, "nvidia", 6) != 0 || !isdigit((unsigned char)e->d_name[6]))
            continue;
        char *end;
        long minor = strtol(e->d_name + 6, &end, 10);
        if (*end || minor < 0 || minor > 255)
            continue;
        gpu_dev_init(&g->dev[g->n], g->n);
        g->dev[g->n].minor = (int)minor;
        g->n++;
    }
    closedir(d);
    return g->n > 0 ? 0 : -ENOENT;
}

/* PCI address when both have one, then minor, then the source's index. */
static int gpu_cmp(const void *a, const void *b)
{
    const struct gpu_dev *x = a, *y = b;
    if (x->pci[0] && y->pci[0])
        return strcmp(x->pci, y->pci);
    if (x->minor != y->minor)
        return x->minor < y->minor ? -1 : 1;
    return x->index - y->index;
}

/* The first source that finds a GPU; out->n counts only that source's devices. */
static enum gpu_source gpu_find(const struct gpu_opts *opts, struct gpu_list *out)
{
    if (!(opts && opts->skip_nvml) && gpu_from_nvml(opts, out) == 0 && out->n > 0)
        return GPU_SOURCE_NVML;
    out->n = 0;
    if (gpu_from_procfs(out) == 0)
        return GPU_SOURCE_PROCFS;
    out->n = 0;
    if (gpu_from_dev(out) == 0) {
        gpu_note(out, "only /dev/nvidia* found: the GPUs are counted, their UUIDs and NUMA nodes "
                      "are unknown");
        return GPU_SOURCE_DEV;
    }
    out->n = 0;
    return GPU_SOURCE_NONE;
}

int gpu_discover(const struct gpu_opts *opts, struct gpu_list *out)
{
    if (!out)
        return -EINVAL;
    /* each entry is cleared as a GPU is found: clearing all of them would touch 76 KiB for none */
    out->n = 0;
    out->note[0] = '\0';
    out->source = gpu_find(opts, out);
    qsort(out->dev, (size_t)out->n, sizeof out->dev[0], gpu_cmp);
    if (out->source != GPU_SOURCE_NVML)
        for (int i = 0; i < out->n; i++)
            out->dev[i].index = i;
    return 0;
}
