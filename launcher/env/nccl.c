/* launcher/env/nccl.c — NCCL, Gloo, CUDA and OpenMP variables from the node (pure; see nccl.h). */
#include "launcher/env/nccl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "launcher/config/config.h"

/* NCCL_VERSION_CODE of the releases whose behaviour changes what podrun sets. */
#define NCCL_V2_5 2500      /* "=" exact interface names */
#define NCCL_V2_21 22100    /* RoCE GID index chosen by NCCL itself */

/* One rule: fills `v` (name set already) and returns true when it has something to say. */
typedef bool (*nccl_rule_fn)(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                             struct nccl_env_var *v);

static const char *nccl_getenv(char *const *env, const char *name)
{
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

static void nccl_reason(struct nccl_env_var *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void nccl_reason(struct nccl_env_var *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->reason, sizeof v->reason, fmt, ap);
    va_end(ap);
}

static void nccl_value(struct nccl_env_var *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void nccl_value(struct nccl_env_var *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->value, sizeof v->value, fmt, ap);
    va_end(ap);
}

/* Appends ", item" (or "item" first) to a bounded text. */
static void nccl_append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void nccl_append(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

static const struct nccl_env_var *nccl_find(const struct nccl_env *e, const char *name)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->var[i].name, name) == 0)
            return &e->var[i];
    return NULL;
}

static bool nccl_ib_disabled(const struct nccl_env *e, char *const *env)
{
    const struct nccl_env_var *d = nccl_find(e, "NCCL_IB_DISABLE");
    const char *user = nccl_getenv(env, "NCCL_IB_DISABLE");
    const char *net = nccl_getenv(env, "NCCL_NET");
    return (user && strcmp(user, "0") != 0) || (d && d->action == NCCL_ENV_SET) ||
           (net && strcmp(net, "Socket") == 0);
}

/* ---------- sockets ---------- */

static bool rule_socket_ifname(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                               struct nccl_env_var *v)
{
    (void)env, (void)e;
    const struct nic_choice *c = f->nic;
    if (!c)
        return false;
    if (!c->ifname[0]) {
        v->action = NCCL_ENV_UNSET;
        nccl_reason(v, "%s", c->reason);
        return true;
    }
    if (c->nccl_agrees) {
        v->action = NCCL_ENV_UNSET;
        nccl_reason(v, "NCCL picks %s on its own, the interface chosen: %s", c->ifname, c->reason);
        return true;
    }
    bool exact = f->nccl_version == 0 || f->nccl_version >= NCCL_V2_5;
    nccl_value(v, "%s%s", exact ? "=" : "", c->ifname);
    nccl_reason(v, "%s; on its own NCCL would use %s", c->reason,
                c->nccl_auto[0] ? c->nccl_auto : "no interface");
    return true;
}

static bool rule_gloo_ifname(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                             struct nccl_env_var *v)
{
    (void)env, (void)e;
    if (!f->nic || !f->nic->ifname[0])
        return false;
    nccl_value(v, "%s", f->nic->ifname);
    nccl_reason(v, "%s; Gloo otherwise uses the address of this host's name", f->nic->reason);
    return true;
}

/* ---------- InfiniBand / RoCE ---------- */

/* A port NCCL can use here: ACTIVE, known link layer, the device's uverbs node present. */
static bool nccl_port_usable(const struct ib_info *ib, const struct ib_dev *d, const struct ib_port *p)
{
    return ib->dev_infiniband && d->uverbs && ib_port_active(p);
}

static void nccl_dev_names(const struct ib_info *ib, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < ib->ndev; i++)
        nccl_append(buf, len, "%s%s", i ? ", " : "", ib->dev[i].name);
}

