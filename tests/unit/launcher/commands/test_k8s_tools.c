/* tests/unit/launcher/commands/test_k8s_tools.c — `podrun k8s`'s output: k8s_tools.py's stdout
 * for each command, byte for byte, from the pod lists of tests/fixtures/k8s (argv[1]). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/commands/k8s_tools.h"
#include "tests/unit/launcher/discover/k8s_fixtures.h"

static void test_output(void)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_pytorchjob.json"), 0);
    char out[512];
    /* Running, not Terminating: master-0, worker-0, worker-2 (Running though crash-looping) */
    CHECK_EQ_INT(k8s_tools_fetch_ips(&t, NULL, out, sizeof out),
                 strlen("10.244.1.10,10.244.2.7,10.244.3.9\n"));
    CHECK_EQ_STR(out, "10.244.1.10,10.244.2.7,10.244.3.9\n");
    k8s_tools_fetch_endpoints(&t, "6174", out, sizeof out);
    CHECK_EQ_STR(out, "10.244.1.10:6174,10.244.2.7:6174,10.244.3.9:6174\n");
    k8s_tools_fetch_endpoints(&t, "06174 ", out, sizeof out);   /* the port is text, as given */
    CHECK_EQ_STR(out, "10.244.1.10:06174 ,10.244.2.7:06174 ,10.244.3.9:06174 \n");
    k8s_tools_fetch_id(&t, "10.244.2.7", out, sizeof out);
    CHECK_EQ_STR(out, "1\n");
    k8s_tools_fetch_id(&t, "10.244.1.9", out, sizeof out);   /* Terminating: not counted */
    CHECK_EQ_STR(out, "None\n");
    k8s_tools_fetch_id(&t, NULL, out, sizeof out);
    CHECK_EQ_STR(out, "None\n");
    k8s_tools_count_pods_by_phase(&t, "Running", out, sizeof out);
    CHECK_EQ_STR(out, "3\n");
    k8s_tools_count_pods_by_phase(&t, "Pending", out, sizeof out);
    CHECK_EQ_STR(out, "2\n");
    k8s_tools_count_pods_by_phase(&t, "Terminating", out, sizeof out);
    CHECK_EQ_STR(out, "1\n");
    k8s_tools_count_pods_by_phase(&t, "running", out, sizeof out);
    CHECK_EQ_STR(out, "0\n");
    k8s_tools_fetch_ips(&t, "Terminating", out, sizeof out);
    CHECK_EQ_STR(out, "10.244.1.9\n");
    /* a Pending pod without an IP: k8s_tools.py fails there, so do we */
    CHECK_EQ_INT(k8s_tools_fetch_ips(&t, "Pending", out, sizeof out), -ENODATA);
    k8s_tools_fetch_ips(&t, "Succeeded", out, sizeof out);
    CHECK_EQ_STR(out, "\n");
    CHECK_EQ_INT(k8s_tools_containers_all_ready(&t), 0);
    CHECK_EQ_INT(k8s_tools_fetch_ips(&t, NULL, out, 10), -ENOSPC);

    k8s_tools_wait_running_header("paddle-job=bert", "4", out, sizeof out);
    CHECK_EQ_STR(out, "label selector: paddle-job=bert, desired: 4\n");
    k8s_tools_wait_running_progress(3, out, sizeof out);
    CHECK_EQ_STR(out, "current cnt: 3 sleep for 5 seconds...\n");
    k8s_tools_wait_ready_header("paddle-job=bert", out, sizeof out);
    CHECK_EQ_STR(out, "label selector: paddle-job=bert, wait all containers ready\n");
    k8s_tools_wait_ready_progress(out, sizeof out);
    CHECK_EQ_STR(out, "not all containers ready, sleep for 5 seconds...\n");
    k8s_pods_free(&t);

    k8s_pods_init(&t, 0);
    CHECK_EQ_INT(load_list(&t, "podlist_jobset.json"), 0);
    CHECK_EQ_INT(k8s_tools_containers_all_ready(&t), 1);
    k8s_tools_fetch_ips(&t, NULL, out, sizeof out);
    CHECK_EQ_STR(out, "10.8.0.1,10.8.0.2,10.8.1.1,10.8.1.2,10.8.2.1,10.8.2.2\n");
    k8s_pods_free(&t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_k8s_tools FIXTURE_DIR\n");
        return 2;
    }
    fixtures = argv[1];
    RUN(test_output);
    return check_result();
}
