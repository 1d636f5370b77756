/* launcher/agent.c — the state machine (see agent.h), on one libuv loop.
 *
 * Events and what they do:
 *   a worker exits non-zero while RUNNING  → it is the root cause; stop the others, exit with
 *                                            its code (128+signal for a signal death)
 *   every worker exited 0                  → EXITING, after stopping whatever the workers
 *                                            left running in their process groups
 *   SIGTERM / SIGINT                       → stop the job with that signal, exit 128+signal; a
 *                                            second one while stopping sends SIGKILL at once
 *   SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2      → forwarded to every worker process group
 *   an orphan is reaped                    → nothing else to do (init.c reaped it)
 *   the stop completes (or gives up)       → EXITING: drain the pipes, print the report, write
 *                                            the termination log, flush, close, return. */
#include "agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "env.h"
#include "init.h"
#include "logs.h"
#include "report.h"
#include "workers.h"

#define AGENT_FLUSH_MS 10000   /* bound on writing the last output to a stalled reader */

enum agent_state { AGENT_INIT, AGENT_RENDEZVOUS, AGENT_RUNNING, AGENT_STOPPING, AGENT_EXITING,
                   AGENT_DONE };

struct agent {
    uv_loop_t *loop;
    struct cfg *cfg;
    char **envp;
    enum agent_state state;
    worker_group_t wg;
    bool wg_ready;
    struct logs logs;
    struct log_stream *streams;    /* 2 per worker: stdout, stderr */
    int n;

    /* what rendezvous decided */
    int group_rank, group_world_size, world_size, rank_base;
    int restart_count;
    const char *master_addr;
    int master_port;
    const char *run_id;
    bool use_agent_store;

    char base_dir[PATH_MAX];       /* --log-dir, or a private temporary directory */
    char run_dir[PATH_MAX];        /* base/<run_id>/attempt_<n> */
    bool own_base, keep_files;
    char **argv;

    int exit_code;
    int stop_signal;               /* the signal that stopped podrun, 0 if none */
    int failed;                    /* local rank of the root cause, -1 if none */
    char host[256];
    char rdzv_id_buf[40];
    uv_timer_t exit_timer;
};

static const char *state_name(enum agent_state s)
{
    static const char *names[] = {"INIT", "RENDEZVOUS", "RUNNING", "STOPPING", "EXITING", "DONE"};
    return names[s];
}

static void enter_exiting(struct agent *a);

static void set_state(struct agent *a, enum agent_state s)
{
    if (getenv("PODRUN_DEBUG"))
        logs_message(&a->logs, "state %s -> %s", state_name(a->state), state_name(s));
    a->state = s;
}

/* ---------- files: the run directory, error files, log files ---------- */

