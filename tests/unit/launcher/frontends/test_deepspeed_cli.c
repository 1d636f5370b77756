/* tests/unit/launcher/frontends/test_deepspeed_cli.c — the deepspeed front-end as golden tables: a
 * hostfile and a command line (include/exclude, --num_nodes/--num_gpus, --no_ssh, world_info)
 * on a fake machine -> what this node runs (mode, node rank, node count, workers, slot ids, the
 * head's world_info), and every error text of DeepSpeed's hostfile and selection
 * (reference/launchers.md §1.2) as one line. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/launcher/operators/op_test.h"
#include "launcher/frontends/deepspeed_cli.h"
#include "launcher/frontends/deepspeed_hosts.h"

/* `podrun deepspeed FLAGS train.py` on machine m with env and ngpus GPUs found. */
static int load_ds_gpus(struct cfg *c, char **env, struct fake_machine *m,
                        const char *const *flags, int ngpus)
{
    static char *argv[40];
    argv[0] = "deepspeed";
    int argc = 1;
    for (size_t i = 0; flags && flags[i] && argc < 38; i++)
        argv[argc++] = (char *)flags[i];
    argv[argc++] = "train.py";
    struct discover_host h;
    fake_host_init(&h, m);
    cfg_init(c);
    err[0] = '\0';
    int r = frontend_load_host(&fe_deepspeed, c, argc, argv, env, &h, err, sizeof err);
    if (!r)
        r = cfg_finalize(c, 8, ngpus, err, sizeof err);
    return r;
}

static int load_ds(struct cfg *c, char **env, struct fake_machine *m, const char *const *flags)
{
    return load_ds_gpus(c, env, m, flags, 0);
}

/* world_info as "host:0,1 host:2" for comparison. */
static void world_text(const char *wi, char *out, size_t cap)
{
    struct resources r;
    out[0] = '\0';
    if (!wi || deepspeed_hosts_world_decode(wi, &r, err, sizeof err))
        return;
    for (size_t i = 0; i < r.count; i++) {
        char s[256];
        deepspeed_hosts_slots_format(r.nodes[i].slots, r.nodes[i].nslots, s, sizeof s);
        snprintf(out + strlen(out), cap - strlen(out), "%s%s:%s", i ? " " : "", r.nodes[i].host,
                 s);
    }
    resources_free(&r);
}

static const char HF[] = "worker-0 slots=2\n"
                         "# a comment\n"
                         "\n"
                         "worker-1 slots=4 max_slots=8\n"
                         "worker-2\tslots=1\n";

static const char *const MODES[] = {"off", "node", "head", "local"};

struct row {
    const char *file;          /* the hostfile's text at /job/hostfile; NULL: none */
    const char *me;            /* this machine's host name */
    const char *const *flags;
    const char *cvd;           /* CUDA_VISIBLE_DEVICES, NULL: unset */
    /* expected */
    const char *mode;
    int node_rank, nnodes, nproc;
    const char *devices;       /* NULL: unset */
    const char *world;         /* head: world_info decoded */
    const char *master;
};

