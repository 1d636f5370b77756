/* The worker environment and command line: torchrun's variables, knobs only when unset. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "env.h"

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
    CHECK_EQ_INT(env_build(base, &w, &env, &notes), 0);
    CHECK_EQ_STR(get(env, "PATH"), "/bin");
    CHECK_EQ_STR(get(env, "LOCAL_RANK"), "1");
    CHECK_EQ_STR(get(env, "RANK"), "9");
    CHECK_EQ_STR(get(env, "GROUP_RANK"), "2");
    CHECK_EQ_STR(get(env, "ROLE_RANK"), "9");
    CHECK_EQ_STR(get(env, "ROLE_NAME"), "trainer");
    CHECK_EQ_STR(get(env, "LOCAL_WORLD_SIZE"), "4");
    CHECK_EQ_STR(get(env, "WORLD_SIZE"), "16");
    CHECK_EQ_STR(get(env, "GROUP_WORLD_SIZE"), "4");
    CHECK_EQ_STR(get(env, "ROLE_WORLD_SIZE"), "16");
    CHECK_EQ_STR(get(env, "MASTER_ADDR"), "10.1.2.3");
    CHECK_EQ_STR(get(env, "MASTER_PORT"), "29500");
    CHECK_EQ_STR(get(env, "TORCHELASTIC_RESTART_COUNT"), "1");
    CHECK_EQ_STR(get(env, "TORCHELASTIC_MAX_RESTARTS"), "3");
    CHECK_EQ_STR(get(env, "TORCHELASTIC_RUN_ID"), "job");
    CHECK_EQ_STR(get(env, "TORCHELASTIC_USE_AGENT_STORE"), "True");
    CHECK_EQ_STR(get(env, "TORCHELASTIC_ERROR_FILE"), "/tmp/e/1/error.json");
    CHECK_EQ_STR(get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
    CHECK_EQ_STR(get(env, "NCCL_ASYNC_ERROR_HANDLING"), "1");
    CHECK_EQ_STR(get(env, "OMP_NUM_THREADS"), "1");
    CHECK(notes.omp_set);
    CHECK_EQ_INT(notes.replaced, 0);
    int n = 0;
    while (env[n])
        n++;
    CHECK_EQ_INT(n, 2 + 16 + 3);
    free(env);
}

static void test_user_values_kept_and_replacements_noted(void)
{
    char *base[] = {"OMP_NUM_THREADS=8", "NCCL_ASYNC_ERROR_HANDLING=0", "RANK=5", "LOCAL_RANK=0",
                    "TORCH_NCCL_ASYNC_ERROR_HANDLING=3", NULL};
    struct env_worker w = worker(0, 2);
    char **env;
    struct env_notes notes;
    CHECK_EQ_INT(env_build(base, &w, &env, &notes), 0);
    CHECK_EQ_STR(get(env, "OMP_NUM_THREADS"), "8");
    CHECK_EQ_STR(get(env, "NCCL_ASYNC_ERROR_HANDLING"), "0");
    CHECK_EQ_STR(get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
    CHECK_EQ_STR(get(env, "RANK"), "8");
    CHECK_EQ_STR(get(env, "LOCAL_RANK"), "0");
    CHECK(!notes.omp_set);
    CHECK_EQ_INT(notes.replaced, 1u << 1);   /* RANK differed; LOCAL_RANK was the same */
    free(env);
}

static void test_single_worker_no_omp(void)
{
    char *base[] = {NULL};
    struct env_worker w = worker(0, 1);
    w.use_agent_store = false;
    char **env;
    struct env_notes notes;
    CHECK_EQ_INT(env_build(base, &w, &env, &notes), 0);
    CHECK(get(env, "OMP_NUM_THREADS") == NULL);
    CHECK_EQ_STR(get(env, "TORCHELASTIC_USE_AGENT_STORE"), "False");
    CHECK(!notes.omp_set);
    free(env);
}

