/* tests/unit/launcher/discover/test_k8s_pods.c — pod lists, watch events, Status objects, the
 * node-rank orders. Fixtures (tests/fixtures/k8s, argv[1]) have the
 * shapes the API server sends: a PyTorchJob's pods in every state discovery must explain, a
 * JobSet, LeaderWorkerSet and Volcano pods, a watch stream, 401/403 Status objects. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/k8s_pods.h"
#include "tests/unit/launcher/discover/k8s_fixtures.h"

static const struct k8s_pod *pod(const struct k8s_pods *t, const char *name)
{
    const struct k8s_pod *p = k8s_pods_find(t, NULL, name);
    if (!p)
        fprintf(stderr, "no pod %s\n", name);
    return p;
}

/* The pods' names in an order, joined by spaces. */
static const char *order(const struct k8s_pods *t, enum k8s_order o)
{
    static char buf[2048];
    const struct k8s_pod *v[64];
    size_t n = k8s_pods_sorted(t, o, v);
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(buf, " ");
        strcat(buf, v[i]->name);
    }
    return buf;
}

static void test_pytorchjob_list(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_pytorchjob.json"), 0);
    CHECK_EQ_INT(t.n, 6);
    CHECK_EQ_STR(t.rv, "48213");

    const struct k8s_pod *m = pod(&t, "bert-master-0");
    CHECK(m && m->ready && !m->deleting && m->has_index);
    CHECK_EQ_STR(m->ns, "train");
    CHECK_EQ_STR(m->uid, "5e1f0000-0000-4000-8000-000000000001");
    CHECK_EQ_STR(m->rv, "48101");
    CHECK_EQ_STR(m->phase, "Running");
    CHECK_EQ_STR(m->ip, "10.244.1.10");
    CHECK_EQ_STR(m->node, "gpu-node-1");
    CHECK_EQ_STR(m->group, "master");
    CHECK_EQ_INT(m->index, 0);
    CHECK_EQ_STR(m->index_key, "training.kubeflow.org/replica-index");
    CHECK_EQ_STR(m->why, "");
    CHECK(m->containers_ready);

    const struct k8s_pod *w1 = pod(&t, "bert-worker-1");
    CHECK(w1 && !w1->ready);
    CHECK_EQ_STR(w1->why, "Pending: Unschedulable");
    CHECK(strncmp(w1->why_detail, "0/4 nodes are available: 1 node(s) had untolerated", 50) == 0);
    CHECK_EQ_INT(strlen(w1->why_detail), K8S_DETAIL_MAX);   /* cut, not refused */
    CHECK_EQ_STR(w1->ip, "");
    CHECK_EQ_STR(w1->node, "");

    const struct k8s_pod *w10 = pod(&t, "bert-worker-10");
    CHECK_EQ_STR(w10->why, "ImagePullBackOff");
    CHECK_EQ_STR(w10->why_detail, "Back-off pulling image \"pytorch/pytorch:2.3.0\"");
    CHECK_EQ_INT(w10->index, 10);

    const struct k8s_pod *w2 = pod(&t, "bert-worker-2");
    CHECK_EQ_STR(w2->why, "CrashLoopBackOff");
    CHECK(strncmp(w2->why_detail, "back-off 40s restarting failed container=trainer", 48) == 0);
    CHECK_EQ_STR(w2->phase, "Running");
    CHECK_EQ_INT(w2->restarts, 4);
    CHECK(!w2->ready && !w2->containers_ready);

    const struct k8s_pod *w3 = pod(&t, "bert-worker-3");
    CHECK(w3->deleting && w3->ready);
    CHECK_EQ_STR(w3->why, "Terminating");
    CHECK_EQ_STR(k8s_pod_status(w3), "Terminating");
    CHECK_EQ_STR(k8s_pod_status(w2), "Running");
    k8s_pods_free(&t);
}

