/* launcher/workers/workers.c — fork/exec of workers into their own sessions and stopping them as groups.
 *
 * Why fork/exec and not uv_spawn: podrun reaps every child with waitpid(-1) (see init.c), which
 * would steal uv_spawn's children from libuv. Forking here also gives exact control of what the
 * child does before exec: reset signals, setsid(), a parent-death signal so a killed agent
 * leaves no worker behind, and an exec-error pipe so "not found" and "not executable" are
 * reported as such (127 / 126) instead of as a program that exited with that code. CPU binding
 * (--numa-binding) is applied here too, between fork and exec, so no numactl is needed: the
 * binding is two system calls (devices/cpu.h), safe in a child of a process with threads.
 *
 * A worker is the leader of its own session, so its process group id is its pid and everything
 * it forks (data loader workers, shells, compilers) can be signalled with it: forwarded signals
 * and the final SIGKILL are, a stop's first signal reaches whom stop_to says (workers.h). Once the leader is
 * reaped the group may live on through its descendants; kill(-pgid, 0) tells whether anyone is
 * left, and that is checked again on every reap, so the stop sequence needs no polling. */
#include "launcher/workers/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/devices/cpu.h"
#include "launcher/workers/init.h"

int workers_exit_code(int ws)
{
    if (WIFEXITED(ws))
        return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws))
        return 128 + WTERMSIG(ws);
    return 1;
}

int workers_init(worker_group_t *g, uv_loop_t *loop, int n)
{
    memset(g, 0, sizeof *g);
    g->loop = loop;
    g->n = n;
    g->kill_wait_ms = WORKERS_KILL_WAIT_MS;
    g->guard_fd = -1;
    g->w = calloc((size_t)n, sizeof *g->w);
    if (!g->w)
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        g->w[i].index = i;
        g->w[i].errpipe = -1;
        g->w[i].group_gone = true;
    }
    int r = uv_timer_init(loop, &g->timer);
    if (r) {
        free(g->w);
        g->w = NULL;
        return r;
    }
    g->timer.data = g;
    return 0;
}

int workers_which(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* glibc's execvp without PATH */
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        int dlen = end ? (int)(end - p) : (int)strlen(p);
        struct stat st;
        /* an empty entry is the current directory */
        if ((size_t)snprintf(out, cap, "%.*s/%s", dlen, dlen ? p : ".", name) < cap &&
            stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        if (!end)
            return -ENOENT;
        p = end + 1;
    }
}

/* workers_which for the group's program, once: a worker's failed execve of every PATH entry
 * before it costs more than this whole search. NULL for a name with '/' or none found (the
 * worker's execvpe then says why). The last answer is kept. */
static const char *lookup_program(worker_group_t *g, const char *name)
{
    if (strchr(name, '/'))
        return NULL;
    if (g->exec_name && strcmp(g->exec_name, name) == 0)
        return g->exec_path;
    free(g->exec_name);
    free(g->exec_path);
    g->exec_path = NULL;
    char file[PATH_MAX];
    if ((g->exec_name = strdup(name)) && workers_which(name, file, sizeof file) == 0)
        g->exec_path = strdup(file);
    return g->exec_path;
}

/* The child between clone and exec, in the agent's memory (child_stack): only
 * async-signal-safe calls, and nothing the agent will read written but errno. Not
 * instrumented by ASan, whose stack bookkeeping before a call that does not return would take
 * the span from this stack to the agent's for one stack (and say so on the worker's stderr). */
static void __attribute__((noreturn, no_sanitize("address")))
child_exec(const struct worker_spawn *sp, const char *file, int errfd, pid_t parent,
           int guard_fd)
{
    /* The guard hears of the worker's group from the worker itself, before its program runs:
     * the exec lets the agent go on, but on a busy machine the program may fork and the agent
     * be killed before the agent runs one more line, and a group the guard never heard of
     * outlives it. This copy of the pipe's write end, closed by the exec, keeps the guard from
     * seeing the pipe end before it read this. Every signal is still blocked here: a guard
     * gone leaves a SIGPIPE pending, which ignoring drops before the reset could deliver it. */
    if (guard_fd >= 0) {
        int32_t v = (int32_t)getpid();
        if (write(guard_fd, &v, sizeof v) < 0)
            signal(SIGPIPE, SIG_IGN);
    }
    init_child_reset();
    setsid();
    /* The agent's death (even kill -9) takes the worker with it; the check closes the race
     * with a parent that died before prctl. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent)
        _exit(128 + SIGKILL);
    if ((sp->stdout_fd >= 0 && dup2(sp->stdout_fd, 1) < 0) ||
        (sp->stderr_fd >= 0 && dup2(sp->stderr_fd, 2) < 0)) {
        int e = errno;
        (void)!write(errfd, &e, sizeof e);
        _exit(126);
    }
    /* The CPUs were planned inside podrun's own cpuset, so this fails only when the cpuset
     * shrank since; the worker then runs where it may, and says so on its stderr. A refused
     * memory policy (no CAP_SYS_NICE) leaves the CPU binding, as DeepSpeed does. */
    if (sp->cpus && cpu_bind_self(sp->cpus, sp->mem_node) < 0) {
        static const char msg[] = "podrun: could not bind this worker to its CPUs (the "
                                  "container's cpuset changed?); it runs unbound\n";
        (void)!write(2, msg, sizeof msg - 1);
    }
    if (file)
        execve(file, sp->argv, sp->envp);
    execvpe(sp->argv[0], sp->argv, sp->envp);
    int e = errno;
    (void)!write(errfd, &e, sizeof e);
    _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* ---- the guard ---- */

#define GUARD_MAX_GROUPS 4096

/* Closes every descriptor from `lo` up, in a child between fork and exec. close_range(2) by its
 * system call number: glibc has a wrapper only from 2.34 on, newer than the glibc podrun's one-file
 * build runs on; before Linux 5.9, one close per possible descriptor. */
static void close_from(int lo)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lo, ~0U, 0) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = lo; fd < (max > 0 ? max : 1024); fd++)
        close((int)fd);
}

