/* launcher/watch/timers.h — torch's file-based timers (torch.distributed.elastic.timer), the pure
 * part: the request a worker writes into the agent's FIFO and the table of timers it keeps.
 *
 * A worker's FileTimerClient writes one JSON object per line, at most PIPE_BUF bytes so that the
 * write is atomic:
 *   {"version": 1, "pid": 123, "scope_id": "train.py#42", "expiration_time": 1700000000.5,
 *    "signal": 9}
 * expiration_time is epoch seconds (time.time() + after); a negative one releases the timer of
 * (pid, scope_id). An expired timer gets its worker the signal it asked for; a signal <= 0 asks
 * for nothing (torch's FileTimerServer then only forgets the pid's timers, and so does podrun).
 * Pure code: no I/O; timer_server.c reads the FIFO and keeps the clock. */
#ifndef PODRUN_LAUNCHER_TIMERS_H
#define PODRUN_LAUNCHER_TIMERS_H

#include <stddef.h>
#include <sys/types.h>

#define TIMERS_LINE_MAX 4096    /* PIPE_BUF on Linux: torch's client refuses longer requests */
#define TIMERS_SCOPE_MAX 512    /* a longer scope_id is cut (it is only a name) */
#define TIMERS_MAX 4096         /* timers held at once, all workers together */

struct timer_req {
    pid_t pid;
    char scope[TIMERS_SCOPE_MAX];
    double expiration;          /* epoch seconds; < 0: release */
    int signo;                  /* <= 0: do not signal */
};

/* One line (without its newline) into *r. 0, or -EINVAL with why[] saying what is wrong in a
 * few words ("not JSON", "no pid", ...). Never reads past len. */
int timers_parse(const char *line, size_t len, struct timer_req *r, char *why, size_t wlen);

struct timer_entry {
    pid_t pid;
    int lr;                     /* the local rank whose process group holds pid */
    char scope[TIMERS_SCOPE_MAX];
    double expiration;
    double acquired;            /* when the request arrived: "expired after N s" */
    int signo;
};

struct timer_table {
    struct timer_entry *v;
    int n, cap;
};

void timers_table_init(struct timer_table *t);
void timers_table_free(struct timer_table *t);
/* Applies a request of local rank lr's group that arrived at `now`: an acquire sets (or resets)
 * the timer of (pid, scope), a release drops it. 0, or -ENOSPC when TIMERS_MAX are held, or
 * -ENOMEM. */
int timers_apply(struct timer_table *t, const struct timer_req *r, int lr, double now);
/* Drops every timer of local rank lr (its worker exited). Returns how many. */
int timers_forget_rank(struct timer_table *t, int lr);
void timers_clear(struct timer_table *t);
/* The earliest expiration held, or -1 when none is. */
double timers_next(const struct timer_table *t);
/* Takes out the timers of the first pid with a timer expired at `now`: *out is the earliest of
 * them that asks for a signal (as torch's server picks), or, if none does, the earliest; every
 * timer of that pid is dropped (torch forgets a reaped pid's timers). 1 when one was taken, 0
 * when nothing has expired. */
int timers_take_expired(struct timer_table *t, double now, struct timer_entry *out);

#endif