static int mkdir_p(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        int r = mkdir(path, 0755);
        *p = '/';
        if (r < 0 && errno != EEXIST)
            return -errno;
    }
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. */
static int pathf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pathf(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void path_safe(const char *in, char *out, size_t len)
{
    snprintf(out, len, "%s", in);
    for (char *p = out; *p; p++)
        if (*p == '/' || (p == out && *p == '.'))
            *p = '_';
}

static void rank_path(struct agent *a, int lr, const char *file, char *out, size_t len)
{
    pathf(out, len, "%s/%d/%s", a->run_dir, lr, file);
}

static int prepare_dirs(struct agent *a)
{
    struct cfg *c = a->cfg;
    bool masks = false;
    for (int i = 0; i < a->n; i++)
        masks |= c->redirect_mask[i] || c->tee_mask[i];
    if (c->log_dir) {
        if (pathf(a->base_dir, sizeof a->base_dir, "%s", c->log_dir))
            return -ENAMETOOLONG;
        a->keep_files = true;
    } else {
        const char *tmp = getenv("TMPDIR");
        if (pathf(a->base_dir, sizeof a->base_dir, "%s/podrun_XXXXXX", tmp && *tmp ? tmp : "/tmp"))
            return -ENAMETOOLONG;
        if (!mkdtemp(a->base_dir))
            return -errno;
        a->own_base = true;
        a->keep_files = masks;
    }
    char id[256];
    path_safe(a->run_id, id, sizeof id);
    if (pathf(a->run_dir, sizeof a->run_dir, "%s/%s/attempt_%d", a->base_dir, id,
              a->restart_count))
        return -ENAMETOOLONG;
    for (int i = 0; i < a->n; i++) {
        char d[PATH_MAX + 16];
        if (pathf(d, sizeof d, "%s/%d", a->run_dir, i))
            return -ENAMETOOLONG;
        int r = mkdir_p(d);
        if (r)
            return r;
        rank_path(a, i, "error.json", d, sizeof d);
        unlink(d);   /* a stale error file would name the wrong root cause */
    }
    if (masks && !c->log_dir)
        logs_message(&a->logs, "worker log files are in %s", a->run_dir);
    return 0;
}

static void remove_dirs(struct agent *a)
{
    if (a->keep_files || !a->base_dir[0])
        return;
    char p[PATH_MAX + 32];
    for (int i = 0; i < a->n; i++) {
        rank_path(a, i, "error.json", p, sizeof p);
        unlink(p);
        if (!pathf(p, sizeof p, "%s/%d", a->run_dir, i))
            rmdir(p);
    }
    rmdir(a->run_dir);
    char *slash = strrchr(a->run_dir, '/');
    if (slash) {
        *slash = 0;
        rmdir(a->run_dir);
        *slash = '/';
    }
    if (a->own_base)
        rmdir(a->base_dir);
}

/* Log file for one stream when --log-dir, --tee or --redirects ask for one. */
static int open_log_file(struct agent *a, int lr, int bit)
{
    struct cfg *c = a->cfg;
    bool any_mask = false;
    for (int i = 0; i < a->n; i++)
        any_mask |= c->redirect_mask[i] || c->tee_mask[i];
    /* --log-dir alone keeps both streams of every rank; with -r/-t only what they name */
    bool want = any_mask ? ((c->redirect_mask[lr] | c->tee_mask[lr]) & bit) : c->log_dir != NULL;
    if (!want)
        return -1;
    char p[PATH_MAX + 32];
    rank_path(a, lr, bit == 1 ? "stdout.log" : "stderr.log", p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        logs_message(&a->logs, "cannot write %s: %s; that stream goes to the console only", p,
                     strerror(errno));
    return fd;
}

/* ---------- rendezvous (one node: this agent is the whole job) ---------- */

/* A port that was free a moment ago, for --standalone. */
static int free_port(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, "0", &hints, &ai) || !ai)
        return -1;
    int port = -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
            port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                  : ((struct sockaddr_in *)&ss)->sin_port);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return port;
}

static int rendezvous(struct agent *a)
{
    struct cfg *c = a->cfg;
    set_state(a, AGENT_RENDEZVOUS);
    a->group_rank = c->node_rank;
    a->group_world_size = 1;
    a->rank_base = 0;
    a->world_size = a->n;
    a->master_addr = c->master_addr;
    a->master_port = c->master_port;
    a->use_agent_store = false;
    a->run_id = c->rdzv_id;
    if (c->standalone) {
        if (c->src[CFG_RDZV_ID].kind == CFG_SRC_DEFAULT) {
            unsigned char r[16];
            if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
                memset(r, 0x5a, sizeof r);
            for (int i = 0; i < 16; i++)
                sprintf(a->rdzv_id_buf + 2 * i, "%02x", r[i]);
            a->run_id = a->rdzv_id_buf;
        }
        if (c->src[CFG_MASTER_PORT].kind == CFG_SRC_DEFAULT) {
            int p = free_port(c->master_addr);
            if (p > 0)
                a->master_port = p;
        }
    }
    return 0;
}

/* ---------- spawning ---------- */

