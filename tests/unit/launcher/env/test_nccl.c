/* tests/unit/launcher/env/test_nccl.c — the NCCL, Gloo, CUDA and OpenMP variables derived from
 * device facts built here, against reference/nccl.md's recommendations: what is set, what is left
 * alone because the user set it, and why (pure; table tests). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/env/nccl.h"
#include "tests/fixtures/machine.h"

/* ---------- facts ---------- */

static struct nic_choice nic_routed(bool agrees)
{
    struct nic_choice c = {.ifname = "eth0", .addr = "10.0.0.7", .master = "10.0.0.1"};
    snprintf(c.nccl_auto, sizeof c.nccl_auto, "%s", agrees ? "eth0" : "eth0,veth12");
    c.nccl_agrees = agrees;
    snprintf(c.reason, sizeof c.reason, "the route to MASTER_ADDR 10.0.0.1 goes through eth0");
    return c;
}

static void port(struct ib_dev *d, int state, enum ib_link link, int gid, const char *ip)
{
    struct ib_port *p = &d->port[d->nports];
    p->num = ++d->nports;
    p->state = state;
    p->link = link;
    p->gid_index = gid;
    snprintf(p->gid_ipv4, sizeof p->gid_ipv4, "%s", ip ? ip : "");
}

/* The fixture machine's HCAs: mlx5_0 IB ACTIVE, mlx5_1 IB DOWN, mlx5_2 RoCE ACTIVE GID 3,
 * mlx5_3 RoCE ACTIVE GID 7. */
static void ib_fixture(struct ib_info *ib, bool dev_infiniband)
{
    memset(ib, 0, sizeof *ib);
    ib->verbs = IB_VERBS_LISTED;
    ib->dev_infiniband = dev_infiniband;
    ib->ndev = 4;
    for (int i = 0; i < 4; i++) {
        snprintf(ib->dev[i].name, sizeof ib->dev[i].name, "mlx5_%d", i);
        ib->dev[i].uverbs = dev_infiniband;
        ib->dev[i].in_sysfs = true;
    }
    port(&ib->dev[0], 4, IB_LINK_INFINIBAND, -1, NULL);
    port(&ib->dev[1], 1, IB_LINK_INFINIBAND, -1, NULL);
    port(&ib->dev[2], 4, IB_LINK_ETHERNET, 3, "10.0.0.7");
    port(&ib->dev[3], 4, IB_LINK_ETHERNET, 7, "10.0.1.7");
}

/* Two RoCE ports with the same GID index. */
static void ib_roce(struct ib_info *ib, int gid1)
{
    memset(ib, 0, sizeof *ib);
    ib->verbs = IB_VERBS_LISTED;
    ib->dev_infiniband = true;
    ib->ndev = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(ib->dev[i].name, sizeof ib->dev[i].name, "mlx5_%d", i);
        ib->dev[i].uverbs = true;
    }
    port(&ib->dev[0], 4, IB_LINK_ETHERNET, 3, "10.0.0.7");
    port(&ib->dev[1], 4, IB_LINK_ETHERNET, gid1, gid1 >= 0 ? "10.0.1.7" : NULL);
}

