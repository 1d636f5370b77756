/* tests/unit/launcher/frontends/test_paddle_cli.c — paddle.distributed.launch's vocabulary: flags
 * over the PADDLE_* forms, the rendezvous from --master, parameter-server plans. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/frontends/frontend.h"

static char err[512];

static int load(struct cfg *c, const char *args, char *const *envp)
{
    static char buf[1024];
    char *argv[64], *none[] = {NULL};
    int argc = 0;
    argv[argc++] = "paddle";
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    cfg_init(c);
    int r = frontend_load(&fe_paddle, c, argc, argv, envp ? envp : none, err, sizeof err);
    return r ? r : cfg_finalize(c, 2, 0, err, sizeof err);
}

static void test_collective(void)
{
    struct cfg c;
    char *env[] = {"PADDLE_NNODES=2", "PADDLE_MASTER=10.0.0.1:6768", "PADDLE_TRAINER_ID=1",
                   "PADDLE_NPROC_PER_NODE=4", "POD_IP=10.0.0.2", NULL};
    CHECK_EQ_INT(load(&c, "--nproc_per_node 2 --log_dir /var/log/p train.py", env), 0);
    CHECK_EQ_INT(c.nproc_per_node, 2);                 /* the flag over PADDLE_NPROC_PER_NODE */
    CHECK_EQ_INT(c.nnodes_max, 2);
    CHECK_EQ_STR(c.src[CFG_NNODES].name, "PADDLE_NNODES (paddle)");
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_C10D);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.1");
    CHECK_EQ_INT(c.rdzv_port, 6768);
    CHECK_EQ_INT(c.node_rank, 1);                      /* PADDLE_TRAINER_ID: the pod's rank */
    CHECK_EQ_STR(c.local_addr, "10.0.0.2");
    CHECK_EQ_STR(c.paddle_log_dir, "/var/log/p");
    CHECK_EQ_STR(c.rdzv_id, "default");
    CHECK_EQ_INT(c.worker_env, CFG_WORKER_ENV_PADDLE);
    CHECK_EQ_INT(c.max_restarts, 0);                   /* restarts only at --elastic_level 1 */
    cfg_free(&c);
    CHECK_EQ_INT(load(&c, "--elastic_level 1 --max_restart 5 --rank -1 --devices 0,1,2 t.py",
                      NULL), 0);
    CHECK_EQ_INT(c.max_restarts, 5);
    CHECK_EQ_INT(c.nproc_per_node, 3);                 /* one per device */
    CHECK_EQ_INT(c.src[CFG_NODE_RANK].kind, CFG_SRC_DEFAULT);   /* --rank -1: not given */
    cfg_free(&c);
}

static void test_parameter_server(void)
{
    struct cfg c;
    CHECK_EQ_INT(load(&c, "--server_num 2 --trainer_num 3 t.py", NULL), 0);
    CHECK_EQ_INT(c.paddle_run_mode, CFG_PADDLE_PS);
    CHECK_EQ_INT(c.nproc_per_node, 5);
    cfg_free(&c);
    CHECK_EQ_INT(load(&c, "--run_mode ps t.py", NULL), 0);    /* one of each by default */
    CHECK_EQ_INT(c.paddle_server_num, 1);
    CHECK_EQ_INT(c.paddle_trainer_num, 1);
    cfg_free(&c);
    /* a collective PaddleJob's pod is a TRAINER too: without pservers it is no ps job, and its
     * PADDLE_TRAINER_ID is its node rank */
    char *coll[] = {"TRAINING_ROLE=TRAINER", "PADDLE_TRAINER_ID=3", "PADDLE_NNODES=4",
                    "PADDLE_MASTER=10.0.0.1:6768", NULL};
    CHECK_EQ_INT(load(&c, "t.py", coll), 0);
    CHECK_EQ_INT(c.paddle_run_mode, CFG_PADDLE_COLLECTIVE);
    CHECK_EQ_INT(c.node_rank, 3);
    cfg_free(&c);
    /* (pods of a script's job, not of a PaddleJob: no discovery) */
    char *tr[] = {"TRAINING_ROLE=TRAINER", "PADDLE_TRAINER_ID=1",
                  "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:6000", "PODRUN_DISCOVERY=none", NULL};
    CHECK_EQ_INT(load(&c, "t.py", tr), 0);
    CHECK_EQ_INT(c.paddle_run_mode, CFG_PADDLE_PS);
    CHECK_EQ_INT(c.paddle_trainer_num, 1);
    CHECK_EQ_INT(c.src[CFG_NODE_RANK].kind, CFG_SRC_DEFAULT);
    cfg_free(&c);
    /* a pserver pod: its index within its role is no node rank */
    char *env[] = {"TRAINING_ROLE=PSERVER", "PADDLE_TRAINER_ID=1", "PODRUN_DISCOVERY=none", NULL};
    CHECK_EQ_INT(load(&c, "t.py", env), 0);
    CHECK_EQ_INT(c.paddle_server_num, 1);
    CHECK_EQ_INT(c.paddle_trainer_num, 0);
    CHECK_EQ_INT(c.src[CFG_NODE_RANK].kind, CFG_SRC_DEFAULT);
    cfg_free(&c);
    /* lists: this node's entries are those of its --host; the hosts are the nodes */
    CHECK_EQ_INT(load(&c, "--servers 10.0.0.1:6170,10.0.0.2:6170 --trainers 10.0.0.1:6171,"
                          "10.0.0.2:6171,10.0.0.2:6172 --host 10.0.0.2 t.py", NULL), 0);
    CHECK_EQ_INT(c.paddle_server_num, 1);
    CHECK_EQ_INT(c.paddle_trainer_num, 2);
    CHECK_EQ_INT(c.nnodes_max, 2);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.1");             /* the first host, Paddle's 6768 */
    CHECK_EQ_INT(c.rdzv_port, 6768);
    cfg_free(&c);
    /* --ips: the node rank is this host's place */
    CHECK_EQ_INT(load(&c, "--ips 10.0.0.1,10.0.0.2,10.0.0.3 --host 10.0.0.3 t.py", NULL), 0);
    CHECK_EQ_INT(c.node_rank, 2);
    CHECK_EQ_INT(c.nnodes_max, 3);
    cfg_free(&c);
    /* one node with --host: its own store listens at that address, so it is the master's */
    CHECK_EQ_INT(load(&c, "--ips 10.0.0.7 --host 10.0.0.7 t.py", NULL), 0);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.7");
    cfg_free(&c);
    CHECK_EQ_INT(load(&c, "--nproc_per_node 2 --host 10.0.0.7 --master 10.0.0.1:6000 t.py", NULL),
                 0);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.1");            /* a master given stands */
    cfg_free(&c);
}

