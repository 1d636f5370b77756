/* launcher/operators/pytorchjob.c — Kubeflow's PyTorchJob (training-operator v1) and its successor,
 * Kubeflow Trainer v2's TrainJob.
 *
 * PyTorchJob (reference/k8s.md §1.2, §1.3). With a Master replica the operator gives every pod
 *   MASTER_ADDR  <job>-master-0 (the Master pod's per-replica headless Service)
 *   MASTER_PORT  the Master's pytorchjob-port (default 23456)
 *   RANK         the pod's index, master-0 = 0 and worker-i = i + 1: a node rank, not a process's
 *   WORLD_SIZE   the sum of the replicas x nprocPerNode, counting nprocPerNode as 1 when it is not
 *                a number (auto, cpu, gpu)
 * and the same again in torchrun's words (PET_MASTER_ADDR, PET_MASTER_PORT, PET_NODE_RANK,
 * PET_NNODES without an elastic policy, PET_NPROC_PER_NODE). Mapping, at the operator rank:
 *   node-rank    RANK
 *   nnodes       WORLD_SIZE / PET_NPROC_PER_NODE's number (1 when it has none)
 *   master-addr, master-port   MASTER_ADDR, MASTER_PORT: the static rendezvous, whose store node
 *                rank 0 hosts — master-0, the pod that MASTER_ADDR names
 * The PET_* copies are torchrun's vocabulary, read by frontends/torchrun.c at the PET rank, above
 * these; they are not applied a second time, only checked against the four: the operator writes
 * both from one value, so a pod where they differ was changed by hand.
 * Without a Master the operator sets none of the four. An elastic job then has PET_RDZV_ENDPOINT
 * (<job>-worker-0:port), PET_RDZV_BACKEND, PET_NNODES=MIN:MAX and PET_MAX_RESTARTS — torchrun's
 * words, complete by themselves (worker-0, whose host name is the endpoint's, hosts the store) —
 * so nothing is detected for it and nothing added.
 *
 * TrainJob (k8s.md §1.6, resilience.md §4.1): PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the
 * Indexed Job's completion index through the downward API), PET_MASTER_ADDR =
 * <trainjob>-node-0-0.<trainjob> and PET_MASTER_PORT = 29500: torchrun's words again, a static
 * store at node rank 0, pod node-0-0. A TrainJob's pods are JobSet pods (JOB_COMPLETION_INDEX):
 * this adapter comes before the JobSet one so that they are not taken for plain JobSet pods, and
 * it checks that PET_NODE_RANK is the completion index. */
#include <stdio.h>
#include <string.h>

#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define PTJ "PyTorchJob"
#define TRAINER "Kubeflow Trainer"

/* A launcher's worker process has these: its RANK and WORLD_SIZE count processes, not pods, and
 * a podrun started inside it is not the pod's agent. */
static bool in_a_worker(const struct op_ctx *x)
{
    return op_get(x, "LOCAL_RANK") || op_get(x, "GROUP_RANK") || op_get(x, "TORCHELASTIC_RUN_ID");
}

static bool pytorchjob_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (!op_get(x, "MASTER_ADDR") || !op_get(x, "MASTER_PORT") || !op_get(x, "WORLD_SIZE") ||
        !op_get(x, "RANK") || in_a_worker(x))
        return false;
    cfg_src_init(why, CFG_SRC_OPERATOR, "RANK (%s)", PTJ);
    return true;
}

/* A PET_ copy of a text variable must be the same text. */
static int same_text(const struct op_ctx *x, const char *var, const char *pet, char *err,
                     size_t errlen)
{
    const char *a = op_get(x, var), *b = op_get(x, pet);
    if (!b || !strcmp(a, b))
        return 0;
    return op_conflict(err, errlen, "%s=%s and %s=%s (%s) disagree: the operator writes both from "
                       "one value; fix the pod's environment", var, a, pet, b, PTJ);
}

/* The four against their PET_ copies. */
static int check_copies(const struct op_ctx *x, long rank, long port, long nodes, long ws,
                        long nproc, char *err, size_t errlen)
{
    long v;
    int r;
    if ((r = op_num(x, "PET_NODE_RANK", PTJ, 0, OP_NODES_MAX - 1, &v, err, errlen)) < 0)
        return r;
    if (r == 0 && v != rank)
        return op_conflict(err, errlen, "RANK=%ld and PET_NODE_RANK=%ld (%s) disagree: the "
                           "operator writes both from the pod's index; fix the pod's environment",
                           rank, v, PTJ);
    if ((r = op_num(x, "PET_MASTER_PORT", PTJ, 1, 65535, &v, err, errlen)) < 0)
        return r;
    if (r == 0 && v != port)
        return op_conflict(err, errlen, "MASTER_PORT=%ld and PET_MASTER_PORT=%ld (%s) disagree: "
                           "the operator writes both from the Master's port; fix the pod's "
                           "environment", port, v, PTJ);
    if ((r = same_text(x, "MASTER_ADDR", "PET_MASTER_ADDR", err, errlen)))
        return r;
    /* PET_NNODES is MIN:MAX under an elastic policy: a range, not the replica count */
    const char *pn = op_get(x, "PET_NNODES");
    if (pn && !strchr(pn, ':') && podrun_parse_int(pn, 1, OP_NODES_MAX, &v) == 0 && v != nodes)
        return op_conflict(err, errlen, "WORLD_SIZE=%ld (%ld nodes of %ld workers) and "
                           "PET_NNODES=%ld (%s) disagree: the operator counts both from the "
                           "replicas; fix the pod's environment", ws, nodes, nproc, v, PTJ);
    return 0;
}

