/* launcher/workers/rundir.h — the run directory: where each worker's error file, heartbeat file and log
 * files live, BASE/<run id>/attempt_<n>/<local rank>/, as torchrun lays them out.
 *
 * BASE is --log-dir, which is kept; else a private directory made under tmpdir, removed at the
 * end unless --redirects/--tee or --duplicate-std*-filters wrote log files into it (then it is
 * kept and its path said once). A private directory that is not kept holds no log files and
 * is read by nobody but the agent: there each rank's files lie in the attempt's directory,
 * attempt_<n>/<local rank>.error.json and .heartbeat, which spares two directory operations
 * per worker (on ext4, a worker's `true` costs less).
 * Each attempt starts free of the last attempt's error and heartbeat files, which would name
 * the wrong root cause. */
#ifndef PODRUN_LAUNCHER_RUNDIR_H
#define PODRUN_LAUNCHER_RUNDIR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "launcher/config/config.h"

struct rundir {
    const struct cfg *cfg;
    int nproc;
    char base[PATH_MAX];     /* --log-dir, or the private directory; "" before rundir_open */
    char attempt[PATH_MAX];  /* base/<run id>/attempt_<n>; "" before the first attempt */
    bool own_base;           /* base was made here (and is removed here) */
    bool keep;               /* the files stay: --log-dir, or log files asked for */
    bool log_files;          /* --redirects or --tee name a stream of some rank */
    const char *tried;       /* tmpdir, tried first for the private directory */
    int tried_err;           /* why tmpdir could not hold it (-errno), or 0 */
    const char *fallback;    /* where it went instead, or NULL */
};

/* Picks the base: --log-dir (made if missing; one it cannot write in is an error now, not at
 * the first attempt), else a new private directory under cfg->tmpdir, or where that cannot be
 * made (a read-only root), under the first of /tmp, /dev/shm, /var/tmp, /run that can hold it
 * (d->fallback, with d->tried_err saying why tmpdir could not). 0 or -errno (-ENAMETOOLONG for
 * a path that does not fit); on an error d->base names the place tried. */
int rundir_open(struct rundir *d, const struct cfg *cfg);
/* Makes attempt `attempt`'s directory (and rank directories) for run `run_id` (a '/' or a leading '.' in it
 * becomes '_'), without the files an earlier attempt left. 0 or -errno. */
int rundir_attempt(struct rundir *d, const char *run_id, int attempt);
/* The path of local rank lr's `file` in the current attempt (see above). */
void rundir_path(const struct rundir *d, int lr, const char *file, char *out, size_t len);
/* The log file of local rank lr's stream (1 stdout, 2 stderr), when one is wanted: --log-dir
 * alone keeps both streams of every rank, --redirects/--tee only what they name. *fd is -1 when
 * none is wanted; on an error (-errno) *fd is -1 and path names the file. */
int rundir_log_file(const struct rundir *d, int lr, int stream, int *fd, char *path,
                    size_t plen);
/* Removes the current attempt's directory unless the files are kept; with `all`, the private
 * base too. */
void rundir_remove(struct rundir *d, bool all);

#endif