/* A PaddleJob's pod (paddle-operator, with its ConfigMap): discovery places the pod in the job
 * (trainers first, then the pservers; trainer 0's host holds the store), the front-end gives its
 * workers the pod's role; PADDLE_TRAINING_ROLE is TRAINING_ROLE's other name. */
static void test_paddlejob_pod(void)
{
    struct cfg c;
    char *pserver[] = {"PADDLE_TRAINING_ROLE=PSERVER", "PADDLE_TRAINER_ID=1", "POD_IP=10.0.0.4",
                       "PADDLE_TRAINER_ENDPOINTS=10.0.0.1:6001,10.0.0.2:6001",
                       "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.3:6001,10.0.0.4:6001",
                       "PADDLE_TRAINERS_NUM=2", "PADDLE_PORT=6001", NULL};
    CHECK_EQ_INT(load(&c, "t.py", pserver), 0);
    CHECK_EQ_INT(c.paddle_run_mode, CFG_PADDLE_PS);
    CHECK_EQ_INT(c.paddle_server_num, 1);
    CHECK_EQ_INT(c.paddle_trainer_num, 0);
    CHECK_EQ_INT(c.node_rank, 3);
    CHECK_EQ_INT(c.nnodes_max, 4);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_STATIC);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.1");
    cfg_free(&c);
    char *trainer[] = {"TRAINING_ROLE=TRAINER", "PADDLE_TRAINING_ROLE=TRAINER",
                       "PADDLE_TRAINER_ID=1", "POD_IP=10.0.0.2",
                       "PADDLE_TRAINER_ENDPOINTS=10.0.0.1:6001,10.0.0.2:6001",
                       "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.3:6001,10.0.0.4:6001",
                       "PADDLE_TRAINERS_NUM=2", "PADDLE_PORT=6001", NULL};
    CHECK_EQ_INT(load(&c, "t.py", trainer), 0);
    CHECK_EQ_INT(c.paddle_run_mode, CFG_PADDLE_PS);
    CHECK_EQ_INT(c.paddle_trainer_num, 1);
    CHECK_EQ_INT(c.paddle_server_num, 0);
    CHECK_EQ_INT(c.node_rank, 1);
    CHECK_EQ_INT(c.nnodes_max, 4);
    cfg_free(&c);
    /* the pod's two role variables disagree: discovery says so */
    char *both[] = {"TRAINING_ROLE=TRAINER", "PADDLE_TRAINING_ROLE=PSERVER",
                    "PADDLE_TRAINER_ID=0", NULL};
    CHECK_EQ_INT(load(&c, "t.py", both), -EINVAL);
    CHECK(strstr(err, "disagree") != NULL);
    cfg_free(&c);
}

/* a scheduler that names a static store's host (a PaddleJob's first pod) is a rendezvous too */
static void test_static_store_from_elsewhere(void)
{
    struct cfg c;
    char *env[] = {"PODRUN_MASTER_ADDR=10.0.0.5", "PODRUN_NODE_RANK=1", NULL};
    CHECK_EQ_INT(load(&c, "--nnodes 2 t.py", env), 0);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_STATIC);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.5");
    cfg_free(&c);
}

static void test_bad(void)
{
    static const struct {
        const char *args, *needle;
    } cases[] = {
        {"--master etcd://h:2379 t.py", "etcd master"},
        {"--nnodes 3 t.py", "--nnodes 3 needs --master"},
        {"--run_mode rpc t.py", "use 'collective' or 'ps'"},
        {"--servers 10.0.0.1:1 t.py", "--servers and --trainers go together"},
        {"--servers 10.0.0.1:1 --trainers 10.0.0.1:2 t.py", "give --host IP"},
        {"--auto_tuner_json x t.py", "auto-parallel tuner"},
        {"--nproc_per_node x t.py", "--nproc_per_node 'x': expected a whole number"},
        {"--log_overwrite maybe t.py", "expected a truth value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cfg c;
        err[0] = '\0';
        CHECK_EQ_INT(load(&c, cases[i].args, NULL), -EINVAL);
        if (!strstr(err, cases[i].needle))
            fprintf(stderr, "case %zu: '%s'\n", i, err);
        CHECK(strstr(err, cases[i].needle) != NULL && !strchr(err, '\n'));
        cfg_free(&c);
    }
}

int main(void)
{
    RUN(test_collective);
    RUN(test_parameter_server);
    RUN(test_paddlejob_pod);
    RUN(test_static_store_from_elsewhere);
    RUN(test_bad);
    return check_result();
}
