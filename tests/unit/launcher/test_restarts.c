/* tests/unit/launcher/test_restarts.c — one record per restart (launcher/output/restarts.c): the
 * phases in order, a record only for a restart, the line's fields, the workers' variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "launcher/output/restarts.h"

static void test_record(void)
{
    char dir[64] = "/tmp/podrun-test-restarts-XXXXXX", attempt[128], a[PATH_MAX + 32],
         f[PATH_MAX + 32];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(attempt, sizeof attempt, "%s/attempt_1", dir);
    struct restarts r;
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(restarts_env(&r, 0, a, f, sizeof a), 0);   /* the first attempt: none */
    restarts_assigned(&r);   /* round 0's assignment is no part of a restart */
    rdzv_failure_t fail;
    rdzv_failure_init(&fail);
    snprintf(fail.node_name, sizeof fail.node_name, "node-1");
    fail.rank = 3;
    fail.local_rank = 1;
    fail.node_rank = 1;
    fail.exit_code = 1;
    fail.time = 1.0;   /* long ago by its clock: detect is large, never negative */
    rdzv_decision_t d = {.action = RDZV_RESTART, .n = 1, .failures = &fail,
                         .restart_counted = 1, .restart_count = 1};
    snprintf(d.reason, sizeof d.reason, "rank 3 on node-1 exit code 1");
    restarts_stopping(&r);
    restarts_decided(&r, &d);
    usleep(2000);
    restarts_gone(&r);
    restarts_rejoining(&r);
    usleep(2000);
    restarts_assigned(&r);
    CHECK_EQ_INT(restarts_spawning(&r, attempt, 1, 1, "node-0"), 1);
    CHECK(r.last[RESTARTS_DETECT] > 1000);
    CHECK(r.last[RESTARTS_STOP] >= 0.002 && r.last[RESTARTS_RENDEZVOUS] >= 0.002);
    CHECK(r.last[RESTARTS_SPAWN] < 1);
    CHECK_EQ_INT(restarts_spawning(&r, attempt, 1, 1, "node-0"), 0);   /* once per restart */
    char want[128];
    snprintf(want, sizeof want, "%s/restarts.jsonl", dir);
    CHECK_EQ_STR(r.path, want);
    FILE *fp = fopen(want, "r");
    char line[2048] = "";
    CHECK(fp && fgets(line, sizeof line, fp));
    if (fp)
        fclose(fp);
    CHECK(strstr(line, "\"node\":\"node-0\",\"attempt\":1,\"round\":1,\"restart\":1,"
                       "\"counted\":true,\"why\":\"rank 3 on node-1 exit code 1\"") != NULL);
    CHECK(strstr(line, "\"failure\":{\"node\":\"node-1\"") != NULL);
    CHECK(strstr(line, "\"rank\":3,\"local_rank\":1,\"exit_code\":1,") != NULL);
    CHECK(strstr(line, "\"seconds\":{\"detect\":") != NULL && strstr(line, "\"total\":"));
    CHECK(line[strlen(line) - 1] == '\n');
    CHECK_EQ_INT(restarts_env(&r, 1, a, f, sizeof a), 2);
    CHECK_EQ_STR(a, "PODRUN_ATTEMPT=1");
    CHECK(strstr(f, "PODRUN_RESTARTS_FILE=/") == f);
    /* an exit decision makes no record */
    d.action = RDZV_EXIT;
    restarts_stopping(&r);
    restarts_decided(&r, &d);
    CHECK_EQ_INT(restarts_spawning(&r, attempt, 2, 2, "node-0"), 0);
    restarts_end(&r, false);
    CHECK(access(want, F_OK) != 0);
    CHECK_EQ_INT(rmdir(dir), 0);
}

int main(void)
{
    RUN(test_record);
    return check_result();
}
