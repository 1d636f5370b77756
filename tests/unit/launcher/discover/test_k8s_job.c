/* tests/unit/launcher/discover/test_k8s_job.c — which pods are the job's nodes and when they are
 * all there (k8s_plan), why a node's pod is gone (k8s_pod_gone), and the job's selector from a
 * pod's own labels (k8s_job_selector). Pods are made as the API server sends them in watch
 * events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/k8s_job.h"
#include "launcher/discover/k8s_pods.h"

/* A pod event: name, phase, IP ("" none), Ready, the PyTorchJob replica index (-1 none) and
 * extra status/metadata JSON members. */
static void put(struct k8s_pods *t, const char *type, const char *name, const char *phase,
                const char *ip, int ready, int index, const char *meta_extra,
                const char *status_extra)
{
    char json[4096], labels[256] = "", ipj[64] = "";
    if (index >= 0)
        snprintf(labels, sizeof labels, ",\"labels\":{\"training.kubeflow.org/replica-type\":"
                 "\"worker\",\"training.kubeflow.org/replica-index\":\"%d\"}", index);
    if (ip[0])
        snprintf(ipj, sizeof ipj, ",\"podIP\":\"%s\"", ip);
    snprintf(json, sizeof json,
             "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"ns\",\"uid\":\"uid-%s\",\"resourceVersion\":\"7\"%s%s},"
             "\"status\":{\"phase\":\"%s\"%s,\"conditions\":[{\"type\":\"Ready\",\"status\":"
             "\"%s\"}]%s}}}",
             type, name, name, labels, meta_extra ? meta_extra : "", phase, ipj,
             ready ? "True" : "False", status_extra ? status_extra : "");
    struct k8s_event ev;
    char err[256];
    int rc = k8s_event_parse(json, strlen(json), &ev, err, sizeof err);
    if (rc)
        fprintf(stderr, "bad test pod: %s\n", err);
    CHECK_EQ_INT(rc, 0);
    CHECK(k8s_pods_apply(t, &ev) >= 0);
}

static void running(struct k8s_pods *t, const char *name, int last_octet, int index)
{
    char ip[32];
    snprintf(ip, sizeof ip, "10.0.0.%d", last_octet);
    put(t, "ADDED", name, "Running", ip, 1, index, NULL, NULL);
}

static struct k8s_plan plan(const struct k8s_pods *t, const char *self, enum k8s_order o,
                            int min, int max)
{
    struct k8s_plan_params p = {"ns", self, o, min, max};
    struct k8s_plan pl;
    CHECK_EQ_INT(k8s_plan(t, &p, &pl), 0);
    return pl;
}

static void test_fixed_size_waits_then_ranks(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    running(&t, "job-worker-10", 9, 10);
    running(&t, "job-worker-2", 3, 2);
    put(&t, "ADDED", "job-worker-0", "Pending", "", 0, 0, NULL,
        ",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\",\"reason\":"
        "\"Unschedulable\",\"message\":\"0/3 nodes are available\"}]");
    struct k8s_plan pl = plan(&t, "job-worker-2", K8S_ORDER_INDEX, 4, 4);
    CHECK_EQ_INT(pl.state, K8S_PLAN_WAIT);
    CHECK_EQ_INT(pl.ready, 2);
    CHECK_EQ_STR(pl.line, "2/4 pods Running and Ready; not yet: job-worker-0 (Pending: "
                          "Unschedulable: 0/3 nodes are available); 1 more pod not created yet");
    put(&t, "ADDED", "job-worker-1", "Pending", "", 0, 1, NULL,
        ",\"containerStatuses\":[{\"name\":\"c\",\"ready\":false,\"state\":{\"waiting\":"
        "{\"reason\":\"ImagePullBackOff\"}}}]");
    pl = plan(&t, "job-worker-2", K8S_ORDER_INDEX, 4, 4);
    CHECK_EQ_STR(pl.line, "2/4 pods Running and Ready; not yet: job-worker-0 (Pending: "
                          "Unschedulable: 0/3 nodes are available), job-worker-1 "
                          "(ImagePullBackOff)");
    running(&t, "job-worker-0", 1, 0);
    running(&t, "job-worker-1", 2, 1);
    pl = plan(&t, "job-worker-2", K8S_ORDER_INDEX, 4, 4);
    CHECK_EQ_INT(pl.state, K8S_PLAN_READY);
    CHECK_EQ_INT(pl.nnodes, 4);
    CHECK_EQ_INT(pl.node_rank, 2);
    CHECK_EQ_STR(pl.host->name, "job-worker-0");
    CHECK_EQ_STR(pl.self->ip, "10.0.0.3");
    /* by name: the same here; by IP as strings: 10.0.0.1 < 10.0.0.2 < 10.0.0.3 < 10.0.0.9 */
    CHECK_EQ_INT(plan(&t, "job-worker-10", K8S_ORDER_NAME, 4, 4).node_rank, 3);
    put(&t, "MODIFIED", "job-worker-10", "Running", "10.0.0.10", 1, 10, NULL, NULL);
    pl = plan(&t, "job-worker-10", K8S_ORDER_IP, 4, 4);
    CHECK_EQ_INT(pl.node_rank, 1);   /* "10.0.0.10" sorts before "10.0.0.2" */
    CHECK_EQ_STR(pl.host->name, "job-worker-0");
    k8s_pods_free(&t);
}

