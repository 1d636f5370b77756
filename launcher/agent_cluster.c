/* launcher/agent_cluster.c — what the cluster sees of the job: Events on this pod
 * (discover/k8s_events.h), JobSet's in-place restart (operators/jobset_restart.h) and Kubeflow
 * Trainer's TrainJob status (output/trainjob.h).
 *
 * The agent calls in at named points and this file does the rest: the start (the barrier before
 * the first rendezvous), the round complete, the job's decision (a failure, a restart), the
 * rejoin after a restart (the barrier again), the end (the last event, flushed within
 * CLUSTER_FLUSH_MS), the close. JobSet's news are events for the hub (JOBSET_GO, JOBSET_BEHIND,
 * JOBSET_ENDED), whose table decides what each means where the agent is; nothing here decides
 * for the job: a pod that the JobSet says is behind is told to the job as a failure of this
 * node, and the job decides. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "launcher/agent_int.h"
#include "launcher/discover/k8s_events.h"
#include "launcher/operators/jobset_restart.h"
#include "launcher/output/trainjob.h"
#include "rdzv/base/common.h"

#define CLUSTER_FLUSH_MS 2000   /* bound on the last event at the end */

struct agent_cluster {
    struct k8s_client cl;
    bool cl_open;
    k8s_events_t *ev;
    jobset_restart_t *js;
    long moved_to;                /* the attempt another pod moved on to (CATCH_UP's line) */
    bool flushing;
};

static void cluster_say(void *arg, const char *line)
{
    struct agent *a = arg;
    logs_message(&a->logs, "%s", line);
}

/* JobSet's protocol reports; the hub decides what each means where the agent is now. */
static void on_js_go(void *arg, long attempt)
{
    (void)attempt;
    agent_post(arg, AGENT_EV_JOBSET_GO, NULL);
}

/* The JobSet ended (it failed at its maxRestarts): a restart podrun decided is not made, and the
 * job's decision becomes an exit with the same root cause, as if its own restarts were used up;
 * before any decision, this node is out of the job (this reason). */
static void on_js_ended(void *arg, const char *state)
{
    char why[256];
    snprintf(why, sizeof why, "the JobSet %s before this pod's round started", state);
    agent_post(arg, AGENT_EV_JOBSET_ENDED, &(struct agent_evd){.err = -ECANCELED, .why = why});
}

/* The JobSet restarts its pods and this pod's attempt is over: while its workers run, a failure
 * of this node (this reason), pushed to the job like any other, and the job's restart moves
 * every pod on together; before that, this pod follows (agent_cluster_catch_up). */
static void on_js_behind(void *arg, long attempt, long previous)
{
    struct agent *a = arg;
    a->cluster->moved_to = previous + 1;
    char why[RDZV_REASON_MAX];
    snprintf(why, sizeof why, "the JobSet restarts its pods in place (this pod's attempt %ld is "
             "at or below the previous attempt %ld)", attempt, previous);
    agent_post(a, AGENT_EV_JOBSET_BEHIND, &(struct agent_evd){.why = why});
}

/* No worker of this round runs yet (a pod whose container restarted joins late): this pod
 * follows to the next attempt, and the round goes on with it. */
void agent_cluster_catch_up(struct agent *a)
{
    struct agent_cluster *c = a->cluster;
    logs_message(&a->logs, "JobSet %s: another pod moved on to in-place restart attempt %ld "
                 "before this round started; this pod follows", getenv("JOBSET_NAME"),
                 c->moved_to);
    jobset_restart_next(c->js);
}

/* Where credentials come from: --discovery k8s's own, else in the cluster. JobSet's protocol
 * asks for them whenever JOBSET_NAME is set (a kubeconfig works too). */
static bool cluster_wanted(struct agent *a, const char **jobset)
{
    *jobset = getenv("JOBSET_NAME");
    if (*jobset && !**jobset)
        *jobset = NULL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    return *jobset || a->cfg->discovery == CFG_DISCOVERY_K8S || (host && *host);
}

