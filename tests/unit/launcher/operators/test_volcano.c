/* tests/unit/launcher/operators/test_volcano.c — Volcano Job pods: the env, svc and pytorch
 * plugins' variables and the svc plugin's /etc/volcano files (reference/k8s.md §3.2-3.5). */
#include "tests/unit/launcher/operators/op_test.h"

/* the svc and env plugins for a job "job" with tasks master (1) and worker (3) */
#define SVC                                                                                  \
    "VC_MASTER_HOSTS=job-master-0.job", "VC_MASTER_NUM=1",                                   \
        "VC_WORKER_HOSTS=job-worker-0.job,job-worker-1.job,job-worker-2.job", "VC_WORKER_NUM=3"
#define PLUGIN "MASTER_ADDR=job-master-0.job", "MASTER_PORT=23456", "WORLD_SIZE=4"

/* The pod: worker-1 under the pytorch plugin is node rank 2 of 4. */
static void test_pytorch_plugin(void)
{
    struct cfg c;
    char *env[] = {PLUGIN, "RANK=2", "VC_TASK_INDEX=1", "VK_TASK_INDEX=1", SVC, NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "Volcano", "env VC_TASK_INDEX (Volcano)");
    CHECK_SETTING(&c, "node-rank", "2", "env RANK (Volcano pytorch plugin)");
    CHECK_SETTING(&c, "nnodes", "4", "env WORLD_SIZE (Volcano pytorch plugin)");
    CHECK_SETTING(&c, "master-addr", "job-master-0.job",
                  "env MASTER_ADDR (Volcano pytorch plugin)");
    CHECK_SETTING(&c, "master-port", "23456", "env MASTER_PORT (Volcano pytorch plugin)");
    CHECK_SETTING(&c, "rdzv-endpoint", "job-master-0.job:23456",
                  "from --master-addr/--master-port");
    cfg_free(&c);
    /* the master pod is rank 0 and hosts the store */
    char *master[] = {PLUGIN, "RANK=0", "VC_TASK_INDEX=0", SVC, NULL};
    CHECK_EQ_INT(load_pod(&c, master, NULL, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "0", "env RANK (Volcano pytorch plugin)");
    cfg_free(&c);
}

/* A third task (TensorBoard): the plugin's WORLD_SIZE counts its pod too, but only the master
 * and worker tasks train, so the node count is theirs; a pod of the third task, or a RANK past
 * the two tasks' pods, is refused with one line. */
#define TB "VC_TENSORBOARD_HOSTS=job-tensorboard-0.job", "VC_TENSORBOARD_NUM=1"
static void test_pytorch_plugin_third_task(void)
{
    struct cfg c;
    char *env[] = {"MASTER_ADDR=job-master-0.job", "MASTER_PORT=23456", "WORLD_SIZE=5",
                   "RANK=2", "VC_TASK_INDEX=1", TB, SVC, NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "4",
                  "env VC_MASTER_NUM + VC_WORKER_NUM (Volcano pytorch plugin)");
    CHECK_SETTING(&c, "node-rank", "2", "env RANK (Volcano pytorch plugin)");
    cfg_free(&c);
    /* MASTER_ADDR an address, not the list's name: the tasks named master and worker */
    char *byname[] = {"MASTER_ADDR=10.0.0.2", "MASTER_PORT=23456", "WORLD_SIZE=5", "RANK=2",
                      "VC_TASK_INDEX=1", TB, SVC, NULL};
    CHECK_EQ_INT(load_pod(&c, byname, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "4",
                  "env VC_MASTER_NUM + VC_WORKER_NUM (Volcano pytorch plugin)");
    cfg_free(&c);
    char *past[] = {"MASTER_ADDR=job-master-0.job", "MASTER_PORT=23456", "WORLD_SIZE=5",
                    "RANK=4", "VC_TASK_INDEX=3", TB, SVC, NULL};
    CHECK_ERR(load_pod(&c, past, NULL, NULL), "RANK=4 and WORLD_SIZE=5",
              "VC_MASTER_NUM + VC_WORKER_NUM");
    cfg_free(&c);
    struct fake_machine tb = {.hostname = "job-tensorboard-0", .fqdn = "job-tensorboard-0.job"};
    char *tbpod[] = {"MASTER_ADDR=job-master-0.job", "MASTER_PORT=23456", "WORLD_SIZE=5",
                     "RANK=0", "VC_TASK_INDEX=0", TB, SVC, NULL};
    CHECK_ERR(load_pod(&c, tbpod, &tb, NULL), "this pod is in VC_TENSORBOARD_HOSTS",
              "neither the master task");
    cfg_free(&c);
}

static void test_plugin_conflicts(void)
{
    struct cfg c;
    char *off[] = {PLUGIN, "RANK=3", "VC_TASK_INDEX=1", SVC, NULL};
    CHECK_ERR(load_pod(&c, off, NULL, NULL), "RANK=3 (Volcano pytorch plugin)",
              "VC_TASK_INDEX=1 (Volcano)", "disagree");
    cfg_free(&c);
    char *two_masters[] = {PLUGIN, "RANK=0", "VC_TASK_INDEX=1", SVC, NULL};
    CHECK_ERR(load_pod(&c, two_masters, NULL, NULL), "RANK=0", "VC_TASK_INDEX=1", "replicas: 1");
    cfg_free(&c);
    char *vcvk[] = {"VC_TASK_INDEX=1", "VK_TASK_INDEX=2", SVC, NULL};
    CHECK_ERR(load_pod(&c, vcvk, NULL, NULL), "VC_TASK_INDEX=1", "VK_TASK_INDEX=2");
    cfg_free(&c);
    char *ws[] = {"MASTER_ADDR=a", "MASTER_PORT=1", "WORLD_SIZE=2", "RANK=2", "VC_TASK_INDEX=1",
                  NULL};
    CHECK_ERR(load_pod(&c, ws, NULL, NULL), "RANK=2 must be below WORLD_SIZE=2");
    cfg_free(&c);
    char *abc[] = {"VC_TASK_INDEX=abc", SVC, NULL};
    CHECK_ERR(load_pod(&c, abc, NULL, NULL), "VC_TASK_INDEX='abc' (Volcano)");
    cfg_free(&c);
    char *num[] = {"VC_TASK_INDEX=0", "VC_WORKER_HOSTS=a.job,b.job", "VC_WORKER_NUM=3", NULL};
    CHECK_ERR(load_pod(&c, num, NULL, NULL), "VC_WORKER_NUM=3", "VC_WORKER_HOSTS (2 hosts)");
    cfg_free(&c);
}

/* Without the pytorch plugin: this pod's task, its index, the task's first pod as the store. */
static void test_one_task(void)
{
    struct cfg c;
    char *env[] = {"VC_TASK_INDEX=2", "VC_WORKER_HOSTS=j-worker-0.j,j-worker-1.j,j-worker-2.j",
                   "VC_WORKER_NUM=3", NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "2", "env VC_TASK_INDEX (Volcano)");
    CHECK_SETTING(&c, "nnodes", "3", "env VC_WORKER_NUM (Volcano)");
    CHECK_SETTING(&c, "master-addr", "j-worker-0.j", "env VC_WORKER_HOSTS (Volcano)");
    CHECK_SETTING(&c, "rdzv-backend", "static", "default");
    cfg_free(&c);
    /* the index against the list, when the machine's name is known */
    struct fake_machine m = {.hostname = "j-worker-1"};
    CHECK_ERR(load_pod(&c, env, &m, NULL), "VC_TASK_INDEX=2", "entry 1 of VC_WORKER_HOSTS");
    cfg_free(&c);
    char *big[] = {"VC_TASK_INDEX=3", "VC_WORKER_HOSTS=a.j,b.j", NULL};
    CHECK_ERR(load_pod(&c, big, NULL, NULL), "VC_TASK_INDEX=3", "below the 2 hosts");
    cfg_free(&c);
    /* the svc plugin without the env plugin: the pod's place in its list */
    char *svc[] = {"VC_WORKER_HOSTS=j-worker-0.j,j-worker-1.j", NULL};
    CHECK_EQ_INT(load_pod(&c, svc, &m, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "1", "env VC_WORKER_HOSTS (Volcano)");
    CHECK_SETTING(&c, "nnodes", "2", "env VC_WORKER_HOSTS (Volcano)");
    cfg_free(&c);
    struct fake_machine other = {.hostname = "elsewhere"};
    CHECK_ERR(load_pod(&c, svc, &other, NULL), "elsewhere", "VC_WORKER_HOSTS");
    cfg_free(&c);
}

/* Several tasks without the plugin: the one that names this pod is its job. */
static void test_several_tasks(void)
{
    struct cfg c;
    struct fake_machine m = {.hostname = "j-ps-1", .fqdn = "j-ps-1.j.ns.svc.cluster.local"};
    char *env[] = {"VC_TASK_INDEX=1", "VC_PS_HOSTS=j-ps-0.j,j-ps-1.j", "VC_PS_NUM=2",
                   "VC_TRAINER_HOSTS=j-trainer-0.j,j-trainer-1.j,j-trainer-2.j",
                   "VC_TRAINER_NUM=3", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "1", "env VC_TASK_INDEX (Volcano)");
    CHECK_SETTING(&c, "nnodes", "2", "env VC_PS_NUM (Volcano)");
    CHECK_SETTING(&c, "master-addr", "j-ps-0.j", "env VC_PS_HOSTS (Volcano)");
    cfg_free(&c);
    struct fake_machine none = {.hostname = "x-0"};
    CHECK_ERR(load_pod(&c, env, &none, NULL), "none of the Volcano tasks' host lists");
    cfg_free(&c);
    CHECK_ERR(load_pod(&c, env, NULL, NULL), "none of the Volcano tasks' host lists");
    cfg_free(&c);
}

/* The svc plugin's files, read under the discovery root: all there is with
 * --inject-hosts-env=false, and all that --discovery hostfile reads. */
static void test_host_files(void)
{
    struct cfg c;
    static const struct fake_file files[] = {
        {"/fx/etc/volcano/master.host", "j-master-0.j\n"},
        {"/fx/etc/volcano/worker.host", "j-worker-0.j\nj-worker-1.j\nj-worker-2.j\n"},
        {"/fx/etc/volcano/VC_WORKER_NUM", "3"},
        {NULL, NULL}};
    struct fake_machine m = {.files = files, .hostname = "j-worker-2"};
    char *env[] = {"PODRUN_DISCOVERY_ROOT=/fx", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "discovered", "Volcano", "hostfile /etc/volcano/*.host (Volcano)");
    CHECK_SETTING(&c, "node-rank", "2", "hostfile /fx/etc/volcano/worker.host line 3 (Volcano)");
    CHECK_SETTING(&c, "nnodes", "3", "hostfile /fx/etc/volcano/worker.host (Volcano)");
    CHECK_SETTING(&c, "master-addr", "j-worker-0.j",
                  "hostfile /fx/etc/volcano/worker.host line 1 (Volcano)");
    cfg_free(&c);
    /* --discovery hostfile: the files, not the variables */
    char *vars[] = {"PODRUN_DISCOVERY_ROOT=/fx", "VC_TASK_INDEX=0", "VC_WORKER_HOSTS=other.j",
                    NULL};
    CHECK_EQ_INT(load_pod(&c, vars, &m, FLAGS("--discovery", "hostfile")), 0);
    CHECK_SETTING(&c, "node-rank", "2", "hostfile /fx/etc/volcano/worker.host line 3 (Volcano)");
    cfg_free(&c);
    /* without the root the files are not there */
    char *noroot[] = {"PODRUN_DISCOVERY=hostfile", NULL};
    CHECK_ERR(load_pod(&c, noroot, &m, NULL), "--discovery hostfile: no hostfile");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_pytorch_plugin);
    RUN(test_pytorch_plugin_third_task);
    RUN(test_plugin_conflicts);
    RUN(test_one_task);
    RUN(test_several_tasks);
    RUN(test_host_files);
    return check_result();
}
