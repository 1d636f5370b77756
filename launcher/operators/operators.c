/* launcher/operators/operators.c — which source discovers the job, the checks on what it gave,
 * and the helpers every adapter uses (see operators.h, adapter.h). */
#include "launcher/operators/operators.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostlist.h"
#include "launcher/env/environ.h"
#include "launcher/operators/adapter.h"
#include "launcher/operators/hostsource.h"
#include "rdzv/base/common.h"

#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

/* ---- helpers (adapter.h) ---- */

const char *op_get(const struct op_ctx *x, const char *name)
{
    const char *v = env_get(x->envp, name);
    return v && *v ? v : NULL;
}

int op_num(const struct op_ctx *x, const char *name, const char *label, long min, long max,
           long *out, char *err, size_t errlen)
{
    const char *v = op_get(x, name);
    char q[80];
    if (!v)
        return 1;
    if (podrun_parse_int(v, min, max, out) == 0)
        return 0;
    hostlist_quote(q, sizeof q, v, strlen(v));
    return fail(err, errlen, "%s='%s' (%s): expected a whole number from %ld to %ld; the pod's "
                "environment is not what %s sets", name, q, label, min, max, label);
}

static int set_src(struct cfg *c, enum cfg_id id, const char *value, enum cfg_src_kind kind,
                   char *err, size_t errlen, const char *fmt, va_list ap)
{
    struct cfg_src s;
    s.kind = kind;
    vsnprintf(s.name, sizeof s.name, fmt, ap);
    return cfg_set(c, id, value, &s, err, errlen);
}

int op_set(struct cfg *c, enum cfg_id id, const char *value, enum cfg_src_kind kind, char *err,
           size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = set_src(c, id, value, kind, err, errlen, fmt, ap);
    va_end(ap);
    return r;
}

int op_setn(struct cfg *c, enum cfg_id id, long value, enum cfg_src_kind kind, char *err,
            size_t errlen, const char *fmt, ...)
{
    char v[24];
    va_list ap;
    snprintf(v, sizeof v, "%ld", value);
    va_start(ap, fmt);
    int r = set_src(c, id, v, kind, err, errlen, fmt, ap);
    va_end(ap);
    return r;
}

