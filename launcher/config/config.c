/* launcher/config/config.c — the struct's life, the sources and their ranks, cfg_set,
 * cfg_finalize, --print-config and --help (see config.h). */
#include "launcher/config/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/settings.h"
#include "launcher/config/values.h"
#include "launcher/env/environ.h"
#include "rdzv/store/acl.h"
#include "rdzv/store/auth.h"
#include "rdzv/base/common.h"
#include "rdzv/etcd/json.h"
#include "rdzv/records.h"

/* One line about a bad input into err, and -EINVAL. */
#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

const char *cfg_name(enum cfg_id id)
{
    return (unsigned)id < CFG__COUNT ? cfg_settings[id].name : "?";
}

const char *cfg_acc(const struct cfg *c, enum cfg_id id)
{
    if (id < CFG_ACC_CONFIG_FILE || id > CFG_ACC_FSDP_IGNORED_MODULES)
        return NULL;
    return c->acc[id - CFG_ACC_CONFIG_FILE];
}

/* A launcher's own settings are shown only when the workers get that launcher's environment. */
static bool printed(const struct cfg *c, const struct cfg_setting *s)
{
    if (s->flags & CFG_F_ACTION)
        return false;
    if (s->flags & CFG_F_ACCELERATE)
        return c->worker_env == CFG_WORKER_ENV_ACCELERATE;
    if (s->flags & CFG_F_PADDLE)
        return c->worker_env == CFG_WORKER_ENV_PADDLE;
    return true;
}

void cfg_src_init(struct cfg_src *s, enum cfg_src_kind kind, const char *fmt, ...)
{
    va_list ap;
    s->kind = kind;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
}

void cfg_src_describe(const struct cfg_src *s, char *buf, size_t len)
{
    switch (s->kind) {
    case CFG_SRC_DEFAULT: snprintf(buf, len, "default"); break;
    case CFG_SRC_OPERATOR: snprintf(buf, len, "env %s", s->name); break;
    case CFG_SRC_HOSTFILE: snprintf(buf, len, "hostfile %s", s->name); break;
    case CFG_SRC_PET:
    case CFG_SRC_PODRUN: snprintf(buf, len, "env %s", s->name); break;
    case CFG_SRC_FILE: snprintf(buf, len, "config file %s", s->name); break;
    case CFG_SRC_FLAG: snprintf(buf, len, "flag %s", s->name); break;
    case CFG_SRC_DERIVED: snprintf(buf, len, "from %s", s->name); break;
    }
}

/* How an error names its input: "--nproc-per-node 'x'", "PODRUN_NPROC_PER_NODE='x'",
 * "--rdzv-conf join_timeout=x". */
static void input_name(enum cfg_id id, const struct cfg_src *s, const char *val, char *buf,
                       size_t len)
{
    const char *name = cfg_settings[id].name;
    if ((cfg_settings[id].flags & CFG_F_CONF_KEY) && s->kind != CFG_SRC_DEFAULT) {
        snprintf(buf, len, "--rdzv-conf %s=%s", name, val);
        return;
    }
    switch (s->kind) {   /* a long source (a hostfile's path) is cut, the line still names it */
    case CFG_SRC_FLAG: sfmt(buf, len, "%s '%s'", s->name, val); break;
    case CFG_SRC_OPERATOR:
    case CFG_SRC_HOSTFILE:
    case CFG_SRC_PET:
    case CFG_SRC_PODRUN: sfmt(buf, len, "%s='%s'", s->name, val); break;
    case CFG_SRC_FILE: sfmt(buf, len, "%s: %s '%s'", s->name, name, val); break;
    default: snprintf(buf, len, "%s '%s'", name, val); break;
    }
}

static int set_value(struct cfg *c, enum cfg_id id, const char *text, const struct cfg_src *src,
                     char *err, size_t errlen);

/* The setting a --rdzv-conf key names, or -1. */
static int conf_key(const char *key)
{
    for (int i = 0; i < CFG__COUNT; i++)
        if ((cfg_settings[i].flags & CFG_F_CONF_KEY) && !strcmp(key, cfg_settings[i].name))
            return i;
    return -1;
}

/* --rdzv-conf K=V,...: each key is a setting of its own, set with the composite's source (so a
 * flag's join_timeout beats PET_RDZV_CONF's, key by key). An unknown key is an error that lists
 * the known ones. */
