/* launcher/output/trainjob.h — the job's state to Kubeflow Trainer's status server, so that
 * `kubectl get trainjob -o yaml` shows it under status.trainerStatus (doc/operators.md#trainjob-status).
 *
 * Kubeflow Trainer (2.2+, feature gate TrainJobStatus) gives every trainer container the server's
 * URL (KUBEFLOW_TRAINER_SERVER_URL), the CA that signs the server's certificate
 * (KUBEFLOW_TRAINER_SERVER_CA_CERT, a file) and a projected service-account token
 * (KUBEFLOW_TRAINER_SERVER_TOKEN, a file the kubelet rewrites as the token rotates). Where they
 * are, the agent that is node rank 0 of the current round — one poster per job, as Trainer's own
 * integrations post from rank 0 only — sends each change of the job as one POST
 * (trainjob_payload.h).
 *
 * Never in the job's way: on the agent's loop (libcurl multi, rdzv/base/http.h), one request in
 * flight at most, each bounded (TRAINJOB_CONNECT_MS, TRAINJOB_REQUEST_MS); changes that come
 * while one is in flight, or sooner than the interval after the last, are folded into the next.
 * The token and the CA are read again for every request, so rotated files are used as they come.
 * A server that cannot be reached or that refuses a report is one line in podrun's log, once; the
 * job goes on either way. Every function takes NULL (not reporting) and does nothing with it. */
#ifndef PODRUN_LAUNCHER_OUTPUT_TRAINJOB_H
#define PODRUN_LAUNCHER_OUTPUT_TRAINJOB_H

#include <stdint.h>
#include <uv.h>

#include "launcher/output/trainjob_payload.h"
#include "rdzv/rendezvous.h"

#define TRAINJOB_CONNECT_MS 3000   /* bound on connecting (TLS included) */
#define TRAINJOB_REQUEST_MS 5000   /* bound on a whole request, as Trainer's SDK has it */

struct trainjob;

struct trainjob_params {
    const char *url;            /* KUBEFLOW_TRAINER_SERVER_URL; NULL or "": not reporting */
    const char *ca_file;        /* KUBEFLOW_TRAINER_SERVER_CA_CERT; NULL: the system's CAs */
    const char *token_file;     /* KUBEFLOW_TRAINER_SERVER_TOKEN */
    uint64_t interval_ms;       /* the least time between two reports; 0: not reporting */
    int max_restarts;
    /* How far the trainer is, looked at for every report and every interval while the workers
     * run (a change is a report); NULL, or a non-zero return: not known. */
    int (*progress)(void *arg, struct trainjob_progress *out);
    void (*say)(void *arg, const char *line);   /* one line to podrun's log */
    void *arg;
};

/* *out is the reporter, or NULL when the Trainer's variables are not there or reporting is off
 * (and when it cannot start: then said, and the job goes on). Strings are copied. */
void trainjob_start(uv_loop_t *loop, const struct trainjob_params *p, struct trainjob **out);

/* The agent's events. */
/* A round was assigned: this node's rank in it decides whether this agent reports. */
void trainjob_round(struct trainjob *t, int round, int node_rank, int nodes, int workers,
                    int restarts);
/* The job was stopped for a failure: its root cause (copied). */
void trainjob_failure(struct trainjob *t, const rdzv_failure_t *root);
/* The job restarts in place; restarts used so far, this one included. */
void trainjob_restart(struct trainjob *t, int restarts);
/* The job ended for this node (state: succeeded, failed, stopped, lost, left). The last report goes
 * at once, in place of one in flight; sent(arg) runs once it is answered or its bound
 * (TRAINJOB_REQUEST_MS) passed. Returns 1 when sent will
 * run, 0 when there is nothing to wait for (then it never runs). */
int trainjob_end(struct trainjob *t, const char *state, int exit_code, void (*sent)(void *),
                 void *arg);
/* Stops reporting (a request in flight is cancelled) and frees t through the loop. */
void trainjob_close(struct trainjob *t);

#endif