#define F(...) FLAGS(__VA_ARGS__)
static const struct row rows[] = {
    /* --no_ssh: this node's own line */
    {HF, "worker-1", F("--no_ssh"), NULL, "node", 1, 3, 4, "0,1,2,3", NULL, "worker-0"},
    {HF, "worker-2", F("--no_ssh"), NULL, "node", 2, 3, 1, "0", NULL, "worker-0"},
    /* documented include: a host alone = all of its slots, with slots only those */
    {HF, "worker-1", F("--no_ssh", "-i", "worker-0:1@worker-1"), NULL, "node", 1, 2, 4,
     "0,1,2,3", NULL, "worker-0"},
    {HF, "worker-0", F("--no_ssh", "--include=worker-0:1@worker-1"), NULL, "node", 0, 2, 1, "1",
     NULL, "worker-0"},
    {HF, "worker-1", F("--no_ssh", "-e", "worker-0@worker-1:0,2"), NULL, "node", 0, 2, 2, "1,3",
     NULL, "worker-1"},
    {HF, "worker-2", F("--no_ssh", "--num_gpus", "1"), NULL, "node", 2, 3, 1, "0", NULL,
     "worker-0"},
    {HF, "worker-1", F("--no_ssh", "--num_accelerators=2", "--num_nodes", "2"), NULL, "node", 1,
     2, 2, "0,1", NULL, "worker-0"},
    /* the head: world_info of the active hosts, the first as master */
    {HF, "login", NULL, NULL, "head", 0, 3, 1, NULL, "worker-0:0,1 worker-1:0,1,2,3 worker-2:0",
     "worker-0"},
    {HF, "login", F("-i", "worker-0:0,2@worker-1"), NULL, NULL, 0, 0, 0, NULL, NULL, NULL},
    {HF, "login", F("-i", "worker-1:0,2@worker-2", "--master_addr", "10.0.0.9"), NULL, "head", 0,
     2, 1, NULL, "worker-1:0,2 worker-2:0", "10.0.0.9"},
    {HF, "login", F("-e", "worker-1", "--num_nodes=1", "--force_multi"), NULL, NULL, 0, 0, 0,
     NULL, NULL, NULL},
    {HF, "login", F("--num_nodes", "2", "--num_gpus", "1"), NULL, "head", 0, 2, 1, NULL,
     "worker-0:0 worker-1:0", "worker-0"},
    {HF, "login", F("--num_nodes", "1", "--force_multi"), NULL, "head", 0, 1, 1, NULL,
     "worker-0:0,1", "worker-0"},
    /* one host left: it runs here when it is this machine, else the head starts it there */
    {HF, "worker-1", F("-i", "worker-1:1,3"), NULL, "node", 0, 1, 2, "1,3", NULL, "127.0.0.1"},
    {HF, "login", F("-i", "worker-1:1,3"), NULL, "head", 0, 1, 1, NULL, "worker-1:1,3",
     "worker-1"},
    {HF, "login", F("-i", "worker-2", "--local_addr", "10.0.0.7"), NULL, "head", 0, 1, 1, NULL,
     "worker-2:0", "worker-2"},
    /* --no_ssh --node_rank N: the Nth selected line, whatever this machine is called */
    {HF, "elsewhere", F("--no_ssh", "--node_rank", "2"), NULL, "node", 2, 3, 1, "0", NULL,
     "worker-0"},
    {HF, "elsewhere", F("--no_ssh", "-i", "worker-1:0,1@worker-2", "--node_rank=0"), NULL, "node",
     0, 2, 2, "0,1", NULL, "worker-1"},
    {HF, "worker-1", F("--no_ssh", "--node_rank", "0"), NULL, "node", 0, 3, 2, "0,1", NULL,
     "worker-0"},
    /* an agent the head started */
    {NULL, "h", F("--world_info=eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzAsIDJdfQ",
                  "--node_rank=1", "--master_addr=worker-0"), NULL, "node", 1, 2, 2, "0,2", NULL,
     "worker-0"},
    /* no hostfile: local resources, CUDA_VISIBLE_DEVICES as the pool */
    {NULL, "h", NULL, "2,3,5", "local", 0, 1, 3, "2,3,5", NULL, "127.0.0.1"},
    {NULL, "h", F("-i", "localhost:3"), "2,3,5", "local", 0, 1, 1, "3", NULL, "127.0.0.1"},
    {NULL, "h", F("--num_gpus", "2"), NULL, "local", 0, 1, 2, "0,1", NULL, "127.0.0.1"},
    {NULL, "h", NULL, NULL, "local", 0, 1, 1, NULL, NULL, "127.0.0.1"},
};

