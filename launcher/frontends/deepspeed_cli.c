/* launcher/frontends/deepspeed_cli.c — DeepSpeed's `deepspeed` command line (runner.py, and the
 * launch.py words the head passes to each host; reference/launchers.md §1).
 *
 * What the command line means here (the ds-mode setting, decided by the discover hook):
 *  - an agent the head started (--world_info given): this node's slots are world_info's entry at
 *    --node_rank, the job store is at --master_addr:--master_port (static: node rank 0 hosts);
 *  - --no_ssh: the hostfile is mounted on every node; this node finds its own line (hostname,
 *    FQDN or a local address: operators/hostsource.h) and runs its share, nobody ssh-es anywhere;
 *  - a hostfile whose selection leaves several hosts (or --force_multi): this is the head; it
 *    starts one podrun agent per host through pdsh (or ssh) and waits (launcher/fanout.c);
 *  - one host left: it runs here when it is this machine, else the head starts it there;
 *  - no hostfile at the default /job/hostfile: this machine alone, as DeepSpeed does after its
 *    warning (main prints it); a hostfile named with -H that is missing is an error (DeepSpeed
 *    silently runs a one-node job then, deepspeedai/DeepSpeed#5221).
 * Include/exclude have DeepSpeed's documented semantics (discover/resources.h: resources_select). */
#include "launcher/frontends/deepspeed_cli.h"
#include "launcher/frontends/frontend.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/settings.h"
#include "launcher/discover/host.h"
#include "launcher/env/environ.h"
#include "launcher/frontends/deepspeed_hosts.h"
#include "launcher/operators/adapter.h"
#include "launcher/operators/hostsource.h"
#include "rdzv/base/common.h"

#define DS_DEFAULT_HOSTFILE "/job/hostfile"
#define fail(code, err, len, ...) podrun_failf(code, err, len, __VA_ARGS__)

/* --launcher: pdsh and ssh start podrun's agents; the MPI launchers and srun are told how podrun
 * does without them. */