static void gpus(struct gpu_list *g, bool mixed)
{
    memset(g, 0, sizeof *g);
    g->n = FX_NGPUS;
    g->source = GPU_SOURCE_NVML;
    for (int i = 0; i < FX_NGPUS; i++) {
        snprintf(g->dev[i].uuid, sizeof g->dev[i].uuid, "%s", FX_GPU_UUID[i]);
        snprintf(g->dev[i].name, sizeof g->dev[i].name, "%s",
                 mixed && i >= 4 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100 80GB HBM3");
        g->dev[i].mig = 0;
        g->dev[i].numa_node = FX_GPU_NODE[i];
    }
}

static const struct nccl_env_var *var(const struct nccl_env *e, const char *name)
{
    return nccl_env_find(e, name);
}

static void check_var(const struct nccl_env *e, const char *name, int action, const char *value,
                      const char *reason, int line)
{
    const struct nccl_env_var *v = var(e, name);
    int before = check_failures;
    if (action < 0) {
        CHECK(v == NULL);
    } else {
        CHECK(v != NULL);
        if (!v)
            return;
        CHECK_EQ_INT(v->action, action);
        if (value)
            CHECK_EQ_STR(v->value, value);
        if (reason)
            CHECK(strstr(v->reason, reason) != NULL);
    }
    if (check_failures != before)
        fprintf(stderr, "  from line %d: %s = %s (%s)\n", line, name, v ? v->value : "(none)",
                v ? v->reason : "");
}
#define VAR(e, name, action, value, reason) check_var(e, name, action, value, reason, __LINE__)
#define NONE (-1)

/* ---------- sockets ---------- */

static void test_socket_ifname(void)
{
    struct nccl_env e;
    struct nic_choice c = nic_routed(false);
    struct nccl_facts f = {.nic = &c, .nlocal = 1};
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NCCL_ENV_SET, "=eth0",
        "the route to MASTER_ADDR 10.0.0.1 goes through eth0; on its own NCCL would use eth0,veth12");
    VAR(&e, "GLOO_SOCKET_IFNAME", NCCL_ENV_SET, "eth0", "goes through eth0; Gloo otherwise");
    /* NCCL before 2.5 has no exact match */
    f.nccl_version = 2403;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NCCL_ENV_SET, "eth0", NULL);
    f.nccl_version = 22105;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NCCL_ENV_SET, "=eth0", NULL);
    /* NCCL alone picks exactly this interface: nothing to add */
    c = nic_routed(true);
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NCCL_ENV_UNSET, "", "NCCL picks eth0 on its own");
    VAR(&e, "GLOO_SOCKET_IFNAME", NCCL_ENV_SET, "eth0", NULL);
    /* nothing fits */
    memset(&c, 0, sizeof c);
    snprintf(c.reason, sizeof c.reason, "no usable route to MASTER_ADDR 10.9.9.9 and no up interface");
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NCCL_ENV_UNSET, "", "no usable route");
    VAR(&e, "GLOO_SOCKET_IFNAME", NONE, NULL, NULL);
    /* no master address known yet */
    f.nic = NULL;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NONE, NULL, NULL);
    /* the user's values stand */
    c = nic_routed(false);
    f.nic = &c;
    char *env[] = {"PATH=/bin", "NCCL_SOCKET_IFNAME=^docker,lo", "GLOO_SOCKET_IFNAME=ib0", NULL};
    nccl_env_derive(&f, env, &e);
    VAR(&e, "NCCL_SOCKET_IFNAME", NCCL_ENV_USER, "^docker,lo", "set by the user or the operator, left alone");
    VAR(&e, "GLOO_SOCKET_IFNAME", NCCL_ENV_USER, "ib0", NULL);
}

/* ---------- InfiniBand / RoCE ---------- */

static void test_ib_not_mounted(void)
{
    struct ib_info ib;
    struct nccl_env e;
    ib_fixture(&ib, false);
    struct nccl_facts f = {.ib = &ib, .nlocal = 1};
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_SET, "1",
        "HCAs mlx5_0, mlx5_1, mlx5_2, mlx5_3 are on this node but /dev/infiniband is not in the "
        "container: NCCL cannot open them and would fall back to TCP sockets");
    CHECK(var(&e, "NCCL_IB_DISABLE")->notice);
    VAR(&e, "NCCL_IB_HCA", NONE, NULL, NULL);
    VAR(&e, "NCCL_IB_GID_INDEX", NONE, NULL, NULL);
    /* the user asked for IB anyway: left alone, the finding kept as a notice */
    char *env[] = {"NCCL_IB_DISABLE=0", NULL};
    nccl_env_derive(&f, env, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_USER, "0", "left alone (podrun's finding: HCAs mlx5_0");
    CHECK(var(&e, "NCCL_IB_DISABLE")->notice);
    /* ... and HCAs without their uverbs nodes under a mounted /dev/infiniband */
    ib_fixture(&ib, true);
    for (int i = 0; i < 4; i++)
        ib.dev[i].uverbs = false;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_SET, "1", "no /dev/infiniband/uverbs* device");
}

