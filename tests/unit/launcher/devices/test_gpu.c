/* tests/unit/launcher/devices/test_gpu.c — GPU discovery through the fake libnvidia-ml.so.1 and
 * the fixture machine's /proc and /dev, each source in turn. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/cpuset.h"
#include "launcher/devices/gpu.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static char root[256];
static void (*nvml_counts)(int *, int *, int *);

static void use_nvml(const char *extra)
{
    char path[512];
    fx_nvml_conf(root, extra, path, sizeof path);
    setenv("PODRUN_FAKE_NVML", path, 1);
}

static void check_balanced(void)
{
    int inits, shutdowns, refs;
    nvml_counts(&inits, &shutdowns, &refs);
    CHECK_EQ_INT(refs, 0);   /* every successful init was shut down */
}

static void test_nvml(void)
{
    use_nvml(NULL);
    struct gpu_list *g = calloc(1, sizeof *g);
    CHECK_EQ_INT(gpu_discover(NULL, g), 0);
    CHECK_EQ_INT(g->source, GPU_SOURCE_NVML);
    CHECK_EQ_INT(g->n, FX_NGPUS);
    for (int i = 0; i < g->n && i < FX_NGPUS; i++) {
        CHECK_EQ_STR(g->dev[i].uuid, FX_GPU_UUID[i]);
        CHECK_EQ_STR(g->dev[i].pci, FX_GPU_PCI[i]);   /* NVML's numbers in sysfs form */
        CHECK_EQ_STR(g->dev[i].name, "NVIDIA H100 80GB HBM3");
        CHECK_EQ_INT(g->dev[i].minor, FX_GPU_MINOR[i]);
        CHECK_EQ_INT(g->dev[i].numa_node, FX_GPU_NODE[i]);
        char cpus[64];
        cpuset_format(&g->dev[i].cpus, cpus, sizeof cpus);
        CHECK_EQ_STR(cpus, FX_GPU_NODE[i] ? "16-31,48-63" : "0-15,32-47");
        CHECK_EQ_INT(g->dev[i].mig, i == 7);
    }
    CHECK_EQ_INT(g->dev[7].nmig, 2);
    CHECK_EQ_STR(g->dev[7].migs[0].uuid, FX_MIG_UUID[0]);
    CHECK_EQ_STR(g->dev[7].migs[1].uuid, FX_MIG_UUID[1]);
    CHECK_EQ_INT(g->dev[7].migs[1].gpu_instance, 2);
    CHECK_EQ_INT(g->dev[7].migs[1].compute_instance, 0);
    CHECK_EQ_STR(g->note, "");
    check_balanced();
    free(g);
}

/* NVML without affinity answers: the NUMA node and CPUs come from sysfs. */
static void test_nvml_affinity_from_sysfs(void)
{
    use_nvml("affinity 3\n");
    fx_write(root, "/sys/bus/pci/devices/0000:18:00.0/local_cpulist", "0-3\n");
    struct gpu_list *g = calloc(1, sizeof *g);
    gpu_discover(NULL, g);
    CHECK_EQ_INT(g->source, GPU_SOURCE_NVML);
    CHECK_EQ_INT(g->dev[0].numa_node, 0);
    CHECK_EQ_INT(g->dev[5].numa_node, 1);
    char cpus[64];
    cpuset_format(&g->dev[0].cpus, cpus, sizeof cpus);
    CHECK_EQ_STR(cpus, "0-3");
    fx_write(root, "/sys/bus/pci/devices/0000:18:00.0/local_cpulist", "0-15,32-47\n");
    /* a single-node machine writes -1; torch reads that as node 0 */
    fx_write(root, "/sys/bus/pci/devices/0000:ab:00.0/numa_node", "-1\n");
    gpu_discover(NULL, g);
    CHECK_EQ_INT(g->dev[5].numa_node, 0);
    fx_write(root, "/sys/bus/pci/devices/0000:ab:00.0/numa_node", "1\n");
    check_balanced();
    free(g);
}

/* A device NVML will not hand out is skipped and named; the others stay. */
static void test_nvml_device_without_permission(void)
{
    char path[512];
    fx_nvml_conf(root, NULL, path, sizeof path);
    FILE *f = fopen(path, "a");
    fprintf(f, "gpu uuid=GPU-ffffffff-0000-0000-0000-000000000000 pci=0000:e0:00.0 handle=4\n");
    fclose(f);
    setenv("PODRUN_FAKE_NVML", path, 1);
    struct gpu_list *g = calloc(1, sizeof *g);
    gpu_discover(NULL, g);
    CHECK_EQ_INT(g->n, FX_NGPUS);
    CHECK_EQ_STR(g->note, "NVML device 8 skipped: Insufficient Permissions");
    check_balanced();
    free(g);
}

