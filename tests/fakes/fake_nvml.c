/* tests/fakes/fake_nvml.c — a libnvidia-ml.so.1 whose GPUs come from a file.
 *
 * $PODRUN_FAKE_NVML names the file, read at each nvmlInit_v2:
 *   init RC                 what nvmlInit_v2 returns (default 0)
 *   count RC                what nvmlDeviceGetCount_v2 returns
 *   affinity RC             what the CPU and memory affinity calls return (3: not supported)
 *   gpu uuid=GPU-… pci=dddd:bb:dd.f name=Model_Name minor=N numa=N cpus=LIST [mig=0|1] [handle=RC]
 *       [used=BYTES] [procs=PID:BYTES,...]   memory in use and the compute processes holding it
 *   mig gpu=I uuid=MIG-… gi=N ci=N      a MIG device of the I-th gpu line
 *   fabric cluster=32HEX clique=N [state=N] [status=RC] [v=0]   every GPU's NVLink domain
 *       (nvmlDeviceGetGpuFabricInfo[V]; state defaults to 3, completed; v=0: no versioned call)
 * $PODRUN_FAKE_NVML_HEALTH names a second file, re-read at every health query (events, ECC,
 * retired pages), so a test changes a GPU's health while podrun runs:
 *   xid gpu=I xid=N          a critical-Xid event; each line is delivered once, in order
 *   ecc gpu=I count=N        the volatile uncorrected ECC count (default 0)
 *   pending gpu=I            retired pages pending
 *   lost gpu=I               every health query on that GPU: NVML_ERROR_GPU_IS_LOST
 *   noevents                 nvmlEventSetCreate is not supported
 * Underscores in a name stand for spaces. Like the real library, every call but nvmlInit_v2 and
 * nvmlErrorString fails with NVML_ERROR_UNINITIALIZED while not initialised, so a caller that
 * queries after nvmlShutdown is caught. fake_nvml_counts() reports init/shutdown calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakes/fake_conf.h"
#include "launcher/devices/cpuset.h"
#include "launcher/devices/nvml_abi.h"

#define FAKE_GPUS 64
#define FAKE_MIGS 8

struct nvmlDevice_st {
    int gpu;   /* index into fake_gpus */
    int mig;   /* -1: the GPU itself */
};

struct fake_gpu {
    struct nvmlDevice_st h;
    char uuid[96], name[96];
    unsigned domain, bus, dev, fn;
    int minor, numa, mig, handle_rc, nmig;
    unsigned long long used;
    int nprocs;
    unsigned pids[16];
    unsigned long long pbytes[16];
    cpu_set_t cpus;
    struct {
        struct nvmlDevice_st h;
        char uuid[96];
        int gi, ci;
    } migs[FAKE_MIGS];
};

static struct fake_gpu fake_gpus[FAKE_GPUS];
static int fake_ngpus, fake_init_rc, fake_count_rc, fake_affinity_rc;
static int fake_refs, fake_inits, fake_shutdowns;

void fake_nvml_counts(int *inits, int *shutdowns, int *refs)
{
    *inits = fake_inits;
    *shutdowns = fake_shutdowns;
    *refs = fake_refs;
}

