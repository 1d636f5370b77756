/* launcher/frontends/frontend.c — words from the environment and the command line into cfg_set
 * (see frontend.h). */
#include "launcher/frontends/frontend.h"

#include <errno.h>
#include <string.h>

#include "launcher/config/settings.h"
#include "launcher/config/values.h"
#include "launcher/env/environ.h"
#include "launcher/operators/operators.h"
#include "rdzv/base/common.h"

/* podrun's own front-end: its own words, and torchrun's, since podrun is a drop-in for it. */
const struct frontend fe_podrun = {"podrun", &torchrun_vocab, NULL, NULL, NULL, NULL};

/* The front-ends podrun answers to by program name (a link named torchrun, accelerate,
 * paddle-launch, deepspeed) or as `podrun <command>`. */
static const struct frontend *const frontends[] = {&fe_torchrun, &fe_accelerate, &fe_paddle,
                                                   &fe_deepspeed};
#define NFRONTENDS (sizeof frontends / sizeof *frontends)

/* One line about a bad input into err, and -EINVAL. */
#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

const struct frontend *frontend_for_program(const char *argv0)
{
    const char *base = argv0 ? strrchr(argv0, '/') : NULL;
    base = base ? base + 1 : argv0 ? argv0 : "";
    for (size_t i = 0; i < NFRONTENDS; i++)
        if (frontends[i]->program && !strcmp(base, frontends[i]->program))
            return frontends[i];
    return &fe_podrun;
}

const struct frontend *frontend_for_command(const char *word)
{
    for (size_t i = 0; word && i < NFRONTENDS; i++)
        if (frontends[i]->command && !strcmp(word, frontends[i]->command))
            return frontends[i];
    return NULL;
}

/* One word's text into its setting: through the word's transform, then cfg_set with the source
 * spelled as the input was (and, for a vocabulary that has one, its label). */
static int apply_word(const struct fe_word *w, const struct cfg_src *src, const char *text,
                      struct cfg *c, char *err, size_t errlen)
{
    char buf[4096];
    if (w->transform) {
        char why[384];
        int r = w->transform(text, buf, sizeof buf, why, sizeof why);
        if (r == 1)
            return 0;   /* the word's way of saying "not given" */
        if (r && !strncmp(why, w->spelling, strlen(w->spelling)))
            return fail(err, errlen, "%s", why);   /* it named the input itself */
        if (r)
            return fail(err, errlen, "%s '%s': %s", src->name, text, why);
        text = buf;
    }
    return cfg_set(c, w->id, text, src, err, errlen);
}

/* Word w of v's environment, when its variable is set and not empty. */
static int env_word(const struct vocab *v, const struct fe_word *w, struct cfg *c,
                    char *const *envp, char *err, size_t errlen)
{
    const char *text = env_get(envp, w->spelling);
    if (!text || !*text)
        return 0;
    struct cfg_src s;
    if (v->label)
        cfg_src_init(&s, v->env_rank, "%s (%s)", w->spelling, v->label);
    else
        cfg_src_init(&s, v->env_rank, "%s", w->spelling);
    return apply_word(w, &s, text, c, err, errlen);
}

int vocab_load_env(const struct vocab *v, struct cfg *c, char *const *envp, char *err,
                   size_t errlen)
{
    int r = 0;
    for (size_t i = 0; i < v->nenv && !r; i++)
        r = env_word(v, &v->env[i], c, envp, err, errlen);
    for (int id = 0; id < CFG__COUNT && v->env_prefix && !r; id++) {
        char suffix[48], name[64];
        cfg_env_suffix((enum cfg_id)id, suffix, sizeof suffix);
        if (!suffix[0])
            continue;
        snprintf(name, sizeof name, "%s%s", v->env_prefix, suffix);
        struct fe_word w = {name, (enum cfg_id)id, NULL};
        r = env_word(v, &w, c, envp, err, errlen);
    }
    return r;
}

/* The word of v's command line spelled arg[0..len), or NULL. */
static const struct fe_word *flag_word(const struct vocab *v, const char *arg, size_t len)
{
    for (size_t i = 0; v && i < v->nflags; i++)
        if (strlen(v->flags[i].spelling) == len && !memcmp(v->flags[i].spelling, arg, len))
            return &v->flags[i];
    return NULL;
}