/* In the guard: collect groups (+pgid) and forget them (-pgid) until the pipe ends. */
static void __attribute__((noreturn)) guard_main(void)
{
    static pid_t groups[GUARD_MAX_GROUPS];
    int n = 0;
    for (;;) {
        int32_t v;
        ssize_t r = read(0, &v, sizeof v);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof v)
            break;
        if (v > 0 && n < GUARD_MAX_GROUPS) {
            groups[n++] = v;
        } else if (v < 0) {
            for (int i = 0; i < n; i++)
                if (groups[i] == -v) {
                    groups[i] = groups[--n];
                    break;
                }
        }
    }
    for (int i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    _exit(0);
}

int workers_guard_start(worker_group_t *g)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    sigset_t saved;
    init_fork_begin(&saved);
    pid_t pid = fork();
    if (pid == 0) {
        init_child_reset();
        setsid();   /* out of the agent's group: whoever kills that group must not kill this */
        prctl(PR_SET_NAME, "podrun-guard", 0, 0, 0);
        int nul = open("/dev/null", O_RDWR);
        if (dup2(p[0], 0) < 0)
            _exit(1);
        if (nul >= 0) {
            dup2(nul, 1);
            dup2(nul, 2);
        }
        close_from(3);   /* no listening socket or worker pipe may outlive the agent */
        guard_main();
    }
    int e = errno;
    init_fork_end(&saved);
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -e;
    }
    fcntl(p[1], F_SETFL, O_NONBLOCK);   /* the agent never waits on its guard */
    g->guard_fd = p[1];
    g->guard_pid = pid;
    return 0;
}

#define GUARD_REAP_MS 100

/* The guard exits as soon as it reads the end of its pipe: wait for that (bounded) and reap
 * it, so that no zombie of podrun's is left to whoever reaps after podrun. */
static void reap_guard(worker_group_t *g)
{
    if (g->guard_pid <= 0)
        return;
    int pfd = (int)syscall(SYS_pidfd_open, g->guard_pid, 0);
    if (pfd >= 0) {
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        while (poll(&p, 1, GUARD_REAP_MS) < 0 && errno == EINTR)
            ;
        close(pfd);
    }
    int ws;
    while (waitpid(g->guard_pid, &ws, WNOHANG) < 0 && errno == EINTR)
        ;
    g->guard_pid = 0;
}

static void guard_tell(worker_group_t *g, int32_t v)
{
    if (g->guard_fd >= 0 && write(g->guard_fd, &v, sizeof v) != (ssize_t)sizeof v) {
        close(g->guard_fd);   /* the guard is gone: go on without it */
        g->guard_fd = -1;
    }
}

struct child_args {
    const struct worker_spawn *sp;
    const char *file;
    int errfd;
    pid_t parent;
    int guard_fd;
};

static int __attribute__((no_sanitize("address"))) child_entry(void *arg)
{
    const struct child_args *a = arg;
    child_exec(a->sp, a->file, a->errfd, a->parent, a->guard_fd);
}

/* The child runs on its own stack in the agent's memory until its exec (CLONE_VM |
 * CLONE_VFORK, as posix_spawn does): no copy of the agent's page tables per worker and no
 * copy-on-write faults after it. The agent waits meanwhile, so one stack serves every spawn,
 * kept and grown as a spawn needs: untouched pages cost no memory, and a guard page below it
 * makes an overflow fault instead of writing over the agent's memory. execvpe puts PATH on it
 * and, for a script without "#!", a copy of argv. */
