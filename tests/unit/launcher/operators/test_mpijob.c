/* tests/unit/launcher/operators/test_mpijob.c — an MPIJob's /etc/mpi/hostfile in every pod
 * (reference/k8s.md §4.2): OpenMPI and hydra lines, the variables that name the file, the
 * launcher that is not in it. */
#include "tests/unit/launcher/operators/op_test.h"

static const struct fake_file files[] = {
    {"/etc/mpi/hostfile", "mj-worker-0.mj.ns.svc slots=4\nmj-worker-1.mj.ns.svc slots=4\n"
                          "mj-worker-2.mj.ns.svc slots=4\n"},
    {"/r/etc/mpi/hostfile", "mj-worker-0.mj.ns.svc:2\nmj-worker-1.mj.ns.svc:2\n"},
    {"/etc/mpi/bad", "mj-worker-0 slots=four\n"},
    {NULL, NULL}};

static void test_openmpi_hostfile(void)
{
    struct cfg c;
    struct fake_machine m = {.files = files, .hostname = "mj-worker-1"};
    char *env[] = {"K_MPI_JOB_ROLE=worker", "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile",
                   "OMPI_MCA_orte_keep_fqdn_hostnames=true", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "discovered", "MPIJob", "env OMPI_MCA_orte_default_hostfile (MPIJob)");
    CHECK_SETTING(&c, "node-rank", "1", "hostfile /etc/mpi/hostfile line 2 (MPIJob)");
    CHECK_SETTING(&c, "nnodes", "3", "hostfile /etc/mpi/hostfile (MPIJob)");
    CHECK_SETTING(&c, "nproc-per-node", "4", "hostfile /etc/mpi/hostfile line 2 (MPIJob)");
    CHECK_SETTING(&c, "master-addr", "mj-worker-0.mj.ns.svc",
                  "hostfile /etc/mpi/hostfile line 1 (MPIJob)");
    CHECK_SETTING(&c, "rdzv-backend", "static", "hostfile /etc/mpi/hostfile (MPIJob)");
    cfg_free(&c);
    /* a worker with the ConfigMap mounted but none of the launcher's variables */
    char *worker[] = {"K_MPI_JOB_ROLE=worker", NULL};
    CHECK_EQ_INT(load_pod(&c, worker, &m, FLAGS("--nproc-per-node", "2")), 0);
    CHECK_SETTING(&c, "discovered", "MPIJob", "hostfile /etc/mpi/hostfile (MPIJob)");
    CHECK_SETTING(&c, "node-rank", "1", "hostfile /etc/mpi/hostfile line 2 (MPIJob)");
    CHECK_SETTING(&c, "nproc-per-node", "2", "flag --nproc-per-node");
    cfg_free(&c);
}

static void test_hydra_under_root(void)
{
    struct cfg c;
    struct fake_machine m = {.files = files, .hostname = "mj-worker-0"};
    char *env[] = {"K_MPI_JOB_ROLE=worker", "PODRUN_DISCOVERY_ROOT=/r/", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "0", "hostfile /r/etc/mpi/hostfile line 1 (MPIJob)");
    CHECK_SETTING(&c, "nnodes", "2", "hostfile /r/etc/mpi/hostfile (MPIJob)");
    CHECK_SETTING(&c, "nproc-per-node", "2", "hostfile /r/etc/mpi/hostfile line 1 (MPIJob)");
    cfg_free(&c);
}

static void test_errors(void)
{
    struct cfg c;
    struct fake_machine m = {.files = files, .hostname = "mj-launcher"};
    char *launcher[] = {"K_MPI_JOB_ROLE=launcher",
                        "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile", NULL};
    CHECK_ERR(load_pod(&c, launcher, &m, NULL), "mj-launcher", "is not in hostfile",
              "runLauncherAsWorker");
    cfg_free(&c);
    char *missing[] = {"I_MPI_HYDRA_HOST_FILE=/etc/mpi/none", NULL};
    CHECK_ERR(load_pod(&c, missing, &m, NULL), "/etc/mpi/none", "I_MPI_HYDRA_HOST_FILE",
              "ConfigMap");
    cfg_free(&c);
    char *bad[] = {"HYDRA_HOST_FILE=/etc/mpi/bad", NULL};
    CHECK_ERR(load_pod(&c, bad, &m, NULL), "/etc/mpi/bad:1");
    cfg_free(&c);
    /* a worker without the file is no source: nothing discovered, no error */
    struct fake_machine empty = {.hostname = "mj-worker-0"};
    char *worker[] = {"K_MPI_JOB_ROLE=worker", NULL};
    CHECK_EQ_INT(load_pod(&c, worker, &empty, NULL), 0);
    CHECK_SETTING(&c, "discovered", "(none)", "default");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_openmpi_hostfile);
    RUN(test_hydra_under_root);
    RUN(test_errors);
    return check_result();
}