static int pytorchjob_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    long ws, rank, port, nproc = 1;
    int r;
    if ((r = op_num(x, "WORLD_SIZE", PTJ, 1, (long)OP_NODES_MAX * CFG_MAX_NPROC, &ws, err,
                    errlen)) ||
        (r = op_num(x, "RANK", PTJ, 0, OP_NODES_MAX - 1, &rank, err, errlen)) ||
        (r = op_num(x, "MASTER_PORT", PTJ, 1, 65535, &port, err, errlen)))
        return r < 0 ? r : 0;
    /* nprocPerNode counts as 1 in WORLD_SIZE when it is auto, cpu or gpu (k8s.md §1.2) */
    const char *np = op_get(x, "PET_NPROC_PER_NODE");
    if (np && podrun_parse_int(np, 1, CFG_MAX_NPROC, &nproc))
        nproc = 1;
    if (ws % nproc)
        return op_conflict(err, errlen, "WORLD_SIZE=%ld and PET_NPROC_PER_NODE=%ld (%s) disagree: "
                           "the operator sets WORLD_SIZE to the replicas times nprocPerNode; fix "
                           "the pod's environment", ws, nproc, PTJ);
    long nodes = ws / nproc;
    if (nodes > OP_NODES_MAX)
        return op_conflict(err, errlen, "WORLD_SIZE=%ld (%s) makes %ld nodes, more than %d", ws,
                           PTJ, nodes, OP_NODES_MAX);
    if (rank >= nodes)
        return op_conflict(err, errlen, "RANK=%ld (%s) must be below the job's %ld nodes "
                           "(WORLD_SIZE=%ld, %ld per node); the pod's environment is not what the "
                           "operator sets", rank, PTJ, nodes, ws, nproc);
    if ((r = check_copies(x, rank, port, nodes, ws, nproc, err, errlen)))
        return r;
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    if ((r = op_setn(c, CFG_NODE_RANK, rank, k, err, errlen, "RANK (%s)", PTJ)))
        return r;
    if (nproc == 1)
        r = op_setn(c, CFG_NNODES, nodes, k, err, errlen, "WORLD_SIZE (%s)", PTJ);
    else
        r = op_setn(c, CFG_NNODES, nodes, k, err, errlen, "WORLD_SIZE / PET_NPROC_PER_NODE (%s)",
                    PTJ);
    if (r || (r = op_set(c, CFG_MASTER_ADDR, op_get(x, "MASTER_ADDR"), k, err, errlen,
                         "MASTER_ADDR (%s)", PTJ)))
        return r;
    return op_setn(c, CFG_MASTER_PORT, port, k, err, errlen, "MASTER_PORT (%s)", PTJ);
}

const struct op_adapter op_pytorchjob = {PTJ, OP_ENV, pytorchjob_detect, pytorchjob_apply};

static bool trainjob_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (!op_get(x, "JOB_COMPLETION_INDEX") || !op_get(x, "PET_NODE_RANK") ||
        !op_get(x, "PET_MASTER_ADDR") || !op_get(x, "PET_NNODES") || in_a_worker(x))
        return false;
    cfg_src_init(why, CFG_SRC_OPERATOR, "PET_NODE_RANK (%s)", TRAINER);
    return true;
}

/* Every value is torchrun's (PET_*): only the one fact two variables state twice is checked. */
static int trainjob_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    long idx, rank;
    int r;
    (void)c;
    if ((r = op_num(x, "JOB_COMPLETION_INDEX", TRAINER, 0, OP_NODES_MAX - 1, &idx, err,
                    errlen)) ||
        (r = op_num(x, "PET_NODE_RANK", TRAINER, 0, OP_NODES_MAX - 1, &rank, err, errlen)))
        return r < 0 ? r : 0;
    if (idx != rank)
        return op_conflict(err, errlen, "PET_NODE_RANK=%ld and JOB_COMPLETION_INDEX=%ld (%s) "
                           "disagree: the Trainer sets PET_NODE_RANK to the pod's completion "
                           "index; fix the pod's environment", rank, idx, TRAINER);
    return 0;
}

const struct op_adapter op_trainjob = {"Kubeflow Trainer v2", OP_ENV, trainjob_detect,
                                       trainjob_apply};
