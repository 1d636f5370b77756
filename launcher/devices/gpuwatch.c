/* launcher/devices/gpuwatch.c — the GPUs watched through NVML during a run (gpuwatch.h). */
#include "launcher/devices/gpuwatch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "launcher/devices/watch_rules.h"

/* GPU i's handle, UUID and starting ECC count; its critical Xids go to the event set. */
static nvmlReturn_t take_gpu(struct gpuwatch *w, unsigned i)
{
    const struct nvml *nv = w->nv;
    nvmlReturn_t r = nv->by_index(i, &w->gpu[i].h);
    if (r != NVML_SUCCESS)
        return r;
    if (nv->uuid(w->gpu[i].h, w->gpu[i].uuid, sizeof w->gpu[i].uuid) != NVML_SUCCESS)
        snprintf(w->gpu[i].uuid, sizeof w->gpu[i].uuid, "?");
    /* a GPU without events (some vGPUs) is still asked for its counts */
    if (w->set)
        (void)nv->reg(w->gpu[i].h, nvmlEventTypeXidCriticalError, w->set);
    /* a query that is not supported is not asked again; a GPU already lost is, and the first
     * check says so */
    nvmlReturn_t e = nv->ecc_total ? nv->ecc_total(w->gpu[i].h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                   NVML_VOLATILE_ECC, &w->gpu[i].ecc)
                                   : NVML_ERROR_NOT_SUPPORTED;
    w->gpu[i].ecc_known = e == NVML_SUCCESS || e == NVML_ERROR_GPU_IS_LOST;
    int p = 0;
    e = nv->pending ? nv->pending(w->gpu[i].h, &p) : NVML_ERROR_NOT_SUPPORTED;
    w->gpu[i].pending_known = e == NVML_SUCCESS || e == NVML_ERROR_GPU_IS_LOST;
    w->gpu[i].pending = p == NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

int gpuwatch_open(struct gpuwatch *w, const char *soname, char *err, size_t elen)
{
    const char *so = soname ? soname : NVML_SONAME;
    memset(w, 0, sizeof *w);
    int rc = nvml_load(so, &w->nv, err, elen);
    if (rc == 0)
        rc = nvml_need(w->nv, w->nv->uuid != NULL, "nvmlDeviceGetUUID", err, elen);
    if (rc < 0) {
        w->nv = NULL;
        return rc;
    }
    nvmlReturn_t r = w->nv->init();
    if (r != NVML_SUCCESS) {
        snprintf(err, elen, "%s: nvmlInit failed (NVML error %d)", so, r);
        w->nv = NULL;
        /* the library without its driver: a node without NVIDIA GPUs */
        return r == NVML_ERROR_DRIVER_NOT_LOADED ? -ENOENT : -ENODEV;
    }
    w->open = true;
    const struct nvml *nv = w->nv;
    if (nv->set_create && nv->reg && nv->wait && nv->set_create(&w->set) != NVML_SUCCESS)
        w->set = NULL;
    if ((r = nv->count(&w->n)) == NVML_SUCCESS) {
        w->n = w->n < GPUWATCH_MAX ? w->n : GPUWATCH_MAX;
        for (unsigned i = 0; i < w->n && r == NVML_SUCCESS; i++)
            r = take_gpu(w, i);
    }
    if (r != NVML_SUCCESS) {
        snprintf(err, elen, "%s: cannot list the GPUs (NVML error %d)", so, r);
        gpuwatch_close(w);
        return -ENODEV;
    }
    return 0;
}

static int index_of(const struct gpuwatch *w, nvmlDevice_t h)
{
    for (unsigned i = 0; i < w->n; i++)
        if (w->gpu[i].h == h)
            return (int)i;
    return -1;
}

/* GPU i's UUID cut to what tells GPUs apart ("GPU-8932f937..."): a failure's reason is one short
 * line in every node's report. */
static void short_uuid(const struct gpuwatch *w, int i, char *out, size_t len)
{
    const char *u = i >= 0 ? w->gpu[i].uuid : "?";
    snprintf(out, len, "%.12s%s", u, strlen(u) > 12 ? "..." : "");
}

/* "GPU i (uuid): what" into why; returns 1. */
static int bad(const struct gpuwatch *w, int i, char *why, size_t len, const char *what)
{
    char uuid[16];
    short_uuid(w, i, uuid, sizeof uuid);
    snprintf(why, len, "GPU %d (%s): %s", i, uuid, what);
    return 1;
}

/* The critical Xids that arrived since the last check, without waiting. */
static int take_events(struct gpuwatch *w, char *why, size_t len, char *note, size_t nlen)
{
    nvmlEventData_t e;
    char what[96];
    for (int k = 0; w->set && k < GPUWATCH_EVENTS; k++) {
        memset(&e, 0, sizeof e);
        nvmlReturn_t r = w->nv->wait(w->set, &e, 0);
        if (r == NVML_ERROR_GPU_IS_LOST)
            return bad(w, index_of(w, e.device), why, len, "lost from the bus (NVML: GPU is lost)");
        if (r != NVML_SUCCESS)
            return 0;   /* NVML_ERROR_TIMEOUT: nothing more */
        if (!(e.eventType & nvmlEventTypeXidCriticalError))
            continue;
        const char *m = watch_xid_critical(e.eventData);
        int i = index_of(w, e.device);
        if (m) {
            snprintf(what, sizeof what, "Xid %llu, %s", e.eventData, m);
            return bad(w, i, why, len, what);
        }
        if (note && nlen && !note[0]) {
            char uuid[16];
            short_uuid(w, i, uuid, sizeof uuid);
            snprintf(note, nlen, "GPU %d (%s): Xid %llu (not one that fails the node)", i, uuid,
                     e.eventData);
        }
    }
    return 0;
}

/* GPU i's counts against the ones at open. */
static int check_gpu(struct gpuwatch *w, unsigned i, char *why, size_t len)
{
    char what[128];
    unsigned long long ecc = 0;
    nvmlReturn_t r = NVML_SUCCESS;
    if (w->gpu[i].ecc_known &&
        (r = w->nv->ecc_total(w->gpu[i].h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                          &ecc)) == NVML_SUCCESS && ecc > w->gpu[i].ecc) {
        snprintf(what, sizeof what, "%llu new uncorrectable ECC error%s (%llu in all)",
                 ecc - w->gpu[i].ecc, ecc - w->gpu[i].ecc == 1 ? "" : "s", ecc);
        w->gpu[i].ecc = ecc;
        return bad(w, (int)i, why, len, what);
    }
    int p = 0;
    if (r == NVML_SUCCESS && w->gpu[i].pending_known &&
        (r = w->nv->pending(w->gpu[i].h, &p)) == NVML_SUCCESS && p == NVML_FEATURE_ENABLED &&
        !w->gpu[i].pending) {
        w->gpu[i].pending = true;
        return bad(w, (int)i, why, len, "retired pages pending (the GPU needs a reset)");
    }
    if (r == NVML_ERROR_GPU_IS_LOST)
        return bad(w, (int)i, why, len, "lost from the bus (NVML: GPU is lost)");
    return 0;
}

int gpuwatch_check(struct gpuwatch *w, char *why, size_t len, char *note, size_t nlen)
{
    if (note && nlen)
        note[0] = '\0';
    if (!w->open)
        return 0;
    if (take_events(w, why, len, note, nlen))
        return 1;
    for (unsigned i = 0; i < w->n; i++)
        if (check_gpu(w, i, why, len))
            return 1;
    return 0;
}

void gpuwatch_close(struct gpuwatch *w)
{
    if (w->open) {
        if (w->set && w->nv->set_free)
            w->nv->set_free(w->set);
        w->nv->shutdown();
    }
    w->set = NULL;
    w->open = false;
    w->nv = NULL;   /* the table stays loaded for the next open (nvml.h) */
}
