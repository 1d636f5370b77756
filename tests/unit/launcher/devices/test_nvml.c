/* tests/unit/launcher/devices/test_nvml.c — the one NVML table: bound once per name and shared
 * by every caller, a library that is missing or lacks an entry point every caller needs is not
 * remembered, and a caller's own required entry point is named like a missing symbol. Uses the
 * fake libnvidia-ml.so.1 (on LD_LIBRARY_PATH) and the fake libibverbs.so.1 as a library that is
 * no NVML. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/nvml.h"

static void test_loaded_once(void)
{
    const struct nvml *a = NULL, *b = NULL;
    char err[512] = "";
    CHECK_EQ_INT(nvml_load(NULL, &a, err, sizeof err), 0);
    CHECK_EQ_INT(nvml_load(NVML_SONAME, &b, err, sizeof err), 0);
    CHECK(a != NULL && a == b);
    /* every entry point the fake exports is bound, the optional ones included */
    CHECK(a->init && a->uuid && a->mem && a->pci_v3 && a->procs_v3 && a->wait && a->pending);
    CHECK_EQ_STR(a->lib.name, NVML_SONAME);
}

static void test_missing_not_remembered(void)
{
    const struct nvml *n = NULL;
    char err[512] = "";
    for (int i = 0; i < 8; i++) {   /* more tries than the table has names: none is kept */
        CHECK_EQ_INT(nvml_load("libnvidia-ml-absent.so.1", &n, err, sizeof err), -ENOENT);
        CHECK(strstr(err, "libnvidia-ml-absent.so.1") == err);
    }
    /* a library without NVML's entry points fails on the first, by name */
    CHECK_EQ_INT(nvml_load("libibverbs.so.1", &n, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "libibverbs.so.1: no symbol nvmlInit_v2");
    CHECK_EQ_INT(nvml_load(NULL, &n, err, sizeof err), 0);
}

static void test_need(void)
{
    const struct nvml *n = NULL;
    char err[512] = "";
    CHECK_EQ_INT(nvml_load(NULL, &n, err, sizeof err), 0);
    CHECK_EQ_INT(nvml_need(n, true, "nvmlDeviceGetUUID", err, sizeof err), 0);
    CHECK_EQ_INT(nvml_need(n, false, "nvmlDeviceGetMemoryInfo", err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "libnvidia-ml.so.1: no symbol nvmlDeviceGetMemoryInfo");
}

int main(void)
{
    RUN(test_loaded_once);
    RUN(test_missing_not_remembered);
    RUN(test_need);
    return check_result();
}
