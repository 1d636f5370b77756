/* launcher/workers/stacks.h — the stacks of a node's workers, gathered before podrun kills them for a
 * hang (doc/failures.md#stacks-before-the-kill).
 *
 * Python workers are armed through their environment: podrun puts a directory holding its own
 * sitecustomize.py first on PYTHONPATH, and that file (which then imports the sitecustomize it
 * hides, if any) registers faulthandler for STACKS_SIGNAL, writing every thread's stack to the
 * rank's raw file (PODRUN_STACKS_FILE). faulthandler dumps from inside its C signal handler,
 * without the GIL, so a process stuck in a collective or in C code answers too.
 *
 * A gather scans /proc once: each process of a target's process group that catches the signal
 * (SigCgt) gets it, and each one's state, syscall and wchan are noted (all a non-Python worker
 * offers without ptrace). It then polls the raw files on the loop until every asked group's file
 * has grown and stopped growing, or STACKS_BOUND_MS passed, and writes one file. Nothing blocks:
 * a worker that never answers only costs the bound. */
#ifndef PODRUN_LAUNCHER_STACKS_H
#define PODRUN_LAUNCHER_STACKS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#define STACKS_BOUND_MS 2000      /* the longest a kill waits for the stacks */
#define STACKS_SIGNAL_OFFSET 8    /* the trigger: SIGRTMIN+8, which nothing else uses */
#define STACKS_NOTE_MAX 1024      /* the one-line-per-rank summary, for the termination log */

struct stacks_target {
    int rank;                     /* global rank, for the file and the summary */
    int lr;                       /* local rank: whose stream the section goes to */
    size_t at, len;               /* the rank's section in the text given to done */
    pid_t pgid;                   /* the worker's process group */
    char raw[PATH_MAX + 32];      /* the rank's PODRUN_STACKS_FILE */
    off_t from, size;             /* the raw file's size before the ask, at the last poll */
    bool grew, stable;
    int asked;                    /* processes sent the signal */
    char native[512];             /* "pid P (comm) state S, syscall ..., wchan ..." lines */
};

struct stacks {
    uv_loop_t *loop;
    uv_timer_t timer;
    bool busy;
    uint64_t started;             /* uv_now at the ask */
    struct stacks_target *t;      /* the caller's, n of them, kept until done */
    int n;
    char file[PATH_MAX + 32];     /* where the gathered stacks go */
    /* The gather is over; note holds one line per rank ("rank 5 was in all_reduce at
     * train.py:88"), text the whole file; took_ms how long it took. */
    void (*done)(void *arg, const char *note, const char *text, size_t len, uint64_t took_ms);
    void *arg;
};

/* The trigger signal (SIGRTMIN + STACKS_SIGNAL_OFFSET). */
int stacks_signal(void);
/* Writes dir/sitecustomize.py (making dir). 0 or -errno. */
int stacks_write_site(const char *dir);
/* Removes what stacks_write_site made. */
void stacks_remove_site(const char *dir);
void stacks_init(struct stacks *s, uv_loop_t *loop);
/* Asks the targets for their stacks and calls s->done once they answered or the bound passed
 * (always later, on the loop). -EBUSY while a gather runs. */
int stacks_start(struct stacks *s, struct stacks_target *t, int n, const char *file);
/* The innermost frame of the thread that matters in faulthandler's text (a thread in a
 * collective, else the main thread, listed last): "all_reduce at train.py:88", the location
 * being the innermost frame outside the installed packages. 0, or -1 with no frame in text. */
int stacks_summary(const char *text, size_t len, char *out, size_t cap);
void stacks_close(struct stacks *s);

#endif
