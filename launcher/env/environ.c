/* launcher/env/environ.c — "NAME=value" arrays (see environ.h). */
#include "launcher/env/environ.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool env_is(const char *entry, const char *name)
{
    /* called for every inherited variable, for each name, for each worker: most differ at once */
    if (name[0] && entry[0] != name[0])
        return false;
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

/* Whether entry's name is the name of one of set[0..n). */
static bool named_in(const char *entry, char *const *set, size_t n)
{
    size_t l = strcspn(entry, "=");
    for (size_t i = 0; i < n; i++)
        if (set[i] && strcspn(set[i], "=") == l && !strncmp(set[i], entry, l))
            return true;
    return false;
}

int env_edit(char *const *base, const char *const *drop, char *const *set, size_t nset,
             char ***out)
{
    size_t n = 0, bytes = 0;
    for (char *const *e = base; e && *e; e++, n++)
        bytes += strlen(*e) + 1;
    for (size_t i = 0; i < nset; i++)
        if (set[i])
            bytes += strlen(set[i]) + 1;
    char **arr = malloc((n + nset + 1) * sizeof(char *) + bytes);
    if (!arr)
        return -ENOMEM;
    char *p = (char *)(arr + n + nset + 1);
    size_t k = 0;
    for (char *const *e = base; e && *e; e++) {
        bool dropped = named_in(*e, set, nset);
        for (const char *const *d = drop; d && *d && !dropped; d++)
            dropped = env_is(*e, *d);
        if (dropped)
            continue;
        size_t l = strlen(*e) + 1;
        memcpy(p, *e, l);
        arr[k++] = p;
        p += l;
    }
    for (size_t i = 0; i < nset; i++) {
        if (!set[i] || named_in(set[i], set + i + 1, nset - i - 1))
            continue;   /* a later entry of the same name wins */
        size_t l = strlen(set[i]) + 1;
        memcpy(p, set[i], l);
        arr[k++] = p;
        p += l;
    }
    arr[k] = NULL;
    *out = arr;
    return 0;
}
