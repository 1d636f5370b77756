/* launcher/agent_int.h — the agent's own state, shared by its files and by nothing else.
 *
 * agent.c is the hub: it alone moves the state, by the table of agent_fsm.c, and executes what
 * the table says by calling the stages. Each stage's glue is a file of its own, named after the
 * stage, whose exported functions carry the file's prefix; a stage reports what happened with
 * agent_post and returns, and never calls another stage:
 *   agent_rdzv.c       the config as rendezvous parameters, the join, the rendezvous' events
 *   agent_spawn.c      STARTING's steps ENV, FRONTEND and SPAWN: the environment derived once
 *                      the master is known, the front-end's agreement, the workers
 *   agent_preflight.c  STARTING's step PREFLIGHT: the check and its verdict
 *   agent_k8s.c        --discovery k8s: the job's pods, until they are ready
 *   agent_watch.c      the health port's snapshot, the checks while the workers run, torch's
 *                      file-based timers, the GPUs' memory before a restart
 *   agent_stacks.c     the workers' stacks before a kill for a hang
 *   agent_failure.c    this node's failures as the job hears of them: the records
 *   agent_report.c     what the end says: the failure report, the termination log
 *   agent_cluster.c    what the cluster sees: Events on this pod, JobSet's in-place restart
 * Two files are no stage but data that stages share, derived from what the stages filled in;
 * they report nothing and call no stage:
 *   agent_env.c        a worker's environment (the spawn, the preflight check's helpers)
 *   agent_record.c     a failed worker's record (what the job hears, what the report says)
 * struct agent keeps the fields of one stage together in a struct of its own. */
#ifndef PODRUN_LAUNCHER_AGENT_INT_H
#define PODRUN_LAUNCHER_AGENT_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "launcher/agent_fsm.h"
#include "launcher/config/config.h"
#include "launcher/devices/node.h"
#include "launcher/discover/identity.h"
#include "launcher/discover/k8s_discover.h"
#include "launcher/config/guards.h"
#include "launcher/health/health.h"
#include "launcher/watch/devcheck.h"
#include "launcher/env/jobenv.h"
#include "launcher/output/logs.h"
#include "launcher/output/trainjob.h"
#include "launcher/output/restarts.h"
#include "launcher/preflight/preflight.h"
#include "launcher/workers/control.h"
#include "launcher/workers/rundir.h"
#include "launcher/workers/stacks.h"
#include "launcher/watch/progress.h"
#include "launcher/watch/timer_server.h"
#include "launcher/watch/watchdog.h"
#include "launcher/workers/workers.h"
#include "rdzv/rendezvous.h"

/* The rendezvous and what it assigned this node. */
struct agent_rdzv {
    rdzv_agent_t *rz;              /* NULL once closed (or never started) */
    int group_rank;                /* this node's rank among the nodes */
    int group_world_size;          /* the nodes of the round */
    int world_size;                /* the workers of the round, every node's */
    int rank_base;                 /* the global rank of this node's local rank 0 */
    int restart_count;             /* the job's restarts so far, as the round says */
    char master_addr[RDZV_NAME_MAX];   /* the job store the workers use */
    int master_port;               /* ... and its port */
    const char *run_id;            /* --rdzv-id, or the random one of --standalone */
    int attempt;                   /* attempts this agent started: attempt_<n> */
    int round;                     /* the rendezvous round of this attempt, -1 before one */
    bool is_host;                  /* this agent hosts the job store */
    char id_buf[40];               /* --standalone's random run id */
    char last_progress[RDZV_LINE_MAX];   /* the last rendezvous line printed */
};

/* This node's first failure in the attempt. */
struct agent_failure {
    int lr;                        /* local rank, -1 if none */
    int code;                      /* its exit code (128+signal) */
    bool hang;                     /* a hang (watchdog, torch timer), not an exit */
    char why[RDZV_REASON_MAX];     /* the reason the job was told */
    uint64_t fatal_codes[4];       /* --fatal-exit-codes: bit c of [c / 64] */
};

