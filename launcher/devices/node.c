/* launcher/devices/node.c — this node's devices, probed once, and what the workers get from them
 * (see node.h). */
#include "launcher/devices/node.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/devices/cpuset.h"
#include "launcher/devices/sysroot.h"

static const char *node_getenv(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

int node_probe(struct node_devices *nd, const struct cfg *c, char *const *envp)
{
    int rc = sysroot_set(c->sysroot);
    if (rc < 0)
        return rc;
    nd->envp = envp;
    gpu_discover(NULL, &nd->gpus);
    struct gpu_visible_env ve = {node_getenv(envp, "NVIDIA_VISIBLE_DEVICES"),
                                 node_getenv(envp, "CUDA_VISIBLE_DEVICES"),
                                 node_getenv(envp, "CUDA_DEVICE_ORDER")};
    visible_resolve(&nd->gpus, &ve, &nd->visible);
    shm_stat(&nd->shm);
    shm_verdict(&nd->shm, nd->shm_warning, sizeof nd->shm_warning);
    if (cpu_allowed(&nd->allowed) < 0)
        CPU_ZERO(&nd->allowed);
    cpu_usable_read(&nd->allowed, &nd->cpus);
    snprintf(nd->nic_note, sizeof nd->nic_note, "the master's address is known after the "
             "rendezvous");
    return 0;
}

/* The HCAs matter to NCCL only, which needs a GPU on this node or runs between nodes. */
static void node_probe_hcas(struct node_devices *nd)
{
    if (!nd->ib_probed)
        ib_discover(NULL, &nd->ib);
    nd->ib_probed = true;
}

/* The CPU topology is read by --numa-binding only: a hundred sysfs files. */
static void node_probe_topology(struct node_devices *nd)
{
    if (!nd->topo_probed)
        nd->topo_known = cpu_topo_read(&nd->topo) == 0;
    nd->topo_probed = true;
}

void node_probe_all(struct node_devices *nd)
{
    node_probe_hcas(nd);
    node_probe_topology(nd);
}

int node_gpu_count(const struct node_devices *nd)
{
    return nd->visible.n;
}

int node_cpu_count(const struct node_devices *nd)
{
    return nd->cpus.n;
}

/* --bind_cores_to_rank's OMP_NUM_THREADS: the cores a rank is bound to, but no more than its
 * share of the CPU quota (threads beyond it are throttled, not run). */
static int node_omp_threads(const struct node_devices *nd)
{
    if (nd->mode != BINDING_CORES || !nd->bind)
        return 0;
    if (!nd->cpus.quota_us)
        return nd->bind[0].threads;
    long share = nd->cpus.quota_us / nd->cpus.period_us / (nd->nlocal > 0 ? nd->nlocal : 1);
    if (share < 1)
        share = 1;
    return nd->bind[0].threads < share ? nd->bind[0].threads : (int)share;
}

/* The variables again, from everything known now. */
static void node_derive(struct node_devices *nd)
{
    struct nccl_facts f = {
        .gpus = &nd->gpus,
        .visible = &nd->visible,
        .ib = nd->ib_probed ? &nd->ib : NULL,
        .nic = nd->nic_known ? &nd->nic : NULL,
        .nlocal = nd->nlocal,
        .per_rank_visible = nd->per_rank,
        .omp_threads = node_omp_threads(nd),
        .omp = nd->omp,
    };
    nccl_env_derive(&f, nd->envp, &nd->env);
}

/* cfg_numa and binding_mode name the same modes in the same order. */
static enum binding_mode node_mode(int numa)
{
    switch (numa) {
    case CFG_NUMA_NODE: return BINDING_NODE;
    case CFG_NUMA_SOCKET: return BINDING_SOCKET;
    case CFG_NUMA_EXCLUSIVE: return BINDING_EXCLUSIVE;
    case CFG_NUMA_CORE_COMPLEX: return BINDING_CORE_COMPLEX;
    case CFG_NUMA_CORES: return BINDING_CORES;
    default: return BINDING_NONE;
    }
}

/* Which limit decided the CPUs that --nproc-per-node cpu|auto count. */
static void node_print_usable(const struct cpu_usable *u, FILE *f)
{
    if (!u->quota_us) {
        fprintf(f, "%-11s %d usable: the cpuset decides (no CPU quota)\n", "", u->n);
        return;
    }
    double quota = (double)u->quota_us / (double)u->period_us;
    if (u->n < u->cpuset)
        fprintf(f, "%-11s %d usable: the CPU quota decides (%.2f CPUs in %s%s, rounded down%s)\n",
                "", u->n, quota, sysroot_get(), u->quota_file, quota < 1 ? ", at least 1" : "");
    else
        fprintf(f, "%-11s %d usable: the cpuset decides (the CPU quota in %s%s is %.2f CPUs)\n",
                "", u->n, sysroot_get(), u->quota_file, quota);
}

/* Local rank i runs on the i-th visible GPU, so its binding follows that GPU's NUMA node. */
int node_plan(struct node_devices *nd, const struct cfg *c, char *err, size_t errlen)
{
    free(nd->bind);
    nd->bind = NULL;
    nd->nlocal = c->nproc_per_node;
    nd->per_rank = c->virtual_local_rank || c->visible_devices == CFG_VISIBLE_PER_RANK;
    snprintf(nd->local_addr, sizeof nd->local_addr, "%s", c->local_addr ? c->local_addr : "");
    nd->mode = node_mode(c->numa_binding);
    nd->omp = nccl_omp_rule(c->worker_env);
    nd->several_nodes = c->nnodes_max > 1;
    if (nd->visible.n > 0 || nd->several_nodes)
        node_probe_hcas(nd);
    if (nd->mode != BINDING_NONE) {
        node_probe_topology(nd);
        if (!nd->topo_known) {
            snprintf(err, errlen, "--numa-binding %s: no CPU topology under %s/sys/devices/system/"
                     "cpu: run without --numa-binding", binding_mode_name(nd->mode),
                     sysroot_get());
            return -EINVAL;
        }
        int nodes[GPU_MAX];
        for (int k = 0; k < nd->visible.n; k++)
            nodes[k] = nd->gpus.dev[nd->visible.slot[k].gpu].numa_node;
        struct binding_in in = {nd->mode, nd->nlocal, nd->visible.n, nodes, c->bind_core_list};
        if (!(nd->bind = calloc((size_t)nd->nlocal, sizeof *nd->bind)))
            return -ENOMEM;
        int rc = binding_plan(&nd->topo, &nd->allowed, &in, nd->bind, err, errlen);
        if (rc < 0) {
            free(nd->bind);
            nd->bind = NULL;
            return rc;
        }
    }
    node_derive(nd);
    return 0;
}

/* --local-addr names the address this node advertises: its interface is the one Gloo and NCCL
 * must use, whatever the route to the master says. */
static void node_local_interface(struct node_devices *nd)
{
    char ifname[IF_NAMESIZE];
    if (!nd->local_addr[0] || nic_ifname_for_addr(nd->local_addr, ifname, sizeof ifname) < 0)
        return;
    if (nd->nic_known && strcmp(ifname, nd->nic.ifname) == 0)
        return;
    struct nic_addrs addrs;
    char autos[sizeof nd->nic.nccl_auto] = "";
    if (nic_addrs_read(&addrs) == 0)
        nic_nccl_auto(&addrs, autos, sizeof autos);
    char was[sizeof nd->nic.ifname + 64] = "";
    if (nd->nic_known && nd->nic.ifname[0])
        snprintf(was, sizeof was, " (the route to the master goes through %s)", nd->nic.ifname);
    snprintf(nd->nic.ifname, sizeof nd->nic.ifname, "%s", ifname);
    snprintf(nd->nic.addr, sizeof nd->nic.addr, "%s", nd->local_addr);
    snprintf(nd->nic.nccl_auto, sizeof nd->nic.nccl_auto, "%s", autos);
    nd->nic.nccl_agrees = strcmp(autos, ifname) == 0;
    snprintf(nd->nic.reason, sizeof nd->nic.reason, "%s holds --local-addr %s, the address this "
             "node advertises%s", ifname, nd->local_addr, was);
    nd->nic_known = true;
    nd->nic_note[0] = '\0';
}

bool node_needs_master(const struct node_devices *nd)
{
    return nd->several_nodes || nd->visible.n > 0 || nd->local_addr[0];
}

void node_set_master(struct node_devices *nd, const char *master, const char *why)
{
    char err[256];
    nd->nic_known = false;
    memset(&nd->nic, 0, sizeof nd->nic);
    if (!node_needs_master(nd)) {
        snprintf(nd->nic_note, sizeof nd->nic_note, "one node and no GPU: no traffic leaves the "
                 "node, so no interface is named (torchrun names none)");
    } else if (!master) {
        snprintf(nd->nic_note, sizeof nd->nic_note, "%s", why ? why : "the master is unknown");
    } else if (nic_for_master(master, &nd->nic, err, sizeof err) < 0) {
        snprintf(nd->nic_note, sizeof nd->nic_note, "%s", err);
        memset(&nd->nic, 0, sizeof nd->nic);
    } else {
        nd->nic_known = true;
        nd->nic_note[0] = '\0';
    }
    node_local_interface(nd);
    node_derive(nd);
}

void node_resolve_master(struct node_devices *nd, const char *master)
{
    node_set_master(nd, master, NULL);
}

int node_worker_vars(const struct node_devices *nd, char ***out)
{
    size_t n = 0, bytes = 0;
    for (int i = 0; i < nd->env.n; i++) {
        const struct nccl_env_var *v = &nd->env.var[i];
        if (v->action == NCCL_ENV_SET && strcmp(v->name, "CUDA_VISIBLE_DEVICES") != 0) {
            n++;
            bytes += strlen(v->name) + strlen(v->value) + 2;
        }
    }
    char **arr = malloc((n + 1) * sizeof *arr + bytes);
    if (!arr)
        return -ENOMEM;
    char *p = (char *)(arr + n + 1);
    size_t k = 0;
    for (int i = 0; i < nd->env.n; i++) {
        const struct nccl_env_var *v = &nd->env.var[i];
        if (v->action != NCCL_ENV_SET || strcmp(v->name, "CUDA_VISIBLE_DEVICES") == 0)
            continue;
        arr[k++] = p;
        p += sprintf(p, "%s=%s", v->name, v->value) + 1;
    }
    arr[k] = NULL;
    *out = arr;
    return 0;
}

int node_rank_visible(const struct node_devices *nd, int lr, char *buf, size_t len)
{
    return nccl_env_rank_visible(&nd->env, &nd->visible, lr, buf, len) == 0;
}

const struct binding_rank *node_rank_binding(const struct node_devices *nd, int lr)
{
    return nd->bind && lr >= 0 && lr < nd->nlocal ? &nd->bind[lr] : NULL;
}

/* "local ranks 0-3: CPUs 0-15,32-47; local rank 4: ..." with equal neighbours merged. */
static void node_binding_text(const struct node_devices *nd, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int a = 0; a < nd->nlocal && used + 1 < len;) {
        int b = a;
        while (b + 1 < nd->nlocal && CPU_EQUAL(&nd->bind[b + 1].cpus, &nd->bind[a].cpus) &&
               nd->bind[b + 1].mem_node == nd->bind[a].mem_node)
            b++;
        char cpus[256], range[48], mem[32] = "";
        cpuset_format(&nd->bind[a].cpus, cpus, sizeof cpus);
        if (a == b)
            snprintf(range, sizeof range, "local rank %d", a);
        else
            snprintf(range, sizeof range, "local ranks %d-%d", a, b);
        if (nd->bind[a].mem_node >= 0)
            snprintf(mem, sizeof mem, ", memory on node %d", nd->bind[a].mem_node);
        int n = snprintf(buf + used, len - used, "%s%s: CPUs %s%s", used ? "; " : "", range, cpus,
                         mem);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
        a = b + 1;
    }
}

