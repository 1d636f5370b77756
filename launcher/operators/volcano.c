/* launcher/operators/volcano.c — a Volcano Job (batch.volcano.sh/v1alpha1; reference/k8s.md §3).
 *
 * What Volcano puts into a pod:
 *   env plugin (§3.2)   VC_TASK_INDEX and its legacy twin VK_TASK_INDEX: the pod's index within
 *                       its task (the last "-" part of <job>-<task>-<index>)
 *   svc plugin (§3.3)   for every task T (upper case, '-' as '_'): VC_<T>_HOSTS, the task's pods'
 *                       FQDNs <job>-<task>-<i>.<job> in index order, comma-separated, and
 *                       VC_<T>_NUM, their count; and the same lists as files under /etc/volcano,
 *                       <task>.host one name per line (the only copy when --inject-hosts-env is
 *                       off). Forced on by the pytorch, mpi, tensorflow and ray plugins.
 *   pytorch plugin (§3.5)  MASTER_ADDR=<job>-master-0.<job>, MASTER_PORT (23456), WORLD_SIZE = the
 *                       master and worker tasks' pods, RANK = 0 for the master task and index + 1
 *                       for the worker task: node ranks, the same names as a PyTorchJob's (which
 *                       is why Volcano is detected first).
 * Mapping, at the operator rank (a .host file's lines at the hostfile rank):
 *   with the pytorch plugin   node-rank RANK, nnodes the master and worker tasks' pods (the
 *                       plugin's WORLD_SIZE counts every task's), master-addr MASTER_ADDR,
 *                       master-port MASTER_PORT: the static store on node rank 0, the master pod.
 *                       Its RANK must agree with the task index (worker i is i + 1, the master is
 *                       index 0): they are two plugins' views of one pod.
 *   otherwise           this pod's task: the only one, or the one whose host list names this pod;
 *                       node-rank VC_TASK_INDEX (else this pod's place in the list), nnodes
 *                       VC_<T>_NUM, master-addr the task's first host (pod 0 hosts the static
 *                       store). A job of several tasks is then one podrun job per task: only the
 *                       pytorch plugin says how tasks make one job; otherwise give --hostfile or
 *                       --discovery k8s.
 * Under --discovery hostfile only the .host files are read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launcher/operators/adapter.h"
#include "launcher/operators/hostsource.h"
#include "rdzv/base/common.h"

#define VC "Volcano"
#define VCP "Volcano pytorch plugin"
#define TASKS_MAX 64
#define VOLCANO_DIR "/etc/volcano"

struct task {
    char src[OP_PATH_MAX];      /* "VC_WORKER_HOSTS" or the .host file's path */
    char num_var[160];          /* "VC_WORKER_NUM"; "" when the count is the list's */
    bool from_file;
    struct hostfile hf;
};

struct tasks {
    size_t n;
    struct task t[TASKS_MAX];
};

static void tasks_free(struct tasks *ts)
{
    for (size_t i = 0; i < ts->n; i++)
        hostfile_free(&ts->t[i].hf);
    ts->n = 0;
}

/* VC_<T>_HOSTS=... -> the <T>, or 0 when the entry is not such a variable. */
static size_t hosts_var(const char *entry, const char **value)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : 0;
    if (n <= 3 + 6 || strncmp(entry, "VC_", 3) || memcmp(entry + n - 6, "_HOSTS", 6))
        return 0;
    *value = eq + 1;
    return n - 9;
}

