/* tests/unit/launcher/devices/test_node.c — the node probed once (fixture machine, fake NVML and
 * libibverbs), planned for a job's settings: the GPU count finalize gets, each local rank's CPUs,
 * its own GPU, the variables every worker gets (never one the environment has), the start-up
 * lines and `podrun env`'s text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/cpuset.h"
#include "launcher/devices/node.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static char root[256];
static char err[512];

static struct node_devices *probe(char **envp, bool mig)
{
    char path[512];
    struct fx_opts o = {.no_mig = !mig};
    fx_nvml_conf_opts(root, &o, NULL, path, sizeof path);
    setenv("PODRUN_FAKE_NVML", path, 1);
    fx_verbs_conf(root, FX_VERBS_CONF, path, sizeof path);
    setenv("PODRUN_FAKE_IBVERBS", path, 1);
    struct cfg c;
    memset(&c, 0, sizeof c);
    c.sysroot = root;
    struct node_devices *nd = calloc(1, sizeof *nd);
    CHECK_EQ_INT(node_probe(nd, &c, envp), 0);
    /* the fixture's 64 CPUs, whatever this test runs on */
    CPU_ZERO(&nd->allowed);
    for (int i = 0; i < 64; i++)
        CPU_SET(i, &nd->allowed);
    return nd;
}

static struct cfg job(int nproc, int numa, bool per_rank)
{
    struct cfg c;
    memset(&c, 0, sizeof c);
    c.nproc_per_node = nproc;
    c.numa_binding = numa;
    c.visible_devices = per_rank ? CFG_VISIBLE_PER_RANK : CFG_VISIBLE_ALL;
    return c;
}

static const char *var(char **vars, const char *name)
{
    size_t n = strlen(name);
    for (; *vars; vars++)
        if (!strncmp(*vars, name, n) && (*vars)[n] == '=')
            return *vars + n + 1;
    return NULL;
}

static void test_gpu_count(void)
{
    char *envp[] = {NULL};
    struct node_devices *nd = probe(envp, true);
    CHECK_EQ_INT(nd->gpus.n, FX_NGPUS);
    CHECK_EQ_INT(node_gpu_count(nd), 9);   /* GPU 7 contributes its two MIG devices */
    node_free(nd);
    free(nd);
    nd = probe(envp, false);
    CHECK_EQ_INT(node_gpu_count(nd), FX_NGPUS);
    node_free(nd);
    free(nd);
    char *some[] = {"CUDA_VISIBLE_DEVICES=3,1", NULL};
    nd = probe(some, false);
    CHECK_EQ_INT(node_gpu_count(nd), 2);
    node_free(nd);
    free(nd);
}

/* --numa-binding node on 8 GPUs over 2 nodes: ranks 0-3 on node 0's CPUs, 4-7 on node 1's; each
 * rank its own GPU by UUID; the variables with OMP_NUM_THREADS=1. */
static void test_node_binding_and_own_gpu(void)
{
    char *envp[] = {"PATH=/bin", NULL};
    struct node_devices *nd = probe(envp, false);
    struct cfg c = job(8, CFG_NUMA_NODE, true);
    CHECK_EQ_INT(node_plan(nd, &c, err, sizeof err), 0);
    char set[256];
    for (int lr = 0; lr < 8; lr++) {
        const struct binding_rank *b = node_rank_binding(nd, lr);
        CHECK(b != NULL);
        cpuset_format(&b->cpus, set, sizeof set);
        CHECK_EQ_STR(set, lr < 4 ? "0-15,32-47" : "16-31,48-63");
        char uuid[GPU_UUID_LEN];
        CHECK_EQ_INT(node_rank_visible(nd, lr, uuid, sizeof uuid), 1);
        CHECK_EQ_STR(uuid, FX_GPU_UUID[lr]);
    }
    CHECK(node_rank_binding(nd, 8) == NULL);
    char **vars;
    CHECK_EQ_INT(node_worker_vars(nd, &vars), 0);
    CHECK_EQ_STR(var(vars, "OMP_NUM_THREADS"), "1");
    CHECK_EQ_STR(var(vars, "NCCL_IB_DISABLE"), "1");   /* no /dev/infiniband in the fixture */
    CHECK(var(vars, "CUDA_VISIBLE_DEVICES") == NULL);  /* per worker, not common */
    CHECK(var(vars, "GLOO_SOCKET_IFNAME") == NULL);    /* the master is not known yet */
    free(vars);
    /* the master known: the interface of 127.0.0.1 is the loopback's */
    node_set_master(nd, "127.0.0.1", NULL);
    CHECK(nd->nic_known);
    CHECK_EQ_INT(node_worker_vars(nd, &vars), 0);
    CHECK(var(vars, "GLOO_SOCKET_IFNAME") && !strcmp(var(vars, "GLOO_SOCKET_IFNAME"),
                                                     nd->nic.ifname));
    free(vars);
    node_set_master(nd, NULL, "the master x does not resolve here");
    CHECK(!nd->nic_known);
    CHECK_EQ_STR(nd->nic_note, "the master x does not resolve here");
    node_free(nd);
    free(nd);
}

/* A variable in the environment is left alone, and never handed to a worker again. */
static void test_user_values_stand(void)
{
    char *envp[] = {"OMP_NUM_THREADS=6", "NCCL_IB_DISABLE=0", NULL};
    struct node_devices *nd = probe(envp, false);
    struct cfg c = job(4, CFG_NUMA_NONE, false);
    CHECK_EQ_INT(node_plan(nd, &c, err, sizeof err), 0);
    CHECK(node_rank_binding(nd, 0) == NULL);
    char uuid[GPU_UUID_LEN];
    CHECK_EQ_INT(node_rank_visible(nd, 0, uuid, sizeof uuid), 0);
    char **vars;
    CHECK_EQ_INT(node_worker_vars(nd, &vars), 0);
    CHECK(var(vars, "OMP_NUM_THREADS") == NULL && var(vars, "NCCL_IB_DISABLE") == NULL);
    free(vars);
    const struct nccl_env_var *v = nccl_env_find(&nd->env, "NCCL_IB_DISABLE");
    CHECK(v && v->action == NCCL_ENV_USER && v->notice);
    node_free(nd);
    free(nd);
}

