/* tests/fakes/fake_conf.h — the line reader the fake native libraries share.
 *
 * A fake library answers from a small text file named by an environment variable, re-read when
 * the library is (re)initialised, so one test process can vary the answers between calls. A
 * line is a keyword and space-separated words; "key=value" words are looked up by key. */
#ifndef PODRUN_TESTS_FAKE_CONF_H
#define PODRUN_TESTS_FAKE_CONF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_LINE_MAX 1024

/* The value of "key=" among the words of a line (copied into out), or NULL. */
static inline const char *fake_word(const char *line, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p != line && p[-1] != ' ') || p[kl] != '=')
            continue;
        const char *v = p + kl + 1;
        size_t n = strcspn(v, " \n");
        if (n >= len)
            n = len - 1;
        memcpy(out, v, n);
        out[n] = '\0';
        return out;
    }
    return NULL;
}

static inline long fake_word_long(const char *line, const char *key, long dflt)
{
    char v[64];
    return fake_word(line, key, v, sizeof v) ? strtol(v, NULL, 0) : dflt;
}

/* Opens the file named by $var; NULL when unset or unreadable. */
static inline FILE *fake_conf_open(const char *var)
{
    const char *path = getenv(var);
    return path && *path ? fopen(path, "re") : NULL;
}

#endif
