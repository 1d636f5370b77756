/* tests/unit/launcher/frontends/test_accelerate_cli.c — accelerate launch's vocabulary: the verb,
 * both spellings, accelerate's rule for config file against command line (its quirk included),
 * where each value says it came from, and what is refused. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/config/settings.h"
#include "launcher/discover/host.h"
#include "launcher/frontends/frontend.h"

static char err[512];
static const char *file_text;

/* The machine: the config file at the paths accelerate looks at, nothing else. */
static int reader(const struct discover_host *h, const char *path, size_t max, char **text,
                  size_t *len)
{
    (void)h, (void)max;
    static const char *const served[] = {"/c.yaml", "/hf/accelerate/default_config.yaml",
                                         "/h/.cache/huggingface/accelerate/default_config.yaml"};
    bool ok = false;
    for (size_t i = 0; i < 3; i++)
        ok |= !strcmp(path, served[i]);
    if (!file_text || !ok)
        return -ENOENT;
    *text = strdup(file_text);
    *len = strlen(file_text);
    return 0;
}

static int no_dir(const struct discover_host *h, const char *path, char ***names, size_t *count)
{
    (void)h, (void)path, (void)names, (void)count;
    return -ENOENT;
}

static int no_self(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out)
{
    (void)h, (void)with_fqdn, (void)out;
    return -ENOENT;
}

/* Loads `podrun accelerate launch ARGS` (space-separated) with the file /c.yaml = yaml. */
static int load(struct cfg *c, const char *args, const char *yaml, char *const *envp)
{
    static char buf[1024];
    char *argv[64];
    int argc = 0;
    argv[argc++] = "accelerate";
    argv[argc++] = "launch";
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    file_text = yaml;
    const struct discover_host host = {reader, no_dir, no_self, NULL};
    char *none[] = {NULL};
    cfg_init(c);
    int r = frontend_load_host(&fe_accelerate, c, argc, argv, envp ? envp : none, &host, err,
                               sizeof err);
    return r ? r : cfg_finalize(c, 2, 0, err, sizeof err);
}

static void test_verb_and_spellings(void)
{
    struct cfg c;
    CHECK_EQ_INT(load(&c, "--num-processes 4 --num_machines=2 --machine-rank 1 "
                          "--main_process_ip 10.0.0.1 --multi-gpu t.py", NULL, NULL), 0);
    CHECK_EQ_INT(c.nproc_per_node, 2);
    CHECK_EQ_STR(c.src[CFG_NPROC_PER_NODE].name, "--num-processes");
    CHECK_EQ_INT(c.nnodes_max, 2);
    CHECK_EQ_INT(c.node_rank, 1);
    CHECK_EQ_STR(c.rdzv_host, "10.0.0.1");
    CHECK_EQ_INT(c.rdzv_port, 29500);
    CHECK_EQ_INT(c.worker_env, CFG_WORKER_ENV_ACCELERATE);
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_MULTI_GPU), "True");
    cfg_free(&c);
    /* another verb than launch is not podrun's */
    char *argv[] = {"accelerate", "config", NULL}, *none[] = {NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_load(&fe_accelerate, &c, 2, argv, none, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "'accelerate launch' only") && strstr(err, "'config'"));
    cfg_free(&c);
    /* same_network: the main address becomes MASTER_ADDR, the rendezvous static's */
    CHECK_EQ_INT(load(&c, "--num_processes 2 --num_machines 2 --machine_rank 0 "
                          "--main_process_ip 10.0.0.9 --main_process_port 7000 --same_network "
                          "t.py", NULL, NULL), 0);
    CHECK_EQ_STR(c.master_addr, "10.0.0.9");
    CHECK_EQ_INT(c.master_port, 7000);
    CHECK_EQ_STR(c.src[CFG_MASTER_PORT].name, "--main_process_port");
    cfg_free(&c);
    /* one machine: --main_process_port 0 is a free port */
    CHECK_EQ_INT(load(&c, "--main_process_port 0 t.py", NULL, NULL), 0);
    CHECK(c.rdzv_port_given && c.rdzv_port == 0);
    cfg_free(&c);
}

/* The file's plain keys fill what the command line left at None; flags whose default is not
 * None never take the file's value; section keys win unless their flag was given. */
