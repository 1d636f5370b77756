/* tests/unit/launcher/frontends/test_torchrun.c — torchrun's vocabulary: its flags in both
 * spellings name the settings of the same name, PET_<NAME> for every setting with a PODRUN_<NAME>,
 * and the two variables of torchrun's agent below PET_. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/config/settings.h"
#include "launcher/frontends/frontend.h"

static char err[512];

static const struct fe_word *word(const char *spelling)
{
    for (size_t i = 0; i < torchrun_vocab.nflags; i++)
        if (!strcmp(torchrun_vocab.flags[i].spelling, spelling))
            return &torchrun_vocab.flags[i];
    return NULL;
}

/* "--nproc_per_node" and "--nproc-per-node" both, naming setting "nproc-per-node". */
static void test_flags_both_spellings(void)
{
    int long_words = 0;
    for (size_t i = 0; i < torchrun_vocab.nflags; i++) {
        const struct fe_word *w = &torchrun_vocab.flags[i];
        const struct cfg_setting *s = &cfg_settings[w->id];
        CHECK(!(s->flags & CFG_F_NO_FLAG));
        if (w->spelling[1] != '-') { /* -m -r -t: torchrun's short forms are podrun's */
            CHECK_EQ_INT(w->spelling[1], s->shortc);
            continue;
        }
        long_words++;
        /* torch 2.x's names for podrun's settings of other names */
        static const struct {
            const char *torch;
            enum cfg_id id;
        } renamed[] = {{"shutdown-timeout", CFG_TERM_TIMEOUT},
                       {"log-line-prefix-template", CFG_LOG_LINE_PREFIX}};
        char dash[64], under[72];
        snprintf(dash, sizeof dash, "%s", w->spelling + 2);
        for (char *p = dash; *p; p++)
            *p = *p == '_' ? '-' : *p;
        bool other_name = false;
        for (size_t k = 0; k < sizeof renamed / sizeof *renamed; k++)
            if (!strcmp(dash, renamed[k].torch)) {
                CHECK_EQ_INT(w->id, renamed[k].id);
                other_name = true;
            }
        if (other_name)
            continue;
        CHECK_EQ_STR(dash, s->name);
        snprintf(under, sizeof under, "--%s", dash);
        for (char *p = under + 2; *p; p++)
            *p = *p == '-' ? '_' : *p;
        CHECK(word(under) != NULL);   /* the other spelling is there too */
        snprintf(under, sizeof under, "--%s", dash);
        CHECK(word(under) != NULL);
    }
    CHECK(long_words >= 30);
    CHECK(word("--nproc_per_node") && word("--nproc_per_node")->id == CFG_NPROC_PER_NODE);
    /* torch 2.x's newer flags (the device ones are the device layer's) */
    CHECK(word("--logs_specs") && word("--logs-specs")->id == CFG_LOGS_SPECS);
    CHECK(word("--signals-to-handle") && word("--signals_to_handle")->id == CFG_SIGNALS_TO_HANDLE);
    CHECK(word("--duplicate_stderr_filters")->id == CFG_DUP_STDERR_FILTERS);
    CHECK(word("--event-log-handler")->id == CFG_EVENT_LOG_HANDLER);
    CHECK(word("--shutdown-timeout")->id == CFG_TERM_TIMEOUT);
    CHECK(word("--log_line_prefix_template") &&
          word("--log-line-prefix-template")->id == CFG_LOG_LINE_PREFIX);
    /* torch 2.9/2.10's */
    CHECK(word("--numa_binding") && word("--numa-binding")->id == CFG_NUMA_BINDING);
    CHECK(word("--virtual_local_rank") && word("--virtual-local-rank")->id ==
          CFG_VIRTUAL_LOCAL_RANK);
    struct cfg c;
    cfg_init(&c);
    char a0[] = "torchrun", a1[] = "--numa_binding", a2[] = "socket", a3[] = "--virtual-local-rank",
         a4[] = "train.py";
    char *argv[] = {a0, a1, a2, a3, a4, NULL};
    CHECK_EQ_INT(frontend_parse_args(&fe_torchrun, &c, 5, argv, err, sizeof err), 0);
    CHECK_EQ_INT(c.numa_binding, CFG_NUMA_SOCKET);
    CHECK_EQ_STR(c.src[CFG_NUMA_BINDING].name, "--numa_binding");
    CHECK(c.virtual_local_rank);
    cfg_free(&c);
}

