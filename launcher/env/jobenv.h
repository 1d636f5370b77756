/* launcher/env/jobenv.h — each worker's environment under the launcher the front-end stands for
 * (--worker-env torch|accelerate|paddle), and what that launcher needs to know about the whole
 * job before any worker starts.
 *
 * torchrun's and accelerate's environments follow from the rendezvous' assignment alone. Paddle's
 * names every trainer's endpoint: after each rendezvous round, every agent picks its workers'
 * ports (free ones on its address, or those --ips/--servers/--trainers fix), publishes them in the
 * job store under the round's own key (paddle/r<round>/<node rank>: among the workers' keys, which
 * the coordinator clears when the next round closes), waits for every node's and reads them in
 * node-rank order. Only then do its workers start.
 *
 * In parameter-server mode a node's first --server_num workers are parameter servers: services
 * the job does not wait for. The job has finished when every other worker exited 0; the servers
 * are then stopped, and that stop is no failure. A node with servers only joins the rendezvous as
 * a service node (rdzv_node_desc_t.service), whose "done" the coordinator does not wait for. */
#ifndef PODRUN_LAUNCHER_ENV_JOBENV_H
#define PODRUN_LAUNCHER_ENV_JOBENV_H

#include <stdbool.h>
#include <string.h>
#include <uv.h>

#include "launcher/config/config.h"
#include "launcher/env/paddle.h"
#include "launcher/env/torch.h"
#include "rdzv/store/aclient.h"
#include "rdzv/rendezvous.h"

#define JOBENV_IP_MAX 64

struct jobenv;
/* The job's endpoints are known (status 0), or could not be agreed (why says so). */
typedef void (*jobenv_ready_cb)(struct jobenv *je, int status, const char *why);

struct jobenv {
    uv_loop_t *loop;
    const struct cfg *cfg;
    char **envp;
    const char *node_name;
    char ip[JOBENV_IP_MAX];       /* this node's address in endpoints (paddle) */
    char cwd[4096];
    int physical_cores;
    int nservers;                 /* this node's parameter servers: local ranks 0..nservers-1 */
    char *log_dir;                /* paddle's --log_dir, absolute; NULL: none */
    char ds_log_stamp[32];        /* DeepSpeed's --enable_each_rank_log file names' time */
    int rank_base;                /* this round's RANK of local rank 0 */
    int *log_fd;                  /* per local rank, -1: none */

    /* the round being prepared */
    store_aclient_t *client;
    int round, node_rank, nnodes, wait_ms;
    char key_prefix[96];
    char mine[4096];              /* this node's published value */
    char **values;                /* every node's, by node rank */
    int got;
    jobenv_ready_cb ready;
    void *data;

    /* the job's plan once agreed (paddle) */
    struct env_paddle_plan plan;
    char *local_devices;          /* this node's devices' relative indices */
    char gloo_path[4096];
};

/* Reads the configuration: which builder, this node's address and roles, paddle's log directory
 * (made now). 0 or -errno with one line in err. */
int jobenv_init(struct jobenv *je, uv_loop_t *loop, const struct cfg *c, char **envp,
                const char *node_name, char *err, size_t errlen);
void jobenv_free(struct jobenv *je);

/* Whether local rank lr is a service (a parameter server) the job does not wait for, and
 * whether every worker of this node is one. */
bool jobenv_is_service(const struct jobenv *je, int lr);
bool jobenv_node_service(const struct jobenv *je);

/* Before the workers of a round start: 0 when nothing has to be agreed (ready is not called),
 * 1 when ready will be called from the loop, or -errno. dir is the attempt's directory. */
int jobenv_prepare(struct jobenv *je, const rdzv_assignment_t *as, int nproc, const char *dir,
                   jobenv_ready_cb ready, void *data);
/* Drops a preparation that is no longer wanted (the round ended, podrun is stopping). */
void jobenv_cancel(struct jobenv *je);

/* Paddle's files beside the worker logs, as its launcher writes them when it starts local rank
 * lr with *env: envlog.N (the environment sorted by name, one NAME=value a line, appended unless
 * --log_overwrite; N counts servers first, as Paddle's containers) and, for a worker with a
 * PADDLE_TRAINER_ID, backup_env.ID.json (the same environment as a JSON object), whose path the
 * worker then gets as PADDLE_BACKUP_ENV_PATH; an endpoint list of PADDLE_ENV_LIMIT_LEN
 * characters or more (default 48000) is then left to that file alone. *env is replaced by the
 * worker's new one. Nothing for other front-ends or without a log directory; a file that cannot
 * be written is skipped, as Paddle's launcher skips it. 0, or -ENOMEM (*env unchanged). */
int jobenv_paddle_files(const struct jobenv *je, int lr, char ***env);

/* Local rank lr's environment for this attempt (ew: its torchrun ranks). Frees as
 * env_torch_build's. */
int jobenv_worker_env(struct jobenv *je, int lr, const struct env_worker *ew, char ***out,
                      struct env_notes *notes);

/* DeepSpeed's --enable_each_rank_log DIR applies: each worker's streams go to
 * DIR/<YYYYmmddHHMMSS>_rank<RANK>.log (jobenv_log_fd), not to podrun's log directory. */
static inline bool jobenv_ds_rank_logs(const struct cfg *c)
{
    return c->worker_env == CFG_WORKER_ENV_DEEPSPEED && c->ds_each_rank_log &&
           strcmp(c->ds_each_rank_log, "None") && c->ds_mode != CFG_DS_MODE_HEAD;
}

/* A file that gets both of lr's streams (paddle's workerlog.N / serverlog.N, DeepSpeed's
 * <time>_rank<RANK>.log) for stream 1 or 2:
 * a new descriptor the caller closes, or -1 (none). -errno on an error (path names it). */
int jobenv_log_fd(struct jobenv *je, int lr, int stream, int *fd, char *path, size_t plen);

#endif
