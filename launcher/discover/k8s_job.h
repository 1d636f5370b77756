/* launcher/discover/k8s_job.h — which pods are the job's nodes, and when they are all there.
 * Pure: a pod table in (launcher/discover/k8s_pods.h), a plan out; no I/O.
 *
 * The pods a selector matches are the job's candidates once they are alive: not being deleted
 * and not finished (Succeeded or Failed). They are put in the order that gives node ranks (the
 * operator's index, else pod name in natural order; or k8s_tools.py's IP order), and the first
 * MAX of them are the job. A fixed-size job (MIN == MAX == N) is ready when N pods are alive and
 * every one of them is Running and Ready with an IP: node rank = this pod's place in the order.
 * An elastic job (MIN < MAX) is ready when the first pod and at least MIN of the job's pods,
 * this one among them, are Running and Ready; its ranks are the rendezvous' to give. Either way
 * the first pod in the order hosts the job store, so every agent that sees the same pods picks
 * the same host. */
#ifndef PODRUN_DISCOVER_K8S_JOB_H
#define PODRUN_DISCOVER_K8S_JOB_H

#include <stddef.h>

#include "launcher/discover/k8s_pods.h"

#define K8S_PLAN_LINE_MAX 1024
#define K8S_PLAN_NAMED 6        /* pods named in a waiting line before "and N more" */

enum k8s_plan_state {
    K8S_PLAN_WAIT,        /* not every pod the job needs is Running and Ready: `line` says who */
    K8S_PLAN_READY,       /* go: node_rank, nnodes, host, self */
    K8S_PLAN_NOT_MEMBER,  /* the job's pods are all there and this pod is not one of them */
    K8S_PLAN_NO_SELF,     /* this pod is not among the pods the selector matches */
};

struct k8s_plan_params {
    const char *ns;             /* this pod's namespace (NULL: any) */
    const char *self;           /* this pod's name */
    enum k8s_order order;
    int min_nodes, max_nodes;   /* 1 <= min <= max */
};

struct k8s_plan {
    enum k8s_plan_state state;
    int ready;                  /* the job's pods that are Running and Ready */
    int alive;                  /* pods alive (candidates), the job's and beyond */
    int nnodes;                 /* READY: fixed: N; elastic: the pods ready among the job's */
    int node_rank;              /* READY and fixed size: this pod's place; else -1 */
    const struct k8s_pod *host; /* READY: the first pod (it hosts the job store); into the table */
    const struct k8s_pod *self; /* this pod, when the table has it alive */
    char line[K8S_PLAN_LINE_MAX]; /* WAIT: "2/4 pods Running and Ready; waiting for ..." (no
                                   * "podrun:" prefix); NOT_MEMBER/NO_SELF: what is wrong */
};

/* Decides from the table as it is now. 0, or -EINVAL for bad params, -ENOMEM. */
int k8s_plan(const struct k8s_pods *t, const struct k8s_plan_params *p, struct k8s_plan *out);

/* Why a pod that was a node of the job (ns/name with that uid) is gone in the table as it is
 * now — "pod deleted", "pod being deleted", "pod replaced", "pod Failed: Evicted" — written
 * into buf; 0 when it is still there and alive (or it Succeeded: its agent is done). Returns 1
 * when gone. */
int k8s_pod_gone(const struct k8s_pods *t, const char *ns, const char *name, const char *uid,
                 char *buf, size_t cap);

/* The label selector of the job a Pod object (GET .../pods/NAME) belongs to, from the labels
 * its operator gave it, most specific first:
 *   LeaderWorkerSet   leaderworkerset.sigs.k8s.io/name, group-index (one group is one job)
 *   JobSet            jobset.sigs.k8s.io/jobset-name, replicatedjob-name
 *   Kubeflow          training.kubeflow.org/job-name, operator-name (PyTorchJob, PaddleJob, MPIJob)
 *   Volcano           volcano.sh/job-name
 *   Indexed Job       batch.kubernetes.io/job-name (else the older job-name)
 *   PaddleCloud       paddle-job
 * Writes "key=value[,key=value]" into out and returns its length; `which` (if set) gets the
 * operator's name. -ENOENT when the pod carries none of these labels, -EPROTO when the text is
 * not a Pod or a value is not a label value, -ENOSPC. */
int k8s_job_selector(const char *json, size_t len, char *out, size_t cap, const char **which,
                     char *err, size_t err_cap);

#endif
