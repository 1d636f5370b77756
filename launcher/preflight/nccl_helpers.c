/* launcher/preflight/nccl_helpers.c — one nccl test's helper processes, from the agent (see
 * nccl_helpers.h). */
#include "launcher/preflight/nccl_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdzv/base/common.h"
#include "launcher/workers/workers.h"

#define PF_HELPER_LINE 1024
#define PF_HELPER_GRACE_MS 10000   /* past their own deadline, helpers get SIGKILL */

struct pf_nccl_helpers {
    worker_group_t g;
    uv_timer_t timer;
    struct pf_nccl_test t;
    char what[160];
    int *pipes;                    /* read end of each helper's result pipe, -1 closed */
    struct pf_figure *figs;        /* per local rank */
    int left;                      /* helpers not yet reaped */
    bool killed, finished, cancelled;
    void (*done)(void *arg, const struct pf_figure *f);
    void *arg;
};

/* The node's figure: the lowest bus bandwidth, or the first failure by local rank. */
static void helpers_finish(struct pf_nccl_helpers *h)
{
    if (h->finished)
        return;
    h->finished = true;
    struct pf_figure f = {.done = true, .ok = true, .rtt = -1, .bw = -1};
    for (int i = 0; i < h->t.nproc; i++) {
        const struct pf_figure *x = &h->figs[i];
        if (!x->ok) {
            f.ok = false;
            f.bw = -1;
            snprintf(f.reason, sizeof f.reason, "local rank %d: %.215s", i, x->reason);
            break;
        }
        if (f.bw < 0 || x->bw < f.bw)
            f.bw = x->bw;
    }
    uv_timer_stop(&h->timer);
    if (!h->cancelled)
        h->done(h->arg, &f);
}

static void helpers_closed(uv_handle_t *t)
{
    struct pf_nccl_helpers *h = t->data;
    free(h->pipes);
    free(h->figs);
    free(h);
}

/* Both timers close in one pass of the loop; ours, closed first, finishes last (libuv finishes
 * the closing handles newest first), so the struct is freed after the group's timer is done. */
static void helpers_free(struct pf_nccl_helpers *h)
{
    for (int i = 0; i < h->t.nproc; i++)
        if (h->pipes[i] >= 0)
            close(h->pipes[i]);
    uv_close((uv_handle_t *)&h->timer, helpers_closed);
    workers_close(&h->g);
}

static void helpers_free_later(uv_timer_t *t)
{
    helpers_free(t->data);
}

/* What a reaped helper said, or why it said nothing. */
static void helper_exit(worker_group_t *g, worker_t *w)
{
    struct pf_nccl_helpers *h = g->data;
    int lr = w->index;
    struct pf_figure *f = &h->figs[lr];
    char line[PF_HELPER_LINE] = "";
    ssize_t n = h->pipes[lr] >= 0 ? read(h->pipes[lr], line, sizeof line - 1) : -1;
    if (n > 0)
        line[n] = '\0';
    if (n <= 0 || pf_helper_line_parse(line, f) < 0) {
        memset(f, 0, sizeof *f);
        f->done = true;
        f->rtt = f->bw = -1;
        if (w->exec_errno)
            snprintf(f->reason, sizeof f->reason, "cannot run %s: %s", h->t.exe,
                     strerror(w->exec_errno));
        else if (WIFSIGNALED(w->wstatus))
            snprintf(f->reason, sizeof f->reason, "the check process was killed by signal %d%s",
                     WTERMSIG(w->wstatus), h->killed ? " past its deadline" : "");
        else
            snprintf(f->reason, sizeof f->reason, "the check process exited %d without a result",
                     workers_exit_code(w->wstatus));
    }
    if (--h->left == 0) {
        helpers_finish(h);
        /* freed from the loop, not from inside workers_reaped's call */
        uv_timer_start(&h->timer, helpers_free_later, 0, 0);
    }
}

static void helpers_deadline(uv_timer_t *t)
{
    struct pf_nccl_helpers *h = t->data;
    h->killed = true;
    workers_signal(&h->g, SIGKILL);
}

