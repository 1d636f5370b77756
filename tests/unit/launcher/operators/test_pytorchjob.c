/* tests/unit/launcher/operators/test_pytorchjob.c — PyTorchJob and TrainJob pods, with the
 * variables their operators inject (reference/k8s.md §1.2, §1.6), as podrun reads them. */
#include "tests/unit/launcher/operators/op_test.h"

/* worker-1 of a PyTorchJob with a Master, 3 workers, nprocPerNode 2 (k8s.md §1.2) */
#define PTJ_WORKER1                                                                           \
    "PYTHONUNBUFFERED=1", "MASTER_ADDR=job-master-0", "PET_MASTER_ADDR=job-master-0",         \
        "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "WORLD_SIZE=8", "RANK=2",               \
        "PET_NODE_RANK=2", "PET_NPROC_PER_NODE=2", "PET_NNODES=4"

static void test_master_and_workers(void)
{
    struct cfg c;
    char *env[] = {PTJ_WORKER1, NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "PyTorchJob", "env RANK (PyTorchJob)");
    /* torchrun's PET_ copies rank above the operator's four and say the same */
    CHECK_SETTING(&c, "node-rank", "2", "env PET_NODE_RANK");
    CHECK_SETTING(&c, "nnodes", "4", "env PET_NNODES");
    CHECK_SETTING(&c, "master-addr", "job-master-0", "env PET_MASTER_ADDR");
    CHECK_SETTING(&c, "rdzv-backend", "static", "default");
    CHECK_SETTING(&c, "rdzv-endpoint", "job-master-0:23456", "from --master-addr/--master-port");
    cfg_free(&c);
    /* an older operator (pytorch-operator) wrote the four alone: they are enough */
    char *old[] = {"MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "WORLD_SIZE=4", "RANK=0",
                   NULL};
    CHECK_EQ_INT(load_pod(&c, old, NULL, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "0", "env RANK (PyTorchJob)");
    CHECK_SETTING(&c, "nnodes", "4", "env WORLD_SIZE (PyTorchJob)");
    CHECK_SETTING(&c, "master-addr", "job-master-0", "env MASTER_ADDR (PyTorchJob)");
    CHECK_SETTING(&c, "master-port", "23456", "env MASTER_PORT (PyTorchJob)");
    cfg_free(&c);
    /* WORLD_SIZE counts nprocPerNode: 8 workers of 2 are 4 nodes; "auto" counts as 1 */
    char *two[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=8", "RANK=3",
                   "PET_NPROC_PER_NODE=2", NULL};
    CHECK_EQ_INT(load_pod(&c, two, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "4", "env WORLD_SIZE / PET_NPROC_PER_NODE (PyTorchJob)");
    cfg_free(&c);
    char *autop[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=3", "RANK=2",
                     "PET_NPROC_PER_NODE=auto", NULL};
    CHECK_EQ_INT(load_pod(&c, autop, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "3", "env WORLD_SIZE (PyTorchJob)");
    cfg_free(&c);
}

/* Elastic with a Master: the PET_ rendezvous (c10d at worker-0) outranks the static four. */
static void test_elastic(void)
{
    struct cfg c;
    char *env[] = {"MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "WORLD_SIZE=4", "RANK=1",
                   "PET_NODE_RANK=1", "PET_NNODES=2:4", "PET_RDZV_BACKEND=c10d",
                   "PET_RDZV_ENDPOINT=job-worker-0:29400", "PET_MAX_RESTARTS=3", NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "2:4", "env PET_NNODES");
    CHECK_SETTING(&c, "rdzv-backend", "c10d", "env PET_RDZV_BACKEND");
    CHECK_SETTING(&c, "rdzv-endpoint", "job-worker-0:29400", "env PET_RDZV_ENDPOINT");
    CHECK_SETTING(&c, "max-restarts", "3", "env PET_MAX_RESTARTS");
    cfg_free(&c);
    /* without a Master the operator writes only torchrun's words: nothing to detect */
    char *workers[] = {"PET_NNODES=2:4", "PET_RDZV_BACKEND=c10d",
                       "PET_RDZV_ENDPOINT=job-worker-0:29400", "PYTHONUNBUFFERED=1", NULL};
    CHECK_EQ_INT(load_pod(&c, workers, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    CHECK_SETTING(&c, "rdzv-endpoint", "job-worker-0:29400", "env PET_RDZV_ENDPOINT");
    cfg_free(&c);
}

static void test_user_overrides(void)
{
    struct cfg c;
    char *env[] = {PTJ_WORKER1, "PODRUN_MASTER_PORT=4000", NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--node-rank", "3")), 0);
    CHECK_SETTING(&c, "master-port", "4000", "env PODRUN_MASTER_PORT");
    CHECK_SETTING(&c, "node-rank", "3", "flag --node-rank");
    cfg_free(&c);
    /* what precedence cannot make one job names both sides */
    char *small[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=4", "RANK=3",
                     "PODRUN_NNODES=2", NULL};
    CHECK_ERR(load_pod(&c, small, NULL, NULL), "--node-rank 3 (env RANK (PyTorchJob))",
              "--nnodes 2 (env PODRUN_NNODES)");
    cfg_free(&c);
    /* a launcher's worker has RANK and WORLD_SIZE of processes: not a pod to discover */
    char *worker[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=16", "RANK=9",
                      "LOCAL_RANK=1", "TORCHELASTIC_RUN_ID=x", NULL};
    CHECK_EQ_INT(load_pod(&c, worker, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    CHECK_SETTING(&c, "node-rank", "0", "default");
    cfg_free(&c);
}

static void test_bad_and_inconsistent(void)
{
    struct cfg c;
    char *abc[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=abc", "RANK=0", NULL};
    CHECK_ERR(load_pod(&c, abc, NULL, NULL), "WORLD_SIZE='abc' (PyTorchJob)");
    cfg_free(&c);
    char *big[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=4", "RANK=4", NULL};
    CHECK_ERR(load_pod(&c, big, NULL, NULL), "RANK=4 (PyTorchJob)", "4 nodes", "WORLD_SIZE=4");
    cfg_free(&c);
    char *port[] = {"MASTER_ADDR=m", "MASTER_PORT=99999", "WORLD_SIZE=4", "RANK=1", NULL};
    CHECK_ERR(load_pod(&c, port, NULL, NULL), "MASTER_PORT='99999' (PyTorchJob)");
    cfg_free(&c);
    char *odd[] = {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=5", "RANK=1",
                   "PET_NPROC_PER_NODE=2", NULL};
    CHECK_ERR(load_pod(&c, odd, NULL, NULL), "WORLD_SIZE=5", "PET_NPROC_PER_NODE=2");
    cfg_free(&c);
    /* the operator writes each fact twice; two different values mean a changed pod */
    static char *const twice[][8] = {
        {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=4", "RANK=1", "PET_NODE_RANK=2", NULL},
        {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=4", "RANK=1", "PET_MASTER_PORT=2", NULL},
        {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=4", "RANK=1", "PET_MASTER_ADDR=n", NULL},
        {"MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=4", "RANK=1", "PET_NNODES=3", NULL},
    };
    static const char *const named[][2] = {{"RANK=1", "PET_NODE_RANK=2"},
                                           {"MASTER_PORT=1", "PET_MASTER_PORT=2"},
                                           {"MASTER_ADDR=m", "PET_MASTER_ADDR=n"},
                                           {"WORLD_SIZE=4", "PET_NNODES=3"}};
    for (size_t i = 0; i < sizeof twice / sizeof *twice; i++) {
        CHECK_ERR(load_pod(&c, (char **)twice[i], NULL, NULL), named[i][0], named[i][1],
                  "disagree");
        cfg_free(&c);
    }
}

/* A TrainJob node: torchrun's words from the Trainer, and the Indexed Job's index. */
static void test_trainjob(void)
{
    struct cfg c;
    struct fake_machine m = {.hostname = "tj-node-0-2", .fqdn = "tj-node-0-2.tj.ns.svc"};
    char *env[] = {"PET_NNODES=4", "PET_NPROC_PER_NODE=auto", "PET_NODE_RANK=2",
                   "PET_MASTER_ADDR=tj-node-0-0.tj", "PET_MASTER_PORT=29500",
                   "JOB_COMPLETION_INDEX=2", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "discovered", "Kubeflow Trainer v2", "env PET_NODE_RANK (Kubeflow Trainer)");
    CHECK_SETTING(&c, "node-rank", "2", "env PET_NODE_RANK");
    CHECK_SETTING(&c, "nnodes", "4", "env PET_NNODES");
    /* the static store at node 0, not the JobSet adapter's c10d guess */
    CHECK_SETTING(&c, "rdzv-backend", "static", "default");
    CHECK_SETTING(&c, "rdzv-endpoint", "tj-node-0-0.tj:29500", "from --master-addr/--master-port");
    cfg_free(&c);
    char *bad[] = {"PET_NNODES=4", "PET_NODE_RANK=2", "PET_MASTER_ADDR=tj-node-0-0.tj",
                   "JOB_COMPLETION_INDEX=3", NULL};
    CHECK_ERR(load_pod(&c, bad, &m, NULL), "PET_NODE_RANK=2", "JOB_COMPLETION_INDEX=3",
              "disagree");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_master_and_workers);
    RUN(test_elastic);
    RUN(test_user_overrides);
    RUN(test_bad_and_inconsistent);
    RUN(test_trainjob);
    return check_result();
}
