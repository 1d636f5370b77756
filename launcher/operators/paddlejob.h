/* launcher/operators/paddlejob.h — what a PaddleJob tells its pods, for the paddle front-end and
 * worker environment (frontends/paddle_cli.c, env/paddle.c) as much as for discovery.
 *
 * Two operators make PaddleJobs (reference/k8s.md §1.5, §2):
 *  - PaddleFlow's paddle-operator (batch.paddlepaddle.org/v1): every pod gets POD_IP, its role
 *    (TRAINING_ROLE and PADDLE_TRAINING_ROLE: PSERVER, TRAINER or HETER) and PADDLE_TRAINER_ID,
 *    its index among the pods of that role; from the job's ConfigMap <job> (created once every
 *    pod has an IP): PADDLE_TRAINER_ENDPOINTS, PADDLE_PSERVERS_IP_PORT_LIST and
 *    PADDLE_HETER_ENDPOINTS (host:port lists in index order: pod IP and a random port, or
 *    <pod>:36000 with intranet: Service, where POD_IP is the pod's name), PADDLE_TRAINERS
 *    (trainer hosts), PADDLE_TRAINERS_NUM, PADDLE_PORT, TRAINER_PORTS_NUM, and with gloo
 *    PADDLE_WITH_GLOO, PADDLE_GLOO_RENDEZVOUS, PADDLE_GLOO_HTTP_ENDPOINT. An elastic job has no
 *    ConfigMap but PADDLE_ELASTIC_JOB_ID, PADDLE_ELASTIC_NP and PADDLE_ELASTIC_TIMEOUT.
 *  - Kubeflow's training-operator (kubeflow.org/v1): PADDLE_JOB_ID (the job's name),
 *    PADDLE_NNODES (all replicas) and PADDLE_MASTER: "<job>-worker-0:<port>" (PS mode:
 *    "<job>-master-0:<port>"), except on that pod itself, where it is its own IP
 *    ($(POD_IP_DUMMY)); PS mode adds PADDLE_SERVER_NUM=1 on masters, PADDLE_TRAINER_NUM=1 on
 *    workers.
 * Pure code. */
#ifndef PODRUN_LAUNCHER_OPERATORS_PADDLEJOB_H
#define PODRUN_LAUNCHER_OPERATORS_PADDLEJOB_H

#include <stdbool.h>
#include <stddef.h>

enum paddlejob_kind {
    PADDLEJOB_NONE,             /* neither operator's variables */
    PADDLEJOB_PADDLE_OPERATOR,  /* PaddleFlow's paddle-operator */
    PADDLEJOB_TRAINING_OPERATOR /* Kubeflow's training-operator */
};

enum paddlejob_role { PADDLEJOB_TRAINER, PADDLEJOB_PSERVER, PADDLEJOB_HETER };

/* A "host:port,host:port" list, in the order given (index order). */
struct paddlejob_endpoints {
    size_t count;
    char **items;               /* "10.0.0.5:36000" as given */
    char **hosts;               /* "10.0.0.5" */
    int *ports;
};

struct paddlejob_env {
    enum paddlejob_kind kind;
    enum paddlejob_role role;   /* TRAINING_ROLE / PADDLE_TRAINING_ROLE; training-operator: PSERVER
                                   with PADDLE_SERVER_NUM, else TRAINER */
    long id;                    /* PADDLE_TRAINER_ID, this pod's index in its role; -1: unknown */
    long trainers_num;          /* PADDLE_TRAINERS_NUM (else the trainer endpoints); -1 */
    struct paddlejob_endpoints trainers;  /* PADDLE_TRAINER_ENDPOINTS */
    struct paddlejob_endpoints pservers;  /* PADDLE_PSERVERS_IP_PORT_LIST */
    struct paddlejob_endpoints heters;    /* PADDLE_HETER_ENDPOINTS */
    long port;                  /* PADDLE_PORT: the first of this pod's ports; -1 */
    long ports_num;             /* TRAINER_PORTS_NUM: how many from port on are this pod's; -1 */
    char *pod_ip;               /* POD_IP (paddle-operator), POD_IP_DUMMY (training-operator) */
    char *master;               /* PADDLE_MASTER host:port (training-operator) */
    long nnodes;                /* PADDLE_NNODES, PADDLE_ELASTIC_NP; -1 */
    char *job_id;               /* PADDLE_JOB_ID, PADDLE_ELASTIC_JOB_ID; NULL */
    bool elastic;               /* paddle-operator's elastic mode (no ConfigMap) */
    bool with_gloo;             /* PADDLE_WITH_GLOO is set and not 0 */
};

/* Reads the variables above from envp (NULL-terminated NAME=value; empty means unset) into p,
 * which the caller frees with paddlejob_env_free (also after an error). kind is NONE when neither
 * operator's variables are there (paddle-operator: PADDLE_TRAINER_ID with TRAINING_ROLE or
 * PADDLE_TRAINING_ROLE; training-operator: PADDLE_MASTER with PADDLE_NNODES). Checks what the
 * variables say against each other: this pod's id within its role's list, PADDLE_TRAINERS_NUM
 * against the trainer endpoints, POD_IP against this pod's own entry.
 * Returns 0, or -EINVAL (-ENOMEM) with one line in err naming the variables. */
int paddlejob_env_parse(struct paddlejob_env *p, char *const *envp, char *err, size_t errlen);

void paddlejob_env_free(struct paddlejob_env *p);

/* The endpoints of a role (trainers, pservers, heters). */
const struct paddlejob_endpoints *paddlejob_role_endpoints(const struct paddlejob_env *p,
                                                           enum paddlejob_role role);

/* "TRAINER", "PSERVER", "HETER". */
const char *paddlejob_role_name(enum paddlejob_role role);

#endif
