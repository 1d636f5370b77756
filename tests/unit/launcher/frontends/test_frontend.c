/* tests/unit/launcher/frontends/test_frontend.c — a job's configuration from the environment and
 * the command line through podrun's front-end: the layers, both flag spellings, the program,
 * bad input named in one line; and the vocabulary interface (a label, a transform). */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/frontends/frontend.h"

static char err[512];

/* cfg keeps pointers into argv (the program): keep a copy that outlives the caller's block */
static char *argv_store[32];

static int parse(struct cfg *c, char **envp, int argc, char **argv_in)
{
    char **argv = argv_store;
    for (int i = 0; i < argc && i < 31; i++)
        argv[i] = argv_in[i];
    argv[argc < 31 ? argc : 31] = NULL;
    cfg_init(c);
    int r = frontend_load(&fe_podrun, c, argc, argv, envp, err, sizeof err);
    if (!r)
        r = cfg_finalize(c, 4, 0, err, sizeof err);
    return r;
}

#define ARGV(...) (char *[]){"podrun", __VA_ARGS__, NULL}
#define ARGC(...) ((int)(sizeof((char *[]){"podrun", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(c, envp, ...) parse(c, envp, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

/* Nothing in the environment, no option: every value stays its default; the program is taken. */
static void test_nothing_given(void)
{
    struct cfg c;
    CHECK_EQ_INT(PARSE(&c, NULL, "prog"), 0);
    for (int i = 0; i < CFG__COUNT; i++)
        if (i != CFG_RDZV_ENDPOINT) /* derived by cfg_finalize */
            CHECK_EQ_INT(c.src[i].kind, CFG_SRC_DEFAULT);
    CHECK_EQ_INT(c.program_argc, 1);
    CHECK_EQ_STR(c.program[0], "prog");
    cfg_free(&c);
}

static void test_layers(void)
{
    struct cfg c;
    char *env[] = {"PET_NPROC_PER_NODE=2", "PODRUN_MASTER_PORT=1000", "PET_MASTER_PORT=999",
                   "PET_ROLE=", "PYTHON_EXEC=/opt/py", NULL};
    CHECK_EQ_INT(PARSE(&c, env, "--master_port", "2000", "prog"), 0);
    CHECK_EQ_INT(c.nproc_per_node, 2);
    CHECK_EQ_INT(c.src[CFG_NPROC_PER_NODE].kind, CFG_SRC_PET);
    CHECK_EQ_STR(c.src[CFG_NPROC_PER_NODE].name, "PET_NPROC_PER_NODE");
    CHECK_EQ_INT(c.master_port, 2000);
    CHECK_EQ_INT(c.src[CFG_MASTER_PORT].kind, CFG_SRC_FLAG);
    CHECK_EQ_STR(c.src[CFG_MASTER_PORT].name, "--master_port");
    CHECK_EQ_STR(c.role, "default");               /* empty env is unset */
    CHECK_EQ_STR(c.python, "/opt/py");
    CHECK_EQ_STR(c.src[CFG_PYTHON].name, "PYTHON_EXEC");
    cfg_free(&c);

    char *env2[] = {"PET_MASTER_PORT=999", "PODRUN_MASTER_PORT=1000", NULL};
    CHECK_EQ_INT(PARSE(&c, env2, "prog"), 0);
    CHECK_EQ_INT(c.master_port, 1000);                /* PODRUN_ beats PET_ */
    CHECK_EQ_STR(c.src[CFG_MASTER_PORT].name, "PODRUN_MASTER_PORT");
    cfg_free(&c);
}