static void fake_gpu_line(const char *line)
{
    if (fake_ngpus == FAKE_GPUS)
        return;
    struct fake_gpu *g = &fake_gpus[fake_ngpus];
    memset(g, 0, sizeof *g);
    g->h.gpu = fake_ngpus++;
    g->h.mig = -1;
    char v[256];
    fake_word(line, "uuid", g->uuid, sizeof g->uuid);
    if (fake_word(line, "name", g->name, sizeof g->name))
        for (char *p = g->name; *p; p++)
            if (*p == '_')
                *p = ' ';
    if (fake_word(line, "pci", v, sizeof v))
        sscanf(v, "%x:%x:%x.%x", &g->domain, &g->bus, &g->dev, &g->fn);
    g->minor = (int)fake_word_long(line, "minor", 0);
    g->numa = (int)fake_word_long(line, "numa", -1);
    g->mig = (int)fake_word_long(line, "mig", -1);
    g->handle_rc = (int)fake_word_long(line, "handle", 0);
    if (fake_word(line, "cpus", v, sizeof v))
        cpuset_parse(v, &g->cpus);
    g->used = (unsigned long long)fake_word_long(line, "used", 0);
    if (fake_word(line, "procs", v, sizeof v))
        for (char *p = v; *p && g->nprocs < 16;) {
            g->pids[g->nprocs] = (unsigned)strtoul(p, &p, 10);
            g->pbytes[g->nprocs++] = *p == ':' ? strtoull(p + 1, &p, 10) : 0;
            p += *p == ',';
        }
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m)
{
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    const struct fake_gpu *g = &fake_gpus[h->gpu];
    m->total = 80ULL << 30;
    m->used = g->used;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *n,
                                                     nvmlProcessInfo_t *p)
{
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    const struct fake_gpu *g = &fake_gpus[h->gpu];
    if (*n < (unsigned)g->nprocs) {
        *n = (unsigned)g->nprocs;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *n = (unsigned)g->nprocs;
    for (int i = 0; i < g->nprocs; i++)
        p[i] = (nvmlProcessInfo_t){.pid = g->pids[i], .usedGpuMemory = g->pbytes[i]};
    return NVML_SUCCESS;
}

/* ---------- health: events, ECC, retired pages ($PODRUN_FAKE_NVML_HEALTH) ---------- */

struct nvmlEventSet_st {
    unsigned long long registered;   /* a bit per GPU index */
};

static struct nvmlEventSet_st fake_set;
static int fake_xids_taken;          /* xid lines delivered so far */

struct fake_health {
    unsigned long long ecc[FAKE_GPUS];
    int pending[FAKE_GPUS], lost[FAKE_GPUS];
    int noevents;
};

/* The health file now; *xid_gpu and *xid: the taken-th xid line (gpu -1: none). */
static void fake_health_load(struct fake_health *h, int taken, int *xid_gpu, long *xid)
{
    memset(h, 0, sizeof *h);
    *xid_gpu = -1;
    FILE *f = fake_conf_open("PODRUN_FAKE_NVML_HEALTH");
    if (!f)
        return;
    char line[FAKE_LINE_MAX];
    int nx = 0;
    while (fgets(line, sizeof line, f)) {
        long g = fake_word_long(line, "gpu", -1);
        if (strncmp(line, "noevents", 8) == 0)
            h->noevents = 1;
        if (g < 0 || g >= FAKE_GPUS)
            continue;
        if (strncmp(line, "xid ", 4) == 0 && nx++ == taken) {
            *xid_gpu = (int)g;
            *xid = fake_word_long(line, "xid", 0);
        } else if (strncmp(line, "ecc ", 4) == 0) {
            h->ecc[g] = (unsigned long long)fake_word_long(line, "count", 0);
        } else if (strncmp(line, "pending ", 8) == 0) {
            h->pending[g] = 1;
        } else if (strncmp(line, "lost ", 5) == 0) {
            h->lost[g] = 1;
        }
    }
    fclose(f);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    struct fake_health h;
    int g;
    long x;
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    fake_health_load(&h, -1, &g, &x);
    if (h.noevents)
        return NVML_ERROR_NOT_SUPPORTED;
    fake_set.registered = 0;
    *set = &fake_set;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    (void)set;
    return fake_refs <= 0 ? NVML_ERROR_UNINITIALIZED : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set)
{
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (types & nvmlEventTypeXidCriticalError)
        set->registered |= 1ULL << h->gpu;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int ms)
{
    struct fake_health h;
    int g;
    long x;
    (void)ms;   /* never waits: the tests ask with 0 */
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    fake_health_load(&h, fake_xids_taken, &g, &x);
    if (g < 0 || g >= fake_ngpus || !(set->registered >> g & 1))
        return NVML_ERROR_TIMEOUT;
    fake_xids_taken++;
    memset(data, 0, sizeof *data);
    data->device = &fake_gpus[g].h;
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = (unsigned long long)x;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                         unsigned long long *count)
{
    struct fake_health h;
    int g;
    long x;
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counter != NVML_VOLATILE_ECC)
        return NVML_ERROR_NOT_SUPPORTED;
    fake_health_load(&h, -1, &g, &x);
    if (h.lost[d->gpu])
        return NVML_ERROR_GPU_IS_LOST;
    *count = h.ecc[d->gpu];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending)
{
    struct fake_health h;
    int g;
    long x;
    if (fake_refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    fake_health_load(&h, -1, &g, &x);
    if (h.lost[d->gpu])
        return NVML_ERROR_GPU_IS_LOST;
    *pending = h.pending[d->gpu] ? NVML_FEATURE_ENABLED : 0;
    return NVML_SUCCESS;
}

static void fake_mig_line(const char *line)
{
    long i = fake_word_long(line, "gpu", -1);
    if (i < 0 || i >= fake_ngpus || fake_gpus[i].nmig == FAKE_MIGS)
        return;
    struct fake_gpu *g = &fake_gpus[i];
    int k = g->nmig++;
    g->migs[k].h.gpu = (int)i;
    g->migs[k].h.mig = k;
    fake_word(line, "uuid", g->migs[k].uuid, sizeof g->migs[k].uuid);
    g->migs[k].gi = (int)fake_word_long(line, "gi", 0);
    g->migs[k].ci = (int)fake_word_long(line, "ci", 0);
}

static void fake_fabric_reset(void);
static void fake_fabric_line(const char *line);

static void fake_load(void)
{
    fake_fabric_reset();
    fake_ngpus = fake_init_rc = fake_count_rc = fake_affinity_rc = 0;
    FILE *f = fake_conf_open("PODRUN_FAKE_NVML");
    if (!f) {
        fake_init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
        return;
    }
    char line[FAKE_LINE_MAX];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "init ", 5) == 0)
            fake_init_rc = atoi(line + 5);
        else if (strncmp(line, "count ", 6) == 0)
            fake_count_rc = atoi(line + 6);
        else if (strncmp(line, "affinity ", 9) == 0)
            fake_affinity_rc = atoi(line + 9);
        else if (strncmp(line, "gpu ", 4) == 0)
            fake_gpu_line(line);
        else if (strncmp(line, "mig ", 4) == 0)
            fake_mig_line(line);
        else if (strncmp(line, "fabric ", 7) == 0)
            fake_fabric_line(line);
    }
    fclose(f);
}

