/* tests/unit/launcher/env/test_deepspeed.c — DeepSpeed's worker environment and argv, world_info
 * against the reference's example, .deepspeed_env files, launcher_args words, and the head's
 * command lines, as golden values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "env/deepspeed.h"
#include "env/environ.h"

static char err[512];

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

/* reference/launchers.md §1.3's example, both ways; decoding takes either alphabet, padded or
 * not, and keeps the object's order as node order. */
static void test_world_info(void)
{
    struct resources r = {0};
    int a[] = {0, 1}, b[] = {0, 2};
    CHECK_EQ_INT(resources_add(&r, "t", "worker-0", 1, a, 2, err, sizeof err), 0);
    CHECK_EQ_INT(resources_add(&r, "t", "worker-1", 2, b, 2, err, sizeof err), 0);
    char *wi = NULL;
    CHECK_EQ_INT(ds_world_info_encode(&r, &wi), 0);
    CHECK_EQ_STR(wi, "eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzAsIDJdfQ==");
    resources_free(&r);
    const char *forms[] = {wi, "eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzAsIDJdfQ"};
    for (int f = 0; f < 2; f++) {
        CHECK_EQ_INT(ds_world_info_decode(forms[f], &r, err, sizeof err), 0);
        CHECK_EQ_INT(r.count, 2);
        CHECK_EQ_STR(r.nodes[0].host, "worker-0");
        CHECK_EQ_STR(r.nodes[1].host, "worker-1");
        CHECK_EQ_INT(r.nodes[1].slots[1], 2);
        resources_free(&r);
    }
    free(wi);
    /* {"z": [1], "a": [0]}: the order given, not sorted; standard alphabet */
    CHECK_EQ_INT(ds_world_info_decode("eyJ6IjogWzFdLCAiYSI6IFswXX0=", &r, err, sizeof err), 0);
    CHECK_EQ_STR(r.nodes[0].host, "z");
    resources_free(&r);
    const char *bad[] = {"", "e", "eyJhIjogMX0", "eyJhIjogW119", "eyJhIjogWy0xXX0", "WzFd",
                         "eyJhIjogWzBdLCAiYSI6IFsxXX0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(ds_world_info_decode(bad[i], &r, err, sizeof err), -EINVAL);
        CHECK(!strncmp(err, "--world_info", 12));
    }
}

struct kv {
    char text[512];
};

static int add_kv(void *arg, const char *k, const char *v)
{
    struct kv *x = arg;
    snprintf(x->text + strlen(x->text), sizeof x->text - strlen(x->text), "[%s=%s]", k, v);
    return 0;
}

static void test_env_file(void)
{
    struct kv x = {""};
    const char text[] = "NCCL_IB_HCA = mlx5_0\r\n# comment\n\n  PYTHONPATH=/a:/b=c  \nEMPTY=\n";
    CHECK_EQ_INT(ds_env_file_parse(text, sizeof text - 1, "~/.deepspeed_env", add_kv, &x, err,
                                   sizeof err), 0);
    CHECK_EQ_STR(x.text, "[NCCL_IB_HCA=mlx5_0][PYTHONPATH=/a:/b=c][EMPTY=]");
    const char bad[] = "A=1\nno equals here\n";
    CHECK_EQ_INT(ds_env_file_parse(bad, sizeof bad - 1, ".deepspeed_env", add_kv, &x, err,
                                   sizeof err), -EINVAL);
    CHECK(strstr(err, ".deepspeed_env line 2") != NULL);
    CHECK(ds_exported_name("NCCL_DEBUG") && ds_exported_name("PYTHONPATH") &&
          ds_exported_name("UCX_TLS") && ds_exported_name("AZUREML_RUN_ID"));
    CHECK(!ds_exported_name("HOME") && !ds_exported_name("CUDA_VISIBLE_DEVICES"));
}

