/* tests/unit/launcher/config/test_config.c — sources and their ranks (enforced by cfg_set in any
 * order), errors naming their input, what cfg_finalize derives, podrun's own environment layer,
 * --print-config. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"

static char err[512];

static struct cfg_src src(enum cfg_src_kind kind, const char *name)
{
    struct cfg_src s;
    cfg_src_init(&s, kind, "%s", name);
    return s;
}

static int set(struct cfg *c, enum cfg_id id, const char *text, enum cfg_src_kind kind,
               const char *name)
{
    struct cfg_src s = src(kind, name);
    err[0] = 0;
    return cfg_set(c, id, text, &s, err, sizeof err);
}

static char *prog[] = {"prog", NULL};

static int finalize(struct cfg *c)
{
    cfg_set_program(c, prog, 1);
    return cfg_finalize(c, 4, 0, err, sizeof err);
}

static void test_defaults(void)
{
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    CHECK_EQ_INT(c.nnodes_min, 1);
    CHECK_EQ_STR(c.master_addr, "127.0.0.1");
    CHECK_EQ_INT(c.master_port, 29500);
    CHECK_EQ_INT(c.term_timeout_ms, 25000);
    CHECK_EQ_INT(c.join_timeout_ms, 600000);
    CHECK_EQ_INT(c.is_host, -1);
    CHECK(c.node_name == NULL && !c.debug);
    CHECK_EQ_STR(c.tmpdir, "/tmp");
    CHECK_EQ_INT(c.src[CFG_NPROC_PER_NODE].kind, CFG_SRC_DEFAULT);
    /* static on one node without a port: the master's address, a free port (torchrun 2.x) */
    CHECK_EQ_STR(c.rdzv_host, "127.0.0.1");
    CHECK(c.rdzv_port == 0 && c.rdzv_port_given);
    CHECK_EQ_INT(c.src[CFG_RDZV_ENDPOINT].kind, CFG_SRC_DERIVED);
    CHECK_EQ_STR(c.src[CFG_RDZV_ENDPOINT].name, "one node without --master-port: a free port");
    cfg_free(&c);
    /* ... at --local-addr, where a node alone hosts it, when no master address was given */
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_LOCAL_ADDR, "127.0.0.47", CFG_SRC_FLAG, "x"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_STR(c.rdzv_host, "127.0.0.47");
    cfg_free(&c);
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_LOCAL_ADDR, "127.0.0.47", CFG_SRC_FLAG, "x"), 0);
    CHECK_EQ_INT(set(&c, CFG_MASTER_ADDR, "127.0.0.1", CFG_SRC_FLAG, "x"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_STR(c.rdzv_host, "127.0.0.1");         /* a master given stands */
    cfg_free(&c);

    /* a port given (any source), or more than one node: the master's address and port */
    static const struct {
        enum cfg_id id;
        const char *text;
        enum cfg_src_kind kind;
    } given[] = {{CFG_MASTER_PORT, "29500", CFG_SRC_PODRUN}, {CFG_NNODES, "2", CFG_SRC_FLAG}};
    for (size_t i = 0; i < sizeof given / sizeof *given; i++) {
        cfg_init(&c);
        CHECK_EQ_INT(set(&c, given[i].id, given[i].text, given[i].kind, "x"), 0);
        CHECK_EQ_INT(finalize(&c), 0);
        CHECK_EQ_STR(c.rdzv_host, "127.0.0.1");
        CHECK(c.rdzv_port == 29500 && !c.rdzv_port_given);
        CHECK_EQ_STR(c.src[CFG_RDZV_ENDPOINT].name, "--master-addr/--master-port");
        cfg_free(&c);
    }
}

/* The ranks hold whatever order the layers come in: the command line applied first still wins
 * over every environment applied after it, and so on down. */
static void test_precedence_in_any_order(void)
{
    static const struct {
        enum cfg_src_kind kind;
        const char *name, *value;
    } layers[] = {
        {CFG_SRC_FLAG, "--master-port", "6000"},
        {CFG_SRC_FILE, "podrun.yaml:master_port", "5000"},
        {CFG_SRC_PODRUN, "PODRUN_MASTER_PORT", "4000"},
        {CFG_SRC_PET, "PET_MASTER_PORT", "3000"},
        {CFG_SRC_HOSTFILE, "/etc/mpi/hostfile line 2 (MPIJob)", "2500"},
        {CFG_SRC_OPERATOR, "MASTER_PORT (PyTorchJob)", "2000"},
    };
    const int n = sizeof layers / sizeof *layers;
    for (int top = 0; top < n; top++) {
        /* the layers from `top` down, highest first: each later call is shadowed */
        struct cfg c;
        cfg_init(&c);
        for (int i = top; i < n; i++)
            CHECK_EQ_INT(set(&c, CFG_MASTER_PORT, layers[i].value, layers[i].kind,
                             layers[i].name), 0);
        CHECK_EQ_INT(c.master_port, atoi(layers[top].value));
        CHECK_EQ_INT(c.src[CFG_MASTER_PORT].kind, layers[top].kind);
        CHECK_EQ_STR(c.src[CFG_MASTER_PORT].name, layers[top].name);
        /* and lowest first: each later call wins */
        cfg_free(&c);
        cfg_init(&c);
        for (int i = n - 1; i >= top; i--)
            CHECK_EQ_INT(set(&c, CFG_MASTER_PORT, layers[i].value, layers[i].kind,
                             layers[i].name), 0);
        CHECK_EQ_INT(c.master_port, atoi(layers[top].value));
        CHECK_EQ_STR(c.src[CFG_MASTER_PORT].name, layers[top].name);
        cfg_free(&c);
    }
    /* within one rank the later call wins */
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_ROLE, "a", CFG_SRC_PET, "PYTHON_EXEC"), 0);
    CHECK_EQ_INT(set(&c, CFG_ROLE, "b", CFG_SRC_PET, "PET_ROLE"), 0);
    CHECK_EQ_STR(c.role, "b");
    /* a shadowed value is still checked: bad input is an error from any source */
    CHECK_EQ_INT(set(&c, CFG_ROLE, "flag", CFG_SRC_FLAG, "--role"), 0);
    CHECK_EQ_INT(set(&c, CFG_MASTER_PORT, "x", CFG_SRC_PET, "PET_MASTER_PORT"), -EINVAL);
    CHECK(strstr(err, "PET_MASTER_PORT='x'") != NULL);
    CHECK_EQ_INT(set(&c, CFG_ROLE, "", CFG_SRC_OPERATOR, "ROLE (Volcano)"), -EINVAL);
    CHECK_EQ_STR(c.role, "flag");
    /* only cfg_finalize derives */
    CHECK_EQ_INT(set(&c, CFG_ROLE, "x", CFG_SRC_DERIVED, "somewhere"), -EINVAL);
    CHECK_EQ_STR(c.role, "flag");
    cfg_free(&c);
}

