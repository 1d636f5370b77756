/* launcher/discover/k8s_pods.h — Kubernetes pods as discovery needs them. Pure: JSON text in
 * (a PodList, a watch event, a Status), a compact table out; no I/O.
 *
 * The table keeps, per pod, what decides node ranks and readiness: identity, phase, IP, Ready,
 * a short why-not-ready text, and the index an operator gave the pod. Every field has a bound;
 * a pod whose identity does not fit is refused as malformed, a long message is cut.
 *
 * Functions return 0 (or a count) on success and a negative errno-style code: -EPROTO (not the
 * JSON shape expected; `err` says what and where), -EMSGSIZE (a field or the table over its
 * bound), -ENOSPC (a formatter's buffer too small), -ENOMEM. */
#ifndef PODRUN_DISCOVER_K8S_PODS_H
#define PODRUN_DISCOVER_K8S_PODS_H

#include <stddef.h>

#define K8S_NAME_MAX 253        /* DNS subdomain: pod and node names */
#define K8S_LABEL_MAX 63        /* label values, namespace, hostname, subdomain */
#define K8S_UID_MAX 63
#define K8S_RV_MAX 63           /* resourceVersion (opaque; a decimal number on etcd) */
#define K8S_IP_MAX 45
#define K8S_WHY_MAX 63
#define K8S_DETAIL_MAX 255
#define K8S_CONTINUE_MAX 4095   /* a list page's continue token */
#define K8S_PODS_LIMIT 65536    /* the most pods a table can be asked to hold */

/* A pod. Strings are NUL-terminated, "" when absent. */
struct k8s_pod {
    char name[K8S_NAME_MAX + 1];
    char ns[K8S_LABEL_MAX + 1];
    char uid[K8S_UID_MAX + 1];
    char rv[K8S_RV_MAX + 1];
    char phase[16];                       /* status.phase as served: Pending, Running, ... */
    char ip[K8S_IP_MAX + 1];              /* status.podIP */
    char node[K8S_NAME_MAX + 1];          /* spec.nodeName */
    char hostname[K8S_LABEL_MAX + 1];     /* spec.hostname, spec.subdomain: the pod's DNS name */
    char subdomain[K8S_LABEL_MAX + 1];
    unsigned ready : 1;                   /* condition Ready is True */
    unsigned containers_ready : 1;        /* it has container statuses and all are ready */
    unsigned deleting : 1;                /* metadata.deletionTimestamp is set */
    unsigned has_index : 1;               /* an operator's index was found (below) */
    int restarts;                         /* sum of the containers' restartCount */
    /* The operator's place for the pod: (group, major, index), e.g. PyTorchJob's replica type and
     * replica index, JobSet's job index and completion index, LWS's group and worker index. */
    char group[K8S_LABEL_MAX + 1];
    long major;
    long index;
    const char *index_key;                /* the label or annotation the index came from */
    /* Why the pod is not (yet) a usable peer: "" when Ready; else short ("Pending: Unschedulable",
     * "ImagePullBackOff", "CrashLoopBackOff", "Init:ErrImagePull", "Running: not Ready",
     * "Failed: Evicted", "Terminating") plus the server's message in why_detail. */
    char why[K8S_WHY_MAX + 1];
    char why_detail[K8S_DETAIL_MAX + 1];
};

struct k8s_pods {
    struct k8s_pod **pods;                /* sorted by (namespace, name) */
    size_t n, cap, max;
    char rv[K8S_RV_MAX + 1];              /* of the list, then of the last event applied */
};

/* A Status object (an error answer, or the object of a watch ERROR event). */
struct k8s_status {
    int code;                             /* HTTP-like: 401, 403, 404, 410, ... */
    char reason[64];                      /* Unauthorized, Forbidden, NotFound, Expired, Gone */
    char message[K8S_DETAIL_MAX + 1];
};

enum k8s_event_type {
    K8S_EVENT_ADDED,
    K8S_EVENT_MODIFIED,
    K8S_EVENT_DELETED,
    K8S_EVENT_BOOKMARK,
    K8S_EVENT_ERROR,
};

/* One line of a watch stream. pod is set for ADDED/MODIFIED/DELETED, status for ERROR; rv is
 * the object's resourceVersion (BOOKMARK: the point the stream has reached). */
struct k8s_event {
    enum k8s_event_type type;
    struct k8s_pod pod;
    struct k8s_status status;
    char rv[K8S_RV_MAX + 1];
};

enum k8s_order {
    K8S_ORDER_INDEX,   /* the operator's index where a pod has one, then pod name (natural) */
    K8S_ORDER_NAME,    /* pod name in natural order: worker-2 before worker-10 */
    K8S_ORDER_IP,      /* k8s_tools.py's order: pod IPs sorted as strings; no IP last */
};

/* An empty table that will hold at most max pods (<= K8S_PODS_LIMIT; 0: the limit). */
void k8s_pods_init(struct k8s_pods *t, size_t max);
void k8s_pods_free(struct k8s_pods *t);
/* Empties the table and forgets its resourceVersion; keeps the memory. */
void k8s_pods_clear(struct k8s_pods *t);

/* Adds one page of a PodList (GET .../pods): its pods are added (replacing pods of the same
 * namespace/name), t->rv becomes the list's resourceVersion, and `cont` (cont_cap bytes) gets
 * metadata.continue ("" on the last page). A caller starting a fresh list clears t first. On an
 * error the table may hold part of the page and t->rv is unchanged: clear it and list again. */
int k8s_pods_add_list(struct k8s_pods *t, const char *json, size_t len, char *cont,
                      size_t cont_cap, char *err, size_t err_cap);

/* Parses one watch event (one line of a ?watch=1 stream). */
int k8s_event_parse(const char *json, size_t len, struct k8s_event *ev, char *err,
                    size_t err_cap);

/* Applies an ADDED/MODIFIED/DELETED/BOOKMARK event. Returns 1 when the table changed in a
 * field above (a new resourceVersion alone is not a change), 0 when not, -EMSGSIZE when an
 * added pod would exceed max, -EINVAL for an ERROR event. t->rv follows the event. */
int k8s_pods_apply(struct k8s_pods *t, const struct k8s_event *ev);

/* 1 when two tables hold the same pods in the same states (resourceVersions aside), else 0. */
int k8s_pods_same(const struct k8s_pods *a, const struct k8s_pods *b);

/* Parses a Status object; -EPROTO if the text is not one. */
int k8s_status_parse(const char *json, size_t len, struct k8s_status *st);

/* The pod named ns/name (ns NULL: any namespace), or NULL. */
const struct k8s_pod *k8s_pods_find(const struct k8s_pods *t, const char *ns, const char *name);

/* Fills out[0..t->n) with the pods in the given order; returns t->n. The order is total:
 * ties fall to name, namespace, uid. */
size_t k8s_pods_sorted(const struct k8s_pods *t, enum k8s_order order,
                       const struct k8s_pod **out);

/* Natural order of names: runs of digits compare as numbers ("w-2" < "w-10"), the rest
 * bytewise; a total order (fewer leading zeros first on a numeric tie, then bytewise). */
int k8s_name_cmp(const char *a, const char *b);

/* The phase k8s_tools.py compares with: "Terminating" once deletion has begun, else the phase. */
const char *k8s_pod_status(const struct k8s_pod *p);

/* A JSON object from text[0..len), or NULL with one line in err (not JSON, not an object). The
 * caller json_decref()s it. For the readers of other API objects (launcher/discover/k8s_job.c). */
struct json_t *k8s_pods_parse_object(const char *text, size_t len, char *err, size_t err_cap);

#endif
