/* launcher/operators/jobset.c — an Indexed Job (batch/v1, completionMode: Indexed) and a JobSet
 * (jobset.x-k8s.io, whose Jobs are Indexed Jobs); reference/k8s.md §5.1, §5.2.
 *
 * What a pod has: JOB_COMPLETION_INDEX, its index in its Job (the Job controller injects it from
 * the batch.kubernetes.io/job-completion-index annotation), and its host name: "<job>-<index>"
 * for an Indexed Job, "<jobset>-<replicatedJob>-<jobIndex>-<index>" in a JobSet, resolvable as
 * "<host>.<subdomain>" when the pod has a subdomain with a headless Service of that name (JobSet
 * sets both; an Indexed Job needs them in its template). JobSet injects no variable: its job
 * index is an annotation (jobset.sigs.k8s.io/job-index) that a pod sees only through the downward
 * API; podrun reads it as JOBSET_JOB_INDEX:
 *     env: [{name: JOBSET_JOB_INDEX, valueFrom: {fieldRef: {fieldPath:
 *            "metadata.annotations['jobset.sigs.k8s.io/job-index']"}}}]
 * Without it a pod is taken for its Job's alone, which is right for a JobSet of one Job
 * (replicas: 1), the Trainer's layout.
 * Mapping, at the operator rank:
 *   node-rank      JOB_COMPLETION_INDEX, for the pods of job 0 (or when there is no job index);
 *                  the other Jobs' pods are ordered by the rendezvous by host name, and natural
 *                  order of <jobset>-<rjob>-<j>-<i> is (j, i) order, after job 0's given ranks
 *   rdzv-backend   c10d, rdzv-endpoint the index-0 pod's name "<job>-0.<subdomain>" (JobSet:
 *                  "<jobset>-<rjob>-0-0.<subdomain>"), port 29400: that pod hosts the store; the
 *                  name is derived from this pod's own host name and FQDN, and not set when the
 *                  pod has no subdomain (the name would not resolve)
 *   nnodes         nothing: a Job does not tell its pods their number; give --nnodes (the Job's
 *                  completions), else podrun stops with that fix rather than let pod 0 run alone */
#include <stdio.h>
#include <string.h>

#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define IJ "Indexed Job"
#define JS "JobSet"

static bool jobset_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (!op_get(x, "JOB_COMPLETION_INDEX"))
        return false;
    cfg_src_init(why, CFG_SRC_OPERATOR, "JOB_COMPLETION_INDEX (%s)",
                 op_get(x, "JOBSET_JOB_INDEX") ? JS : IJ);
    return true;
}

/* Whether name[0..n) ends with "-<v>" (v written as the controller writes it, no leading
 * zeros): the length before the '-' into *prefix. */
static bool ends_with_index(const char *name, size_t n, long v, size_t *prefix)
{
    char suffix[24];
    int sl = snprintf(suffix, sizeof suffix, "-%ld", v);
    if (sl <= 0 || (size_t)sl >= n || memcmp(name + n - (size_t)sl, suffix, (size_t)sl))
        return false;
    *prefix = n - (size_t)sl;
    return true;
}

/* The store's name from this pod's: its host name minus "-<index>" (and "-<jobIndex>"), plus
 * "-0" (or "-0-0"), plus ".<subdomain>" from the FQDN. 0 with the name in out; 1 when this pod's
 * names do not have that shape. */
static int store_name(const struct op_ctx *x, long idx, long job, char *out, size_t cap)
{
    struct hostfile_self me;
    if (!x->host || x->host->self(x->host, true, &me) || !me.hostname)
        return 1;
    const char *h = me.hostname;
    size_t hn = strcspn(h, ".");
    const char *fq = me.fqdn && !strncmp(me.fqdn, h, hn) && me.fqdn[hn] == '.' ? me.fqdn : NULL;
    if (!fq && h[hn] == '.')   /* setHostnameAsFQDN: the host name is the FQDN */
        fq = h;
    size_t p;
    if (!fq || !ends_with_index(h, hn, idx, &p) || (job >= 0 && !ends_with_index(h, p, job, &p)))
        return 1;
    const char *sub = fq + hn + 1;
    size_t sn = strcspn(sub, ".");
    if (!sn)
        return 1;
    int n = snprintf(out, cap, "%.*s%s.%.*s", (int)p, h, job >= 0 ? "-0-0" : "-0", (int)sn, sub);
    return n > 0 && (size_t)n < cap ? 0 : 1;
}

static int jobset_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    long idx, job = -1;
    int r;
    bool js = op_get(x, "JOBSET_JOB_INDEX") != NULL;
    const char *label = js ? JS : IJ;
    if ((r = op_num(x, "JOB_COMPLETION_INDEX", label, 0, OP_NODES_MAX - 1, &idx, err, errlen)) ||
        (r = op_num(x, "JOBSET_JOB_INDEX", JS, 0, OP_NODES_MAX - 1, &job, err, errlen)) < 0)
        return r < 0 ? r : 0;
    if (r == 1)
        job = -1;
    struct cfg_src why = c->src[CFG_DISCOVERED];
    if ((r = op_discovered(c, label, &why, err, errlen)))
        return r;
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    if (job <= 0 && (r = op_setn(c, CFG_NODE_RANK, idx, k, err, errlen,
                                 "JOB_COMPLETION_INDEX (%s)", label)))
        return r;
    char store[300];
    if (store_name(x, idx, job, store, sizeof store))
        return 0;
    if ((r = op_set(c, CFG_RDZV_BACKEND, "c10d", k, err, errlen,
                    "JOB_COMPLETION_INDEX and the pod's name (%s)", label)))
        return r;
    return op_set(c, CFG_RDZV_ENDPOINT, store, k, err, errlen,
                  "JOB_COMPLETION_INDEX and the pod's name (%s)", label);
}

const struct op_adapter op_jobset = {JS, OP_ENV, jobset_detect, jobset_apply};