/* --rdzv-conf's keys rank one by one: a flag's key survives a later env's, the env's other keys
 * still count. */
static void test_conf_keys_rank_each(void)
{
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_RDZV_CONF, "join_timeout=4", CFG_SRC_FLAG, "--rdzv-conf"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_CONF, "join_timeout=9,last_call_timeout=2", CFG_SRC_PET,
                     "PET_RDZV_CONF"), 0);
    CHECK_EQ_INT(c.join_timeout_ms, 4000);
    CHECK_EQ_INT(c.src[CFG_JOIN_TIMEOUT].kind, CFG_SRC_FLAG);
    CHECK_EQ_INT(c.last_call_timeout_ms, 2000);
    CHECK_EQ_STR(c.src[CFG_LAST_CALL_TIMEOUT].name, "PET_RDZV_CONF");
    CHECK_EQ_INT(c.src[CFG_RDZV_CONF].kind, CFG_SRC_FLAG);
    CHECK_EQ_INT(set(&c, CFG_RDZV_CONF, "is_host=1,bogus=2", CFG_SRC_FLAG, "--rdzv-conf"),
                 -EINVAL);
    CHECK(strstr(err, "unknown key 'bogus'; known keys: join_timeout, last_call_timeout") != NULL);
    CHECK_EQ_INT(set(&c, CFG_RDZV_CONF, "novalue", CFG_SRC_FLAG, "--rdzv-conf"), -EINVAL);
    CHECK(strstr(err, "'novalue' is not KEY=VALUE") != NULL);
    CHECK_EQ_INT(set(&c, CFG_RDZV_CONF, "join_timeout=soon", CFG_SRC_FLAG, "--rdzv-conf"),
                 -EINVAL);
    CHECK(strstr(err, "--rdzv-conf join_timeout=soon") != NULL);
    cfg_free(&c);
}

