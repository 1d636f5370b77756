/* launcher/operators/slurm.c — a SLURM job step.
 *
 * srun starts podrun once per task with the job's and the step's variables: SLURM_JOB_ID,
 * SLURM_NNODES/SLURM_JOB_NUM_NODES and SLURM_JOB_NODELIST (the allocation), SLURM_STEP_NUM_NODES
 * and SLURM_STEP_NODELIST (this step's nodes, in node id order, in SLURM's compressed form
 * "node[01-04,07]"), SLURM_NODEID (this node's index in the step), SLURM_PROCID (the task's),
 * SLURMD_NODENAME (this node's name) and SLURM_GPUS_ON_NODE. A batch script has the job's
 * variables and SLURM_NODEID=0 but no step.
 * podrun runs once per node (srun --ntasks-per-node=1 podrun ...), so the task is the node:
 *   node-rank      SLURM_NODEID, which must equal SLURM_PROCID (else several tasks per node)
 *   nnodes         SLURM_STEP_NUM_NODES (outside a step: SLURM_NNODES, which must then be 1 — a
 *                  batch script runs on one node, and podrun started there would wait for nodes
 *                  that no one starts), checked against the node list's length
 *   master-addr    the node list's first host, node id 0, which hosts the static store. Not
 *                  SLURM_LAUNCH_NODE_IPADDR: srun may run on a login node outside the step
 *                  (salloc), which no podrun of the job runs on
 *   nproc-per-node SLURM_GPUS_ON_NODE;  rdzv-id SLURM_JOB_ID */
#include <stdio.h>
#include <string.h>

#include "launcher/discover/hostlist.h"
#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define SL "SLURM"

static const char *first_of(const struct op_ctx *x, const char *a, const char *b, const char *c,
                            const char **name)
{
    const char *names[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (names[i] && op_get(x, names[i])) {
            *name = names[i];
            return op_get(x, names[i]);
        }
    return NULL;
}

static bool slurm_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (!(op_get(x, "SLURM_JOB_ID") || op_get(x, "SLURM_JOBID")) || !op_get(x, "SLURM_NODEID") ||
        !(op_get(x, "SLURM_NNODES") || op_get(x, "SLURM_JOB_NUM_NODES")))
        return false;
    cfg_src_init(why, CFG_SRC_OPERATOR, "SLURM_NODEID (%s)", SL);
    return true;
}

/* nnodes, from the step or (outside one) the job. */
static int node_count(const struct op_ctx *x, long *nn, const char **var, char *err,
                      size_t errlen)
{
    int r;
    *var = "SLURM_STEP_NUM_NODES";
    if ((r = op_num(x, *var, SL, 1, OP_NODES_MAX, nn, err, errlen)) <= 0)
        return r;
    *var = op_get(x, "SLURM_NNODES") ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES";
    if ((r = op_num(x, *var, SL, 1, OP_NODES_MAX, nn, err, errlen)))
        return r < 0 ? r : 0;
    if (*nn > 1)
        return op_conflict(err, errlen, "%s=%ld (%s) but podrun was not started by srun (no "
                           "SLURM_STEP_NUM_NODES): it runs once per node; start it with srun "
                           "--ntasks-per-node=1 podrun ...", *var, *nn, SL);
    return 0;
}

static int slurm_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    long nn, nodeid, procid, gpus;
    const char *nvar, *lvar = NULL, *idvar;
    int r, rp = 1, rg = 1;
    if ((r = node_count(x, &nn, &nvar, err, errlen)) ||
        (r = op_num(x, "SLURM_NODEID", SL, 0, OP_NODES_MAX - 1, &nodeid, err, errlen)) < 0 ||
        (rp = op_num(x, "SLURM_PROCID", SL, 0, 1L << 30, &procid, err, errlen)) < 0 ||
        (rg = op_num(x, "SLURM_GPUS_ON_NODE", SL, 0, CFG_MAX_NPROC, &gpus, err, errlen)) < 0)
        return r < 0 ? r : rp < 0 ? rp : rg;
    if (nodeid >= nn)
        return op_conflict(err, errlen, "SLURM_NODEID=%ld must be below %s=%ld (%s)", nodeid,
                           nvar, nn, SL);
    if (rp == 0 && procid != nodeid)
        return op_conflict(err, errlen, "SLURM_PROCID=%ld and SLURM_NODEID=%ld (%s) disagree: "
                           "podrun runs once per node, as that node's only task; start it with "
                           "srun --ntasks-per-node=1 podrun ...", procid, nodeid, SL);
    const char *list = first_of(x, !strcmp(nvar, "SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NODELIST"
                                                                        : NULL,
                                "SLURM_JOB_NODELIST", "SLURM_NODELIST", &lvar);
    struct hostlist hl = {0, NULL};
    if (list && (r = hostlist_expand(list, OP_NODES_MAX, lvar, &hl, err, errlen))) {
        hostlist_free(&hl);
        return r;
    }
    if (list && (long)hl.count != nn) {
        r = op_conflict(err, errlen, "%s=%s names %zu nodes but %s=%ld (%s): the two disagree",
                        lvar, list, hl.count, nvar, nn, SL);
    } else if (list && op_get(x, "SLURMD_NODENAME") &&
               strcmp(op_get(x, "SLURMD_NODENAME"), hl.names[nodeid])) {
        r = op_conflict(err, errlen, "SLURM_NODEID=%ld names %s in %s but SLURMD_NODENAME=%s (%s): "
                        "the two disagree", nodeid, hl.names[nodeid], lvar,
                        op_get(x, "SLURMD_NODENAME"), SL);
    } else {
        const enum cfg_src_kind k = CFG_SRC_OPERATOR;
        idvar = op_get(x, "SLURM_JOB_ID") ? "SLURM_JOB_ID" : "SLURM_JOBID";
        if (!(r = op_setn(c, CFG_NODE_RANK, nodeid, k, err, errlen, "SLURM_NODEID (%s)", SL)) &&
            !(r = op_setn(c, CFG_NNODES, nn, k, err, errlen, "%s (%s)", nvar, SL)) &&
            !(r = op_set(c, CFG_RDZV_ID, op_get(x, idvar), k, err, errlen, "%s (%s)", idvar, SL)) &&
            list)
            r = op_set(c, CFG_MASTER_ADDR, hl.names[0], k, err, errlen, "%s (%s)", lvar, SL);
        if (!r && rg == 0 && gpus > 0)
            r = op_setn(c, CFG_NPROC_PER_NODE, gpus, k, err, errlen, "SLURM_GPUS_ON_NODE (%s)",
                        SL);
    }
    hostlist_free(&hl);
    return r;
}

const struct op_adapter op_slurm = {SL, OP_ENV, slurm_detect, slurm_apply};
