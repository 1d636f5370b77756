/* launcher/output/restarts.h — one record per restart: when, why, whose failure it was, and how
 * long each phase of it took on this node, as a JSON line in the run's directory
 * (<log dir>/<run id>/restarts.jsonl) and as /metrics counters (launcher/health/counters.h).
 * What each line holds: doc/failures.md#one-record-per-restart.
 *
 * The agent tells it the moments a restart passes through, in order; a moment that does not come
 * (a restart decided while no worker ran) leaves its phase at 0. The record is written when the
 * next attempt's workers are about to start, so they can read it (PODRUN_RESTARTS_FILE). */
#ifndef PODRUN_LAUNCHER_OUTPUT_RESTARTS_H
#define PODRUN_LAUNCHER_OUTPUT_RESTARTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv/rendezvous.h"

enum restarts_phase {
    RESTARTS_DETECT,      /* the root cause's failure (its node's clock) -> this node stopping */
    RESTARTS_STOP,        /* stopping -> every worker of the attempt gone */
    RESTARTS_GPU_WAIT,    /* -> the GPUs' memory freed (--gpu-memory-reclaim-timeout) */
    RESTARTS_RENDEZVOUS,  /* the rejoin -> this node's ranks for the next round */
    RESTARTS_SPAWN,       /* -> the next workers about to start (environment, preflight) */
    RESTARTS__PHASES
};
/* Their names, in the records and as /metrics' label: one list for both (the counters are pure
 * code and link without this file). */
#define RESTARTS_PHASE_NAMES {"detect", "stop", "gpu_wait", "rendezvous", "spawn"}

struct restarts {
    char path[PATH_MAX];           /* the records' file once one was written; "" before */
    bool pending;                  /* a restart is under way: its record comes at the spawn */
    uint64_t at[RESTARTS__PHASES]; /* uv_hrtime() at each phase's start; 0: did not come */
    double stopping;               /* epoch s this node began stopping (detect's end); 0: none */
    bool has_root;                 /* the decision named a failure: */
    rdzv_failure_t root;           /*   the root cause */
    char why[RDZV_REASON_MAX];     /* the decision's reason */
    int restart_count;             /* the job's restarts, this one included */
    bool counted;                  /* it used one of --max-restarts */
    double last[RESTARTS__PHASES]; /* the phases of the last record, seconds */
    unsigned long records;         /* records made (written or not) */
};

/* This node starts stopping its workers (a failure here, the job's end of the round): the first
 * call of an attempt ends detect. */
void restarts_stopping(struct restarts *r);
/* The job's stop decision reached this node: a restart makes a record pending. */
void restarts_decided(struct restarts *r, const rdzv_decision_t *d);
/* The attempt's workers are gone and the restart begins (the GPUs' wait first). */
void restarts_gone(struct restarts *r);
/* The rejoin goes out. */
void restarts_rejoining(struct restarts *r);
/* This node has its ranks for the next round. */
void restarts_assigned(struct restarts *r);
/* The workers of `attempt` (in round `round`, run directory attempt_dir) are about to start:
 * with a restart pending, its record goes to restarts.jsonl beside attempt_dir and the phases
 * into r->last. 1 when a record was made, 0 when none was pending, -errno when it could not be
 * written (r->path names the file). `node` is this node's name. */
int restarts_spawning(struct restarts *r, const char *attempt_dir, int attempt, int round,
                      const char *node);
/* The workers' variables once a restart's record exists: PODRUN_ATTEMPT=<attempt> and
 * PODRUN_RESTARTS_FILE=<path>, each into a buffer of cap bytes. 2, or 0 before any record (the
 * first attempt's workers get neither). */
int restarts_env(const struct restarts *r, int attempt, char *attempt_var, char *file_var,
                 size_t cap);
/* The end: the file goes unless the run directory is kept. */
void restarts_end(struct restarts *r, bool keep);

#endif