static bool rule_ib_disable(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                            struct nccl_env_var *v)
{
    (void)env, (void)e;
    const struct ib_info *ib = f->ib;
    if (!ib || ib->ndev == 0)
        return false;
    char names[256];
    nccl_dev_names(ib, names, sizeof names);
    int usable = 0, active = 0, uverbs = 0;
    for (int i = 0; i < ib->ndev; i++) {
        uverbs += ib->dev[i].uverbs;
        for (int j = 0; j < ib->dev[i].nports; j++) {
            active += ib_port_active(&ib->dev[i].port[j]);
            usable += nccl_port_usable(ib, &ib->dev[i], &ib->dev[i].port[j]);
        }
    }
    v->notice = true;
    if (!ib->dev_infiniband) {
        nccl_value(v, "1");
        nccl_reason(v, "HCAs %s are on this node but /dev/infiniband is not in the container: NCCL "
                       "cannot open them and would fall back to TCP sockets without a word; expose "
                       "the devices (Kubernetes: an RDMA device plugin resource; docker: "
                       "--device=/dev/infiniband --cap-add=IPC_LOCK)", names);
    } else if (uverbs == 0) {
        nccl_value(v, "1");
        nccl_reason(v, "HCAs %s have no /dev/infiniband/uverbs* device in this container: NCCL "
                       "cannot open them; expose their uverbs devices", names);
    } else if (active == 0) {
        nccl_value(v, "1");
        nccl_reason(v, "no port of HCAs %s is ACTIVE: NCCL would use TCP sockets; check the links "
                       "(ibstat)", names);
    } else if (usable && ib->verbs == IB_VERBS_MISSING) {
        v->action = NCCL_ENV_UNSET;
        nccl_reason(v, "HCAs %s are usable but libibverbs.so.1 does not load here (%s): NCCL needs "
                       "it (Debian: libibverbs1 and ibverbs-providers)", names, ib->note);
    } else if (usable && ib->verbs == IB_VERBS_EMPTY) {
        v->action = NCCL_ENV_UNSET;
        nccl_reason(v, "sysfs shows HCAs %s but libibverbs lists none%s%s: the image likely lacks "
                       "their provider library (ibverbs-providers); NCCL would use TCP sockets",
                    names, ib->note[0] ? " — " : "", ib->note);
    } else
        return false;
    return true;
}

static bool rule_ib_hca(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                        struct nccl_env_var *v)
{
    const struct ib_info *ib = f->ib;
    if (!ib || ib->ndev == 0 || nccl_ib_disabled(e, env))
        return false;
    char left[NCCL_ENV_REASON_LEN / 2] = "";
    int usable = 0, all = 0;
    for (int i = 0; i < ib->ndev; i++) {
        const struct ib_dev *d = &ib->dev[i];
        for (int j = 0; j < d->nports; j++) {
            const struct ib_port *p = &d->port[j];
            all++;
            if (nccl_port_usable(ib, d, p)) {
                nccl_append(v->value, sizeof v->value, "%s%s:%d", usable ? "," : "=", d->name, p->num);
                usable++;
            } else
                nccl_append(left, sizeof left, "%s%s:%d (%s)", left[0] ? ", " : "", d->name, p->num,
                            !d->uverbs ? "no uverbs device here" : ib_port_state_name(p->state));
        }
    }
    if (usable == 0) {
        v->value[0] = '\0';
        return false;
    }
    if (usable == all) {
        v->action = NCCL_ENV_UNSET;
        v->value[0] = '\0';
        nccl_reason(v, "all %d HCA port(s) are ACTIVE and usable: NCCL uses them on its own", all);
        return true;
    }
    nccl_reason(v, "the %d usable port(s), exact names; left out %s", usable, left);
    return true;
}

static bool rule_ib_gid_index(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                              struct nccl_env_var *v)
{
    const struct ib_info *ib = f->ib;
    if (!ib || nccl_ib_disabled(e, env))
        return false;
    int index = -2, roce = 0;
    bool differ = false;
    char ports[200] = "", missing[200] = "";
    for (int i = 0; i < ib->ndev; i++)
        for (int j = 0; j < ib->dev[i].nports; j++) {
            const struct ib_dev *d = &ib->dev[i];
            const struct ib_port *p = &d->port[j];
            if (!nccl_port_usable(ib, d, p) || p->link != IB_LINK_ETHERNET)
                continue;
            roce++;
            if (p->gid_index < 0) {
                nccl_append(missing, sizeof missing, "%s%s:%d", missing[0] ? ", " : "", d->name, p->num);
                continue;
            }
            nccl_append(ports, sizeof ports, "%s%s:%d -> %d (%s)", ports[0] ? ", " : "", d->name,
                        p->num, p->gid_index, p->gid_ipv4);
            if (index != -2 && index != p->gid_index)
                differ = true;
            index = p->gid_index;
        }
    if (roce == 0)
        return false;
    v->action = NCCL_ENV_UNSET;
    static const char *const selectors[] = {"NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE",
                                            "NCCL_IB_ROCE_VERSION_NUM"};
    for (size_t k = 0; k < sizeof selectors / sizeof selectors[0]; k++)
        if (nccl_getenv(env, selectors[k])) {
            nccl_reason(v, "%s is set: NCCL chooses the RoCE GID by it", selectors[k]);
            return true;
        }
    if (missing[0]) {
        v->notice = true;
        nccl_reason(v, "RoCE port(s) %s have no RoCE v2 GID with an IPv4 address: give the port's "
                       "netdev an IPv4 address, or set NCCL_IB_ADDR_FAMILY=AF_INET6 for an IPv6 "
                       "fabric", missing);
    } else if (differ) {
        nccl_reason(v, "the RoCE ports' v2 IPv4 GIDs are at different indices (%s): one "
                       "NCCL_IB_GID_INDEX cannot name them all; NCCL 2.21+ picks per port", ports);
    } else if (f->nccl_version >= NCCL_V2_21) {
        nccl_reason(v, "NCCL %d.%d picks the RoCE v2 GID itself (%s)", f->nccl_version / 10000,
                    f->nccl_version / 100 % 100, ports);
    } else {
        v->action = NCCL_ENV_SET;
        nccl_value(v, "%d", index);
        nccl_reason(v, "the RoCE v2 GID with an IPv4 address on every RoCE port (%s); NCCL before "
                       "2.21 uses index 0 otherwise, NCCL 2.21+ picks the same one%s", ports,
                    f->nccl_version ? "" : " (the workers' NCCL version is not known here)");
    }
    return true;
}