static void test_orders(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_pytorchjob.json"), 0);
    CHECK_EQ_STR(order(&t, K8S_ORDER_INDEX), "bert-master-0 bert-worker-0 bert-worker-1 "
                                             "bert-worker-2 bert-worker-3 bert-worker-10");
    CHECK_EQ_STR(order(&t, K8S_ORDER_NAME), "bert-master-0 bert-worker-0 bert-worker-1 "
                                            "bert-worker-2 bert-worker-3 bert-worker-10");
    /* k8s_tools' string order: 10.244.1.10 < 10.244.1.11 < 10.244.1.9; no IP last */
    CHECK_EQ_STR(order(&t, K8S_ORDER_IP), "bert-master-0 bert-worker-10 bert-worker-3 "
                                          "bert-worker-0 bert-worker-2 bert-worker-1");
    k8s_pods_free(&t);

    /* JobSet: replicated job "workers" (2 jobs) comes before "driver" in the spec, so its
     * global job indexes are lower; the pod names would say the opposite. */
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_jobset.json"), 0);
    CHECK_EQ_STR(order(&t, K8S_ORDER_INDEX),
                 "llm-workers-0-0-ax0q llm-workers-0-1-bx1q llm-workers-1-0-bx0q "
                 "llm-workers-1-1-cx1q llm-driver-0-0-ax0q llm-driver-0-1-bx1q");
    CHECK_EQ_STR(order(&t, K8S_ORDER_NAME),
                 "llm-driver-0-0-ax0q llm-driver-0-1-bx1q llm-workers-0-0-ax0q "
                 "llm-workers-0-1-bx1q llm-workers-1-0-bx0q llm-workers-1-1-cx1q");
    const struct k8s_pod *p = pod(&t, "llm-driver-0-1-bx1q");
    CHECK_EQ_INT(p->major, 2);
    CHECK_EQ_INT(p->index, 1);
    CHECK_EQ_STR(p->index_key, "batch.kubernetes.io/job-completion-index");
    CHECK_EQ_STR(p->hostname, "llm-driver-0-1");
    CHECK_EQ_STR(p->subdomain, "llm");
    CHECK_EQ_STR(p->ns, "ml");
    k8s_pods_free(&t);

    /* LWS groups and workers; Volcano's task index from the annotation (older releases set no
     * label), numbered within each task */
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_lws_volcano.json"), 0);
    CHECK_EQ_STR(order(&t, K8S_ORDER_INDEX),
                 "vllm-0 vllm-0-1 vllm-0-2 vllm-1 vllm-1-1 vllm-1-2 "
                 "vc-master-0 vc-worker-0 vc-worker-1");
    p = pod(&t, "vllm-1-2");
    CHECK_EQ_INT(p->major, 1);
    CHECK_EQ_INT(p->index, 2);
    p = pod(&t, "vc-worker-1");
    CHECK_EQ_STR(p->group, "worker");
    CHECK_EQ_STR(p->index_key, "volcano.sh/task-index");
    k8s_pods_free(&t);
}

static void test_watch_events(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_pytorchjob.json"), 0);
    size_t len;
    char *stream = load("watch_pytorchjob.jsonl", &len);
    struct k8s_event ev;
    char err[256];
    const char *expect_rv[] = {"48214", "48215", "48300", "48301", ""};
    enum k8s_event_type expect_type[] = {K8S_EVENT_ADDED, K8S_EVENT_MODIFIED, K8S_EVENT_BOOKMARK,
                                         K8S_EVENT_DELETED, K8S_EVENT_ERROR};
    int expect_change[] = {1, 1, 0, 1, -EINVAL};
    int i = 0;
    for (char *line = strtok(stream, "\n"); line; line = strtok(NULL, "\n"), i++) {
        CHECK_EQ_INT(k8s_event_parse(line, strlen(line), &ev, err, sizeof err), 0);
        CHECK_EQ_INT(ev.type, expect_type[i]);
        CHECK_EQ_STR(ev.rv, expect_rv[i]);
        CHECK_EQ_INT(k8s_pods_apply(&t, &ev), expect_change[i]);
        if (i == 0) {
            CHECK_EQ_INT(t.n, 7);
            CHECK_EQ_STR(pod(&t, "bert-worker-4")->why, "ContainerCreating");
        } else if (i == 1) {
            const struct k8s_pod *w1 = pod(&t, "bert-worker-1");
            CHECK(w1->ready);
            CHECK_EQ_STR(w1->why, "");
            CHECK_EQ_STR(w1->ip, "10.244.3.12");
            /* the same state again is not a change; its resourceVersion still counts */
            struct k8s_event again = ev;
            strcpy(again.rv, "48216");
            strcpy(again.pod.rv, "48216");
            CHECK_EQ_INT(k8s_pods_apply(&t, &again), 0);
            CHECK_EQ_STR(t.rv, "48216");
        } else if (i == 2) {
            CHECK_EQ_STR(t.rv, "48300");
        } else if (i == 3) {
            CHECK_EQ_INT(t.n, 6);
            CHECK(k8s_pods_find(&t, "train", "bert-worker-2") == NULL);
        } else if (i == 4) {
            CHECK_EQ_INT(ev.status.code, 410);
            CHECK_EQ_STR(ev.status.reason, "Expired");
            CHECK_EQ_STR(ev.status.message, "too old resource version: 48213 (48290)");
        }
    }
    CHECK_EQ_INT(i, 5);
    CHECK_EQ_STR(t.rv, "48301");

    /* A DELETED for an earlier pod of the same name (another uid) leaves the new one. */
    struct k8s_event del = {.type = K8S_EVENT_DELETED};
    del.pod = *pod(&t, "bert-worker-0");
    strcpy(del.pod.uid, "00000000-0000-4000-8000-00000000dead");
    CHECK_EQ_INT(k8s_pods_apply(&t, &del), 0);
    CHECK(pod(&t, "bert-worker-0") != NULL);
    strcpy(del.pod.uid, pod(&t, "bert-worker-0")->uid);
    CHECK_EQ_INT(k8s_pods_apply(&t, &del), 1);
    CHECK_EQ_INT(k8s_pods_apply(&t, &del), 0);
    free(stream);
    k8s_pods_free(&t);
}