/* Each source names its input its own way in an error. */
static void test_errors_name_the_input(void)
{
    static const struct {
        enum cfg_src_kind kind;
        const char *name, *needle;
    } cases[] = {
        {CFG_SRC_FLAG, "--nnodes", "--nnodes 'x': expected N or MIN:MAX"},
        {CFG_SRC_PODRUN, "PODRUN_NNODES", "PODRUN_NNODES='x'"},
        {CFG_SRC_OPERATOR, "VC_WORKER_NUM (Volcano)", "VC_WORKER_NUM (Volcano)='x'"},
        {CFG_SRC_FILE, "default_config.yaml:num_machines",
         "default_config.yaml:num_machines: nnodes 'x'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cfg c;
        cfg_init(&c);
        CHECK_EQ_INT(set(&c, CFG_NNODES, "x", cases[i].kind, cases[i].name), -EINVAL);
        if (!strstr(err, cases[i].needle))
            fprintf(stderr, "'%s' lacks '%s'\n", err, cases[i].needle);
        CHECK(strstr(err, cases[i].needle) != NULL);
        cfg_free(&c);
    }
}

static void test_finalize_derives(void)
{
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_STANDALONE, "1", CFG_SRC_FLAG, "--standalone"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, "static", CFG_SRC_FLAG, "--rdzv-backend"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_C10D); /* derived beats even a flag */
    CHECK_EQ_STR(c.src[CFG_RDZV_BACKEND].name, "--standalone");
    CHECK_EQ_STR(c.rdzv_host, "localhost");
    CHECK_EQ_INT(c.rdzv_port, 0);
    cfg_free(&c);

    cfg_init(&c); /* static: `timeout` is the join timeout unless that is given */
    CHECK_EQ_INT(set(&c, CFG_RDZV_CONF, "timeout=7", CFG_SRC_FLAG, "--rdzv-conf"), 0);
    CHECK_EQ_INT(set(&c, CFG_MASTER_ADDR, "::1", CFG_SRC_FLAG, "--master-addr"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_INT(c.join_timeout_ms, 7000);
    CHECK_EQ_STR(c.src[CFG_JOIN_TIMEOUT].name, "rdzv-conf timeout");
    CHECK_EQ_STR(c.rdzv_host, "::1");
    CHECK(c.rdzv_port == 0 && c.rdzv_port_given);   /* one node, no port: a free one */
    cfg_free(&c);

    cfg_init(&c); /* c10d alone: localhost on the c10d port */
    CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, "c10d", CFG_SRC_PET, "PET_RDZV_BACKEND"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_STR(c.rdzv_host, "localhost");
    CHECK_EQ_INT(c.rdzv_port, CFG_DEFAULT_C10D_PORT);
    CHECK_EQ_STR(c.src[CFG_RDZV_ENDPOINT].name, "--rdzv-backend c10d");
    cfg_free(&c);

    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_NODE_RANK, "2", CFG_SRC_PODRUN, "PODRUN_NODE_RANK"), 0);
    CHECK_EQ_INT(finalize(&c), -EINVAL);
    CHECK(strstr(err, "--node-rank 2 (env PODRUN_NODE_RANK) must be below --nnodes 1 (default)") !=
          NULL);
    cfg_free(&c);
}

/* --discovery k8s: the pods give the store host at run time, so no endpoint is needed, but the
 * number of pods to wait for is; a given master address is kept. */