static void test_spellings_and_forms(void)
{
    struct cfg c;
    CHECK_EQ_INT(PARSE(&c, NULL, "--nproc_per_node=3", "--max-restarts", "2", "--log_dir=/x",
                       "-r3", "-t", "0:1", "--local-ranks-filter", "0,2", "--", "-prog", "-a"),
                 0);
    CHECK_EQ_INT(c.nproc_per_node, 3);
    CHECK_EQ_INT(c.max_restarts, 2);
    CHECK_EQ_STR(c.log_dir, "/x");
    CHECK_EQ_INT(c.redirect_mask[0], 3);
    CHECK_EQ_INT(c.redirect_mask[2], 3);
    CHECK_EQ_INT(c.tee_mask[0], 1);
    CHECK_EQ_INT(c.tee_mask[1], 0);
    CHECK(c.console_rank[0] && !c.console_rank[1] && c.console_rank[2]);
    CHECK_EQ_STR(c.program[0], "-prog");
    CHECK_EQ_INT(c.program_argc, 2);
    cfg_free(&c);
    /* options end at the first non-option: the program's own flags are its own */
    CHECK_EQ_INT(PARSE(&c, NULL, "-m", "pkg.mod", "--nproc-per-node", "9"), 0);
    CHECK(c.module);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    CHECK_EQ_INT(c.program_argc, 3);
    cfg_free(&c);
}

static void test_multinode_flags(void)
{
    struct cfg c;
    CHECK_EQ_INT(PARSE(&c, NULL, "--nnodes", "2:4", "--node_rank", "3", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", "node0", "--rdzv-id", "j", "--local-addr", "10.0.0.2",
                       "--rdzv-conf", "join_timeout=5,last_call_timeout=500ms,is_host=0,"
                       "keep_alive_interval=2,keep_alive_max_attempt=5,close_timeout=1m",
                       "prog"),
                 0);
    CHECK_EQ_INT(c.nnodes_min, 2);
    CHECK_EQ_INT(c.nnodes_max, 4);
    CHECK_EQ_INT(c.node_rank, 3);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_C10D);
    CHECK_EQ_STR(c.rdzv_host, "node0");
    CHECK_EQ_INT(c.rdzv_port, CFG_DEFAULT_C10D_PORT);
    CHECK_EQ_STR(c.local_addr, "10.0.0.2");
    CHECK_EQ_INT(c.join_timeout_ms, 5000);
    CHECK_EQ_INT(c.last_call_timeout_ms, 500);
    CHECK_EQ_INT(c.close_timeout_ms, 60000);
    CHECK_EQ_INT(c.keep_alive_interval_ms, 2000);
    CHECK_EQ_INT(c.keep_alive_max_attempt, 5);
    CHECK_EQ_INT(c.is_host, 0);
    CHECK_EQ_INT(c.src[CFG_JOIN_TIMEOUT].kind, CFG_SRC_FLAG);
    CHECK_EQ_INT(c.src[CFG_READ_TIMEOUT].kind, CFG_SRC_DEFAULT);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-endpoint", "[::1]:1234", "--rdzv-backend=c10d", "p"), 0);
    CHECK_EQ_STR(c.rdzv_host, "::1");
    CHECK_EQ_INT(c.rdzv_port, 1234);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--standalone", "p"), 0);
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_C10D);
    CHECK_EQ_INT(c.src[CFG_RDZV_BACKEND].kind, CFG_SRC_DERIVED);
    cfg_free(&c);
}

static void test_nproc_kinds(void)
{
    struct cfg c;
    CHECK_EQ_INT(PARSE(&c, NULL, "--nproc-per-node", "auto", "p"), 0);
    CHECK_EQ_INT(c.nproc_per_node, 4);   /* no GPU: CPUs */
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--nproc-per-node", "cpu", "p"), 0);
    CHECK_EQ_INT(c.nproc_per_node, 4);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--nproc-per-node", "gpu", "p"), -22);
    CHECK(strstr(err, "no GPU found") != NULL);
    cfg_free(&c);
    cfg_init(&c);
    /* the config keeps pointers into argv: the array must outlive cfg_finalize */
    char **gpu_argv = ARGV("--nproc-per-node", "gpu", "p");
    CHECK_EQ_INT(frontend_parse_args(&fe_podrun, &c, 4, gpu_argv, err, sizeof err), 0);
    CHECK_EQ_INT(cfg_finalize(&c, 4, 8, err, sizeof err), 0);
    CHECK_EQ_INT(c.nproc_per_node, 8);
    cfg_free(&c);
}