static void test_golden(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const struct row *w = &rows[i];
        if (!w->mode)
            continue;   /* the rows of the error table below */
        struct fake_file files[] = {{"/job/hostfile", w->file}, {NULL, NULL}};
        struct fake_machine m = {.files = w->file ? files : NULL, .hostname = w->me};
        char cvd[64];
        char *env[] = {cvd, NULL};
        snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%s", w->cvd ? w->cvd : "");
        struct cfg c;
        int r = load_ds(&c, w->cvd ? env : NULL, &m, w->flags);
        if (r)
            fprintf(stderr, "row %zu: %s\n", i, err);
        CHECK_EQ_INT(r, 0);
        CHECK_EQ_STR(MODES[c.ds_mode], w->mode);
        CHECK_EQ_INT(c.node_rank, w->node_rank);
        CHECK_EQ_INT(c.nnodes_max, w->nnodes);
        CHECK_EQ_INT(c.nproc_per_node, w->nproc);
        CHECK_EQ_STR(c.ds_devices ? c.ds_devices : "(unset)", w->devices ? w->devices : "(unset)");
        CHECK_EQ_STR(c.master_addr, w->master);
        if (w->world) {
            char t[512];
            world_text(c.ds_world_info, t, sizeof t);
            CHECK_EQ_STR(t, w->world);
        }
        cfg_free(&c);
    }
}

struct bad {
    const char *file;
    const char *me;
    const char *const *flags;
    const char *text;          /* in the one error line */
};

static const struct bad bads[] = {
    {"worker-0 slots=2\nworker-1 4\n", "worker-0", NULL,
     "Hostfile contains a bad entry: worker-1 4, unable to proceed with launching"},
    {"worker-0 slots=2\nworker-0 slots=4\n", "worker-0", NULL,
     "Hostfile contains multiple entries for worker-0, unable to proceed with launching"},
    {"# nothing\n\n", "worker-0", NULL,
     "Hostfile is empty or not formatted correctly, unable to proceed with launching."},
    {HF, "worker-0", F("-i", "worker-0", "-e", "worker-1"),
     "include_str and exclude_str are mutually exclusive."},
    {HF, "worker-0", F("-i", "worker-0", "--num_nodes", "1"),
     "Cannot specify num_nodes/gpus with include/exclude"},
    {HF, "worker-0", F("-e", "worker-1", "--num_gpus", "1"),
     "Cannot specify num_nodes/gpus with include/exclude"},
    {HF, "worker-0", F("-i", "worker-9"), "Hostname 'worker-9' not found in hostfile"},
    {HF, "worker-0", F("-i", "worker-2:3"), "No slot '3' specified on host 'worker-2'"},
    {HF, "worker-2", F("--no_ssh", "-e", "worker-2"), "worker-2"},
    {HF, "elsewhere", F("--no_ssh"), "elsewhere"},
    {HF, "elsewhere", F("--no_ssh", "--node_rank", "3"),
     "--node_rank 3 is not below the 3 hosts selected in /job/hostfile"},
    {"a slots=1\nb slots=0\n", "x", NULL, "/job/hostfile line 2: host b has slots=0"},
    {NULL, "h", F("--num_nodes", "2"), "Num nodes is >1 but no extra nodes available via hostfile"},
    {NULL, "h", F("-H", "/data/hostfile"), "cannot read hostfile /data/hostfile"},
    {NULL, "h", F("--launcher", "slurm"), "srun podrun deepspeed --no_ssh"},
    {NULL, "h", F("--launcher", "MPICH"), "--launcher mpich is not supported by podrun"},
    {NULL, "h", F("--launcher", "rsh"), "Unknown launcher; use pdsh"},
    {NULL, "h", F("--autotuning", "run"), "does not run DeepSpeed's Autotuner"},
    {NULL, "h", F("--elastic_training"), "--elastic_training needs --master_addr"},
    {NULL, "h", F("--world_info=!!!"), "--world_info: not base64"},
    {NULL, "h", F("--force_multi", "--world_info="), "--world_info is empty"},
    {HF, "login", F("--nnodes", "2"),
     "flag --nnodes: 2 nodes disagree with the 3 hosts that /job/hostfile selects"},
    {"elsewhere slots=1\n", "login", F("--nnodes", "1:3", "--num_gpus", "1"),
     "1:3 nodes disagree with the 1 host that /job/hostfile selects"},
    {HF, "login", F("--elastic_training", "--master_addr", "worker-0", "--min_elastic_nodes", "4",
                    "--max_elastic_nodes", "5"),
     "--min_elastic_nodes 4 is above the 3 hosts the hostfile selects"},
    {NULL, "h", F("--world_info="), "--world_info is empty"},
    {NULL, "h", F("--world_info=eyJhIjogWzBdfQ", "--node_rank=1"),
     "--node_rank 1 is not below the 1 hosts of --world_info"},
    {NULL, "h", F("--module", "--no_python"), "exclude each other"},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        const struct bad *b = &bads[i];
        struct fake_file files[] = {{"/job/hostfile", b->file}, {NULL, NULL}};
        struct fake_machine m = {.files = b->file ? files : NULL, .hostname = b->me};
        struct cfg c;
        int r = load_ds(&c, NULL, &m, b->flags);
        CHECK(r < 0);
        if (!strstr(err, b->text))
            fprintf(stderr, "bad %zu: \"%s\" lacks \"%s\"\n", i, err, b->text);
        CHECK(strstr(err, b->text) != NULL);
        CHECK(strchr(err, '\n') == NULL);
        cfg_free(&c);
    }
    /* the rows of the golden table that must fail: DeepSpeed's documented include keeps worker-1
     * (all of it) beside worker-0's slots, which here is a head job, not an error */
    struct fake_file files[] = {{"/job/hostfile", HF}, {NULL, NULL}};
    struct fake_machine m = {.files = files, .hostname = "login"};
    struct cfg c;
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("-i", "worker-0:0,1@worker-1")), 0);
    char t[512];
    world_text(c.ds_world_info, t, sizeof t);
    CHECK_EQ_STR(t, "worker-0:0,1 worker-1:0,1,2,3");
    cfg_free(&c);
}

