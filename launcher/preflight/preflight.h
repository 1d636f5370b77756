/* launcher/preflight/preflight.h — the check of the nodes that runs after the rendezvous and
 * before the workers start, in every agent (--preflight tcp|nccl).
 *
 * The agents of a round pair up (plan.h) and test each pair's link: tcp, agent to agent directly
 * (tcp.h); nccl, an all_reduce over both nodes' GPUs in helper processes podrun execs
 * (nccl_helpers.h), after one over each node's own GPUs. What the agents need from each other goes through the
 * job store the round runs on, under "podrun/<run_id>/pf/<round>/":
 *
 *   node/<k>            each agent: its name, address, listener port, workers
 *   local/<k>           nccl: its own GPUs' figure
 *   plan/1, plan/2      the judge (node rank 0): the links of round 1 and round 2, or skip=1
 *   go/<r>/<L>/<k>      both ends of link L: ready (the link starts when both are)
 *   res/<r>/<L>/<k>     both ends of link L: what they measured
 *   nccl/<r>/<L>/id     nccl: the pair's unique id (set by its rank 0 helper), under
 *                       "podrun-pf/<run_id>/<round>/" instead: the helpers do not hold the job's
 *                       token, so their keys lie with the workers' (torch's own NCCL id is as open)
 *   verdict             the judge: the bad nodes and the table every agent prints
 *   read/<k>            each agent: it has the verdict (no agent acts on it before all have)
 *   done                a counter: the last agent through deletes the keys
 *
 * Every wait is bounded (multiples of --preflight-timeout), so a dead or stuck node shows as a
 * link without a result, never as a hung check. The judge decides once and every agent reads
 * the same verdict, so every agent prints the same table and acts the same way. */
#ifndef PODRUN_PREFLIGHT_PREFLIGHT_H
#define PODRUN_PREFLIGHT_PREFLIGHT_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "launcher/preflight/plan.h"
#include "rdzv/store/auth.h"

enum pf_mode { PF_MODE_TCP = 1, PF_MODE_NCCL = 2 };

struct pf_outcome {
    int err;                   /* 0; else the check could not run to its verdict: why says why */
    char why[512];
    bool skipped;              /* every node had passed a check of this run before */
    int nnodes, nbad;
    bool self_bad;             /* this node is one of the bad ones */
    char self_reason[PF_REASON_MAX * 2];
    char bad_summary[2048];    /* "node-2 (slow: ...), node-3 (...)" */
    bool host_bad;             /* the agent that hosts the job store is bad: it cannot leave */
    char **lines;              /* the table, valid during the callback */
    int nlines;
    double seconds;            /* from the start to the verdict */
};

/* What an nccl helper of local rank lr is started with: the worker's environment, CPUs and the
 * CUDA device it uses. 0, or a negative code (the check of this node then fails). */
typedef int (*pf_helper_env_cb)(void *arg, int lr, char ***envp, const cpu_set_t **cpus,
                                int *mem_node, int *device);

struct pf_params {
    uv_loop_t *loop;
    enum pf_mode mode;
    const char *run_id;
    int round;                 /* the rendezvous round: keys of other rounds never mix */
    int node_rank, nnodes;
    int nproc, rank_base;      /* this node's workers (nccl: one helper each) */
    const char *name;          /* this node's name, in the table */
    const char *addr;          /* where the other agents reach this one (tcp) */
    const char *bind_addr;     /* the listener's address, NULL: every address */
    const char *store_host;
    uint16_t store_port;
    const auth_key_t *token;   /* the job's token when the store asks for it (copied); NULL: none */
    bool passed;               /* this agent passed a check of this run already */
    bool hosts_store;          /* this agent hosts the job store */
    uint64_t timeout_ms;       /* one step: a link, an NCCL init */
    uint64_t tcp_bytes, nccl_bytes;
    struct pf_bounds bounds;
    /* nccl */
    const char *exe;           /* podrun's own binary (re-executed as podrun preflight-nccl) */
    const char *nccl_lib, *cudart_lib;   /* NULL: the helper's defaults */
    const char *python;        /* the workers' python: its torch's NCCL is the default */
    pf_helper_env_cb helper_env;
    /* results */
    void (*log)(void *arg, const char *line);             /* progress, for the agent's log */
    void (*done)(void *arg, const struct pf_outcome *o);  /* once, unless cancelled */
    void *arg;
};

typedef struct preflight preflight_t;

/* Starts the check on the loop; strings are copied. 0 or a negative code (done is not called). */
int pf_start(const struct pf_params *p, preflight_t **out);

/* A child podrun reaped: 1 when it was one of the check's helpers. */
int pf_reaped(preflight_t *pf, pid_t pid, int wstatus);

/* The job moved on (a peer that acted on the verdict first left the job, or shut the store it
 * hosts) while this agent waits for every agent to have read the verdict: done() runs now with
 * the verdict this agent already has, so it acts as the others did rather than as if a peer had
 * failed. The check then finishes its own wait and cleanup as usual. 1 when done() ran; 0 when
 * there is no verdict here yet, or done() has run. */
int pf_verdict_now(preflight_t *pf);

/* Stops the check: helpers get SIGKILL, connections close; done() never runs. The check frees
 * itself once its handles are closed. Also fine after done() (then it only lets go). */
void pf_cancel(preflight_t *pf);

#endif
