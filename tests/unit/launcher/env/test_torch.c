/* tests/unit/launcher/env/test_torch.c — torchrun's worker environment: every variable with the
 * worker's own value, what was replaced noted, the knobs and the variables derived from the node
 * added only when unset, a worker's own CUDA_VISIBLE_DEVICES in place of the inherited list. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/env/torch.h"

static const char *get(char **env, const char *name)
{
    size_t n = strlen(name);
    const char *found = NULL;
    int count = 0;
    for (; *env; env++)
        if (!strncmp(*env, name, n) && (*env)[n] == '=') {
            found = *env + n + 1;
            count++;
        }
    return count > 1 ? "(duplicate)" : found;
}

/* Each of want's variables has its value in env. */
static void check_vars(char **env, const char *const want[][2], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = get(env, want[i][0]);
        if (!v || strcmp(v, want[i][1]))
            fprintf(stderr, "%s=%s, want %s\n", want[i][0], v ? v : "(unset)", want[i][1]);
        CHECK(v && !strcmp(v, want[i][1]));
    }
}

static struct env_worker worker(int lr, int nproc)
{
    struct env_worker w = {
        .local_rank = lr, .rank = 8 + lr, .group_rank = 2, .role_rank = 8 + lr,
        .local_world_size = nproc, .world_size = 16, .group_world_size = 4,
        .role_world_size = 16, .role_name = "trainer", .master_addr = "10.1.2.3",
        .master_port = 29500, .restart_count = 1, .max_restarts = 3, .run_id = "job",
        .use_agent_store = true, .error_file = "/tmp/e/1/error.json",
    };
    return w;
}

static void test_torchrun_vars(void)
{
    char *base[] = {"PATH=/bin", "HOME=/root", NULL};
    struct env_worker w = worker(1, 4);
    char **env;
    struct env_notes notes;
    CHECK_EQ_INT(env_torch_build(base, &w, &env, &notes), 0);
    static const char *const want[][2] = {
        {"PATH", "/bin"},
        {"LOCAL_RANK", "1"},
        {"RANK", "9"},
        {"GROUP_RANK", "2"},
        {"ROLE_RANK", "9"},
        {"ROLE_NAME", "trainer"},
        {"LOCAL_WORLD_SIZE", "4"},
        {"WORLD_SIZE", "16"},
        {"GROUP_WORLD_SIZE", "4"},
        {"ROLE_WORLD_SIZE", "16"},
        {"MASTER_ADDR", "10.1.2.3"},
        {"MASTER_PORT", "29500"},
        {"TORCHELASTIC_RESTART_COUNT", "1"},
        {"TORCHELASTIC_MAX_RESTARTS", "3"},
        {"TORCHELASTIC_RUN_ID", "job"},
        {"TORCHELASTIC_USE_AGENT_STORE", "True"},
        {"TORCHELASTIC_ERROR_FILE", "/tmp/e/1/error.json"},
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
        {"NCCL_ASYNC_ERROR_HANDLING", "1"},
    };
    check_vars(env, want, sizeof want / sizeof *want);
    CHECK(get(env, "OMP_NUM_THREADS") == NULL);   /* env/nccl.c's to derive */
    CHECK_EQ_INT(notes.replaced, 0);
    int n = 0;
    while (env[n])
        n++;
    CHECK_EQ_INT(n, 2 + 16 + 2);
    free(env);
}

static void test_user_values_kept_and_replacements_noted(void)
{
    char *base[] = {"OMP_NUM_THREADS=8", "NCCL_ASYNC_ERROR_HANDLING=0", "RANK=5", "LOCAL_RANK=0",
                    "TORCH_NCCL_ASYNC_ERROR_HANDLING=3", NULL};
    struct env_worker w = worker(0, 2);
    char **env;
    struct env_notes notes;
    CHECK_EQ_INT(env_torch_build(base, &w, &env, &notes), 0);
    static const char *const want[][2] = {
        {"OMP_NUM_THREADS", "8"},
        {"NCCL_ASYNC_ERROR_HANDLING", "0"},
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"},
        {"RANK", "8"},
        {"LOCAL_RANK", "0"},
    };
    check_vars(env, want, sizeof want / sizeof *want);
    CHECK_EQ_INT(notes.replaced, 1u << 1);   /* RANK differed; LOCAL_RANK was the same */
    free(env);
}

static void test_single_worker_no_agent_store(void)
{
    char *base[] = {NULL};
    struct env_worker w = worker(0, 1);
    w.use_agent_store = false;
    char **env;
    struct env_notes notes;
    CHECK_EQ_INT(env_torch_build(base, &w, &env, &notes), 0);
    CHECK_EQ_STR(get(env, "TORCHELASTIC_USE_AGENT_STORE"), "False");
    free(env);
}

static void test_heartbeat(void)
{
    char *base[] = {"PODRUN_HEARTBEAT_FILE=/other/agent", NULL};
    struct env_worker w = worker(0, 1);
    w.heartbeat_file = "/run/x/0/heartbeat";
    char **env;
    CHECK_EQ_INT(env_torch_build(base, &w, &env, NULL), 0);
    CHECK_EQ_STR(get(env, "PODRUN_HEARTBEAT_FILE"), "/run/x/0/heartbeat");   /* ours wins */
    free(env);
    char *none[] = {"PODRUN_HEARTBEAT_FILE=/stale", NULL};
    w.heartbeat_file = NULL;
    CHECK_EQ_INT(env_torch_build(none, &w, &env, NULL), 0);
    CHECK(get(env, "PODRUN_HEARTBEAT_FILE") == NULL);   /* without --hang-timeout: none */
    free(env);
}

/* The derived variables go in where the user set nothing; a worker's own device replaces the
 * inherited list it was taken from. */
static void test_derived_and_own_device(void)
{
    char *base[] = {"GLOO_SOCKET_IFNAME=eth9", "CUDA_VISIBLE_DEVICES=2,3", "PATH=/bin", NULL};
    char *derived[] = {"NCCL_SOCKET_IFNAME==eth1", "GLOO_SOCKET_IFNAME=eth1", "OMP_NUM_THREADS=1",
                       "not-a-variable", NULL};
    struct env_worker w = worker(1, 2);
    w.derived = derived;
    w.cuda_visible_devices = "GPU-8932f937";
    char **env;
    CHECK_EQ_INT(env_torch_build(base, &w, &env, NULL), 0);
    static const char *const want[][2] = {
        {"NCCL_SOCKET_IFNAME", "=eth1"},
        {"GLOO_SOCKET_IFNAME", "eth9"},          /* the user's kept */
        {"OMP_NUM_THREADS", "1"},
        {"CUDA_VISIBLE_DEVICES", "GPU-8932f937"},
        {"PATH", "/bin"},
    };
    check_vars(env, want, sizeof want / sizeof *want);
    CHECK(get(env, "not-a-variable") == NULL);
    free(env);
    w.cuda_visible_devices = NULL;               /* all visible: the inherited list stands */
    CHECK_EQ_INT(env_torch_build(base, &w, &env, NULL), 0);
    CHECK_EQ_STR(get(env, "CUDA_VISIBLE_DEVICES"), "2,3");
    free(env);
}

int main(void)
{
    RUN(test_torchrun_vars);
    RUN(test_user_values_kept_and_replacements_noted);
    RUN(test_single_worker_no_agent_store);
    RUN(test_heartbeat);
    RUN(test_derived_and_own_device);
    return check_result();
}