static int spawn_all(struct agent *a)
{
    struct cfg *c = a->cfg;
    unsigned replaced = 0;
    bool omp = false;
    for (int i = 0; i < a->n; i++) {
        char prefix[128], errfile[PATH_MAX + 32];
        int rank = a->rank_base + i;
        if (env_expand_prefix(c->log_line_prefix, rank, i, c->role, prefix, sizeof prefix))
            snprintf(prefix, sizeof prefix, "[rank %d]:", rank);
        int cfd[2] = {-1, -1};
        for (int s = 0; s < 2; s++) {
            int bit = s + 1;
            bool console = c->console_rank[i] && !(c->redirect_mask[i] & bit);
            int ffd = open_log_file(a, i, bit);
            int r = logs_stream_open(&a->logs, &a->streams[2 * i + s], bit, prefix, console, ffd,
                                     s == 1, &cfd[s]);
            if (r) {
                if (ffd >= 0)
                    close(ffd);
                if (cfd[0] >= 0)
                    close(cfd[0]);
                return r;
            }
        }
        rank_path(a, i, "error.json", errfile, sizeof errfile);
        struct env_worker ew = {
            .local_rank = i, .rank = rank, .group_rank = a->group_rank, .role_rank = rank,
            .local_world_size = a->n, .world_size = a->world_size,
            .group_world_size = a->group_world_size, .role_world_size = a->world_size,
            .role_name = c->role, .master_addr = a->master_addr, .master_port = a->master_port,
            .restart_count = a->restart_count, .max_restarts = c->max_restarts,
            .run_id = a->run_id, .use_agent_store = a->use_agent_store, .error_file = errfile,
        };
        char **env = NULL;
        struct env_notes notes;
        int r = env_build(a->envp, &ew, &env, &notes);
        if (!r) {
            replaced |= notes.replaced;
            omp |= notes.omp_set;
            struct worker_spawn sp = {a->argv, env, cfd[0], cfd[1]};
            r = workers_spawn(&a->wg, i, &sp);
            free(env);
        }
        close(cfd[0]);
        close(cfd[1]);
        if (r) {
            logs_message(&a->logs, "cannot start worker rank %d: %s", rank, uv_strerror(r));
            return r;
        }
    }
    if (omp)
        logs_message(&a->logs, "OMP_NUM_THREADS is unset; each of the %d workers gets "
                     "OMP_NUM_THREADS=1 (set it to tune)", a->n);
    if (replaced) {
        char names[512] = "";
        for (int i = 0; i < ENV_NUM_WORKER_VARS; i++)
            if (replaced & (1u << i))
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", env_worker_vars[i]);
        logs_message(&a->logs, "the inherited %s %s replaced by each worker's own value", names,
                     (replaced & (replaced - 1)) ? "are" : "is");
    }
    return 0;
}

/* ---------- stopping ---------- */

static void stop_job(struct agent *a, int sig, const char *why)
{
    int alive = workers_alive(&a->wg);
    char sn[32];
    if (why && alive)
        logs_message(&a->logs, "%s; stopping %d worker%s (%s, SIGKILL after %.1fs)", why, alive,
                     alive == 1 ? "" : "s", report_signame(sig, sn, sizeof sn),
                     (double)a->cfg->term_timeout_ms / 1000.0);
    else if (why)
        logs_message(&a->logs, "%s", why);
    set_state(a, AGENT_STOPPING);
    workers_stop_all(&a->wg, sig, a->cfg->term_timeout_ms);
}

static void on_stopped(worker_group_t *g)
{
    struct agent *a = g->data;
    for (int i = 0; i < g->n; i++) {
        worker_t *w = &g->w[i];
        if (w->state == WORKER_RUNNING)
            logs_message(&a->logs, "rank %d (pid %d) did not exit %.1fs after SIGKILL (stuck in "
                         "the kernel?); leaving it behind", a->rank_base + i, (int)w->pid,
                         g->kill_wait_ms / 1000.0);
        else if (!w->group_gone)
            logs_message(&a->logs, "processes of rank %d's group (pgid %d) did not exit %.1fs "
                         "after SIGKILL; leaving them behind", a->rank_base + i, (int)w->pid,
                         g->kill_wait_ms / 1000.0);
    }
    enter_exiting(a);
}