/* A pod from its metadata and status JSON. */
static int one_pod(struct k8s_pods *t, const char *name, const char *meta, const char *status)
{
    char json[4096], err[256] = "";
    snprintf(json, sizeof json,
             "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
             "\"5\"},\"items\":[{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\"%s},"
             "\"spec\":{},\"status\":%s}]}",
             name, meta, status);
    int rc = k8s_pods_add_list(t, json, strlen(json), NULL, 0, err, sizeof err);
    if (rc)
        fprintf(stderr, "(expected where the test says so) %s\n", err);
    return rc;
}

static void test_why_not_ready(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(one_pod(&t, "init-pull", "",
                         "{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"a\","
                         "\"state\":{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\"}}},"
                         "{\"name\":\"b\",\"state\":{\"waiting\":{\"reason\":\"ErrImagePull\","
                         "\"message\":\"not found\"}}}],\"containerStatuses\":[{\"name\":\"c\","
                         "\"ready\":false,\"state\":{\"waiting\":{\"reason\":"
                         "\"PodInitializing\"}}}]}"), 0);
    CHECK_EQ_STR(pod(&t, "init-pull")->why, "Init:ErrImagePull");
    CHECK_EQ_STR(pod(&t, "init-pull")->why_detail, "not found");
    CHECK_EQ_INT(one_pod(&t, "init-running", "",
                         "{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"a\","
                         "\"state\":{\"running\":{}}},{\"name\":\"b\",\"state\":{\"waiting\":"
                         "{\"reason\":\"PodInitializing\"}}}]}"), 0);
    CHECK_EQ_STR(pod(&t, "init-running")->why, "Init:0/2");
    CHECK_EQ_INT(one_pod(&t, "init-failed", "",
                         "{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"a\","
                         "\"state\":{\"terminated\":{\"exitCode\":3}}}]}"), 0);
    CHECK_EQ_STR(pod(&t, "init-failed")->why, "Init:ExitCode:3");
    CHECK_EQ_INT(one_pod(&t, "evicted", "",
                         "{\"phase\":\"Failed\",\"reason\":\"Evicted\",\"message\":\"The node "
                         "was low on resource: memory.\"}"), 0);
    CHECK_EQ_STR(pod(&t, "evicted")->why, "Failed: Evicted");
    CHECK_EQ_STR(pod(&t, "evicted")->why_detail, "The node was low on resource: memory.");
    CHECK_EQ_INT(one_pod(&t, "oom", "",
                         "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"c\","
                         "\"ready\":false,\"restartCount\":1,\"state\":{\"terminated\":"
                         "{\"exitCode\":137,\"reason\":\"OOMKilled\"}}}]}"), 0);
    CHECK_EQ_STR(pod(&t, "oom")->why, "OOMKilled");
    CHECK_EQ_INT(one_pod(&t, "killed", "",
                         "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"c\","
                         "\"ready\":false,\"state\":{\"terminated\":{\"exitCode\":0,\"signal\":9"
                         "}}}]}"), 0);
    CHECK_EQ_STR(pod(&t, "killed")->why, "Signal:9");
    CHECK_EQ_INT(one_pod(&t, "probe", "",
                         "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
                         "\"False\",\"reason\":\"ContainersNotReady\",\"message\":\"containers "
                         "with unready status: [c]\"},{\"type\":\"PodScheduled\",\"status\":"
                         "\"True\"}],\"containerStatuses\":[{\"name\":\"c\",\"ready\":false,"
                         "\"state\":{\"running\":{}}}]}"), 0);
    CHECK_EQ_STR(pod(&t, "probe")->why, "Running: not Ready");
    CHECK_EQ_STR(pod(&t, "probe")->why_detail, "containers with unready status: [c]");
    CHECK_EQ_INT(one_pod(&t, "done", "", "{\"phase\":\"Succeeded\"}"), 0);
    CHECK_EQ_STR(pod(&t, "done")->why, "Succeeded");
    CHECK_EQ_INT(one_pod(&t, "new", "", "{}"), 0);
    CHECK_EQ_STR(pod(&t, "new")->why, "no status yet");
    CHECK_EQ_INT(one_pod(&t, "gated", "",
                         "{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
                         "\"status\":\"False\",\"reason\":\"SchedulingGated\"}]}"), 0);
    CHECK_EQ_STR(pod(&t, "gated")->why, "Pending: SchedulingGated");
    k8s_pods_free(&t);
}