static void test_k8s_discovery(void)
{
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(c.k8s_order, CFG_K8S_ORDER_INDEX);
    CHECK(c.k8s_selector == NULL && c.k8s_namespace == NULL);
    CHECK_EQ_INT(set(&c, CFG_DISCOVERY, "k8s", CFG_SRC_FLAG, "--discovery"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, "c10d", CFG_SRC_FLAG, "--rdzv-backend"), 0);
    CHECK_EQ_INT(finalize(&c), -EINVAL);
    CHECK(strstr(err, "--discovery k8s waits for the job's pods: give their number with "
                      "--nnodes N") != NULL);
    CHECK_EQ_INT(set(&c, CFG_NNODES, "2:4", CFG_SRC_PET, "PET_NNODES"), 0);
    CHECK_EQ_INT(set(&c, CFG_K8S_SELECTOR, "app=x", CFG_SRC_PODRUN, "PODRUN_K8S_SELECTOR"), 0);
    CHECK_EQ_INT(set(&c, CFG_K8S_ORDER, "ip", CFG_SRC_FLAG, "--k8s-order"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_STR(c.rdzv_host, "rank-0-pod");
    CHECK_EQ_STR(c.src[CFG_RDZV_ENDPOINT].name, "--discovery k8s");
    CHECK_EQ_INT(c.rdzv_port, CFG_DEFAULT_C10D_PORT);
    CHECK_EQ_STR(c.k8s_selector, "app=x");
    CHECK_EQ_INT(c.k8s_order, CFG_K8S_ORDER_IP);
    CHECK_EQ_INT(set(&c, CFG_K8S_ORDER, "rank", CFG_SRC_FLAG, "--k8s-order"), -EINVAL);
    CHECK(strstr(err, "use 'index', 'name' or 'ip'") != NULL);
    cfg_free(&c);

    cfg_init(&c); /* static with a master address given: that address, not a pod's */
    CHECK_EQ_INT(set(&c, CFG_DISCOVERY, "k8s", CFG_SRC_FLAG, "--discovery"), 0);
    CHECK_EQ_INT(set(&c, CFG_NNODES, "3", CFG_SRC_FLAG, "--nnodes"), 0);
    CHECK_EQ_INT(set(&c, CFG_MASTER_ADDR, "10.1.1.1", CFG_SRC_FLAG, "--master-addr"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_STR(c.rdzv_host, "10.1.1.1");
    cfg_free(&c);
}

/* etcd: the members as a list, URLs or one HOST (port 2379), the TLS files with https, and
 * neither a list nor the files for the other backends. */
static void test_etcd_endpoints(void)
{
    static const struct {
        const char *backend, *endpoint, *cacert, *cert, *key, *needle, *id;
    } bad[] = {
        {"etcd", NULL, NULL, NULL, NULL, "--rdzv-backend etcd needs --rdzv-endpoint", "j"},
        {"c10d", "e0:2379,e1:2379", NULL, NULL, NULL, "a list of endpoints or a URL is for "
                                                      "--rdzv-backend etcd", NULL},
        {"static", "http://e0", NULL, NULL, NULL, "is for --rdzv-backend etcd", NULL},
        {"c10d", "n0:29400", "/ca", NULL, NULL, "are for --rdzv-backend etcd", NULL},
        {"etcd", "e0", NULL, "/c", NULL, "--etcd-cert and --etcd-key go together", "j"},
        {"etcd", "http://e0", "/ca", NULL, NULL, "names http://e0:2379, but --etcd-cacert", "j"},
        {"etcd", "e0:0", NULL, NULL, NULL, "'e0:0': expected [http://|https://]HOST[:PORT]", "j"},
        /* the default id is every job's: refused, with the flag, its variable and the fix */
        {"etcd", "e0", NULL, NULL, NULL, "--rdzv-backend etcd needs the job's own --rdzv-id (or "
                                         "PET_RDZV_ID): under the default 'none'", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cfg c;
        cfg_init(&c);
        CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, bad[i].backend, CFG_SRC_FLAG, "--rdzv-backend"), 0);
        if (bad[i].endpoint)
            CHECK_EQ_INT(set(&c, CFG_RDZV_ENDPOINT, bad[i].endpoint, CFG_SRC_FLAG, "--e"), 0);
        if (bad[i].cacert)
            CHECK_EQ_INT(set(&c, CFG_ETCD_CACERT, bad[i].cacert, CFG_SRC_FLAG, "--ca"), 0);
        if (bad[i].cert)
            CHECK_EQ_INT(set(&c, CFG_ETCD_CERT, bad[i].cert, CFG_SRC_FLAG, "--cert"), 0);
        if (bad[i].key)
            CHECK_EQ_INT(set(&c, CFG_ETCD_KEY, bad[i].key, CFG_SRC_FLAG, "--key"), 0);
        if (bad[i].id)
            CHECK_EQ_INT(set(&c, CFG_RDZV_ID, bad[i].id, CFG_SRC_FLAG, "--rdzv-id"), 0);
        CHECK_EQ_INT(finalize(&c), -EINVAL);
        if (!strstr(err, bad[i].needle))
            fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, err, bad[i].needle);
        CHECK(strstr(err, bad[i].needle) != NULL);
        cfg_free(&c);
    }

    struct cfg c;
    cfg_init(&c); /* one host: etcd's port, not c10d's */
    CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, "etcd", CFG_SRC_PODRUN, "PODRUN_RDZV_BACKEND"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_ENDPOINT, "etcd-0", CFG_SRC_FLAG, "--rdzv-endpoint"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_ID, "job-7", CFG_SRC_PET, "PET_RDZV_ID"), 0);
    CHECK_EQ_INT(set(&c, CFG_NNODES, "4", CFG_SRC_FLAG, "--nnodes"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_ETCD);
    CHECK_EQ_STR(c.rdzv_host, "etcd-0");
    CHECK_EQ_INT(c.rdzv_port, 2379);
    CHECK(c.rdzv_endpoints == NULL);
    cfg_free(&c);

    cfg_init(&c); /* a list with TLS: no scheme means https */
    CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, "etcd", CFG_SRC_FLAG, "--rdzv-backend"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_ENDPOINT, "e0:2379,https://e1:2379", CFG_SRC_FLAG, "--e"), 0);
    CHECK_EQ_INT(set(&c, CFG_ETCD_CACERT, "/ca.pem", CFG_SRC_PODRUN, "PODRUN_ETCD_CACERT"), 0);
    CHECK_EQ_INT(set(&c, CFG_ETCD_CERT, "/c.pem", CFG_SRC_FLAG, "--etcd-cert"), 0);
    CHECK_EQ_INT(set(&c, CFG_ETCD_KEY, "/k.pem", CFG_SRC_FLAG, "--etcd-key"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_ID, "job-7", CFG_SRC_OPERATOR, "SLURM_JOB_ID"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    CHECK_EQ_STR(c.rdzv_endpoints, "e0:2379,https://e1:2379");
    CHECK_EQ_STR(c.rdzv_host, "e0");
    CHECK_EQ_STR(c.etcd_cacert, "/ca.pem");
    cfg_free(&c);
}

static int finalize_gpus(struct cfg *c, int ngpus)
{
    cfg_set_program(c, prog, 1);
    return cfg_finalize(c, 4, ngpus, err, sizeof err);
}

/* --nproc-per-node gpu|auto count the GPUs finalize is given; the settings that give each worker
 * a GPU of its own need one per worker; a core list means cores binding. */
static void test_finalize_devices(void)
{
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_NPROC_PER_NODE, "gpu", CFG_SRC_FLAG, "--nproc-per-node"), 0);
    CHECK_EQ_INT(finalize_gpus(&c, 8), 0);
    CHECK_EQ_INT(c.nproc_per_node, 8);
    cfg_free(&c);
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_NPROC_PER_NODE, "auto", CFG_SRC_FLAG, "--nproc-per-node"), 0);
    CHECK_EQ_INT(finalize_gpus(&c, 3), 0);
    CHECK_EQ_INT(c.nproc_per_node, 3);
    cfg_free(&c);

    static const struct {
        enum cfg_id id;
        const char *value, *name, *needle;
    } own[] = {
        {CFG_VIRTUAL_LOCAL_RANK, "1", "--virtual_local_rank",
         "--virtual-local-rank (flag --virtual_local_rank) gives each worker a GPU of its own, "
         "but there are 2 GPUs here for 4 workers: give --nproc-per-node gpu or at most 2"},
        {CFG_VISIBLE_DEVICES, "per-rank", "--visible-devices", "--visible-devices per-rank"},
        {CFG_NUMA_BINDING, "exclusive", "--numa-binding", "--numa-binding exclusive"},
        {CFG_PREFLIGHT, "nccl", "--preflight", "--preflight nccl"},
    };
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
        cfg_init(&c);
        CHECK_EQ_INT(set(&c, CFG_NPROC_PER_NODE, "4", CFG_SRC_FLAG, "--nproc-per-node"), 0);
        CHECK_EQ_INT(set(&c, own[i].id, own[i].value, CFG_SRC_FLAG, own[i].name), 0);
        CHECK_EQ_INT(finalize_gpus(&c, 2), -EINVAL);
        CHECK(strstr(err, own[i].needle) != NULL);
        CHECK_EQ_INT(finalize_gpus(&c, 4), 0);
        CHECK_EQ_INT(finalize_gpus(&c, 0), -EINVAL);
        CHECK(strstr(err, "no GPU was found on this node: drop it") != NULL);
        cfg_free(&c);
    }
    /* DeepSpeed's binding is not GPU-aware: no GPU needed */
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_NPROC_PER_NODE, "4", CFG_SRC_FLAG, "--nproc-per-node"), 0);
    CHECK_EQ_INT(set(&c, CFG_BIND_CORE_LIST, "0-7", CFG_SRC_PODRUN, "PODRUN_BIND_CORE_LIST"), 0);
    CHECK_EQ_INT(finalize_gpus(&c, 0), 0);
    CHECK_EQ_INT(c.numa_binding, CFG_NUMA_CORES);
    CHECK_EQ_STR(c.src[CFG_NUMA_BINDING].name, "--bind-core-list");
    cfg_free(&c);
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_BIND_CORE_LIST, "0-7", CFG_SRC_FLAG, "--bind-core-list"), 0);
    CHECK_EQ_INT(set(&c, CFG_NUMA_BINDING, "node", CFG_SRC_PET, "PET_NUMA_BINDING"), 0);
    CHECK_EQ_INT(finalize_gpus(&c, 1), -EINVAL);
    CHECK(strstr(err, "only with --numa-binding cores, but --numa-binding is node "
                      "(env PET_NUMA_BINDING)") != NULL);
    cfg_free(&c);
    /* the defaults: nothing bound, nothing checked, exit code 175 */
    cfg_init(&c);
    CHECK_EQ_INT(finalize_gpus(&c, 0), 0);
    CHECK(c.numa_binding == CFG_NUMA_NONE && c.preflight == CFG_PREFLIGHT_OFF);
    CHECK(c.preflight_policy == CFG_POLICY_WARN && c.visible_devices == CFG_VISIBLE_ALL);
    CHECK_EQ_INT(c.exit_code_preflight, 175);
    CHECK_EQ_INT(c.preflight_tcp_bytes, 16 << 20);
    CHECK_EQ_INT(c.preflight_max_rtt_ms, 10);
    CHECK(c.sysroot == NULL && !c.virtual_local_rank);
    cfg_free(&c);
}