static void test_heartbeat_and_gloo_ifname(void)
{
    char *base[] = {"PODRUN_HEARTBEAT_FILE=/other/agent", "GLOO_SOCKET_IFNAME=eth9", NULL};
    struct env_worker w = worker(0, 1);
    w.heartbeat_file = "/run/x/0/heartbeat";
    w.socket_ifname = "veth0";
    char **env;
    CHECK_EQ_INT(env_build(base, &w, &env, NULL), 0);
    CHECK_EQ_STR(get(env, "PODRUN_HEARTBEAT_FILE"), "/run/x/0/heartbeat");   /* ours wins */
    CHECK_EQ_STR(get(env, "GLOO_SOCKET_IFNAME"), "eth9");                    /* the user's kept */
    free(env);
    char *none[] = {"PODRUN_HEARTBEAT_FILE=/stale", NULL};
    w.heartbeat_file = NULL;
    CHECK_EQ_INT(env_build(none, &w, &env, NULL), 0);
    CHECK(get(env, "PODRUN_HEARTBEAT_FILE") == NULL);   /* without --hang-timeout: none */
    CHECK_EQ_STR(get(env, "GLOO_SOCKET_IFNAME"), "veth0");
    free(env);
}

static void test_argv_kinds(void)
{
    struct cfg c;
    cfg_init(&c);
    char *prog[] = {"train.py", "--lr", "1", NULL};
    c.program = prog;
    c.program_argc = 3;
    char **argv;
    CHECK_EQ_INT(env_worker_argv(&c, &argv), 0);
    CHECK_EQ_STR(argv[0], "python3");
    CHECK_EQ_STR(argv[1], "-u");
    CHECK_EQ_STR(argv[2], "train.py");
    CHECK_EQ_STR(argv[4], "1");
    CHECK(argv[5] == NULL);
    free(argv);
    c.no_python = true;
    CHECK_EQ_INT(env_worker_argv(&c, &argv), 0);
    CHECK_EQ_STR(argv[0], "train.py");
    free(argv);
    c.no_python = false;
    c.module = true;
    CHECK_EQ_INT(env_worker_argv(&c, &argv), 0);
    CHECK_EQ_STR(argv[2], "-m");
    CHECK_EQ_STR(argv[3], "train.py");
    free(argv);
    c.module = false;
    c.run_path = true;
    CHECK_EQ_INT(env_worker_argv(&c, &argv), 0);
    CHECK_EQ_STR(argv[2], "-c");
    CHECK(strstr(argv[3], "runpy.run_path") != NULL);
    CHECK_EQ_STR(argv[4], "train.py");
    free(argv);
    char *bin[] = {"./a.out", NULL};
    c.run_path = false;
    c.program = bin;
    c.program_argc = 1;
    CHECK_EQ_INT(env_worker_argv(&c, &argv), 0);
    CHECK_EQ_STR(argv[0], "./a.out");
    CHECK(argv[1] == NULL);
    free(argv);
    cfg_free(&c);
}

static void test_prefix(void)
{
    char buf[64];
    CHECK_EQ_INT(env_expand_prefix("[rank ${rank}]:", 12, 3, "r", buf, sizeof buf), 0);
    CHECK_EQ_STR(buf, "[rank 12]:");
    CHECK_EQ_INT(env_expand_prefix("[${role_name}${local_rank}]:${x}", 12, 3, "r", buf,
                                   sizeof buf), 0);
    CHECK_EQ_STR(buf, "[r3]:${x}");
    CHECK(env_expand_prefix("${rank}${rank}${rank}", 123456, 0, "r", buf, 8) < 0);
}

int main(void)
{
    RUN(test_torchrun_vars);
    RUN(test_user_values_kept_and_replacements_noted);
    RUN(test_single_worker_no_omp);
    RUN(test_heartbeat_and_gloo_ifname);
    RUN(test_argv_kinds);
    RUN(test_prefix);
    return check_result();
}
