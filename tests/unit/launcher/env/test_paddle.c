/* tests/unit/launcher/env/test_paddle.c — paddle's plan from every node's published endpoints,
 * the devices relative to the visible ones, what a worker gets from the node, and env_edit
 * beneath the builders. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/env/environ.h"
#include "launcher/env/paddle.h"
#include "launcher/env/torch.h"

static void test_plan(void)
{
    char *values[] = {"c=10.0.0.1:1\ns=10.0.0.1:2\nt=10.0.0.1:3,10.0.0.1:4\nd=0,1\n",
                      "c=10.0.0.2:1\ns=\nt=10.0.0.2:3\nd=\n",
                      "c=10.0.0.3:1\ns=10.0.0.3:2,10.0.0.3:5\nt=10.0.0.3:3\nd=0\n"};
    struct env_paddle_plan p;
    CHECK_EQ_INT(env_paddle_plan(values, 3, 2, 3, 2, false, &p), 0);
    CHECK_EQ_STR(p.master, "10.0.0.1:1");
    CHECK_EQ_STR(p.trainers, "10.0.0.1:3,10.0.0.1:4,10.0.0.2:3,10.0.0.3:3");
    CHECK_EQ_STR(p.servers, "10.0.0.1:2,10.0.0.3:2,10.0.0.3:5");
    CHECK_EQ_STR(p.world_devices, "0,1,0");
    CHECK_EQ_INT(p.ntrainers, 4);
    CHECK_EQ_INT(p.nservers, 3);
    CHECK_EQ_STR(p.endpoint[0], "10.0.0.3:2");   /* servers first */
    CHECK_EQ_INT(p.id[0], 1);
    CHECK_EQ_INT(p.id[1], 2);
    CHECK_EQ_STR(p.endpoint[2], "10.0.0.3:3");
    CHECK_EQ_INT(p.id[2], 3);                    /* three trainers on the nodes before */
    env_paddle_plan_free(&p);
    CHECK_EQ_INT(env_paddle_plan(values, 3, 1, 1, 0, true, &p), 0);
    CHECK_EQ_STR(p.master, "10.0.0.1:3");        /* --ips: the first trainer */
    CHECK_EQ_INT(p.id[0], 2);
    env_paddle_plan_free(&p);
}

static void test_devices(void)
{
    char out[64], bad[16];
    char *cvd[] = {"CUDA_VISIBLE_DEVICES=4,5,6,7", NULL}, *none[] = {NULL};
    CHECK_EQ_INT(env_paddle_devices(cvd, "7,5", 0, out, sizeof out, bad, sizeof bad), 0);
    CHECK_EQ_STR(out, "3,1");
    CHECK_EQ_INT(env_paddle_devices(cvd, NULL, 0, out, sizeof out, bad, sizeof bad), 0);
    CHECK_EQ_STR(out, "0,1,2,3");
    CHECK_EQ_INT(env_paddle_devices(cvd, "1", 0, out, sizeof out, bad, sizeof bad), -EINVAL);
    CHECK_EQ_STR(bad, "1");
    CHECK_EQ_INT(env_paddle_devices(none, "0,1", 0, out, sizeof out, bad, sizeof bad), 0);
    CHECK_EQ_STR(out, "0,1");
    CHECK_EQ_INT(env_paddle_devices(none, NULL, 0, out, sizeof out, bad, sizeof bad), 0);
    CHECK_EQ_STR(out, "");                       /* none: the CPU, gloo */
    CHECK_EQ_INT(env_paddle_devices(none, NULL, 2, out, sizeof out, bad, sizeof bad), 0);
    CHECK_EQ_STR(out, "0,1");
}

/* The node's derived variables reach a worker where unset; a worker's own device replaces the
 * inherited list and is its device 0. No PADDLE_JOB_ID: Paddle's launcher reads it, never sets it. */
static void test_node_variables(void)
{
    char *base[] = {"NCCL_SOCKET_IFNAME==eth9", "CUDA_VISIBLE_DEVICES=0,1", "PATH=/bin", NULL};
    char *derived[] = {"NCCL_SOCKET_IFNAME==eth0", "GLOO_SOCKET_IFNAME=eth0", "OMP_NUM_THREADS=1",
                       "CUDA_DEVICE_ORDER=PCI_BUS_ID", NULL};
    struct cfg c;
    cfg_init(&c);
    c.nproc_per_node = 2;
    char m[] = "10.0.0.1:6070", t[] = "10.0.0.1:6070,10.0.0.1:6071", s[] = "",
         e0[] = "10.0.0.1:6070", e1[] = "10.0.0.1:6071";
    char *eps[] = {e0, e1};
    int ids[] = {0, 1};
    struct env_paddle_plan p = {.master = m, .trainers = t, .servers = s, .ntrainers = 2,
                                .endpoint = eps, .id = ids, .nproc = 2};
    struct env_paddle_node n = {1, "10.0.0.1", "node0", NULL, "/tmp/gloo", "0,1"};
    struct env_worker ew = {.local_rank = 1, .derived = derived,
                            .cuda_visible_devices = "GPU-5b2c"};
    char **env;
    CHECK_EQ_INT(env_paddle_worker_env(base, &c, &p, &n, 1, &ew, &env), 0);
    CHECK_EQ_STR(env_get(env, "NCCL_SOCKET_IFNAME"), "=eth9");   /* the user's stands */
    CHECK_EQ_STR(env_get(env, "GLOO_SOCKET_IFNAME"), "eth0");
    CHECK_EQ_STR(env_get(env, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    CHECK_EQ_STR(env_get(env, "OMP_NUM_THREADS"), "1");
    CHECK(env_get(env, "PADDLE_JOB_ID") == NULL);
    CHECK_EQ_STR(env_get(env, "CUDA_VISIBLE_DEVICES"), "GPU-5b2c");
    CHECK_EQ_STR(env_get(env, "FLAGS_selected_gpus"), "0");
    CHECK_EQ_STR(env_get(env, "PADDLE_TRAINER_ID"), "1");
    free(env);
    /* without a device of its own: the inherited list, and its index in it */
    ew.cuda_visible_devices = NULL;
    CHECK_EQ_INT(env_paddle_worker_env(base, &c, &p, &n, 1, &ew, &env), 0);
    CHECK_EQ_STR(env_get(env, "CUDA_VISIBLE_DEVICES"), "0,1");
    CHECK_EQ_STR(env_get(env, "FLAGS_selected_gpus"), "1");
    free(env);
    cfg_free(&c);
}

static void test_env_edit(void)
{
    char *base[] = {"A=1", "B=2", "C=3", NULL};
    char *set[] = {"B=20", "D=4", "D=40"};
    const char *drop[] = {"C", NULL};
    char **out;
    CHECK_EQ_INT(env_edit(base, drop, set, 3, &out), 0);
    CHECK_EQ_STR(out[0], "A=1");
    CHECK_EQ_STR(out[1], "B=20");
    CHECK_EQ_STR(out[2], "D=40");                /* the later of two */
    CHECK(out[3] == NULL);
    free(out);
}

int main(void)
{
    RUN(test_plan);
    RUN(test_devices);
    RUN(test_node_variables);
    RUN(test_env_edit);
    return check_result();
}
