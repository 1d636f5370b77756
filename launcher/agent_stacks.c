/* launcher/agent_stacks.c — the stacks of this node's workers before a kill for a hang
 * (stacks.h; doc/failures.md#stacks-before-the-kill): the gather, then the kill it held back.
 * The workers are armed through their environment (agent_env.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/agent_int.h"
#include "launcher/output/report.h"

/* The attempt's raw files go (an unasked worker leaves an empty one); at the end, with `all`,
 * the sitecustomize too. The gathered stacks.txt stays, and so does the directory holding it. */
void agent_stacks_end(struct agent *a, bool all)
{
    for (int i = 0; a->stacks.t && i < a->n; i++) {
        char raw[PATH_MAX + 32];
        agent_rank_path(a, i, "stacks.raw", raw, sizeof raw);
        unlink(raw);
    }
    a->stacks.note[0] = 0;   /* the next attempt's report is its own */
    if (all && a->stacks.site[0])
        stacks_remove_site(a->stacks.site);
}

void agent_stacks_close(struct agent *a)
{
    stacks_close(&a->stacks.g);
    free(a->stacks.t);
    a->stacks.t = NULL;
}

/* The kill the gather held back: the timer's signal, then the failure as it would have been. */
static void kill_now(struct agent *a)
{
    struct agent_stacks *k = &a->stacks;
    char sn[32];
    k->pending = false;
    if (k->grace) {   /* a stop's grace passed: its SIGKILL */
        k->grace = false;
        workers_kill_held(&a->wg);
        return;
    }
    if (k->pid > 0 && k->signo > 0 && kill(k->pid, k->signo) < 0 && errno != ESRCH)
        logs_message(&a->logs, "cannot send %s to pid %d: %s",
                     report_signame(k->signo, sn, sizeof sn), (int)k->pid, strerror(errno));
    if (a->wg.w[k->lr].state == WORKER_RUNNING)
        agent_post(a, AGENT_EV_LOCAL_FAILURE,
                   &(struct agent_evd){.lr = k->lr, .hang = true, .why = k->reason});
}

static void on_gathered(void *arg, const char *note, const char *text, size_t len,
                        uint64_t took_ms)
{
    struct agent *a = arg;
    struct agent_stacks *k = &a->stacks;
    if (!k->g.file[0]) {
        logs_message(&a->logs, "cannot write the workers' stacks to %s", k->file);
    } else {
        logs_message(&a->logs, "the stacks of %d worker%s before the kill (%.3fs), in %s:",
                     k->g.n, k->g.n == 1 ? "" : "s", (double)took_ms / 1000.0, k->file);
        for (int i = 0; i < k->g.n; i++) {   /* each rank's section in its own log */
            const struct stacks_target *t = &k->g.t[i];
            if (t->at + t->len <= len)
                logs_stream_note(&a->streams[2 * t->lr + 1], text + t->at, t->len);
        }
        size_t used = strlen(k->note);
        /* one line per rank, then the file: what the report and the termination log show */
        for (const char *l = note; *l && used < sizeof k->note - 1;) {
            size_t n = strcspn(l, "\n");
            int w = snprintf(k->note + used, sizeof k->note - used, "podrun: %.*s\n", (int)n, l);
            used += w > 0 ? (size_t)w : 0;
            l += n + (l[n] == '\n');
        }
        if (used < sizeof k->note - 1)
            snprintf(k->note + used, sizeof k->note - used, "podrun: stacks in %s\n", k->file);
        if (k->grace)   /* a stop's end: no failure report follows to show them */
            logs_write(&a->logs, 2, k->note, strlen(k->note));
    }
    if (k->pending)
        kill_now(a);
}

/* Asks for the stacks of this node's workers: those running (running_only), else every
 * group with processes left. 0, or -EBUSY or -ENOENT (none to ask). */
static int gather(struct agent *a, bool running_only)
{
    struct agent_stacks *k = &a->stacks;
    int n = 0;
    for (int i = 0; i < a->n; i++) {
        worker_t *w = &a->wg.w[i];
        if (w->pid <= 0 || (running_only ? w->state != WORKER_RUNNING : w->group_gone))
            continue;
        struct stacks_target *t = &k->t[n++];
        memset(t, 0, sizeof *t);
        t->rank = a->rdzv.rank_base + i;
        t->lr = i;
        t->pgid = w->pid;
        agent_rank_path(a, i, "stacks.raw", t->raw, sizeof t->raw);
    }
    if (!n)
        return -ENOENT;
    /* a hang's stacks are not overwritten by those of the stop's end that may follow */
    snprintf(k->file, sizeof k->file, "%s/%s", a->dir.attempt,
             running_only ? "stacks.txt" : "stacks_at_sigkill.txt");
    if (running_only)
        k->note[0] = 0;
    return stacks_start(&k->g, k->t, n, k->file);
}

/* A hang is about to be acted on (local rank lr, `reason`; pid and signo: a torch timer's kill,
 * 0 for none): every running worker of this node is asked for its stacks first, bounded by
 * STACKS_BOUND_MS, and the kill follows on the loop. Without arming the kill goes at once; a
 * hang found while a gather runs waits for the kill that gather holds back. */
void agent_stacks_then_kill(struct agent *a, int lr, const char *reason, pid_t pid, int signo)
{
    struct agent_stacks *k = &a->stacks;
    if (k->pending)
        return;   /* a gather runs for an earlier hang, whose kill stops every worker */
    k->lr = lr;
    k->pid = pid;
    k->signo = signo;
    snprintf(k->reason, sizeof k->reason, "%s", reason);
    k->pending = true;
    if (!k->site[0] || k->g.busy) {
        kill_now(a);
        return;
    }
    if (gather(a, true))
        kill_now(a);
}

/* A stop's grace passed with workers left (wg.hold_kill): their stacks before the SIGKILL, which
 * waits at most STACKS_BOUND_MS and a little more (workers.c sends it then all the same). */
static uint64_t hold_kill(worker_group_t *g)
{
    struct agent *a = g->data;
    struct agent_stacks *k = &a->stacks;
    if (!k->site[0] || k->pending || gather(a, false))
        return 0;
    k->pending = k->grace = true;
    return STACKS_BOUND_MS + 500;
}

/* Armed when something may kill for a hang: --hang-timeout or torch's file timers. The
 * sitecustomize is written with the first workers' environment (agent_env.c). */
int agent_stacks_start(struct agent *a)
{
    struct agent_stacks *k = &a->stacks;
    stacks_init(&k->g, a->loop);
    k->g.done = on_gathered;
    k->g.arg = a;
    if (!a->cfg->hang_timeout_ms && a->ts.fd < 0)
        return 0;
    if (!(k->t = calloc((size_t)a->n, sizeof *k->t)))
        return -ENOMEM;
    a->wg.hold_kill = hold_kill;
    return 0;
}
