/* tests/unit/launcher/devices/test_watch.c — the checks during a run: which Xids fail a node, a
 * port's state and an interface's operstate, NCCL's device lists; the GPUs watched through the
 * fake libnvidia-ml.so.1 with an Xid, an ECC increase, retired pages and a lost GPU injected
 * after the watch began; the links of the fixture's sysfs going down after it began. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/gpuwatch.h"
#include "launcher/devices/linkwatch.h"
#include "launcher/devices/sysroot.h"
#include "launcher/devices/watch_rules.h"
#include "tests/fixtures/machine.h"

static char root[256], health[512];

static void test_xid_classification(void)
{
    CHECK_EQ_STR(watch_xid_critical(79), "fallen off the bus");
    CHECK_EQ_STR(watch_xid_critical(48), "double-bit ECC error");
    const unsigned critical[] = {48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140};
    for (size_t i = 0; i < sizeof critical / sizeof *critical; i++)
        CHECK(watch_xid_critical(critical[i]) != NULL);
    /* the application's own faults: its process ends, and that is seen as its exit */
    const unsigned app[] = {0, 13, 31, 43, 45, 68, 1000};
    for (size_t i = 0; i < sizeof app / sizeof *app; i++)
        CHECK(watch_xid_critical(app[i]) == NULL);
}

static void test_state_parsing(void)
{
    CHECK_EQ_INT(watch_ib_state("4: ACTIVE"), 4);
    CHECK_EQ_INT(watch_ib_state("1: DOWN"), 1);
    CHECK_EQ_INT(watch_ib_state("2: INIT"), 2);
    CHECK_EQ_INT(watch_ib_state("4"), 4);
    CHECK_EQ_INT(watch_ib_state(""), -1);
    CHECK_EQ_INT(watch_ib_state("ACTIVE"), -1);
    CHECK_EQ_INT(watch_ib_state("9: WHAT"), -1);
    CHECK_EQ_INT(watch_ib_state("4x: ACTIVE"), -1);
    CHECK_EQ_STR(watch_ib_state_name("1: DOWN"), "DOWN");
    CHECK_EQ_STR(watch_ib_state_name("odd"), "odd");
    CHECK(watch_if_up("up"));
    CHECK(watch_if_up("unknown"));   /* loopback */
    CHECK(!watch_if_up("down"));
    CHECK(!watch_if_up("lowerlayerdown"));
    CHECK(!watch_if_up("dormant"));
}

static void test_nccl_lists(void)
{
    CHECK(watch_nccl_selects(NULL, "mlx5_0", 1));
    CHECK(watch_nccl_selects("", "mlx5_0", 1));
    CHECK(watch_nccl_selects("mlx5", "mlx5_3", 1));          /* a prefix */
    CHECK(!watch_nccl_selects("=mlx5", "mlx5_3", 1));        /* exact names */
    CHECK(watch_nccl_selects("=mlx5_0:1,mlx5_2:1", "mlx5_2", 1));
    CHECK(!watch_nccl_selects("=mlx5_0:1,mlx5_2:1", "mlx5_2", 2));
    CHECK(watch_nccl_selects("=mlx5_0:1", "mlx5_0", 0));     /* the HCA, any port */
    CHECK(!watch_nccl_selects("^mlx5_1", "mlx5_1", 1));
    CHECK(watch_nccl_selects("^mlx5_1", "mlx5_0", 1));
    CHECK(watch_nccl_selects("^docker,lo", "eth0", 0));
    CHECK(!watch_nccl_selects("^docker,lo", "docker0", 0));
    CHECK(watch_nccl_selects("=eth1", "eth1", 0));
    CHECK(!watch_nccl_selects("=eth1", "eth10", 0));
    CHECK(!watch_nccl_selects(",", "eth1", 0));
}

static void put_health(const char *text)
{
    FILE *f = fopen(health, "w");
    fputs(text, f);
    fclose(f);
}

/* Opens the watch on the fixture's 8 GPUs with the health file as it is now. */
static int watch(struct gpuwatch *w)
{
    char err[256];
    int r = gpuwatch_open(w, NULL, err, sizeof err);
    CHECK_EQ_INT(r, 0);
    if (r)
        fprintf(stderr, "%s\n", err);
    return r;
}

static void test_gpus_well(void)
{
    struct gpuwatch w;
    char why[256], note[256];
    put_health("ecc gpu=2 count=5\n");   /* errors before the watch began are not new */
    if (watch(&w))
        return;
    CHECK_EQ_INT((int)w.n, 8);
    CHECK(w.set != NULL);
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, note, sizeof note), 0);
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, note, sizeof note), 0);
    gpuwatch_close(&w);
}

static void test_xid_injected(void)
{
    struct gpuwatch w;
    char why[256], note[256], expect[256];
    put_health("");
    if (watch(&w))
        return;
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, note, sizeof note), 0);
    put_health("xid gpu=1 xid=13\n");   /* an application's fault: said, not failed */
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, note, sizeof note), 0);
    snprintf(expect, sizeof expect, "GPU 1 (%.12s...): Xid 13 (not one that fails the node)",
             FX_GPU_UUID[1]);
    CHECK_EQ_STR(note, expect);
    put_health("xid gpu=1 xid=13\nxid gpu=3 xid=79\n");
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, note, sizeof note), 1);
    snprintf(expect, sizeof expect, "GPU 3 (%.12s...): Xid 79, fallen off the bus", FX_GPU_UUID[3]);
    CHECK_EQ_STR(why, expect);
    /* each event is taken once */
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, note, sizeof note), 0);
    gpuwatch_close(&w);
}

