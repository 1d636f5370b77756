/* launcher/env/environ.h — a NULL-terminated "NAME=value" array, as execve takes it and main's
 * environ is: the one lookup every layer that reads the environment uses. Pure code. */
#ifndef PODRUN_LAUNCHER_ENV_ENVIRON_H
#define PODRUN_LAUNCHER_ENV_ENVIRON_H

#include <stdbool.h>

/* Whether `entry` ("NAME=value") is the variable `name`. */
bool env_is(const char *entry, const char *name);
/* The value of `name` in env (NULL or an empty array: none). */
const char *env_get(char *const *env, const char *name);

#endif