static void on_worker_exit(worker_group_t *g, worker_t *w)
{
    struct agent *a = g->data;
    int code = workers_exit_code(w->wstatus);
    if (a->state != AGENT_RUNNING)
        return;
    if (code != 0 && a->failed < 0) {
        char cause[512], why[700];
        struct report_failure f = {.wstatus = w->wstatus, .exec_errno = w->exec_errno,
                                   .program = a->argv[0]};
        report_cause(&f, cause, sizeof cause);
        a->failed = w->index;
        a->exit_code = code;
        snprintf(why, sizeof why, "rank %d (pid %d) failed: %s", a->rank_base + w->index,
                 (int)w->pid, cause);
        stop_job(a, SIGTERM, why);
        return;
    }
    if (g->running == 0) {
        if (workers_alive(g) > 0)
            stop_job(a, SIGTERM, "every worker exited 0 but left processes in its group");
        else
            enter_exiting(a);
    }
}

/* ---------- init.c's events ---------- */

static void on_child(void *arg, pid_t pid, int wstatus)
{
    struct agent *a = arg;
    if (a->wg.w)
        workers_reaped(&a->wg, pid, wstatus);
}

static void on_signal(void *arg, int sig)
{
    struct agent *a = arg;
    char sn[32], why[96];
    bool stops = sig == SIGTERM || sig == SIGINT;
    switch (a->state) {
    case AGENT_RUNNING:
        if (stops) {
            a->stop_signal = sig;
            a->exit_code = 128 + sig;
            snprintf(why, sizeof why, "got %s", report_signame(sig, sn, sizeof sn));
            stop_job(a, sig, why);
        } else {
            workers_signal(&a->wg, sig);
        }
        break;
    case AGENT_STOPPING:
        if (stops) {
            logs_message(&a->logs, "got %s again; sending SIGKILL now",
                         report_signame(sig, sn, sizeof sn));
            workers_stop_all(&a->wg, SIGKILL, 0);
        } else {
            workers_signal(&a->wg, sig);
        }
        break;
    case AGENT_INIT:
    case AGENT_RENDEZVOUS:
        if (stops) {   /* no worker yet: leave at once */
            a->stop_signal = sig;
            a->exit_code = 128 + sig;
            enter_exiting(a);
        }
        break;
    case AGENT_EXITING:
    case AGENT_DONE:
        break;   /* after the stop there is nobody to tell */
    }
}

/* ---------- the end ---------- */

static void close_all(uv_timer_t *t)
{
    struct agent *a = t->data;
    logs_close(&a->logs);
    if (a->wg_ready)
        workers_close(&a->wg);
    init_stop();
    uv_close((uv_handle_t *)&a->exit_timer, NULL);
}

static void on_drained(struct logs *L, bool complete)
{
    struct agent *a = L->data;
    (void)complete;
    set_state(a, AGENT_DONE);
    uv_timer_start(&a->exit_timer, close_all, 0, 0);
}

static void write_termlog(struct agent *a, const char *text, size_t len)
{
    const char *path = a->cfg->termination_log;
    int r = report_write_termlog(path ? path : "/dev/termination-log", path != NULL, text, len);
    if (r && path)
        logs_message(&a->logs, "cannot write the termination log %s: %s", path, strerror(-r));
}

static void report_failure(struct agent *a)
{
    worker_t *w = &a->wg.w[a->failed];
    char errfile[PATH_MAX + 32];
    rank_path(a, a->failed, "error.json", errfile, sizeof errfile);
    struct report_error e;
    int er = report_read_error_file(errfile, &e);
    size_t tl = 0;
    const char *tail = logs_stream_tail(&a->streams[2 * a->failed + 1], &tl);
    struct report_failure f = {
        .rank = a->rank_base + a->failed, .local_rank = a->failed, .pid = w->pid,
        .wstatus = w->wstatus, .exec_errno = w->exec_errno, .time = w->exit_time,
        .host = a->host, .program = a->argv[0], .error_file = errfile, .stderr_tail = tail,
        .stderr_tail_len = tl,
    };
    if (er == -EINVAL || er == -EFBIG)
        logs_message(&a->logs, "rank %d's error file %s is not torch's JSON; ignoring it",
                     f.rank, errfile);
    size_t cap = 16384;
    char *buf = malloc(cap);
    if (buf) {
        size_t n = report_format(&f, er ? NULL : &e, buf, cap);
        logs_write(&a->logs, 2, buf, n);
        n = report_short(&f, er ? NULL : &e, buf, REPORT_TERMLOG_MAX + 1);
        write_termlog(a, buf, n);
        free(buf);
    }
    if (!er)
        report_error_free(&e);
}

