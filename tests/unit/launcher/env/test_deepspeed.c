/* tests/unit/launcher/env/test_deepspeed.c — DeepSpeed's worker environment and argv, as golden
 * values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/env/deepspeed.h"
#include "launcher/env/environ.h"

/* A node of 3 slots (ids 1,3,4), node rank 1 of 2, after a node of 2: ranks 2-4. LOCAL_RANK is
 * the index on the node (DeepSpeed's global_rank % 3 would give 2, 0, 1). */
static void test_env_uneven_slots(void)
{
    char *base[] = {"PATH=/bin", "CUDA_VISIBLE_DEVICES=0,1,2,3", "LOCAL_SIZE=9", "RANK=7",
                    "KEEP=1", NULL};
    for (int lr = 0; lr < 3; lr++) {
        struct env_worker w = {.local_rank = lr, .rank = 2 + lr, .group_rank = 1,
                               .role_rank = 2 + lr, .local_world_size = 3, .world_size = 5,
                               .group_world_size = 2, .role_world_size = 5,
                               .master_addr = "worker-0", .master_port = 29500};
        struct ds_worker d = {1, 2, "1,3,4"};
        char **env;
        struct env_notes notes;
        CHECK_EQ_INT(env_deepspeed_build(base, &w, &d, &env, &notes), 0);
        char want[16];
        snprintf(want, sizeof want, "%d", lr);
        CHECK_EQ_STR(env_get(env, "LOCAL_RANK"), want);
        snprintf(want, sizeof want, "%d", 2 + lr);
        CHECK_EQ_STR(env_get(env, "RANK"), want);
        CHECK_EQ_STR(env_get(env, "WORLD_SIZE"), "5");
        CHECK_EQ_STR(env_get(env, "LOCAL_SIZE"), "3");
        CHECK_EQ_STR(env_get(env, "LOCAL_WORLD_SIZE"), "3");
        CHECK_EQ_STR(env_get(env, "CROSS_RANK"), "1");
        CHECK_EQ_STR(env_get(env, "CROSS_SIZE"), "2");
        CHECK_EQ_STR(env_get(env, "GROUP_RANK"), "1");
        CHECK_EQ_STR(env_get(env, "CUDA_VISIBLE_DEVICES"), "1,3,4");
        CHECK_EQ_STR(env_get(env, "MASTER_ADDR"), "worker-0");
        CHECK_EQ_STR(env_get(env, "MASTER_PORT"), "29500");
        CHECK_EQ_STR(env_get(env, "KEEP"), "1");
        int n = 0;
        for (char **e = env; *e; e++)
            n += env_is(*e, "CUDA_VISIBLE_DEVICES") + env_is(*e, "LOCAL_SIZE");
        CHECK_EQ_INT(n, 2);   /* the inherited ones are gone, not doubled */
        CHECK(notes.replaced & 2u);   /* RANK=7 was replaced, and said so */
        free(env);
    }
    /* no slot ids (a node without a hostfile's slots): the inherited variable stays */
    struct env_worker w = {.local_world_size = 1, .world_size = 1, .group_world_size = 1};
    struct ds_worker d = {0, 1, NULL};
    char **env;
    CHECK_EQ_INT(env_deepspeed_build(base, &w, &d, &env, NULL), 0);
    CHECK_EQ_STR(env_get(env, "CUDA_VISIBLE_DEVICES"), "0,1,2,3");
    CHECK_EQ_STR(env_get(env, "LOCAL_SIZE"), "1");
    /* what importing deepspeed in its launcher sets, where unset */
    CHECK_EQ_STR(env_get(env, "PYTORCH_NVML_BASED_CUDA_CHECK"), "1");
    free(env);
    char *own[] = {"PYTORCH_NVML_BASED_CUDA_CHECK=0", NULL};
    CHECK_EQ_INT(env_deepspeed_build(own, &w, &d, &env, NULL), 0);
    CHECK_EQ_STR(env_get(env, "PYTORCH_NVML_BASED_CUDA_CHECK"), "0");
    free(env);
}

static void test_argv_local_rank(void)
{
    char *argv[] = {"python3", "-u", "train.py", "--deepspeed", "--x=1", NULL};
    char buf[32], **out;
    CHECK_EQ_INT(env_deepspeed_argv(argv, 2, 3, buf, sizeof buf, &out), 0);
    const char *want[] = {"python3", "-u", "train.py", "--local_rank=3", "--deepspeed", "--x=1"};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_STR(out[i], want[i]);
    CHECK(out[6] == NULL);
    free(out);
    char *bare[] = {"./run.sh", NULL};
    CHECK_EQ_INT(env_deepspeed_argv(bare, 0, 0, buf, sizeof buf, &out), 0);
    CHECK_EQ_STR(out[1], "--local_rank=0");
    CHECK(out[2] == NULL);
    free(out);
    CHECK_EQ_INT(env_deepspeed_argv(bare, 1, 0, buf, sizeof buf, &out), -EINVAL);
}

int main(void)
{
    RUN(test_env_uneven_slots);
    RUN(test_argv_local_rank);
    return check_result();
}