/* Flags and their sources as --print-config shows them. */
static void test_sources(void)
{
    struct fake_file files[] = {{"/job/hostfile", HF}, {NULL, NULL}};
    struct fake_machine m = {.files = files, .hostname = "worker-1"};
    struct cfg c;
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--no_ssh", "--launcher", "PDSH", "--ssh_port", "2222",
                                        "--no_local_rank", "-q", "--save_pid",
                                        "--venv_script", "/v/activate", "--master_port", "1234",
                                        "--bind_cores_to_rank", "--bind_core_list", "1,3-5")),
                 0);
    CHECK_SETTING(&c, "ds-launcher", "pdsh", "flag --launcher");
    CHECK_SETTING(&c, "node-rank", "1", "hostfile /job/hostfile line 4 (DeepSpeed)");
    CHECK_SETTING(&c, "ds-devices", "0,1,2,3", "hostfile /job/hostfile");
    CHECK_EQ_INT(c.ds_ssh_port, 2222);
    CHECK(c.ds_no_local_rank && c.ds_quiet && c.ds_save_pid && c.ds_bind_cores);
    CHECK_EQ_STR(c.ds_venv_script, "/v/activate");
    CHECK_EQ_STR(c.ds_bind_core_list, "1,3-5");
    CHECK_EQ_INT(c.master_port, 1234);
    CHECK_SETTING(&c, "numa-binding", "cores", "flag --bind_cores_to_rank");
    CHECK_SETTING(&c, "bind-core-list", "1,3-5", "flag --bind_core_list");
    cfg_free(&c);
    /* --enable_each_rank_log DIR: DeepSpeed's per-rank files (jobenv), not podrun's
     * --log-dir layout; nothing on the console */
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--no_ssh", "--enable_each_rank_log", "/logs")), 0);
    CHECK(c.log_dir == NULL);
    CHECK_EQ_STR(c.ds_each_rank_log, "/logs");
    CHECK_EQ_STR(c.redirects, "3");
    cfg_free(&c);
    /* --elastic_training: a c10d job of min..max nodes at --master_addr */
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--no_ssh", "--elastic_training", "--master_addr",
                                        "worker-0", "--min_elastic_nodes", "2")), 0);
    CHECK_EQ_INT(c.nnodes_min, 2);
    CHECK_EQ_INT(c.nnodes_max, 3);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_C10D);
    CHECK_EQ_STR(c.rdzv_host, "worker-0");
    CHECK_EQ_INT(c.rdzv_port, 29500);
    cfg_free(&c);
}

