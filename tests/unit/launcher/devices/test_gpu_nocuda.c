/* tests/unit/launcher/devices/test_gpu_nocuda.c — the agent's whole device stage never loads or
 * calls CUDA.
 *
 * A process that initialised CUDA cannot give CUDA to the children it forks, so podrun must find
 * GPUs without it. This test runs everything the agent does at start — GPU discovery (fake NVML),
 * visibility, HCAs (fake libibverbs), the master's interface, CPU topology and binding, /dev/shm,
 * the derived environment — on the fixture machine, twice, in a fresh process each time:
 *   preload: fake libcuda.so.1 and libcudart.so are LD_PRELOADed; each of their entry points
 *            records its name, so any call podrun made would be in the log;
 *   path:    the fakes are only on LD_LIBRARY_PATH; loading one would record "load ..." and map
 *            it into the process.
 * Each run then calls into CUDA itself, to prove the recording works.
 * Usage: test_gpu_nocuda LIBCUDA LIBCUDART (paths of the fakes). */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/devices/binding.h"
#include "launcher/devices/cpu.h"
#include "launcher/devices/gpu.h"
#include "launcher/devices/ib.h"
#include "launcher/devices/nic.h"
#include "launcher/devices/shm.h"
#include "launcher/devices/sysroot.h"
#include "launcher/devices/visible.h"
#include "launcher/env/nccl.h"
#include "tests/fixtures/machine.h"

static char *read_all(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* Whether a mapping of this process names `name`; read line by line, as an ASan build's maps
 * run far past any fixed buffer. */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Everything the agent does with devices at start. Returns the number of GPUs found. */
static int device_stage(const char *root)
{
    char path[512], err[256];
    fx_nvml_conf(root, NULL, path, sizeof path);
    setenv("PODRUN_FAKE_NVML", path, 1);
    fx_verbs_conf(root, "dev mlx5_0\nport mlx5_0 1 state=4 link=1\n"
                        "dev mlx5_2\nport mlx5_2 1 state=4 link=2\ngid mlx5_2 1 3 2 10.0.0.7\n",
                  path, sizeof path);
    setenv("PODRUN_FAKE_IBVERBS", path, 1);
    sysroot_set(root);

    static struct gpu_list g;
    static struct gpu_visible v;
    static struct ib_info ib;
    static struct cpu_topo topo;
    static struct nccl_env env;
    struct nic_choice nic;
    struct shm_info shm;
    gpu_discover(NULL, &g);
    struct gpu_visible_env venv = {getenv("NVIDIA_VISIBLE_DEVICES"), getenv("CUDA_VISIBLE_DEVICES"),
                                   getenv("CUDA_DEVICE_ORDER")};
    visible_resolve(&g, &venv, &v);
    ib_discover(NULL, &ib);
    nic_for_master("127.0.0.1", &nic, err, sizeof err);
    cpu_topo_read(&topo);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    for (int c = 0; c < 64; c++)
        CPU_SET(c, &allowed);
    int nodes[GPU_MAX];
    for (int k = 0; k < v.n; k++)
        nodes[k] = g.dev[v.slot[k].gpu].numa_node;
    struct binding_in in = {BINDING_NODE, 8, v.n, nodes, NULL};
    struct binding_rank ranks[8];
    CHECK_EQ_INT(binding_plan(&topo, &allowed, &in, ranks, err, sizeof err), 0);
    shm_stat(&shm);
    struct nccl_facts f = {.gpus = &g, .visible = &v, .ib = &ib, .nic = &nic, .nlocal = 8,
                           .per_rank_visible = true};
    extern char **environ;
    nccl_env_derive(&f, environ, &env);
    return g.n;
}

/* One run in this (fresh) process; the log is $PODRUN_FAKE_CUDA_LOG. */
static int run(const char *mode)
{
    const char *log = getenv("PODRUN_FAKE_CUDA_LOG");
    bool preload = strcmp(mode, "preload") == 0;
    char root[256];
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    CHECK_EQ_INT(device_stage(root), FX_NGPUS);
    const char *got = read_all(log);
    if (preload) {
        /* loaded by the dynamic linker before main (in either order), never called */
        int lines = 0;
        for (const char *p = got; (p = strchr(p, '\n')); p++)
            lines++;
        CHECK_EQ_INT(lines, 2);
        CHECK(strstr(got, "load libcuda.so.1\n") && strstr(got, "load libcudart.so\n"));
        int (*cu_init)(unsigned) = NULL;
        *(void **)&cu_init = dlsym(RTLD_DEFAULT, "cuInit");
        CHECK(cu_init != NULL);
        if (cu_init)
            cu_init(0);
        CHECK(strstr(read_all(log), "\ncuInit\n") != NULL);
    } else {
        CHECK_EQ_STR(got, "");
        CHECK(!mapped("libcuda.so") && !mapped("libcudart.so"));
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL);
        CHECK_EQ_STR(read_all(log), "load libcuda.so.1\n");
        CHECK(mapped("libcuda.so.1"));
    }
    fx_root_remove(root);
    fprintf(stderr, "     %s: ", mode);
    return check_result();
}

/* Runs this program again as `mode` with a fresh log and the fakes placed as the mode says. */
static int spawn(const char *self, const char *mode, const char *cuda, const char *cudart)
{
    char log[256];
    snprintf(log, sizeof log, "/tmp/podrun-nocuda-%d-%s.log", (int)getpid(), mode);
    unlink(log);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("PODRUN_FAKE_CUDA_LOG", log, 1);
        if (strcmp(mode, "preload") == 0) {
            char pre[1024];
            snprintf(pre, sizeof pre, "%s:%s", cuda, cudart);
            setenv("LD_PRELOAD", pre, 1);
            /* a sanitizer runtime must otherwise come first in the library list */
            setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
        }
        execl(self, self, "--run", mode, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    unlink(log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--run") == 0)
        return run(argv[2]);
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBCUDA LIBCUDART\n", argv[0]);
        return 2;
    }
    int rc = spawn("/proc/self/exe", "preload", argv[1], argv[2]);
    fprintf(stderr, "%s preload\n", rc ? "FAIL" : "ok  ");
    int rc2 = spawn("/proc/self/exe", "path", argv[1], argv[2]);
    fprintf(stderr, "%s path\n", rc2 ? "FAIL" : "ok  ");
    return rc || rc2;
}