static int launcher_word(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    static const struct {
        const char *name, *instead;
    } refused[] = {
        {"openmpi", "podrun's agents find each other without mpirun; keep --launcher pdsh, or "
                    "run podrun deepspeed --no_ssh in every pod (an MPIJob's /etc/mpi/hostfile "
                    "works as -H)"},
        {"mvapich", "keep --launcher pdsh, or run podrun deepspeed --no_ssh on every node"},
        {"mpich", "keep --launcher pdsh, or run podrun deepspeed --no_ssh on every node"},
        {"impi", "keep --launcher pdsh, or run podrun deepspeed --no_ssh on every node"},
        {"slurm", "run `srun podrun deepspeed --no_ssh ...` (one task per node): podrun reads "
                  "SLURM's variables"},
    };
    size_t n = strlen(in);
    if (n + 1 > cap)
        return fail(-EINVAL, err, errlen, "--launcher: unknown launcher; use pdsh or ssh");
    for (size_t i = 0; i <= n; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (!strcmp(out, refused[i].name))
            return fail(-EINVAL, err, errlen, "--launcher %s is not supported by podrun: %s",
                        out, refused[i].instead);
    if (strcmp(out, "pdsh") && strcmp(out, "ssh"))
        return fail(-EINVAL, err, errlen, "--launcher '%.64s': Unknown launcher; use pdsh (or "
                    "ssh where pdsh is not installed)", in);
    return 0;
}

static int autotuning_word(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    (void)out, (void)cap;
    return fail(-EINVAL, err, errlen, "--autotuning %.16s: podrun does not run DeepSpeed's "
                "Autotuner; run `deepspeed --autotuning %.16s ...` from DeepSpeed itself, then "
                "launch the tuned job with podrun", in, in);
}

/* runner.py's flags (both spellings where it has two), and launch.py's --world_info. podrun's
 * own flags are understood besides. */
static const struct fe_word flags[] = {
    {"-H", CFG_HOSTFILE, NULL},
    {"--hostfile", CFG_HOSTFILE, NULL},
    {"-i", CFG_DS_INCLUDE, NULL},
    {"--include", CFG_DS_INCLUDE, NULL},
    {"-e", CFG_DS_EXCLUDE, NULL},
    {"--exclude", CFG_DS_EXCLUDE, NULL},
    {"--num_nodes", CFG_DS_NUM_NODES, NULL},
    {"--num_gpus", CFG_DS_NUM_GPUS, NULL},
    {"--num_accelerators", CFG_DS_NUM_GPUS, NULL},
    {"--min_elastic_nodes", CFG_DS_MIN_ELASTIC_NODES, NULL},
    {"--max_elastic_nodes", CFG_DS_MAX_ELASTIC_NODES, NULL},
    {"--elastic_training", CFG_DS_ELASTIC, NULL},
    {"--master_addr", CFG_MASTER_ADDR, NULL},
    {"--master_port", CFG_MASTER_PORT, NULL},
    {"--node_rank", CFG_NODE_RANK, NULL},
    {"--launcher", CFG_DS_LAUNCHER, launcher_word},
    {"--launcher_args", CFG_DS_LAUNCHER_ARGS, NULL},
    {"--module", CFG_MODULE, NULL},
    {"--no_python", CFG_NO_PYTHON, NULL},
    {"--no_local_rank", CFG_DS_NO_LOCAL_RANK, NULL},
    {"--no_ssh", CFG_DS_NO_SSH, NULL},
    {"--no_ssh_check", CFG_DS_NO_SSH_CHECK, NULL},
    {"--force_multi", CFG_DS_FORCE_MULTI, NULL},
    {"--save_pid", CFG_DS_SAVE_PID, NULL},
    {"--enable_each_rank_log", CFG_DS_EACH_RANK_LOG, NULL},
    {"--bind_cores_to_rank", CFG_DS_BIND_CORES, NULL},
    {"--bind_core_list", CFG_DS_BIND_CORE_LIST, NULL},
    {"--ssh_port", CFG_DS_SSH_PORT, NULL},
    {"--venv_script", CFG_DS_VENV_SCRIPT, NULL},
    {"--log_level", CFG_DS_LOG_LEVEL, NULL},
    {"-q", CFG_DS_QUIET, NULL},
    {"--quiet", CFG_DS_QUIET, NULL},
    {"--autotuning", CFG_DS_MODE, autotuning_word},
    {"--world_info", CFG_DS_WORLD_INFO, NULL},
};

/* The words only the head reads: they are not passed on to the hosts' agents. A value of its
 * own follows unless the word is a flag alone. */
static const char *const head_only[] = {
    "-H", "--hostfile", "-i", "--include", "-e", "--exclude", "--num_nodes", "--num_gpus",
    "--num_accelerators", "--launcher", "--launcher_args", "--ssh_port", "--venv_script",
    "--no_ssh_check", "--force_multi", "--master_addr", "--master-addr", "--master_port",
    "--master-port", "--node_rank", "--node-rank", "--local_addr", "--local-addr",
    "--node_name", "--node-name", "--save_pid", "--rdzv-id", "--rdzv_id", "--pid-file",
    "--pid_file", "--discovery",
};

/* ---- where this node's share comes from ---- */

static int set_devices(struct cfg *c, const int *slots, size_t n, const char *src, char *err,
                       size_t errlen)
{
    char list[HOSTFILE_SLOTS_MAX * 5 + 1];
    deepspeed_hosts_slots_format(slots, n, list, sizeof list);
    int r = op_setn(c, CFG_NPROC_PER_NODE, (long)n, CFG_SRC_HOSTFILE, err, errlen, "%s", src);
    return r ? r : op_set(c, CFG_DS_DEVICES, list, CFG_SRC_HOSTFILE, err, errlen, "%s", src);
}

static int set_mode(struct cfg *c, const char *mode, const char *why, char *err, size_t errlen)
{
    return op_set(c, CFG_DS_MODE, mode, CFG_SRC_HOSTFILE, err, errlen, "%s", why);
}

/* An agent started by the head: world_info at --node_rank. */
static int from_world_info(struct cfg *c, char *err, size_t errlen)
{
    struct resources w;
    int r = deepspeed_hosts_world_decode(c->ds_world_info, &w, err, errlen);
    if (r)
        return r;
    if ((size_t)c->node_rank >= w.count)
        r = fail(-EINVAL, err, errlen, "--node_rank %d is not below the %zu hosts of "
                 "--world_info", c->node_rank, w.count);
    const struct resources_node *me = r ? NULL : &w.nodes[c->node_rank];
    if (!r)
        r = set_devices(c, me->slots, me->nslots, "--world_info", err, errlen);
    if (!r)
        r = op_setn(c, CFG_NNODES, (long)w.count, CFG_SRC_HOSTFILE, err, errlen, "--world_info");
    if (!r)
        r = op_set(c, CFG_RDZV_BACKEND, "static", CFG_SRC_HOSTFILE, err, errlen, "--world_info");
    if (!r)
        r = set_mode(c, "node", "--world_info", err, errlen);
    resources_free(&w);
    return r;
}

static int head(struct cfg *c, const char *path, const struct resources *active,
                char *err, size_t errlen);

/* --force_multi without a hostfile: DeepSpeed still goes through its multi-node runner to host
 * "localhost" (so .deepspeed_env and --venv_script reach the worker), with the job store at
 * 127.0.0.1. */
static int local_head(struct cfg *c, const struct resources *active, char *err,
                      size_t errlen)
{
    int r = head(c, "local resources", active, err, errlen);
    return r ? r : op_set(c, CFG_MASTER_ADDR, "127.0.0.1", CFG_SRC_HOSTFILE, err, errlen,
                          "--force_multi without a hostfile (DeepSpeed)");
}

/* No hostfile: this machine's devices as DeepSpeed counts them — CUDA_VISIBLE_DEVICES' ids, or
 * --num_gpus of them — under the same selection, as host "localhost". */
static int local_run(struct cfg *c, char *const *envp, const struct resources_select *sel,
                     char *err, size_t errlen)
{
    const char *cvd = env_get(envp, "CUDA_VISIBLE_DEVICES");
    int ids[HOSTFILE_SLOTS_MAX];
    size_t n = 0;
    for (const char *p = cvd; p && *p && n < HOSTFILE_SLOTS_MAX;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= HOSTFILE_SLOTS_MAX || (*end && *end != ','))
            return fail(-EINVAL, err, errlen, "CUDA_VISIBLE_DEVICES='%.64s': expected device "
                        "ids like 0,1,3 (podrun deepspeed gives each node's slots as ids)", cvd);
        ids[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    for (int i = 0; !n && i < c->ds_num_gpus; i++)
        ids[i] = i;
    if (!n && c->ds_num_gpus > 0)
        n = (size_t)c->ds_num_gpus;
    int r = set_mode(c, "local", DS_DEFAULT_HOSTFILE " missing", err, errlen);
    bool known = n > 0;
    if (r || (!known && !sel->include && !sel->exclude && !c->ds_force_multi))
        return r;   /* nothing to go by: --nproc-per-node's workers, no CUDA_VISIBLE_DEVICES */
    if (!known)
        ids[n++] = 0;   /* the selection is still checked against "localhost:0" */
    struct resources pool, active;
    memset(&pool, 0, sizeof pool);
    memset(&active, 0, sizeof active);
    struct resources_select one = *sel;
    if (cvd)
        one.num_gpus = -1;   /* the ids are the pool; --num_gpus counts them */
    r = resources_add(&pool, "local resources", "localhost", 0, ids, n, err, errlen);
    if (!r)
        r = resources_select(&active, &pool, &one, err, errlen);
    if (!r && c->ds_num_gpus > 0 && cvd && (size_t)c->ds_num_gpus < active.nodes[0].nslots)
        active.nodes[0].nslots = (size_t)c->ds_num_gpus;
    if (!r && c->ds_force_multi)
        r = local_head(c, &active, err, errlen);
    else if (!r && known)
        r = set_devices(c, active.nodes[0].slots, active.nodes[0].nslots,
                        cvd ? "CUDA_VISIBLE_DEVICES" : "--num_gpus", err, errlen);
    resources_free(&active);
    resources_free(&pool);
    return r;
}

/* The head: every active host gets an agent; world_info says which slots. */
static int head(struct cfg *c, const char *path, const struct resources *active,
                char *err, size_t errlen)
{
    char *wi = NULL;
    int r = deepspeed_hosts_world_encode(active, &wi);
    if (r == -EILSEQ)
        return fail(-EINVAL, err, errlen, "%s: a host name is not UTF-8 text; write each host "
                    "as its DNS name or address", path);
    if (r)
        return fail(r, err, errlen, "out of memory");
    char first[HOSTFILE_NAME_MAX + 1];
    const char *h = active->nodes[0].host, *at = strrchr(h, '@');
    snprintf(first, sizeof first, "%s", at ? at + 1 : h);
    r = op_set(c, CFG_DS_WORLD_INFO, wi, CFG_SRC_HOSTFILE, err, errlen, "%s (DeepSpeed)", path);
    free(wi);
    if (!r)
        r = op_set(c, CFG_MASTER_ADDR, first, CFG_SRC_HOSTFILE, err, errlen, "%s line %u "
                   "(DeepSpeed)", path, active->nodes[0].line);
    if (!r)
        r = op_setn(c, CFG_NNODES, (long)active->count, CFG_SRC_HOSTFILE, err, errlen,
                    "%s (DeepSpeed)", path);
    /* a node count given (--nnodes) outranks the hostfile, and every host's agent gets it: any
     * other count than the hosts' has them wait for nodes the head never starts */
    if (!r && (c->nnodes_min != (int)active->count || c->nnodes_max != (int)active->count)) {
        char given[32], src[CFG_SRC_NAME_MAX + 16];
        if (c->nnodes_min == c->nnodes_max)
            snprintf(given, sizeof given, "%d", c->nnodes_min);
        else
            snprintf(given, sizeof given, "%d:%d", c->nnodes_min, c->nnodes_max);
        cfg_src_describe(&c->src[CFG_NNODES], src, sizeof src);
        r = fail(-EINVAL, err, errlen, "%s: %s nodes disagree with the %zu host%s that %s "
                 "selects: leave the node count out (the head starts one agent per host)", src,
                 given, active->count, active->count == 1 ? "" : "s", path);
    }
    if (!r)
        r = set_mode(c, "head", path, err, errlen);
    return r;
}

/* Whether the one host left is this machine ("localhost", its host name, FQDN or one of its
 * addresses; --local_addr stands for its addresses). Another host runs the job there, through
 * the head: DeepSpeed's runner starts it locally instead (deepspeedai/DeepSpeed#713). */
static bool is_this_machine(const struct cfg *c, const struct discover_host *host,
                            const char *name)
{
    const char *at = strrchr(name, '@');
    if (at)
        name = at + 1;
    if (!strcmp(name, "localhost") || (c->local_addr && !strcmp(name, c->local_addr)))
        return true;
    if (!host)
        return true;   /* nothing to tell it by: as DeepSpeed, here */
    /* the FQDN may cost a resolver lookup: only when the short names did not match */
    for (int fqdn = 0; fqdn < 2; fqdn++) {
        struct hostfile_self me;
        if (host->self(host, fqdn, &me))
            return true;
        if (c->local_addr)
            me.naddrs = 0;
        if (hostfile_names_self(name, &me))
            return true;
    }
    return false;
}

static int deepspeed_discover(struct cfg *c, char *const *envp, const struct discover_host *host,
                              char *err, size_t errlen)
{
    /* a --world_info given empty is still given: an agent the head started, with no world */
    if (c->ds_world_info || c->src[CFG_DS_WORLD_INFO].kind != CFG_SRC_DEFAULT)
        return from_world_info(c, err, errlen) ? -EINVAL : 1;
    struct resources_select sel = {c->ds_include, c->ds_exclude, c->ds_num_nodes, c->ds_num_gpus};
    const char *path = c->hostfile ? c->hostfile : DS_DEFAULT_HOSTFILE;
    char *text = NULL;
    size_t len = 0;
    int r = host ? host->read_file(host, path, DISCOVER_FILE_MAX, &text, &len) : -ENOENT;
    if (r == -ENOENT && !c->hostfile) {
        if (c->ds_num_nodes > 1)
            return fail(-EINVAL, err, errlen, "--num_nodes %d: Num nodes is >1 but no extra "
                        "nodes available via hostfile (none at " DS_DEFAULT_HOSTFILE "; give -H "
                        "FILE)", c->ds_num_nodes);
        return local_run(c, envp, &sel, err, errlen) ? -EINVAL : 1;
    }
    if (r == -EFBIG)
        return fail(-EINVAL, err, errlen, "hostfile %s is longer than %u bytes; is it the right "
                    "file?", path, DISCOVER_FILE_MAX);
    if (r)
        return fail(-EINVAL, err, errlen, "cannot read hostfile %s: %s; give -H an existing "
                    "file (DeepSpeed would run on this machine alone)", path, strerror(-r));
    struct hostfile hf;
    struct resources pool, active;
    memset(&hf, 0, sizeof hf);
    memset(&pool, 0, sizeof pool);
    memset(&active, 0, sizeof active);
    r = hostfile_parse(&hf, text, len, HOSTFILE_DEEPSPEED, path, err, errlen);
    free(text);
    if (!r && c->ds_no_ssh) {
        struct hostsource_node me;
        r = hostsource_apply_parsed(c, host, &hf, &sel, "DeepSpeed", &me, err, errlen);
        if (!r)
            r = set_devices(c, me.slots, me.nslots, path, err, errlen);
        if (!r)
            r = set_mode(c, "node", "--no_ssh", err, errlen);
        hostfile_free(&hf);
        return r ? -EINVAL : 1;
    }
    if (!r)
        r = resources_from_hostfile(&pool, &hf, -1, err, errlen);
    if (!r)
        r = resources_select(&active, &pool, &sel, err, errlen);
    /* slots=0 parses (DeepSpeed's grammar) but gives the host no worker to start */
    for (size_t i = 0; !r && i < active.count; i++)
        if (!active.nodes[i].nslots)
            r = fail(-EINVAL, err, errlen, "%s line %u: host %.64s has slots=0, so no worker; "
                     "give it slots=N (N >= 1) or leave it out (-e %.64s)", path,
                     active.nodes[i].line, active.nodes[i].host, active.nodes[i].host);
    if (!r && (active.count > 1 || c->ds_force_multi ||
               !is_this_machine(c, host, active.nodes[0].host))) {
        r = head(c, path, &active, err, errlen);
    } else if (!r) {
        /* one host: it runs here, as DeepSpeed's local launch does */
        r = set_devices(c, active.nodes[0].slots, active.nodes[0].nslots, path, err, errlen);
        if (!r)
            r = set_mode(c, "node", path, err, errlen);
    }
    resources_free(&active);
    resources_free(&pool);
    hostfile_free(&hf);
    return r ? -EINVAL : 1;
}

/* --bind_cores_to_rank is podrun's --numa-binding cores (each worker an even share of the core
 * list, OMP_NUM_THREADS its size) over --bind_core_list as --bind-core-list; DeepSpeed reads the
 * list only with --bind_cores_to_rank, and so does podrun. On a node that runs workers only: the
 * head passes both flags on to every host's agent, whose CPUs they name. podrun's own
 * --numa-binding of another mode contradicts the flag. */
static int bind_cores(struct cfg *c, char *err, size_t errlen)
{
    if (!c->ds_bind_cores || c->ds_mode == CFG_DS_MODE_HEAD)
        return 0;
    if (c->src[CFG_NUMA_BINDING].kind >= CFG_SRC_FLAG && c->numa_binding != CFG_NUMA_CORES)
        return op_conflict(err, errlen, "--bind_cores_to_rank binds each worker to a share of "
                           "the cores, but --numa-binding is %s (%s): drop one of them",
                           cfg_settings[CFG_NUMA_BINDING].choices[c->numa_binding],
                           c->src[CFG_NUMA_BINDING].name);
    int r = op_set(c, CFG_NUMA_BINDING, "cores", CFG_SRC_FLAG, err, errlen,
                   "--bind_cores_to_rank");
    if (!r && c->ds_bind_core_list)
        r = op_set(c, CFG_BIND_CORE_LIST, c->ds_bind_core_list, CFG_SRC_FLAG, err, errlen,
                   "--bind_core_list");
    return r;
}

/* What the tables cannot say: DeepSpeed's worker environment (--worker-env deepspeed) on a node
 * that runs workers, --enable_each_rank_log DIR is per-rank log files and nothing on
 * the console (DeepSpeed's DIR/<YYYYmmddHHMMSS>_rank<N>.log: jobenv_log_fd), --elastic_training a c10d job of
 * --min_elastic_nodes..--max_elastic_nodes nodes around --master_addr, --bind_cores_to_rank
 * (bind_cores). */
static int deepspeed_finalize(struct cfg *c, char *err, size_t errlen)
{
    int r = bind_cores(c, err, errlen);
    if (r)
        return r;
    if (c->ds_mode != CFG_DS_MODE_OFF && c->ds_mode != CFG_DS_MODE_HEAD) {
        struct cfg_src fe;
        cfg_src_init(&fe, CFG_SRC_FLAG, "deepspeed");
        if ((r = cfg_set(c, CFG_WORKER_ENV, "deepspeed", &fe, err, errlen)))
            return r;
    }
    if (c->ds_each_rank_log && strcmp(c->ds_each_rank_log, "None") &&
        c->ds_mode != CFG_DS_MODE_HEAD) {
        /* the files are DeepSpeed's layout (jobenv_log_fd); the console gets nothing */
        if ((r = op_set(c, CFG_REDIRECTS, "3", CFG_SRC_FLAG, err, errlen,
                        "--enable_each_rank_log")))
            return r;
    }
    if (c->ds_elastic) {
        if (c->src[CFG_MASTER_ADDR].kind < CFG_SRC_PET)
            return fail(-EINVAL, err, errlen, "--elastic_training needs --master_addr, the "
                        "host of the job store (DeepSpeed's rule)");
        int max = c->ds_max_elastic_nodes > 0 ? c->ds_max_elastic_nodes : c->nnodes_max;
        int min = c->ds_min_elastic_nodes > 0 ? c->ds_min_elastic_nodes : 1;
        if (min > max)
            return fail(-EINVAL, err, errlen, "--min_elastic_nodes %d is above "
                        "--max_elastic_nodes %d", min, max);
        /* the head starts one agent per host (its node count, set by head()): fewer than the
         * least the job waits for would wait forever */
        if (c->ds_mode == CFG_DS_MODE_HEAD && min > c->nnodes_max)
            return fail(-EINVAL, err, errlen, "--min_elastic_nodes %d is above the %d hosts the "
                        "hostfile selects", min, c->nnodes_max);
        char nn[32];
        snprintf(nn, sizeof nn, "%d:%d", min, max);
        if ((r = op_set(c, CFG_NNODES, nn, CFG_SRC_FLAG, err, errlen, "--elastic_training")) ||
            (r = op_set(c, CFG_RDZV_BACKEND, "c10d", CFG_SRC_FLAG, err, errlen,
                        "--elastic_training")))
            return r;
        snprintf(nn, sizeof nn, "%d", c->master_port);
        char ep[300];
        snprintf(ep, sizeof ep, "%s:%s", c->master_addr, nn);
        if ((r = op_set(c, CFG_RDZV_ENDPOINT, ep, CFG_SRC_FLAG, err, errlen,
                        "--elastic_training")))
            return r;
    }
    return 0;
}

const struct vocab deepspeed_vocab = {
    .name = "deepspeed",
    .env_rank = CFG_SRC_PET,
    .flags = flags,
    .nflags = sizeof flags / sizeof *flags,
    .finalize = deepspeed_finalize,
    .discover = deepspeed_discover,
};

static void deepspeed_usage(FILE *f)
{
    fprintf(f,
        "usage: podrun deepspeed [options] SCRIPT [ARGS...]   (also as `deepspeed`)\n"
        "\n"
        "DeepSpeed's launcher: runs SCRIPT on the hostfile's hosts, every worker with\n"
        "DeepSpeed's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_SIZE, CROSS_RANK,\n"
        "CROSS_SIZE, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES = its node's slots) and\n"
        "torchrun's, and --local_rank=N after SCRIPT. With several hosts this machine is the\n"
        "head: it starts a podrun agent on every host through pdsh (-R ssh; PDSH_RCMD_TYPE=exec\n"
        "runs them here) and waits; SIGINT/SIGTERM stop exactly this job's agents. With\n"
        "--no_ssh every node runs this command itself and finds its own line in the hostfile.\n"
        "\n"
        "  -H, --hostfile FILE        hosts, \"HOST slots=N\" per line [/job/hostfile; missing:\n"
        "                             this machine alone]\n"
        "  -i, --include SPEC         NAME[:SLOT,...][@NAME...]: only these hosts/slots\n"
        "  -e, --exclude SPEC         the same syntax: all but these\n"
        "  --num_nodes N              the first N hosts\n"
        "  --num_gpus, --num_accelerators N   the first N slots of every host\n"
        "  --master_addr HOST         the job store's host [the first active host]\n"
        "  --master_port PORT         [29500]\n"
        "  --node_rank N              this node's rank (--no_ssh finds it in the hostfile)\n"
        "  --launcher pdsh|ssh        how the head reaches the hosts [pdsh]\n"
        "  --launcher_args ARGS       extra words for pdsh, e.g. \"-R exec\"\n"
        "  --ssh_port PORT, --venv_script FILE, --no_ssh_check, --force_multi\n"
        "  --no_ssh                   no head: every node runs this command itself\n"
        "  --module, --no_python, --no_local_rank\n"
        "  --save_pid                 write /tmp/<pid>.deepspeed while running\n"
        "  --enable_each_rank_log DIR per-rank log files under DIR instead of the console\n"
        "  --elastic_training, --min_elastic_nodes N, --max_elastic_nodes N\n"
        "  --bind_cores_to_rank, --bind_core_list LIST, --log_level LEVEL, -q   accepted\n"
        "  --autotuning and --launcher openmpi|mvapich|mpich|impi|slurm are refused with why.\n"
        "podrun's own options (see podrun --help) work here too.\n");
}

const struct frontend fe_deepspeed = {"deepspeed", &deepspeed_vocab, deepspeed_usage, "deepspeed",
                                      "deepspeed", NULL};

int deepspeed_cli_forward_options(char **argv, int nopts, char ***out, int *nout)
{
    char **v = calloc((size_t)nopts + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    int k = 0;
    for (int i = 0; i < nopts; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        /* a word that is no flag (an empty one too) is passed on as it is */
        bool longf = a[0] == '-' && a[1] == '-', shortf = a[0] == '-' && a[1] && a[1] != '-';
        const char *eq = longf ? strchr(a, '=') : NULL;
        /* a short flag's value may be glued on: -Hfile */
        size_t len = eq ? (size_t)(eq - a) : shortf ? 2 : strlen(a);
        bool drop = false;
        for (size_t j = 0; j < sizeof head_only / sizeof *head_only && !drop; j++)
            drop = strlen(head_only[j]) == len && !memcmp(head_only[j], a, len);
        /* does a separate value follow? the word's setting says (a flag alone takes none) */
        int id = -1;
        for (size_t j = 0; j < sizeof flags / sizeof *flags && id < 0; j++)
            if (strlen(flags[j].spelling) == len && !memcmp(flags[j].spelling, a, len))
                id = (int)flags[j].id;
        if (id < 0 && longf)
            id = cfg_find_flag(a + 2, len - 2);
        else if (id < 0 && shortf)
            id = cfg_find_short(a[1]);
        bool value_follows = id >= 0 && !eq && !(shortf && a[2]) &&
                             cfg_settings[id].type != CFG_T_BOOL;
        if (!drop)
            v[k++] = argv[i];
        if (value_follows && i + 1 < nopts) {
            if (!drop)
                v[k++] = argv[i + 1];
            i++;
        }
    }
    *out = v;
    *nout = k;
    return 0;
}
