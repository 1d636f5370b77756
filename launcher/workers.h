/* launcher/workers.h — a group of worker processes, each the leader of its own session and
 * process group, started with fork/exec and stopped as groups on the libuv loop.
 *
 * The group never waits for anything itself: init.c reaps, the agent hands every reaped pid to
 * workers_reaped(), and the group calls back. Stopping is SIGTERM (or another signal) to every
 * process group, a grace timer, SIGKILL to whatever is left of the groups, and a bounded wait
 * after that: a process stuck in the kernel is reported and left behind, never waited for. */
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
} worker_t;

typedef struct worker_group worker_group_t;
typedef void (*workers_exit_cb)(worker_group_t *g, worker_t *w);
typedef void (*workers_stopped_cb)(worker_group_t *g);

enum workers_stop_phase { STOP_NONE, STOP_TERM, STOP_KILL, STOP_DONE };

struct worker_group {
    uv_loop_t *loop;
    worker_t *w;
    int n;
    int running;               /* workers not yet reaped */
    workers_exit_cb on_exit;   /* each worker's exit, as reaped */
    workers_stopped_cb on_stopped;
    void *data;
    uv_timer_t timer;
    enum workers_stop_phase phase;
    int stop_signal;
    uint64_t kill_wait_ms;
    int guard_fd;              /* write end of the guard's pipe, -1 without a guard */
    pid_t guard_pid;           /* the guard process, 0 without one */
};

/* What one worker runs. stdout_fd/stderr_fd become its 1 and 2 (stdin is inherited). */
struct worker_spawn {
    char *const *argv;         /* argv[0] is looked up in PATH */
    char *const *envp;
    int stdout_fd, stderr_fd;
    const cpu_set_t *cpus;     /* bound to these CPUs before exec; NULL: inherited */
    int mem_node;              /* with cpus: memory bound to this NUMA node, -1: not */
};

int workers_init(worker_group_t *g, uv_loop_t *loop, int n);
/* Forks worker i and execs argv in a new session; returns 0 or a negative errno when the fork
 * itself failed. An exec failure shows up later as the worker exiting 127 (not found) or 126
 * (not executable) with exec_errno set. */
int workers_spawn(worker_group_t *g, int i, const struct worker_spawn *sp);
/* Gives the group a reaped pid: returns the worker if it was one (after calling on_exit), NULL
 * for anyone else (an orphan). Either way the stop sequence re-checks whether it is done. */
worker_t *workers_reaped(worker_group_t *g, pid_t pid, int wstatus);
/* Sends sig to every process group that may still have members. */
void workers_signal(worker_group_t *g, int sig);
/* sig to every group, then SIGKILL after grace_ms to what is left, then on_stopped once all
 * groups are gone or WORKERS_KILL_WAIT_MS after the SIGKILL. Calling it again while stopping
 * escalates: sig is sent again and, if sig is SIGKILL, the grace ends now. */
void workers_stop_all(worker_group_t *g, int sig, uint64_t grace_ms);
/* Workers (running or their groups) still alive: what a stop leaves behind. */
int workers_alive(worker_group_t *g);
/* 0 for exit 0; the exit code; 128+signal for a signal death. */
int workers_exit_code(int wstatus);
/* Starts the guard: a small process in its own session that learns each worker's process group
 * through a pipe and, when the pipe ends without the groups being gone (the agent was killed,
 * even with SIGKILL), sends SIGKILL to whatever is left of them. PR_SET_PDEATHSIG only reaches
 * the worker itself; this reaches its children too. 0 or a negative errno (then no guard). */
int workers_guard_start(worker_group_t *g);
/* Makes a stopped (or never started) group ready for the next attempt: every worker idle. */
void workers_reset(worker_group_t *g);
void workers_close(worker_group_t *g);

#endif
