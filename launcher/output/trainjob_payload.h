/* launcher/output/trainjob_payload.h — what podrun tells Kubeflow Trainer's status server, as the
 * body of one POST: an UpdateTrainJobStatusRequest (kubeflow/trainer
 * pkg/apis/trainer/v1alpha1/trainjob_types.go), {"trainerStatus": {...}}. Pure code: no I/O.
 *
 * The Trainer's TrainerStatus has four fields: progressPercentage (int32, 0-100),
 * estimatedRemainingSeconds (int32, >= 0), metrics (at most 256 {name, value}, each a string of
 * 1-64 characters) and lastUpdatedTime (RFC 3339). What podrun knows about the job has no field of
 * its own there, so it goes as metrics named podrun_*: the state, the round, the nodes and
 * workers of the round, the restarts used and left, the root cause of the last failure (its node,
 * rank, reason and message, each cut to 64 characters), the exit code at the end, and the
 * trainer's step when it reports one. A percentage the trainer reports is progressPercentage. */
#ifndef PODRUN_LAUNCHER_OUTPUT_TRAINJOB_PAYLOAD_H
#define PODRUN_LAUNCHER_OUTPUT_TRAINJOB_PAYLOAD_H

#include <stddef.h>

#include "rdzv/rendezvous.h"

#define TRAINJOB_VALUE_MAX 64   /* characters in a metric's name or value (the CRD's maxLength) */

/* How far the trainer is, from whatever reports it (-1: not known). */
struct trainjob_progress {
    long long step;             /* the trainer's step or iteration */
    int percent;                /* 0-100 */
};

/* The job as one agent knows it now. */
struct trainjob_view {
    const char *state;          /* running, stopping, restarting; at the end succeeded, failed,
                                   stopped (a signal), lost, left (this node left the job) */
    int round;                  /* the rendezvous round; -1 before one */
    int nodes, workers;         /* of the round; -1 before one */
    int restarts, max_restarts; /* restarts used, --max-restarts */
    const rdzv_failure_t *root; /* the last failure's root cause, or NULL */
    int exit_code;              /* this node's exit code once the job ended, else -1 */
    struct trainjob_progress progress;
    double time;                /* epoch seconds: lastUpdatedTime */
};

/* The JSON body for v, malloc'd and NUL-terminated, in *out (free it). 0 or -ENOMEM. */
int trainjob_payload(const struct trainjob_view *v, char **out);

/* text as a metric value: its first line, control characters as spaces, bytes that are not UTF-8
 * as '?', at most TRAINJOB_VALUE_MAX characters (a cut one ends in "..."). Returns the bytes
 * written to buf (NUL-terminated; cap >= 4 * (TRAINJOB_VALUE_MAX + 1) + 1 always holds a value). */
size_t trainjob_value(const char *text, char *buf, size_t cap);

#endif