/* Every VC_<T>_HOSTS of the environment, each against its VC_<T>_NUM. */
static int env_tasks(const struct op_ctx *x, struct tasks *ts, char *err, size_t errlen)
{
    for (size_t i = 0; x->envp && x->envp[i]; i++) {
        const char *v;
        size_t tn = hosts_var(x->envp[i], &v);
        if (!tn || !*v)
            continue;
        if (ts->n == TASKS_MAX)
            return op_conflict(err, errlen, "more than %d VC_<TASK>_HOSTS variables (%s)",
                               TASKS_MAX, VC);
        struct task *t = &ts->t[ts->n];
        memset(t, 0, sizeof *t);
        snprintf(t->src, sizeof t->src, "VC_%.*s_HOSTS", (int)tn, x->envp[i] + 3);
        int r = op_hostlist_csv(&t->hf, v, t->src, err, errlen);
        if (r) {
            hostfile_free(&t->hf);
            return r;
        }
        ts->n++;
        long num;
        snprintf(t->num_var, sizeof t->num_var, "VC_%.*s_NUM", (int)tn, x->envp[i] + 3);
        if ((r = op_num(x, t->num_var, VC, 1, OP_NODES_MAX, &num, err, errlen)) < 0)
            return r;
        if (r == 1)
            t->num_var[0] = '\0';
        else if ((size_t)num != t->hf.count)
            return op_conflict(err, errlen, "%s=%ld and %s (%zu hosts) (%s) disagree: the svc "
                               "plugin writes both from the task's pods; fix the pod's "
                               "environment", t->num_var, num, t->src, t->hf.count, VC);
    }
    return 0;
}

static bool is_host_file(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && !strcmp(name + n - 5, ".host");
}

/* The svc plugin's /etc/volcano/<task>.host files. */
static int file_tasks(const struct op_ctx *x, struct tasks *ts, char *err, size_t errlen)
{
    char dir[OP_PATH_MAX];
    char **names = NULL;
    size_t count = 0;
    if (!x->host || op_path(x, VOLCANO_DIR, dir, sizeof dir) ||
        x->host->list_dir(x->host, dir, &names, &count))
        return 0;
    int r = 0;
    for (size_t i = 0; i < count && !r; i++) {
        char *text = NULL;
        size_t len = 0;
        if (!is_host_file(names[i]))
            continue;
        if (ts->n == TASKS_MAX) {
            r = op_conflict(err, errlen, "more than %d .host files in %s (%s)", TASKS_MAX, dir,
                            VC);
            break;
        }
        struct task *t = &ts->t[ts->n];
        memset(t, 0, sizeof *t);
        t->from_file = true;
        if (strlen(dir) + strlen(names[i]) + 2 > sizeof t->src)
            continue;
        sfmt(t->src, sizeof t->src, "%s/%s", dir, names[i]);
        r = x->host->read_file(x->host, t->src, DISCOVER_FILE_MAX, &text, &len);
        if (r) {
            r = podrun_failf(r, err, errlen, "cannot read %s (%s): %s", t->src, VC, strerror(-r));
            break;
        }
        r = hostfile_parse(&t->hf, text, len, HOSTFILE_ANY, t->src, err, errlen);
        free(text);
        if (r)
            hostfile_free(&t->hf);
        else
            ts->n++;
    }
    discover_names_free(names, count);
    return r;
}

static bool has_host_files(const struct op_ctx *x)
{
    char dir[OP_PATH_MAX];
    char **names = NULL;
    size_t count = 0;
    bool found = false;
    if (!x->host || op_path(x, VOLCANO_DIR, dir, sizeof dir) ||
        x->host->list_dir(x->host, dir, &names, &count))
        return false;
    for (size_t i = 0; i < count && !found; i++)
        found = is_host_file(names[i]);
    discover_names_free(names, count);
    return found;
}

static bool volcano_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (!x->files_only) {
        const char *v;
        if (op_get(x, "VC_TASK_INDEX") || op_get(x, "VK_TASK_INDEX")) {
            cfg_src_init(why, CFG_SRC_OPERATOR, "%s_TASK_INDEX (%s)",
                         op_get(x, "VC_TASK_INDEX") ? "VC" : "VK", VC);
            return true;
        }
        for (size_t i = 0; x->envp && x->envp[i]; i++) {
            size_t tn = hosts_var(x->envp[i], &v);
            if (tn && *v) {
                cfg_src_init(why, CFG_SRC_OPERATOR, "VC_%.*s_HOSTS (%s)", (int)tn,
                             x->envp[i] + 3, VC);
                return true;
            }
        }
    }
    if (!has_host_files(x))
        return false;
    cfg_src_init(why, CFG_SRC_HOSTFILE, "%s/*.host (%s)", VOLCANO_DIR, VC);
    return true;
}

