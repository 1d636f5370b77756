/* launcher/env/argv.h — what each worker runs: PROGRAM and its arguments, under the python
 * interpreter when torchrun would put it there. Pure code. */
#ifndef PODRUN_LAUNCHER_ENV_ARGV_H
#define PODRUN_LAUNCHER_ENV_ARGV_H

#include "launcher/config/config.h"

/* The worker's argv (NULL-terminated, pointing into cfg; free(*out) frees it):
 * --no-python or a non-.py program: PROGRAM ARGS; -m: PYTHON -u -m PROGRAM ARGS;
 * --run-path: PYTHON -u -c <runpy> PROGRAM ARGS; a .py program: PYTHON -u PROGRAM ARGS. */
int env_argv_build(const struct cfg *c, char ***out);

#endif
