/* launcher/operators/lws.c — a LeaderWorkerSet group (leaderworkerset.x-k8s.io/v1;
 * reference/resilience.md §4.3).
 *
 * The LWS webhook gives every container of a group LWS_LEADER_ADDRESS (the leader pod's
 * "<leader-hostname>.<lws>.<namespace>"), LWS_GROUP_SIZE (leader + workers) and LWS_WORKER_INDEX
 * (0 for the leader, 1.. for the workers). Pods are named <lws>-<group> (the leader) and
 * <lws>-<group>-<index>. Mapping, at the operator rank: node-rank LWS_WORKER_INDEX, nnodes
 * LWS_GROUP_SIZE, master-addr LWS_LEADER_ADDRESS: the leader, node rank 0, hosts the static
 * store. One group is one podrun job; every group of the set is a job of its own. */
#include <stdio.h>
#include <string.h>

#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define LWS "LeaderWorkerSet"

static bool lws_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (!op_get(x, "LWS_LEADER_ADDRESS") || !op_get(x, "LWS_GROUP_SIZE") ||
        !op_get(x, "LWS_WORKER_INDEX"))
        return false;
    cfg_src_init(why, CFG_SRC_OPERATOR, "LWS_WORKER_INDEX (%s)", LWS);
    return true;
}

/* The pod's host name against its index, where the name has the group's shape: the leader's
 * name is the leader address's first label L, a worker's is L-<index>. */
static int check_name(const struct op_ctx *x, const char *leader, long idx, char *err,
                      size_t errlen)
{
    struct hostfile_self me;
    long k = 0;
    if (!x->host || x->host->self(x->host, false, &me) || !me.hostname)
        return 0;
    size_t ln = strcspn(leader, "."), hn = strcspn(me.hostname, ".");
    if (hn < ln || strncmp(me.hostname, leader, ln))
        return 0;
    if (hn > ln) {
        char tail[24];
        if (me.hostname[ln] != '-' || hn - ln - 1 >= sizeof tail)
            return 0;
        memcpy(tail, me.hostname + ln + 1, hn - ln - 1);
        tail[hn - ln - 1] = '\0';
        if (podrun_parse_int(tail, 1, OP_NODES_MAX - 1, &k))
            return 0;
    }
    if (k == idx)
        return 0;
    return op_conflict(err, errlen, "LWS_WORKER_INDEX=%ld (%s) but this pod is %.*s, worker %ld "
                       "of the group led by %s: the two disagree; fix the pod's environment",
                       idx, LWS, (int)hn, me.hostname, k, leader);
}

static int lws_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    long size, idx;
    int r;
    const char *leader = op_get(x, "LWS_LEADER_ADDRESS");
    if ((r = op_num(x, "LWS_GROUP_SIZE", LWS, 1, OP_NODES_MAX, &size, err, errlen)) ||
        (r = op_num(x, "LWS_WORKER_INDEX", LWS, 0, OP_NODES_MAX - 1, &idx, err, errlen)))
        return r < 0 ? r : 0;
    if (idx >= size)
        return op_conflict(err, errlen, "LWS_WORKER_INDEX=%ld must be below LWS_GROUP_SIZE=%ld "
                           "(%s); the pod's environment is not what LWS sets", idx, size, LWS);
    if ((r = check_name(x, leader, idx, err, errlen)))
        return r;
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    if ((r = op_setn(c, CFG_NODE_RANK, idx, k, err, errlen, "LWS_WORKER_INDEX (%s)", LWS)) ||
        (r = op_setn(c, CFG_NNODES, size, k, err, errlen, "LWS_GROUP_SIZE (%s)", LWS)))
        return r;
    return op_set(c, CFG_MASTER_ADDR, leader, k, err, errlen, "LWS_LEADER_ADDRESS (%s)", LWS);
}

const struct op_adapter op_lws = {LWS, OP_ENV, lws_detect, lws_apply};
