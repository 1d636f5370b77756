/* tests/unit/launcher/operators/test_lws.c — a LeaderWorkerSet group (resilience.md §4.3). */
#include "tests/unit/launcher/operators/op_test.h"

static void test_group(void)
{
    struct cfg c;
    struct fake_machine m = {.hostname = "vllm-0-2"};
    char *env[] = {"LWS_LEADER_ADDRESS=vllm-0.vllm.default", "LWS_GROUP_SIZE=4",
                   "LWS_WORKER_INDEX=2", NULL};
    CHECK_EQ_INT(load_pod(&c, env, &m, NULL), 0);
    CHECK_SETTING(&c, "discovered", "LeaderWorkerSet", "env LWS_WORKER_INDEX (LeaderWorkerSet)");
    CHECK_SETTING(&c, "node-rank", "2", "env LWS_WORKER_INDEX (LeaderWorkerSet)");
    CHECK_SETTING(&c, "nnodes", "4", "env LWS_GROUP_SIZE (LeaderWorkerSet)");
    CHECK_SETTING(&c, "master-addr", "vllm-0.vllm.default",
                  "env LWS_LEADER_ADDRESS (LeaderWorkerSet)");
    cfg_free(&c);
    struct fake_machine leader = {.hostname = "vllm-0"};
    char *lead[] = {"LWS_LEADER_ADDRESS=vllm-0.vllm.default", "LWS_GROUP_SIZE=4",
                    "LWS_WORKER_INDEX=0", NULL};
    CHECK_EQ_INT(load_pod(&c, lead, &leader, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "0", "env LWS_WORKER_INDEX (LeaderWorkerSet)");
    cfg_free(&c);
}

static void test_conflicts(void)
{
    struct cfg c;
    char *big[] = {"LWS_LEADER_ADDRESS=l.x", "LWS_GROUP_SIZE=2", "LWS_WORKER_INDEX=2", NULL};
    CHECK_ERR(load_pod(&c, big, NULL, NULL), "LWS_WORKER_INDEX=2", "LWS_GROUP_SIZE=2");
    cfg_free(&c);
    struct fake_machine m = {.hostname = "vllm-0-3"};
    char *env[] = {"LWS_LEADER_ADDRESS=vllm-0.vllm.default", "LWS_GROUP_SIZE=4",
                   "LWS_WORKER_INDEX=2", NULL};
    CHECK_ERR(load_pod(&c, env, &m, NULL), "LWS_WORKER_INDEX=2", "vllm-0-3", "worker 3");
    cfg_free(&c);
    struct fake_machine leader = {.hostname = "vllm-0"};
    CHECK_ERR(load_pod(&c, env, &leader, NULL), "LWS_WORKER_INDEX=2", "worker 0");
    cfg_free(&c);
    /* a name of another shape is no evidence either way */
    struct fake_machine other = {.hostname = "node7"};
    CHECK_EQ_INT(load_pod(&c, env, &other, NULL), 0);
    cfg_free(&c);
    char *size[] = {"LWS_LEADER_ADDRESS=l.x", "LWS_GROUP_SIZE=0", "LWS_WORKER_INDEX=0", NULL};
    CHECK_ERR(load_pod(&c, size, NULL, NULL), "LWS_GROUP_SIZE='0' (LeaderWorkerSet)");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_group);
    RUN(test_conflicts);
    return check_result();
}
