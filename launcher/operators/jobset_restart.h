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
#include "launcher/operators/jobset_ipr.h"

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
