/* launcher/env/environ.h — a NULL-terminated "NAME=value" array, as execve takes it and main's
 * environ is: the one lookup every layer that reads the environment uses, and the one way every
 * worker-env builder (torch, deepspeed, accelerate, paddle) says what it sets. Pure code. */
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

/* What a builder sets, in order: "NAME=value" entries added one at a time, then laid over the
 * inherited environment with env_edit. Storage is bounded: the ENV_SET_MAX-plus-first entry is
 * not added and the set remembers -E2BIG; a value is never cut short. The first error sticks
 * (later adds do nothing) and env_set_finish returns it, so a builder adds without checking and
 * checks once. The same name added twice: the later value is the one the worker gets. */
#define ENV_SET_MAX 192   /* a builder's own variables (torchrun's 16, accelerate's FSDP and
                             DeepSpeed ones, paddle's) plus the agent's derived list (< 128) */

struct env_set {
    char *v[ENV_SET_MAX + 1];   /* malloc'd "NAME=value" entries, NULL-terminated */
    size_t n;
    int err;                    /* 0, or the first failure: -E2BIG (full), -ENOMEM */
};

#define ENV_SET_INIT {{0}, 0, 0}

/* Adds NAME=<fmt, ...>. Nothing on a set that has failed already. */
void env_set_add(struct env_set *s, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether s sets name. */
bool env_set_has(const struct env_set *s, const char *name);
/* The value s gives name (the last one added), or NULL. */
const char *env_set_get(const struct env_set *s, const char *name);
/* env_edit(base, drop, s's entries) into *out, or s->err when an add failed; then frees s's
 * entries (s is empty again, error cleared). 0, -E2BIG or -ENOMEM. */
int env_set_finish(struct env_set *s, char *const *base, const char *const *drop, char ***out);
/* Frees s's entries without building anything. */
void env_set_free(struct env_set *s);

#endif
