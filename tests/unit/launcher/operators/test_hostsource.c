/* tests/unit/launcher/operators/test_hostsource.c — a hostfile in every pod: this node's line by
 * its names or addresses, the values it gives, DeepSpeed's dialect and selection, and what is
 * wrong with a file. */
#include "tests/unit/launcher/operators/op_test.h"
#include "launcher/operators/hostsource.h"

static const struct fake_file files[] = {
    {"/job/ips", "# three hosts\n10.0.0.1 slots=2\n10.0.0.2 slots=2\n10.0.0.3 slots=1\n"},
    {"/job/names", "w-0.job.ns.svc\nw-1.job.ns.svc\nw-2.job.ns.svc\n"},
    {"/job/ds", "w-0 slots=4\nw-1 slots=4\nw-2 slots=4\n"},
    {"/job/bad", "w-0 slots=4\nw-1 slots=x\n"},
    {"/job/twice", "w-0\nw-1.job\nw-1\n"},
    {"/job/zero", "w-0 slots=1\nw-1 slots=0\n"},
    {NULL, NULL}};

static void test_by_address(void)
{
    struct cfg c;
    struct fake_machine m = {.files = files, .hostname = "box", .addrs = {"127.0.0.1", "10.0.0.2"},
                             .naddrs = 2};
    char *env[] = {NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/ips")), 0);
    CHECK_SETTING(&c, "discovered", "hostfile", "hostfile /job/ips (--hostfile)");
    CHECK_SETTING(&c, "node-rank", "1", "hostfile /job/ips line 3");
    CHECK_SETTING(&c, "nnodes", "3", "hostfile /job/ips");
    CHECK_SETTING(&c, "nproc-per-node", "2", "hostfile /job/ips line 3");
    CHECK_SETTING(&c, "master-addr", "10.0.0.1", "hostfile /job/ips line 2");
    /* the address the others know this node by: it binds and advertises it */
    CHECK_SETTING(&c, "local-addr", "10.0.0.2", "hostfile /job/ips line 3");
    CHECK_SETTING(&c, "rdzv-endpoint", "10.0.0.1:29500", "from --master-addr/--master-port");
    CHECK_EQ_INT(m.fqdn_lookups, 0);
    cfg_free(&c);
    /* several agents on one machine: --local-addr stands for the machine's addresses */
    CHECK_EQ_INT(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/ips", "--local-addr",
                                             "10.0.0.3")), 0);
    CHECK_SETTING(&c, "node-rank", "2", "hostfile /job/ips line 4");
    CHECK_SETTING(&c, "nproc-per-node", "1", "hostfile /job/ips line 4");
    CHECK_SETTING(&c, "local-addr", "10.0.0.3", "flag --local-addr");
    cfg_free(&c);
    /* higher ranks win: the user's workers per node and store port */
    char *user[] = {"PODRUN_NPROC_PER_NODE=8", "PODRUN_MASTER_PORT=4000",
                    "PODRUN_HOSTFILE=/job/ips", NULL};
    CHECK_EQ_INT(load_pod(&c, user, &m, NULL), 0);
    CHECK_SETTING(&c, "nproc-per-node", "8", "env PODRUN_NPROC_PER_NODE");
    CHECK_SETTING(&c, "rdzv-endpoint", "10.0.0.1:4000", "from --master-addr/--master-port");
    CHECK_SETTING(&c, "discovered", "hostfile", "hostfile /job/ips (PODRUN_HOSTFILE)");
    cfg_free(&c);
}

