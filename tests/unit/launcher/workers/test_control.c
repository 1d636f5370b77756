/* tests/unit/launcher/workers/test_control.c — what a worker asks of the job
 * (launcher/workers/control.c): its lines into its failure record, and what is not a request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/workers/control.h"

static char path[64];

static void put(const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static rdzv_failure_t rec(void)
{
    rdzv_failure_t f;
    rdzv_failure_init(&f);
    snprintf(f.reason, sizeof f.reason, "exit code 1");
    return f;
}

static void test_requests(void)
{
    char bad[64];
    rdzv_failure_t f = rec();
    CHECK_EQ_INT(control_apply(path, &f, bad, sizeof bad), 0); /* no file: nothing asked */
    CHECK_EQ_INT(f.fatal, 0);
    CHECK_EQ_STR(f.reason, "exit code 1");

    put("stop dataset missing: /data/x\r\n");
    f = rec();
    CHECK_EQ_INT(control_apply(path, &f, bad, sizeof bad), CONTROL_STOP);
    CHECK_EQ_INT(f.fatal, RDZV_FATAL_ASKED);
    CHECK_EQ_INT(f.exclude, 0);
    CHECK_EQ_STR(f.reason, "exit code 1; asked not to retry: dataset missing: /data/x");
    CHECK_EQ_STR(bad, "");

    /* both, each once; a code not to retry stays what made it so; junk is named */
    put("  exclude   GPU 3 ECC\nreboot now\nexclude again\nstop\nstopper x\n");
    f = rec();
    f.fatal = RDZV_FATAL_CODE;
    CHECK_EQ_INT(control_apply(path, &f, bad, sizeof bad), CONTROL_STOP | CONTROL_EXCLUDE);
    CHECK_EQ_INT(f.fatal, RDZV_FATAL_CODE);
    CHECK_EQ_INT(f.exclude, 1);
    CHECK_EQ_STR(f.reason, "exit code 1; asked to leave its node out: GPU 3 ECC; asked not to "
                           "retry");
    CHECK_EQ_STR(bad, "reboot now");

    /* an empty file asks nothing; a long one is read as far as CONTROL_MAX */
    put("");
    f = rec();
    CHECK_EQ_INT(control_apply(path, &f, bad, sizeof bad), 0);
    char *big = malloc(CONTROL_MAX + 100);
    memset(big, 'x', CONTROL_MAX + 99);
    big[CONTROL_MAX + 99] = '\0';
    memcpy(big + CONTROL_MAX + 10, "\nstop\n", 6);
    put(big);
    free(big);
    f = rec();
    CHECK_EQ_INT(control_apply(path, &f, bad, sizeof bad), 0);
    CHECK_EQ_INT((int)strlen(f.reason) < RDZV_REASON_MAX, 1);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/podrun-test-control.%d", (int)getpid());
    unlink(path);
    test_requests();
    unlink(path);
    return check_result();
}