/* DeepSpeed's cores: the list split by local rank, OMP_NUM_THREADS = cores per rank. */
static void test_cores_mode(void)
{
    char *envp[] = {NULL};
    struct node_devices *nd = probe(envp, false);
    struct cfg c = job(4, CFG_NUMA_CORES, false);
    c.bind_core_list = "0-7";
    CHECK_EQ_INT(node_plan(nd, &c, err, sizeof err), 0);
    char set[64];
    cpuset_format(&node_rank_binding(nd, 3)->cpus, set, sizeof set);
    CHECK_EQ_STR(set, "6-7");
    CHECK_EQ_INT(node_rank_binding(nd, 3)->mem_node, 0);
    char **vars;
    CHECK_EQ_INT(node_worker_vars(nd, &vars), 0);
    CHECK_EQ_STR(var(vars, "OMP_NUM_THREADS"), "2");
    free(vars);
    c.bind_core_list = "0-2";   /* three cores for four workers */
    CHECK_EQ_INT(node_plan(nd, &c, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "3 core(s) for 4 local workers") != NULL);
    node_free(nd);
    free(nd);
}

/* Under a CPU quota of 4 CPUs, four workers bound to 2 cores each get one OpenMP thread each:
 * more would be throttled, not run. `podrun env` says the quota decided. */
static void test_cores_under_quota(void)
{
    char *envp[] = {NULL};
    struct node_devices *nd = probe(envp, false);
    nd->cpus = (struct cpu_usable){.n = 4, .cpuset = 64, .quota_us = 400000, .period_us = 100000,
                                   .quota_file = "/sys/fs/cgroup/cpu.max"};
    struct cfg c = job(4, CFG_NUMA_CORES, false);
    c.bind_core_list = "0-7";
    CHECK_EQ_INT(node_plan(nd, &c, err, sizeof err), 0);
    char **vars;
    CHECK_EQ_INT(node_worker_vars(nd, &vars), 0);
    CHECK_EQ_STR(var(vars, "OMP_NUM_THREADS"), "1");
    free(vars);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    node_print(nd, f, false);
    fclose(f);
    CHECK(strstr(out, "            4 usable: the CPU quota decides (4.00 CPUs in ") != NULL);
    CHECK(strstr(out, "/sys/fs/cgroup/cpu.max, rounded down)\n") != NULL);
    free(out);
    node_free(nd);
    free(nd);
}

static void collect(void *arg, const char *text)
{
    char *buf = arg;
    strncat(buf, text, 8191 - strlen(buf));
    strncat(buf, "\n", 8191 - strlen(buf));
}

/* What is said at start, and what `podrun env` prints. */
static void test_summary_and_print(void)
{
    char *envp[] = {"NCCL_SOCKET_IFNAME=eth7", NULL};
    struct node_devices *nd = probe(envp, false);
    struct cfg c = job(8, CFG_NUMA_SOCKET, true);
    CHECK_EQ_INT(node_plan(nd, &c, err, sizeof err), 0);
    node_set_master(nd, "127.0.0.1", NULL);
    static char lines[8192];
    lines[0] = '\0';
    node_summary(nd, collect, lines);
    CHECK(strstr(lines, "podrun sets ") == lines);
    CHECK(strstr(lines, "CUDA_VISIBLE_DEVICES=<one device per worker>") != NULL);
    CHECK(strstr(lines, "NCCL_SOCKET_IFNAME") == NULL || strstr(lines, "eth7") == NULL);
    CHECK(strstr(lines, "\nNCCL_IB_DISABLE: HCAs mlx5_0, mlx5_1, mlx5_2, mlx5_3 are on this node "
                        "but /dev/infiniband is not in the container") != NULL);
    CHECK(strstr(lines, "workers are bound (--numa-binding socket): local ranks 0-3: CPUs "
                        "0-15,32-47; local ranks 4-7: CPUs 16-31,48-63\n") != NULL);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    node_print(nd, f, false);
    fclose(f);
    CHECK(strstr(out, "GPUs        8 found (NVML); 8 visible to the workers\n") != NULL);
    CHECK(strstr(out, "mlx5_1:1 DOWN InfiniBand, uverbs no") != NULL);
    CHECK(strstr(out, "left alone  NCCL_SOCKET_IFNAME=eth7\n") != NULL);
    CHECK(strstr(out, "local rank 5: CUDA_VISIBLE_DEVICES=GPU-4d5e6f70") != NULL);
    CHECK(strstr(out, "local rank 7: CPUs 16-31,48-63\n") != NULL);
    free(out);
    out = NULL;
    f = open_memstream(&out, &len);
    node_print(nd, f, true);
    fclose(f);
    CHECK(strstr(out, "env NCCL_SOCKET_IFNAME") && strstr(out, "inherited, left alone"));
    CHECK(strstr(out, "env CUDA_VISIBLE_DEVICES") && strstr(out, "<per worker>"));
    free(out);
    node_free(nd);
    free(nd);
}

int main(void)
{
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    RUN(test_gpu_count);
    RUN(test_node_binding_and_own_gpu);
    RUN(test_user_values_stand);
    RUN(test_cores_mode);
    RUN(test_cores_under_quota);
    RUN(test_summary_and_print);
    sysroot_set(NULL);
    fx_root_remove(root);
    return check_result();
}
