/* tests/unit/launcher/operators/test_slurm.c — srun's variables in a job step, a batch script's,
 * and SLURM's compressed node lists. */
#include "tests/unit/launcher/operators/op_test.h"

#define STEP                                                                                  \
    "SLURM_JOB_ID=4242", "SLURM_JOBID=4242", "SLURM_NNODES=5", "SLURM_JOB_NUM_NODES=5",       \
        "SLURM_JOB_NODELIST=gpu-[01-03,07],login2", "SLURM_STEP_NUM_NODES=4",                  \
        "SLURM_STEP_NODELIST=gpu-[01-03,07]", "SLURM_STEP_NUM_TASKS=4",                       \
        "SLURM_LAUNCH_NODE_IPADDR=10.9.0.1"

static void test_step(void)
{
    struct cfg c;
    char *env[] = {STEP, "SLURM_NODEID=3", "SLURM_PROCID=3", "SLURM_LOCALID=0",
                   "SLURMD_NODENAME=gpu-07", "SLURM_GPUS_ON_NODE=8", NULL};
    CHECK_EQ_INT(load_pod(&c, env, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "SLURM", "env SLURM_NODEID (SLURM)");
    CHECK_SETTING(&c, "node-rank", "3", "env SLURM_NODEID (SLURM)");
    CHECK_SETTING(&c, "nnodes", "4", "env SLURM_STEP_NUM_NODES (SLURM)");
    CHECK_SETTING(&c, "master-addr", "gpu-01", "env SLURM_STEP_NODELIST (SLURM)");
    CHECK_SETTING(&c, "nproc-per-node", "8", "env SLURM_GPUS_ON_NODE (SLURM)");
    CHECK_SETTING(&c, "rdzv-id", "4242", "env SLURM_JOB_ID (SLURM)");
    cfg_free(&c);
    /* the flag wins over SLURM's GPU count */
    CHECK_EQ_INT(load_pod(&c, env, NULL, FLAGS("--nproc-per-node", "2")), 0);
    CHECK_SETTING(&c, "nproc-per-node", "2", "flag --nproc-per-node");
    cfg_free(&c);
}

static void test_batch_script(void)
{
    struct cfg c;
    char *one[] = {"SLURM_JOB_ID=9", "SLURM_NNODES=1", "SLURM_JOB_NODELIST=n17",
                   "SLURM_NODEID=0", "SLURM_PROCID=0", NULL};
    CHECK_EQ_INT(load_pod(&c, one, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "1", "env SLURM_NNODES (SLURM)");
    CHECK_SETTING(&c, "master-addr", "n17", "env SLURM_JOB_NODELIST (SLURM)");
    cfg_free(&c);
    char *four[] = {"SLURM_JOB_ID=9", "SLURM_NNODES=4", "SLURM_JOB_NODELIST=n[1-4]",
                    "SLURM_NODEID=0", "SLURM_PROCID=0", NULL};
    CHECK_ERR(load_pod(&c, four, NULL, NULL), "SLURM_NNODES=4", "srun --ntasks-per-node=1");
    cfg_free(&c);
}

static void test_conflicts(void)
{
    struct cfg c;
    char *tasks[] = {STEP, "SLURM_NODEID=1", "SLURM_PROCID=5", NULL};
    CHECK_ERR(load_pod(&c, tasks, NULL, NULL), "SLURM_PROCID=5", "SLURM_NODEID=1",
              "--ntasks-per-node=1");
    cfg_free(&c);
    char *count[] = {"SLURM_JOB_ID=1", "SLURM_NNODES=4", "SLURM_STEP_NUM_NODES=4",
                     "SLURM_STEP_NODELIST=a[1-3]", "SLURM_NODEID=0", NULL};
    CHECK_ERR(load_pod(&c, count, NULL, NULL), "SLURM_STEP_NODELIST=a[1-3] names 3 nodes",
              "SLURM_STEP_NUM_NODES=4");
    cfg_free(&c);
    char *name[] = {STEP, "SLURM_NODEID=1", "SLURM_PROCID=1", "SLURMD_NODENAME=gpu-03", NULL};
    CHECK_ERR(load_pod(&c, name, NULL, NULL), "SLURM_NODEID=1 names gpu-02",
              "SLURMD_NODENAME=gpu-03");
    cfg_free(&c);
    char *big[] = {STEP, "SLURM_NODEID=4", NULL};
    CHECK_ERR(load_pod(&c, big, NULL, NULL), "SLURM_NODEID=4", "SLURM_STEP_NUM_NODES=4");
    cfg_free(&c);
    char *list[] = {"SLURM_JOB_ID=1", "SLURM_NNODES=2", "SLURM_STEP_NUM_NODES=2",
                    "SLURM_STEP_NODELIST=n[1-", "SLURM_NODEID=0", NULL};
    CHECK_ERR(load_pod(&c, list, NULL, NULL), "SLURM_STEP_NODELIST");
    cfg_free(&c);
    char *gpus[] = {STEP, "SLURM_NODEID=0", "SLURM_GPUS_ON_NODE=lots", NULL};
    CHECK_ERR(load_pod(&c, gpus, NULL, NULL), "SLURM_GPUS_ON_NODE='lots' (SLURM)");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_step);
    RUN(test_batch_script);
    RUN(test_conflicts);
    return check_result();
}
