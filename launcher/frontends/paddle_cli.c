/* launcher/frontends/paddle_cli.c — `python -m paddle.distributed.launch`'s words
 * (PaddlePaddle/Paddle: python/paddle/distributed/launch/context/args_envs.py; reference/
 * launchers.md §3.1): its flags, the PADDLE_* variables it reads in their place (env_args_mapping,
 * at the rank of a launcher's own environment, below the command line), and what its controllers
 * decide before starting anyone: collective or parameter-server mode, how many servers and
 * trainers this node runs, and where the job's rendezvous is.
 *
 * Paddle's own HTTP or etcd master is not used: `--master IP:PORT` names the node that hosts
 * podrun's job store, which agrees on ranks and on every worker's endpoint (launcher/env/jobenv.c).
 * Without --master, a job with --ips (or --servers/--trainers lists) rendezvouses at the first
 * host listed, port 6768, the port Paddle's own --ips handshake uses. */
#include "launcher/frontends/frontend.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"

#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

#define PADDLE_HANDSHAKE_PORT 6768   /* the port of Paddle's --ips handshake with the first IP */

static const char no_auto[] = "podrun does not run Paddle's auto-parallel tuner; run it with "
                              "paddle.distributed.launch itself";

/* ---- transforms ------------------------------------------------------------------------------ */

/* Python's int() (argparse type=int). */
static int t_int(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    long v;
    const char *p = in;
    while (isspace((unsigned char)*p))
        p++;
    char t[32];
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    if (n == 0 || n >= sizeof t)
        return fail(err, errlen, "expected a whole number");
    memcpy(t, p, n);
    t[n] = '\0';
    if (podrun_parse_int(t[0] == '+' ? t + 1 : t, t[0] == '-' ? -1000000000L : 0, 1000000000L, &v))
        return fail(err, errlen, "expected a whole number");
    snprintf(out, cap, "%ld", v);
    return 0;
}

/* --rank and PADDLE_RANK: -1 is Paddle's "not given". */
static int t_rank(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    int r = t_int(in, out, cap, err, errlen);
    return r ? r : atol(out) < 0 ? 1 : 0;
}

/* Paddle's strtobool. */
static int t_bool(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    static const char *const yes[] = {"y", "yes", "t", "true", "on", "1"};
    static const char *const no[] = {"n", "no", "f", "false", "off", "0"};
    char low[16];
    size_t i = 0;
    for (; in[i] && i + 1 < sizeof low; i++)
        low[i] = (char)tolower((unsigned char)in[i]);
    low[i] = '\0';
    for (size_t k = 0; k < 6; k++)
        if (!strcmp(low, yes[k]) || !strcmp(low, no[k])) {
            snprintf(out, cap, "%s", !strcmp(low, yes[k]) ? "1" : "0");
            return 0;
        }
    return fail(err, errlen, "expected a truth value (true/false, yes/no, on/off, 1/0)");
}

/* A value Paddle parses and podrun has no use for (sort_ip, enable_gpu_log, elastic_timeout,
 * legacy, auto_cluster_config): checked, then dropped. */
static int t_bool_dropped(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    int r = t_bool(in, out, cap, err, errlen);
    return r ? r : 1;
}

static int t_int_dropped(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    int r = t_int(in, out, cap, err, errlen);
    return r ? r : 1;
}

/* --master: the job store's HOST[:PORT]; Paddle's etcd master is not podrun's. */
static int t_master(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    if (!strncmp(in, "etcd://", 7))
        return fail(err, errlen, "podrun's own job store replaces Paddle's etcd master; give "
                    "--master IP:PORT of the node that hosts it");
    const char *p = strncmp(in, "http://", 7) ? in : in + 7;
    if (!*p)
        return 1;
    snprintf(out, cap, "%s", p);
    return 0;
}

static int t_run_mode(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    if (strcmp(in, "collective") && strcmp(in, "ps"))
        return fail(err, errlen, "use 'collective' or 'ps' (podrun does not run ps-heter, rpc or "
                    "ipu jobs)");
    snprintf(out, cap, "%s", in);
    return 0;
}