/* Why v refuses the flag spelled arg[0..len), or NULL. */
static const char *refused(const struct vocab *v, const char *arg, size_t len)
{
    for (size_t i = 0; v && i < v->nrefused; i++) {
        const struct fe_refusal *f = &v->refused[i];
        size_t l = strlen(f->spelling);
        if (f->prefix ? l <= len && !memcmp(f->spelling, arg, l)
                      : l == len && !memcmp(f->spelling, arg, len))
            return f->why;
    }
    return NULL;
}

/* podrun's own setting `id` as a flag, when "--" + arg[2..len) begins its name ('_' and '-'
 * alike). */
static bool own_prefix(int id, const char *arg, size_t len)
{
    const char *o = cfg_settings[id].name;
    if (cfg_settings[id].flags & CFG_F_NO_FLAG || strlen(o) < len - 2)
        return false;
    for (size_t k = 2; k < len; k++)
        if ((arg[k] == '_' ? '-' : arg[k]) != o[k - 2])
            return false;
    return true;
}

/* One more candidate for an abbreviation: its spelling goes on the list unless a candidate of
 * the same option (two spellings of one setting) is there. */
static void abbrev_add(int key, const char *spelling, int *keys, const char **names, int *n)
{
    for (int i = 0; i < *n; i++)
        if (keys[i] == key)
            return;
    if (*n < 8) {
        keys[*n] = key;
        names[(*n)++] = spelling;
    }
}

/* argparse's abbreviations, which torchrun, DeepSpeed, accelerate and Paddle all parse with:
 * "--X" that is no option's full spelling stands for the one option whose spelling begins with
 * it (a word of v, a flag v refuses, or one of podrun's own). 0 with word and id set (id -1 and
 * why set for a refused flag); 1 when nothing begins with it; -EINVAL when several options do,
 * with argparse's line. */
