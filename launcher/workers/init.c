/* launcher/workers/init.c — reaping and signals: what a container's PID 1 owes the processes below it.
 *
 * Reaping. podrun reaps with waitpid(-1, WNOHANG) in a loop on every SIGCHLD, so re-parented
 * grandchildren are reaped as promptly as the workers themselves and no zombie is left. That
 * scheme steals the exit status of any child someone else is waiting for, and libuv's uv_spawn
 * is exactly such a someone: it reaps its children by pid from its own SIGCHLD watcher. So podrun
 * never uses uv_spawn; every child is started by launcher/workers/workers.c, and each reaped pid is handed
 * to the agent, which asks the worker group whether the pid is one of its workers. (A child
 * started any other way would have its status taken here; anything that needs a child must go
 * through workers.c.) When podrun is not PID 1 it makes itself a child subreaper
 * (PR_SET_CHILD_SUBREAPER), so orphans of its workers come to it instead of to the real init.
 *
 * Signals. SIGCHLD and the forwarded signals are uv_signal_t watchers on the one loop: their
 * handlers only note the signal, the loop delivers it, and a PID 1 gets signals only for which
 * it installed a handler — these watchers are those handlers. SIGTTIN and SIGTTOU are ignored
 * (as tini does) so podrun never stops when writing to a terminal it does not control, and
 * SIGPIPE is ignored so a closed stdout reader becomes an EPIPE error, not podrun's death.
 * Children get all of that undone before exec (init_child_reset).
 *
 * A signal that was ignored when podrun started (SIGHUP under nohup, SIGINT and SIGQUIT for a
 * command a script put in the background) was ignored on purpose by whoever started it: podrun
 * does not watch it, so it is neither acted on nor forwarded, and the workers start with it
 * ignored too, as they would under any launcher that execs them. SIGCHLD is the exception:
 * podrun cannot reap without it, and its workers get it at its default. */
#include "launcher/workers/init.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

const int init_forwarded[INIT_NUM_FORWARDED] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
                                                SIGUSR2};

static struct {
    uv_signal_t chld;
    uv_signal_t fwd[INIT_NUM_FORWARDED];
    init_child_cb on_child;
    init_signal_cb on_signal;
    void *arg;
    sigset_t start_mask;   /* the mask podrun was started with; children get it back */
    sigset_t start_ignored;   /* ignored when podrun started: they stay ignored, for children too */
    bool started;
} st;

bool init_is_pid1(void)
{
    return getpid() == 1;
}

int init_become_subreaper(void)
{
    if (init_is_pid1())
        return 0;
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 ? -errno : 0;
}

void init_reap(void)
{
    for (;;) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid > 0) {
            if (st.on_child)
                st.on_child(st.arg, pid, ws);
            continue;
        }
        if (pid < 0 && errno == EINTR)
            continue;
        break;   /* 0: children remain but none has exited; ECHILD: none at all */
    }
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    init_reap();
}

static void on_forwarded(uv_signal_t *h, int signum)
{
    (void)h;
    if (st.on_signal)
        st.on_signal(st.arg, signum);
}

