/* launcher/env/environ.c — "NAME=value" arrays (see environ.h). */
#include "env/environ.h"

#include <string.h>

bool env_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(entry, name, n) && entry[n] == '=';
}

const char *env_get(char *const *env, const char *name)
{
    for (char *const *e = env; e && *e; e++)
        if (env_is(*e, name))
            return *e + strlen(name) + 1;
    return NULL;
}