static void enter_exiting(struct agent *a)
{
    set_state(a, AGENT_EXITING);
    for (int i = 0; i < 2 * a->n; i++)
        logs_stream_finish(&a->streams[i]);
    char msg[256];
    char sn[32];
    if (a->failed >= 0) {
        report_failure(a);
    } else if (a->stop_signal) {
        int n = snprintf(msg, sizeof msg, "podrun: stopped by %s; exit code %d\n",
                         report_signame(a->stop_signal, sn, sizeof sn), a->exit_code);
        write_termlog(a, msg, (size_t)n);
    } else {
        int n = snprintf(msg, sizeof msg, "podrun: all %d workers exited 0\n", a->n);
        write_termlog(a, msg, (size_t)n);
    }
    remove_dirs(a);
    logs_drain(&a->logs, AGENT_FLUSH_MS, on_drained);
}

/* ---------- start ---------- */

static int start(struct agent *a)
{
    struct cfg *c = a->cfg;
    int r = init_start(a->loop, on_child, on_signal, a);
    if (r)
        return r;
    if ((r = init_become_subreaper()))
        logs_message(&a->logs, "cannot become a child subreaper (%s); orphaned grandchildren "
                     "of the workers will be reaped by the system's init", strerror(-r));
    if (c->max_restarts > 0)
        logs_message(&a->logs, "--max-restarts %d: podrun %s does not restart jobs in place; "
                     "a failure ends the job", c->max_restarts, PODRUN_VERSION);
    if (c->hang_timeout_ms > 0)
        logs_message(&a->logs, "--hang-timeout: podrun %s has no hang watchdog; ignored",
                     PODRUN_VERSION);
    if ((r = rendezvous(a)))
        return r;
    if ((r = prepare_dirs(a))) {
        logs_message(&a->logs, "cannot create the run directory under %s: %s", a->base_dir,
                     strerror(-r));
        return r;
    }
    if ((r = workers_init(&a->wg, a->loop, a->n)))
        return r;
    a->wg_ready = true;
    a->wg.data = a;
    a->wg.on_exit = on_worker_exit;
    a->wg.on_stopped = on_stopped;
    set_state(a, AGENT_RUNNING);
    r = spawn_all(a);
    if (r) {
        a->exit_code = 1;
        stop_job(a, SIGTERM, "a worker could not be started");
    }
    return 0;
}

int agent_run(struct cfg *cfg, char **envp)
{
    struct agent *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "podrun: out of memory\n");
        return 1;
    }
    a->cfg = cfg;
    a->envp = envp;
    a->failed = -1;
    a->n = cfg->nproc_per_node;
    a->loop = uv_default_loop();
    if (gethostname(a->host, sizeof a->host - 1) < 0)
        snprintf(a->host, sizeof a->host, "localhost");
    int r = env_worker_argv(cfg, &a->argv);
    if (!r && !(a->streams = calloc((size_t)(2 * a->n), sizeof *a->streams)))
        r = -ENOMEM;
    if (!r)
        r = logs_init(&a->logs, a->loop);
    if (r) {
        fprintf(stderr, "podrun: cannot start: %s\n", strerror(-r));
        free(a->argv);
        free(a->streams);
        free(a);
        return 1;
    }
    a->logs.data = a;
    uv_timer_init(a->loop, &a->exit_timer);
    a->exit_timer.data = a;

    r = start(a);
    if (r && a->state < AGENT_RUNNING) {
        if (!a->exit_code)
            a->exit_code = 1;
        logs_message(&a->logs, "cannot start the job: %s", uv_strerror(r));
        enter_exiting(a);
    }
    uv_run(a->loop, UV_RUN_DEFAULT);
    int code = a->exit_code;
    uv_loop_close(a->loop);
    free(a->argv);
    free(a->streams);
    free(a);
    return code;
}