/* TRAINING_ROLE of a parameter-server pod (PaddleCloud's and paddle_k8s's roles). */
static int t_role(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    if (!strcmp(in, "PSERVER") || !strcmp(in, "TRAINER")) {
        snprintf(out, cap, "%s", in);
        return 0;
    }
    if (!strcmp(in, "WORKER")) {
        snprintf(out, cap, "TRAINER");
        return 0;
    }
    return fail(err, errlen, "expected PSERVER or TRAINER");
}

static int t_refuse_auto(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
    (void)in, (void)out, (void)cap;
    return fail(err, errlen, "%s", no_auto);
}

/* ---- words ----------------------------------------------------------------------------------- */

static const struct fe_refusal refused[] = {
    {"--auto_parallel_config", false, no_auto},
    {"--auto_tuner_json", false, no_auto},
};

static const struct fe_word flags[] = {
    {"--master", CFG_RDZV_ENDPOINT, t_master},
    {"--legacy", CFG_HELP, t_bool_dropped},
    {"--rank", CFG_NODE_RANK, t_rank},
    {"--log_level", CFG_PADDLE_LOG_LEVEL, NULL},
    {"--log_overwrite", CFG_PADDLE_LOG_OVERWRITE, t_bool},
    {"--sort_ip", CFG_HELP, t_bool_dropped},
    {"--enable_gpu_log", CFG_HELP, t_bool_dropped},
    {"--nnodes", CFG_NNODES, NULL},
    {"--nproc_per_node", CFG_NPROC_PER_NODE, t_int},
    {"--log_dir", CFG_PADDLE_LOG_DIR, NULL},
    {"--run_mode", CFG_PADDLE_RUN_MODE, t_run_mode},
    {"--job_id", CFG_RDZV_ID, NULL},
    {"--devices", CFG_PADDLE_DEVICES, NULL},
    {"--gpus", CFG_PADDLE_DEVICES, NULL},
    {"--npus", CFG_PADDLE_DEVICES, NULL},
    {"--xpus", CFG_PADDLE_DEVICES, NULL},
    {"--host", CFG_LOCAL_ADDR, NULL},
    {"--ips", CFG_PADDLE_IPS, NULL},
    {"--start_port", CFG_PADDLE_START_PORT, t_int},
    {"--auto_cluster_config", CFG_HELP, t_bool_dropped},
    {"--servers", CFG_PADDLE_SERVERS, NULL},
    {"--trainers", CFG_PADDLE_TRAINERS, NULL},
    {"--trainer_num", CFG_PADDLE_TRAINER_NUM, t_int},
    {"--server_num", CFG_PADDLE_SERVER_NUM, t_int},
    {"--gloo_port", CFG_PADDLE_GLOO_PORT, t_int},
    {"--with_gloo", CFG_PADDLE_WITH_GLOO, NULL},
    {"--max_restart", CFG_PADDLE_MAX_RESTART, t_int},
    {"--elastic_level", CFG_PADDLE_ELASTIC_LEVEL, t_int},
    {"--elastic_timeout", CFG_HELP, t_int_dropped},
};