void node_summary(const struct node_devices *nd, void (*line)(void *arg, const char *text),
                  void *arg)
{
    char buf[2048];
    if (nccl_env_summary(&nd->env, buf, sizeof buf) == 0 && buf[0])
        line(arg, buf);
    for (int i = 0; i < nd->env.n; i++) {
        const struct nccl_env_var *v = &nd->env.var[i];
        if (!v->notice)
            continue;
        snprintf(buf, sizeof buf, "%s: %s", v->name, v->reason);
        line(arg, buf);
    }
    if (nd->shm_warning[0])
        line(arg, nd->shm_warning);
    if (nd->bind) {
        char text[1536];
        node_binding_text(nd, text, sizeof text);
        snprintf(buf, sizeof buf, "workers are bound (--numa-binding %s): %s",
                 binding_mode_name(nd->mode), text);
        line(arg, buf);
    }
}

static const char *const node_actions[] = {
    [NCCL_ENV_SET] = "set", [NCCL_ENV_USER] = "left alone", [NCCL_ENV_UNSET] = "not set",
};

static void node_print_vars(const struct node_devices *nd, FILE *f)
{
    for (int i = 0; i < nd->env.n; i++) {
        const struct nccl_env_var *v = &nd->env.var[i];
        bool per_worker = v->action == NCCL_ENV_SET && !strcmp(v->name, "CUDA_VISIBLE_DEVICES");
        if (per_worker)
            fprintf(f, "%-11s %s=<per worker>\n", "per worker", v->name);
        else if (v->action == NCCL_ENV_UNSET)
            fprintf(f, "%-11s %s\n", node_actions[v->action], v->name);
        else
            fprintf(f, "%-11s %s=%s\n", node_actions[v->action], v->name, v->value);
        fprintf(f, "%-11s %s%s\n", "", v->notice ? "warning: " : "", v->reason);
        for (int lr = 0; per_worker && lr < nd->nlocal; lr++) {
            char token[GPU_UUID_LEN];
            if (node_rank_visible(nd, lr, token, sizeof token))
                fprintf(f, "%-11s local rank %d: %s=%s\n", "", lr, v->name, token);
        }
    }
    if (nd->env.n == 0)
        fprintf(f, "%-11s nothing: no GPU, HCA or several workers that need a variable\n", "set");
}

