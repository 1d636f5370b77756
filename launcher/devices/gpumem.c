/* launcher/devices/gpumem.c — GPU memory in use, and by whom, from NVML (gpumem.h). */
#include "launcher/devices/gpumem.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "launcher/devices/nvml.h"

#define PROCS_MAX 64   /* processes named per GPU */

/* The process's name from /proc/PID/comm, "?" when it is gone or not visible. */
static void comm_of(unsigned pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "re");
    if (!f || !fgets(out, (int)len, f))
        snprintf(out, len, "?");
    else
        out[strcspn(out, "\n")] = '\0';
    if (f)
        fclose(f);
}

/* Appends text to out (len bytes), cutting what does not fit. */
static void append(char *out, size_t len, const char *text)
{
    size_t u = strlen(out);
    if (u + 1 < len)
        snprintf(out + u, len - u, "%s", text);
}

/* GPU i's compute processes into holders: "GPU i: pid P (comm) X GiB, ...; ". */
static void name_holders(const struct nvml *n, nvmlDevice_t h, unsigned i, char *out, size_t len)
{
    static nvmlProcessInfo_t p3[PROCS_MAX];
    static nvmlProcessInfo_v1_t p1[PROCS_MAX];
    unsigned cnt = PROCS_MAX, pids[PROCS_MAX];
    unsigned long long bytes[PROCS_MAX];
    if (n->procs_v3 && n->procs_v3(h, &cnt, p3) == NVML_SUCCESS) {
        for (unsigned k = 0; k < cnt && k < PROCS_MAX; k++)
            pids[k] = p3[k].pid, bytes[k] = p3[k].usedGpuMemory;
    } else if (cnt = PROCS_MAX, n->procs_v1 && n->procs_v1(h, &cnt, p1) == NVML_SUCCESS) {
        for (unsigned k = 0; k < cnt && k < PROCS_MAX; k++)
            pids[k] = p1[k].pid, bytes[k] = p1[k].usedGpuMemory;
    } else {
        return;   /* too many to list, or not supported: the total says enough */
    }
    for (unsigned k = 0; k < cnt && k < PROCS_MAX; k++) {
        char comm[32], one[96];
        comm_of(pids[k], comm, sizeof comm);
        if (k == 0) {
            snprintf(one, sizeof one, "GPU %u: ", i);
            append(out, len, one);
        }
        snprintf(one, sizeof one, "pid %u (%s) %.2f GiB%s", pids[k], comm,
                 (double)bytes[k] / (1 << 30), k + 1 < cnt ? ", " : "; ");
        append(out, len, one);
    }
}

int gpumem_used(const char *soname, uint64_t *used, char *holders, size_t hlen, char *err,
                size_t elen)
{
    const struct nvml *n;
    const char *so = soname ? soname : NVML_SONAME;
    if (holders && hlen)
        holders[0] = '\0';
    int rc = nvml_load(so, &n, err, elen);
    if (rc == 0)
        rc = nvml_need(n, n->mem != NULL, "nvmlDeviceGetMemoryInfo", err, elen);
    if (rc < 0)
        return rc;
    nvmlReturn_t r = n->init();
    unsigned count = 0;
    *used = 0;
    if (r == NVML_SUCCESS && (r = n->count(&count)) == NVML_SUCCESS) {
        for (unsigned i = 0; i < count && r == NVML_SUCCESS; i++) {
            nvmlDevice_t h;
            nvmlMemory_t m;
            if ((r = n->by_index(i, &h)) != NVML_SUCCESS || (r = n->mem(h, &m)) != NVML_SUCCESS)
                break;
            *used += m.used;
            if (holders && m.used)
                name_holders(n, h, i, holders, hlen);
        }
    }
    size_t hl = holders ? strlen(holders) : 0;
    if (hl >= 2 && holders[hl - 2] == ';')
        holders[hl - 2] = '\0';   /* the last GPU's separator */
    if (r != NVML_SUCCESS)
        snprintf(err, elen, "%s: NVML error %d", so, r);
    n->shutdown();
    return r == NVML_SUCCESS ? 0 : -ENODEV;
}