static void test_index_values(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    /* a malformed index is no index: such a pod sorts after the indexed ones, by name */
    CHECK_EQ_INT(one_pod(&t, "w-a", ",\"labels\":{\"apps.kubernetes.io/pod-index\":\"x1\"}",
                         "{}"), 0);
    CHECK_EQ_INT(one_pod(&t, "w-b", ",\"labels\":{\"apps.kubernetes.io/pod-index\":\"0012\"}",
                         "{}"), 0);
    CHECK_EQ_INT(one_pod(&t, "w-c", ",\"annotations\":{\"apps.kubernetes.io/pod-index\":\"3\"}",
                         "{}"), 0);
    CHECK_EQ_INT(one_pod(&t, "w-d",
                         ",\"labels\":{\"apps.kubernetes.io/pod-index\":\"12345678901\"}", "{}"),
                 0);
    CHECK_EQ_INT(one_pod(&t, "w-e", ",\"labels\":{\"apps.kubernetes.io/pod-index\":7}", "{}"), 0);
    CHECK_EQ_STR(order(&t, K8S_ORDER_INDEX), "w-c w-b w-a w-d w-e");
    CHECK_EQ_INT(pod(&t, "w-b")->index, 12);
    CHECK(!pod(&t, "w-a")->has_index && !pod(&t, "w-d")->has_index && !pod(&t, "w-e")->has_index);
    k8s_pods_free(&t);
}

static void test_name_order(void)
{
    CHECK(k8s_name_cmp("w-2", "w-10") < 0);
    CHECK(k8s_name_cmp("w-10", "w-2") > 0);
    CHECK(k8s_name_cmp("w-2", "w-02") < 0);     /* equal numbers: fewer zeros first */
    CHECK(k8s_name_cmp("w-02", "w-2") > 0);
    CHECK(k8s_name_cmp("w-007", "w-7") > 0);
    CHECK(k8s_name_cmp("w-2", "w-2") == 0);
    CHECK(k8s_name_cmp("w", "w-0") < 0);
    CHECK(k8s_name_cmp("a-1-b", "a-1-c") < 0);
    CHECK(k8s_name_cmp("job-master-0", "job-worker-0") < 0);
    CHECK(k8s_name_cmp("x9", "xa") < 0);
    CHECK(k8s_name_cmp("x-", "x0") < 0);
    CHECK(k8s_name_cmp("pod-99999999999999999999", "pod-100000000000000000000") < 0);
    CHECK(k8s_name_cmp("", "a") < 0);
}