static void test_words_and_rcmd(void)
{
    char **w;
    int n;
    CHECK_EQ_INT(ds_words_split("-R exec  -l 'a b' \"c\\\"d\" e\\ f", &w, &n, err, sizeof err),
                 0);
    CHECK_EQ_INT(n, 6);
    const char *want[] = {"-R", "exec", "-l", "a b", "c\"d", "e f"};
    for (int i = 0; i < n && i < 6; i++)
        CHECK_EQ_STR(w[i], want[i]);
    CHECK(ds_rcmd_is_exec(w, NULL));
    CHECK(!ds_rcmd_is_exec(w + 2, NULL));
    CHECK(ds_rcmd_is_exec(w + 2, "exec"));
    ds_words_free(w);
    CHECK_EQ_INT(ds_words_split("-Rssh", &w, &n, err, sizeof err), 0);
    CHECK(!ds_rcmd_is_exec(w, "exec"));   /* the words say last */
    ds_words_free(w);
    CHECK_EQ_INT(ds_words_split("-l 'open", &w, &n, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "not closed") != NULL);
}

static void test_commands(void)
{
    char *opts[] = {"--no_local_rank", "--python=/usr/bin/python3"};
    char *prog[] = {"train.py", "it's", "50%"};
    char *exports[] = {"NCCL_DEBUG=INFO", "PYTHONPATH=/w:/x y"};
    struct ds_remote r = {
        .podrun = "/usr/bin/podrun", .world_info = "eyJhIjogWzBdfQ==", .master_addr = "a",
        .master_port = 29500, .run_id = "0123456789abcdef", .pid_dir = "/tmp",
        .addr_is_host = true, .name_is_host = true, .options = opts, .noptions = 2,
        .program = prog, .program_argc = 3, .exports = exports, .nexports = 2, .cwd = "/w",
        .venv_script = "/v/act",
    };
    char *cmd = NULL, *stop = NULL;
    CHECK_EQ_INT(ds_remote_command(&r, &cmd), 0);
    CHECK_EQ_STR(cmd, ". '/v/act' || exit 2; export NCCL_DEBUG='INFO'; export PYTHONPATH='/w:/x y'; "
                      "cd '/w' && exec '/usr/bin/podrun' deepspeed "
                      "'--world_info=eyJhIjogWzBdfQ==' --node_rank=%n '--master_addr=a' "
                      "'--master_port=29500' '--rdzv-id=0123456789abcdef' "
                      "'--pid-file=/tmp/podrun-0123456789abcdef-'%n.pid --local-addr=%h "
                      "--node-name=%h '--no_local_rank' '--python=/usr/bin/python3' -- "
                      "'train.py' 'it'\\''s' '50%%'");
    CHECK_EQ_INT(ds_stop_command(&r, &stop), 0);
    CHECK_EQ_STR(stop, "f='/tmp/podrun-0123456789abcdef-'%n.pid; if [ -f \"$f\" ]; then kill "
                       "-TERM \"$(cat \"$f\")\"; rm -f \"$f\"; fi 2>/dev/null; exit 0");
    /* pdsh's substitutions done by hand for the fallback */
    char *one = NULL;
    CHECK_EQ_INT(ds_expand_host(cmd, "10.0.0.3", 2, &one), 0);
    CHECK(strstr(one, "--node_rank=2 ") && strstr(one, "--local-addr=10.0.0.3 ") &&
          strstr(one, "'50%'") && strstr(one, "-'2.pid"));
    free(one);
    char *words[] = {"-R", "exec", NULL}, fan[16], **argv;
    CHECK_EQ_INT(ds_pdsh_argv("h1,h2", 2, words, true, cmd, fan, &argv), 0);
    const char *want[] = {"pdsh", "-S", "-f", "2", "-w", "h1,h2", "-R", "exec", "sh", "-c"};
    for (int i = 0; i < 10; i++)
        CHECK_EQ_STR(argv[i], want[i]);
    CHECK(argv[10] == cmd && argv[11] == NULL);
    free(argv);
    CHECK_EQ_INT(ds_pdsh_argv("h1", 1, NULL, false, cmd, fan, &argv), 0);
    CHECK(argv[6] == cmd && argv[7] == NULL);
    free(argv);
    free(cmd);
    free(stop);
}

int main(void)
{
    RUN(test_env_uneven_slots);
    RUN(test_argv_local_rank);
    RUN(test_world_info);
    RUN(test_env_file);
    RUN(test_words_and_rcmd);
    RUN(test_commands);
    return check_result();
}