static void test_by_name(void)
{
    struct cfg c;
    char *env[] = {NULL};
    /* the short host name is the FQDN's first label: no resolver lookup needed */
    struct fake_machine m = {.files = files, .hostname = "w-2"};
    CHECK_EQ_INT(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/names")), 0);
    CHECK_SETTING(&c, "node-rank", "2", "hostfile /job/names line 3");
    CHECK_SETTING(&c, "master-addr", "w-0.job.ns.svc", "hostfile /job/names line 1");
    CHECK_SETTING(&c, "local-addr", "(none)", "default");
    CHECK_SETTING(&c, "nproc-per-node", "1", "default");
    CHECK_EQ_INT(m.fqdn_lookups, 0);
    cfg_free(&c);
    /* a host name that is not the line's: the FQDN is looked up, once needed */
    struct fake_machine f = {.files = files, .hostname = "node-a", .fqdn = "w-1.job.ns.svc"};
    CHECK_EQ_INT(load_pod(&c, env, &f, FLAGS("--hostfile", "/job/names")), 0);
    CHECK_SETTING(&c, "node-rank", "1", "hostfile /job/names line 2");
    CHECK_EQ_INT(f.fqdn_lookups, 1);
    cfg_free(&c);
    /* --node-name stands for the host name */
    CHECK_EQ_INT(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/names", "--node-name", "w-0")),
                 0);
    CHECK_SETTING(&c, "node-rank", "0", "hostfile /job/names line 1");
    cfg_free(&c);
}

static void test_bad_files(void)
{
    struct cfg c;
    char *env[] = {NULL};
    struct fake_machine m = {.files = files, .hostname = "w-1"};
    CHECK_ERR(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/bad")), "/job/bad:2", "slots=x");
    cfg_free(&c);
    CHECK_ERR(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/none")), "/job/none",
              "No such file");
    cfg_free(&c);
    CHECK_ERR(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/twice")), "/job/twice");
    cfg_free(&c);
    CHECK_ERR(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/zero")), "/job/zero line 2",
              "slots=0");
    cfg_free(&c);
    struct fake_machine away = {.files = files, .hostname = "elsewhere", .fqdn = "elsewhere.x"};
    CHECK_ERR(load_pod(&c, env, &away, FLAGS("--hostfile", "/job/names")), "elsewhere",
              "is not in hostfile", "/job/names");
    cfg_free(&c);
    /* without a machine only --node-name/--local-addr can find the line */
    CHECK_ERR(load_pod(&c, env, NULL, FLAGS("--hostfile", "/job/names")), "/job/names");
    cfg_free(&c);
    /* a hostfile is a source of its own: not with --discovery env, k8s or none */
    CHECK_ERR(load_pod(&c, env, &m, FLAGS("--hostfile", "/job/names", "--discovery", "env")),
              "--hostfile /job/names", "--discovery env");
    cfg_free(&c);
}

/* What the deepspeed front-end calls: its dialect, its selection, the slot ids. */
static void test_deepspeed_selection(void)
{
    struct cfg c;
    struct fake_machine m = {.files = files, .hostname = "w-2"};
    struct discover_host h;
    struct hostsource_node me;
    fake_host_init(&h, &m);
    cfg_init(&c);
    struct resources_select sel = {"w-0:0,1@w-2:1,3", NULL, -1, -1};
    CHECK_EQ_INT(hostsource_apply(&c, &h, "/job/ds", HOSTFILE_DEEPSPEED, &sel, "DeepSpeed", &me,
                                  err, sizeof err), 0);
    CHECK_EQ_INT(me.node_rank, 1);
    CHECK_EQ_INT(me.nnodes, 2);
    CHECK_EQ_INT(me.line, 3);
    CHECK_EQ_INT(me.nslots, 2);
    CHECK_EQ_INT(me.slots[0], 1);
    CHECK_EQ_INT(me.slots[1], 3);
    CHECK_SETTING(&c, "node-rank", "1", "hostfile /job/ds line 3 (DeepSpeed)");
    CHECK_SETTING(&c, "nproc-per-node", "2", "hostfile /job/ds line 3 (DeepSpeed)");
    CHECK_SETTING(&c, "nnodes", "2", "hostfile /job/ds (DeepSpeed)");
    cfg_free(&c);
    /* left out by the selection: said so */
    cfg_init(&c);
    struct resources_select ex = {NULL, "w-2", -1, -1};
    CHECK_EQ_INT(hostsource_apply(&c, &h, "/job/ds", HOSTFILE_DEEPSPEED, &ex, "DeepSpeed", NULL,
                                  err, sizeof err), -ESRCH);
    CHECK(strstr(err, "leaves out") != NULL);
    cfg_free(&c);
    /* DeepSpeed's grammar wants slots on every line */
    cfg_init(&c);
    CHECK(hostsource_apply(&c, &h, "/job/names", HOSTFILE_DEEPSPEED, NULL, "DeepSpeed", NULL, err,
                           sizeof err) < 0);
    CHECK(strstr(err, "bad entry") != NULL);
    cfg_free(&c);
}

int main(void)
{
    RUN(test_by_address);
    RUN(test_by_name);
    RUN(test_bad_files);
    RUN(test_deepspeed_selection);
    return check_result();
}