/* env_args_mapping, and the variables the parameter-server scripts set per pod */
static const struct fe_word env[] = {
    {"POD_IP", CFG_LOCAL_ADDR, NULL},
    {"PADDLE_MASTER", CFG_RDZV_ENDPOINT, t_master},
    {"PADDLE_DEVICES", CFG_PADDLE_DEVICES, NULL},
    {"PADDLE_NNODES", CFG_NNODES, NULL},
    {"PADDLE_RUN_MODE", CFG_PADDLE_RUN_MODE, t_run_mode},
    {"PADDLE_LOG_LEVEL", CFG_PADDLE_LOG_LEVEL, NULL},
    {"PADDLE_LOG_OVERWRITE", CFG_PADDLE_LOG_OVERWRITE, t_bool},
    {"PADDLE_SORT_IP", CFG_HELP, t_bool_dropped},
    {"PADDLE_NPROC_PER_NODE", CFG_NPROC_PER_NODE, t_int},
    {"PADDLE_JOB_ID", CFG_RDZV_ID, NULL},
    {"PADDLE_RANK", CFG_NODE_RANK, t_rank},
    {"PADDLE_LOG_DIR", CFG_PADDLE_LOG_DIR, NULL},
    {"PADDLE_MAX_RESTART", CFG_PADDLE_MAX_RESTART, t_int},
    {"PADDLE_ELASTIC_LEVEL", CFG_PADDLE_ELASTIC_LEVEL, t_int},
    {"PADDLE_ELASTIC_TIMEOUT", CFG_HELP, t_int_dropped},
    {"PADDLE_SERVER_NUM", CFG_PADDLE_SERVER_NUM, t_int},
    {"PADDLE_TRAINER_NUM", CFG_PADDLE_TRAINER_NUM, t_int},
    {"PADDLE_SERVERS_ENDPOINTS", CFG_PADDLE_SERVERS, NULL},
    {"PADDLE_TRAINERS_ENDPOINTS", CFG_PADDLE_TRAINERS, NULL},
    {"PADDLE_GLOO_PORT", CFG_PADDLE_GLOO_PORT, t_int},
    {"PADDLE_WITH_GLOO", CFG_PADDLE_WITH_GLOO, NULL},
    {"PADDLE_START_PORT", CFG_PADDLE_START_PORT, t_int},
    {"PADDLE_IPS", CFG_PADDLE_IPS, NULL},
    {"PADDLE_AUTO_PARALLEL_CONFIG", CFG_HELP, t_refuse_auto},
    {"PADDLE_AUTO_CLUSTER", CFG_HELP, t_bool_dropped},
    {"PADDLE_TRAINER_ID", CFG_PADDLE_TRAINER_ID, t_int},
    {"TRAINING_ROLE", CFG_PADDLE_TRAINING_ROLE, t_role},
    {"PADDLE_TRAINING_ROLE", CFG_PADDLE_TRAINING_ROLE, t_role},   /* the paddle-operator's too */
    /* a parameter-server job's pods know their pservers (paddle_k8s, PaddleRec's scripts, the
     * paddle-operator); a collective job's pods are TRAINERs too, without them */
    {"PADDLE_PSERVERS", CFG_PADDLE_PSERVERS_GIVEN, NULL},
    {"PADDLE_PSERVERS_IP_PORT_LIST", CFG_PADDLE_PSERVERS_GIVEN, NULL},
};

/* ---- finalize -------------------------------------------------------------------------------- */

static int set_as(struct cfg *c, enum cfg_id id, const char *text, const struct cfg_src *s,
                  char *err, size_t errlen)
{
    return cfg_set(c, id, text, s, err, errlen);
}

/* A source for a value this front-end decides with no input of its own behind it. */
static struct cfg_src paddle_src(const char *why)
{
    struct cfg_src s;
    cfg_src_init(&s, CFG_SRC_FLAG, "paddle (%s)", why);
    return s;
}

/* The host of "HOST:PORT" (IPv6 in brackets) into out. */
static void endpoint_host(const char *ep, size_t len, char *out, size_t cap)
{
    char item[256];
    int port;
    bool given;
    snprintf(item, sizeof item, "%.*s", (int)(len < 255 ? len : 255), ep);
    if (podrun_hostport_parse(item, out, cap, &port, &given))
        snprintf(out, cap, "%.*s", (int)(cap > 0 ? cap - 1 : 0), item);
}

/* Counts the entries of a comma list whose host is `host` (host NULL: all), and the distinct
 * hosts in *hosts (added to what is there, up to 256). The first host goes to first. */
static int count_list(const char *list, const char *host, char hosts[][128], int *nhosts,
                      char *first, size_t fcap)
{
    int n = 0;
    for (const char *p = list; p && *p;) {
        size_t l = strcspn(p, ",");
        char h[128];
        endpoint_host(p, l, h, sizeof h);
        if (l && (!host || !strcmp(h, host)))
            n++;
        if (l && first && !first[0])
            snprintf(first, fcap, "%s", h);
        int k = 0;
        while (l && k < *nhosts && strcmp(hosts[k], h))
            k++;
        if (l && k == *nhosts && *nhosts < 256)
            snprintf(hosts[(*nhosts)++], 128, "%s", h);
        p += l;
        if (*p == ',')
            p++;
    }
    return n;
}

