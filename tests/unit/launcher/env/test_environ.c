/* tests/unit/launcher/env/test_environ.c — looking a variable up in a "NAME=value" array, and
 * env_set, what every worker-env builder sets. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/env/environ.h"

static void test_lookup(void)
{
    char *env[] = {"PATHX=no", "PATH=/bin", "EMPTY=", "A=b=c", NULL};
    CHECK_EQ_STR(env_get(env, "PATH"), "/bin");  /* not the longer name that starts alike */
    CHECK_EQ_STR(env_get(env, "EMPTY"), "");
    CHECK_EQ_STR(env_get(env, "A"), "b=c");
    CHECK(env_get(env, "PAT") == NULL);
    CHECK(env_get(NULL, "PATH") == NULL);
    CHECK(env_is("PATH=/bin", "PATH") && !env_is("PATH", "PATH"));
}

/* Entries land after what they replace, in the order added; drop removes inherited ones. */
static void test_set_order(void)
{
    char *base[] = {"KEEP=1", "RANK=9", "GONE=x", NULL};
    const char *drop[] = {"GONE", NULL};
    struct env_set s = ENV_SET_INIT;
    env_set_add(&s, "RANK", "%d", 3);
    env_set_add(&s, "NEW", "%s-%d", "a", 1);
    CHECK(env_set_has(&s, "RANK") && !env_set_has(&s, "RAN") && !env_set_has(&s, "KEEP"));
    CHECK_EQ_STR(env_set_get(&s, "NEW"), "a-1");
    char **out = NULL;
    CHECK_EQ_INT(env_set_finish(&s, base, drop, &out), 0);
    CHECK_EQ_INT(s.n, 0);   /* finish empties the set */
    CHECK_EQ_STR(out[0], "KEEP=1");
    CHECK_EQ_STR(out[1], "RANK=3");
    CHECK_EQ_STR(out[2], "NEW=a-1");
    CHECK(out[3] == NULL);
    free(out);
}

/* The same name twice: the worker gets the later value, once. */
static void test_set_twice(void)
{
    struct env_set s = ENV_SET_INIT;
    env_set_add(&s, "OMP_NUM_THREADS", "1");
    env_set_add(&s, "A", "x");
    env_set_add(&s, "OMP_NUM_THREADS", "%d", 8);
    CHECK_EQ_STR(env_set_get(&s, "OMP_NUM_THREADS"), "8");
    char **out = NULL;
    CHECK_EQ_INT(env_set_finish(&s, NULL, NULL, &out), 0);
    CHECK_EQ_STR(out[0], "A=x");
    CHECK_EQ_STR(out[1], "OMP_NUM_THREADS=8");
    CHECK(out[2] == NULL);
    free(out);
}

/* One entry too many is an error that finish returns, not a variable silently missing; later
 * adds change nothing and nothing is built. */
static void test_set_full(void)
{
    struct env_set s = ENV_SET_INIT;
    for (int i = 0; i < ENV_SET_MAX; i++)
        env_set_add(&s, "V", "%d", i);
    CHECK_EQ_INT(s.err, 0);
    env_set_add(&s, "ONE_TOO_MANY", "1");
    CHECK_EQ_INT(s.err, -E2BIG);
    CHECK(!env_set_has(&s, "ONE_TOO_MANY"));
    CHECK_EQ_INT(s.n, ENV_SET_MAX);
    char **out = NULL;
    CHECK_EQ_INT(env_set_finish(&s, NULL, NULL, &out), -E2BIG);
    CHECK(out == NULL);
    CHECK_EQ_INT(s.n, 0);
    CHECK_EQ_INT(s.err, 0);   /* empty again, usable again */
}

/* A value is never cut short, however long (a job's endpoint list, a deep PYTHONPATH). */
static void test_set_long_value(void)
{
    size_t len = 200000;
    char *big = malloc(len + 1);
    CHECK(big != NULL);
    if (!big)
        return;
    memset(big, 'e', len);
    big[len] = '\0';
    struct env_set s = ENV_SET_INIT;
    env_set_add(&s, "PADDLE_TRAINER_ENDPOINTS", "%s", big);
    char **out = NULL;
    CHECK_EQ_INT(env_set_finish(&s, NULL, NULL, &out), 0);
    CHECK_EQ_INT(strlen(env_get(out, "PADDLE_TRAINER_ENDPOINTS")), len);
    free(out);
    free(big);
}

/* A set given up on frees what it holds (ASan: no leak). */
static void test_set_free(void)
{
    struct env_set s = ENV_SET_INIT;
    env_set_add(&s, "A", "1");
    env_set_free(&s);
    CHECK_EQ_INT(s.n, 0);
    CHECK(!env_set_has(&s, "A"));
}

int main(void)
{
    RUN(test_lookup);
    RUN(test_set_order);
    RUN(test_set_twice);
    RUN(test_set_full);
    RUN(test_set_long_value);
    RUN(test_set_free);
    return check_result();
}
