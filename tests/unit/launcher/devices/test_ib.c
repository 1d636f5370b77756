/* tests/unit/launcher/devices/test_ib.c — InfiniBand/RoCE ports from the fixture's sysfs and from
 * the fake libibverbs.so.1, merged per device; and podrun's bindings against the real
 * libibverbs.so.1 where one is installed. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/devices/ib.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static char root[256], root_dev[256];
static int (*open_contexts)(void);

static void use_verbs(const char *conf)
{
    char path[512];
    fx_verbs_conf(root, conf, path, sizeof path);
    setenv("PODRUN_FAKE_IBVERBS", path, 1);
}

static const struct ib_dev *dev(const struct ib_info *ib, const char *name)
{
    for (int i = 0; i < ib->ndev; i++)
        if (strcmp(ib->dev[i].name, name) == 0)
            return &ib->dev[i];
    return NULL;
}

/* The fixture's sysfs view, which the later cases start from. */
static void check_sysfs_view(const struct ib_info *ib)
{
    CHECK_EQ_INT(ib->ndev, 4);
    const struct ib_dev *d0 = dev(ib, "mlx5_0"), *d1 = dev(ib, "mlx5_1"), *d2 = dev(ib, "mlx5_2"),
                        *d3 = dev(ib, "mlx5_3");
    if (!d0 || !d1 || !d2 || !d3) {
        CHECK(!"all four HCAs found");
        return;
    }
    CHECK_EQ_INT(d0->nports, 1);
    CHECK_EQ_INT(d0->port[0].num, 1);
    CHECK_EQ_INT(d0->port[0].state, 4);
    CHECK_EQ_INT(d0->port[0].link, IB_LINK_INFINIBAND);
    CHECK_EQ_INT(d0->port[0].gid_index, -1);     /* no GID choice on InfiniBand */
    CHECK(ib_port_active(&d0->port[0]));
    CHECK_EQ_INT(d1->port[0].state, 1);
    CHECK(!ib_port_active(&d1->port[0]));
    CHECK_EQ_INT(d2->port[0].link, IB_LINK_ETHERNET);
    CHECK_EQ_INT(d2->port[0].gid_index, 3);      /* not 1 (RoCE v2 but link-local), not 2 (v1) */
    CHECK_EQ_STR(d2->port[0].gid_ipv4, "10.0.0.7");
    CHECK_EQ_STR(d2->port[0].gid_netdev, "eth2");
    CHECK_EQ_INT(d3->port[0].gid_index, 7);      /* sparse table: empty slots 0-5 skipped */
    CHECK_EQ_STR(d3->port[0].gid_ipv4, "10.0.1.7");
    CHECK_EQ_STR(d3->port[0].gid_netdev, "net1");
    CHECK(d3->in_sysfs);
}

static void test_sysfs_only(void)
{
    struct ib_opts o = {.skip_verbs = true};
    struct ib_info ib;
    sysroot_set(root);
    CHECK_EQ_INT(ib_discover(&o, &ib), 0);
    check_sysfs_view(&ib);
    CHECK_EQ_INT(ib.verbs, IB_VERBS_SKIPPED);
    CHECK_EQ_STR(ib.note, "");
    CHECK(!ib.dev_infiniband);
    for (int i = 0; i < ib.ndev; i++)
        CHECK(!ib.dev[i].uverbs && !ib.dev[i].listed && !ib.dev[i].opened);
    /* the same machine with /dev/infiniband mounted */
    sysroot_set(root_dev);
    ib_discover(&o, &ib);
    CHECK(ib.dev_infiniband);
    for (int i = 0; i < ib.ndev; i++)
        CHECK(ib.dev[i].uverbs);
    sysroot_set(root);
}

/* Every device opens: the ports are the provider's, which here differ from sysfs on purpose. */
static void test_verbs_view(void)
{
    use_verbs("dev mlx5_0\nport mlx5_0 1 state=4 link=1\n"
              "dev mlx5_1\nport mlx5_1 1 state=4 link=1\n"
              "dev mlx5_2\nport mlx5_2 1 state=4 link=2 gidlen=8\n"
              "gid mlx5_2 1 0 1 ll\ngid mlx5_2 1 1 2 ll\ngid mlx5_2 1 4 1 10.0.0.9\n"
              "gid mlx5_2 1 5 2 10.0.0.9\n"
              "dev mlx5_3\nport mlx5_3 1 state=2 link=2\nport mlx5_3 2 state=4 link=2\n"
              "gid mlx5_3 2 0 2 10.0.2.7\n");
    struct ib_info ib;
    CHECK_EQ_INT(ib_discover(NULL, &ib), 0);
    CHECK_EQ_INT(ib.verbs, IB_VERBS_LISTED);
    CHECK_EQ_STR(ib.note, "");
    CHECK_EQ_INT(ib.ndev, 4);
    const struct ib_dev *d1 = dev(&ib, "mlx5_1"), *d2 = dev(&ib, "mlx5_2"), *d3 = dev(&ib, "mlx5_3");
    if (!d1 || !d2 || !d3) {
        CHECK(!"devices found");
        return;
    }
    CHECK(d1->listed && d1->opened && d1->in_sysfs);
    CHECK_EQ_INT(d1->port[0].state, 4);          /* verbs says ACTIVE, sysfs said DOWN */
    CHECK_EQ_INT(d2->port[0].gid_index, 5);      /* from _ibv_query_gid_ex, not sysfs' 3 */
    CHECK_EQ_STR(d2->port[0].gid_ipv4, "10.0.0.9");
    CHECK_EQ_STR(d2->port[0].gid_netdev, "lo");  /* the entry's ifindex, named */
    CHECK_EQ_INT(d3->nports, 2);
    CHECK_EQ_INT(d3->port[0].state, 2);
    CHECK_EQ_INT(d3->port[1].num, 2);
    CHECK_EQ_INT(d3->port[1].gid_index, 0);
    CHECK_EQ_INT(open_contexts(), 0);            /* every context closed */
}

