/* tests/unit/launcher/env/test_environ.c — looking a variable up in a "NAME=value" array. */
#include <stddef.h>

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

int main(void)
{
    RUN(test_lookup);
    return check_result();
}