/* Finished and terminating pods are not candidates; a pod beyond N is told so once the job's
 * pods are all there; a pod missing from the table cannot find itself. */
static void test_candidates(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    put(&t, "ADDED", "w-0", "Running", "10.0.0.1", 1, -1,
        ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"", NULL);
    put(&t, "ADDED", "w-1", "Succeeded", "10.0.0.2", 0, -1, NULL, NULL);
    running(&t, "w-2", 3, -1);
    running(&t, "w-3", 4, -1);
    running(&t, "w-4", 5, -1);
    struct k8s_plan pl = plan(&t, "w-3", K8S_ORDER_INDEX, 2, 2);
    CHECK_EQ_INT(pl.state, K8S_PLAN_READY);
    CHECK_EQ_INT(pl.node_rank, 1);
    CHECK_EQ_STR(pl.host->name, "w-2");
    pl = plan(&t, "w-4", K8S_ORDER_INDEX, 2, 2);
    CHECK_EQ_INT(pl.state, K8S_PLAN_NOT_MEMBER);
    CHECK(strstr(pl.line, "number 3 of the 3 pods") != NULL);
    pl = plan(&t, "w-0", K8S_ORDER_INDEX, 2, 2);
    CHECK_EQ_INT(pl.state, K8S_PLAN_NO_SELF);
    CHECK_EQ_STR(pl.line, "this pod (w-0) is being deleted");
    CHECK_EQ_STR(plan(&t, "w-9", K8S_ORDER_INDEX, 2, 2).line,
                 "this pod (w-9) is not among the pods the selector matches");
    /* this pod itself not Ready yet: waiting, and said */
    put(&t, "MODIFIED", "w-3", "Running", "10.0.0.4", 0, -1, NULL, NULL);
    pl = plan(&t, "w-3", K8S_ORDER_INDEX, 2, 2);
    CHECK_EQ_INT(pl.state, K8S_PLAN_WAIT);
    CHECK(strstr(pl.line, "; this pod is Running: not Ready") != NULL);
    struct k8s_plan_params bad = {"ns", "w-3", K8S_ORDER_INDEX, 3, 2};
    CHECK_EQ_INT(k8s_plan(&t, &bad, &pl), -EINVAL);
    k8s_pods_free(&t);
}

/* Elastic: the first pod and at least MIN ready; ranks are left to the rendezvous. */
static void test_elastic(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    put(&t, "ADDED", "w-0", "Pending", "", 0, -1, NULL, NULL);
    running(&t, "w-1", 2, -1);
    running(&t, "w-2", 3, -1);
    struct k8s_plan pl = plan(&t, "w-1", K8S_ORDER_NAME, 2, 4);
    CHECK_EQ_INT(pl.state, K8S_PLAN_WAIT);   /* the host (w-0) is not there yet */
    CHECK(strstr(pl.line, "2 pods Running and Ready, waiting for at least 2 (at most 4)"));
    running(&t, "w-0", 1, -1);
    pl = plan(&t, "w-1", K8S_ORDER_NAME, 2, 4);
    CHECK_EQ_INT(pl.state, K8S_PLAN_READY);
    CHECK_EQ_INT(pl.nnodes, 3);
    CHECK_EQ_INT(pl.node_rank, -1);
    CHECK_EQ_STR(pl.host->name, "w-0");
    k8s_pods_free(&t);
}

static void test_many_not_ready_named_first_few(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    char name[32];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "w-%d", i);
        put(&t, "ADDED", name, "Pending", "", 0, -1, NULL, NULL);
    }
    struct k8s_plan pl = plan(&t, "w-0", K8S_ORDER_NAME, 10, 10);
    CHECK(strstr(pl.line, "w-5 (Pending) and 4 more; this pod is Pending") != NULL);
    CHECK(strstr(pl.line, "w-6") == NULL);
    k8s_pods_free(&t);
}

