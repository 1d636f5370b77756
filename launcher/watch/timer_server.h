/* launcher/watch/timer_server.h — torch's file-based timer watchdog on the agent's loop: what
 * torchrun's LocalElasticAgent runs as FileTimerServer when TORCHELASTIC_ENABLE_FILE_TIMER=1.
 *
 * The agent makes a FIFO (its path goes to every worker as TORCHELASTIC_TIMER_FILE) and reads
 * the workers' requests from it (timers.h). The FIFO is opened read-write and non-blocking, so
 * it never reads an end of file when the last worker closes it and a read never waits; a uv_poll
 * tells when there is something to read. One uv_timer is armed for the earliest expiration,
 * re-armed whenever that changes: nothing polls. Each read is bounded, a request line longer
 * than TIMERS_LINE_MAX is skipped, and a bad request costs one log line, never the agent. */
#ifndef PODRUN_LAUNCHER_TIMER_SERVER_H
#define PODRUN_LAUNCHER_TIMER_SERVER_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <uv.h>

#include "launcher/watch/timers.h"

struct timer_server {
    int fd;                          /* the FIFO, -1 when off */
    bool made;                       /* the FIFO is ours to remove */
    bool handles;                    /* poll and timer initialised (to be closed) */
    char path[PATH_MAX];
    uv_poll_t poll;
    uv_timer_t timer;
    char buf[TIMERS_LINE_MAX + 1];   /* a request line being read */
    size_t blen;
    bool skipping;                   /* inside a line that was too long: up to its newline */
    int complaints;                  /* bad requests said so far (bounded) */
    struct timer_table table;
    /* The local rank of the running worker whose process group holds pid, -1 if none. */
    int (*rank_of)(void *arg, pid_t pid);
    /* A timer expired (`late`: seconds past its expiration now); the entry is already dropped
     * with every other timer of its pid. */
    void (*expired)(void *arg, const struct timer_entry *e, double late);
    void (*say)(void *arg, const char *line);
    void *arg;
};

/* Off: every call below does nothing until timer_server_open. */
void timer_server_init(struct timer_server *s);
/* Makes the FIFO at path (one left there by an earlier run is replaced; any other file is
 * -EEXIST), opens it and starts reading. The callbacks must be set. 0 or a negative errno. */
int timer_server_open(struct timer_server *s, uv_loop_t *loop, const char *path);
/* Local rank lr's worker exited: its timers go. */
void timer_server_forget(struct timer_server *s, int lr);
/* Every timer goes (the attempt's workers are gone). */
void timer_server_clear(struct timer_server *s);
/* No more requests: the FIFO is removed and closed, the timers dropped. */
void timer_server_stop(struct timer_server *s);
/* Closes the handles (after timer_server_stop). */
void timer_server_close(struct timer_server *s);

#endif
