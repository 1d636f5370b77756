/* launcher/env/argv.c — the worker's command line (see argv.h). */
#include "launcher/env/argv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* --run-path: the script runs through runpy inside the interpreter, as torchrun does in-process;
 * argv[0] becomes the script path as it would for `python script.py`. */
static char runpy_code[] = "import runpy, sys; sys.argv = sys.argv[1:]; "
                           "runpy.run_path(sys.argv[0], run_name='__main__')";
static char dash_u[] = "-u", dash_m[] = "-m", dash_c[] = "-c";

int env_argv_build(const struct cfg *c, char ***out)
{
    if (!c->program || c->program_argc < 1)
        return -EINVAL;
    char **argv = malloc(((size_t)c->program_argc + 5) * sizeof(char *));
    if (!argv)
        return -ENOMEM;
    int n = 0;
    bool python = !c->no_python && (c->module || c->run_path || ends_with(c->program[0], ".py"));
    if (python) {
        argv[n++] = c->python;
        argv[n++] = dash_u;
        if (c->module) {
            argv[n++] = dash_m;
        } else if (c->run_path) {
            argv[n++] = dash_c;
            argv[n++] = runpy_code;
        }
    }
    for (int i = 0; i < c->program_argc; i++)
        argv[n++] = c->program[i];
    argv[n] = NULL;
    *out = argv;
    return 0;
}