static void test_ecc_pending_lost(void)
{
    struct gpuwatch w;
    char why[256], expect[256];
    put_health("ecc gpu=2 count=5\n");
    if (watch(&w))
        return;
    put_health("ecc gpu=2 count=7\n");
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 1);
    snprintf(expect, sizeof expect, "GPU 2 (%.12s...): 2 new uncorrectable ECC errors (7 in all)",
             FX_GPU_UUID[2]);
    CHECK_EQ_STR(why, expect);
    put_health("ecc gpu=2 count=7\npending gpu=4\n");
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 1);
    snprintf(expect, sizeof expect, "GPU 4 (%.12s...): retired pages pending (the GPU needs a "
             "reset)", FX_GPU_UUID[4]);
    CHECK_EQ_STR(why, expect);
    put_health("ecc gpu=2 count=7\nlost gpu=6\n");
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 1);
    snprintf(expect, sizeof expect, "GPU 6 (%.12s...): lost from the bus (NVML: GPU is lost)",
             FX_GPU_UUID[6]);
    CHECK_EQ_STR(why, expect);
    gpuwatch_close(&w);
}

/* A GPU whose pages were pending before the watch began is not news; one that turns so is. */
static void test_pending_from_the_start(void)
{
    struct gpuwatch w;
    char why[256];
    put_health("pending gpu=0\n");
    if (watch(&w))
        return;
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 0);
    put_health("pending gpu=0\npending gpu=1\n");
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 1);
    CHECK(strncmp(why, "GPU 1 (", 7) == 0);
    gpuwatch_close(&w);
}

/* A GPU lost before the watch began is found at the first check, not left unasked. */
static void test_lost_from_the_start(void)
{
    struct gpuwatch w;
    char why[256];
    put_health("lost gpu=5\n");
    if (watch(&w))
        return;
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 1);
    CHECK(strncmp(why, "GPU 5 (", 7) == 0 && strstr(why, "lost from the bus"));
    gpuwatch_close(&w);
}

static void test_no_events(void)
{
    struct gpuwatch w;
    char why[256];
    put_health("noevents\n");
    if (watch(&w))
        return;
    CHECK(w.set == NULL);
    put_health("noevents\nxid gpu=0 xid=79\nlost gpu=0\n");
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 1);   /* the counts still tell */
    CHECK(strstr(why, "GPU 0 (") && strstr(why, "lost from the bus"));
    gpuwatch_close(&w);
}

static void test_no_nvml(void)
{
    struct gpuwatch w;
    char err[256], why[64];
    CHECK_EQ_INT(gpuwatch_open(&w, "libnvidia-ml-absent.so.1", err, sizeof err), -2);
    CHECK_EQ_INT(gpuwatch_check(&w, why, sizeof why, NULL, 0), 0);
    gpuwatch_close(&w);
}

static void test_links(void)
{
    struct linkwatch w;
    char why[256];
    fx_write(root, "/sys/class/net/eth1/operstate", "up\n");
    fx_write(root, "/sys/class/net/eth0/operstate", "up\n");
    fx_write(root, "/sys/class/net/docker0/operstate", "down\n");
    /* every HCA: the ACTIVE ports of mlx5_0, 2 and 3 (mlx5_1 is DOWN from the start) */
    CHECK_EQ_INT(linkwatch_open(&w, NULL, 0, NULL), 3);
    CHECK_EQ_INT(linkwatch_check(&w, why, sizeof why), 0);
    CHECK_EQ_INT(linkwatch_open(&w, NULL, 1, NULL), 0);      /* NCCL_IB_DISABLE */
    CHECK_EQ_INT(linkwatch_open(&w, "=mlx5_2:1", 0, "=eth1"), 2);
    CHECK_EQ_INT(linkwatch_open(&w, "^mlx5_0", 0, "eth,docker"), 4);   /* docker0 was down */
    CHECK_EQ_INT(linkwatch_open(&w, "=mlx5_0:1,mlx5_2", 0, "=eth1"), 3);
    fx_write(root, "/sys/class/infiniband/mlx5_3/ports/1/state", "1: DOWN\n");   /* not watched */
    CHECK_EQ_INT(linkwatch_check(&w, why, sizeof why), 0);
    fx_write(root, "/sys/class/infiniband/mlx5_2/ports/1/state", "1: DOWN\n");
    CHECK_EQ_INT(linkwatch_check(&w, why, sizeof why), 1);
    CHECK_EQ_STR(why, "mlx5_2 port 1: DOWN (was ACTIVE)");
    fx_write(root, "/sys/class/infiniband/mlx5_2/ports/1/state", "4: ACTIVE\n");
    CHECK_EQ_INT(linkwatch_check(&w, why, sizeof why), 0);
    fx_write(root, "/sys/class/net/eth1/operstate", "down\n");
    CHECK_EQ_INT(linkwatch_check(&w, why, sizeof why), 1);
    CHECK_EQ_STR(why, "interface eth1 (NCCL_SOCKET_IFNAME): down (was up)");
}

int main(void)
{
    char conf[512];
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0 ||
        fx_nvml_conf(root, NULL, conf, sizeof conf) < 0 || sysroot_set(root) < 0)
        return 1;
    snprintf(health, sizeof health, "%s/health.conf", root);
    setenv("PODRUN_FAKE_NVML", conf, 1);
    setenv("PODRUN_FAKE_NVML_HEALTH", health, 1);
    RUN(test_xid_classification);
    RUN(test_state_parsing);
    RUN(test_nccl_lists);
    RUN(test_gpus_well);
    RUN(test_xid_injected);
    RUN(test_ecc_pending_lost);
    RUN(test_pending_from_the_start);
    RUN(test_lost_from_the_start);
    RUN(test_no_events);
    RUN(test_no_nvml);
    RUN(test_links);
    fx_root_remove(root);
    return check_result();
}