static void test_ib_ports(void)
{
    struct ib_info ib;
    struct nccl_env e;
    ib_fixture(&ib, true);
    struct nccl_facts f = {.ib = &ib, .nlocal = 1};
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_DISABLE", NONE, NULL, NULL);
    VAR(&e, "NCCL_IB_HCA", NCCL_ENV_SET, "=mlx5_0:1,mlx5_2:1,mlx5_3:1",
        "the 3 usable port(s), exact names; left out mlx5_1:1 (DOWN)");
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_UNSET, "",
        "different indices (mlx5_2:1 -> 3 (10.0.0.7), mlx5_3:1 -> 7 (10.0.1.7))");
    /* a device whose uverbs node is missing is left out too */
    ib.dev[3].uverbs = false;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_HCA", NCCL_ENV_SET, "=mlx5_0:1,mlx5_2:1",
        "left out mlx5_1:1 (DOWN), mlx5_3:1 (no uverbs device here)");
    /* everything usable: NCCL's own choice is right */
    ib_fixture(&ib, true);
    ib.dev[1].port[0].state = 4;
    ib.dev[3].port[0].gid_index = 3;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_HCA", NCCL_ENV_UNSET, "", "all 4 HCA port(s) are ACTIVE");
    /* nothing ACTIVE */
    for (int i = 0; i < 4; i++)
        ib.dev[i].port[0].state = 1;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_SET, "1", "no port of HCAs mlx5_0, mlx5_1, mlx5_2, mlx5_3 is ACTIVE");
    VAR(&e, "NCCL_IB_HCA", NONE, NULL, NULL);
    /* the user's choices */
    ib_fixture(&ib, true);
    char *env[] = {"NCCL_IB_HCA=mlx5_0", "NCCL_IB_GID_INDEX=5", NULL};
    nccl_env_derive(&f, env, &e);
    VAR(&e, "NCCL_IB_HCA", NCCL_ENV_USER, "mlx5_0", NULL);
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_USER, "5", NULL);
    char *off[] = {"NCCL_IB_DISABLE=1", NULL};
    nccl_env_derive(&f, off, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_USER, "1", NULL);
    VAR(&e, "NCCL_IB_HCA", NONE, NULL, NULL);
    VAR(&e, "NCCL_IB_GID_INDEX", NONE, NULL, NULL);
    char *sockets[] = {"NCCL_NET=Socket", NULL};
    nccl_env_derive(&f, sockets, &e);
    VAR(&e, "NCCL_IB_HCA", NONE, NULL, NULL);
}

static void test_ib_library(void)
{
    struct ib_info ib;
    struct nccl_env e;
    ib_fixture(&ib, true);
    struct nccl_facts f = {.ib = &ib, .nlocal = 1};
    ib.verbs = IB_VERBS_EMPTY;
    snprintf(ib.note, sizeof ib.note, "ibv_get_device_list: Function not implemented");
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_UNSET, "",
        "sysfs shows HCAs mlx5_0, mlx5_1, mlx5_2, mlx5_3 but libibverbs lists none — "
        "ibv_get_device_list: Function not implemented: the image likely lacks");
    CHECK(var(&e, "NCCL_IB_DISABLE")->notice);
    ib.verbs = IB_VERBS_MISSING;
    snprintf(ib.note, sizeof ib.note, "libibverbs.so.1: cannot open shared object file");
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_DISABLE", NCCL_ENV_UNSET, "", "libibverbs.so.1 does not load here");
}

static void test_gid_index(void)
{
    struct ib_info ib;
    struct nccl_env e;
    ib_roce(&ib, 3);
    struct nccl_facts f = {.ib = &ib, .nlocal = 1};
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_HCA", NCCL_ENV_UNSET, NULL, NULL);
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_SET, "3",
        "(mlx5_0:1 -> 3 (10.0.0.7), mlx5_1:1 -> 3 (10.0.1.7)); NCCL before 2.21 uses index 0 "
        "otherwise, NCCL 2.21+ picks the same one (the workers' NCCL version is not known here)");
    f.nccl_version = 21805;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_SET, "3", NULL);
    f.nccl_version = 22105;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_UNSET, "", "NCCL 2.21 picks the RoCE v2 GID itself");
    f.nccl_version = 0;
    char *family[] = {"NCCL_IB_ADDR_FAMILY=AF_INET6", NULL};
    nccl_env_derive(&f, family, &e);
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_UNSET, "", "NCCL_IB_ADDR_FAMILY is set");
    ib_roce(&ib, -1);
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_GID_INDEX", NCCL_ENV_UNSET, "",
        "RoCE port(s) mlx5_1:1 have no RoCE v2 GID with an IPv4 address");
    CHECK(var(&e, "NCCL_IB_GID_INDEX")->notice);
    /* InfiniBand only: no GID choice to make */
    ib_fixture(&ib, true);
    ib.dev[2].port[0].link = ib.dev[3].port[0].link = IB_LINK_INFINIBAND;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "NCCL_IB_GID_INDEX", NONE, NULL, NULL);
}

/* ---------- GPUs ---------- */

