/* tests/unit/launcher/env/test_argv.c — what each worker runs: a script under python -u, a
 * module with -m, --run-path through runpy, anything else exec'd directly. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/env/argv.h"

static void test_argv_kinds(void)
{
    struct cfg c;
    cfg_init(&c);
    char *prog[] = {"train.py", "--lr", "1", NULL};
    struct cfg_src flag = {CFG_SRC_FLAG, "--x"};
    char err[256];
    cfg_set_program(&c, prog, 3);
    char **argv;
    CHECK_EQ_INT(env_argv_build(&c, &argv), 0);
    CHECK_EQ_STR(argv[0], "python3");
    CHECK_EQ_STR(argv[1], "-u");
    CHECK_EQ_STR(argv[2], "train.py");
    CHECK_EQ_STR(argv[4], "1");
    CHECK(argv[5] == NULL);
    free(argv);
    cfg_set(&c, CFG_NO_PYTHON, "1", &flag, err, sizeof err);
    CHECK_EQ_INT(env_argv_build(&c, &argv), 0);
    CHECK_EQ_STR(argv[0], "train.py");
    free(argv);
    cfg_set(&c, CFG_NO_PYTHON, "0", &flag, err, sizeof err);
    cfg_set(&c, CFG_MODULE, "1", &flag, err, sizeof err);
    CHECK_EQ_INT(env_argv_build(&c, &argv), 0);
    CHECK_EQ_STR(argv[2], "-m");
    CHECK_EQ_STR(argv[3], "train.py");
    free(argv);
    cfg_set(&c, CFG_MODULE, "0", &flag, err, sizeof err);
    cfg_set(&c, CFG_RUN_PATH, "1", &flag, err, sizeof err);
    CHECK_EQ_INT(env_argv_build(&c, &argv), 0);
    CHECK_EQ_STR(argv[2], "-c");
    CHECK(strstr(argv[3], "runpy.run_path") != NULL);
    CHECK_EQ_STR(argv[4], "train.py");
    free(argv);
    char *bin[] = {"./a.out", NULL};
    cfg_set(&c, CFG_RUN_PATH, "0", &flag, err, sizeof err);
    cfg_set_program(&c, bin, 1);
    CHECK_EQ_INT(env_argv_build(&c, &argv), 0);
    CHECK_EQ_STR(argv[0], "./a.out");
    CHECK(argv[1] == NULL);
    free(argv);
    cfg_free(&c);
}

int main(void)
{
    RUN(test_argv_kinds);
    return check_result();
}
