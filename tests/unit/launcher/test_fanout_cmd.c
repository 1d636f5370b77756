/* tests/unit/launcher/test_fanout_cmd.c — the deepspeed head's command lines, as golden values. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/fanout_cmd.h"

/* pdsh's exec module, from its words or PDSH_RCMD_TYPE; the words say last. */
static void test_rcmd(void)
{
    char *w[] = {"-R", "exec", "-l", "a b", NULL};
    CHECK(fanout_cmd_rcmd_is_exec(w, NULL));
    CHECK(!fanout_cmd_rcmd_is_exec(w + 2, NULL));
    CHECK(fanout_cmd_rcmd_is_exec(w + 2, "exec"));
    char *ssh[] = {"-Rssh", NULL};
    CHECK(!fanout_cmd_rcmd_is_exec(ssh, "exec"));
}

static void test_commands(void)
{
    char *opts[] = {"--no_local_rank", "--python=/usr/bin/python3"};
    char *prog[] = {"train.py", "it's", "50%"};
    char *exports[] = {"NCCL_DEBUG=INFO", "PYTHONPATH=/w:/x y"};
    struct fanout_cmd_agent r = {
        .podrun = "/usr/bin/podrun", .world_info = "eyJhIjogWzBdfQ==", .master_addr = "a",
        .master_port = 29500, .run_id = "0123456789abcdef", .pid_dir = "/tmp",
        .addr_is_host = true, .name_is_host = true, .options = opts, .noptions = 2,
        .program = prog, .program_argc = 3, .exports = exports, .nexports = 2, .cwd = "/w",
        .venv_script = "/v/act",
    };
    char *cmd = NULL, *stop = NULL;
    CHECK_EQ_INT(fanout_cmd_start(&r, &cmd), 0);
    CHECK_EQ_STR(cmd, ". '/v/act' || exit 2; export NCCL_DEBUG='INFO'; export PYTHONPATH='/w:/x y'; "
                      "cd '/w' && exec '/usr/bin/podrun' deepspeed "
                      "'--world_info=eyJhIjogWzBdfQ==' --node_rank=%n '--master_addr=a' "
                      "'--master_port=29500' '--rdzv-id=0123456789abcdef' "
                      "'--pid-file=/tmp/podrun-0123456789abcdef-'%n.pid --local-addr=%h "
                      "--node-name=%h '--no_local_rank' '--python=/usr/bin/python3' -- "
                      "'train.py' 'it'\\''s' '50%%'");
    /* a relative script is the head's, under the directory every host cd's into */
    const char *rel[][3] = {{"v.sh", "/w", ". '/w/v.sh' || exit 2; "},
                            {"env/a b", "/w", ". '/w/env/a b' || exit 2; "},
                            {"v.sh", "/", ". '/v.sh' || exit 2; "}};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        struct fanout_cmd_agent q = r;
        char *c2 = NULL;
        q.venv_script = rel[i][0];
        q.cwd = rel[i][1];
        CHECK_EQ_INT(fanout_cmd_start(&q, &c2), 0);
        CHECK(!strncmp(c2, rel[i][2], strlen(rel[i][2])));
        free(c2);
    }
    CHECK_EQ_INT(fanout_cmd_stop(&r, &stop), 0);
    CHECK_EQ_STR(stop, "f='/tmp/podrun-0123456789abcdef-'%n.pid; if [ -f \"$f\" ]; then kill "
                       "-TERM \"$(cat \"$f\")\"; rm -f \"$f\"; fi 2>/dev/null; exit 0");
    /* pdsh's substitutions done by hand for the fallback */
    char *one = NULL;
    CHECK_EQ_INT(fanout_cmd_expand_host(cmd, "10.0.0.3", 2, &one), 0);
    CHECK(strstr(one, "--node_rank=2 ") && strstr(one, "--local-addr=10.0.0.3 ") &&
          strstr(one, "'50%'") && strstr(one, "-'2.pid"));
    free(one);
    char *words[] = {"-R", "exec", NULL}, fan[16], **argv;
    CHECK_EQ_INT(fanout_cmd_pdsh_argv("h1,h2", 2, words, true, cmd, fan, &argv), 0);
    const char *want[] = {"pdsh", "-S", "-f", "2", "-w", "h1,h2", "-R", "exec", "sh", "-c"};
    for (int i = 0; i < 10; i++)
        CHECK_EQ_STR(argv[i], want[i]);
    CHECK(argv[10] == cmd && argv[11] == NULL);
    free(argv);
    CHECK_EQ_INT(fanout_cmd_pdsh_argv("h1", 1, NULL, false, cmd, fan, &argv), 0);
    CHECK(argv[6] == cmd && argv[7] == NULL);
    free(argv);
    free(cmd);
    free(stop);
}

int main(void)
{
    RUN(test_rcmd);
    RUN(test_commands);
    return check_result();
}