int op_conflict(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

int op_path(const struct op_ctx *x, const char *abs, char *out, size_t cap)
{
    const char *root = x->cfg->discovery_root ? x->cfg->discovery_root : "/";
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/')
        rl--;
    int n = snprintf(out, cap, "%.*s%s", (int)rl, root, abs);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int op_discovered(struct cfg *c, const char *name, const struct cfg_src *why, char *err,
                  size_t errlen)
{
    return cfg_set(c, CFG_DISCOVERED, name, why, err, errlen);
}

bool op_is_addr(const char *text)
{
    unsigned char a[16];
    char buf[64];
    size_t n = strlen(text);
    if (n >= 2 && text[0] == '[' && text[n - 1] == ']')
        text++, n -= 2;
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, text, n);
    buf[n] = '\0';
    return inet_pton(AF_INET, buf, a) == 1 || inet_pton(AF_INET6, buf, a) == 1;
}

int op_hostlist_csv(struct hostfile *hf, const char *csv, const char *name, char *err,
                    size_t errlen)
{
    size_t n = strlen(csv);
    char *t = malloc(n + 1);
    if (!t) {
        memset(hf, 0, sizeof *hf);
        return podrun_failf(-ENOMEM, err, errlen, "%s: out of memory", name);
    }
    for (size_t i = 0; i <= n; i++)
        t[i] = csv[i] == ',' ? '\n' : csv[i];
    int r = hostfile_parse(hf, t, n, HOSTFILE_ANY, name, err, errlen);
    free(t);
    return r;
}

/* ---- which source ---- */

/* The detection order (operators.h says why each comes where it does). */
static const struct op_adapter *const adapters[] = {
    &op_volcano, &op_paddlejob, &op_mpijob, &op_trainjob, &op_pytorchjob, &op_lws, &op_jobset,
    &op_slurm, NULL,
};

static const struct op_adapter *detect(const struct op_ctx *x, unsigned mode, struct cfg_src *why)
{
    for (size_t i = 0; adapters[i]; i++)
        if ((adapters[i]->modes & mode) && adapters[i]->detect(x, why))
            return adapters[i];
    return NULL;
}

const struct op_adapter *operators_detect(const struct cfg *c, char *const *envp,
                                          const struct discover_host *host)
{
    struct op_ctx x = {envp, host, c, false};
    struct cfg_src why;
    return detect(&x, OP_ENV, &why);
}

/* What a discovered source must leave behind, all layers being in: how many nodes, and (for more
 * than one) where the job store is. A scheduler that says this pod's rank but not the node count
 * (an Indexed Job, which tells a pod its index only) would otherwise let pod 0 start alone. */
static int check_result(const struct cfg *c, char *err, size_t errlen)
{
    char why[CFG_SRC_NAME_MAX + 32];
    cfg_src_describe(&c->src[CFG_DISCOVERED], why, sizeof why);
    if (c->src[CFG_NNODES].kind == CFG_SRC_DEFAULT)
        return fail(err, errlen, "%s (%s) does not say how many nodes the job has; give "
                    "--nnodes N (or PODRUN_NNODES)", c->discovered, why);
    if (c->nnodes_max > 1 && c->src[CFG_MASTER_ADDR].kind == CFG_SRC_DEFAULT &&
        c->src[CFG_RDZV_ENDPOINT].kind == CFG_SRC_DEFAULT) {
        char nwhy[CFG_SRC_NAME_MAX + 32];
        cfg_src_describe(&c->src[CFG_NNODES], nwhy, sizeof nwhy);
        return fail(err, errlen, "%s (%s) gives %d nodes (%s) but not which one hosts the job "
                    "store; give --rdzv-endpoint HOST[:PORT] with --rdzv-backend c10d, or "
                    "--master-addr HOST", c->discovered, why, c->nnodes_max, nwhy);
    }
    return 0;
}

static const char *mode_name(enum cfg_discovery d)
{
    static const char *const names[] = {"auto", "env", "k8s", "hostfile", "none"};
    return (unsigned)d < sizeof names / sizeof *names ? names[d] : "?";
}

/* --hostfile FILE: the user named the job's hosts. */
static int apply_named_hostfile(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    char from[CFG_SRC_NAME_MAX];
    struct cfg_src why;
    snprintf(from, sizeof from, "%s", c->src[CFG_HOSTFILE].name);
    int r = hostsource_apply(c, x->host, c->hostfile, HOSTFILE_ANY, NULL, NULL, NULL, err, errlen);
    if (r)
        return r;
    cfg_src_init(&why, CFG_SRC_HOSTFILE, "%s (%s)", c->hostfile, from);
    return op_discovered(c, "hostfile", &why, err, errlen);
}

int operators_load(struct cfg *c, char *const *envp, const struct discover_host *host, char *err,
                   size_t errlen)
{
    enum cfg_discovery mode = c->discovery;
    struct op_ctx x = {envp, host, c, mode == CFG_DISCOVERY_HOSTFILE};
    char hsrc[CFG_SRC_NAME_MAX + 32];
    cfg_src_describe(&c->src[CFG_HOSTFILE], hsrc, sizeof hsrc);
    if (c->hostfile && mode != CFG_DISCOVERY_AUTO && mode != CFG_DISCOVERY_HOSTFILE)
        return fail(err, errlen, "--hostfile %s (%s) and --discovery %s exclude each other: a "
                    "hostfile is a discovery source of its own; drop one", c->hostfile, hsrc,
                    mode_name(mode));
    if (mode == CFG_DISCOVERY_NONE || mode == CFG_DISCOVERY_K8S || c->standalone)
        return 0;
    int r;
    if (c->hostfile) {
        r = apply_named_hostfile(c, &x, err, errlen);
        return r ? r : check_result(c, err, errlen);
    }
    struct cfg_src why;
    const struct op_adapter *a = detect(&x, mode == CFG_DISCOVERY_HOSTFILE ? OP_FILES : OP_ENV,
                                        &why);
    if (!a) {
        if (mode == CFG_DISCOVERY_ENV)
            return fail(err, errlen, "--discovery env: no scheduler's environment in this pod "
                        "(looked for Volcano's VC_TASK_INDEX, PaddleJob's PADDLE_TRAINER_ID or "
                        "PADDLE_MASTER, MPIJob's OMPI_MCA_orte_default_hostfile, the Trainer's "
                        "and PyTorchJob's RANK/PET_NODE_RANK, LWS_WORKER_INDEX, "
                        "JOB_COMPLETION_INDEX, SLURM_NODEID); use --discovery auto or none");
        if (mode == CFG_DISCOVERY_HOSTFILE)
            return fail(err, errlen, "--discovery hostfile: no hostfile; give --hostfile FILE "
                        "(looked for OMPI_MCA_orte_default_hostfile, /etc/mpi/hostfile and "
                        "/etc/volcano/*.host)");
        return 0;
    }
    /* set first: an adapter may name its source more exactly ("Indexed Job" for "JobSet") */
    if ((r = op_discovered(c, a->name, &why, err, errlen)) || (r = a->apply(c, &x, err, errlen)))
        return r;
    return check_result(c, err, errlen);
}
