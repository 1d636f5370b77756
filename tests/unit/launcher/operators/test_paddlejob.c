/* tests/unit/launcher/operators/test_paddlejob.c — PaddleJob pods of both operators
 * (reference/k8s.md §1.5, §2): the struct the paddle front-end reads, and discovery. */
#include "tests/unit/launcher/operators/op_test.h"
#include "launcher/operators/paddlejob.h"

/* paddle-operator, PodIP mode, PS job: 2 pservers, 3 trainers; the ConfigMap's keys */
#define CONFIGMAP                                                                             \
    "TRAINER_PORTS_NUM=20", "PADDLE_PORT=36001",                                              \
        "PADDLE_PSERVERS_IP_PORT_LIST=10.0.1.1:36001,10.0.1.2:36001",                         \
        "PADDLE_TRAINER_ENDPOINTS=10.0.2.1:36001,10.0.2.2:36001,10.0.2.3:36001",              \
        "PADDLE_TRAINERS=10.0.2.1,10.0.2.2,10.0.2.3", "PADDLE_TRAINERS_NUM=3",                \
        "PADDLE_HETER_ENDPOINTS="

static void test_parse_for_the_frontend(void)
{
    struct paddlejob_env p;
    char *env[] = {"POD_IP=10.0.1.2", "PADDLE_TRAINER_ID=1", "TRAINING_ROLE=PSERVER",
                   "PADDLE_TRAINING_ROLE=PSERVER", CONFIGMAP, "PADDLE_WITH_GLOO=1", NULL};
    CHECK_EQ_INT(paddlejob_env_parse(&p, env, err, sizeof err), 0);
    CHECK_EQ_INT(p.kind, PADDLEJOB_PADDLE_OPERATOR);
    CHECK_EQ_INT(p.role, PADDLEJOB_PSERVER);
    CHECK_EQ_STR(paddlejob_role_name(p.role), "PSERVER");
    CHECK_EQ_INT(p.id, 1);
    CHECK_EQ_INT(p.trainers_num, 3);
    CHECK_EQ_INT(p.trainers.count, 3);
    CHECK_EQ_STR(p.trainers.items[2], "10.0.2.3:36001");
    CHECK_EQ_STR(p.trainers.hosts[2], "10.0.2.3");
    CHECK_EQ_INT(p.trainers.ports[2], 36001);
    CHECK_EQ_INT(p.pservers.count, 2);
    CHECK_EQ_INT(paddlejob_role_endpoints(&p, PADDLEJOB_PSERVER)->count, 2);
    CHECK_EQ_INT(p.heters.count, 0);
    CHECK_EQ_INT(p.port, 36001);
    CHECK_EQ_INT(p.ports_num, 20);
    CHECK_EQ_STR(p.pod_ip, "10.0.1.2");
    CHECK(p.with_gloo && !p.elastic);
    paddlejob_env_free(&p);
    /* the training-operator's */
    char *to[] = {"PADDLE_JOB_ID=pj", "PADDLE_NNODES=3", "PADDLE_MASTER=pj-worker-0:36543",
                  NULL};
    CHECK_EQ_INT(paddlejob_env_parse(&p, to, err, sizeof err), 0);
    CHECK_EQ_INT(p.kind, PADDLEJOB_TRAINING_OPERATOR);
    CHECK_EQ_INT(p.role, PADDLEJOB_TRAINER);
    CHECK_EQ_INT(p.nnodes, 3);
    CHECK_EQ_STR(p.master, "pj-worker-0:36543");
    CHECK_EQ_STR(p.job_id, "pj");
    paddlejob_env_free(&p);
    char *none[] = {"PATH=/bin", NULL};
    CHECK_EQ_INT(paddlejob_env_parse(&p, none, err, sizeof err), 0);
    CHECK_EQ_INT(p.kind, PADDLEJOB_NONE);
    paddlejob_env_free(&p);
}