static void test_malformed(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 2);
    char err[256], cont[8];
    const char *bad[] = {
        "",
        "[]",
        "{\"kind\":\"PodList\",\"items\":",
        "{\"kind\":\"Status\",\"code\":403}",
        "{\"kind\":\"PodList\",\"items\":{}}",
        "{\"kind\":\"PodList\",\"items\":[7]}",
        "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{}}]}",
        "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\\u0000b\"}}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = k8s_pods_add_list(&t, bad[i], strlen(bad[i]), cont, sizeof cont, err, sizeof err);
        CHECK(rc == -EPROTO || rc == -EMSGSIZE);
        CHECK(err[0] != '\0');
    }
    CHECK_EQ_INT(t.n, 0);
    char name[300];
    memset(name, 'n', sizeof name);
    name[299] = '\0';
    CHECK_EQ_INT(one_pod(&t, name, "", "{}"), -EMSGSIZE);
    /* a continue token longer than the caller's buffer */
    const char *longcont = "{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"0123456789\"},"
                           "\"items\":[]}";
    CHECK_EQ_INT(k8s_pods_add_list(&t, longcont, strlen(longcont), cont, sizeof cont, err,
                                   sizeof err), -EMSGSIZE);
    /* the table's bound */
    CHECK_EQ_INT(one_pod(&t, "a", "", "{}"), 0);
    CHECK_EQ_INT(one_pod(&t, "b", "", "{}"), 0);
    CHECK_EQ_INT(one_pod(&t, "b", "", "{\"phase\":\"Running\"}"), 0);   /* replacing is fine */
    CHECK_EQ_INT(one_pod(&t, "c", "", "{}"), -EMSGSIZE);
    CHECK_EQ_INT(t.n, 2);

    struct k8s_event ev;
    const char *bad_events[] = {
        "{\"type\":\"SYNC\",\"object\":{}}",
        "{\"type\":\"ADDED\"}",
        "{\"type\":\"ADDED\",\"object\":[]}",
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Pod\"}}",
        "{\"object\":{}}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad_events / sizeof bad_events[0]; i++)
        CHECK_EQ_INT(k8s_event_parse(bad_events[i], strlen(bad_events[i]), &ev, err, sizeof err),
                     -EPROTO);

    struct k8s_status st;
    size_t len;
    char *s = load("status_403.json", &len);
    CHECK_EQ_INT(k8s_status_parse(s, len, &st), 0);
    CHECK_EQ_INT(st.code, 403);
    CHECK_EQ_STR(st.reason, "Forbidden");
    CHECK(strstr(st.message, "cannot list resource \"pods\"") != NULL);
    free(s);
    s = load("status_401.json", &len);
    CHECK_EQ_INT(k8s_status_parse(s, len, &st), 0);
    CHECK_EQ_INT(st.code, 401);
    free(s);
    CHECK_EQ_INT(k8s_status_parse("{\"kind\":\"Pod\"}", 14, &st), -EPROTO);
    k8s_pods_free(&t);
}

static void test_paged_list(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    char cont[K8S_CONTINUE_MAX + 1], err[128];
    const char *p1 = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
                     "\"resourceVersion\":\"77\",\"continue\":\"eyJydiI6Nzd9\","
                     "\"remainingItemCount\":1},\"items\":["
                     "{\"metadata\":{\"name\":\"w-0\",\"namespace\":\"ns\"}}]}";
    const char *p2 = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
                     "\"resourceVersion\":\"77\"},\"items\":["
                     "{\"metadata\":{\"name\":\"w-1\",\"namespace\":\"ns\"}}]}";
    CHECK_EQ_INT(k8s_pods_add_list(&t, p1, strlen(p1), cont, sizeof cont, err, sizeof err), 0);
    CHECK_EQ_STR(cont, "eyJydiI6Nzd9");
    CHECK_EQ_INT(k8s_pods_add_list(&t, p2, strlen(p2), cont, sizeof cont, err, sizeof err), 0);
    CHECK_EQ_STR(cont, "");
    CHECK_EQ_INT(t.n, 2);
    CHECK_EQ_STR(t.rv, "77");
    k8s_pods_clear(&t);
    CHECK_EQ_INT(t.n, 0);
    CHECK_EQ_STR(t.rv, "");
    k8s_pods_free(&t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_k8s_pods FIXTURE_DIR\n");
        return 2;
    }
    fixtures = argv[1];
    RUN(test_pytorchjob_list);
    RUN(test_orders);
    RUN(test_watch_events);
    RUN(test_why_not_ready);
    RUN(test_index_values);
    RUN(test_name_order);
    RUN(test_malformed);
    RUN(test_paged_list);
    return check_result();
}