/* What the job decided, and how the job ended for this node. */
struct agent_decision {
    bool decided;                  /* a stop decision is held (below) */
    int action;                    /* RDZV_RESTART or RDZV_EXIT */
    int dn;                        /* failure records in dfail */
    int own;                       /* the decision's `own`: 0 when the root cause is this node's */
    int restart_counted;           /* the restart uses one of --max-restarts */
    int restarts_used;             /* restarts of the job so far */
    rdzv_failure_t dfail[RDZV_MAX_FAILURES];   /* the root cause first */
    char dreason[RDZV_REASON_MAX];
    int n_bad;                     /* the nodes the job remembers (rdzv/badnodes.h) */
    rdzv_badnode_t bad[RDZV_MAX_BAD_NODES];
    bool finished;                 /* the job finished */
    bool lost;                     /* this node lost the job (store gone, join timeout) */
    int lost_err;                  /* ... why (PODRUN_E*) */
    bool no_retry;                 /* ... because its restarts made no progress (ENOPROGRESS) */
};

/* Stopping and leaving: a signal, the check's verdict, the reason said. */
struct agent_stop {
    int signal;                    /* the signal that stopped podrun, 0 if none */
    uint64_t signals;              /* 1 << signo of --signals-to-handle: they stop the job */
    uint64_t forwarded;            /* 1 << signo of the signals forwarded to the workers */
    bool quit;                     /* leaving the job on a check's verdict */
    bool leave_pending;            /* the leave record is on its way to the job */
    uv_timer_t leave_timer;        /* bound on that (AGENT_LEAVE_MS) */
    char why[RDZV_REASON_MAX + 96];   /* why the workers are being stopped, for /healthz */
};

/* What the workers are started with. */
struct agent_spawn {
    struct jobenv je;              /* the front-end's worker environment (jobenv.h) */
    char **derived;                /* what every worker gets from the node (node_worker_vars) */
    bool env_ready;                /* ... derived with the interface towards the master */
    bool gai_pending;              /* the master's address is being resolved for that */
    uv_getaddrinfo_t gai;          /* that lookup */
};

/* The preflight check (--preflight). */
struct agent_pf {
    preflight_t *check;            /* running; NULL otherwise */
    bool passed;                   /* this node passed a check of this run */
    char *report;                  /* the check's table, kept for the termination log */
    char exe[PATH_MAX];            /* podrun's own binary, re-executed as the nccl check */
};

/* --duplicate-stdout-filters / --duplicate-stderr-filters: [0] stdout, [1] stderr. */
struct agent_filters {
    char buf[2][1024];             /* the flag's text, split */
    const char *items[2][64];      /* the filters, pointing into buf */
    size_t n[2];                   /* how many filters each */
    int fd[2];                     /* this attempt's filtered_std*.log, -1: none */
};

/* The wait for the GPUs' memory before a restart (--gpu-memory-reclaim-timeout). */
struct agent_reclaim {
    uv_timer_t timer;              /* the next look */
    uint64_t start;                /* loop time the wait began */
    bool said;                     /* the wait was said */
};

/* --discovery k8s: the watch of the job's pods, and what it found. */
struct agent_k8s {
    k8s_discover_t *watch;         /* NULL when not asked for, or once the agent exits */
    bool found;                    /* the job's pods were ready */
    int rank;                      /* this pod's place, -1 for an elastic job */
    char ip[RDZV_NAME_MAX];        /* this pod's IP */
    char host_ip[RDZV_NAME_MAX];   /* the rank-0 pod's: the job store */
};

/* Health: the port that answers probes, and the checks while the workers run. */
struct agent_health {
    struct health *port;           /* --health-port: /healthz and /metrics; NULL when not asked */
    struct devcheck check;      /* GPUs and links while workers run (--health-check-interval) */
    bool bad;                      /* this node failed a check in this attempt */
};

/* The stacks of the workers before a kill for a hang (agent_stacks.c). */
struct agent_stacks {
    struct stacks g;               /* the gather in flight */
    struct stacks_target *t;       /* one per worker; NULL: not armed */
    char site[PATH_MAX + 32];      /* the directory of podrun's sitecustomize.py; "": none */
    bool site_failed;              /* it could not be written: said once, not tried again */
    char file[PATH_MAX + 32];      /* the attempt's stacks.txt */
    char note[STACKS_NOTE_MAX + PATH_MAX + 64]; /* one line per rank and the file: the report's
                                                   and the termination log's */
    bool pending;                  /* the kill the gather holds back: */
    bool grace;                    /*   a stop's SIGKILL (workers_kill_held), else: */
    int lr;                        /*   the hung local rank */
    pid_t pid;                     /*   a torch timer's process and signal, or 0 */
    int signo;
    char reason[RDZV_REASON_MAX];
};