static void test_config_rule(void)
{
    static const char yaml[] =
        "distributed_type: MULTI_GPU\nnum_processes: 8\nnum_machines: 2\nmachine_rank: 1\n"
        "main_process_ip: 10.1.1.1\nsame_network: true\nrdzv_backend: c10d\n"
        "enable_cpu_affinity: true\nmixed_precision: bf16\n"
        "dynamo_config:\n  dynamo_backend: INDUCTOR\n  dynamo_mode: max-autotune\n";
    struct cfg c;
    CHECK_EQ_INT(load(&c, "--config_file /c.yaml --num_processes 4 --dynamo_mode default t.py",
                      yaml, NULL), 0);
    CHECK_EQ_INT(c.nproc_per_node, 2);                  /* the flag's 4 over the file's 8 */
    CHECK_EQ_STR(c.src[CFG_NNODES].name, "c.yaml:num_machines");
    CHECK_EQ_INT(c.src[CFG_NNODES].kind, CFG_SRC_FILE);
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_MULTI_GPU), "True");
    CHECK_EQ_STR(c.src[CFG_ACC_MULTI_GPU].name, "c.yaml:distributed_type");
    /* the quirk: same_network, rdzv_backend, enable_cpu_affinity of the file do nothing */
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_SAME_NETWORK), "False");
    CHECK_EQ_INT(c.rdzv_backend, CFG_BACKEND_STATIC);
    CHECK_EQ_STR(c.rdzv_host, "10.1.1.1");              /* not MASTER_ADDR: not same_network */
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_CPU_AFFINITY), "False");
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_MIXED_PRECISION), "bf16");
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_DYNAMO_BACKEND), "INDUCTOR");
    CHECK_EQ_STR(c.src[CFG_ACC_DYNAMO_BACKEND].name, "c.yaml:dynamo_config.dynamo_backend");
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_DYNAMO_MODE), "default");   /* the flag was given */
    CHECK_EQ_STR(cfg_acc(&c, CFG_ACC_GPU_IDS), "all");
    cfg_free(&c);
    /* the default file ($HF_HOME/accelerate/default_config.yaml), kept out by --cpu */
    char *env[] = {"HF_HOME=/hf", NULL};
    static const char def[] = "distributed_type: MULTI_GPU\nnum_processes: 6\n";
    CHECK_EQ_INT(load(&c, "t.py", def, env), 0);
    CHECK_EQ_INT(c.nproc_per_node, 6);
    CHECK_EQ_STR(c.src[CFG_NPROC_PER_NODE].name, "default_config.yaml:num_processes");
    cfg_free(&c);
    CHECK_EQ_INT(load(&c, "--cpu t.py", def, env), 0);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    cfg_free(&c);
    /* without HF_HOME and XDG_CACHE_HOME: ~/.cache/huggingface, ~ being HOME */
    char *home[] = {"HOME=/h", NULL};
    CHECK_EQ_INT(load(&c, "t.py", def, home), 0);
    CHECK_EQ_INT(c.nproc_per_node, 6);
    cfg_free(&c);
    /* a file that is not there, given: one line naming it */
    CHECK_EQ_INT(load(&c, "--config_file /nope.yaml t.py", NULL, NULL), -EINVAL);
    CHECK(strstr(err, "--config_file /nope.yaml: no such file") && !strchr(err, '\n'));
    cfg_free(&c);
}

static void test_refused_and_bad(void)
{
    static const struct {
        const char *args, *needle;
    } cases[] = {
        {"--tpu t.py", "--tpu: podrun does not launch TPU"},
        {"--vm a t.py", "--vm: podrun does not launch TPU"},
        {"--megatron_lm_tp_degree 2 t.py", "--megatron_lm_tp_degree: podrun does not launch "
                                           "Megatron"},
        {"--aws-access-key-id x t.py", "--aws-access-key-id: podrun does not launch SageMaker"},
        {"--mpirun_hostfile h t.py", "mpirun"},
        {"--fp8_backend te t.py", "FP8"},
        {"--mixed_precision fp32 t.py", "--mixed_precision 'fp32': expected one of no, fp16"},
        {"--num_processes two t.py", "--num_processes 'two': expected a whole number"},
        {"--cpu --multi_gpu t.py", "You can only use one of"},
        {"--multi_gpu --num_processes 1 t.py", "at least 2 processes"},
        {"-m --no_python x t.py", "exclude each other"},
        {"--dynamo_backend bogus t.py", "expected one of no, eager"},
        {"--bogus t.py", "unknown option '--bogus'; see accelerate launch --help"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cfg c;
        err[0] = '\0';
        CHECK_EQ_INT(load(&c, cases[i].args, NULL, NULL), -EINVAL);
        if (!strstr(err, cases[i].needle))
            fprintf(stderr, "case %zu: '%s'\n", i, err);
        CHECK(strstr(err, cases[i].needle) != NULL && !strchr(err, '\n'));
        cfg_free(&c);
    }
}

int main(void)
{
    RUN(test_verb_and_spellings);
    RUN(test_config_rule);
    RUN(test_refused_and_bad);
    return check_result();
}