static int set_conf(struct cfg *c, const char *v, const struct cfg_src *src, char *err,
                    size_t errlen)
{
    char what[160], key[128];
    const char *p = v, *val;
    int r;
    input_name(CFG_RDZV_CONF, src, v, what, sizeof what);
    while ((r = cfg_conf_next(&p, key, sizeof key, &val)) > 0) {
        int id = conf_key(key);
        if (id < 0) {
            char known[256] = "";
            textlist_t l = {known, sizeof known, 0, 0, CFG__COUNT};
            for (int k = 0; k < CFG__COUNT; k++)
                if (cfg_settings[k].flags & CFG_F_CONF_KEY)
                    textlist_add(&l, cfg_settings[k].name);
            return fail(err, errlen, "%s: unknown key '%s'; known keys: %s", what, key, known);
        }
        if ((r = set_value(c, (enum cfg_id)id, val, src, err, errlen)))
            return r;
    }
    if (r == -E2BIG)
        return fail(err, errlen, "%s: entry too long; use KEY=VALUE,KEY=VALUE", what);
    if (r < 0)
        return fail(err, errlen, "%s: '%s' is not KEY=VALUE", what, key);
    if (src->kind >= c->src[CFG_RDZV_CONF].kind)
        c->src[CFG_RDZV_CONF] = *src;
    return 0;
}

/* Parse first, so that bad text is an error whatever its rank; then keep the value only over
 * one from a source of the same or a lower rank. */