static void test_podrun_env_layer(void)
{
    struct cfg c;
    cfg_init(&c);
    char *env[] = {"PODRUN_NODE_NAME=worker-7", "PODRUN_DEBUG=1", "TMPDIR=/scratch",
                   "PODRUN_ROLE=", "PODRUN_HELP=1", "PODRUN_JOIN_TIMEOUT=1", NULL};
    CHECK_EQ_INT(cfg_load_env(&c, env, err, sizeof err), 0);
    CHECK_EQ_STR(c.node_name, "worker-7");
    CHECK_EQ_INT(c.src[CFG_NODE_NAME].kind, CFG_SRC_PODRUN);
    CHECK(c.debug);
    CHECK_EQ_STR(c.tmpdir, "/scratch");
    CHECK_EQ_STR(c.src[CFG_TMPDIR].name, "TMPDIR");
    CHECK_EQ_STR(c.role, "default");              /* empty is unset */
    CHECK(!c.help);                               /* no PODRUN_HELP */
    CHECK_EQ_INT(c.join_timeout_ms, 600000);      /* --rdzv-conf keys come through it alone */
    char *bad[] = {"PODRUN_DEBUG=perhaps", NULL};
    CHECK_EQ_INT(cfg_load_env(&c, bad, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "PODRUN_DEBUG='perhaps'") != NULL);
    cfg_free(&c);
}