/* argv of one helper; strings in `space`. */
static void helper_argv(const struct pf_nccl_helpers *h, int lr, int device, char **argv,
                        char space[][160])
{
    int k = 0, s = 0;
#define ARG(...) (snprintf(space[s], sizeof space[s], __VA_ARGS__), argv[k++] = space[s++])
    ARG("%s", h->t.exe);
    ARG("preflight-nccl");
    ARG("--store=%s:%u", h->t.store_host, h->t.store_port);
    ARG("--key=%s", h->t.key);
    ARG("--rank=%d", h->t.first_rank + lr);
    ARG("--nranks=%d", h->t.nranks);
    ARG("--device=%d", device);
    ARG("--bytes=%llu", (unsigned long long)h->t.bytes);
    ARG("--timeout-ms=%llu", (unsigned long long)h->t.timeout_ms);
    if (h->t.nccl_lib)
        ARG("--nccl-lib=%s", h->t.nccl_lib);
    if (h->t.cudart_lib)
        ARG("--cudart-lib=%s", h->t.cudart_lib);
    if (h->t.python)
        ARG("--python=%s", h->t.python);
#undef ARG
    argv[k] = NULL;
}

/* Starts helper lr: its result pipe, its worker environment and CPUs. */
static int helper_spawn(struct pf_nccl_helpers *h, int lr)
{
    char **env = NULL;
    const cpu_set_t *cpus = NULL;
    int mem = -1, device = lr;
    int r = h->t.env(h->t.env_arg, lr, &env, &cpus, &mem, &device);
    if (r < 0)
        return r;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        free(env);
        return -errno;
    }
    char *argv[16], space[16][160];
    helper_argv(h, lr, device, argv, space);
    struct worker_spawn sp = {argv, env, p[1], -1, cpus, mem};
    r = workers_spawn(&h->g, lr, &sp);
    close(p[1]);
    free(env);
    if (r < 0) {
        close(p[0]);
        return r;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    h->pipes[lr] = p[0];
    return 0;
}

int pf_nccl_helpers_start(uv_loop_t *loop, const struct pf_nccl_test *t,
                          void (*done)(void *arg, const struct pf_figure *f), void *arg,
                          pf_nccl_helpers_t **out)
{
    struct pf_nccl_helpers *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->t = *t;
    h->done = done;
    h->arg = arg;
    h->pipes = malloc((size_t)t->nproc * sizeof *h->pipes);
    h->figs = calloc((size_t)t->nproc, sizeof *h->figs);
    int r = h->pipes && h->figs ? workers_init(&h->g, loop, t->nproc) : -ENOMEM;
    if (r < 0) {
        free(h->pipes);
        free(h->figs);
        free(h);
        return r;
    }
    for (int i = 0; i < t->nproc; i++)
        h->pipes[i] = -1;
    h->g.data = h;
    h->g.on_exit = helper_exit;
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    for (int i = 0; i < t->nproc; i++) {
        if ((r = helper_spawn(h, i)) < 0) {
            /* the ones started are killed and forgotten; they are reaped as any child */
            workers_signal(&h->g, SIGKILL);
            h->cancelled = h->finished = true;
            helpers_free(h);
            return r;
        }
        h->left++;
    }
    uv_timer_start(&h->timer, helpers_deadline, 2 * t->timeout_ms + PF_HELPER_GRACE_MS, 0);
    *out = h;
    return 0;
}

int pf_nccl_helpers_reaped(pf_nccl_helpers_t *h, pid_t pid, int wstatus)
{
    return workers_reaped(&h->g, pid, wstatus) != NULL;
}

void pf_nccl_helpers_cancel(pf_nccl_helpers_t *h)
{
    h->cancelled = true;
    workers_signal(&h->g, SIGKILL);
    if (h->finished)
        return;   /* the last one was reaped: its free is on the way */
    h->finished = true;
    helpers_free(h);
}
