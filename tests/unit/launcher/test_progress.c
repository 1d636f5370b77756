/* tests/unit/launcher/test_progress.c — the trainer's progress file (launcher/watch/progress.c):
 * what counts as a value, what is none, and what is said about a bad file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/watch/progress.h"

static char dir[64];

static void put(const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static long long read_of(const char *name, char *err, size_t cap)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct progress pr;
    CHECK_EQ_INT(progress_init(&pr, p), 0);
    return progress_read(&pr, err, cap);
}

static void test_values(void)
{
    char err[512];
    put("a", "1200\n");
    CHECK(read_of("a", err, sizeof err) == 1200 && !err[0]);
    put("b", "  42  \n\n");
    CHECK(read_of("b", err, sizeof err) == 42);
    put("c", "0");
    CHECK(read_of("c", err, sizeof err) == 0);
    /* none yet, and nothing to say: not there, or empty */
    CHECK(read_of("missing", err, sizeof err) == -1 && !err[0]);
    put("e", "");
    CHECK(read_of("e", err, sizeof err) == -1 && !err[0]);
    /* not a step: said once, with the fix */
    const char *bad[] = {"step 5\n", "-3\n", "1.5\n", "12 13\n", "99999999999999999999\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put("bad", bad[i]);
        CHECK(read_of("bad", err, sizeof err) == -1);
        CHECK(strstr(err, "does not hold a step number") != NULL);
    }
    char big[200];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = 0;
    put("big", big);
    CHECK(read_of("big", err, sizeof err) == -1 && strstr(err, "longer than 64 bytes"));
}

static void test_last_and_said_once(void)
{
    char p[128], err[512], var[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/f", dir);
    struct progress pr;
    CHECK_EQ_INT(progress_init(&pr, p), 0);
    CHECK(progress_last(&pr) == -1);
    put("f", "7\n");
    CHECK(progress_read(&pr, err, sizeof err) == 7 && progress_last(&pr) == 7);
    put("f", "x\n");
    CHECK(progress_read(&pr, err, sizeof err) == -1 && err[0]);
    CHECK(progress_read(&pr, err, sizeof err) == -1 && !err[0]);   /* said once */
    CHECK(progress_last(&pr) == 7);                                /* the last value stays */
    put("f", "9\n");
    CHECK(progress_read(&pr, err, sizeof err) == 9 && progress_last(&pr) == 9);
    CHECK_EQ_INT(progress_env(&pr, var, sizeof var), 1);
    CHECK(strncmp(var, "PODRUN_PROGRESS_FILE=/", 22) == 0);
    /* a relative path is made absolute; no path: no file, no variable */
    CHECK_EQ_INT(progress_init(&pr, "rel/x"), 0);
    CHECK(pr.path[0] == '/' && strstr(pr.path, "/rel/x"));
    CHECK_EQ_INT(progress_init(&pr, NULL), 0);
    CHECK(progress_read(&pr, err, sizeof err) == -1 && !err[0]);
    CHECK_EQ_INT(progress_env(&pr, var, sizeof var), 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/podrun-test-progress-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    RUN(test_values);
    RUN(test_last_and_said_once);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
    return check_result();
}