static void note_ignored(void)
{
    sigemptyset(&st.start_ignored);
    for (int s = 1; s < NSIG; s++) {
        struct sigaction old;
        if (s != SIGCHLD && sigaction(s, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            sigaddset(&st.start_ignored, s);
    }
}

static bool ignored_at_start(int sig)
{
    return sigismember(&st.start_ignored, sig) == 1;
}

int init_start(uv_loop_t *loop, init_child_cb on_child, init_signal_cb on_signal, void *arg)
{
    st.on_child = on_child;
    st.on_signal = on_signal;
    st.arg = arg;
    sigprocmask(SIG_SETMASK, NULL, &st.start_mask);
    note_ignored();
    signal(SIGTTIN, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);

    int r = uv_signal_init(loop, &st.chld);
    if (!r)
        r = uv_signal_start(&st.chld, on_sigchld, SIGCHLD);
    /* Every handle is initialised, so that init_stop closes them all; only those not ignored
     * at start are watched. */
    for (int i = 0; !r && i < INIT_NUM_FORWARDED; i++) {
        r = uv_signal_init(loop, &st.fwd[i]);
        if (!r && !ignored_at_start(init_forwarded[i]))
            r = uv_signal_start(&st.fwd[i], on_forwarded, init_forwarded[i]);
    }
    /* A signal blocked by whoever started podrun would never reach the watchers. */
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, SIGCHLD);
    for (int i = 0; i < INIT_NUM_FORWARDED; i++)
        if (!ignored_at_start(init_forwarded[i]))
            sigaddset(&ours, init_forwarded[i]);
    sigprocmask(SIG_UNBLOCK, &ours, NULL);
    st.started = true;
    return r;
}

void init_stop(void)
{
    if (!st.started)
        return;
    uv_close((uv_handle_t *)&st.chld, NULL);
    for (int i = 0; i < INIT_NUM_FORWARDED; i++)
        uv_close((uv_handle_t *)&st.fwd[i], NULL);
    st.started = false;
}

void init_fork_begin(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, saved);
}

void init_fork_end(const sigset_t *saved)
{
    sigprocmask(SIG_SETMASK, saved, NULL);
}

void init_child_reset(void)
{
    /* Handlers installed by libuv would write into the parent's signal pipe; signals podrun
     * ignores for itself would stay ignored across exec. Back to what podrun was started with:
     * the default, or ignored where it was ignored then; then the original mask. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP)
            continue;
        sa.sa_handler = sigismember(&st.start_ignored, s) == 1 ? SIG_IGN : SIG_DFL;
        sigaction(s, &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, &st.start_mask, NULL);
}

int init_signal_children(int sig, pid_t spare, pid_t *pids, int max)
{
    /* /proc/self/task/<tid>/children lists the children of each thread; re-parented orphans
     * are listed under the thread that adopted them, so every thread is read. */
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%.16s/children", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        long pid;
        while (fscanf(f, "%ld", &pid) == 1)
            if (pid > 0 && pid != spare && kill((pid_t)pid, sig) == 0) {
                if (n < max)
                    pids[n] = (pid_t)pid;
                n++;
            }
        fclose(f);
    }
    closedir(d);
    return n;
}

int init_proc_stat(pid_t pid, char *name, size_t len, char *state, pid_t *pgrp)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    int pg;
    if (!open || !close || close < open || sscanf(close + 1, " %c %*d %d", state, &pg) != 2)
        return -1;
    snprintf(name, len, "%.*s", (int)(close - open - 1), open + 1);
    *pgrp = (pid_t)pg;
    return 0;
}

int init_proc_label(pid_t pid, char *buf, size_t len)
{
    char name[64], state;
    pid_t pg;
    if (init_proc_stat(pid, name, sizeof name, &state, &pg) < 0) {
        snprintf(buf, len, "%d", (int)pid);
        return -1;
    }
    snprintf(buf, len, "%d (%s)", (int)pid, name);
    return state != 'Z';
}

int init_group_members(pid_t pgid, char *buf, size_t len)
{
    DIR *d = opendir("/proc");
    int n = 0;
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end, name[64], state;
        long pid = strtol(e->d_name, &end, 10);
        pid_t pg;
        if (*end || pid <= 0 || init_proc_stat((pid_t)pid, name, sizeof name, &state, &pg) < 0 ||
            pg != pgid || state == 'Z')
            continue;
        n++;
        if (used < len) {
            int k = snprintf(buf + used, len - used, "%s%ld (%s)", used ? ", " : "", pid, name);
            used = k > 0 && used + (size_t)k < len ? used + (size_t)k : len;
        }
    }
    closedir(d);
    return n;
}