static void test_print_config(void)
{
    struct cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(set(&c, CFG_NPROC_PER_NODE, "3", CFG_SRC_FLAG, "--nproc_per_node"), 0);
    CHECK_EQ_INT(set(&c, CFG_NODE_NAME, "w-1", CFG_SRC_PODRUN, "PODRUN_NODE_NAME"), 0);
    CHECK_EQ_INT(set(&c, CFG_NNODES, "4", CFG_SRC_OPERATOR, "WORLD_SIZE (PyTorchJob)"), 0);
    CHECK_EQ_INT(set(&c, CFG_NODE_RANK, "2", CFG_SRC_HOSTFILE, "/h line 3"), 0);
    CHECK_EQ_INT(set(&c, CFG_DISCOVERED, "MPIJob", CFG_SRC_HOSTFILE, "/h (MPIJob)"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_print(&c, f);
    fclose(f);
    CHECK(strstr(buf, "nproc-per-node                   3                        "
                      "(flag --nproc_per_node)\n") != NULL);
    CHECK(strstr(buf, "node-name                        w-1                      "
                      "(env PODRUN_NODE_NAME)\n") != NULL);
    /* a scheduler's variable and a hostfile's line each say what they are */
    CHECK(strstr(buf, "nnodes                           4                        "
                      "(env WORLD_SIZE (PyTorchJob))\n") != NULL);
    CHECK(strstr(buf, "node-rank                        2                        "
                      "(hostfile /h line 3)\n") != NULL);
    CHECK(strstr(buf, "discovered                       MPIJob                   "
                      "(hostfile /h (MPIJob))\n") != NULL);
    CHECK(strstr(buf, "discovery-root                   /                        "
                      "(default)\n") != NULL);
    CHECK(strstr(buf, "rdzv-conf timeout                900s                     "
                      "(default; accepted for torchrun compatibility, unused)\n") != NULL);
    CHECK(strstr(buf, "program                          prog\n") != NULL);
    CHECK(strstr(buf, "print-config") == NULL); /* actions are not values */
    CHECK(strstr(buf, "rdzv-conf read_timeout           60s                      "
                      "(default; accepted for torchrun compatibility, unused)\n") != NULL);
    free(buf);
    cfg_free(&c);

    cfg_init(&c); /* with etcd, read_timeout is how long etcd may fail */
    CHECK_EQ_INT(set(&c, CFG_RDZV_BACKEND, "etcd", CFG_SRC_FLAG, "--rdzv-backend"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_ENDPOINT, "e0,e1", CFG_SRC_FLAG, "--rdzv-endpoint"), 0);
    CHECK_EQ_INT(set(&c, CFG_RDZV_ID, "j", CFG_SRC_FLAG, "--rdzv-id"), 0);
    CHECK_EQ_INT(finalize(&c), 0);
    f = open_memstream(&buf, &len);
    cfg_print(&c, f);
    fclose(f);
    CHECK(strstr(buf, "rdzv-endpoint                    e0,e1                    "
                      "(flag --rdzv-endpoint)\n") != NULL);
    CHECK(strstr(buf, "rdzv-conf read_timeout           60s                      "
                      "(default; how long etcd may fail)\n") != NULL);
    free(buf);
    cfg_free(&c);
}

int main(void)
{
    RUN(test_defaults);
    RUN(test_precedence_in_any_order);
    RUN(test_conf_keys_rank_each);
    RUN(test_errors_name_the_input);
    RUN(test_finalize_derives);
    RUN(test_k8s_discovery);
    RUN(test_etcd_endpoints);
    RUN(test_finalize_devices);
    RUN(test_podrun_env_layer);
    RUN(test_print_config);
    return check_result();
}