/* A pod's TRAINING_ROLE makes a parameter-server job when it is PSERVER, or TRAINER beside a
 * list of pservers: a collective PaddleJob's pods are TRAINERs as well. */
static bool role_is_ps(const struct cfg *c)
{
    return c->paddle_training_role == CFG_PADDLE_ROLE_PSERVER ||
           (c->paddle_training_role == CFG_PADDLE_ROLE_TRAINER && c->paddle_pservers_given);
}

/* Parameter-server mode: how many servers and trainers this node runs. With --servers and
 * --trainers the lists say it (the entries whose host is this node's --host or POD_IP, or
 * 127.0.0.1 when the servers are listed there, as Paddle decides); with a TRAINING_ROLE every
 * worker has that role; else --server_num and --trainer_num, one each by default. */
static int ps_plan(struct cfg *c, int *nnodes, char *first, size_t fcap, char *err, size_t errlen)
{
    char text[32];
    int r;
    if (c->paddle_servers || c->paddle_trainers) {
        if (!c->paddle_servers || !c->paddle_trainers)
            return fail(err, errlen, "--servers and --trainers go together: give both lists of "
                        "endpoints (or neither, and --server_num/--trainer_num)");
        char hosts[256][128];
        int nh = 0;
        const char *host = c->local_addr;
        if (strstr(c->paddle_servers, "127.0.0.1"))
            host = "127.0.0.1";
        if (!host)
            return fail(err, errlen, "--servers/--trainers: podrun needs this node's address to "
                        "find its entries; give --host IP (or POD_IP)");
        int s = count_list(c->paddle_servers, host, hosts, &nh, first, fcap);
        int t = count_list(c->paddle_trainers, host, hosts, &nh, NULL, 0);
        if (s + t == 0)
            return fail(err, errlen, "--servers/--trainers list no endpoint of this node (%s); "
                        "give --host with the address they use", host);
        snprintf(text, sizeof text, "%d", s);
        if ((r = set_as(c, CFG_PADDLE_SERVER_NUM, text, &c->src[CFG_PADDLE_SERVERS], err,
                        errlen)))
            return r;
        snprintf(text, sizeof text, "%d", t);
        if ((r = set_as(c, CFG_PADDLE_TRAINER_NUM, text, &c->src[CFG_PADDLE_TRAINERS], err,
                        errlen)))
            return r;
        *nnodes = nh;
        return 0;
    }
    if (role_is_ps(c)) {
        /* a pod of one role: its workers (--nproc_per_node, one by default) all have it */
        int n = c->nproc_kind == CFG_NPROC_NUMBER ? c->nproc_per_node : 1;
        bool server = c->paddle_training_role == CFG_PADDLE_ROLE_PSERVER;
        snprintf(text, sizeof text, "%d", n);
        const struct cfg_src *s = &c->src[CFG_PADDLE_TRAINING_ROLE];
        r = set_as(c, server ? CFG_PADDLE_SERVER_NUM : CFG_PADDLE_TRAINER_NUM, text, s, err,
                   errlen);
        return r ? r : set_as(c, server ? CFG_PADDLE_TRAINER_NUM : CFG_PADDLE_SERVER_NUM, "0", s,
                              err, errlen);
    }
    struct cfg_src def = paddle_src("one of each by default");
    if (c->paddle_server_num == 0 && (r = set_as(c, CFG_PADDLE_SERVER_NUM, "1", &def, err, errlen)))
        return r;
    if (c->paddle_trainer_num == 0)
        return set_as(c, CFG_PADDLE_TRAINER_NUM, "1", &def, err, errlen);
    return 0;
}

static bool is_ps(const struct cfg *c)
{
    return c->paddle_run_mode == CFG_PADDLE_PS || c->paddle_server_num > 0 ||
           c->paddle_trainer_num > 0 || c->paddle_servers || c->paddle_trainers || role_is_ps(c);
}