/* A device that cannot be opened (no uverbs node) keeps its sysfs ports, and the note says why;
 * a device only verbs knows is added. */
static void test_open_fails(void)
{
    use_verbs("dev mlx5_0 open=2\ndev mlx5_1 open=2\ndev mlx5_2 open=2\ndev mlx5_3 open=2\n"
              "dev mlx5_9\nport mlx5_9 1 state=4 link=1\n");
    struct ib_info ib;
    ib_discover(NULL, &ib);
    CHECK_EQ_INT(ib.ndev, 5);
    CHECK(strstr(ib.note, "ibv_open_device(mlx5_0): No such file or directory") == ib.note);
    const struct ib_dev *d2 = dev(&ib, "mlx5_2"), *d9 = dev(&ib, "mlx5_9");
    if (!d2 || !d9) {
        CHECK(!"devices found");
        return;
    }
    CHECK(d2->listed && !d2->opened);
    CHECK_EQ_INT(d2->port[0].gid_index, 3);
    CHECK(d9->listed && d9->opened && !d9->in_sysfs);
    CHECK_EQ_INT(d9->port[0].state, 4);
    struct ib_info without9 = ib;
    without9.ndev = 4;
    check_sysfs_view(&without9);
    CHECK_EQ_INT(open_contexts(), 0);
}

static void test_list_fails(void)
{
    use_verbs("list 38\n");
    struct ib_info ib;
    ib_discover(NULL, &ib);
    CHECK_EQ_INT(ib.verbs, IB_VERBS_EMPTY);
    CHECK_EQ_STR(ib.note, "ibv_get_device_list: Function not implemented");
    check_sysfs_view(&ib);
    struct ib_opts absent = {.verbs_lib = "libibverbs-absent.so.1"};
    ib_discover(&absent, &ib);
    CHECK_EQ_INT(ib.verbs, IB_VERBS_MISSING);
    CHECK(strstr(ib.note, "libibverbs-absent.so.1") == ib.note);
}

/* rdma-core's own library, when installed: podrun's versioned bindings must resolve against its
 * real exports (a wrong name or version would leave verbs MISSING with "no symbol" in the note). */
static void test_real_libibverbs(void)
{
    static const char *const paths[] = {"/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
                                        "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
                                        "/usr/lib64/libibverbs.so.1"};
    const char *path = NULL;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && !path; i++)
        if (access(paths[i], R_OK) == 0)
            path = paths[i];
    if (!path) {
        fprintf(stderr, "skip: no system libibverbs.so.1\n");
        return;
    }
    struct ib_opts o = {.verbs_lib = path};
    struct ib_info ib;
    CHECK_EQ_INT(ib_discover(&o, &ib), 0);
    CHECK(ib.verbs != IB_VERBS_MISSING);
    CHECK(strstr(ib.note, "no symbol") == NULL);
    CHECK(ib.ndev >= 4);   /* the fixture's HCAs are kept whatever the real stack lists */
}

static void test_state_names(void)
{
    CHECK_EQ_STR(ib_port_state_name(1), "DOWN");
    CHECK_EQ_STR(ib_port_state_name(4), "ACTIVE");
    CHECK_EQ_STR(ib_port_state_name(5), "ACTIVE_DEFER");
    CHECK_EQ_STR(ib_port_state_name(0), "unknown");
    CHECK_EQ_STR(ib_port_state_name(9), "unknown");
    struct ib_port p = {.state = 4, .link = IB_LINK_UNKNOWN};
    CHECK(!ib_port_active(&p));
    CHECK_EQ_INT(ib_discover(NULL, NULL), -EINVAL);
}

int main(void)
{
    struct fx_opts with_dev = {.dev_infiniband = true};
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0 ||
        fx_root_make(root_dev, sizeof root_dev) < 0 || fx_machine_dgx(root_dev, &with_dev) < 0)
        return 1;
    void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(*(void **)&open_contexts = dlvsym(lib, "fake_ibverbs_open_contexts", "FAKE_1"))) {
        fprintf(stderr, "the fake libibverbs.so.1 is not on LD_LIBRARY_PATH\n");
        return 1;
    }
    RUN(test_sysfs_only);
    RUN(test_verbs_view);
    RUN(test_open_fails);
    RUN(test_list_fails);
    RUN(test_real_libibverbs);
    RUN(test_state_names);
    fx_root_remove(root);
    fx_root_remove(root_dev);
    return check_result();
}
