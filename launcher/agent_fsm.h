/* launcher/agent_fsm.h — what the agent does next, decided without doing it: the agent's states,
 * the events its stages report, and one table of (state, event) -> next state and actions.
 *
 * Pure, as rdzv/coordinator.h is: facts and an event in, the next state and a set of actions
 * out; no loop, no I/O. agent.c (the hub) gathers the facts, steps this machine, sets the state
 * and executes the actions by calling the stages; the stages only report events to it
 * (agent_post, agent_int.h). doc/design.md#the-agents-states-and-events describes the table. */
#ifndef PODRUN_LAUNCHER_AGENT_FSM_H
#define PODRUN_LAUNCHER_AGENT_FSM_H

#include <stdbool.h>

/* The states, in the order a job goes through them: X(name, its word in /healthz). */
#define AGENT_STATES(X)                                                                          \
    X(INIT, "init")             /* before discovery and the rendezvous */                       \
    X(RENDEZVOUS, "rendezvous") /* joining the job (the first time, or for a restart) */        \
    X(STARTING, "starting")     /* a round assigned: STARTING's steps run (agent_fsm.c) */      \
    X(RUNNING, "running")       /* this attempt's workers run */                                \
    X(STOPPING, "stopping")     /* the attempt ends: workers stopped, done, or a restart waits */ \
    X(EXITING, "exiting")       /* the exit status decided; output drained, rendezvous closed */ \
    X(DONE, "done")             /* every handle closes */

#define AGENT_STATE_ENUM(n, w) AGENT_##n,
enum agent_state { AGENT_STATES(AGENT_STATE_ENUM) AGENT_NSTATES };

/* What a stage (or the hub's own callbacks: workers, init, signals) reports. */
#define AGENT_EVENTS(X)                                                                          \
    X(DISCOVERED)     /* the nodes can be found: --discovery k8s's pods are ready, or there is \
                         nothing to discover: the rendezvous starts */                          \
    X(CANNOT_START)   /* before the job runs, something cannot start (err, usage) */            \
    X(ASSIGNED)       /* agent_rdzv.c: this node's ranks for a round */                         \
    X(STEP_DONE)      /* one of STARTING's steps is done (step) */                              \
    X(STEP_FAILED)    /* one of STARTING's steps failed: the workers cannot start (err, why) */ \
    X(LEAVE)          /* agent_preflight.c: this node leaves the job on the check's verdict */  \
    X(HANG)           /* a worker hung: the watchdog, a torch timer (lr, why, pid, signo) */     \
    X(LOCAL_FAILURE)  /* a worker failed: exit != 0, a hang, a torch timer (lr, code, why) */   \
    X(LEFTOVERS)      /* every worker exited 0 but some left processes in their groups */      \
    X(HEALTH_FAILED)  /* agent_watch.c: a GPU or link check failed (why) */                     \
    X(WORKERS_GONE)   /* no worker of this attempt is left */                                   \
    X(ENDING)         /* agent_rdzv.c: the round's end is known; its decision follows */       \
    X(STOPPED)        /* agent_rdzv.c: the job's decision: restart or exit (decision) */       \
    X(FINISHED)       /* agent_rdzv.c: the job finished */                                      \
    X(LOST)           /* agent_rdzv.c: this node is out of the job (err, why) */                \
    X(POD_LOST)       /* agent_k8s.c: a pod of the job went away (why) */                       \
    X(SIGNAL)         /* init.c: a signal came (sig) */                                         \
    X(LEFT)           /* the leave record is out, or its time is up */                          \
    X(RECLAIMED)      /* agent_watch.c: the GPUs' memory is free, or the wait for it is over */ \
    X(OUTPUT_DONE)    /* EXITING: the output drained or the rendezvous closed */              \
    X(JOBSET_GO)      /* agent_cluster.c: JobSet's barrier is down for this pod's attempt */   \
    X(JOBSET_BEHIND)  /* agent_cluster.c: the JobSet restarts its pods in place and this pod's \
                         attempt is over (why) */                                               \
    X(JOBSET_ENDED)   /* agent_cluster.c: the JobSet ended while its barrier was up (err, why) */

