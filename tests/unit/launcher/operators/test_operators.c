/* tests/unit/launcher/operators/test_operators.c — which source discovers the job
 * (--discovery auto|env|hostfile|k8s|none, the detection order) and what every discovered job
 * must leave behind. */
#include "tests/unit/launcher/operators/op_test.h"
#include "launcher/operators/operators.h"

static const struct op_adapter *detected(char **env, struct fake_machine *m)
{
    struct cfg c;
    struct discover_host h;
    cfg_init(&c);
    if (m)
        fake_host_init(&h, m);
    const struct op_adapter *a = operators_detect(&c, env, m ? &h : NULL);
    cfg_free(&c);
    return a;
}

/* Pods whose variables look like two schedulers' are their real scheduler's. */
static void test_detection_order(void)
{
    /* Volcano's pytorch plugin writes PyTorchJob's four names */
    char *vc[] = {"MASTER_ADDR=j-master-0.j", "MASTER_PORT=1", "WORLD_SIZE=2", "RANK=1",
                  "VC_TASK_INDEX=0", NULL};
    CHECK(detected(vc, NULL) == &op_volcano);
    char *ptj[] = {"MASTER_ADDR=j-master-0", "MASTER_PORT=1", "WORLD_SIZE=2", "RANK=1", NULL};
    CHECK(detected(ptj, NULL) == &op_pytorchjob);
    /* a TrainJob's pods are JobSet pods */
    char *tj[] = {"JOB_COMPLETION_INDEX=1", "PET_NODE_RANK=1", "PET_NNODES=2",
                  "PET_MASTER_ADDR=t-node-0-0.t", NULL};
    CHECK(detected(tj, NULL) == &op_trainjob);
    char *js[] = {"JOB_COMPLETION_INDEX=1", NULL};
    CHECK(detected(js, NULL) == &op_jobset);
    /* the Trainer's MPI runtime: JobSet pods with the MPI hostfile, which says more */
    char *mpi[] = {"JOB_COMPLETION_INDEX=1", "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile",
                   NULL};
    CHECK(detected(mpi, NULL) == &op_mpijob);
    char *paddle[] = {"PADDLE_MASTER=p-worker-0:1", "PADDLE_NNODES=2", NULL};
    CHECK(detected(paddle, NULL) == &op_paddlejob);
    char *lws[] = {"LWS_LEADER_ADDRESS=l.x", "LWS_GROUP_SIZE=2", "LWS_WORKER_INDEX=1", NULL};
    CHECK(detected(lws, NULL) == &op_lws);
    char *slurm[] = {"SLURM_JOB_ID=1", "SLURM_NODEID=0", "SLURM_NNODES=1", NULL};
    CHECK(detected(slurm, NULL) == &op_slurm);
    /* nothing, or empty variables (unset): nothing */
    char *none[] = {"PATH=/bin", "RANK=", "VC_TASK_INDEX=", NULL};
    CHECK(detected(none, NULL) == NULL);
}

static void test_discovery_modes(void)
{
    struct cfg c;
    char *env[] = {"LWS_LEADER_ADDRESS=l.x", "LWS_GROUP_SIZE=2", "LWS_WORKER_INDEX=1", NULL};
    /* none: the scheduler is not read (torchrun's behaviour) */
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--discovery", "none")), 0);
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    CHECK_SETTING(&c, "nnodes", "1", "default");
    cfg_free(&c);
    /* k8s: the Kubernetes API's, not the variables' (it asks for the node count itself) */
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--discovery", "k8s", "--nnodes", "2")), 0);
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    CHECK_SETTING(&c, "node-rank", "0", "default");
    cfg_free(&c);
    /* --standalone is one node whatever the pod says */
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--standalone")), 0);
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    cfg_free(&c);
    /* env: as auto, but a scheduler must be there */
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--discovery", "env")), 0);
    CHECK_SETTING(&c, "discovered", "LeaderWorkerSet", "env LWS_WORKER_INDEX (LeaderWorkerSet)");
    cfg_free(&c);
    char *plain[] = {"PATH=/bin", NULL};
    CHECK_ERR(load_pod(&c, plain, NULL, FLAGS("--discovery", "env")), "--discovery env",
              "no scheduler");
    cfg_free(&c);
    /* hostfile: the variables are not read */
    CHECK_ERR(load_pod(&c, env, NULL, FLAGS("--discovery", "hostfile")), "--discovery hostfile",
              "--hostfile FILE");
    cfg_free(&c);
    char *both[] = {"PODRUN_DISCOVERY=none", "PODRUN_HOSTFILE=/h", NULL};
    CHECK_ERR(load_pod(&c, both, NULL, NULL), "--hostfile /h (env PODRUN_HOSTFILE)",
              "--discovery none");
    cfg_free(&c);
    /* auto with nothing there: nothing discovered, no error */
    CHECK_EQ_INT(load_pod(&c, plain, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovery", "auto", "default");
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    cfg_free(&c);
    /* --help and --version skip discovery, however broken the pod */
    char *broken[] = {"WORLD_SIZE=x", "RANK=0", "MASTER_ADDR=a", "MASTER_PORT=1", NULL};
    CHECK_EQ_INT(load_pod(&c, broken, NULL, FLAGS("--help")), 0);
    cfg_free(&c);
}

/* Values the user gives replace the scheduler's; the result must still be one job. */
static void test_precedence_and_result(void)
{
    struct cfg c;
    char *env[] = {"LWS_LEADER_ADDRESS=l.x", "LWS_GROUP_SIZE=4", "LWS_WORKER_INDEX=1",
                   "PET_MASTER_ADDR=pet-leader", "PODRUN_NODE_RANK=3", NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--nnodes", "2:4")), 0);
    CHECK_SETTING(&c, "master-addr", "pet-leader", "env PET_MASTER_ADDR");
    CHECK_SETTING(&c, "node-rank", "3", "env PODRUN_NODE_RANK");
    CHECK_SETTING(&c, "nnodes", "2:4", "flag --nnodes");
    cfg_free(&c);
    char *small[] = {"LWS_LEADER_ADDRESS=l.x", "LWS_GROUP_SIZE=4", "LWS_WORKER_INDEX=3",
                     "PODRUN_NNODES=3", NULL};
    CHECK_ERR(load_pod(&c, small, NULL, NULL), "--node-rank 3 (env LWS_WORKER_INDEX",
              "--nnodes 3 (env PODRUN_NNODES)");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_detection_order);
    RUN(test_discovery_modes);
    RUN(test_precedence_and_result);
    return check_result();
}