struct bad {
    const char *args[10];
    const char *env;
    const char *needle;
};

/* An explicit port 0 is a free port (torchrun's --standalone uses it); no port is the default. */
static void test_endpoint_port_zero(void)
{
    struct cfg c;
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-backend=c10d", "--rdzv-endpoint", "localhost:0", "p"), 0);
    CHECK_EQ_INT(c.rdzv_port, 0);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-backend=c10d", "--rdzv-endpoint", "[::1]:0", "p"), 0);
    CHECK_EQ_INT(c.rdzv_port, 0);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-backend=c10d", "--nnodes", "2", "--rdzv-endpoint", "h:0",
                       "--rdzv-conf", "is_host=1", "p"), 0);
    CHECK_EQ_INT(c.rdzv_port, 0);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-backend=c10d", "--rdzv-endpoint", "[::1]", "p"), 0);
    CHECK_EQ_INT(c.rdzv_port, CFG_DEFAULT_C10D_PORT);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--local-ranks-filter", "1,3", "--nproc-per-node", "4", "p"), 0);
    CHECK(!c.console_rank[0] && c.console_rank[1] && !c.console_rank[2] && c.console_rank[3]);
    cfg_free(&c);
}

/* `timeout` is torchrun's static rendezvous wait; join_timeout given wins. */
static void test_static_timeout(void)
{
    struct cfg c;
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-conf", "timeout=7", "p"), 0);
    CHECK_EQ_INT(c.join_timeout_ms, 7000);
    CHECK_EQ_INT(c.src[CFG_JOIN_TIMEOUT].kind, CFG_SRC_DERIVED);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-conf", "timeout=7,join_timeout=3", "p"), 0);
    CHECK_EQ_INT(c.join_timeout_ms, 3000);
    cfg_free(&c);
    CHECK_EQ_INT(PARSE(&c, NULL, "--rdzv-backend=c10d", "--rdzv-conf", "timeout=7", "p"), 0);
    CHECK_EQ_INT(c.join_timeout_ms, 600000);
    cfg_free(&c);
}

