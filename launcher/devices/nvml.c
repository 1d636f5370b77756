/* launcher/devices/nvml.c — NVML's entry points, bound once per process (nvml.h). */
#include "launcher/devices/nvml.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define NVML_LIBS 4   /* names asked for in one process: the SONAME, and a test's paths */

static struct nvml nvml_libs[NVML_LIBS];

/* Binds n's table from its open library; 0, or -ENOENT naming the missing required symbol. */
static int nvml_bind(struct nvml *n, char *err, size_t elen)
{
    const dl_sym_t syms[] = {
        {"nvmlInit_v2", NULL, &n->init, false},
        {"nvmlShutdown", NULL, &n->shutdown, false},
        {"nvmlDeviceGetCount_v2", NULL, &n->count, false},
        {"nvmlDeviceGetHandleByIndex_v2", NULL, &n->by_index, false},
        {"nvmlDeviceGetUUID", NULL, &n->uuid, true},
        {"nvmlDeviceGetMemoryInfo", NULL, &n->mem, true},
        {"nvmlErrorString", NULL, &n->error_string, true},
        {"nvmlDeviceGetPciInfo_v3", NULL, &n->pci_v3, true},
        {"nvmlDeviceGetPciInfo_v2", NULL, &n->pci_v2, true},
        {"nvmlDeviceGetName", NULL, &n->name, true},
        {"nvmlDeviceGetMinorNumber", NULL, &n->minor, true},
        {"nvmlDeviceGetMigMode", NULL, &n->mig_mode, true},
        {"nvmlDeviceGetMaxMigDeviceCount", NULL, &n->mig_max, true},
        {"nvmlDeviceGetMigDeviceHandleByIndex", NULL, &n->mig_by_index, true},
        {"nvmlDeviceGetGpuInstanceId", NULL, &n->gi_id, true},
        {"nvmlDeviceGetComputeInstanceId", NULL, &n->ci_id, true},
        {"nvmlDeviceGetCpuAffinityWithinScope", NULL, &n->cpu_scoped, true},
        {"nvmlDeviceGetCpuAffinity", NULL, &n->cpu_affinity, true},
        {"nvmlDeviceGetMemoryAffinity", NULL, &n->mem_affinity, true},
        {"nvmlDeviceGetGpuFabricInfoV", NULL, &n->fabric_v, true},
        {"nvmlDeviceGetGpuFabricInfo", NULL, &n->fabric, true},
        {"nvmlDeviceGetComputeRunningProcesses_v3", NULL, &n->procs_v3, true},
        {"nvmlDeviceGetComputeRunningProcesses", NULL, &n->procs_v1, true},
        {"nvmlEventSetCreate", NULL, &n->set_create, true},
        {"nvmlEventSetFree", NULL, &n->set_free, true},
        {"nvmlDeviceRegisterEvents", NULL, &n->reg, true},
        {"nvmlEventSetWait_v2", NULL, &n->wait, true},
        {"nvmlDeviceGetTotalEccErrors", NULL, &n->ecc_total, true},
        {"nvmlDeviceGetRetiredPagesPendingStatus", NULL, &n->pending, true},
    };
    return dl_bind(&n->lib, syms, sizeof syms / sizeof *syms, err, elen);
}

int nvml_load(const char *soname, const struct nvml **out, char *err, size_t elen)
{
    const char *so = soname ? soname : NVML_SONAME;
    struct nvml *free_slot = NULL;
    for (int i = 0; i < NVML_LIBS; i++) {
        struct nvml *n = &nvml_libs[i];
        if (n->lib.handle && strcmp(n->lib.name, so) == 0) {
            *out = n;
            return 0;
        }
        if (!n->lib.handle && !free_slot)
            free_slot = n;
    }
    if (!free_slot) {
        snprintf(err, elen, "%s: not loaded: %d NVML libraries are open already", so, NVML_LIBS);
        return -ENOENT;
    }
    memset(free_slot, 0, sizeof *free_slot);
    int rc = dl_open(&free_slot->lib, so, err, elen);
    if (rc == 0 && (rc = nvml_bind(free_slot, err, elen)) < 0)
        dl_close(&free_slot->lib);
    if (rc < 0)
        return rc;
    *out = free_slot;
    return 0;
}

int nvml_need(const struct nvml *n, bool have, const char *sym, char *err, size_t elen)
{
    if (have)
        return 0;
    snprintf(err, elen, "%s: no symbol %s", n->lib.name, sym);
    return -ENOENT;
}