#define AGENT_EVENT_ENUM(n) AGENT_EV_##n,
enum agent_ev { AGENT_EVENTS(AGENT_EVENT_ENUM) AGENT_NEVENTS };

/* STARTING's steps, run in this order; each reports STEP_DONE or STEP_FAILED. */
enum agent_step {
    AGENT_STEP_ENV,        /* agent_spawn.c: the master resolved, the node's variables derived */
    AGENT_STEP_PREFLIGHT,  /* agent_preflight.c: --preflight, the check and its verdict */
    AGENT_STEP_FRONTEND,   /* agent_spawn.c: the front-end's agreement (paddle's endpoints) */
    AGENT_STEP_SPAWN,      /* agent_spawn.c: this attempt's workers */
    AGENT_NSTEPS
};

/* What the hub does, in this order when a step asks for several. */
#define AGENT_ACTIONS(X)                                                                         \
    X(TAKE)           /* record the event's data (the decision, the ranks, the reason) */      \
    X(VERDICT_NOW)    /* the preflight check acts now on the verdict it holds */                \
    X(FORWARD)        /* the signal goes to every worker's process group */                     \
    X(GATHER)         /* the hung workers' stacks, then the kill (LOCAL_FAILURE follows) */    \
    X(KILL)           /* SIGKILL to every worker now (a second stop signal) */                  \
    X(TELL_FAILURE)   /* a failure record of this node (no worker) to the job */                \
    X(FAIL)           /* this node's failed worker: its record to the job, the stop said */     \
    X(TELL_LEAVE)     /* the job is told this node leaves (bounded) */                          \
    X(STOP)           /* stop the workers (SIGTERM, or the stopping signal) */                  \
    X(RESTOP)         /* the workers being stopped get the stopping signal too */               \
    X(SAY)            /* say the event's reason: there is no worker to stop */                  \
    X(LEAVE)          /* quit: the job told this node leaves on a check's verdict */            \
    X(GONE)           /* the workers are gone: their output read, the checks stopped */        \
    X(TELL_PEER_LOST) /* the lost pod passed on to the job while a round runs */               \
    X(RDZV_START)     /* the rendezvous starts */                                               \
    X(JOIN)           /* the first join: the job's pods (--discovery k8s), else DISCOVERED */   \
    X(CATCH_UP)       /* this pod follows the JobSet to its next in-place attempt */            \
    X(STEP)           /* run STARTING's step `step` */                                          \
    X(WATCH)          /* the checks while the workers run */                                    \
    X(CANCEL_CHECK)   /* the preflight check is no longer wanted */                             \
    X(CANCEL_FRONTEND) /* nor the front-end's agreement */                                      \
    X(CANCEL_RECLAIM) /* nor the wait for the GPUs' memory */                                   \
    X(RESTART)        /* the attempt is over: clean up, then wait for the GPUs (RECLAIMED) */  \
    X(RECLAIM)        /* the wait for the GPUs' memory, then RECLAIMED */                       \
    X(REJOIN)         /* the next join */                                                        \
    X(EXIT_INSTEAD)   /* the restart held is not made: the decision becomes an exit (STOPPED) */ \
    X(LOSE)           /* this node is out of the job (LOST) */                                  \
    X(EXIT)           /* the exit status, the report, the rendezvous closed, output drained */  \
    X(CLOSE)          /* every handle closes */                                                 \
    X(SETTLE)         /* then decide what comes next from the facts (agent_fsm_settle) */      \
    X(AGAIN)          /* then step the same event again */

#define AGENT_ACTION_BIT(n) AGENT_ACT_BIT_##n,
enum { AGENT_ACTIONS(AGENT_ACTION_BIT) AGENT_NACTIONS };
#define AGENT_ACTION_MASK(n) AGENT_ACT_##n = 1u << AGENT_ACT_BIT_##n,
enum agent_act { AGENT_ACTIONS(AGENT_ACTION_MASK) };

