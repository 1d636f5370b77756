/* launcher/discover/k8s_event.h — the core/v1 Event podrun posts on its pod, and the rate
 * limit's bucket (doc/operators.md#events). Pure: no I/O; the poster on the loop is
 * launcher/discover/k8s_events.h. */
#ifndef PODRUN_DISCOVER_K8S_EVENT_H
#define PODRUN_DISCOVER_K8S_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#define K8S_EVENT_BURST 10
#define K8S_EVENT_REFILL_MS 30000
#define K8S_EVENT_MESSAGE_MAX 1024   /* kubectl shows a message whole; the API keeps 1 KiB+ */

/* What podrun says, one row each (k8s_event_kinds in k8s_event.c: reason and type). */
enum k8s_event_kind {
    K8S_EV_ROUND,      /* RendezvousComplete, Normal: nodes, round */
    K8S_EV_FAILURE,    /* WorkerFailed, Warning: the root cause */
    K8S_EV_RESTART,    /* RestartingInPlace, Normal: restart N of M */
    K8S_EV_SUCCEEDED,  /* JobSucceeded, Normal */
    K8S_EV_FAILED,     /* JobFailed, Warning: the exit code and why */
    K8S_EV_KINDS
};

struct k8s_event_desc {
    const char *ns, *pod, *uid;   /* the involved pod; uid may be "" */
    const char *host;             /* source.host: the node; may be "" */
    enum k8s_event_kind kind;
    const char *message;
    double time;                  /* epoch seconds */
    unsigned seq;                 /* makes the name unique with the time */
};
/* The Reason of a kind ("RendezvousComplete"), and whether it is a Warning. */
const char *k8s_event_reason(enum k8s_event_kind k, bool *warning);
/* The JSON body of a POST to /api/v1/namespaces/NS/events (malloc'd), or NULL. */
char *k8s_event_json(const struct k8s_event_desc *d);

/* A token bucket in loop milliseconds. */
struct k8s_event_bucket {
    int tokens;
    uint64_t last;                /* when tokens was last topped up */
};
void k8s_event_bucket_init(struct k8s_event_bucket *b, uint64_t now);
/* Takes a token: true when there was one. */
bool k8s_event_bucket_take(struct k8s_event_bucket *b, uint64_t now);

#endif
