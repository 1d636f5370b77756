/* launcher/watch/progress.h — the trainer's progress as podrun reads it: a file whose content is
 * the step or checkpoint iteration (--progress-file, PODRUN_PROGRESS_FILE; NVIDIA's ft_launcher
 * calls its own --ft-checkpoint-iteration-file). The agent reads it before each join, once the
 * last attempt's workers are gone, and the job's coordinator judges restarts by it
 * (rdzv/coordinator_progress.c; doc/failures.md#restarts-that-make-no-progress).
 *
 * The file holds one decimal number, 0 to 2^62, with blanks around it allowed (what
 * `echo 1200 > file` or Python's `f.write(str(step))` leave). A file that is not there or is
 * empty is no value yet (before the first checkpoint), not an error; one that holds anything
 * else is said once, with the fix, and is no value either. */
#ifndef PODRUN_LAUNCHER_WATCH_PROGRESS_H
#define PODRUN_LAUNCHER_WATCH_PROGRESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define PROGRESS_FILE_MAX 64   /* bytes read: a number and its blanks fit */

struct progress {
    char path[PATH_MAX];   /* absolute; "" when no file was given */
    long long last;        /* the last value read, -1 none yet */
    double read_at;        /* epoch s of the read that gave it; 0 none */
    bool said;             /* the file's bad content was said (again only after a good read) */
};

/* Takes the file's path, made absolute against the current directory, so that a worker that
 * changes its own finds the same file. NULL or "": no file. 0 or -ENAMETOOLONG. */
int progress_init(struct progress *p, const char *path);
/* Reads the file now: its value, or -1 (none given, not there, empty, or bad: then `err`, of
 * cap bytes, holds the one line to say, else it is ""). A value updates progress_last. */
long long progress_read(struct progress *p, char *err, size_t cap);
/* The last value known (read by progress_read), -1 none: what the job has reported so far. */
long long progress_last(const struct progress *p);
/* PODRUN_PROGRESS_FILE=<path> for the workers into var (cap bytes): 1, or 0 without a file. */
int progress_env(const struct progress *p, char *var, size_t cap);

#endif