/* ---------- GPUs ---------- */

static void nccl_models(const struct nccl_facts *f, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int k = 0; f->gpus && k < f->visible->n; k++) {
        const char *name = f->gpus->dev[f->visible->slot[k].gpu].name;
        name = name[0] ? name : "unknown model";
        if (!strstr(buf, name))
            nccl_append(buf, len, "%s%s", buf[0] ? ", " : "", name);
    }
}

static bool rule_device_order(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                              struct nccl_env_var *v)
{
    (void)e;
    const struct gpu_visible *vis = f->visible;
    if (!vis || vis->order_known || vis->n < 2 || f->per_rank_visible || vis->mig)
        return false;
    char models[160];
    nccl_models(f, models, sizeof models);
    if (nccl_getenv(env, "CUDA_VISIBLE_DEVICES")) {
        v->action = NCCL_ENV_UNSET;
        v->notice = true;
        nccl_reason(v, "the GPUs differ (%s) and CUDA_VISIBLE_DEVICES names them by index under "
                       "FASTEST_FIRST: which GPU each index is is CUDA's choice; name them by UUID "
                       "or set CUDA_DEVICE_ORDER=PCI_BUS_ID", models);
        return true;
    }
    nccl_value(v, "PCI_BUS_ID");
    nccl_reason(v, "the GPUs differ (%s): CUDA's default FASTEST_FIRST order is a heuristic podrun "
                   "cannot reproduce, so LOCAL_RANK i would be an unknown GPU; PCI_BUS_ID makes it "
                   "the i-th in PCI order, the GPU podrun binds it near", models);
    return true;
}

static bool rule_visible(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                         struct nccl_env_var *v)
{
    const struct gpu_visible *vis = f->visible;
    const char *user = nccl_getenv(env, "CUDA_VISIBLE_DEVICES");
    if (!vis || !(f->per_rank_visible || vis->mig))
        return false;
    if (f->nlocal > vis->n) {
        v->action = NCCL_ENV_UNSET;
        v->notice = true;
        nccl_reason(v, "one GPU per worker was asked for %d workers but %d GPU(s) are visible%s",
                    f->nlocal, vis->n, user ? "; the inherited value is left alone" : "");
        return true;
    }
    e->per_rank_visible = true;
    for (int r = 0; r < f->nlocal; r++)
        nccl_append(v->value, sizeof v->value, "%s%s", r ? "," : "", vis->slot[r].token);
    nccl_reason(v, "%s: worker i sees only device i of the list above, by UUID, as "
                   "--virtual-local-rank does%s",
                f->per_rank_visible ? "one GPU per worker was asked"
                                    : "MIG devices are visible and a process may enumerate only "
                                      "one MIG device",
                user ? " (each a device of the inherited CUDA_VISIBLE_DEVICES)" : "");
    return true;
}

enum nccl_omp nccl_omp_rule(int worker_env)
{
    return worker_env == CFG_WORKER_ENV_DEEPSPEED ? NCCL_OMP_NONE
           : worker_env == CFG_WORKER_ENV_PADDLE  ? NCCL_OMP_ONE
                                                  : NCCL_OMP_TORCHRUN;
}

