/* launcher/preflight/nccl_helpers.h — one nccl test from the agent's side: a helper process per
 * local GPU, each podrun itself exec'd as `podrun preflight-nccl` (nccl_child.c), so CUDA and
 * NCCL are loaded there and never in the agent.
 *
 * Each helper gets the worker's environment and CPUs of its local rank (so the check sees what
 * training will see), joins the test's communicator through the job store, runs the all_reduce
 * and writes one line on its stdout, a pipe the agent reads when it reaps the helper:
 *   ok busbw=B algbw=B seconds=S version=V
 *   fail stage=STAGE REASON
 * The node's figure is the lowest bus bandwidth of its helpers, or the first failure, named by
 * local rank. A helper that ends without a line, or outlives its deadline (SIGKILL), fails too. */
#ifndef PODRUN_PREFLIGHT_NCCL_HELPERS_H
#define PODRUN_PREFLIGHT_NCCL_HELPERS_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "launcher/preflight/plan.h"
#include "launcher/preflight/preflight.h"
#include "launcher/preflight/codec.h"

struct pf_nccl_test {
    const char *exe;           /* podrun */
    const char *store_host;
    uint16_t store_port;
    const char *key;           /* where the unique id goes */
    const char *what;          /* "this node's GPUs", "the link with node-3": for reasons */
    int nranks;                /* ranks in the test's communicator */
    int first_rank;            /* the rank of this node's local rank 0 in it */
    int nproc;                 /* helpers on this node */
    uint64_t bytes, timeout_ms;
    const char *nccl_lib, *cudart_lib;   /* NULL: the helper's defaults */
    const char *python;        /* the workers' python (NULL: none asked) */
    pf_helper_env_cb env;
    void *env_arg;
};

typedef struct pf_nccl_helpers pf_nccl_helpers_t;

/* Starts the helpers; done() runs once, when the last one is reaped; the helpers are freed
 * after it, so the caller forgets them in done(). 0 or a negative code (nothing started, done
 * not called). */
int pf_nccl_helpers_start(uv_loop_t *loop, const struct pf_nccl_test *t,
                          void (*done)(void *arg, const struct pf_figure *f), void *arg,
                          pf_nccl_helpers_t **out);

/* A reaped child: 1 when it was one of these helpers. */
int pf_nccl_helpers_reaped(pf_nccl_helpers_t *h, pid_t pid, int wstatus);

/* Before done(): SIGKILL to every helper still running; done() never runs; freed once its
 * handles close. The killed helpers are reaped as any child of podrun's. */
void pf_nccl_helpers_cancel(pf_nccl_helpers_t *h);

#endif