/* Workers on this node, and which rendezvous. */
static int paddle_finalize(struct cfg *c, char *err, size_t errlen)
{
    struct cfg_src fe;
    cfg_src_init(&fe, CFG_SRC_FLAG, "paddle");
    int r = cfg_set(c, CFG_WORKER_ENV, "paddle", &fe, err, errlen);
    if (r)
        return r;
    if (c->src[CFG_RDZV_ID].kind == CFG_SRC_DEFAULT &&
        (r = cfg_set(c, CFG_RDZV_ID, "default", &c->src[CFG_RDZV_ID], err, errlen)))
        return r;   /* Paddle's --job_id default */
    char first[128] = "", text[300];
    int list_nodes = 0;
    if (is_ps(c)) {
        if (c->paddle_run_mode != CFG_PADDLE_PS) {
            struct cfg_src s = paddle_src("parameter-server values given");
            if ((r = set_as(c, CFG_PADDLE_RUN_MODE, "ps", &s, err, errlen)))
                return r;
        }
        if ((r = ps_plan(c, &list_nodes, first, sizeof first, err, errlen)))
            return r;
        snprintf(text, sizeof text, "%d", c->paddle_server_num + c->paddle_trainer_num);
        struct cfg_src s = paddle_src("servers + trainers");
        if ((r = set_as(c, CFG_NPROC_PER_NODE, text, &s, err, errlen)))
            return r;
    } else if (c->src[CFG_NPROC_PER_NODE].kind == CFG_SRC_DEFAULT) {
        /* Paddle's pod_replicas: the --devices given, else the node's GPUs (one on a CPU) */
        int n = 0;
        for (const char *p = c->paddle_devices; p && *p; p++)
            n += p == c->paddle_devices || p[-1] == ',';
        snprintf(text, sizeof text, "%d", n);
        if ((r = set_as(c, CFG_NPROC_PER_NODE, n ? text : "gpus-or-1",
                        n ? &c->src[CFG_PADDLE_DEVICES] : &c->src[CFG_NPROC_PER_NODE], err,
                        errlen)))
            return r;
    }
    /* --ips: the nodes in node-rank order */
    if (c->paddle_ips) {
        char hosts[256][128];
        int nh = 0;
        count_list(c->paddle_ips, NULL, hosts, &nh, first, sizeof first);
        list_nodes = nh;
        for (int k = 0; c->local_addr && k < nh; k++)
            if (!strcmp(hosts[k], c->local_addr) &&
                c->src[CFG_NODE_RANK].kind < c->src[CFG_PADDLE_IPS].kind) {
                snprintf(text, sizeof text, "%d", k);
                if ((r = set_as(c, CFG_NODE_RANK, text, &c->src[CFG_PADDLE_IPS], err, errlen)))
                    return r;
            }
    }
    if (list_nodes > 0 && c->src[CFG_NNODES].kind == CFG_SRC_DEFAULT) {
        snprintf(text, sizeof text, "%d", list_nodes);
        const struct cfg_src *s = c->paddle_ips ? &c->src[CFG_PADDLE_IPS]
                                                : &c->src[CFG_PADDLE_SERVERS];
        if ((r = set_as(c, CFG_NNODES, text, s, err, errlen)))
            return r;
    }
    /* PADDLE_TRAINER_ID is the pod's rank in a collective job; a parameter-server pod's is its
     * index within its role, which podrun works out itself */
    if (c->paddle_trainer_id >= 0 && !role_is_ps(c)) {
        snprintf(text, sizeof text, "%d", c->paddle_trainer_id);
        if ((r = set_as(c, CFG_NODE_RANK, text, &c->src[CFG_PADDLE_TRAINER_ID], err, errlen)))
            return r;
    }
    /* the rendezvous: --master's node hosts the job store; a list's first host otherwise */
    if (!c->rdzv_host && first[0] && c->nnodes_max > 1) {
        podrun_hostport_format(first, PADDLE_HANDSHAKE_PORT, text, sizeof text);
        const struct cfg_src *s = c->paddle_ips ? &c->src[CFG_PADDLE_IPS]
                                                : &c->src[CFG_PADDLE_SERVERS];
        if ((r = set_as(c, CFG_RDZV_ENDPOINT, text, s, err, errlen)))
            return r;
    }
    if (c->rdzv_host) {
        /* Paddle's master is a rendezvous at an address: c10d's store there, unless the job's
         * state is to be in etcd (--rdzv-backend etcd, whose members the endpoint then lists) */
        if (c->rdzv_backend != CFG_BACKEND_ETCD &&
            (r = set_as(c, CFG_RDZV_BACKEND, "c10d", &c->src[CFG_RDZV_ENDPOINT], err, errlen)))
            return r;
    } else if (c->nnodes_max > 1 && c->src[CFG_MASTER_ADDR].kind == CFG_SRC_DEFAULT) {
        /* (a scheduler may have named a static store's host: a PaddleJob's first pod) */
        return fail(err, errlen, "--nnodes %d needs --master IP:PORT (or PADDLE_MASTER): the "
                    "address of the node that hosts the job's store, the same on every node",
                    c->nnodes_max);
    }
    /* Paddle restarts in place only at --elastic_level 1 */
    if (c->paddle_elastic_level >= 1 && c->src[CFG_MAX_RESTARTS].kind <= CFG_SRC_PET) {
        snprintf(text, sizeof text, "%d", c->paddle_max_restart);
        struct cfg_src s = c->src[CFG_PADDLE_MAX_RESTART];
        if (s.kind == CFG_SRC_DEFAULT)
            s = paddle_src("--max_restart default with --elastic_level 1");
        if ((r = set_as(c, CFG_MAX_RESTARTS, text, &s, err, errlen)))
            return r;
    }
    if (!strcmp(c->paddle_log_level, "DEBUG") &&
        (r = set_as(c, CFG_DEBUG, "1", &c->src[CFG_PADDLE_LOG_LEVEL], err, errlen)))
        return r;
    return 0;
}

