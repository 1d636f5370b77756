/* launcher/discover/k8s_discover.h — the agent's Kubernetes discovery, on its libuv loop.
 *
 * From nothing but the pod it runs in: credentials (in-cluster or a kubeconfig), the job's
 * selector (given, or from this pod's own operator labels: one GET of the pod), then a list+watch
 * of the job's pods (launcher/discover/k8s_watch.h). It waits — on the watch, never by polling — until
 * the job's pods are Running and Ready (launcher/discover/k8s_job.h), says every few seconds who
 * is not and why, and hands the agent this pod's node rank and the rank-0 pod's address. The
 * watch stays open while the job runs: a pod of the job that is deleted, replaced or Failed is
 * reported at once, so the agent can tell the rendezvous that node is lost. */
#ifndef PODRUN_DISCOVER_K8S_DISCOVER_H
#define PODRUN_DISCOVER_K8S_DISCOVER_H

#include <stdint.h>
#include <uv.h>

#include "launcher/discover/k8s_watch.h"
#include "launcher/discover/k8s_pods.h"

typedef struct k8s_discover k8s_discover_t;

/* What discovery found (valid during the callback). */
struct k8s_found {
    const char *ns, *selector;
    const char *pod_name, *pod_ip;   /* this pod */
    const char *host_name, *host_ip; /* the first pod in the order: it hosts the job store */
    int node_rank;                   /* this pod's place; -1 for an elastic job */
    int nnodes;                      /* pods of the job that were ready */
};

struct k8s_discover_params {
    const struct k8s_source *src;    /* where credentials come from */
    const char *selector;            /* NULL: from this pod's labels */
    const char *ns;                  /* NULL: the credentials' namespace */
    const char *pod_name;            /* this pod */
    enum k8s_order order;
    int min_nodes, max_nodes;
    uint64_t timeout_ms;             /* for the pods to be ready; 0: none */
    /* The job's pods are there. */
    void (*on_ready)(void *arg, const struct k8s_found *f);
    /* A pod that was a node of the job is gone (after on_ready): its name, IP and why. */
    void (*on_lost)(void *arg, const char *name, const char *ip, const char *why);
    /* Discovery has given up: one line. err: -EACCES (401/403: the line names the Role the
     * service account needs), -EINVAL (the selector or this pod does not fit the job: a usage
     * error), -ETIMEDOUT (timeout_ms passed; the line says who was not ready), or another
     * negative code. `ready` says whether on_ready had run: after it, only the watch of lost
     * pods is gone. Nothing of this discovery runs after it but k8s_discover_close. */
    void (*on_fatal)(void *arg, int err, const char *line, int ready);
    /* Optional: the IP of every pod of the job that has one and is not being deleted, each
     * time the pod list changes (before on_ready, and after it as pods come and go). */
    void (*on_addrs)(void *arg, const char *const *ips, size_t n);
    /* A line for the log: the waiting line, retries. */
    void (*on_progress)(void *arg, const char *line);
    void *arg;
};

/* Loads the credentials and starts. 0, or a negative code with one line in err (no
 * credentials, ...); then no callback runs. */
int k8s_discover_start(uv_loop_t *loop, const struct k8s_discover_params *p,
                       k8s_discover_t **out, char *err, size_t err_cap);

/* Stops everything; no callback runs after this returns. The memory goes once the loop has
 * closed the handles. Safe from inside any callback; NULL is a no-op. */
void k8s_discover_close(k8s_discover_t *d);

#endif