#define FAKE_READY()                       \
    do {                                   \
        if (fake_refs <= 0)                \
            return NVML_ERROR_UNINITIALIZED; \
    } while (0)

nvmlReturn_t nvmlInit_v2(void)
{
    fake_inits++;
    fake_load();
    if (fake_init_rc)
        return fake_init_rc;
    fake_refs++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    fake_shutdowns++;
    FAKE_READY();
    fake_refs--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    FAKE_READY();
    if (fake_count_rc)
        return fake_count_rc;
    *count = (unsigned)fake_ngpus;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *h)
{
    FAKE_READY();
    if (i >= (unsigned)fake_ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_gpus[i].handle_rc)
        return fake_gpus[i].handle_rc;
    *h = &fake_gpus[i].h;
    return NVML_SUCCESS;
}

static nvmlReturn_t fake_copy(char *buf, unsigned int len, const char *s)
{
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *buf, unsigned int len)
{
    FAKE_READY();
    struct fake_gpu *g = &fake_gpus[h->gpu];
    return fake_copy(buf, len, h->mig < 0 ? g->uuid : g->migs[h->mig].uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *buf, unsigned int len)
{
    FAKE_READY();
    return fake_copy(buf, len, fake_gpus[h->gpu].name);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *pci)
{
    FAKE_READY();
    const struct fake_gpu *g = &fake_gpus[h->gpu];
    memset(pci, 0, sizeof *pci);
    pci->domain = g->domain;
    pci->bus = g->bus;
    pci->device = g->dev;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", g->domain, g->bus, g->dev);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", g->domain, g->bus, g->dev);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned int *minor)
{
    FAKE_READY();
    *minor = (unsigned)fake_gpus[h->gpu].minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int *cur, unsigned int *pending)
{
    FAKE_READY();
    int m = fake_gpus[h->gpu].mig;
    if (m < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *cur = *pending = (unsigned)m;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned int *count)
{
    FAKE_READY();
    *count = fake_gpus[h->gpu].mig == 1 ? 7 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned int i, nvmlDevice_t *m)
{
    FAKE_READY();
    struct fake_gpu *g = &fake_gpus[h->gpu];
    if (i >= (unsigned)g->nmig)
        return NVML_ERROR_NOT_FOUND;
    *m = &g->migs[i].h;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned int *id)
{
    FAKE_READY();
    if (h->mig < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned)fake_gpus[h->gpu].migs[h->mig].gi;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned int *id)
{
    FAKE_READY();
    if (h->mig < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned)fake_gpus[h->gpu].migs[h->mig].ci;
    return NVML_SUCCESS;
}

static void fake_mask(const cpu_set_t *set, unsigned int words, unsigned long *mask)
{
    const unsigned bits = 8 * sizeof(unsigned long);
    memset(mask, 0, words * sizeof *mask);
    for (unsigned c = 0; c < CPU_SETSIZE && c / bits < words; c++)
        if (CPU_ISSET(c, set))
            mask[c / bits] |= 1UL << (c % bits);
}

nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t h, unsigned int words,
                                                 unsigned long *mask, unsigned int scope)
{
    FAKE_READY();
    if (fake_affinity_rc || scope != NVML_AFFINITY_SCOPE_NODE)
        return fake_affinity_rc ? fake_affinity_rc : NVML_ERROR_NOT_SUPPORTED;
    fake_mask(&fake_gpus[h->gpu].cpus, words, mask);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t h, unsigned int words, unsigned long *mask)
{
    return nvmlDeviceGetCpuAffinityWithinScope(h, words, mask, NVML_AFFINITY_SCOPE_NODE);
}

nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t h, unsigned int words, unsigned long *mask,
                                         unsigned int scope)
{
    FAKE_READY();
    int node = fake_gpus[h->gpu].numa;
    if (fake_affinity_rc || scope != NVML_AFFINITY_SCOPE_NODE || node < 0)
        return fake_affinity_rc ? fake_affinity_rc : NVML_ERROR_NOT_SUPPORTED;
    memset(mask, 0, words * sizeof *mask);
    if ((unsigned)node / (8 * sizeof(unsigned long)) < words)
        mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    return NVML_SUCCESS;
}

/* ---- NVLink fabric: one domain for every GPU of the machine ---- */

static struct {
    int set, versioned;
    unsigned char uuid[NVML_GPU_FABRIC_UUID_LEN];
    unsigned int clique, state;
    int status;
} fake_fab;

static void fake_fabric_reset(void)
{
    memset(&fake_fab, 0, sizeof fake_fab);
}

static void fake_fabric_line(const char *line)
{
    char v[64];
    fake_fabric_reset();
    if (fake_word(line, "cluster", v, sizeof v))
        for (int i = 0; i < NVML_GPU_FABRIC_UUID_LEN && v[2 * i] && v[2 * i + 1]; i++) {
            char b[3] = {v[2 * i], v[2 * i + 1], 0};
            fake_fab.uuid[i] = (unsigned char)strtoul(b, NULL, 16);
        }
    fake_fab.clique = (unsigned int)fake_word_long(line, "clique", 0);
    fake_fab.state = (unsigned int)fake_word_long(line, "state", NVML_GPU_FABRIC_STATE_COMPLETED);
    fake_fab.status = (int)fake_word_long(line, "status", NVML_SUCCESS);
    fake_fab.versioned = (int)fake_word_long(line, "v", 1);
    fake_fab.set = 1;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t h, nvmlGpuFabricInfoV_t *f)
{
    FAKE_READY();
    if (!h || !f || f->version != nvmlGpuFabricInfo_v2)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!fake_fab.set || !fake_fab.versioned)
        return NVML_ERROR_NOT_SUPPORTED;
    memcpy(f->clusterUuid, fake_fab.uuid, sizeof f->clusterUuid);
    f->status = fake_fab.status;
    f->cliqueId = fake_fab.clique;
    f->state = (nvmlGpuFabricState_t)fake_fab.state;
    f->healthMask = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t h, nvmlGpuFabricInfo_t *f)
{
    FAKE_READY();
    if (!h || !f)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!fake_fab.set)
        return NVML_ERROR_NOT_SUPPORTED;
    memcpy(f->clusterUuid, fake_fab.uuid, sizeof f->clusterUuid);
    f->status = fake_fab.status;
    f->cliqueId = fake_fab.clique;
    f->state = (nvmlGpuFabricState_t)fake_fab.state;
    return NVML_SUCCESS;
}
