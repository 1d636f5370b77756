/* launcher/env/paddle.h — what each worker is started with under paddle.distributed.launch
 * (reference/launchers.md §3.2; Paddle's launch/controllers/collective.py and ps.py, and the
 * legacy fleet launcher's device variables).
 *
 * Collective, per trainer i of a node: PADDLE_MASTER, PADDLE_GLOBAL_SIZE, PADDLE_LOCAL_SIZE,
 * PADDLE_GLOBAL_RANK, PADDLE_LOCAL_RANK, PADDLE_NNODES, PADDLE_TRAINER_ENDPOINTS (every trainer,
 * in rank order), PADDLE_CURRENT_ENDPOINT, PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM,
 * PADDLE_RANK_IN_NODE, PADDLE_AUTO_CLUSTER, PADDLE_JOB_ID, PADDLE_LOG_DIR, POD_NAME; with
 * devices FLAGS_selected_gpus (indices relative to the visible devices, all of them joined when
 * the node runs one trainer), PADDLE_LOCAL_DEVICE_IDS and PADDLE_WORLD_DEVICE_IDS; without,
 * PADDLE_DISTRI_BACKEND=gloo.
 * Parameter server, per server and trainer: PADDLE_PSERVERS_IP_PORT_LIST,
 * PADDLE_TRAINER_ENDPOINTS, PADDLE_PORT, PADDLE_ROLE and TRAINING_ROLE (PSERVER or TRAINER),
 * PADDLE_TRAINERS_NUM, POD_IP, PADDLE_NNODES, PADDLE_PSERVER_ID or PADDLE_TRAINER_ID, and gloo's
 * PADDLE_GLOO_RENDEZVOUS=3, PADDLE_GLOO_FS_PATH, PADDLE_GLOO_HTTP_ENDPOINT (the first server's
 * host, --gloo_port), PADDLE_WITH_GLOO.
 * Both: http_proxy and https_proxy move to *_original (Paddle's fetch_envs), and podrun's own
 * PODRUN_HEARTBEAT_FILE, the variables podrun derives from the node (NCCL's and gloo's
 * interface, ...: each only where unset) and a worker's own CUDA_VISIBLE_DEVICES as for
 * torchrun's workers, but OMP_NUM_THREADS, which Paddle's launcher does not set.
 *
 * Pure code. */
#ifndef PODRUN_LAUNCHER_ENV_PADDLE_H
#define PODRUN_LAUNCHER_ENV_PADDLE_H

#include <stdbool.h>
#include <stddef.h>

/* The job once every node said where its workers listen. */
struct env_paddle_job {
    bool ps;                        /* parameter-server mode */
    bool lists;                     /* ps with --servers/--trainers: no PADDLE_NNODES */
    int nnodes;
    const char *master;             /* PADDLE_MASTER (collective) */
    const char *log_dir;            /* absolute */
    const char *pod_name;           /* POD_NAME: this node's name */
    const char *pod_ip;             /* POD_IP: this node's address */
    const char *trainer_endpoints;  /* "ip:port,..." every trainer in trainer-rank order */
    int ntrainers;
    const char *server_endpoints;   /* ps: every server, in server-id order */
    int nservers;
    const char *world_device_ids;   /* every trainer's devices ("0,1,0,1"), NULL: no devices */
    int gloo_port;                  /* ps */
    const char *with_gloo;
    const char *gloo_fs_path;
};

struct env_paddle_worker {
    bool server;                    /* a parameter server */
    int local_rank;                 /* index among this node's workers of its kind */
    int local_size;                 /* this node's workers of its kind */
    int id;                         /* PADDLE_TRAINER_ID, or PADDLE_PSERVER_ID */
    const char *endpoint;           /* "ip:port" it listens on */
    const char *devices;            /* its devices' relative indices ("0" or "0,1"), NULL: none */
    const char *heartbeat_file;     /* PODRUN_HEARTBEAT_FILE, NULL: not set */
    char *const *derived;           /* what podrun derived from the node ("NAME=value", NULL-
                                       terminated; NULL: none), each only where base lacks it */
    const char *cuda_visible_devices; /* its own device (per-rank visibility), replacing the
                                         inherited list; its device is then 0 */
};

/* What every node published for a round (jobenv.c), read back in node-rank order: each value is
 * lines "c=<ip:port>" (its master candidate), "s=<servers>", "t=<trainers>" (comma lists of
 * ip:port) and "d=<each trainer's devices, ':' within one, ',' between>". */
struct env_paddle_plan {
    char *master;             /* node 0's candidate, or with --ips the first trainer */
    char *trainers, *servers; /* every endpoint, in node-rank order ("" for none) */
    char *world_devices;      /* NULL: no node has devices */
    int ntrainers, nservers;
    char **endpoint;          /* per local rank: its own endpoint */
    int *id;                  /* per local rank: PADDLE_TRAINER_ID, or PADDLE_PSERVER_ID */
    int nproc;
};

/* The plan for node node_rank's nproc workers, its first nservers parameter servers, from the
 * values of nodes 0..nnodes-1 (ips: --ips mode). 0 or -ENOMEM. env_paddle_plan_free frees. */
int env_paddle_plan(char *const *values, int nnodes, int node_rank, int nproc, int nservers,
                    bool ips, struct env_paddle_plan *p);
void env_paddle_plan_free(struct env_paddle_plan *p);

/* The variables env_paddle_build may set, for notes and tests. */
extern const char *const env_paddle_vars[];

/* The worker's environment: base with the variables above (replacing inherited ones). One
 * allocation: free(*out) frees all. 0 or -ENOMEM. */
int env_paddle_build(char *const *base, const struct env_paddle_job *j,
                     const struct env_paddle_worker *w, char ***out);

/* What a node knows of itself besides the plan. */
struct env_paddle_node {
    int nnodes;
    const char *ip;              /* POD_IP */
    const char *name;            /* POD_NAME */
    const char *log_dir;         /* absolute */
    const char *gloo_fs_path;
    const char *devices;         /* env_paddle_devices' list for the node, NULL or "": none */
};

/* Local rank lr's environment from the config, the plan and the node (what jobenv.c starts each
 * worker with): server or trainer by lr < --server_num, its devices (a lone trainer gets them
 * all), ids and endpoints from the plan, and ew's heartbeat file, derived variables and own
 * device. */
struct env_worker;
struct cfg;
int env_paddle_worker_env(char *const *base, const struct cfg *c, const struct env_paddle_plan *p,
                          const struct env_paddle_node *n, int lr, const struct env_worker *ew,
                          char ***out);

/* The devices the workers of a node use, as Paddle's context/device.py picks them: `devices`
 * (--devices, NULL: all) as indices into the visible ones (CUDA_VISIBLE_DEVICES in base, else
 * 0..ngpus-1), into out as "i,j,..." (empty: none). -EINVAL with bad set to a listed device
 * that is not visible. */
int env_paddle_devices(char *const *base, const char *devices, int ngpus, char *out, size_t cap,
                       char *bad, size_t badcap);

#endif