/* torch 2.x's variables: TORCHELASTIC_SIGNALS_TO_HANDLE, TORCH_ELASTIC_SHUTDOWN_TIMEOUT below
 * PET_SHUTDOWN_TIMEOUT, and a flag over both. */
static void test_torch2_variables(void)
{
    struct cfg c;
    cfg_init(&c);
    char *env[] = {"TORCHELASTIC_SIGNALS_TO_HANDLE=SIGTERM,SIGUSR1",
                   "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=40", "PET_SHUTDOWN_TIMEOUT=50", NULL};
    CHECK_EQ_INT(vocab_load_env(&torchrun_vocab, &c, env, err, sizeof err), 0);
    CHECK_EQ_STR(c.signals_to_handle, "SIGTERM,SIGUSR1");
    CHECK_EQ_STR(c.src[CFG_SIGNALS_TO_HANDLE].name, "TORCHELASTIC_SIGNALS_TO_HANDLE");
    CHECK_EQ_INT(c.term_timeout_ms, 50000);
    CHECK_EQ_STR(c.src[CFG_TERM_TIMEOUT].name, "PET_SHUTDOWN_TIMEOUT");
    char *argv[] = {"torchrun", "--shutdown_timeout", "60", "--signals-to-handle", "SIGHUP",
                    "--duplicate-stdout-filters", "loss,,x,acc", "p", NULL};
    CHECK_EQ_INT(frontend_parse_args(&fe_torchrun, &c, 8, argv, err, sizeof err), 0);
    CHECK_EQ_INT(c.term_timeout_ms, 60000);
    CHECK_EQ_STR(c.src[CFG_TERM_TIMEOUT].name, "--shutdown_timeout");
    CHECK_EQ_STR(c.signals_to_handle, "SIGHUP");
    CHECK_EQ_STR(c.dup_filters[0], "loss,,x,acc");
    cfg_free(&c);
    /* a bad signal name is the flag's error */
    cfg_init(&c);
    char *bad[] = {"torchrun", "--signals-to-handle", "SIGTERM,SIGFOO", "p", NULL};
    CHECK_EQ_INT(frontend_parse_args(&fe_torchrun, &c, 4, bad, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "--signals-to-handle 'SIGTERM,SIGFOO'") && strstr(err, "'SIGFOO'"));
    cfg_free(&c);
}

static void test_pet_and_agent_variables(void)
{
    struct cfg c;
    cfg_init(&c);
    char *env[] = {"PYTHON_EXEC=/opt/py", "PET_PYTHON=/pet/py", "PET_HANG_TIMEOUT=3",
                   "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[${local_rank}]", "PET_TMPDIR=/x",
                   NULL};
    CHECK_EQ_INT(vocab_load_env(&torchrun_vocab, &c, env, err, sizeof err), 0);
    CHECK_EQ_STR(c.python, "/pet/py");            /* PET_ over the agent's variable */
    CHECK_EQ_STR(c.src[CFG_PYTHON].name, "PET_PYTHON");
    CHECK_EQ_INT(c.hang_timeout_ms, 3000);        /* the rule reaches podrun's own settings */
    CHECK_EQ_STR(c.log_line_prefix, "[${local_rank}]");
    CHECK_EQ_INT(c.src[CFG_LOG_LINE_PREFIX].kind, CFG_SRC_PET);
    CHECK_EQ_STR(c.tmpdir, "/tmp");               /* TMPDIR has no PODRUN_ twin, so no PET_ */
    /* podrun's own environment outranks torchrun's */
    char *own[] = {"PODRUN_PYTHON=/own/py", NULL};
    CHECK_EQ_INT(cfg_load_env(&c, own, err, sizeof err), 0);
    CHECK_EQ_STR(c.python, "/own/py");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_flags_both_spellings);
    RUN(test_pet_and_agent_variables);
    RUN(test_torch2_variables);
    return check_result();
}