/* VC_TASK_INDEX (or VK_TASK_INDEX, which must be the same): *idx, -1 when neither is set. */
static int task_index(const struct op_ctx *x, long *idx, const char **var, char *err,
                      size_t errlen)
{
    long vc, vk;
    int rc = op_num(x, "VC_TASK_INDEX", VC, 0, OP_NODES_MAX - 1, &vc, err, errlen);
    int rk = op_num(x, "VK_TASK_INDEX", VC, 0, OP_NODES_MAX - 1, &vk, err, errlen);
    if (rc < 0 || rk < 0)
        return rc < 0 ? rc : rk;
    if (rc == 0 && rk == 0 && vc != vk)
        return op_conflict(err, errlen, "VC_TASK_INDEX=%ld and VK_TASK_INDEX=%ld (%s) disagree: "
                           "the env plugin writes both from the pod's name; fix the pod's "
                           "environment", vc, vk, VC);
    *idx = rc == 0 ? vc : rk == 0 ? vk : -1;
    *var = rc == 0 ? "VC_TASK_INDEX" : "VK_TASK_INDEX";
    return 0;
}

static int find_task(const struct cfg *c, const struct op_ctx *x, const struct tasks *ts,
                     long *mine, long *pos, char *err, size_t errlen);

/* The task named `name` by the svc plugin (VC_<NAME>_HOSTS or <name>.host, either case),
 * or -1. */
static long task_named(const struct tasks *ts, const char *name)
{
    char var[64], file[64];
    snprintf(var, sizeof var, "VC_%s_HOSTS", name);
    snprintf(file, sizeof file, "/%s.host", name);
    for (size_t i = 0; i < ts->n; i++) {
        const char *src = ts->t[i].src;
        size_t n = strlen(src), fl = strlen(file);
        if (ts->t[i].from_file ? n >= fl && !strcasecmp(src + n - fl, file)
                               : !strcasecmp(src, var))
            return (long)i;
    }
    return -1;
}

/* The task whose first host is MASTER_ADDR (the plugin names the master task's pod 0), else
 * the one named master (the plugin's default --master), or -1. */
static long master_task(const struct tasks *ts, const char *addr)
{
    for (size_t i = 0; i < ts->n; i++)
        if (ts->t[i].hf.count && !strcmp(ts->t[i].hf.entries[0].host, addr))
            return (long)i;
    return task_named(ts, "master");
}

/* The worker task: the one named worker (the plugin's default --worker), else this pod's
 * task when it is not the master's, else the only other task; -1 when none says. */
static long worker_task(const struct tasks *ts, long master, long mine)
{
    long w = task_named(ts, "worker");
    if (w >= 0 && w != master)
        return w;
    if (mine >= 0 && mine != master)
        return mine;
    return ts->n == 2 && master >= 0 ? 1 - master : -1;
}

static void count_name(const struct task *t, char *buf, size_t len)
{
    snprintf(buf, len, "%s", t->num_var[0] ? t->num_var : t->src);
}

/* The plugin's WORLD_SIZE counts the pods of every task of the job (a TensorBoard task too),
 * while only the master and worker tasks train: the node count is theirs, from the svc
 * plugin's lists (the same pods the plugin ranks). Without the lists WORLD_SIZE stands. */
static int plugin_nnodes(struct cfg *c, const struct op_ctx *x, long ws, long rank, char *err,
                         size_t errlen)
{
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    struct tasks *ts = calloc(1, sizeof *ts);
    if (!ts)
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    int r = env_tasks(x, ts, err, errlen);
    if (!r && ts->n == 0)
        r = file_tasks(x, ts, err, errlen);
    long mine = -1, pos = -1, m = -1, w = -1;
    if (!r && ts->n > 0)
        r = find_task(c, x, ts, &mine, &pos, err, errlen);
    if (!r && ts->n > 0) {
        m = master_task(ts, op_get(x, "MASTER_ADDR"));
        w = worker_task(ts, m, mine);
    }
    if (!r && m >= 0 && w >= 0) {
        const struct task *mt = &ts->t[m], *wt = &ts->t[w];
        long n = (long)(mt->hf.count + wt->hf.count);
        char mn[OP_PATH_MAX], wn[OP_PATH_MAX];
        count_name(mt, mn, sizeof mn);
        count_name(wt, wn, sizeof wn);
        if (mine >= 0 && mine != m && mine != w)
            r = op_conflict(err, errlen, "this pod is in %s, neither the master task (%s) nor "
                            "the worker task (%s) the %s ranks (%s); run podrun in those tasks' "
                            "pods only", ts->t[mine].src, mt->src, wt->src, VCP, VC);
        else if (rank >= n || ws < n)
            r = op_conflict(err, errlen, "RANK=%ld and WORLD_SIZE=%ld (%s) do not fit the master "
                            "and worker tasks' %ld pods (%s + %s) (%s); fix the pod's environment",
                            rank, ws, VCP, n, mn, wn, VC);
        else if (n != ws)
            r = op_setn(c, CFG_NNODES, n, k, err, errlen, "%s + %s (%s)", mn, wn, VCP);
        else
            r = op_setn(c, CFG_NNODES, ws, k, err, errlen, "WORLD_SIZE (%s)", VCP);
    } else if (!r) {
        r = op_setn(c, CFG_NNODES, ws, k, err, errlen, "WORLD_SIZE (%s)", VCP);
    }
    tasks_free(ts);
    free(ts);
    return r;
}