static int abbrev(const struct vocab *v, const char *a, size_t len, const struct fe_word **word,
                  int *id, const char **why, char *err, size_t errlen)
{
    int keys[8], n = 0;
    const char *names[8];
    char own[8][64];
    for (size_t i = 0; v && i < v->nflags; i++)
        if (!strncmp(v->flags[i].spelling, a, len) && strlen(v->flags[i].spelling) > len)
            abbrev_add((int)v->flags[i].id, v->flags[i].spelling, keys, names, &n);
    for (size_t i = 0; v && i < v->nrefused; i++)
        if (!v->refused[i].prefix && !strncmp(v->refused[i].spelling, a, len))
            abbrev_add(-1 - (int)i, v->refused[i].spelling, keys, names, &n);
    for (int i = 0; i < CFG__COUNT; i++)
        if (own_prefix(i, a, len) && n < 8) {
            snprintf(own[n], sizeof own[n], "--%s", cfg_settings[i].name);
            abbrev_add(i, own[n], keys, names, &n);
        }
    if (!n)
        return 1;
    if (n > 1) {
        char list[512];
        size_t at = 0;
        for (int i = 0; i < n && at < sizeof list; i++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", names[i]);
        return fail(err, errlen, "ambiguous option: %.*s could match %s", (int)len, a, list);
    }
    *word = NULL;
    *id = keys[0];
    for (size_t i = 0; v && keys[0] >= 0 && i < v->nflags; i++)
        if (v->flags[i].spelling == names[0])
            *word = &v->flags[i];
    *why = keys[0] < 0 ? v->refused[-1 - keys[0]].why : NULL;
    return 0;
}

/* Walks the options: a word of the front-end first, else one of podrun's own. A flag's source is
 * its spelling as typed, so --print-config says "--nproc_per_node" when that is what was given. */
int frontend_parse_args(const struct frontend *fe, struct cfg *c, int argc, char **argv,
                        char *err, size_t errlen)
{
    const struct vocab *v = fe->vocab;
    int i = 1;
    if (fe->verb) {
        if (i < argc && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")))
            return cfg_set(c, CFG_HELP, "1", &(struct cfg_src){CFG_SRC_FLAG, "--help"}, err,
                           errlen);
        if (i >= argc || strcmp(argv[i], fe->verb))
            return fail(err, errlen, "%s: podrun answers to '%s' only, as in '%s ... PROGRAM'; "
                        "got '%s'", fe->name, fe->name, fe->name, i < argc ? argv[i] : "");
        i++;
    }
    while (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        const struct fe_word *w;
        const char *val = NULL;
        int id;
        struct cfg_src s;
        if (a[1] == '-') {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const char *why = refused(v, a, len);
            if (why)
                return fail(err, errlen, "%.*s: %s", (int)len, a, why);
            w = flag_word(v, a, len);
            id = w ? (int)w->id : cfg_find_flag(a + 2, len - 2);
            cfg_src_init(&s, CFG_SRC_FLAG, "%.*s", (int)(len < 90 ? len : 90), a);
            int ab = id < 0 && len > 2 ? abbrev(v, a, len, &w, &id, &why, err, errlen) : 1;
            if (ab < 0)
                return ab;
            if (!ab && why)
                return fail(err, errlen, "%.*s: %s", (int)len, a, why);
            if (id < 0)
                return fail(err, errlen, "unknown option '%.*s'; see %s --help", (int)len, a,
                            fe->name);
            if (eq)
                val = eq + 1;
        } else {
            w = flag_word(v, a, 2);
            id = w ? (int)w->id : cfg_find_short(a[1]);
            cfg_src_init(&s, CFG_SRC_FLAG, "-%c", a[1]);
            if (id < 0)
                return fail(err, errlen, "unknown option '%s'; see %s --help", a, fe->name);
            if (a[2])
                val = a + 2;
        }
        i++;
        const struct cfg_setting *set = &cfg_settings[id];
        if (cfg_types[set->type].flag_alone && !(w && w->transform)) {
            if (!val)
                val = "1";
            else if (a[1] != '-')
                return fail(err, errlen, "option %s takes no value; write %s alone", s.name,
                            s.name);
        } else if (!val) {
            if (i >= argc)
                return fail(err, errlen, "option %s needs a value, e.g. %s %s", s.name, s.name,
                            set->metavar ? set->metavar : "VALUE");
            val = argv[i++];
        }
        int r = w ? apply_word(w, &s, val, c, err, errlen)
                  : cfg_set(c, (enum cfg_id)id, val, &s, err, errlen);
        if (r)
            return r;
        if ((id == CFG_HELP && c->help) || (id == CFG_VERSION && c->version))
            return 0;
    }
    cfg_set_program(c, argv + i, argc - i);
    return 0;
}

/* Discovery needs --discovery, --hostfile, --local-addr and --node-name, so it comes after the
 * command line; a launcher's own hostfile (the discover hook) replaces the schedulers'
 * variables. */
static int discover(const struct frontend *fe, struct cfg *c, char *const *envp,
                    const struct discover_host *host, char *err, size_t errlen)
{
    int r = 0;
    if (fe->vocab && fe->vocab->discover)
        r = fe->vocab->discover(c, envp, host, err, errlen);
    return r ? (r > 0 ? 0 : r) : operators_load(c, envp, host, err, errlen);
}

int frontend_load_host(const struct frontend *fe, struct cfg *c, int argc, char **argv,
                       char *const *envp, const struct discover_host *host, char *err,
                       size_t errlen)
{
    int r = fe->vocab ? vocab_load_env(fe->vocab, c, envp, err, errlen) : 0;
    if (!r)
        r = cfg_load_env(c, envp, err, errlen);
    if (!r)
        r = frontend_parse_args(fe, c, argc, argv, err, errlen);
    if (r || c->help || c->version)
        return r;
    if (fe->vocab && fe->vocab->config)
        r = fe->vocab->config(c, envp, host, err, errlen);
    if (!r)
        r = discover(fe, c, envp, host, err, errlen);
    if (!r && fe->vocab && fe->vocab->finalize)
        r = fe->vocab->finalize(c, err, errlen);
    return r;
}

int frontend_load(const struct frontend *fe, struct cfg *c, int argc, char **argv,
                  char *const *envp, char *err, size_t errlen)
{
    return frontend_load_host(fe, c, argc, argv, envp, NULL, err, errlen);
}