static void node_print_gpus(const struct node_devices *nd, FILE *f)
{
    const struct gpu_list *g = &nd->gpus;
    fprintf(f, "%-11s %d found (%s); %d visible to the workers%s\n", "GPUs", g->n,
            gpu_source_name(g->source), nd->visible.n,
            nd->visible.n > 1 && !nd->visible.order_known ? " (CUDA's order unknown)" : "");
    for (int i = 0; i < g->n; i++) {
        const struct gpu_dev *d = &g->dev[i];
        char cpus[256];
        cpuset_format(&d->cpus, cpus, sizeof cpus);
        fprintf(f, "%-11s %d %s %s %s NUMA node %d, CPUs %s%s\n", "", d->index,
                d->name[0] ? d->name : "(model unknown)", d->uuid[0] ? d->uuid : "(no UUID)",
                d->pci[0] ? d->pci : "(no PCI id)", d->numa_node, cpus[0] ? cpus : "unknown",
                d->mig == 1 ? ", MIG" : "");
    }
    if (g->fabric[0])
        fprintf(f, "%-11s NVLink domain %s (GPU fabric cluster/clique)\n", "", g->fabric);
    if (g->note[0])
        fprintf(f, "%-11s %s\n", "", g->note);
    if (nd->visible.note[0])
        fprintf(f, "%-11s %s\n", "", nd->visible.note);
}

