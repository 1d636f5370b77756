/* launcher/fanout.c — the head of a several-host `deepspeed` job (see fanout.h).
 *
 * One process, no loop library: it waits in poll(2) on a signalfd (SIGINT, SIGTERM, SIGCHLD)
 * and on the stderr pipes of what it started, so a signal, a child's exit and pdsh's messages
 * are handled in one place. Every child runs in a process group of its own: a Ctrl-C at the
 * terminal reaches the head alone, which then stops the job on purpose instead of pdsh's
 * "one Ctrl-C prints status" dance. */
#include "launcher/fanout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/env/environ.h"
#include "launcher/fanout_cmd.h"
#include "launcher/workers/workers.h"
#include "launcher/frontends/deepspeed_cli.h"
#include "launcher/frontends/deepspeed_hosts.h"
#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define FANOUT_MAX 1024          /* pdsh -f: DeepSpeed's PDSH_MAX_FAN_OUT */
#define FANOUT_STOP_GRACE_MS 10000   /* after the agents' own --term-timeout */
#define FANOUT_STOP_AGAIN_MS 2000    /* an agent that wrote its pid file after a stop ran */
#define FANOUT_LINE 4096

struct child {
    pid_t pid;
    int err_fd;                  /* its stderr, -1 when closed or not piped */
    int status;
    bool done;
    char line[FANOUT_LINE];
    size_t len;
};

