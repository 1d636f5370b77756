/* tests/unit/launcher/operators/test_jobset.c — Indexed Job and JobSet pods (reference/k8s.md
 * §5.1, §5.2): the completion index, the job index through the downward API, and the store's
 * name derived from the pod's own. */
#include "tests/unit/launcher/operators/op_test.h"

static void test_indexed_job(void)
{
    struct cfg c;
    struct fake_machine m = {.hostname = "train-3",
                             .fqdn = "train-3.train-svc.ns.svc.cluster.local"};
    char *env[] = {"JOB_COMPLETION_INDEX=3", "PODRUN_NNODES=4", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "discovered", "Indexed Job", "env JOB_COMPLETION_INDEX (Indexed Job)");
    CHECK_SETTING(&c, "node-rank", "3", "env JOB_COMPLETION_INDEX (Indexed Job)");
    CHECK_SETTING(&c, "rdzv-backend", "c10d",
                  "env JOB_COMPLETION_INDEX and the pod's name (Indexed Job)");
    CHECK_SETTING(&c, "rdzv-endpoint", "train-0.train-svc:29400",
                  "env JOB_COMPLETION_INDEX and the pod's name (Indexed Job)");
    CHECK_SETTING(&c, "nnodes", "4", "env PODRUN_NNODES");
    cfg_free(&c);
    /* a Job does not say how many pods it has: no silent single-node job on pod 0 */
    char *nocount[] = {"JOB_COMPLETION_INDEX=0", NULL};
    CHECK_ERR(load_pod(&c, nocount, &m, NULL), "Indexed Job", "how many nodes", "--nnodes");
    cfg_free(&c);
    /* without a subdomain the name would not resolve: the user names the store */
    struct fake_machine bare = {.hostname = "train-3"};
    CHECK_ERR(load_pod(&c, env, &bare, NULL), "gives 4 nodes", "hosts the job store");
    cfg_free(&c);
    CHECK_EQ_INT(load_pod(&c, env, &bare, FLAGS("--rdzv-backend", "c10d", "--rdzv-endpoint",
                                                  "train-0.svc:29400")), 0);
    CHECK_SETTING(&c, "node-rank", "3", "env JOB_COMPLETION_INDEX (Indexed Job)");
    cfg_free(&c);
    char *bad[] = {"JOB_COMPLETION_INDEX=-1", "PODRUN_NNODES=4", NULL};
    CHECK_ERR(load_pod(&c, bad, &m, NULL), "JOB_COMPLETION_INDEX='-1' (Indexed Job)");
    cfg_free(&c);
}

static void test_jobset(void)
{
    struct cfg c;
    /* job 0 of replicatedJob "workers": the given ranks */
    struct fake_machine m0 = {.hostname = "js-workers-0-2", .fqdn = "js-workers-0-2.js.ns.svc"};
    char *j0[] = {"JOB_COMPLETION_INDEX=2", "JOBSET_JOB_INDEX=0", "PODRUN_NNODES=8", NULL};
    CHECK_EQ_INT(load_pod(&c, j0, &m0, NULL), 0);
    CHECK_SETTING(&c, "discovered", "JobSet", "env JOB_COMPLETION_INDEX (JobSet)");
    CHECK_SETTING(&c, "node-rank", "2", "env JOB_COMPLETION_INDEX (JobSet)");
    CHECK_SETTING(&c, "rdzv-endpoint", "js-workers-0-0.js:29400",
                  "env JOB_COMPLETION_INDEX and the pod's name (JobSet)");
    cfg_free(&c);
    /* job 1: no given rank (the rendezvous orders js-workers-1-* after job 0), same store */
    struct fake_machine m1 = {.hostname = "js-workers-1-2", .fqdn = "js-workers-1-2.js.ns.svc"};
    char *j1[] = {"JOB_COMPLETION_INDEX=2", "JOBSET_JOB_INDEX=1", "PODRUN_NNODES=8", NULL};
    CHECK_EQ_INT(load_pod(&c, j1, &m1, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "0", "default");
    CHECK_SETTING(&c, "rdzv-endpoint", "js-workers-0-0.js:29400",
                  "env JOB_COMPLETION_INDEX and the pod's name (JobSet)");
    cfg_free(&c);
    /* a JobSet of one Job needs no job index: the Indexed Job rule is the same */
    char *one[] = {"JOB_COMPLETION_INDEX=2", "PODRUN_NNODES=4", NULL};
    CHECK_EQ_INT(load_pod(&c, one, &m0, NULL), 0);
    CHECK_SETTING(&c, "rdzv-endpoint", "js-workers-0-0.js:29400",
                  "env JOB_COMPLETION_INDEX and the pod's name (Indexed Job)");
    cfg_free(&c);
    /* setHostnameAsFQDN: the host name is the FQDN */
    struct fake_machine fq = {.hostname = "js-workers-0-2.js.ns.svc.cluster.local"};
    CHECK_EQ_INT(load_pod(&c, j0, &fq, NULL), 0);
    CHECK_SETTING(&c, "rdzv-endpoint", "js-workers-0-0.js:29400",
                  "env JOB_COMPLETION_INDEX and the pod's name (JobSet)");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_indexed_job);
    RUN(test_jobset);
    return check_result();
}