static void test_errors_name_input(void)
{
    static const struct bad bad[] = {
        {{"--nproc-per-node", "x", "p"}, NULL, "--nproc-per-node 'x'"},
        {{"--nnodes", "4:2", "p"}, NULL, "MIN is larger than MAX"},
        {{"--rdzv-conf", "join_timeout=1,weird=2", "p"}, NULL, "unknown key 'weird'"},
        {{"--rdzv-conf", "keep_alive_max_attempt=0", "p"}, NULL, "keep_alive_max_attempt=0"},
        {{"--master-port", "0", "p"}, NULL, "--master-port '0'"},
        {{"--term-timeout", "1y", "p"}, NULL, "--term-timeout '1y'"},
        {{"--frobnicate", "p"}, NULL, "unknown option '--frobnicate'"},
        {{"--role"}, NULL, "option --role needs a value"},
        {{"--role", "", "p"}, NULL, "--role '': must not be empty"},
        {{"p"}, "PODRUN_NNODES=0", "PODRUN_NNODES='0'"},
        {{"p"}, "PET_STANDALONE=perhaps", "PET_STANDALONE='perhaps'"},
        {{"-m", "--run-path", "p"}, NULL, "--run-path and --module"},
        {{"--rdzv-backend", "c10d", "--nnodes", "2", "p"}, NULL, "needs --rdzv-endpoint"},
        {{"--tee", "1:1", "p"}, NULL, "local rank 1 is not below --nproc-per-node 1"},
        {{"--nproc-per-node", "2000", "p"}, NULL, "from 1 to 1024"},
        {{NULL}, NULL, "no program to run"},
        {{""}, NULL, "the program name is empty"},
        {{"--", ""}, NULL, "the program name is empty"},
        {{"--rdzv-backend", "c10d", "--nnodes", "2", "--rdzv-endpoint", "h:0", "p"}, NULL,
         "--rdzv-endpoint h:0"},
        {{"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "h:0", "p"}, NULL,
         "--rdzv-endpoint h:0"},
        {{"--local-ranks-filter", "0,3", "--nproc-per-node", "2", "p"}, NULL,
         "local rank 3 is not below --nproc-per-node 2"},
        {{"--local-ranks-filter", "0,", "p"}, NULL, "--local-ranks-filter '0,'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cfg c;
        char *argv[12] = {"podrun"};
        int argc = 1;
        for (int k = 0; bad[i].args[k]; k++)
            argv[argc++] = (char *)bad[i].args[k];
        char *env[] = {(char *)bad[i].env, NULL};
        err[0] = 0;
        int r = parse(&c, env, argc, argv);
        CHECK_EQ_INT(r, -22);
        if (!strstr(err, bad[i].needle))
            fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, err, bad[i].needle);
        CHECK(strstr(err, bad[i].needle) != NULL);
        CHECK(strchr(err, '\n') == NULL);
        cfg_free(&c);
    }
}

static void test_help_stops_parsing(void)
{
    struct cfg c;
    cfg_init(&c);
    char **help_argv = ARGV("--help", "--bogus");
    CHECK_EQ_INT(frontend_parse_args(&fe_podrun, &c, 3, help_argv, err, sizeof err), 0);
    CHECK(c.help);
    cfg_free(&c);
}

static void test_program_name_picks_the_frontend(void)
{
    CHECK(frontend_for_program("/usr/local/bin/torchrun") == &fe_torchrun);
    CHECK(frontend_for_program("torchrun") == &fe_torchrun);
    CHECK(frontend_for_program("/usr/local/bin/podrun") == &fe_podrun);
    CHECK(frontend_for_program("torchrun.sh") == &fe_podrun);
    CHECK(frontend_for_program(NULL) == &fe_podrun);
}

/* A scheduler's words as an operator adapter would have them: a label, a transform. */
static int strip_worker(const char *in, char *out, size_t cap, char *e, size_t elen)
{
    const char *dash = strrchr(in, '-');
    if (!dash || strncmp(in, "job-worker-", 11)) {
        snprintf(e, elen, "VC_TASK_INDEX='%s': expected job-worker-N", in);
        return -EINVAL;
    }
    snprintf(out, cap, "%s", dash + 1);
    return 0;
}

static int finalize_calls;
static int count_finalize(struct cfg *c, char *e, size_t elen)
{
    (void)e, (void)elen;
    finalize_calls++;
    /* the hook runs after the command line: it sees the flag's value */
    CHECK_EQ_INT(c->nnodes_max, 8);
    return 0;
}

static const struct fe_word volcano_env[] = {{"VC_TASK_INDEX", CFG_NODE_RANK, strip_worker},
                                             {"VC_WORKER_NUM", CFG_NNODES, NULL}};
static const struct vocab volcano = {
    .name = "Volcano", .label = "Volcano", .env_rank = CFG_SRC_OPERATOR, .env = volcano_env,
    .nenv = 2, .finalize = count_finalize,
};

static void test_operator_vocabulary(void)
{
    struct cfg c;
    cfg_init(&c);
    /* podrun's own Volcano adapter (launcher/operators) is switched off: this vocabulary is a
     * test's, with its own spelling of the index */
    char *env[] = {"VC_TASK_INDEX=job-worker-3", "VC_WORKER_NUM=4", "PET_NNODES=6",
                   "PODRUN_DISCOVERY=none", NULL};
    /* torchrun's PET_ applied first: the operator's lower rank still does not override it */
    CHECK_EQ_INT(vocab_load_env(&torchrun_vocab, &c, env, err, sizeof err), 0);
    CHECK_EQ_INT(vocab_load_env(&volcano, &c, env, err, sizeof err), 0);
    CHECK_EQ_INT(c.node_rank, 3);
    CHECK_EQ_INT(c.src[CFG_NODE_RANK].kind, CFG_SRC_OPERATOR);
    CHECK_EQ_STR(c.src[CFG_NODE_RANK].name, "VC_TASK_INDEX (Volcano)");
    CHECK_EQ_INT(c.nnodes_max, 6);
    CHECK_EQ_STR(c.src[CFG_NNODES].name, "PET_NNODES");
    char line[160];
    cfg_src_describe(&c.src[CFG_NODE_RANK], line, sizeof line);
    CHECK_EQ_STR(line, "env VC_TASK_INDEX (Volcano)");
    cfg_free(&c);
    /* a transform's error is the input's error */
    cfg_init(&c);
    char *bad[] = {"VC_TASK_INDEX=3", NULL};
    CHECK_EQ_INT(vocab_load_env(&volcano, &c, bad, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "VC_TASK_INDEX='3'") != NULL);
    cfg_free(&c);
    /* a front-end's finalize hook runs once every layer is in */
    const struct frontend fe = {"volcano-test", &volcano, NULL, NULL, NULL, NULL};
    cfg_init(&c);
    char **argv = ARGV("--nnodes", "8", "p");
    CHECK_EQ_INT(frontend_load(&fe, &c, 4, argv, env, err, sizeof err), 0);
    CHECK_EQ_INT(finalize_calls, 1);
    CHECK_EQ_STR(c.src[CFG_NNODES].name, "--nnodes");
    cfg_free(&c);
}

/* argparse's abbreviations in every front-end: a unique prefix of a long option is that
 * option, a full spelling wins over longer ones it begins, several options are refused with
 * argparse's line, and nothing after the program is matched. */
static void test_abbreviations(void)
{
    struct cfg c;
    char *a1[] = {"torchrun", "--nproc_per", "3", "--max_rest=2", "p", "--nproc", "x", NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_load(&fe_torchrun, &c, 7, a1, NULL, err, sizeof err), 0);
    CHECK_EQ_INT(c.nproc_per_node, 3);
    CHECK_EQ_STR(c.src[CFG_NPROC_PER_NODE].name, "--nproc_per");
    CHECK_EQ_INT(c.max_restarts, 2);
    CHECK_EQ_INT(c.program_argc, 3);
    CHECK_EQ_STR(c.program_argc == 3 ? c.program[1] : NULL, "--nproc");
    cfg_free(&c);
    /* DeepSpeed's own test: --launcher_arg is --launcher_args; --launcher is a full spelling */
    char *a2[] = {"deepspeed", "--launcher_arg", "-R exec", "--launcher", "pdsh", "p", NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_parse_args(&fe_deepspeed, &c, 6, a2, err, sizeof err), 0);
    CHECK_EQ_STR(c.ds_launcher_args, "-R exec");
    cfg_free(&c);
    char *a3[] = {"deepspeed", "--launch", "pdsh", "p", NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_parse_args(&fe_deepspeed, &c, 4, a3, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "ambiguous option: --launch could match --launcher, --launcher_args");
    cfg_free(&c);
    char *a4[] = {"accelerate", "launch", "--num_proc", "2", "p", NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_parse_args(&fe_accelerate, &c, 5, a4, err, sizeof err), 0);
    CHECK_EQ_STR(c.src[CFG_ACC_NUM_PROCESSES].name, "--num_proc");
    cfg_free(&c);
    /* podrun's own flags too, '_' or '-' */
    CHECK_EQ_INT(PARSE(&c, NULL, "--print_conf", "p"), 0);
    CHECK(c.print_config);
    cfg_free(&c);
}

int main(void)
{
    RUN(test_abbreviations);
    RUN(test_program_name_picks_the_frontend);
    RUN(test_operator_vocabulary);
    RUN(test_nothing_given);
    RUN(test_layers);
    RUN(test_spellings_and_forms);
    RUN(test_multinode_flags);
    RUN(test_nproc_kinds);
    RUN(test_errors_name_input);
    RUN(test_endpoint_port_zero);
    RUN(test_static_timeout);
    RUN(test_help_stops_parsing);
    return check_result();
}