/* JobSet's in-place restart, as the hub keeps it (agent_cluster.c speaks the protocol). */
struct agent_jobset {
    bool barrier;                  /* a join waits for the JobSet's barrier (JOBSET_GO) */
    bool behind_told;              /* the job was told this pod is behind; until JOBSET_GO */
};

/* The end: what is left once the agent exits. */
#define AGENT_STRAYS_MAX 256
struct agent_end {
    int strays;                    /* descendants sent SIGTERM at exit, not yet reaped: */
    pid_t stray[AGENT_STRAYS_MAX]; /* their pids */
    bool strays_untracked;         /* more were signalled than stray holds */
    bool drained;                  /* podrun's own output is written */
    char stuck[512];               /* processes left behind after SIGKILL, for the termination
                                      log */
    char start_why[PATH_MAX + 256]; /* why the job could not start, when a step said more
                                      than an error's name: the last line and the termination log */
    uv_timer_t exit_timer;         /* the strays' grace, then every handle closes */
    bool trainjob_pending;         /* the TrainJob's last report is not answered yet */
    int start_err;                 /* the job could not start (CANNOT_START): why, */
    bool start_usage;              /*   a usage error */
    bool start_timeout;            /*   the wait for the job's pods timed out */
};

struct agent {
    uv_loop_t *loop;               /* the one loop everything runs on */
    struct cfg *cfg;               /* the job, finalized */
    char **envp;                   /* podrun's environment, which the workers inherit */
    char **argv;                   /* every worker's command line (env_argv_build) */
    int n;                         /* workers on this node (--nproc-per-node) */
    enum agent_state state;        /* where the state machine is (agent_fsm.h); agent.c sets it */
    int exit_code;                 /* podrun's exit status, from EXITING on (exit_status) */
    struct identity id;            /* this node's name and the address peers know it by */
    struct node_devices *nd;       /* the node's devices, probed once at start */
    struct guards guards;          /* the job store's token and allow-list */
    struct logs logs;              /* podrun's own lines and the workers' output */

    /* this node's processes */
    worker_group_t wg;             /* this attempt's workers (workers.h) */
    bool wg_ready;                 /* wg is initialized (workers_close at the end) */
    struct log_stream *streams;    /* 2 per worker: stdout, stderr */
    struct watchdog wd;            /* --hang-timeout */
    struct timer_server ts;        /* torch's file-based timers (TORCHELASTIC_ENABLE_FILE_TIMER) */
    struct rundir dir;             /* error, heartbeat and log files */
    bool workers_down;             /* no worker of this attempt is left (or none started) */
    bool done_reported;            /* every worker the job waits for exited 0 (this attempt) */
    int ended_alive;               /* workers stopped when the round's end was first known */
    int services_alive;            /* of them, services (parameter servers) */

    struct agent_rdzv rdzv;        /* the rendezvous (agent_rdzv.c) */
    struct agent_failure failed;   /* this node's first failure in the attempt */
    struct agent_decision job;     /* the job's decision, its end */
    struct agent_stop stop;        /* stopping and leaving */
    struct agent_spawn spawn;      /* the workers' environment (agent_spawn.c) */
    struct agent_pf pf;            /* --preflight (agent_preflight.c) */
    struct agent_filters filters;  /* --duplicate-std*-filters */
    struct agent_reclaim reclaim;  /* the GPUs' memory before a restart (agent_watch.c) */
    struct agent_k8s k8s;          /* --discovery k8s (agent_k8s.c) */
    struct agent_health health;    /* --health-port and the checks (agent_watch.c) */
    struct agent_stacks stacks;    /* stacks before a kill for a hang (agent_stacks.c) */
    struct trainjob *trainjob;     /* reports to Kubeflow Trainer (output/trainjob.h); NULL: none */
    struct progress progress;      /* --progress-file (watch/progress.h) */
    struct restarts restarts;      /* one record per restart (output/restarts.h) */
    struct agent_end end;          /* exiting */
    struct agent_cluster *cluster; /* Events and JobSet's in-place restart (agent_cluster.c);
                                      NULL when the API is not at hand */
    struct agent_jobset jobset;    /* JobSet's barrier and "behind", for the table */
};

