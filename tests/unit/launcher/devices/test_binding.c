/* tests/unit/launcher/devices/test_binding.c — per-rank CPU sets for torch's --numa-binding
 * modes and DeepSpeed's --bind_cores_to_rank, over the fixture machine's topology (64 CPUs, two
 * nodes of 16 cores with two threads each, two L3 groups per node) and cpusets chosen here. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/binding.h"
#include "launcher/devices/cpuset.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static struct cpu_topo *topo, *topo4;   /* topo4: the same CPUs as four NUMA nodes */

static const int nodes_4x4[8] = {0, 0, 0, 0, 1, 1, 1, 1};
static const int nodes_3x5[8] = {0, 0, 0, 1, 1, 1, 1, 1};

/* Plans one mode and returns rank r's set (or the error text) as text. */
static int plan(const struct cpu_topo *t, const char *allowed, enum binding_mode mode, int nlocal,
                const int *gpu_node, const char *core_list, struct binding_rank *out, char *err)
{
    cpu_set_t a;
    cpuset_parse(allowed, &a);
    struct binding_in in = {mode, nlocal, 8, gpu_node, core_list};
    err[0] = '\0';
    return binding_plan(t, &a, &in, out, err, 512);
}

static const char *cpus(const struct binding_rank *r)
{
    static char buf[8][128];
    static int next;
    char *b = buf[next++ % 8];
    cpuset_format(&r->cpus, b, 128);
    return b;
}

static void test_node_and_socket(void)
{
    struct binding_rank r[8];
    char err[512];
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_NODE, 8, nodes_4x4, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[3]), "0-15,32-47");
    CHECK_EQ_STR(cpus(&r[4]), "16-31,48-63");
    CHECK_EQ_INT(r[4].mem_node, -1);
    CHECK_EQ_INT(r[4].threads, 0);
    /* limited to the container's cpuset */
    CHECK_EQ_INT(plan(topo, "0-7,32-39", BINDING_NODE, 4, nodes_4x4, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-7,32-39");
    CHECK_EQ_INT(plan(topo, "0-7,32-39", BINDING_NODE, 8, nodes_4x4, NULL, r, err), -22);
    CHECK_EQ_STR(err, "--numa-binding node: local rank 4's GPU is on NUMA node 1, which has no CPU "
                      "in this container's cpuset (0-7,32-39): widen the cpuset or run without "
                      "--numa-binding");
    /* socket: every node of the GPU's socket (four nodes, two per socket) */
    CHECK_EQ_INT(plan(topo4, "0-63", BINDING_SOCKET, 8, (const int[]){1, 0, 2, 3, 3, 2, 1, 0},
                      NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-15,32-47");
    CHECK_EQ_STR(cpus(&r[2]), "16-31,48-63");
    CHECK_EQ_INT(plan(topo4, "0-63", BINDING_NODE, 8, (const int[]){1, 0, 2, 3, 3, 2, 1, 0},
                      NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "8-15,40-47");
    /* a socket's node with no usable CPU is not in it */
    CHECK_EQ_INT(plan(topo4, "8-15,40-47", BINDING_SOCKET, 1, (const int[]){1, 0, 0, 0, 0, 0, 0, 0},
                      NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "8-15,40-47");
}

static void test_exclusive(void)
{
    struct binding_rank r[8];
    char err[512];
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_EXCLUSIVE, 8, nodes_4x4, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-3,32-35");     /* 16 cores / 4 GPUs, whole cores */
    CHECK_EQ_STR(cpus(&r[1]), "4-7,36-39");
    CHECK_EQ_STR(cpus(&r[5]), "20-23,52-55");
    /* 16 cores for 3 GPUs: the first gets the extra core; 16 for 5: the first one extra */
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_EXCLUSIVE, 8, nodes_3x5, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-5,32-37");
    CHECK_EQ_STR(cpus(&r[1]), "6-10,38-42");
    CHECK_EQ_STR(cpus(&r[2]), "11-15,43-47");
    CHECK_EQ_STR(cpus(&r[3]), "16-19,48-51");
    CHECK_EQ_STR(cpus(&r[4]), "20-22,52-54");
    CHECK_EQ_STR(cpus(&r[7]), "29-31,61-63");
    /* the slices are of the container's cores only */
    CHECK_EQ_INT(plan(topo, "0-7", BINDING_EXCLUSIVE, 4, nodes_4x4, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[3]), "6-7");
    CHECK_EQ_INT(plan(topo, "0-1,32-33", BINDING_EXCLUSIVE, 4, nodes_4x4, NULL, r, err), -22);
    CHECK(strstr(err, "NUMA node 0 has 2 physical core(s) in this container for 4 GPUs") != NULL);
}

static void test_core_complex(void)
{
    struct binding_rank r[8];
    char err[512];
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_CORE_COMPLEX, 8, nodes_4x4, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-7,32-39");
    CHECK_EQ_STR(cpus(&r[1]), "8-15,40-47");
    CHECK_EQ_STR(cpus(&r[2]), "0-7,32-39");     /* more GPUs than caches: wrap around */
    CHECK_EQ_STR(cpus(&r[4]), "16-23,48-55");
    /* the larger group first */
    CHECK_EQ_INT(plan(topo, "4-63", BINDING_CORE_COMPLEX, 2, nodes_4x4, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "8-15,40-47");
    CHECK_EQ_STR(cpus(&r[1]), "4-7,32-39");
    struct cpu_topo *t = malloc(sizeof *t);
    *t = *topo;
    t->llc[5] = -1;
    CHECK_EQ_INT(plan(t, "0-63", BINDING_CORE_COMPLEX, 1, nodes_4x4, NULL, r, err), -22);
    CHECK(strstr(err, "CPU 5 has no cache topology") != NULL);
    free(t);
}

static void test_torch_errors(void)
{
    struct binding_rank r[8];
    char err[512];
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_NODE, 2, (const int[]){0, -1, 0, 0, 0, 0, 0, 0}, NULL,
                      r, err), -22);
    CHECK(strstr(err, "the NUMA node of local rank 1's GPU is unknown") != NULL);
    cpu_set_t a;
    cpuset_parse("0-63", &a);
    struct binding_in in = {BINDING_NODE, 9, 8, nodes_4x4, NULL};
    struct binding_rank nine[9];
    CHECK_EQ_INT(binding_plan(topo, &a, &in, nine, err, sizeof err), -22);
    CHECK(strstr(err, "9 local workers and 8 visible GPU(s)") != NULL);
    in.nlocal = 0;
    CHECK_EQ_INT(binding_plan(topo, &a, &in, r, err, sizeof err), -22);
    /* no binding: every rank may use the whole cpuset */
    CHECK_EQ_INT(plan(topo, "2-5", BINDING_NONE, 3, NULL, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[2]), "2-5");
}

static void test_deepspeed(void)
{
    struct binding_rank r[8];
    char err[512];
    /* default: one thread of each physical core, split evenly */
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_CORES, 8, NULL, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-3");
    CHECK_EQ_STR(cpus(&r[5]), "20-23");
    CHECK_EQ_INT(r[5].mem_node, 1);
    CHECK_EQ_INT(r[3].mem_node, 0);
    CHECK_EQ_INT(r[5].threads, 4);
    /* a slice across two nodes binds no memory; the remainder stays unused */
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_CORES, 3, NULL, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[1]), "10-19");
    CHECK_EQ_INT(r[1].mem_node, -1);
    CHECK_EQ_STR(cpus(&r[2]), "20-29");
    CHECK_EQ_INT(r[2].threads, 10);
    /* --bind_core_list */
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_CORES, 4, NULL, "0-9,12-21", r, err), 0);
    CHECK_EQ_STR(cpus(&r[1]), "5-9");
    CHECK_EQ_INT(r[1].mem_node, 0);
    CHECK_EQ_STR(cpus(&r[2]), "12-16");
    CHECK_EQ_INT(r[2].mem_node, -1);    /* CPU 16 is on node 1 */
    CHECK_EQ_STR(cpus(&r[3]), "17-21");
    CHECK_EQ_INT(r[3].mem_node, 1);
    CHECK_EQ_INT(r[3].threads, 5);
    /* in a container: only the cpuset's cores, one thread each */
    CHECK_EQ_INT(plan(topo, "0-3,32-35", BINDING_CORES, 2, NULL, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[0]), "0-1");
    CHECK_EQ_STR(cpus(&r[1]), "2-3");
    CHECK_EQ_INT(plan(topo, "32-35", BINDING_CORES, 2, NULL, NULL, r, err), 0);
    CHECK_EQ_STR(cpus(&r[1]), "34-35");
}