static void test_device_order(void)
{
    struct gpu_list *g = malloc(sizeof *g);
    struct gpu_visible v;
    struct gpu_visible_env genv = {0};
    struct nccl_env e;
    gpus(g, true);
    visible_resolve(g, &genv, &v);
    struct nccl_facts f = {.gpus = g, .visible = &v, .nlocal = 8};
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "CUDA_DEVICE_ORDER", NCCL_ENV_SET, "PCI_BUS_ID",
        "the GPUs differ (NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-80GB)");
    char *user[] = {"CUDA_DEVICE_ORDER=FASTEST_FIRST", NULL};
    nccl_env_derive(&f, user, &e);
    VAR(&e, "CUDA_DEVICE_ORDER", NCCL_ENV_USER, "FASTEST_FIRST", NULL);
    /* indices chosen by the user: changing the order would change which GPUs they name */
    genv.cuda_visible_devices = "0,5";
    visible_resolve(g, &genv, &v);
    char *cvd[] = {"CUDA_VISIBLE_DEVICES=0,5", NULL};
    nccl_env_derive(&f, cvd, &e);
    VAR(&e, "CUDA_DEVICE_ORDER", NCCL_ENV_UNSET, "", "name them by UUID or set CUDA_DEVICE_ORDER=PCI_BUS_ID");
    CHECK(var(&e, "CUDA_DEVICE_ORDER")->notice);
    /* one model: CUDA's order is the PCI order */
    gpus(g, false);
    genv.cuda_visible_devices = NULL;
    visible_resolve(g, &genv, &v);
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "CUDA_DEVICE_ORDER", NONE, NULL, NULL);
    free(g);
}

static void test_per_rank_visible(void)
{
    struct gpu_list *g = malloc(sizeof *g);
    struct gpu_visible v;
    struct gpu_visible_env genv = {0};
    struct nccl_env e;
    gpus(g, false);
    visible_resolve(g, &genv, &v);
    struct nccl_facts f = {.gpus = g, .visible = &v, .nlocal = 8};
    /* default: workers inherit, as under torchrun */
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "CUDA_VISIBLE_DEVICES", NONE, NULL, NULL);
    CHECK(!e.per_rank_visible);
    char buf[128];
    CHECK_EQ_INT(nccl_env_rank_visible(&e, &v, 0, buf, sizeof buf), -ENOENT);
    /* asked: one UUID each */
    f.per_rank_visible = true;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "CUDA_VISIBLE_DEVICES", NCCL_ENV_SET, NULL, "one GPU per worker was asked");
    CHECK(e.per_rank_visible);
    CHECK(strncmp(var(&e, "CUDA_VISIBLE_DEVICES")->value, FX_GPU_UUID[0], strlen(FX_GPU_UUID[0])) == 0);
    CHECK_EQ_INT(nccl_env_rank_visible(&e, &v, 3, buf, sizeof buf), 0);
    CHECK_EQ_STR(buf, FX_GPU_UUID[3]);
    CHECK_EQ_INT(nccl_env_rank_visible(&e, &v, 8, buf, sizeof buf), -ERANGE);
    CHECK_EQ_INT(nccl_env_rank_visible(&e, &v, 1, buf, 10), -ENOSPC);
    /* asked, with the user's own list: each worker gets one device of it */
    genv.cuda_visible_devices = "GPU-5e6f,GPU-1f2e";
    visible_resolve(g, &genv, &v);
    char *cvd[] = {"CUDA_VISIBLE_DEVICES=GPU-5e6f,GPU-1f2e", NULL};
    f.nlocal = 2;
    nccl_env_derive(&f, cvd, &e);
    VAR(&e, "CUDA_VISIBLE_DEVICES", NCCL_ENV_SET, NULL, "each a device of the inherited CUDA_VISIBLE_DEVICES");
    nccl_env_rank_visible(&e, &v, 1, buf, sizeof buf);
    CHECK_EQ_STR(buf, FX_GPU_UUID[2]);
    /* more workers than devices */
    f.nlocal = 3;
    nccl_env_derive(&f, cvd, &e);
    VAR(&e, "CUDA_VISIBLE_DEVICES", NCCL_ENV_USER, "GPU-5e6f,GPU-1f2e", "3 workers but 2 GPU(s) are visible");
    CHECK(!e.per_rank_visible);
    /* not asked, user's list: left alone */
    f.per_rank_visible = false;
    f.nlocal = 2;
    nccl_env_derive(&f, cvd, &e);
    VAR(&e, "CUDA_VISIBLE_DEVICES", NCCL_ENV_USER, "GPU-5e6f,GPU-1f2e", NULL);
    /* MIG devices: one per worker without being asked */
    g->dev[7].mig = 1;
    g->dev[7].nmig = 2;
    snprintf(g->dev[7].migs[0].uuid, sizeof g->dev[7].migs[0].uuid, "%s", FX_MIG_UUID[0]);
    snprintf(g->dev[7].migs[1].uuid, sizeof g->dev[7].migs[1].uuid, "%s", FX_MIG_UUID[1]);
    genv.cuda_visible_devices = NULL;
    visible_resolve(g, &genv, &v);
    f.nlocal = 9;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "CUDA_VISIBLE_DEVICES", NCCL_ENV_SET, NULL, "MIG devices");
    nccl_env_rank_visible(&e, &v, 8, buf, sizeof buf);
    CHECK_EQ_STR(buf, FX_MIG_UUID[1]);
    VAR(&e, "CUDA_DEVICE_ORDER", NONE, NULL, NULL);
    free(g);
}