/* ---- agent.c: the hub ---- */

/* What an event brings (agent_fsm.h names which event uses which field). Pointers need to hold
 * only during agent_post. */
struct agent_evd {
    int err;                       /* CANNOT_START, STEP_FAILED, LOST, JOBSET_ENDED: the error */
    bool usage;                    /* CANNOT_START: a usage error (exit 2) */
    bool timeout;                  /* CANNOT_START: the wait for the job's pods timed out */
    bool said;                     /* CANNOT_START: the stage said why already */
    int step;                      /* STEP_DONE, STEP_FAILED: enum agent_step */
    int lr, code;                  /* LOCAL_FAILURE, HANG: the local rank, its exit code */
    bool hang;                     /* LOCAL_FAILURE: a hang, not an exit */
    pid_t pid;                     /* HANG: a torch timer's process and signal, or 0 */
    int signo;
    int sig;                       /* SIGNAL */
    const char *why;               /* the reason */
    const char *name, *ip;         /* POD_LOST: the pod */
    const rdzv_assignment_t *as;   /* ASSIGNED */
    const rdzv_decision_t *dec;    /* STOPPED */
};

/* A stage reports what happened; the hub moves the state and acts (d may be NULL). */
void agent_post(struct agent *a, enum agent_ev ev, const struct agent_evd *d);
/* STARTING's step s is done. */
void agent_post_step(struct agent *a, enum agent_step s);
/* Whether the hub would take ev now: a stage asks before work that only such an event needs. */
bool agent_wants(struct agent *a, enum agent_ev ev);
/* "<why>; stopping N workers (SIGTERM, SIGKILL after Ts)", or just why with none alive. */
void agent_say_stopping(struct agent *a, const char *why, int alive, int sig);
/* Local rank lr's `file` in this attempt's run directory. */
void agent_rank_path(struct agent *a, int lr, const char *file, char *out, size_t len);

/* ---- agent_env.c: a worker's environment (data, no stage) ---- */

/* Local rank i's environment (and argv, unless argv is NULL). free(*env) frees it. */
int agent_env_worker(struct agent *a, int i, char ***env, char ***argv, char *buf, size_t cap,
                     unsigned *replaced);

/* ---- agent_record.c: a failed worker's record (data, no stage) ---- */

struct report_error;   /* launcher/output/report.h */
/* What failed local rank lr left: its error file (read into *e, report_read_error_file's
 * result) and the last lines of its stderr. */
int agent_record_inputs(struct agent *a, int lr, char *errfile, size_t len,
                        struct report_error *e, const char **tail, size_t *tl);
/* The record of local rank lr's failure: its exit status ws (-1: none, a hang), at time t. */
void agent_record_worker(struct agent *a, int lr, int ws, double t, const char *reason,
                         rdzv_failure_t *f);
/* The record of a worker that failed on its own, once reaped. */
void agent_record_alone(struct agent *a, const worker_t *w, rdzv_failure_t *f);
/* When a reaped worker exited, in seconds since the epoch. */
double agent_record_exit_time(const worker_t *w);

/* ---- agent_failure.c: this node's failures, as the job hears of them ---- */

/* A failure record to the job (said when it cannot be sent). */
void agent_failure_send(struct agent *a, const rdzv_failure_t *f);
/* The first failure of local rank lr in this attempt (FAIL): its record and those of the
 * siblings that failed with it to the job, and the stop said. */
void agent_failure_local(struct agent *a, int lr, int code, bool hang, const char *reason);
/* A worker that exited while its siblings were being stopped: told to the job when it failed on
 * its own. */
void agent_failure_note_alone(struct agent *a, worker_t *w);
/* A failure record of the node itself (reason) to the job. */
void agent_failure_node(struct agent *a, const char *reason);