static void test_deepspeed_errors(void)
{
    static const char *const bad[] = {"3-1", "1,1", "2,1", "0-3,2-5", "a", "1 ,2", "", "1-",
                                      "0,1024", "1,", "-1"};
    struct binding_rank r[8];
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(plan(topo, "0-63", BINDING_CORES, 1, NULL, bad[i], r, err), -22);
        char want[64];
        snprintf(want, sizeof want, "--bind_core_list '%s': ", bad[i]);
        CHECK(strstr(err, want) == err);
    }
    CHECK_EQ_INT(plan(topo, "0-31", BINDING_CORES, 1, NULL, "30-33", r, err), -22);
    CHECK_EQ_STR(err, "--bind_core_list names CPU 32, outside this container's cpuset (0-31): list "
                      "CPUs from the cpuset");
    struct binding_rank *many = malloc(40 * sizeof *many);
    CHECK_EQ_INT(plan(topo, "0-63", BINDING_CORES, 40, NULL, NULL, many, err), -22);
    CHECK(strstr(err, "32 core(s) for 40 local workers") != NULL);
    free(many);
}

static void test_mode_names(void)
{
    static const char *const names[] = {"node", "socket", "exclusive", "core-complex"};
    for (int i = 0; i < 4; i++) {
        enum binding_mode m;
        CHECK_EQ_INT(binding_mode_parse(names[i], &m), 0);
        CHECK_EQ_STR(binding_mode_name(m), names[i]);
    }
    enum binding_mode m;
    CHECK_EQ_INT(binding_mode_parse("core_complex", &m), -22);
    CHECK_EQ_INT(binding_mode_parse("cores", &m), -22);   /* DeepSpeed's is its own flag */
    CHECK_EQ_INT(binding_mode_parse(NULL, &m), -22);
    CHECK_EQ_STR(binding_mode_name(BINDING_CORES), "cores");
}

int main(void)
{
    char root[256];
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    topo = malloc(sizeof *topo);
    topo4 = malloc(sizeof *topo4);
    sysroot_set(root);
    if (cpu_topo_read(topo) < 0)
        return 1;
    /* four nodes of eight cores, two per socket */
    *topo4 = *topo;
    topo4->nnodes = 4;
    for (int n = 0; n < 4; n++) {
        CPU_ZERO(&topo4->node[n]);
        for (int c = n * 8; c < n * 8 + 8; c++) {
            CPU_SET(c, &topo4->node[n]);
            CPU_SET(c + 32, &topo4->node[n]);
        }
    }
    RUN(test_node_and_socket);
    RUN(test_exclusive);
    RUN(test_core_complex);
    RUN(test_torch_errors);
    RUN(test_deepspeed);
    RUN(test_deepspeed_errors);
    RUN(test_mode_names);
    free(topo);
    free(topo4);
    fx_root_remove(root);
    return check_result();
}