static void test_omp(void)
{
    struct nccl_env e;
    struct nccl_facts f = {.nlocal = 8};
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "OMP_NUM_THREADS", NCCL_ENV_SET, "1", "8 workers share this node: torchrun's default");
    f.omp = NCCL_OMP_NONE;          /* DeepSpeed gives none */
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "OMP_NUM_THREADS", NONE, NULL, NULL);
    f.omp_threads = 4;              /* unless it binds cores */
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "OMP_NUM_THREADS", NCCL_ENV_SET, "4", "--bind_cores_to_rank");
    f.omp_threads = 0;
    f.omp = NCCL_OMP_ONE;           /* Paddle's, with one worker too */
    f.nlocal = 1;
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "OMP_NUM_THREADS", NCCL_ENV_SET, "1", "Paddle's default");
    f.omp = NCCL_OMP_TORCHRUN;      /* torchrun's: none for one worker */
    nccl_env_derive(&f, NULL, &e);
    VAR(&e, "OMP_NUM_THREADS", NONE, NULL, NULL);
    char *env[] = {"OMP_NUM_THREADS=16", NULL};
    nccl_env_derive(&f, env, &e);
    VAR(&e, "OMP_NUM_THREADS", NCCL_ENV_USER, "16", NULL);   /* reported even when podrun adds none */
}

/* Whatever podrun would set, a value already in the environment wins, for every variable. */
static void test_never_overrides(void)
{
    struct gpu_list *g = malloc(sizeof *g);
    struct gpu_visible v;
    struct gpu_visible_env genv = {0};
    struct ib_info ib;
    struct nic_choice c = nic_routed(false);
    gpus(g, true);
    visible_resolve(g, &genv, &v);
    ib_fixture(&ib, false);
    struct nccl_facts f = {.gpus = g, .visible = &v, .ib = &ib, .nic = &c, .nlocal = 8};
    struct nccl_env base, e;
    nccl_env_derive(&f, NULL, &base);
    int set = 0;
    for (int i = 0; i < base.n; i++) {
        if (base.var[i].action != NCCL_ENV_SET)
            continue;
        set++;
        char assign[128];
        snprintf(assign, sizeof assign, "%s=users-own", base.var[i].name);
        char *env[] = {assign, NULL};
        nccl_env_derive(&f, env, &e);
        VAR(&e, base.var[i].name, NCCL_ENV_USER, "users-own", "left alone");
    }
    CHECK_EQ_INT(set, 5);   /* SOCKET_IFNAME, GLOO, IB_DISABLE, DEVICE_ORDER, OMP */
    char line[512];
    CHECK_EQ_INT(nccl_env_summary(&base, line, sizeof line), 0);
    CHECK_EQ_STR(line, "podrun sets NCCL_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0 "
                       "NCCL_IB_DISABLE=1 CUDA_DEVICE_ORDER=PCI_BUS_ID OMP_NUM_THREADS=1");
    CHECK_EQ_INT(nccl_env_summary(&base, line, 20), -ENOSPC);
    struct nccl_env empty = {0};
    nccl_env_summary(&empty, line, sizeof line);
    CHECK_EQ_STR(line, "");
    CHECK_EQ_INT(nccl_env_derive(NULL, NULL, &e), -EINVAL);
    free(g);
}

int main(void)
{
    RUN(test_socket_ifname);
    RUN(test_ib_not_mounted);
    RUN(test_ib_ports);
    RUN(test_ib_library);
    RUN(test_gid_index);
    RUN(test_device_order);
    RUN(test_per_rank_visible);
    RUN(test_omp);
    RUN(test_never_overrides);
    return check_result();
}
