/* launcher/workers/workers.h — a group of worker processes, each the leader of its own session and
 * process group, started with clone/exec (vfork-style, as posix_spawn) and stopped as groups on
 * the libuv loop.
 *
 * The group never waits for anything itself: init.c reaps, the agent hands every reaped pid to
 * workers_reaped(), and the group calls back. Stopping is SIGTERM (or another signal) to the
 * workers (stop_to: alone, or their groups), a grace timer, SIGKILL to whatever is left of the
 * groups, and a bounded wait after that: a process stuck in the kernel is reported and left behind, never waited for. */
#ifndef PODRUN_LAUNCHER_WORKERS_H
#define PODRUN_LAUNCHER_WORKERS_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <uv.h>

/* How long a stop waits for the groups to vanish after SIGKILL before leaving them behind. */
#define WORKERS_KILL_WAIT_MS 5000

enum worker_state { WORKER_IDLE, WORKER_RUNNING, WORKER_EXITED };

typedef struct worker {
    int index;                 /* local rank */
    pid_t pid;                 /* also the pgid and sid */
    enum worker_state state;
    bool group_gone;           /* no process is left in the worker's process group */
    int wstatus;               /* as from waitpid, valid once EXITED */
    int exec_errno;            /* the program could not be exec'd: why */
    int errpipe;               /* reads the child's exec errno; -1 once closed */
    struct timespec exit_time; /* CLOCK_REALTIME at reaping */
    bool failed_alone;         /* the agent's mark: it failed on its own while the others were
                                  being stopped, not of podrun's stop */
} worker_t;

typedef struct worker_group worker_group_t;
typedef void (*workers_exit_cb)(worker_group_t *g, worker_t *w);
typedef void (*workers_stopped_cb)(worker_group_t *g);
typedef void (*workers_kill_cb)(worker_group_t *g, uint64_t grace_ms);

enum workers_stop_phase { STOP_NONE, STOP_TERM, STOP_KILL, STOP_DONE };

/* Whom a stop's first signal reaches (doc/failures.md#pid-1-signals-stopping). A worker's process
 * group also holds what it forked: torch's DataLoader processes die of a SIGTERM to the group
 * before the trainer has saved, while a wrapper that does not forward signals (sh run.sh) keeps
 * a SIGTERM to the worker alone from ever reaching the trainer. WORKER_FIRST: the worker, then
 * the rest of its group as soon as the worker has exited; WORKER: the worker alone (torch
 * 1.13); GROUP: the whole group at once (torch 2.x). A group whose worker had already exited
 * gets it as a group, and the final SIGKILL always goes to the group. */
enum workers_stop_to { WORKERS_STOP_WORKER_FIRST, WORKERS_STOP_WORKER, WORKERS_STOP_GROUP };

struct worker_group {
    uv_loop_t *loop;
    worker_t *w;
    int n;
    int running;               /* workers not yet reaped */
    workers_exit_cb on_exit;   /* each worker's exit, as reaped */
    workers_stopped_cb on_stopped;
    workers_kill_cb on_grace_end; /* the grace passed: SIGKILL follows to every live group */
    /* Then, when set: ms by which the SIGKILL may wait for the caller (0: none), which ends the
     * wait sooner with workers_kill_held; the SIGKILL goes when the time is up all the same. */
    uint64_t (*hold_kill)(worker_group_t *g);
    bool held;                 /* this stop's SIGKILL waited once already */
    void *data;
    uv_timer_t timer;
    enum workers_stop_phase phase;
    int stop_signal;
    enum workers_stop_to stop_to;
    uint64_t grace_ms;         /* of the stop under way */
    bool grace_cut;            /* the stop was escalated to SIGKILL before its grace passed */
    uint64_t kill_wait_ms;
    int guard_fd;              /* write end of the guard's pipe, -1 without a guard */
    pid_t guard_pid;           /* the guard process, 0 without one */
    char *exec_name, *exec_path; /* the last program name looked up in PATH, and its file */
};

/* The SIGKILL that hold_kill held back goes now (nothing when none is held). */
void workers_kill_held(worker_group_t *g);

/* What one worker runs. stdout_fd/stderr_fd become its 1 and 2 (stdin is inherited). A name
 * without '/' is looked up in the agent's PATH once for the group (the first executable regular
 * file, as execvp finds it), so each worker execs its file at once; where that exec fails the
 * worker does what execvp does (a script without #!, an error to report). */
struct worker_spawn {
    char *const *argv;         /* argv[0] is looked up in PATH */
    char *const *envp;
    int stdout_fd, stderr_fd;
    const cpu_set_t *cpus;     /* bound to these CPUs before exec; NULL: inherited */
    int mem_node;              /* with cpus: memory bound to this NUMA node, -1: not */
};

/* The file execvp would run for a name without '/': the first executable regular file
 * PATH/name (an empty PATH entry is the current directory), in out. 0 or -ENOENT. */
int workers_which(const char *name, char *out, size_t cap);
int workers_init(worker_group_t *g, uv_loop_t *loop, int n);
/* Starts worker i and execs argv in a new session; returns 0 or a negative errno when the clone
 * itself failed. An exec failure shows up later as the worker exiting 127 (not found) or 126
 * (not executable) with exec_errno set. */
int workers_spawn(worker_group_t *g, int i, const struct worker_spawn *sp);
/* Gives the group a reaped pid: returns the worker if it was one (after calling on_exit), NULL
 * for anyone else (an orphan). Either way the stop sequence re-checks whether it is done. */
worker_t *workers_reaped(worker_group_t *g, pid_t pid, int wstatus);
/* Sends sig to every process group that may still have members. */
void workers_signal(worker_group_t *g, int sig);
/* A worker not yet reaped has exited (it is a zombie): true, with its status in *wstatus. The
 * worker stays RUNNING until init.c reaps it. */
bool workers_exited_unreaped(const worker_t *w, int *wstatus);
/* Waits (at most timeout_ms) until every running worker has either exec'd its program or failed
 * to (exec_errno set, before it is reaped): whether a sibling could not start either is known
 * before a stop's signal can kill it first. */
void workers_await_exec(worker_group_t *g, int timeout_ms);
/* sig to every worker (whom it reaches: stop_to), then SIGKILL after grace_ms to what is left, then on_stopped once all
 * groups are gone or WORKERS_KILL_WAIT_MS after the SIGKILL. Calling it again while stopping
 * escalates: sig is sent again and, if sig is SIGKILL, the grace ends now. */
void workers_stop_all(worker_group_t *g, int sig, uint64_t grace_ms);
/* Workers (running or their groups) still alive: what a stop leaves behind. */
int workers_alive(worker_group_t *g);
/* 0 for exit 0; the exit code; 128+signal for a signal death. */
int workers_exit_code(int wstatus);
/* Starts the guard: a small process in its own session that learns each worker's process group
 * through a pipe (from the worker itself, before its exec) and, when the pipe ends without the
 * groups being gone (the agent was killed, even with SIGKILL), sends SIGKILL to whatever is left
 * of them. PR_SET_PDEATHSIG only reaches the worker itself; this reaches its children too. 0 or
 * a negative errno (then no guard). */
int workers_guard_start(worker_group_t *g);
/* Makes a stopped (or never started) group ready for the next attempt: every worker idle. */
void workers_reset(worker_group_t *g);
void workers_close(worker_group_t *g);

#endif
