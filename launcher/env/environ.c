/* launcher/env/environ.c — "NAME=value" arrays (see environ.h). */
#include "launcher/env/environ.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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

void env_set_add(struct env_set *s, const char *name, const char *fmt, ...)
{
    if (s->err)
        return;
    if (s->n >= ENV_SET_MAX) {
        s->err = -E2BIG;
        return;
    }
    va_list ap;
    char *val = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&val, fmt, ap);
    va_end(ap);
    if (n < 0) {
        s->err = -ENOMEM;
        return;
    }
    if (asprintf(&s->v[s->n], "%s=%s", name, val) < 0) {
        s->v[s->n] = NULL;
        s->err = -ENOMEM;
    } else {
        s->v[++s->n] = NULL;
    }
    free(val);
}

const char *env_set_get(const struct env_set *s, const char *name)
{
    for (size_t i = s->n; i-- > 0;)
        if (env_is(s->v[i], name))
            return s->v[i] + strlen(name) + 1;
    return NULL;
}

bool env_set_has(const struct env_set *s, const char *name)
{
    return env_set_get(s, name) != NULL;
}

void env_set_free(struct env_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    s->v[0] = NULL;
    s->n = 0;
    s->err = 0;
}

int env_set_finish(struct env_set *s, char *const *base, const char *const *drop, char ***out)
{
    int r = s->err ? s->err : env_edit(base, drop, s->v, s->n, out);
    env_set_free(s);
    return r;
}
