/* launcher/operators/jobset_restart.h — JobSet's in-place restart (JobSet 0.12, KEP-467,
 * restartStrategy: InPlaceRestart), spoken by podrun in the pod instead of JobSet's own agent
 * (doc/operators.md#jobset-in-place-restart).
 *
 * The protocol: each pod writes its attempt in its annotation
 * jobset.sigs.k8s.io/in-place-restart-attempt; the JobSet controller sets
 * status.currentInPlaceRestartAttempt once every pod of the JobSet has the same attempt (the
 * barrier is down: the workload may start), and status.previousInPlaceRestartAttempt to the
 * highest attempt less one as soon as one pod moved on (every pod at or below it must restart).
 * A pod's first attempt is 0 when the JobSet has no current attempt yet, else current + 1.
 *
 * podrun restarts the job in place itself (the failure push, then the next round): so a restart
 * podrun decides moves this pod's attempt on at once, and the next round starts when the barrier
 * is down again; nothing exits. A pod found behind (its attempt at or below previous) while its
 * workers run is told to the agent, which makes it a failure of the job (a restart for every
 * node); behind while waiting, it catches up. Everything runs on the agent's loop; a JobSet that
 * does not ask for in-place restart (or carries jobset.sigs.k8s.io/disable-in-place-restart), or
 * that this pod may not read, is passed through: the job starts at once. */
#ifndef PODRUN_OPERATORS_JOBSET_RESTART_H
#define PODRUN_OPERATORS_JOBSET_RESTART_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/discover/k8s_client.h"

#define JOBSET_ATTEMPT_KEY "jobset.sigs.k8s.io/in-place-restart-attempt"
#define JOBSET_DISABLE_KEY "jobset.sigs.k8s.io/disable-in-place-restart"

/* ---- pure: what a JobSet object says ---- */

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

/* ---- on the loop ---- */

typedef struct jobset_restart jobset_restart_t;

struct jobset_restart_params {
    struct k8s_client *cl;          /* must outlive the protocol */
    const char *jobset;             /* JOBSET_NAME */
    /* The barrier is down for this attempt: the job may start (or restart). attempt -1: the
     * JobSet does not restart in place, or cannot be read (said): start as always. */
    void (*on_go)(void *arg, long attempt);
    /* While the job runs: this pod's attempt is over, the JobSet restarts its pods in place. */
    void (*on_behind)(void *arg, long attempt, long previous);
    /* While the barrier is up: the JobSet has ended (its terminalState), so it never comes
     * down (JobSet fails at maxRestarts). */
    void (*on_ended)(void *arg, const char *state);
    void (*say)(void *arg, const char *line);
    void *arg;
};

/* Reads the JobSet, writes this pod's first attempt, watches; on_go once the barrier is down. */
int jobset_restart_start(const struct jobset_restart_params *p, jobset_restart_t **out);
/* podrun decided to restart the job: this pod moves to the next attempt now, and on_go runs
 * again once every pod is there. false when the protocol is not in use (passed through). */
bool jobset_restart_next(jobset_restart_t *j);
/* The barrier is down for this pod's current attempt. */
bool jobset_restart_lifted(const jobset_restart_t *j);
long jobset_restart_attempt(const jobset_restart_t *j);
void jobset_restart_close(jobset_restart_t *j);

#endif
