/* launcher/workers/control.h — what a worker asks of the job (doc/failures.md#the-trainer-can-speak).
 *
 * Each worker gets, in PODRUN_CONTROL_FILE, a file of its own in the attempt's run directory. A
 * worker that knows something podrun cannot — this error is not worth a retry, this node's GPU
 * is degraded — writes one line there before it fails:
 *   stop REASON      stop the job on every node, do not retry (as --fatal-exit-codes)
 *   exclude REASON   leave this node out of the next rounds (rdzv/badnodes.h)
 * The agent reads the file when it makes that worker's failure record, and the record carries
 * the request to every node: the job acts on it as on its own findings. A request of a worker
 * that exits 0 is not read: it did not fail. Pure file reading; no job, no loop. */
#ifndef PODRUN_LAUNCHER_CONTROL_H
#define PODRUN_LAUNCHER_CONTROL_H

#include <stddef.h>

#include "rdzv/rendezvous.h"

#define CONTROL_ENV "PODRUN_CONTROL_FILE"
#define CONTROL_FILE "control"   /* the rank's file in the attempt's directory (rundir.h) */
#define CONTROL_MAX 4096         /* bytes of it read; more is ignored */

enum { CONTROL_STOP = 1, CONTROL_EXCLUDE = 2 };

/* Reads the requests in `path` into the failure record f: "stop" makes it not to be retried
 * (f->fatal = RDZV_FATAL_ASKED, unless an exit code already made it so), "exclude" asks to leave
 * its node out (f->exclude); the reason says what was asked, with the worker's words. Returns
 * the requests (CONTROL_* bits; 0: no file, or nothing in it); `bad` gets the first line that is
 * neither, cut to badcap ("" when none), for one log line. */
int control_apply(const char *path, rdzv_failure_t *f, char *bad, size_t badcap);

#endif