static void test_gone(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    running(&t, "w-0", 1, -1);
    char why[64] = "";
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-0", "uid-w-0", why, sizeof why), 0);
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-0", "uid-other", why, sizeof why), 1);
    CHECK_EQ_STR(why, "pod replaced");
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-1", "uid-w-1", why, sizeof why), 1);
    CHECK_EQ_STR(why, "pod deleted");
    put(&t, "MODIFIED", "w-0", "Failed", "10.0.0.1", 0, -1, NULL, ",\"reason\":\"Evicted\"");
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-0", "uid-w-0", why, sizeof why), 1);
    CHECK_EQ_STR(why, "pod Failed: Evicted");
    put(&t, "MODIFIED", "w-0", "Running", "10.0.0.1", 1, -1,
        ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"", NULL);
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-0", "uid-w-0", why, sizeof why), 1);
    CHECK_EQ_STR(why, "pod being deleted");
    put(&t, "MODIFIED", "w-0", "Succeeded", "10.0.0.1", 0, -1, NULL, NULL);
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-0", "uid-w-0", why, sizeof why), 0);
    put(&t, "DELETED", "w-0", "Succeeded", "10.0.0.1", 0, -1, NULL, NULL);
    CHECK_EQ_INT(k8s_pod_gone(&t, "ns", "w-0", "uid-w-0", why, sizeof why), 1);
    k8s_pods_free(&t);
}

static const char *selector(const char *labels, const char **which)
{
    static char out[512];
    char json[1024], err[256];
    snprintf(json, sizeof json, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labels\":{%s}}}",
             labels);
    int rc = k8s_job_selector(json, strlen(json), out, sizeof out, which, err, sizeof err);
    if (rc < 0)
        snprintf(out, sizeof out, "error %d: %s", rc, err);
    return out;
}

static void test_selector_from_labels(void)
{
    const char *which = NULL;
    CHECK_EQ_STR(selector("\"training.kubeflow.org/job-name\":\"bert\","
                          "\"training.kubeflow.org/replica-index\":\"1\","
                          "\"training.kubeflow.org/operator-name\":\"pytorchjob-controller\"",
                          &which),
                 "training.kubeflow.org/job-name=bert,"
                 "training.kubeflow.org/operator-name=pytorchjob-controller");
    CHECK_EQ_STR(which, "Kubeflow");
    /* a JobSet's pods also carry their child Job's name: the JobSet is the job */
    CHECK_EQ_STR(selector("\"batch.kubernetes.io/job-name\":\"js-node-0\","
                          "\"jobset.sigs.k8s.io/replicatedjob-name\":\"node\","
                          "\"jobset.sigs.k8s.io/jobset-name\":\"js\"", &which),
                 "jobset.sigs.k8s.io/jobset-name=js,jobset.sigs.k8s.io/replicatedjob-name=node");
    CHECK_EQ_STR(selector("\"leaderworkerset.sigs.k8s.io/name\":\"lws\","
                          "\"leaderworkerset.sigs.k8s.io/group-index\":\"3\"", &which),
                 "leaderworkerset.sigs.k8s.io/name=lws,leaderworkerset.sigs.k8s.io/group-index=3");
    CHECK_EQ_STR(selector("\"volcano.sh/job-name\":\"vj\",\"volcano.sh/task-spec\":\"worker\"",
                          &which), "volcano.sh/job-name=vj");
    CHECK_EQ_STR(selector("\"batch.kubernetes.io/job-name\":\"ij\"", &which),
                 "batch.kubernetes.io/job-name=ij");
    CHECK_EQ_STR(selector("\"job-name\":\"old\"", &which), "job-name=old");
    CHECK_EQ_STR(selector("\"paddle-job\":\"fluid-ctr\"", &which), "paddle-job=fluid-ctr");
    CHECK(strncmp(selector("\"app\":\"web\"", &which), "error -2: none of the labels", 28) == 0);
    CHECK(strncmp(selector("\"volcano.sh/job-name\":\"a,b=c\"", &which), "error -71", 9) == 0);
    char out[8], err[128];
    const char *j = "{\"kind\":\"Pod\",\"metadata\":{\"labels\":{\"paddle-job\":\"x\"}}}";
    CHECK_EQ_INT(k8s_job_selector(j, strlen(j), out, sizeof out, NULL, err, sizeof err),
                 -ENOSPC);
    j = "{\"kind\":\"Status\"}";
    CHECK_EQ_INT(k8s_job_selector(j, strlen(j), out, sizeof out, NULL, err, sizeof err),
                 -EPROTO);
}

int main(void)
{
    RUN(test_fixed_size_waits_then_ranks);
    RUN(test_candidates);
    RUN(test_elastic);
    RUN(test_many_not_ready_named_first_few);
    RUN(test_gone);
    RUN(test_selector_from_labels);
    return check_result();
}