/* EXITING: what the end waited for is done; drain again, then OUTPUT_DONE. */
void agent_drain_again(struct agent *a);

/* ---- agent_cluster.c: what the cluster sees (Events, JobSet's in-place restart) ---- */
/* Kubeflow Trainer's TrainJob status, where its variables are given (output/trainjob.h). */
void agent_cluster_trainjob(struct agent *a);
/* A restart decided: the TrainJob hears of it. */
void agent_cluster_restart(struct agent *a);

/* The start: true when JobSet's barrier holds the first join (JOBSET_GO follows). */
bool agent_cluster_start(struct agent *a);
/* The round complete: its event. */
void agent_cluster_round(struct agent *a);
/* The job's decision is known (a->job): the failure's event, and for a restart its event and
 * this pod's next JobSet attempt. */
void agent_cluster_decided(struct agent *a);
/* A restart's workers are gone: true when JobSet's barrier holds the next join (JOBSET_GO
 * follows once every pod is at the next attempt). */
bool agent_cluster_barrier(struct agent *a);
/* CATCH_UP: this pod, behind before its round started, follows to the JobSet's next attempt. */
void agent_cluster_catch_up(struct agent *a);
/* The end (a->exit_code known): the last event, flushed within a bound (agent_cluster_busy). */
void agent_cluster_end(struct agent *a);
bool agent_cluster_busy(const struct agent *a);
void agent_cluster_close(struct agent *a);

/* ---- agent_report.c: how the job ended, said ---- */

/* The termination log: text, then the preflight table and the notes of lost output, stuck
 * processes and stacks, cut to fit. */
void agent_report_termlog(struct agent *a, const char *text, size_t len);
/* How the job ended for this node, said once at EXITING; ff: the decision's failure not to
 * retry, or NULL. */
void agent_report_end(struct agent *a, const rdzv_failure_t *ff);

/* ---- agent_rdzv.c ---- */

/* The parameters from the config, the join (0, or the error, said). */
int agent_rdzv_start(struct agent *a);
/* The trainer's progress file, read now, for the next join (--max-no-progress-restarts). */
void agent_rdzv_progress(struct agent *a);

/* ---- agent_spawn.c ---- */

/* Step ENV: the interface towards the master and every derived variable, once. */
void agent_spawn_derive_env(struct agent *a);
/* Step FRONTEND: this attempt's directories and the front-end's agreement (jobenv.h). */
void agent_spawn_prepare(struct agent *a);
/* Step SPAWN: this attempt's workers. */
void agent_spawn_workers(struct agent *a);

/* ---- agent_preflight.c ---- */

/* Step PREFLIGHT: the check when it is asked for, and its verdict. */
void agent_preflight_run(struct agent *a);

/* ---- agent_k8s.c ---- */

/* The watch of the job's pods (DISCOVERED once they are ready). */
int agent_k8s_start(struct agent *a);

/* ---- agent_watch.c ---- */

/* The checks' callbacks, before the loop runs. */
void agent_health_init(struct agent *a);
/* The health port (--health-port), opened before discovery and the rendezvous. */
int agent_health_start(struct agent *a);
/* The checks while this attempt's workers run. */
void agent_health_watch(struct agent *a);
/* torch's file-based timers: the FIFO. */
int agent_health_timers(struct agent *a);
/* Before a restart: the wait for the GPUs' memory when the node has GPUs (true: RECLAIMED
 * follows), else false. */
bool agent_health_reclaim(struct agent *a);
/* Whether the job goes on without this node when it fails a health check (it leaves). */
bool agent_health_can_leave(struct agent *a);

/* ---- agent_stacks.c ---- */

/* Arms the workers' stacks when something may kill for a hang; after the timers' FIFO. */
int agent_stacks_start(struct agent *a);
/* A hang found in local rank lr: the stacks of every running worker, then the kill (a torch
 * timer's signal to pid when signo > 0) and the failure, on the loop, within STACKS_BOUND_MS. */
void agent_stacks_then_kill(struct agent *a, int lr, const char *reason, pid_t pid, int signo);
/* The attempt's raw files go; with `all` (the end) podrun's sitecustomize too. */
void agent_stacks_end(struct agent *a, bool all);
void agent_stacks_close(struct agent *a);

#endif