static void node_print_hcas(const struct node_devices *nd, FILE *f)
{
    const struct ib_info *ib = &nd->ib;
    static const char *const links[] = {"link unknown", "InfiniBand", "RoCE"};
    fprintf(f, "%-11s %d found; /dev/infiniband %s\n", "HCAs", ib->ndev,
            ib->dev_infiniband ? "present" : "absent");
    for (int i = 0; i < ib->ndev; i++) {
        const struct ib_dev *d = &ib->dev[i];
        for (int j = 0; j < d->nports; j++) {
            const struct ib_port *p = &d->port[j];
            fprintf(f, "%-11s %s:%d %s %s, uverbs %s", "", d->name, p->num,
                    ib_port_state_name(p->state), links[p->link], d->uverbs ? "yes" : "no");
            if (p->gid_index >= 0)
                fprintf(f, ", RoCE v2 GID %d (%s%s%s)", p->gid_index, p->gid_ipv4,
                        p->gid_netdev[0] ? " on " : "", p->gid_netdev);
            fprintf(f, "\n");
        }
    }
    if (ib->note[0])
        fprintf(f, "%-11s %s\n", "", ib->note);
}

void node_print(const struct node_devices *nd, FILE *f, bool brief)
{
    if (brief) {
        for (int i = 0; i < nd->env.n; i++) {
            const struct nccl_env_var *v = &nd->env.var[i];
            if (v->action == NCCL_ENV_UNSET)
                continue;
            char name[64];
            snprintf(name, sizeof name, "env %s", v->name);
            bool per_worker = !strcmp(v->name, "CUDA_VISIBLE_DEVICES") &&
                              v->action == NCCL_ENV_SET;
            fprintf(f, "%-32s %-24s (%s)\n", name, per_worker ? "<per worker>" : v->value,
                    v->action == NCCL_ENV_SET ? "derived; podrun env says why"
                                              : "inherited, left alone");
        }
        return;
    }
    if (sysroot_get()[0])
        fprintf(f, "%-11s %s\n", "sysroot", sysroot_get());
    node_print_gpus(nd, f);
    node_print_hcas(nd, f);
    if (nd->nic_known)
        fprintf(f, "%-11s %s%s%s%s\n%-11s %s\n", "interface",
                nd->nic.ifname[0] ? nd->nic.ifname : "none", nd->nic.addr[0] ? " (" : "",
                nd->nic.addr, nd->nic.addr[0] ? ")" : "", "", nd->nic.reason);
    else
        fprintf(f, "%-11s unknown: %s\n", "interface", nd->nic_note);
    char cpus[512];
    cpuset_format(&nd->allowed, cpus, sizeof cpus);
    fprintf(f, "%-11s %d in this container's cpuset (%s), %d NUMA node%s\n", "CPUs",
            CPU_COUNT(&nd->allowed), cpus, nd->topo.nnodes, nd->topo.nnodes == 1 ? "" : "s");
    node_print_usable(&nd->cpus, f);
    if (nd->shm.mounted)
        fprintf(f, "%-11s %llu MiB%s%s\n", "/dev/shm", (unsigned long long)(nd->shm.size >> 20),
                nd->shm_warning[0] ? ": warning: " : "", nd->shm_warning);
    else
        fprintf(f, "%-11s warning: %s\n", "/dev/shm", nd->shm_warning);
    node_print_vars(nd, f);
    if (nd->bind) {
        for (int lr = 0; lr < nd->nlocal; lr++) {
            char set[512], mem[48] = "";
            cpuset_format(&nd->bind[lr].cpus, set, sizeof set);
            if (nd->bind[lr].mem_node >= 0)
                snprintf(mem, sizeof mem, ", memory on NUMA node %d", nd->bind[lr].mem_node);
            fprintf(f, "%-11s local rank %d: CPUs %s%s\n", lr ? "" : "binding", lr, set, mem);
        }
        fprintf(f, "%-11s --numa-binding %s, inside this container's cpuset; applied in each "
                "worker before exec\n", "", binding_mode_name(nd->mode));
    } else {
        fprintf(f, "%-11s none: workers may run on any of the container's CPUs\n", "binding");
    }
}

void node_free(struct node_devices *nd)
{
    free(nd->bind);
    nd->bind = NULL;
}