static int set_value(struct cfg *c, enum cfg_id id, const char *text, const struct cfg_src *src,
                     char *err, size_t errlen)
{
    const struct cfg_setting *s = &cfg_settings[id];
    const struct cfg_type *t = &cfg_types[s->type];
    char what[160];
    if (!text)
        return fail(err, errlen, "%s needs a value", s->name);
    if (s->type == CFG_T_CONF)
        return set_conf(c, text, src, err, errlen);
    input_name(id, src, text, what, sizeof what);
    union cfg_value v;
    memset(&v, 0, sizeof v);
    int r = t->parse(s, text, what, &v, err, errlen);
    if (r == -ENOMEM) {
        fail(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (r)
        return r;
    if (src->kind < c->src[id].kind) {
        if (t->drop)
            t->drop(&v);
        return 0;
    }
    t->store(c, s, &v);
    c->src[id] = *src;
    return 0;
}

int cfg_set(struct cfg *c, enum cfg_id id, const char *text, const struct cfg_src *src,
            char *err, size_t errlen)
{
    if ((unsigned)id >= CFG__COUNT || !src)
        return fail(err, errlen, "no such setting");
    if (src->kind == CFG_SRC_DERIVED)
        return fail(err, errlen, "%s: only podrun derives values (from %s)", cfg_settings[id].name,
                    src->name);
    return set_value(c, id, text, src, err, errlen);
}

/* The one writer of DERIVED values: v (consumed) becomes the setting's value, derived from
 * `from`. DERIVED outranks every source: what cfg_finalize derives follows from the others. */
static void derive(struct cfg *c, enum cfg_id id, union cfg_value *v, const char *from)
{
    const struct cfg_setting *s = &cfg_settings[id];
    cfg_types[s->type].store(c, s, v);
    cfg_src_init(&c->src[id], CFG_SRC_DERIVED, "%s", from);
}

void cfg_set_program(struct cfg *c, char **argv, int argc)
{
    c->program = argc > 0 ? argv : NULL;
    c->program_argc = argc > 0 ? argc : 0;
}

void cfg_init(struct cfg *c)
{
    memset(c, 0, sizeof *c);
    struct cfg_src def = {CFG_SRC_DEFAULT, ""};
    for (int i = 0; i < CFG__COUNT; i++) {
        const struct cfg_setting *s = &cfg_settings[i];
        if (cfg_types[s->type].clear)
            cfg_types[s->type].clear(c, s);
        if (s->def)
            set_value(c, (enum cfg_id)i, s->def, &def, NULL, 0);
    }
}

void cfg_free(struct cfg *c)
{
    for (int i = 0; i < CFG__COUNT; i++) {
        const struct cfg_setting *s = &cfg_settings[i];
        if (cfg_types[s->type].clear)
            cfg_types[s->type].clear(c, s);
    }
    free(c->redirect_mask);
    free(c->tee_mask);
    free(c->console_rank);
    c->redirect_mask = c->tee_mask = NULL;
    c->console_rank = NULL;
}

int cfg_load_env(struct cfg *c, char *const *envp, char *err, size_t errlen)
{
    for (int i = 0; i < CFG__COUNT; i++) {
        char name[64];
        cfg_env_name((enum cfg_id)i, name, sizeof name);
        const char *v = name[0] ? env_get(envp, name) : NULL;
        if (!v || !*v)
            continue;
        struct cfg_src s;
        cfg_src_init(&s, CFG_SRC_PODRUN, "%s", name);
        int r = set_value(c, (enum cfg_id)i, v, &s, err, errlen);
        if (r)
            return r;
    }
    return 0;
}

/* ---- finalize ------------------------------------------------------------------------------ */

/* auto/cpu/gpu become a number, within 1..CFG_MAX_NPROC. A deepspeed job without a hostfile
 * and without a count of its own runs a worker per GPU of this node, as DeepSpeed's local
 * resources are the accelerator's device count (and one worker where there is no GPU). */
static int resolve_nproc(struct cfg *c, int ncpus, int ngpus, char *err, size_t errlen)
{
    if (c->ds_mode == CFG_DS_MODE_LOCAL && c->src[CFG_NPROC_PER_NODE].kind == CFG_SRC_DEFAULT &&
        ngpus > 0) {
        c->nproc_per_node = ngpus;
        cfg_src_init(&c->src[CFG_NPROC_PER_NODE], CFG_SRC_DERIVED, "%s",
                     "this node's GPUs (deepspeed without a hostfile)");
    }
    if (c->acc_auto_launcher && ngpus <= 1 && c->nproc_per_node != 1) {
        /* accelerate turns its multi-GPU launcher on only when it sees several GPUs; else its
         * simple launcher starts the one process, whatever --num_processes says */
        c->nproc_kind = CFG_NPROC_NUMBER;
        c->nproc_per_node = 1;
        cfg_src_init(&c->src[CFG_NPROC_PER_NODE], CFG_SRC_DERIVED, "%s",
                     "accelerate's simple launcher (no more than one GPU on this node)");
    }
    switch (c->nproc_kind) {
    case CFG_NPROC_NUMBER:
        break;
    case CFG_NPROC_GPU:
        if (ngpus <= 0)
            return fail(err, errlen, "--nproc-per-node gpu: no GPU found on this node; give a "
                        "number of workers, 'cpu' or 'auto'");
        c->nproc_per_node = ngpus;
        break;
    case CFG_NPROC_CPU:
        c->nproc_per_node = ncpus;
        break;
    case CFG_NPROC_AUTO:
        c->nproc_per_node = ngpus > 0 ? ngpus : ncpus;
        break;
    case CFG_NPROC_GPUS_OR_ONE:
        c->nproc_per_node = ngpus > 0 ? ngpus : 1;
        break;
    case CFG_NPROC_XPU:
        return fail(err, errlen, "--nproc-per-node xpu: podrun does not see Intel XPUs on this "
                    "node; give the number of workers");
    }
    if (c->nproc_per_node < 1)
        c->nproc_per_node = 1;
    if (c->nproc_per_node > CFG_MAX_NPROC)
        c->nproc_per_node = CFG_MAX_NPROC;
    return 0;
}

/* etcd's members: a list, URLs or one HOST[:PORT] (port 2379 when left out), and the TLS files,
 * which go together with https. Neither a list nor the files mean anything to another backend. */
static int resolve_etcd(struct cfg *c, char *err, size_t errlen)
{
    bool tls = c->etcd_cacert || c->etcd_cert || c->etcd_key;
    if (c->rdzv_backend != CFG_BACKEND_ETCD) {
        if (c->rdzv_endpoints)
            return fail(err, errlen, "--rdzv-endpoint '%s': a list of endpoints or a URL is for "
                        "--rdzv-backend etcd; the %s backend takes one HOST[:PORT]",
                        c->rdzv_endpoints, c->rdzv_backend == CFG_BACKEND_C10D ? "c10d" : "static");
        if (tls)
            return fail(err, errlen, "--etcd-cacert, --etcd-cert and --etcd-key are for "
                        "--rdzv-backend etcd");
        return 0;
    }
    if (!c->rdzv_host)
        return fail(err, errlen, "--rdzv-backend etcd needs --rdzv-endpoint HOST[:2379][,...], "
                    "the client endpoints of etcd's members");
    if (!c->etcd_cert != !c->etcd_key)
        return fail(err, errlen, "--etcd-cert and --etcd-key go together: give the client "
                    "certificate and its private key");
    char one[300];
    const char *text = c->rdzv_endpoints;
    if (!text) {
        if (!c->rdzv_port_given)
            c->rdzv_port = ETCD_DEFAULT_PORT;
        podrun_hostport_format(c->rdzv_host, c->rdzv_port, one, sizeof one);
        text = one;
    }
    etcd_endpoint_t *ep = malloc(ETCD_MAX_ENDPOINTS * sizeof *ep);
    char why[256];
    if (!ep)
        return fail(err, errlen, "out of memory");
    int n = etcd_endpoints_parse(text, tls, ep, ETCD_MAX_ENDPOINTS, why, sizeof why);
    int bad = -1;
    for (int i = 0; tls && i < n && bad < 0; i++)
        if (!ep[i].tls)
            bad = i;
    char url[300];
    if (bad >= 0)
        snprintf(url, sizeof url, "%s", ep[bad].url);
    free(ep);
    if (n < 0)
        return fail(err, errlen, "--rdzv-endpoint: %s", why);
    if (bad >= 0)
        return fail(err, errlen, "--rdzv-endpoint names %s, but --etcd-cacert/--etcd-cert are "
                    "given: write https:// (or leave the scheme out)", url);
    /* etcd outlives jobs and is shared by them: under the default id every job on it would
     * join one run, and a node could be counted into another job's round */
    if (c->src[CFG_RDZV_ID].kind == CFG_SRC_DEFAULT)
        return fail(err, errlen, "--rdzv-backend etcd needs the job's own --rdzv-id (or "
                    "PET_RDZV_ID): under the default '%s' every job on this etcd would be one "
                    "job; give every node of the job the same id, unique to the job (e.g. its "
                    "name and uid)", c->rdzv_id);
    return 0;
}

/* Where the job store is. --standalone is a c10d store on a free local port; static's store is
 * the master's (torchrun's rule); c10d needs the endpoint once there is more than one node. A
 * c10d endpoint without a port gets 29400; an explicit :0 is a free port, which only a node that
 * hosts the store can use (the others could not find it). */
static int resolve_endpoint(struct cfg *c, char *err, size_t errlen)
{
    union cfg_value v;
    if (c->standalone) {
        if (c->src[CFG_NNODES].kind != CFG_SRC_DEFAULT && c->nnodes_max != 1)
            return fail(err, errlen, "--standalone runs one node, but --nnodes is %d:%d; drop "
                        "one of them", c->nnodes_min, c->nnodes_max);
        v.i = CFG_BACKEND_C10D;
        derive(c, CFG_RDZV_BACKEND, &v, "--standalone");
        v.endpoint.host = strdup("localhost");
        v.endpoint.port = 0;
        v.endpoint.port_given = c->rdzv_port_given;
        v.endpoint.list = NULL;
        if (!v.endpoint.host)
            return fail(err, errlen, "out of memory");
        derive(c, CFG_RDZV_ENDPOINT, &v, "--standalone");
    }
    /* torchrun's static rendezvous waits for the other nodes as long as its store `timeout` */
    if (c->rdzv_backend == CFG_BACKEND_STATIC && c->src[CFG_STORE_TIMEOUT].kind != CFG_SRC_DEFAULT &&
        c->src[CFG_JOIN_TIMEOUT].kind == CFG_SRC_DEFAULT) {
        v.ms = c->store_timeout_ms;
        derive(c, CFG_JOIN_TIMEOUT, &v, "rdzv-conf timeout");
    }
    if (c->node_rank >= c->nnodes_max) {
        /* the two may come from different sources (a scheduler's rank, the user's count): name
         * both, since precedence cannot make them one job */
        char what[160], nwhat[160];
        cfg_src_describe(&c->src[CFG_NODE_RANK], what, sizeof what);
        cfg_src_describe(&c->src[CFG_NNODES], nwhat, sizeof nwhat);
        return fail(err, errlen, "--node-rank %d (%s) must be below --nnodes %d (%s); give the "
                    "job's node count or this node's rank so that they fit", c->node_rank, what,
                    c->nnodes_max, nwhat);
    }
    if (c->segment_size > 1 &&
        (c->nnodes_min % c->segment_size || c->nnodes_max % c->segment_size))
        return fail(err, errlen, "--segment-size %d must divide both ends of --nnodes %d:%d (a "
                    "round is a whole number of segments): give --nnodes as multiples of %d, or "
                    "another --segment-size", c->segment_size, c->nnodes_min, c->nnodes_max,
                    c->segment_size);
    if (c->discovery == CFG_DISCOVERY_K8S && c->src[CFG_NNODES].kind == CFG_SRC_DEFAULT)
        return fail(err, errlen, "--discovery k8s waits for the job's pods: give their number "
                    "with --nnodes N (or MIN:MAX)");
    int r = resolve_etcd(c, err, errlen);
    if (r || c->rdzv_backend == CFG_BACKEND_ETCD)
        return r;
    /* Kubernetes discovery finds the store at run time: the rank-0 pod's IP */
    if (!c->rdzv_host && c->discovery == CFG_DISCOVERY_K8S &&
        c->src[CFG_MASTER_ADDR].kind == CFG_SRC_DEFAULT) {
        v.endpoint.host = strdup("rank-0-pod");
        v.endpoint.port = c->rdzv_backend == CFG_BACKEND_STATIC ? c->master_port : 0;
        v.endpoint.port_given = false;
        v.endpoint.list = NULL;
        if (!v.endpoint.host)
            return fail(err, errlen, "out of memory");
        derive(c, CFG_RDZV_ENDPOINT, &v, "--discovery k8s");
    }
    if (!c->rdzv_host) {
        const char *from = "--rdzv-backend c10d";
        v.endpoint.port = 0;
        v.endpoint.port_given = false;
        v.endpoint.list = NULL;
        /* a node alone hosts its store at --local-addr, so that is where its workers find it
         * when no master address was given (torchrun's store listens on every address) */
        const char *master = c->nnodes_max == 1 && c->local_addr &&
                                     c->src[CFG_MASTER_ADDR].kind == CFG_SRC_DEFAULT
                                 ? c->local_addr
                                 : c->master_addr;
        if (c->rdzv_backend == CFG_BACKEND_STATIC && c->nnodes_max == 1 &&
            c->src[CFG_MASTER_PORT].kind == CFG_SRC_DEFAULT) {
            /* torchrun 2.x's rule: one node, no port given: a free port, so that two jobs on
             * one machine do not meet at 29500 */
            v.endpoint.host = strdup(master);
            v.endpoint.port_given = true;
            from = "one node without --master-port: a free port";
        } else if (c->rdzv_backend == CFG_BACKEND_STATIC) {
            v.endpoint.host = strdup(master);
            v.endpoint.port = c->master_port;
            from = "--master-addr/--master-port";
        } else if (c->nnodes_max > 1) {
            return fail(err, errlen, "--rdzv-backend c10d needs --rdzv-endpoint HOST[:PORT], the "
                        "address of the node that hosts the job store");
        } else {
            v.endpoint.host = strdup("localhost");
        }
        if (!v.endpoint.host)
            return fail(err, errlen, "out of memory");
        derive(c, CFG_RDZV_ENDPOINT, &v, from);
    }
    if (c->rdzv_port == 0 && c->rdzv_backend == CFG_BACKEND_C10D && !c->standalone &&
        !c->rdzv_port_given)
        c->rdzv_port = CFG_DEFAULT_C10D_PORT;
    if (c->rdzv_port == 0 && c->rdzv_port_given && !c->standalone && c->nnodes_max > 1 &&
        (c->rdzv_backend == CFG_BACKEND_STATIC ? c->node_rank != 0 : c->is_host != 1))
        return fail(err, errlen, "--rdzv-endpoint %s:0 (a free port) works only on a single node "
                    "or the node that hosts the job store (%s); the other nodes cannot find the "
                    "port: give its number", c->rdzv_host,
                    c->rdzv_backend == CFG_BACKEND_STATIC ? "--node-rank 0"
                                                          : "--rdzv-conf is_host=1");
    return 0;
}

/* --redirects, --tee and --local-ranks-filter, one entry per local rank. */
static int expand_streams(struct cfg *c, char *err, size_t errlen)
{
    int n = c->nproc_per_node;
    long bad = 0;
    free(c->redirect_mask);
    free(c->tee_mask);
    free(c->console_rank);
    c->redirect_mask = calloc((size_t)n, 1);
    c->tee_mask = calloc((size_t)n, 1);
    c->console_rank = calloc((size_t)n, sizeof(bool));
    if (!c->redirect_mask || !c->tee_mask || !c->console_rank)
        return fail(err, errlen, "out of memory");
    if (cfg_stdspec_expand(c->redirects, n, c->redirect_mask, &bad))
        return fail(err, errlen, "--redirects '%s': local rank %ld is not below "
                    "--nproc-per-node %d", c->redirects, bad, n);
    if (cfg_stdspec_expand(c->tee, n, c->tee_mask, &bad))
        return fail(err, errlen, "--tee '%s': local rank %ld is not below --nproc-per-node %d",
                    c->tee, bad, n);
    if (!c->local_ranks_filter) {
        for (int i = 0; i < n; i++)
            c->console_rank[i] = true;
    } else if (cfg_ranks_parse(c->local_ranks_filter, n, c->console_rank, &bad)) {
        return fail(err, errlen, "--local-ranks-filter '%s': local rank %ld is not below "
                    "--nproc-per-node %d", c->local_ranks_filter, bad, n);
    }
    return 0;
}

/* The settings that give each worker a GPU of its own need as many GPUs as workers; the core
 * list implies the cores mode and means nothing with another. */
static int resolve_devices(struct cfg *c, int ngpus, char *err, size_t errlen)
{
    char what[CFG_SRC_NAME_MAX + 32];
    if (c->bind_core_list && c->src[CFG_NUMA_BINDING].kind == CFG_SRC_DEFAULT) {
        union cfg_value v = {.i = CFG_NUMA_CORES};
        derive(c, CFG_NUMA_BINDING, &v, "--bind-core-list");
    } else if (c->bind_core_list && c->numa_binding != CFG_NUMA_CORES) {
        cfg_src_describe(&c->src[CFG_NUMA_BINDING], what, sizeof what);
        return fail(err, errlen, "--bind-core-list splits CPUs among the workers only with "
                    "--numa-binding cores, but --numa-binding is %s (%s): drop one of them",
                    cfg_settings[CFG_NUMA_BINDING].choices[c->numa_binding], what);
    }
    static const struct {
        enum cfg_id id;
        const char *as;
    } own_gpu[] = {
        {CFG_VIRTUAL_LOCAL_RANK, "--virtual-local-rank"},
        {CFG_VISIBLE_DEVICES, "--visible-devices per-rank"},
        {CFG_NUMA_BINDING, NULL},
        {CFG_PREFLIGHT, "--preflight nccl"},
    };
    for (size_t i = 0; i < sizeof own_gpu / sizeof *own_gpu; i++) {
        enum cfg_id id = own_gpu[i].id;
        bool wants = (id == CFG_VIRTUAL_LOCAL_RANK && c->virtual_local_rank) ||
                     (id == CFG_VISIBLE_DEVICES && c->visible_devices == CFG_VISIBLE_PER_RANK) ||
                     (id == CFG_NUMA_BINDING && c->numa_binding != CFG_NUMA_NONE &&
                      c->numa_binding != CFG_NUMA_CORES) ||
                     (id == CFG_PREFLIGHT && c->preflight == CFG_PREFLIGHT_NCCL);
        if (!wants || c->nproc_per_node <= ngpus)
            continue;
        char as[64];
        if (own_gpu[i].as)
            snprintf(as, sizeof as, "%s", own_gpu[i].as);
        else
            snprintf(as, sizeof as, "--numa-binding %s",
                     cfg_settings[id].choices[c->numa_binding]);
        cfg_src_describe(&c->src[id], what, sizeof what);
        if (ngpus <= 0)
            return fail(err, errlen, "%s (%s) gives each worker a GPU of its own, but no GPU was "
                        "found on this node: drop it", as, what);
        return fail(err, errlen, "%s (%s) gives each worker a GPU of its own, but there %s %d "
                    "GPU%s here for %d workers: give --nproc-per-node gpu or at most %d", as,
                    what, ngpus == 1 ? "is" : "are", ngpus, ngpus == 1 ? "" : "s",
                    c->nproc_per_node, ngpus);
    }
    return 0;
}

/* Runs once every layer is in: resolves what depends on the machine (nproc) and on other values
 * (the endpoint, derived with its source saying from what), expands the per-rank stream specs,
 * and rejects combinations that cannot work, each with one line naming the inputs and the fix.
 * --help and --version skip all of it: they must work whatever else is given. */
/* The store's guards, checked here so that a bad value is a usage error before anything runs:
 * a token the handshake would refuse, an allow-list entry that is no address. The token file is
 * read by the agent. */
static int check_security(const struct cfg *c, char *err, size_t errlen)
{
    if (c->rdzv_token && c->rdzv_token_file)
        return fail(err, errlen, "%s and %s both give the rendezvous token; keep one",
                    c->src[CFG_RDZV_TOKEN].name, c->src[CFG_RDZV_TOKEN_FILE].name);
    if (c->rdzv_token) {
        auth_key_t k;
        int r = auth_key_from_token(c->rdzv_token, strlen(c->rdzv_token),
                                    c->src[CFG_RDZV_TOKEN].name, &k, err, errlen);
        if (r)
            return r;
    }
    if (c->store_allow) {
        acl_t acl = {0};
        int job = 0;
        int r = acl_add_list(&acl, c->store_allow, c->src[CFG_STORE_ALLOW].name, &job, err,
                             errlen);
        acl_free(&acl);
        if (r)
            return r;
    }
    return 0;
}

int cfg_finalize(struct cfg *c, int ncpus, int ngpus, char *err, size_t errlen)
{
    if (c->help || c->version)
        return 0;
    int r = resolve_nproc(c, ncpus, ngpus, err, errlen);
    if (r)
        return r;
    if (c->module && c->no_python)
        return fail(err, errlen, "--module and --no-python exclude each other: -m runs a python "
                    "module, --no-python runs PROGRAM directly; keep one");
    if (c->run_path && c->no_python)
        return fail(err, errlen, "--run-path and --no-python exclude each other; keep one");
    if (c->run_path && c->module)
        return fail(err, errlen, "--run-path and --module exclude each other; keep one");
    /* any text is an id (torchrun's rule), but its keys must fit the store's */
    char prefix[RDZV_RUN_ID_MAX + 16];
    if (c->rdzv_id && rdzv_run_prefix(prefix, sizeof prefix, c->rdzv_id) < 0)
        return fail(err, errlen, "%s '%.40s...': longer than %d characters (a '/' or '%%' counts "
                    "as 3); give a shorter id", c->src[CFG_RDZV_ID].name, c->rdzv_id,
                    RDZV_RUN_ID_MAX);
    if ((r = resolve_endpoint(c, err, errlen)) || (r = expand_streams(c, err, errlen)) ||
        (r = check_security(c, err, errlen)) || (r = resolve_devices(c, ngpus, err, errlen)))
        return r;
    if (c->max_no_progress > 0 && !c->progress_file)
        return fail(err, errlen, "%s needs --progress-file PATH (PODRUN_PROGRESS_FILE): the file "
                    "the trainer writes its step or checkpoint iteration to",
                    c->src[CFG_MAX_NO_PROGRESS].name);
    if (!c->program && !c->print_config)
        return fail(err, errlen, "no program to run; usage: podrun [options] [--] PROGRAM "
                    "[ARGS...] (see podrun --help)");
    if (c->program && !c->program[0][0])
        return fail(err, errlen, "the program name is empty; usage: podrun [options] [--] "
                    "PROGRAM [ARGS...] (see podrun --help)");
    return 0;
}

/* ---- output -------------------------------------------------------------------------------- */

void cfg_print(const struct cfg *c, FILE *f)
{
    char val[512], src[CFG_SRC_NAME_MAX + 32];
    for (int i = 0; i < CFG__COUNT; i++) {
        const struct cfg_setting *s = &cfg_settings[i];
        if (!printed(c, s))
            continue;
        cfg_types[s->type].format(c, s, val, sizeof val);
        cfg_src_describe(&c->src[i], src, sizeof src);
        char name[48];
        snprintf(name, sizeof name, "%s%s", s->flags & CFG_F_CONF_KEY ? "rdzv-conf " : "",
                 s->name);
        const char *note = "";
        if ((i == CFG_READ_TIMEOUT && c->rdzv_backend != CFG_BACKEND_ETCD) ||
            (i == CFG_STORE_TIMEOUT && c->src[CFG_JOIN_TIMEOUT].kind != CFG_SRC_DERIVED))
            note = "; accepted for torchrun compatibility, unused";
        else if (i == CFG_STORE_TIMEOUT)
            note = "; used as join_timeout";
        else if (i == CFG_READ_TIMEOUT)
            note = "; how long etcd may fail";
        else if (i == CFG_RDZV_TOKEN_FILE && !c->rdzv_token_file && !c->rdzv_token)
            note = "; no token: the job store is open to anyone who reaches its port";
        if ((s->flags & CFG_F_SECRET) && c->src[i].kind != CFG_SRC_DEFAULT)
            snprintf(val, sizeof val, "(set, not shown)");
        fprintf(f, "%-32s %-24s (%s%s)\n", name, val, src, note);
    }
    fprintf(f, "%-32s", "program");
    if (!c->program)
        fprintf(f, " (none)");
    for (int i = 0; i < c->program_argc; i++)
        fprintf(f, " %s", c->program[i]);
    fprintf(f, "\n");
}

void cfg_usage(FILE *f)
{
    fprintf(f,
            "usage: podrun [options] [--] PROGRAM [ARGS...]\n"
            "       podrun store [options]\n"
            "       podrun k8s COMMAND ARGS...   (k8s_tools.py's commands; podrun k8s --help)\n"
            "       podrun status HOST[:PORT]    (a running job's round, nodes and last failure)\n"
            "\n"
            "Starts --nproc-per-node workers running PROGRAM, each in its own process group with\n"
            "torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), prefixes\n"
            "their output with [rank N]:, forwards signals, reaps every child as PID 1, and exits\n"
            "with the first failing worker's code. A PROGRAM ending in .py, or given with -m, runs\n"
            "under --python -u.\n\n"
            "In a scheduler's pod podrun finds its node rank, the node count and the job store's\n"
            "host by itself (--discovery auto): from PyTorchJob, Kubeflow Trainer, Volcano,\n"
            "PaddleJob, MPIJob, JobSet/Indexed Job, LeaderWorkerSet or SLURM variables and\n"
            "mounted files, or a --hostfile. Precedence, whatever the order given:\n"
            "default < scheduler (its env, then its hostfile) < PET_* < PODRUN_* < flags;\n"
            "--print-config shows each value with its source.\n\n"
            "options (also settable as PODRUN_<NAME> or PET_<NAME>, e.g. PODRUN_NPROC_PER_NODE;\n"
            "--dash-names and --underscore_names both work):\n");
    for (int i = 0; i < CFG__COUNT; i++) {
        const struct cfg_setting *o = &cfg_settings[i];
        if (o->flags & CFG_F_NO_FLAG)
            continue;
        char flag[64];
        if (o->shortc)
            snprintf(flag, sizeof flag, "-%c, --%s%s%s", o->shortc, o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        else
            snprintf(flag, sizeof flag, "    --%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        fprintf(f, "  %-36s %s", flag, o->help);
        if (o->def && o->type != CFG_T_BOOL)
            fprintf(f, " [%s]", o->def);
        fprintf(f, "\n");
    }
    /* One entry per row of doc/failures.md's exit-status table, in its order and in its words;
     * tests/integration/test_docs.py keeps the two equal. */
    fprintf(f, "\nexit status (doc/failures.md, Exit status; CODE: that worker's code, 128+N when\n"
               "it died of signal N):\n"
"  0         every worker of the job exited 0\n"
               "  CODE      this node's worker failed first, and restarts are used up\n"
               "  127, 126  PROGRAM not found, not executable (the job stops at once, no\n"
               "            restart)\n"
               "  143, 130  podrun got SIGTERM, SIGINT\n"
               "  2         a usage error, or this node's --rdzv-id is not the run of the job\n"
               "            store it reached\n"
               "  1         podrun could not start the job\n"
               "  170       --exit-code-peer-failure: a worker on another node failed\n"
               "  171       --exit-code-peer-lost: another agent was lost (killed), left\n"
               "            (SIGTERM) or went silent, or its pod went away (--discovery k8s)\n"
               "  172       --exit-code-store-lost: this node lost the job store's host\n"
               "            (connection or heartbeats); with etcd: etcd did not answer for\n"
               "            read_timeout, or this node's lease expired\n"
               "  173       --exit-code-rdzv-timeout: the rendezvous did not complete within\n"
               "            join_timeout\n"
               "  174       --exit-code-hang: this node's worker hung (--hang-timeout) or its\n"
               "            torch timer expired, and restarts are used up\n"
               "  175       --exit-code-preflight: the preflight check stopped the job or\n"
               "            excluded this node, this node failed its health check, or the\n"
               "            job left this node out as a bad node\n"
               "  93        --exit-code-fatal: a worker anywhere exited with a code\n"
               "            in --fatal-exit-codes or asked not to be retried, or\n"
               "            --max-no-progress-restarts attempts in a row ended without\n"
               "            progress (every node, no restart)\n");
}