/* What the hub knows when it steps the machine. The first group holds for the whole job, the
 * second describes the event. */
struct agent_facts {
    bool workers_down;     /* no worker of this attempt is left (or none started) */
    bool leaving;          /* the leave record is on its way to the job */
    bool signal;           /* a stopping signal came */
    bool quit;             /* this node leaves on a check's verdict */
    bool lost;             /* this node lost the job */
    bool finished;         /* the job finished */
    bool decided;          /* a stop decision is held ... */
    bool restart;          /* ... and it is a restart */
    bool failed;           /* this node failed in this attempt (a worker) */
    bool health_bad;       /* this node failed a health check in this attempt */
    bool check_running;    /* the preflight check is in flight */
    bool verdict_first;    /* a stop may be a peer acting on the check's verdict first
                              (--preflight-policy is not warn) */
    bool reclaiming;       /* the wait for the GPUs' memory is on */
    bool drained;          /* EXITING: podrun's output is written */
    bool closed;           /* EXITING: the rendezvous is closed */
    bool barrier;          /* a join waits for JobSet's barrier (JOBSET_GO) */
    bool behind_told;      /* the job was told this pod is behind the JobSet (until JOBSET_GO) */
    /* the event */
    bool again;            /* this is the event stepped again (AGAIN) */
    bool stops;            /* SIGNAL: it stops the job (else it is forwarded) */
    bool out;              /* HEALTH_FAILED: the job goes on without this node (it leaves) */
    int step;              /* STEP_DONE, STEP_FAILED: the step that reports */
};

struct agent_next {
    bool accepted;         /* false: the event is late or not for this state; nothing happens */
    enum agent_state next; /* the state from now on */
    unsigned actions;      /* enum agent_act, executed in their order */
    int step;              /* STEP: the step to run */
};

/* The event's effect in the state, given the facts: one row of the table. */
struct agent_next agent_fsm_step(enum agent_state s, enum agent_ev ev,
                                 const struct agent_facts *f);
/* What comes next once something happened: the level-triggered part (cancel what the job no
 * longer wants; once the workers are gone, restart, exit, or wait). */
struct agent_next agent_fsm_settle(enum agent_state s, const struct agent_facts *f);

const char *agent_fsm_state_name(enum agent_state s);   /* "RUNNING" */
const char *agent_fsm_state_word(enum agent_state s);   /* "running" (/healthz) */
const char *agent_fsm_event_name(enum agent_ev ev);     /* "STOPPED" */

/* How the job ended for this node, and the codes the config gives each ending. */
struct agent_outcome {
    int signal;            /* the signal that stopped podrun, 0 if none */
    bool quit;             /* left on a check's verdict (preflight, health check) */
    bool decided_exit;     /* the job decided to exit: */
    bool fatal;            /*   a failure's exit code is in --fatal-exit-codes */
    int dn;                /*   failure records in the decision */
    int own;               /*   0 when the root cause is this node's */
    int root_rank;         /*   the root cause's rank, -1 for a node's own failure */
    int root_signo;        /*   its signal, or */
    int root_exit_code;    /*   its exit code */
    int failed_lr;         /* this node's failed local rank, -1 if none */
    bool failed_hang;      /*   a hang */
    int failed_code;       /*   its exit code */
    bool health_bad;       /* this node failed its health check */
    bool lost;             /* this node lost the job: */
    int lost_err;          /*   why (PODRUN_E*) */
    bool finished;         /* the job finished */
    int start_err;         /* the job could not start (0: it did) */
    bool start_usage;      /*   because of the flags: a usage error */
    bool start_timeout;    /*   waiting for the job's pods timed out */
};

struct agent_codes {
    int preflight, fatal, hang, peer_lost, peer_failure, store_lost, rdzv_timeout;
};

/* podrun's exit status (doc/failures.md#exit-status): the one place that decides it. */
int agent_fsm_exit_status(const struct agent_outcome *o, const struct agent_codes *c);

#endif
