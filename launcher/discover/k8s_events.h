/* launcher/discover/k8s_events.h — Kubernetes Events on this pod, as `kubectl describe pod` and
 * `kubectl get events` show them: core/v1 Events whose involvedObject is the pod (doc/operators.md
 * #events).
 *
 * A post never blocks and never fails the job. At most K8S_EVENTS_QUEUE wait while one is in
 * flight (K8S_EVENTS_TIMEOUT_MS each); beyond that, or past the rate limit (a bucket of
 * K8S_EVENT_BURST that gains one every K8S_EVENT_REFILL_MS), an event is dropped and counted,
 * and the next one sent says how many. A 401/403 answer is said once, with the rule the service
 * account needs, and nothing is posted after it; an API server that does not answer is said once
 * per outage and its events are dropped. */
#ifndef PODRUN_DISCOVER_K8S_EVENTS_H
#define PODRUN_DISCOVER_K8S_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/discover/k8s_client.h"
#include "launcher/discover/k8s_event.h"

#define K8S_EVENTS_QUEUE 8
#define K8S_EVENTS_TIMEOUT_MS 5000

/* ---- on the loop ---- */

typedef struct k8s_events k8s_events_t;

/* say: one line for podrun's log (a 403, an outage). The client must outlive the poster. */
int k8s_events_open(struct k8s_client *cl, const char *host,
                    void (*say)(void *arg, const char *line), void *arg, k8s_events_t **out);
/* Queues one event (printf-style message); never blocks, never fails. */
void k8s_events_post(k8s_events_t *e, enum k8s_event_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* done(arg) once nothing is queued or in flight, or after bound_ms: the end's event gets out
 * without holding the exit longer than that. */
void k8s_events_flush(k8s_events_t *e, int bound_ms, void (*done)(void *arg), void *arg);
/* Drops what is left; nothing runs after it. NULL is a no-op. */
void k8s_events_close(k8s_events_t *e);

#endif