static void test_paddle_operator(void)
{
    struct cfg c;
    char *trainer[] = {"POD_IP=10.0.2.2", "PADDLE_TRAINER_ID=1", "TRAINING_ROLE=TRAINER",
                       CONFIGMAP, NULL};
    CHECK_EQ_INT(load_pod(&c, trainer, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "PaddleJob (paddle-operator)",
                  "env PADDLE_TRAINER_ID (paddle-operator)");
    CHECK_SETTING(&c, "node-rank", "1", "env PADDLE_TRAINER_ID (paddle-operator)");
    CHECK_SETTING(&c, "nnodes", "5",
                  "env PADDLE_TRAINERS_NUM and the pserver/heter endpoints (paddle-operator)");
    CHECK_SETTING(&c, "master-addr", "10.0.2.1", "env PADDLE_TRAINER_ENDPOINTS (paddle-operator)");
    cfg_free(&c);
    /* parameter servers come after the trainers */
    char *ps[] = {"POD_IP=10.0.1.2", "PADDLE_TRAINER_ID=1", "TRAINING_ROLE=PSERVER", CONFIGMAP,
                  NULL};
    CHECK_EQ_INT(load_pod(&c, ps, NULL, NULL), 0);
    CHECK_SETTING(&c, "node-rank", "4",
                  "env PADDLE_TRAINER_ID, TRAINING_ROLE=PSERVER (paddle-operator)");
    cfg_free(&c);
    /* collective, Service mode: POD_IP is the pod's name */
    char *svc[] = {"POD_IP=res-worker-0", "PADDLE_TRAINER_ID=0", "TRAINING_ROLE=TRAINER",
                   "PADDLE_TRAINER_ENDPOINTS=res-worker-0:36000,res-worker-1:36000",
                   "PADDLE_TRAINERS_NUM=2", NULL};
    CHECK_EQ_INT(load_pod(&c, svc, NULL, NULL), 0);
    CHECK_SETTING(&c, "nnodes", "2", "env PADDLE_TRAINERS_NUM (paddle-operator)");
    CHECK_SETTING(&c, "master-addr", "res-worker-0",
                  "env PADDLE_TRAINER_ENDPOINTS (paddle-operator)");
    cfg_free(&c);
    /* elastic: a count and an id, no host: the store must be named */
    char *el[] = {"POD_IP=10.0.0.9", "PADDLE_TRAINER_ID=1", "TRAINING_ROLE=TRAINER",
                  "PADDLE_ELASTIC_JOB_ID=ns-job", "PADDLE_ELASTIC_NP=2",
                  "PADDLE_ELASTIC_TIMEOUT=60", NULL};
    CHECK_ERR(load_pod(&c, el, NULL, NULL), "gives 2 nodes", "PADDLE_ELASTIC_NP",
              "hosts the job store");
    cfg_free(&c);
    CHECK_EQ_INT(load_pod(&c, el, NULL, FLAGS("--master-addr", "job-leader")), 0);
    CHECK_SETTING(&c, "rdzv-id", "ns-job", "env PADDLE_ELASTIC_JOB_ID (paddle-operator)");
    CHECK_SETTING(&c, "node-rank", "1", "env PADDLE_TRAINER_ID (paddle-operator)");
    cfg_free(&c);
    /* no lists (a script's pods, seed 003's): a trainer's index is its node rank, a pserver's
     * is not (pserver 0 and trainer 0 would both claim 0); the rendezvous places it */
    char *tr0[] = {"PADDLE_TRAINER_ID=0", "TRAINING_ROLE=TRAINER", NULL};
    CHECK_EQ_INT(load_pod(&c, tr0, NULL, FLAGS("--nnodes", "4", "--rdzv-endpoint", "h:1")), 0);
    CHECK_SETTING(&c, "node-rank", "0", "env PADDLE_TRAINER_ID (paddle-operator)");
    cfg_free(&c);
    char *ps0[] = {"PADDLE_TRAINER_ID=1", "TRAINING_ROLE=PSERVER", NULL};
    CHECK_EQ_INT(load_pod(&c, ps0, NULL, FLAGS("--nnodes", "4", "--rdzv-endpoint", "h:1")), 0);
    CHECK_SETTING(&c, "node-rank", "0", "default");
    cfg_free(&c);
}

static void test_paddle_operator_conflicts(void)
{
    struct cfg c;
    static char *const cases[][16] = {
        {"POD_IP=10.0.2.9", "PADDLE_TRAINER_ID=1", "TRAINING_ROLE=TRAINER", CONFIGMAP, NULL},
        {"PADDLE_TRAINER_ID=3", "TRAINING_ROLE=TRAINER", CONFIGMAP, NULL},
        {"PADDLE_TRAINER_ID=0", "TRAINING_ROLE=TRAINER", "PADDLE_TRAINING_ROLE=PSERVER", NULL},
        {"PADDLE_TRAINER_ID=0", "TRAINING_ROLE=WORKERS", NULL},
        {"PADDLE_TRAINER_ID=0", "TRAINING_ROLE=TRAINER", "PADDLE_TRAINERS_NUM=2",
         "PADDLE_TRAINER_ENDPOINTS=a:1,b:2,c:3", NULL},
        {"PADDLE_TRAINER_ID=0", "TRAINING_ROLE=TRAINER", "PADDLE_TRAINER_ENDPOINTS=a:1,,c:3",
         NULL},
        {"PADDLE_TRAINER_ID=x", "TRAINING_ROLE=TRAINER", NULL},
    };
    static const char *const needles[][2] = {
        {"POD_IP=10.0.2.9", "10.0.2.2:36001"},
        {"PADDLE_TRAINER_ID=3", "3 entries of PADDLE_TRAINER_ENDPOINTS"},
        {"TRAINING_ROLE=TRAINER", "PADDLE_TRAINING_ROLE=PSERVER"},
        {"TRAINING_ROLE='WORKERS'", "TRAINER, PSERVER or HETER"},
        {"PADDLE_TRAINERS_NUM=2", "3 entries"},
        {"PADDLE_TRAINER_ENDPOINTS", "entry 1 ''"},
        {"PADDLE_TRAINER_ID='x'", "paddle-operator"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK_ERR(load_pod(&c, (char **)cases[i], NULL, NULL), needles[i][0], needles[i][1]);
        cfg_free(&c);
    }
}

static void test_training_operator(void)
{
    struct cfg c;
    /* the store's pod: PADDLE_MASTER is its own IP */
    char *host[] = {"PYTHONUNBUFFERED=0", "PADDLE_JOB_ID=pj", "PADDLE_NNODES=3",
                    "POD_IP_DUMMY=10.1.0.4", "PADDLE_MASTER=10.1.0.4:36543", NULL};
    CHECK_EQ_INT(load_pod(&c, host, NULL, NULL), 0);
    CHECK_SETTING(&c, "discovered", "PaddleJob (training-operator)",
                  "env PADDLE_MASTER (PaddleJob)");
    CHECK_SETTING(&c, "nnodes", "3", "env PADDLE_NNODES (PaddleJob)");
    CHECK_SETTING(&c, "rdzv-backend", "c10d", "env PADDLE_MASTER (PaddleJob)");
    CHECK_SETTING(&c, "rdzv-endpoint", "10.1.0.4:36543", "env PADDLE_MASTER (PaddleJob)");
    CHECK_SETTING(&c, "rdzv-id", "pj", "env PADDLE_JOB_ID (PaddleJob)");
    CHECK_SETTING(&c, "rdzv-conf is_host", "true",
                  "env PADDLE_MASTER = POD_IP_DUMMY (PaddleJob)");
    /* no rank: the rendezvous orders the pods by name, index order */
    CHECK_SETTING(&c, "node-rank", "0", "default");
    cfg_free(&c);
    char *other[] = {"PADDLE_JOB_ID=pj", "PADDLE_NNODES=3", "PADDLE_MASTER=pj-worker-0:36543",
                     NULL};
    CHECK_EQ_INT(load_pod(&c, other, NULL, NULL), 0);
    CHECK_SETTING(&c, "rdzv-conf is_host", "(from the endpoint)", "default");
    cfg_free(&c);
    char *bad[] = {"PADDLE_NNODES=3", "PADDLE_MASTER=pj-worker-0", NULL};
    CHECK_ERR(load_pod(&c, bad, NULL, NULL), "PADDLE_MASTER='pj-worker-0'", "HOST:PORT");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_parse_for_the_frontend);
    RUN(test_paddle_operator);
    RUN(test_paddle_operator_conflicts);
    RUN(test_training_operator);
    return check_result();
}