static int apply_plugin(struct cfg *c, const struct op_ctx *x, long idx, const char *ivar,
                        char *err, size_t errlen)
{
    long ws, rank, port;
    int r, rp = 1;
    if ((r = op_num(x, "WORLD_SIZE", VCP, 1, OP_NODES_MAX, &ws, err, errlen)) < 0 ||
        (r = op_num(x, "RANK", VCP, 0, OP_NODES_MAX - 1, &rank, err, errlen)) < 0 ||
        (rp = op_num(x, "MASTER_PORT", VCP, 1, 65535, &port, err, errlen)) < 0)
        return r < 0 ? r : rp;
    if (rank >= ws)
        return op_conflict(err, errlen, "RANK=%ld must be below WORLD_SIZE=%ld (%s); the pod's "
                           "environment is not what the plugin sets", rank, ws, VCP);
    if (idx >= 0 && rank == 0 && idx != 0)
        return op_conflict(err, errlen, "RANK=0 (%s) and %s=%ld (%s) disagree: the plugin gives "
                           "rank 0 to the master task's pods and index + 1 to the worker task's, "
                           "so the master task must have one pod (replicas: 1)", VCP, ivar, idx,
                           VC);
    if (idx >= 0 && rank != 0 && rank != idx + 1)
        return op_conflict(err, errlen, "RANK=%ld (%s) and %s=%ld (%s) disagree: the plugin "
                           "ranks worker i as i + 1; fix the pod's environment", rank, VCP, ivar,
                           idx, VC);
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    if ((r = op_setn(c, CFG_NODE_RANK, rank, k, err, errlen, "RANK (%s)", VCP)) ||
        (r = plugin_nnodes(c, x, ws, rank, err, errlen)) ||
        (r = op_set(c, CFG_MASTER_ADDR, op_get(x, "MASTER_ADDR"), k, err, errlen,
                    "MASTER_ADDR (%s)", VCP)))
        return r;
    return rp ? 0 : op_setn(c, CFG_MASTER_PORT, port, k, err, errlen, "MASTER_PORT (%s)", VCP);
}

/* This pod's task: the one whose list names it. *pos its place there, -1 when no list names it
 * (then err says why). Two lists naming it is an error. */
static int find_task(const struct cfg *c, const struct op_ctx *x, const struct tasks *ts,
                     long *mine, long *pos, char *err, size_t errlen)
{
    char scratch[512];
    *mine = *pos = -1;
    if (!x->host && !c->node_name && !c->local_addr) {
        if (err && errlen)
            snprintf(err, errlen, "this pod's names are unknown, so its Volcano task cannot be "
                     "found; give --node-name or --local-addr");
        return 0;
    }
    for (size_t i = 0; i < ts->n; i++) {
        size_t entry, rank;
        char *e = *mine < 0 ? err : scratch;
        size_t elen = *mine < 0 ? errlen : sizeof scratch;
        int r = hostsource_find_self(&ts->t[i].hf, NULL, c, x->host, &entry, &rank, e, elen);
        if (r == -EEXIST)
            return r;
        if (r)
            continue;
        if (*mine >= 0)
            return op_conflict(err, errlen, "this pod is in two Volcano tasks' host lists, %s "
                               "and %s (%s); a pod belongs to one task", ts->t[*mine].src,
                               ts->t[i].src, VC);
        *mine = (long)i;
        *pos = (long)rank;
    }
    return 0;
}