/* DeepSpeed's core binding is podrun's --numa-binding cores over --bind-core-list, on the nodes
 * that run workers; the list alone means nothing (DeepSpeed reads it only with the flag). */
static void test_bind_cores(void)
{
    struct fake_file files[] = {{"/job/hostfile", HF}, {NULL, NULL}};
    struct fake_machine m = {.files = files, .hostname = "worker-1"};
    struct fake_machine none = {.hostname = "box"};
    struct cfg c;
    /* no hostfile: this machine's workers, the whole core list split among them */
    CHECK_EQ_INT(load_ds(&c, NULL, &none, F("--bind_cores_to_rank")), 0);
    CHECK_SETTING(&c, "numa-binding", "cores", "flag --bind_cores_to_rank");
    CHECK(c.bind_core_list == NULL);
    cfg_free(&c);
    /* an agent the head started: the flags it passed on */
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--world_info", "eyJ3b3JrZXItMCI6IFswLCAxXX0=",
                                        "--node_rank", "0", "--bind_cores_to_rank",
                                        "--bind_core_list", "0-3")), 0);
    CHECK_EQ_INT(c.numa_binding, CFG_NUMA_CORES);
    CHECK_EQ_STR(c.bind_core_list, "0-3");
    cfg_free(&c);
    /* the head runs no worker: nothing to bind there, its agents bind */
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--bind_cores_to_rank", "--bind_core_list", "0-3")), 0);
    CHECK_EQ_INT(c.ds_mode, CFG_DS_MODE_HEAD);
    CHECK_EQ_INT(c.numa_binding, CFG_NUMA_NONE);
    CHECK(c.bind_core_list == NULL);
    cfg_free(&c);
    /* --bind_core_list alone: ignored, as DeepSpeed does */
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--no_ssh", "--bind_core_list", "0-3")), 0);
    CHECK_EQ_INT(c.numa_binding, CFG_NUMA_NONE);
    CHECK(c.bind_core_list == NULL);
    cfg_free(&c);
    /* podrun's own --numa-binding of another mode contradicts it, in one line */
    CHECK_ERR(load_ds(&c, NULL, &m, F("--no_ssh", "--numa-binding", "socket",
                                     "--bind_cores_to_rank")),
              "--bind_cores_to_rank", "--numa-binding is socket (--numa-binding)");
    cfg_free(&c);
    CHECK_EQ_INT(load_ds(&c, NULL, &m, F("--no_ssh", "--numa-binding", "cores",
                                        "--bind_cores_to_rank")), 0);
    CHECK_EQ_INT(c.numa_binding, CFG_NUMA_CORES);
    cfg_free(&c);
}

/* Without a hostfile, count or CUDA_VISIBLE_DEVICES, the local run has a worker per GPU found,
 * as DeepSpeed's local resources are the device count; one where there is none. */
