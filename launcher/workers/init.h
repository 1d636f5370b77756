/* launcher/workers/init.h — podrun's duties as PID 1 (or as a child subreaper when it is not PID 1). */
#ifndef PODRUN_LAUNCHER_INIT_H
#define PODRUN_LAUNCHER_INIT_H

#include <stdbool.h>
#include <sys/types.h>
#include <uv.h>

/* Told of every reaped child: workers and re-parented orphans alike. */
typedef void (*init_child_cb)(void *arg, pid_t pid, int wstatus);
/* Told of every signal podrun forwards or acts on (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
 * SIGUSR2). */
typedef void (*init_signal_cb)(void *arg, int signum);

/* The signals podrun forwards to every worker process group. */
extern const int init_forwarded[];
#define INIT_NUM_FORWARDED 6

/* Unless PID 1: PR_SET_CHILD_SUBREAPER, so orphans of the workers are re-parented to podrun.
 * Returns 0 or a negative errno (then orphans go to the real init instead). */
int init_become_subreaper(void);
/* Ignores SIGTTIN/SIGTTOU/SIGPIPE, and starts watching SIGCHLD and the forwarded signals on
 * `loop`, except those that were ignored when podrun started: they stay ignored, for podrun
 * and for its children (init_child_reset). Returns 0 or a negative errno. */
int init_start(uv_loop_t *loop, init_child_cb on_child, init_signal_cb on_signal, void *arg);
/* Reaps whatever has exited right now (also run on every SIGCHLD). */
void init_reap(void);
/* Sends `sig` to every child podrun has now except `spare`: at exit, when the workers are gone,
 * these are descendants that left their worker's process group (setsid, daemons) and were
 * re-parented to podrun as their subreaper. Returns how many were signalled; the first `max` of
 * their pids go to pids. */
int init_signal_children(int sig, pid_t spare, pid_t *pids, int max);
/* A process's name (cut to len), state letter and process group, from /proc/PID/stat; the name
 * is in parentheses and may hold any byte, so the fields after it are found from its last ')'.
 * 0, or -1 when the process is gone. */
int init_proc_stat(pid_t pid, char *name, size_t len, char *state, pid_t *pgrp);
/* "PID (name)" of a process, or "PID" when it is gone. 1 while it lives, 0 for a zombie, -1
 * when it is gone. */
int init_proc_label(pid_t pid, char *buf, size_t len);
/* The live processes of process group pgid (zombies are not: they only wait to be reaped), as
 * "PID (name), ..." into buf (cut to len); returns how many there are. */
int init_group_members(pid_t pgid, char *buf, size_t len);
/* Closes the signal handles (the loop must run once more to finish closing them). */
void init_stop(void);
bool init_is_pid1(void);

/* Around fork() or clone(): block every signal in the parent so that no handler runs in the
 * child before it has reset them; init_fork_end restores the parent's mask. */
void init_fork_begin(sigset_t *saved);
void init_fork_end(const sigset_t *saved);
/* In the child, before exec: the dispositions podrun started with (the default, or ignored
 * where it was ignored then) and the signal mask podrun started with. */
void init_child_reset(void);

#endif