static int apply_tasks(struct cfg *c, const struct op_ctx *x, const struct tasks *ts, long idx,
                       const char *ivar, char *err, size_t errlen)
{
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    if (ts->n == 0)   /* the env plugin alone: the rank, and the count must come from elsewhere */
        return idx < 0 ? 0 : op_setn(c, CFG_NODE_RANK, idx, k, err, errlen, "%s (%s)", ivar, VC);
    long mine, pos;
    int r = find_task(c, x, ts, &mine, &pos, err, errlen);
    if (r)
        return r;
    if (mine < 0 && ts->n == 1 && idx >= 0)
        mine = 0;   /* the index says it; the list may hold a host name the template set */
    if (mine < 0) {
        if (ts->n > 1)
            return op_conflict(err, errlen, "this pod is in none of the Volcano tasks' host lists "
                               "(%s, %s, ...) (%s); give --hostfile or --discovery k8s",
                               ts->t[0].src, ts->t[1].src, VC);
        return -ENOENT;   /* err says which names were looked for in which list */
    }
    const struct task *t = &ts->t[mine];
    if (idx >= 0 && pos >= 0 && pos != idx)
        return op_conflict(err, errlen, "%s=%ld (%s) but this pod is entry %ld of %s (%s): the "
                           "two disagree; fix the pod's environment", ivar, idx, VC, pos, t->src,
                           VC);
    long rank = idx >= 0 ? idx : pos;
    long n = (long)t->hf.count;
    if (rank >= n)
        return op_conflict(err, errlen, "%s=%ld (%s) must be below the %ld hosts of %s", ivar,
                           idx, VC, n, t->src);
    const enum cfg_src_kind lk = t->from_file ? CFG_SRC_HOSTFILE : k;
    if (idx >= 0)
        r = op_setn(c, CFG_NODE_RANK, rank, k, err, errlen, "%s (%s)", ivar, VC);
    else if (t->from_file)
        r = op_setn(c, CFG_NODE_RANK, rank, lk, err, errlen, "%s line %u (%s)", t->src,
                    t->hf.entries[rank].line, VC);
    else
        r = op_setn(c, CFG_NODE_RANK, rank, lk, err, errlen, "%s (%s)", t->src, VC);
    if (r)
        return r;
    if (t->num_var[0])
        r = op_setn(c, CFG_NNODES, n, k, err, errlen, "%s (%s)", t->num_var, VC);
    else
        r = op_setn(c, CFG_NNODES, n, lk, err, errlen, "%s (%s)", t->src, VC);
    if (r)
        return r;
    if (t->from_file)
        return op_set(c, CFG_MASTER_ADDR, t->hf.entries[0].host, lk, err, errlen,
                      "%s line %u (%s)", t->src, t->hf.entries[0].line, VC);
    return op_set(c, CFG_MASTER_ADDR, t->hf.entries[0].host, lk, err, errlen, "%s (%s)", t->src,
                  VC);
}

static int volcano_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    struct tasks *ts = calloc(1, sizeof *ts);
    long idx = -1;
    const char *ivar = "VC_TASK_INDEX";
    int r = 0;
    if (!ts)
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    if (!x->files_only)
        r = task_index(x, &idx, &ivar, err, errlen);
    bool plugin = !x->files_only && op_get(x, "MASTER_ADDR") && op_get(x, "WORLD_SIZE") &&
                  op_get(x, "RANK");
    if (!r && plugin)
        r = apply_plugin(c, x, idx, ivar, err, errlen);
    else if (!r) {
        if (!x->files_only)
            r = env_tasks(x, ts, err, errlen);
        if (!r && ts->n == 0)
            r = file_tasks(x, ts, err, errlen);
        if (!r)
            r = apply_tasks(c, x, ts, idx, ivar, err, errlen);
    }
    tasks_free(ts);
    free(ts);
    return r;
}

const struct op_adapter op_volcano = {VC, OP_ENV | OP_FILES, volcano_detect, volcano_apply};