bool agent_cluster_start(struct agent *a)
{
    const char *jobset;
    if (!cluster_wanted(a, &jobset))
        return false;
    struct agent_cluster *c = calloc(1, sizeof *c);
    if (!c)
        return false;
    a->cluster = c;
    struct k8s_source src;
    k8s_source_from_env(&src);
    char hn[IDENTITY_NAME_MAX], err[1024];
    const char *pod = identity_pod_name(hn, sizeof hn);
    int r = k8s_client_open(&c->cl, a->loop, &src, a->cfg->k8s_namespace, pod, err, sizeof err);
    if (r) {
        if (jobset)
            logs_message(&a->logs, "JobSet %s: %s; the job starts without in-place restart",
                         jobset, err);
        return false;
    }
    c->cl_open = true;
    k8s_events_open(&c->cl, getenv("NODE_NAME"), cluster_say, a, &c->ev);
    if (!jobset)
        return false;
    struct jobset_restart_params p = {
        .cl = &c->cl, .jobset = jobset, .on_go = on_js_go, .on_behind = on_js_behind,
        .on_ended = on_js_ended,
        .say = cluster_say, .arg = a,
    };
    r = jobset_restart_start(&p, &c->js);
    if (r) {
        logs_message(&a->logs, "JobSet %s: not a JobSet name (JOBSET_NAME); the job starts "
                     "without in-place restart", jobset);
        c->js = NULL;
        return false;
    }
    return true;
}

/* ---------- Kubeflow Trainer's TrainJob status (output/trainjob.h) ---------- */

/* The trainer's step for the TrainJob's report: the progress file read now; no total is known,
 * so no percentage. */
static int trainjob_progress(void *arg, struct trainjob_progress *out)
{
    struct agent *a = arg;
    char err[256];
    long long v = progress_read(&a->progress, err, sizeof err);
    if (err[0])
        logs_message(&a->logs, "%s", err);   /* once: the reader says a bad file once */
    if (v < 0)
        return -1;
    out->step = v;
    out->percent = -1;
    return 0;
}

void agent_cluster_trainjob(struct agent *a)
{
    const struct cfg *c = a->cfg;
    struct trainjob_params tp = {
        .url = c->trainjob_url, .ca_file = c->trainjob_ca, .token_file = c->trainjob_token,
        .interval_ms = c->trainjob_interval_ms, .max_restarts = c->max_restarts,
        .progress = trainjob_progress,   /* the trainer's progress, where --progress-file has it */
        .say = cluster_say, .arg = a,
    };
    trainjob_start(a->loop, &tp, &a->trainjob);
}

/* How the job ended for this node, in the TrainJob's words (output/trainjob_payload.h). */
static const char *trainjob_outcome(const struct agent *a)
{
    if (a->stop.signal)
        return "stopped";
    if (a->stop.quit)
        return "left";
    if (a->job.lost)
        return "lost";
    return a->job.finished && !a->exit_code ? "succeeded" : "failed";
}

/* The TrainJob's last report is answered (or its bound passed): what it said goes out, then the
 * end goes on. */
static void on_trainjob_sent(void *arg)
{
    struct agent *a = arg;
    a->end.trainjob_pending = false;
    agent_drain_again(a);
}

void agent_cluster_restart(struct agent *a)
{
    trainjob_restart(a->trainjob, a->job.restarts_used);
}

/* ---------- the agent's named points ---------- */

void agent_cluster_round(struct agent *a)
{
    trainjob_round(a->trainjob, a->rdzv.round, a->rdzv.group_rank, a->rdzv.group_world_size,
                   a->rdzv.world_size, a->rdzv.restart_count);
    if (!a->cluster)
        return;
    k8s_events_post(a->cluster->ev, K8S_EV_ROUND, "rendezvous complete: round %d, %d node%s, "
                    "%d workers; this pod is node rank %d (ranks %d-%d), restart %d",
                    a->rdzv.round, a->rdzv.group_world_size,
                    a->rdzv.group_world_size == 1 ? "" : "s", a->rdzv.world_size,
                    a->rdzv.group_rank, a->rdzv.rank_base, a->rdzv.rank_base + a->n - 1,
                    a->rdzv.restart_count);
}