static char *child_stack(const struct worker_spawn *sp)
{
    static char *base;
    static size_t size;
    size_t argc = 0;
    while (sp->argv[argc])
        argc++;
    const char *path = getenv("PATH");
    long pg = sysconf(_SC_PAGESIZE);
    size_t need = (argc + 2) * sizeof(char *) + (path ? strlen(path) : 0) + 256 * 1024;
    need = (need + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    if (need > size) {
        if (base)
            munmap(base, size + (size_t)pg);
        size = 0;
        base = mmap(NULL, need + (size_t)pg, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (base == MAP_FAILED)
            return base = NULL;
        mprotect(base, (size_t)pg, PROT_NONE);
        size = need;
    }
    return base + pg + size;
}

int workers_spawn(worker_group_t *g, int i, const struct worker_spawn *sp)
{
    worker_t *w = &g->w[i];
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    struct child_args args = {sp, lookup_program(g, sp->argv[0]), pfd[1], getpid(), g->guard_fd};
    char *stack = child_stack(sp);
    if (!stack) {
        close(pfd[0]);
        close(pfd[1]);
        return -ENOMEM;
    }
    sigset_t saved;
    init_fork_begin(&saved);
    pid_t pid = clone(child_entry, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
    int e = errno;
    init_fork_end(&saved);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return -e;
    }
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    w->pid = pid;
    w->errpipe = pfd[0];
    w->exec_errno = 0;
    w->wstatus = 0;
    w->state = WORKER_RUNNING;
    w->group_gone = false;
    g->running++;   /* the guard has heard of it from the worker (child_exec) */
    return 0;
}

static void mark_gone(worker_group_t *g, worker_t *w)
{
    if (!w->group_gone) {
        w->group_gone = true;
        guard_tell(g, -(int32_t)w->pid);
    }
}

static bool group_alive(worker_group_t *g, worker_t *w)
{
    if (w->group_gone || w->pid <= 0)
        return false;
    if (w->state == WORKER_RUNNING)
        return true;
    if (kill(-w->pid, 0) < 0 && errno == ESRCH)
        mark_gone(g, w);
    return !w->group_gone;
}

int workers_alive(worker_group_t *g)
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += group_alive(g, &g->w[i]);
    return n;
}

static void finish_stop(worker_group_t *g)
{
    g->phase = STOP_DONE;
    uv_timer_stop(&g->timer);
    if (g->on_stopped)
        g->on_stopped(g);
}

static void check_stopped(worker_group_t *g)
{
    if ((g->phase == STOP_TERM || g->phase == STOP_KILL) && workers_alive(g) == 0)
        finish_stop(g);
}

static void on_timer(uv_timer_t *t)
{
    worker_group_t *g = t->data;
    if (g->phase == STOP_TERM) {
        if (workers_alive(g) == 0) {
            finish_stop(g);
            return;
        }
        uint64_t hold = 0;
        if (!g->grace_cut && !g->held && g->on_grace_end)
            g->on_grace_end(g, g->grace_ms);
        if (!g->grace_cut && !g->held && g->hold_kill && (hold = g->hold_kill(g)) > 0) {
            g->held = true;
            uv_timer_start(&g->timer, on_timer, hold, 0);
            return;
        }
        g->phase = STOP_KILL;
        workers_signal(g, SIGKILL);
        uv_timer_start(&g->timer, on_timer, g->kill_wait_ms, 0);
    } else if (g->phase == STOP_KILL) {
        finish_stop(g);   /* whatever is left is stuck in the kernel; the agent reports it */
    }
}

void workers_kill_held(worker_group_t *g)
{
    if (g->phase == STOP_TERM && g->held)
        uv_timer_start(&g->timer, on_timer, 0, 0);
}

worker_t *workers_reaped(worker_group_t *g, pid_t pid, int wstatus)
{
    worker_t *w = NULL;
    for (int i = 0; i < g->n && !w; i++)
        if (g->w[i].pid == pid && g->w[i].state == WORKER_RUNNING)
            w = &g->w[i];
    if (w) {
        w->state = WORKER_EXITED;
        w->wstatus = wstatus;
        clock_gettime(CLOCK_REALTIME, &w->exit_time);
        g->running--;
        if (w->errpipe >= 0) {
            int e = 0;
            if (read(w->errpipe, &e, sizeof e) == (ssize_t)sizeof e)
                w->exec_errno = e;
            close(w->errpipe);
            w->errpipe = -1;
        }
        /* the worker has had its chance to save: now the rest of its group hears the stop */
        if (group_alive(g, w) && g->phase == STOP_TERM && g->stop_to == WORKERS_STOP_WORKER_FIRST)
            kill(-w->pid, g->stop_signal);
        if (g->on_exit)
            g->on_exit(g, w);
    }
    check_stopped(g);
    return w;
}

void workers_signal(worker_group_t *g, int sig)
{
    for (int i = 0; i < g->n; i++) {
        worker_t *w = &g->w[i];
        if (!group_alive(g, w))
            continue;
        if (kill(-w->pid, sig) == 0 || errno != ESRCH)
            continue;
        if (w->state != WORKER_RUNNING)
            mark_gone(g, w);
        else
            /* forked but not yet out of setsid(): its group does not exist yet. The child was
             * forked with every signal blocked and unblocks only after resetting handlers to
             * their defaults, so the signal waits for it and then acts as on the worker. */
            kill(w->pid, sig);
    }
}

bool workers_exited_unreaped(const worker_t *w, int *wstatus)
{
    siginfo_t si = {0};
    if (w->state != WORKER_RUNNING || w->pid <= 0 ||
        waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
        return false;
    if (si.si_code == CLD_EXITED)
        *wstatus = (si.si_status & 0xff) << 8;
    else
        *wstatus = (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
    return true;
}

/* Reads a worker's exec-error pipe: its errno if exec failed, 0 once it succeeded (the pipe
 * closed on exec), -EAGAIN while the child has not got that far. */
static int read_errpipe(worker_t *w)
{
    int e = 0;
    ssize_t r = read(w->errpipe, &e, sizeof e);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return -EAGAIN;
    close(w->errpipe);
    w->errpipe = -1;
    if (r == (ssize_t)sizeof e)
        w->exec_errno = e;
    return w->exec_errno;
}

void workers_await_exec(worker_group_t *g, int timeout_ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd p[64];
        int n = 0;
        for (int i = 0; i < g->n && n < 64; i++)
            if (g->w[i].state == WORKER_RUNNING && g->w[i].errpipe >= 0 &&
                read_errpipe(&g->w[i]) == -EAGAIN)
                p[n++] = (struct pollfd){.fd = g->w[i].errpipe, .events = POLLIN};
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (n == 0 || left <= 0 || (poll(p, (nfds_t)n, (int)left) < 0 && errno != EINTR))
            return;
    }
}

/* A stop's signal: SIGKILL, and under WORKERS_STOP_GROUP any signal, to every live group; else
 * to each running worker alone, and to the groups whose worker has already exited. */
static void stop_signal_all(worker_group_t *g, int sig)
{
    if (sig == SIGKILL || g->stop_to == WORKERS_STOP_GROUP) {
        workers_signal(g, sig);
        return;
    }
    for (int i = 0; i < g->n; i++) {
        worker_t *w = &g->w[i];
        if (!group_alive(g, w))
            continue;
        if (w->state == WORKER_RUNNING)
            kill(w->pid, sig);
        else if (kill(-w->pid, sig) < 0 && errno == ESRCH)
            mark_gone(g, w);
    }
}

void workers_stop_all(worker_group_t *g, int sig, uint64_t grace_ms)
{
    switch (g->phase) {
    case STOP_NONE:
        g->phase = STOP_TERM;
        g->stop_signal = sig;
        g->grace_ms = grace_ms;
        g->grace_cut = sig == SIGKILL;
        g->held = false;
        stop_signal_all(g, sig);
        /* even when nothing is left, on_stopped comes from the loop, never from inside here */
        uv_timer_start(&g->timer, on_timer, workers_alive(g) ? grace_ms : 0, 0);
        break;
    case STOP_TERM:
        stop_signal_all(g, sig);
        if (sig == SIGKILL) {
            g->grace_cut = true;
            uv_timer_start(&g->timer, on_timer, 0, 0);
        }
        break;
    case STOP_KILL:
        workers_signal(g, SIGKILL);
        break;
    case STOP_DONE:
        break;
    }
}

void workers_reset(worker_group_t *g)
{
    uv_timer_stop(&g->timer);
    g->phase = STOP_NONE;
    g->stop_signal = 0;
    g->grace_cut = false;
    g->held = false;
    g->running = 0;
    for (int i = 0; i < g->n; i++) {
        worker_t *w = &g->w[i];
        if (w->errpipe >= 0)
            close(w->errpipe);
        memset(w, 0, sizeof *w);
        w->index = i;
        w->errpipe = -1;
        w->group_gone = true;
    }
}

void workers_close(worker_group_t *g)
{
    for (int i = 0; g->w && i < g->n; i++)
        if (g->w[i].errpipe >= 0) {
            close(g->w[i].errpipe);
            g->w[i].errpipe = -1;
        }
    free(g->w);
    g->w = NULL;
    free(g->exec_name);
    free(g->exec_path);
    g->exec_name = g->exec_path = NULL;
    if (g->guard_fd >= 0) {
        close(g->guard_fd);   /* the guard reads the end and exits */
        g->guard_fd = -1;
    }
    reap_guard(g);
    if (!uv_is_closing((uv_handle_t *)&g->timer))
        uv_close((uv_handle_t *)&g->timer, NULL);
}