struct head {
    const struct cfg *c;
    struct resources hosts;
    char **words;                /* --launcher_args */
    bool exec, pdsh;
    char *command, *stop;        /* the remote command and the stop command */
    struct child *run;           /* one pdsh, or one per host */
    int nrun;
    bool *spoke;                 /* a host printed something: it was reached */
    int *codes;                  /* each host's exit code as pdsh reports it (0: none said) */
    bool stopping;
    struct child *stop_ch;       /* the latest stop fan-out */
    int nstop;
    long long stop_deadline, stop_again;
    int signal;                  /* what stopped the head, 0 if none */
    bool unreachable;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("podrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static bool in_path(const char *prog)
{
    char buf[PATH_MAX];
    return workers_which(prog, buf, sizeof buf) == 0;
}

/* Forks argv in a process group of its own, stderr into a pipe when want_err; signals unblocked
 * in the child. */
static int spawn(char *const *argv, bool want_err, struct child *ch)
{
    int p[2] = {-1, -1};
    if (want_err && pipe2(p, O_CLOEXEC))
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = -errno;
        if (p[0] >= 0)
            close(p[0]), close(p[1]);
        return e;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0);
        if (want_err)
            dup2(p[1], 2);
        execvp(argv[0], argv);
        fprintf(stderr, "podrun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    memset(ch, 0, sizeof *ch);
    ch->pid = pid;
    ch->err_fd = -1;
    if (want_err) {
        close(p[1]);
        ch->err_fd = p[0];
    }
    return 0;
}

/* ---- what goes to the hosts ---- */

struct exports {
    char **v;
    int n, cap;
};

static int export_add(void *arg, const char *key, const char *value)
{
    struct exports *x = arg;
    size_t kn = strlen(key);
    for (int i = 0; i < x->n; i++)   /* a later file's value wins, as in DeepSpeed's dict */
        if (!strncmp(x->v[i], key, kn) && x->v[i][kn] == '=') {
            free(x->v[i]);
            x->v[i] = x->v[--x->n];
        }
    if (x->n + 1 >= x->cap) {
        int cap = x->cap ? x->cap * 2 : 32;
        char **v = realloc(x->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        x->v = v;
        x->cap = cap;
    }
    if (asprintf(&x->v[x->n], "%s=%s", key, value) < 0)
        return -ENOMEM;
    x->n++;
    return 0;
}

static void exports_free(struct exports *x)
{
    for (int i = 0; i < x->n; i++)
        free(x->v[i]);
    free(x->v);
}

/* DeepSpeed's exports: PYTHONPATH with the working directory in front, the NCCL*, PYTHON*, ...
 * variables, then ~/.deepspeed_env and ./.deepspeed_env (DS_ENV_FILE names the file). */
static int gather_exports(struct exports *x, char *const *envp, const char *cwd)
{
    int r = 0;
    const char *pp = env_get(envp, "PYTHONPATH");
    char *v = NULL;
    if (asprintf(&v, "%s%s%s", cwd, pp && *pp ? ":" : "", pp ? pp : "") < 0)
        return -ENOMEM;
    r = export_add(x, "PYTHONPATH", v);
    free(v);
    for (char *const *e = envp; e && *e && !r; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !strncmp(*e, "PYTHONPATH=", 11))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        if (deepspeed_hosts_exported(name))
            r = export_add(x, name, eq + 1);
    }
    const char *file = env_get(envp, "DS_ENV_FILE");
    file = file && *file ? file : ".deepspeed_env";
    const char *home = env_get(envp, "HOME");
    char paths[2][PATH_MAX + 256];
    int np = 0;
    if (file[0] == '/') {
        snprintf(paths[np++], sizeof paths[0], "%.4000s", file);
    } else {
        if (home && *home)
            snprintf(paths[np++], sizeof paths[0], "%.4000s/%.250s", home, file);
        snprintf(paths[np++], sizeof paths[0], "%.4000s/%.250s", cwd, file);
    }
    for (int i = 0; i < np && !r; i++) {
        if (i == 1 && !strcmp(paths[0], paths[1]))
            break;
        FILE *f = fopen(paths[i], "r");
        if (!f)
            continue;
        char *text = malloc(1 << 20);
        size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
        if (!text)
            return -ENOMEM;
        char err[512];
        r = deepspeed_hosts_env_file(text, n, paths[i], export_add, x, err, sizeof err);
        free(text);
        if (r) {
            say("%s", err);
            return -EINVAL;
        }
    }
    return r;
}

/* ---- running ---- */

/* Starts `command` on every host: one pdsh, or per host ssh (sh -c in exec mode). Only the job's
 * own pdsh has its stderr read (want_err); the stop's goes straight to the head's. */
static int start_all(struct head *h, const char *command, bool want_err, struct child **out,
                     int *nout)
{
    int n = h->pdsh ? 1 : (int)h->hosts.count;
    struct child *ch = calloc((size_t)n, sizeof *ch);
    if (!ch)
        return -ENOMEM;
    int r = 0;
    if (h->pdsh) {
        size_t len = 1;
        for (size_t i = 0; i < h->hosts.count; i++)
            len += strlen(h->hosts.nodes[i].host) + 1;
        char *list = calloc(1, len), fan[16], **argv = NULL;
        for (size_t i = 0; list && i < h->hosts.count; i++)
            strcat(strcat(list, i ? "," : ""), h->hosts.nodes[i].host);
        int fanout = h->hosts.count < FANOUT_MAX ? (int)h->hosts.count : FANOUT_MAX;
        r = list ? fanout_cmd_pdsh_argv(list, fanout, h->words, h->exec, command, fan, &argv)
                 : -ENOMEM;
        if (!r)
            r = spawn(argv, want_err, &ch[0]);
        free(argv);
        free(list);
    }
    for (int i = 0; !h->pdsh && i < n && !r; i++) {
        const char *host = h->hosts.nodes[i].host;
        char *cmd = NULL, port[16];
        if ((r = fanout_cmd_expand_host(command, host, i, &cmd)))
            break;
        char *argv[8];
        int k = 0;
        if (h->exec) {
            argv[k++] = (char *)"sh", argv[k++] = (char *)"-c";
        } else {
            argv[k++] = (char *)"ssh";
            if (h->c->ds_ssh_port) {
                snprintf(port, sizeof port, "%d", h->c->ds_ssh_port);
                argv[k++] = (char *)"-p", argv[k++] = port;
            }
            argv[k++] = (char *)host;
        }
        argv[k++] = cmd;
        argv[k] = NULL;
        r = spawn(argv, false, &ch[i]);
        free(cmd);
    }
    if (r) {
        for (int i = 0; i < n; i++)
            if (ch[i].pid > 0)
                kill(-ch[i].pid, SIGKILL);
        free(ch);
        return r;
    }
    *out = ch;
    *nout = n;
    return 0;
}

/* The host a pdsh line is about: "pdsh@HEAD: HOST: ..." (pdsh's own) or "HOST: ..." (the
 * host's output), HOST as given or cut at its first dot (pdsh drops a domain all hosts share).
 * Returns its index, -1 if none; *rest is the text after "HOST: ". */
static int line_host(struct head *h, const char *line, bool *from_pdsh, const char **rest)
{
    *from_pdsh = !strncmp(line, "pdsh@", 5);
    const char *p = line;
    if (*from_pdsh) {
        p = strstr(line, ": ");
        if (!p)
            return -1;
        p += 2;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < h->hosts.count; i++) {
            const char *name = h->hosts.nodes[i].host, *dot = strchr(name, '.');
            size_t n = pass == 0 ? strlen(name) : dot && !op_is_addr(name) ? (size_t)(dot - name)
                                                                           : 0;
            if (n && !strncmp(p, name, n) && p[n] == ':' && p[n + 1] == ' ') {
                *rest = p + n + 2;
                return (int)i;
            }
        }
    return -1;
}

static void start_stop(struct head *h, const char *why);

/* One line of pdsh's stderr: passed through; a host whose command exited 255 before its agent
 * said anything was not reached. */
static void on_line(struct head *h, const char *line)
{
    fprintf(stderr, "%s\n", line);
    bool from_pdsh;
    const char *rest = NULL;
    int i = line_host(h, line, &from_pdsh, &rest);
    if (i < 0)
        return;
    if (!from_pdsh) {
        /* the agent or its workers spoke: the host was reached (ssh's own errors do not count) */
        if (!strncmp(rest, "podrun", 6) || rest[0] == '[')
            h->spoke[i] = true;
        return;
    }
    const char *ec = strstr(rest, "exited with exit code ");
    if (ec)
        h->codes[i] = atoi(ec + strlen("exited with exit code "));
    if (ec && h->codes[i] == 255 && !h->spoke[i] && !h->unreachable) {
        h->unreachable = true;
        char why[512];
        snprintf(why, sizeof why, "host %s (node rank %d) could not be reached by pdsh (its "
                 "command exited 255 before the host said anything; check that it is up and "
                 "that `ssh %s true` works from here)", h->hosts.nodes[i].host, i,
                 h->hosts.nodes[i].host);
        say("%s; stopping this job on every other host", why);
        start_stop(h, NULL);
    }
}

static void drain(struct head *h, struct child *ch, bool eof)
{
    char buf[4096];
    ssize_t n = eof ? 0 : read(ch->err_fd, buf, sizeof buf);
    if (n <= 0) {
        if (n < 0 && errno == EINTR)
            return;
        if (ch->len) {
            ch->line[ch->len] = '\0';
            on_line(h, ch->line);
            ch->len = 0;
        }
        close(ch->err_fd);
        ch->err_fd = -1;
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || ch->len + 1 >= sizeof ch->line) {
            ch->line[ch->len] = '\0';
            on_line(h, ch->line);
            ch->len = 0;
            if (buf[i] == '\n')
                continue;
        }
        ch->line[ch->len++] = buf[i];
    }
}

static bool all_done(struct child *ch, int n);

/* One round of the stop fan-out, unless the previous one still runs. A stop that raced an agent
 * still starting (no pid file yet) is repeated every FANOUT_STOP_AGAIN_MS while pdsh runs. */
static void run_stop(struct head *h)
{
    h->stop_again = now_ms() + FANOUT_STOP_AGAIN_MS;
    if (h->stop_ch && !all_done(h->stop_ch, h->nstop))
        return;
    free(h->stop_ch);
    h->stop_ch = NULL;
    h->nstop = 0;
    if (start_all(h, h->stop, false, &h->stop_ch, &h->nstop))
        say("cannot start the stop command; pdsh is stopped at the deadline");
}

/* The stop fan-out: each host's agent of this job gets SIGTERM through its pid file. */
static void start_stop(struct head *h, const char *why)
{
    if (h->stopping)
        return;
    h->stopping = true;
    if (why)
        say("%s; stopping this job's agents on every host", why);
    h->stop_deadline = now_ms() + (long long)h->c->term_timeout_ms + FANOUT_STOP_GRACE_MS;
    run_stop(h);
}

static bool all_done(struct child *ch, int n)
{
    for (int i = 0; i < n; i++)
        if (!ch[i].done || ch[i].err_fd >= 0)
            return false;
    return true;
}

static void reap(struct child *ch, int n, pid_t pid, int status)
{
    for (int i = 0; i < n; i++)
        if (ch[i].pid == pid) {
            ch[i].done = true;
            ch[i].status = status;
        }
}

static int code_of(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int wait_loop(struct head *h, int sfd)
{
    bool killed = false;
    for (;;) {
        if (all_done(h->run, h->nrun))
            break;
        struct pollfd p[1 + 64];
        struct child *who[1 + 64];
        int n = 0;
        p[n].fd = sfd, p[n].events = POLLIN, who[n++] = NULL;
        for (int i = 0; i < h->nrun && n < 65; i++)
            if (h->run[i].err_fd >= 0)
                p[n].fd = h->run[i].err_fd, p[n].events = POLLIN, who[n++] = &h->run[i];
        int timeout = -1;
        if (h->stopping && !killed) {
            long long t = now_ms(), next = h->stop_again < h->stop_deadline ? h->stop_again
                                                                              : h->stop_deadline;
            timeout = next > t ? (int)(next - t) : 0;
        }
        int r = poll(p, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r == 0 && h->stopping && !killed && now_ms() < h->stop_deadline) {
            run_stop(h);
        } else if (r == 0 && h->stopping && !killed) {
            /* the agents did not go in time: pdsh (and in exec mode what it runs) goes */
            say("the hosts' agents did not stop within %llu s; killing pdsh",
                (unsigned long long)(h->c->term_timeout_ms / 1000 + FANOUT_STOP_GRACE_MS / 1000));
            for (int i = 0; i < h->nrun; i++)
                if (!h->run[i].done)
                    kill(-h->run[i].pid, SIGKILL);
            killed = true;
        }
        for (int i = 1; i < n && r > 0; i++)
            if (p[i].revents)
                drain(h, who[i], !(p[i].revents & POLLIN));
        if (r > 0 && p[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                if (h->signal && !killed) {   /* a second one: no more waiting */
                    for (int i = 0; i < h->nrun; i++)
                        if (!h->run[i].done)
                            kill(-h->run[i].pid, SIGKILL);
                    killed = true;
                    continue;
                }
                h->signal = (int)si.ssi_signo;
                char why[64];
                snprintf(why, sizeof why, "%s received", strsignal(h->signal));
                start_stop(h, why);
            }
        }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            reap(h->run, h->nrun, pid, st);
            reap(h->stop_ch, h->nstop, pid, st);
        }
    }
    /* the stop fan-out is short; wait for it so that nothing of ours outlives the head */
    for (int i = 0; i < h->nstop; i++)
        if (!h->stop_ch[i].done)
            waitpid(h->stop_ch[i].pid, &h->stop_ch[i].status, 0);
    if (h->signal)
        return 128 + h->signal;
    int code = 0;
    for (int i = 0; i < h->nrun; i++)
        if (code_of(h->run[i].status) > code)
            code = code_of(h->run[i].status);
    /* pdsh -S gives the largest code, which is a stopped node's (170-174) where a worker failed
     * elsewhere: the node that failed first exits with its worker's code, and so does the head */
    const struct cfg *c = h->c;
    for (size_t i = 0; code && !h->unreachable && i < h->hosts.count; i++) {
        int k = h->codes[i];
        if (k && k != c->exit_code_peer_failure && k != c->exit_code_peer_lost &&
            k != c->exit_code_store_lost && k != c->exit_code_rdzv_timeout)
            return k;
    }
    return code;
}

static int prepare(struct head *h, char **opts, int nopts, char **envp)
{
    const struct cfg *c = h->c;
    char err[512], cwd[PATH_MAX], self[PATH_MAX], run_id[17];
    int r = deepspeed_hosts_world_decode(c->ds_world_info, &h->hosts, err, sizeof err);
    if (!r)
        r = deepspeed_hosts_words_split(c->ds_launcher_args, &h->words, NULL, err, sizeof err);
    if (r) {
        say("%s", err);
        return r;
    }
    h->exec = fanout_cmd_rcmd_is_exec(h->words, env_get(envp, "PDSH_RCMD_TYPE"));
    h->pdsh = c->ds_launcher == CFG_DS_LAUNCH_PDSH && in_path("pdsh");
    if (c->ds_launcher == CFG_DS_LAUNCH_PDSH && !h->pdsh)
        say("pdsh is not installed; starting each host's agent with %s",
            h->exec ? "sh -c (PDSH_RCMD_TYPE=exec)" : "ssh");
    if (!getcwd(cwd, sizeof cwd))
        return -errno;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -errno;
    self[n] = '\0';
    podrun_random_id(run_id, 16);
    struct exports x = {0};
    if ((r = gather_exports(&x, envp, cwd))) {
        exports_free(&x);
        return r;
    }
    char **fwd = NULL;
    int nfwd = 0;
    if ((r = deepspeed_cli_forward_options(opts, nopts, &fwd, &nfwd))) {
        exports_free(&x);
        return r;
    }
    bool addrs = h->exec;
    for (size_t i = 0; i < h->hosts.count && addrs; i++)
        addrs = op_is_addr(h->hosts.nodes[i].host);
    struct fanout_cmd_agent rem = {
        .podrun = self, .world_info = c->ds_world_info, .master_addr = c->master_addr,
        .master_port = c->master_port, .run_id = run_id, .pid_dir = c->tmpdir,
        .addr_is_host = addrs, .name_is_host = h->exec, .options = fwd, .noptions = nfwd,
        .program = c->program, .program_argc = c->program_argc, .exports = x.v,
        .nexports = x.n, .cwd = cwd, .venv_script = c->ds_venv_script,
    };
    r = fanout_cmd_start(&rem, &h->command);
    if (!r)
        r = fanout_cmd_stop(&rem, &h->stop);
    free(fwd);
    exports_free(&x);
    if (!r && h->pdsh && !h->exec && !getenv("PDSH_RCMD_TYPE"))
        setenv("PDSH_RCMD_TYPE", "ssh", 1);
    if (!r && h->pdsh && c->ds_ssh_port) {
        const char *old = getenv("PDSH_SSH_ARGS_APPEND");
        char *v = NULL;
        if (asprintf(&v, "%s%s-p %d", old ? old : "", old && *old ? " " : "",
                     c->ds_ssh_port) < 0)
            return -ENOMEM;
        setenv("PDSH_SSH_ARGS_APPEND", v, 1);
        free(v);
    }
    h->spoke = calloc(h->hosts.count, sizeof *h->spoke);
    h->codes = calloc(h->hosts.count, sizeof *h->codes);
    return r ? r : h->spoke && h->codes ? 0 : -ENOMEM;
}

int fanout_run(const struct cfg *c, char **opts, int nopts, char **envp)
{
    struct head h;
    memset(&h, 0, sizeof h);
    h.c = c;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int r = sfd < 0 ? -errno : prepare(&h, opts, nopts, envp);
    if (!r) {
        say("starting %zu hosts' agents through %s%s (job store at %s:%d)", h.hosts.count,
            h.pdsh ? "pdsh" : h.exec ? "sh" : "ssh", h.exec ? " -R exec" : "", c->master_addr,
            c->master_port);
        r = start_all(&h, h.command, true, &h.run, &h.nrun);
    }
    int code;
    if (r) {
        if (r != -EINVAL)
            say("cannot start the hosts' agents: %s", podrun_strerror(r));
        code = r == -EINVAL ? 2 : 1;
    } else {
        code = wait_loop(&h, sfd);
        if (code < 0) {
            say("waiting for the hosts failed: %s", podrun_strerror(code));
            code = 1;
        }
    }
    if (sfd >= 0)
        close(sfd);
    free(h.run);
    free(h.stop_ch);
    free(h.spoke);
    free(h.codes);
    free(h.command);
    free(h.stop);
    deepspeed_hosts_words_free(h.words);
    resources_free(&h.hosts);
    return code;
}