/* The job's root cause, one line: who, where, what, and the worker's own message. */
static void root_cause(struct agent *a, char *out, size_t cap)
{
    const rdzv_failure_t *f = &a->job.dfail[0];
    if (a->job.dn == 0) {
        snprintf(out, cap, "%s", a->job.dreason);
        return;
    }
    char who[RDZV_NAME_MAX * 2 + 64];
    if (f->rank >= 0)
        snprintf(who, sizeof who, "rank %d (local rank %d) on %s", f->rank, f->local_rank,
                 f->node_name[0] ? f->node_name : f->host);
    else
        snprintf(who, sizeof who, "node %s", f->node_name[0] ? f->node_name : f->host);
    snprintf(out, cap, "%s: %s%s%.600s", who, f->reason, f->message[0] ? ": " : "", f->message);
}

void agent_cluster_decided(struct agent *a)
{
    if (a->job.dn > 0)
        trainjob_failure(a->trainjob, &a->job.dfail[0]);
    struct agent_cluster *c = a->cluster;
    if (!c)
        return;
    char why[1024];
    root_cause(a, why, sizeof why);
    if (a->job.dn > 0)
        k8s_events_post(c->ev, K8S_EV_FAILURE, "%s", why);
    if (a->job.action != RDZV_RESTART)
        return;
    bool moved = jobset_restart_next(c->js);
    char js[96] = "";
    if (moved)
        snprintf(js, sizeof js, "; JobSet in-place restart attempt %ld",
                 jobset_restart_attempt(c->js) + 1);
    if (a->job.restart_counted)
        k8s_events_post(c->ev, K8S_EV_RESTART, "restarting the job in place (restart %d of %d)"
                        "%s: %s", a->job.restarts_used, a->cfg->max_restarts, js, a->job.dreason);
    else
        k8s_events_post(c->ev, K8S_EV_RESTART, "restarting the job in place (the nodes changed; "
                        "no restart used)%s: %s", js, a->job.dreason);
}

bool agent_cluster_barrier(struct agent *a)
{
    struct agent_cluster *c = a->cluster;
    return c && c->js && !jobset_restart_lifted(c->js);
}

static void on_flushed(void *arg)
{
    struct agent *a = arg;
    a->cluster->flushing = false;
    agent_drain_again(a);
}

void agent_cluster_end(struct agent *a)
{
    a->end.trainjob_pending = trainjob_end(a->trainjob, trainjob_outcome(a), a->exit_code,
                                           on_trainjob_sent, a) == 1;
    struct agent_cluster *c = a->cluster;
    if (!c)
        return;
    jobset_restart_close(c->js);
    c->js = NULL;
    if (!c->ev)
        return;
    if (a->exit_code == 0 && a->job.finished)
        k8s_events_post(c->ev, K8S_EV_SUCCEEDED, "all %d workers of the job exited 0 "
                        "(restarts used: %d)", a->rdzv.world_size, a->rdzv.restart_count);
    else
        k8s_events_post(c->ev, K8S_EV_FAILED, "podrun exits %d: %s", a->exit_code,
                        a->stop.signal ? "stopped by a signal"
                        : a->job.decided ? a->job.dreason
                        : a->stop.why[0] ? a->stop.why : "the job could not run");
    c->flushing = true;
    k8s_events_flush(c->ev, CLUSTER_FLUSH_MS, on_flushed, a);
}

bool agent_cluster_busy(const struct agent *a)
{
    return a->end.trainjob_pending || (a->cluster && a->cluster->flushing);
}

void agent_cluster_close(struct agent *a)
{
    trainjob_close(a->trainjob);
    a->trainjob = NULL;
    struct agent_cluster *c = a->cluster;
    if (!c)
        return;
    jobset_restart_close(c->js);
    k8s_events_close(c->ev);
    if (c->cl_open)
        k8s_client_close(&c->cl);
    free(c);
    a->cluster = NULL;
}
