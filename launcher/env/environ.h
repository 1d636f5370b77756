/* launcher/env/environ.h — a NULL-terminated "NAME=value" array, as execve takes it and main's
 * environ is: the one lookup every layer that reads the environment uses. Pure code. */
#ifndef PODRUN_LAUNCHER_ENV_ENVIRON_H
#define PODRUN_LAUNCHER_ENV_ENVIRON_H

#include <stdbool.h>
#include <stddef.h>

/* Whether `entry` ("NAME=value") is the variable `name`. */
bool env_is(const char *entry, const char *name);
/* The value of `name` in env (NULL or an empty array: none). */
const char *env_get(char *const *env, const char *name);
/* A new environment: base without the variables named in `drop` (names, NULL-terminated; NULL:
 * none) or given in `set`, then set's "NAME=value" entries in their order (a later entry of the
 * same name replaces an earlier one). One allocation: free(*out) frees all. 0 or -ENOMEM. */
int env_edit(char *const *base, const char *const *drop, char *const *set, size_t nset,
             char ***out);

#endif