static void paddle_usage(FILE *f)
{
    fprintf(f,
        "usage: podrun paddle [options] PROGRAM [ARGS...]\n"
        "       paddle-launch [options] PROGRAM [ARGS...]   (podrun linked as paddle-launch)\n"
        "\n"
        "Runs PROGRAM the way `python -m paddle.distributed.launch` does: the same flags and\n"
        "PADDLE_* variables, the same environment per trainer (PADDLE_TRAINER_ID,\n"
        "PADDLE_TRAINER_ENDPOINTS, FLAGS_selected_gpus, ...), logs in --log_dir/workerlog.N.\n"
        "Endpoints and ranks are agreed through podrun's job store on the --master node.\n"
        "\n"
        "  --master IP:PORT   --nnodes N|MIN:MAX   --rank R   --nproc_per_node N\n"
        "  --devices/--gpus LIST   --ips IP,...   --start_port P   --host IP   --job_id ID\n"
        "  --log_dir DIR   --log_overwrite B   --log_level LEVEL\n"
        "  --run_mode collective|ps   --server_num N   --trainer_num N\n"
        "  --servers EP,...   --trainers EP,...   --gloo_port P   --with_gloo V\n"
        "  --max_restart N   --elastic_level -1|0|1\n"
        "\n"
        "In ps mode the job succeeds when every trainer exits 0; the parameter servers are then\n"
        "stopped. podrun's own options also work here (see podrun --help).\n");
}

const struct vocab paddle_vocab = {
    .name = "paddle",
    .label = "paddle",
    .env_rank = CFG_SRC_PET,
    .env = env,
    .nenv = sizeof env / sizeof *env,
    .flags = flags,
    .nflags = sizeof flags / sizeof *flags,
    .refused = refused,
    .nrefused = sizeof refused / sizeof *refused,
    .finalize = paddle_finalize,
};

const struct frontend fe_paddle = {"paddle", &paddle_vocab, paddle_usage, "paddle-launch",
                                   "paddle", NULL};