static bool rule_omp(const struct nccl_facts *f, char *const *env, struct nccl_env *e,
                     struct nccl_env_var *v)
{
    (void)env, (void)e;
    if (f->omp_threads > 0) {
        nccl_value(v, "%d", f->omp_threads);
        nccl_reason(v, "the cores each worker is bound to (--bind_cores_to_rank), as DeepSpeed sets");
        return true;
    }
    if (f->omp == NCCL_OMP_ONE) {
        nccl_value(v, "1");
        nccl_reason(v, "Paddle's default: its launcher imports paddle, which sets it, and "
                       "passes it on; set OMP_NUM_THREADS to tune");
        return true;
    }
    if (f->omp == NCCL_OMP_TORCHRUN && f->nlocal > 1) {
        nccl_value(v, "1");
        nccl_reason(v, "%d workers share this node: torchrun's default, to keep OpenMP from "
                       "oversubscribing the CPUs; set OMP_NUM_THREADS to tune", f->nlocal);
        return true;
    }
    return false;
}

/* The rules in the order `podrun env` prints them. A variable a rule may set per worker is
 * checked against the environment by the rule itself. */
static const struct {
    const char *name;
    nccl_rule_fn fn;
    bool per_worker;
} nccl_rules[] = {
    {"NCCL_SOCKET_IFNAME", rule_socket_ifname, false},
    {"GLOO_SOCKET_IFNAME", rule_gloo_ifname, false},
    {"NCCL_IB_DISABLE", rule_ib_disable, false},
    {"NCCL_IB_HCA", rule_ib_hca, false},
    {"NCCL_IB_GID_INDEX", rule_ib_gid_index, false},
    {"CUDA_DEVICE_ORDER", rule_device_order, false},
    {"CUDA_VISIBLE_DEVICES", rule_visible, true},
    {"OMP_NUM_THREADS", rule_omp, false},
};

int nccl_env_derive(const struct nccl_facts *f, char *const *environ, struct nccl_env *out)
{
    if (!f || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof nccl_rules / sizeof nccl_rules[0]; i++) {
        struct nccl_env_var *v = &out->var[out->n];
        memset(v, 0, sizeof *v);
        v->name = nccl_rules[i].name;
        const char *user = nccl_getenv(environ, v->name);
        if (!nccl_rules[i].fn(f, environ, out, v)) {
            if (!user)
                continue;
            memset(v, 0, sizeof *v);
            v->name = nccl_rules[i].name;
        }
        if (user && !(nccl_rules[i].per_worker && out->per_rank_visible)) {
            /* The user's value stands; a notice the rule raised (e.g. HCAs unusable) is kept. */
            bool notice = v->notice;
            char why[NCCL_ENV_REASON_LEN];
            snprintf(why, sizeof why, "%s", v->reason);
            v->action = NCCL_ENV_USER;
            nccl_value(v, "%s", user);
            if (notice && why[0])
                nccl_reason(v, "set by the user or the operator, left alone (podrun's finding: %s)",
                            why);
            else
                nccl_reason(v, "set by the user or the operator, left alone");
            v->notice = notice;
        }
        out->n++;
    }
    return 0;
}

const struct nccl_env_var *nccl_env_find(const struct nccl_env *e, const char *name)
{
    return e ? nccl_find(e, name) : NULL;
}

int nccl_env_rank_visible(const struct nccl_env *e, const struct gpu_visible *v, int local_rank,
                          char *buf, size_t len)
{
    if (!e || !e->per_rank_visible || !v)
        return -ENOENT;
    if (local_rank < 0 || local_rank >= v->n)
        return -ERANGE;
    int n = snprintf(buf, len, "%s", v->slot[local_rank].token);
    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

int nccl_env_summary(const struct nccl_env *e, char *buf, size_t len)
{
    if (len == 0)
        return -ENOSPC;
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < e->n; i++) {
        const struct nccl_env_var *v = &e->var[i];
        if (v->action != NCCL_ENV_SET)
            continue;
        bool per_worker = strcmp(v->name, "CUDA_VISIBLE_DEVICES") == 0;
        int n = snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "podrun sets ", v->name,
                         per_worker ? "<one device per worker>" : v->value);
        if (n < 0 || (size_t)n >= len - used) {
            buf[used] = '\0';
            return -ENOSPC;
        }
        used += (size_t)n;
    }
    return 0;
}