static void test_local_gpus(void)
{
    struct fake_machine none = {.hostname = "box"};
    struct cfg c;
    CHECK_EQ_INT(load_ds_gpus(&c, NULL, &none, NULL, 4), 0);
    CHECK_EQ_INT(c.ds_mode, CFG_DS_MODE_LOCAL);
    CHECK_EQ_INT(c.nproc_per_node, 4);
    CHECK_EQ_STR(c.src[CFG_NPROC_PER_NODE].name,
                 "this node's GPUs (deepspeed without a hostfile)");
    CHECK(c.ds_devices == NULL);
    cfg_free(&c);
    CHECK_EQ_INT(load_ds_gpus(&c, NULL, &none, NULL, 0), 0);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    cfg_free(&c);
    /* a count of the user's own wins */
    CHECK_EQ_INT(load_ds_gpus(&c, NULL, &none, F("--num_gpus", "2"), 4), 0);
    CHECK_EQ_INT(c.nproc_per_node, 2);
    CHECK_EQ_STR(c.ds_devices, "0,1");
    cfg_free(&c);
    CHECK_EQ_INT(load_ds_gpus(&c, NULL, &none, F("--nproc-per-node", "3"), 4), 0);
    CHECK_EQ_INT(c.nproc_per_node, 3);
    cfg_free(&c);
    char *cvd[] = {"CUDA_VISIBLE_DEVICES=1,3", NULL};
    CHECK_EQ_INT(load_ds_gpus(&c, cvd, &none, NULL, 4), 0);
    CHECK_EQ_INT(c.nproc_per_node, 2);
    cfg_free(&c);
    /* a hostfile's slots are the count, not this machine's GPUs; torchrun's words neither */
    struct fake_file files[] = {{"/job/hostfile", HF}, {NULL, NULL}};
    struct fake_machine m = {.files = files, .hostname = "worker-2"};
    CHECK_EQ_INT(load_ds_gpus(&c, NULL, &m, F("--no_ssh"), 4), 0);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    cfg_free(&c);
    CHECK_EQ_INT(load_pod(&c, NULL, &none, NULL), 0);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    cfg_free(&c);
}

/* What the head passes on to the hosts' agents: not its own words, values kept with their
 * flags. */
static void test_forward_options(void)
{
    char *argv[] = {"-H", "hf", "--include=a@b", "--master_port", "29501", "--no_local_rank",
                    "--launcher_args", "-R exec", "--max-restarts", "2", "-q", "--module",
                    "--enable_each_rank_log", "/l", "--python=/py", "--ssh_port", "22",
                    "--force_multi", "-m", "-Hother", "-iw-1", "-r3"};
    char **out;
    int n;
    int nargs = (int)(sizeof argv / sizeof *argv);
    CHECK_EQ_INT(deepspeed_cli_forward_options(argv, nargs, &out, &n), 0);
    const char *want[] = {"--no_local_rank", "--max-restarts", "2", "-q", "--module",
                          "--enable_each_rank_log", "/l", "--python=/py", "-m", "-r3"};
    CHECK_EQ_INT(n, (int)(sizeof want / sizeof *want));
    for (int i = 0; i < n && i < (int)(sizeof want / sizeof *want); i++)
        CHECK_EQ_STR(out[i], want[i]);
    CHECK(out[n] == NULL);
    free(out);
    /* words that are no flags, an empty one and a lone dash among them, pass as they are (on
     * the heap, so that ASan sees a read past their end) */
    char *empty = strdup(""), *dash = strdup("-"), *word = strdup("x");
    char *odd[] = {empty, "--no_local_rank", dash, word, "-H", "hf"};
    CHECK_EQ_INT(deepspeed_cli_forward_options(odd, 6, &out, &n), 0);
    CHECK_EQ_INT(n, 4);
    if (n == 4) {
        CHECK_EQ_STR(out[0], "");
        CHECK_EQ_STR(out[2], "-");
        CHECK_EQ_STR(out[3], "x");
    }
    free(out);
    free(empty);
    free(dash);
    free(word);
}

/* podrun's own words with the same hostfile are not a DeepSpeed job: torchrun's worker env. */
static void test_podrun_hostfile_is_not_deepspeed(void)
{
    struct fake_file files[] = {{"/job/hostfile", HF}, {NULL, NULL}};
    struct fake_machine m = {.files = files, .hostname = "worker-1"};
    struct cfg c;
    CHECK_EQ_INT(load_pod(&c, NULL, &m, F("--hostfile", "/job/hostfile")), 0);
    CHECK_EQ_INT(c.ds_mode, CFG_DS_MODE_OFF);
    CHECK_EQ_INT(c.node_rank, 1);
    CHECK(c.ds_devices == NULL);
    cfg_free(&c);
}

int main(void)
{
    RUN(test_podrun_hostfile_is_not_deepspeed);
    RUN(test_golden);
    RUN(test_errors);
    RUN(test_sources);
    RUN(test_bind_cores);
    RUN(test_local_gpus);
    RUN(test_forward_options);
    return check_result();
}