/* NVML present but the driver is not (a CPU-only container with the library injected): /proc. */
static void test_procfs_when_nvml_fails(void)
{
    use_nvml("init 9\n");
    struct gpu_list *g = calloc(1, sizeof *g);
    gpu_discover(NULL, g);
    CHECK_EQ_INT(g->source, GPU_SOURCE_PROCFS);
    CHECK_EQ_INT(g->n, FX_NGPUS);
    CHECK_EQ_STR(g->note, "libnvidia-ml.so.1: nvmlInit_v2 failed: Driver Not Loaded");
    for (int i = 0; i < g->n; i++) {
        CHECK_EQ_INT(g->dev[i].index, i);
        CHECK_EQ_STR(g->dev[i].uuid, FX_GPU_UUID[i]);
        CHECK_EQ_STR(g->dev[i].pci, FX_GPU_PCI[i]);
        CHECK_EQ_STR(g->dev[i].name, "NVIDIA H100 80GB HBM3");
        CHECK_EQ_INT(g->dev[i].minor, FX_GPU_MINOR[i]);
        CHECK_EQ_INT(g->dev[i].numa_node, FX_GPU_NODE[i]);
        CHECK_EQ_INT(CPU_COUNT(&g->dev[i].cpus), 32);
        CHECK_EQ_INT(g->dev[i].mig, -1);   /* /proc does not say */
    }
    check_balanced();
    free(g);
}

/* No NVML library at all (a container without the utility capability). */
static void test_procfs_without_library(void)
{
    struct gpu_opts o = {.nvml_lib = "libnvidia-ml-absent.so.1"};
    struct gpu_list *g = calloc(1, sizeof *g);
    gpu_discover(&o, g);
    CHECK_EQ_INT(g->source, GPU_SOURCE_PROCFS);
    CHECK(strstr(g->note, "libnvidia-ml-absent.so.1") == g->note);
    CHECK_EQ_INT(g->n, FX_NGPUS);
    free(g);
}

/* Only /dev/nvidia<minor>: a count in minor order, no identity. Then nothing at all. */
static void test_dev_then_none(void)
{
    char r2[256];
    fx_root_make(r2, sizeof r2);
    struct fx_opts o = {.no_proc_gpus = true};
    fx_machine_dgx(r2, &o);
    sysroot_set(r2);
    struct gpu_opts skip = {.skip_nvml = true};
    struct gpu_list *g = calloc(1, sizeof *g);
    gpu_discover(&skip, g);
    CHECK_EQ_INT(g->source, GPU_SOURCE_DEV);
    CHECK_EQ_INT(g->n, FX_NGPUS);
    for (int i = 0; i < g->n; i++) {
        CHECK_EQ_INT(g->dev[i].minor, i);
        CHECK_EQ_STR(g->dev[i].uuid, "");
        CHECK_EQ_INT(g->dev[i].numa_node, -1);
    }
    CHECK(strstr(g->note, "only /dev/nvidia* found") != NULL);
    fx_root_remove(r2);

    fx_root_make(r2, sizeof r2);
    struct fx_opts bare = {.no_proc_gpus = true, .no_dev_gpus = true};
    fx_machine_dgx(r2, &bare);
    sysroot_set(r2);
    gpu_discover(&skip, g);
    CHECK_EQ_INT(g->source, GPU_SOURCE_NONE);
    CHECK_EQ_INT(g->n, 0);
    CHECK_EQ_STR(gpu_source_name(g->source), "none");
    fx_root_remove(r2);
    sysroot_set(root);
    free(g);
}

/* NVML that initialises but lists nothing falls through to /proc as well. */
static void test_nvml_empty(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/empty.conf", root);
    FILE *f = fopen(path, "w");
    fclose(f);
    setenv("PODRUN_FAKE_NVML", path, 1);
    struct gpu_list *g = calloc(1, sizeof *g);
    gpu_discover(NULL, g);
    CHECK_EQ_INT(g->source, GPU_SOURCE_PROCFS);
    check_balanced();
    CHECK_EQ_INT(gpu_discover(NULL, NULL), -EINVAL);
    free(g);
}

int main(void)
{
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    sysroot_set(root);
    /* Held open so its counters survive podrun's dlclose. */
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(*(void **)&nvml_counts = dlsym(lib, "fake_nvml_counts"))) {
        fprintf(stderr, "the fake libnvidia-ml.so.1 is not on LD_LIBRARY_PATH\n");
        return 1;
    }
    RUN(test_nvml);
    RUN(test_nvml_affinity_from_sysfs);
    RUN(test_nvml_device_without_permission);
    RUN(test_procfs_when_nvml_fails);
    RUN(test_procfs_without_library);
    RUN(test_dev_then_none);
    RUN(test_nvml_empty);
    fx_root_remove(root);
    return check_result();
}
