/* launcher/operators/jobset_ipr.h — what a JobSet (jobset.x-k8s.io/v1alpha2) says about
 * in-place restart, and what a pod at an attempt does about it (KEP-467; the rules of
 * kubernetes-sigs/jobset's api/jobset/v1alpha2/jobset_types.go). Pure: JSON in, a step out; the
 * protocol on the loop is launcher/operators/jobset_restart.h. */
#ifndef PODRUN_OPERATORS_JOBSET_IPR_H
#define PODRUN_OPERATORS_JOBSET_IPR_H

#include <stdbool.h>
#include <stddef.h>

#define JOBSET_ATTEMPT_KEY "jobset.sigs.k8s.io/in-place-restart-attempt"
#define JOBSET_DISABLE_KEY "jobset.sigs.k8s.io/disable-in-place-restart"

struct jobset_ipr {
    bool in_place;          /* spec.failurePolicy.restartStrategy == InPlaceRestart */
    bool disabled;          /* the JobSet carries JOBSET_DISABLE_KEY */
    long current, previous; /* status.*InPlaceRestartAttempt; -1 when unset */
    char terminal[32];      /* status.terminalState: "Failed", "Completed"; "" while it runs */
    char rv[64];            /* metadata.resourceVersion */
};

/* A JobSet object (GET .../jobsets/NAME). 0 or -EPROTO. */
int jobset_ipr_parse(const char *json, size_t len, struct jobset_ipr *out);
/* A watch line: the JobSet of an ADDED/MODIFIED event (returns 1, *out filled), a BOOKMARK's
 * resourceVersion (returns 0, out->rv only), an ERROR (-ESTALE: 410, list again; -EIO), or
 * -EPROTO. */
int jobset_ipr_event(const char *line, size_t len, struct jobset_ipr *out);

enum jobset_ipr_step {
    JOBSET_IPR_WAIT,     /* the other pods are not at this attempt yet */
    JOBSET_IPR_LIFT,     /* every pod is at this attempt: the barrier is down */
    JOBSET_IPR_BEHIND,   /* this attempt is over (at or below previous) */
};
enum jobset_ipr_step jobset_ipr_step(const struct jobset_ipr *s, long attempt);
/* The attempt a pod starts with: 0 on a fresh JobSet, else current + 1 (and past previous). */
long jobset_ipr_first(const struct jobset_ipr *s);

#endif
