/* launcher/frontends/frontend.h — other launchers' words for podrun's settings.
 *
 * A vocabulary is the words one launcher (torchrun, accelerate, deepspeed, paddle) or one
 * scheduler (launcher/operators/: PyTorchJob, Volcano, SLURM, ...) uses for what podrun calls a
 * setting: a table of {spelling, setting, transform} for its command line and one for its
 * environment, the rank its environment has, and an optional finalize hook for what a table
 * cannot say (accelerate's --num_processes counts the whole job, podrun's nproc-per-node one
 * node). A vocabulary never touches struct cfg: every word becomes a cfg_set with the word's
 * exact spelling as the source, so precedence is cfg_set's (config.h) and two vocabularies cannot
 * disagree about what a field means.
 *
 * A front-end is what podrun is started as: a name (the program name it answers to, or the
 * subcommand after `podrun`), its vocabulary, and its --help. podrun's own words (--<setting>,
 * PODRUN_<NAME>) are always understood besides the front-end's.
 *
 * Pure code: the caller passes argv and envp in. */
#ifndef PODRUN_LAUNCHER_FRONTENDS_FRONTEND_H
#define PODRUN_LAUNCHER_FRONTENDS_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "launcher/config/config.h"

struct discover_host; /* discover/host.h */

/* One spelling of one setting. */
struct fe_word {
    const char *spelling;   /* "--nproc_per_node", "-m", "PET_NNODES", "VC_TASK_INDEX" */
    enum cfg_id id;
    /* Rewrites the input's text into the setting's (NULL: taken as is), e.g. a 0-based index
     * into a rank. 0; 1: the input means "not given" (nothing is set); or -EINVAL with one line
     * in err saying what is expected (podrun puts "<spelling> '<text>': " in front unless the
     * line starts with the spelling). A flag with a transform always takes a value. */
    int (*transform)(const char *in, char *out, size_t cap, char *err, size_t errlen);
};

/* A flag, or a family of flags sharing a prefix, that podrun refuses, and why ("podrun does not
 * launch TPU training"). */
struct fe_refusal {
    const char *spelling;
    bool prefix;                     /* every flag starting with spelling */
    const char *why;
};

struct vocab {
    const char *name;                /* "torchrun", "Volcano" */
    const char *label;               /* after each of its sources, "VC_TASK_INDEX (Volcano)";
                                        NULL: the spelling alone */
    enum cfg_src_kind env_rank;      /* CFG_SRC_PET, CFG_SRC_OPERATOR, ... */
    const struct fe_word *env;       /* its variables, applied in this order */
    size_t nenv;
    /* Optional rule: <env_prefix><NAME> for every setting that has a PODRUN_<NAME>, after the
     * table (torchrun's PET_<NAME>, which podrun extends to its own settings). */
    const char *env_prefix;
    const struct fe_word *flags;     /* its command-line spellings, matched exactly */
    size_t nflags;
    const struct fe_refusal *refused; /* flags it knows but podrun does not do */
    size_t nrefused;
    /* Optional: is this vocabulary's scheduler the one running the job? (operators.c) */
    int (*detect)(char *const *envp);
    /* Optional: after the command line, the launcher's config file (accelerate's YAML), read
     * through host's read_file (host NULL: nothing can be read) and applied with cfg_set at
     * CFG_SRC_FILE. 0 or -EINVAL with one line in err. */
    int (*config)(struct cfg *c, char *const *envp, const struct discover_host *host, char *err,
                  size_t errlen);
    /* Optional: after every layer is in, before cfg_finalize; sets what the tables cannot with
     * cfg_set, naming the inputs it used as the source. 0 or -EINVAL with one line in err. */
    int (*finalize)(struct cfg *c, char *err, size_t errlen);
    /* Optional: a launcher that names the job's nodes itself (DeepSpeed's hostfile) finds them
     * here, after the command line and before finalize, with the machine at hand (host may be
     * NULL): typically hostsource_apply (operators/hostsource.h). 1 when it did (the schedulers'
     * variables are then not read: launcher/operators/operators.h), 0 when it did not, or
     * -EINVAL with one line in err. */
    int (*discover)(struct cfg *c, char *const *envp, const struct discover_host *host,
                    char *err, size_t errlen);
};

struct frontend {
    const char *name;                /* "podrun", "torchrun"; as a subcommand "accelerate launch" */
    const struct vocab *vocab;       /* NULL: podrun's own words alone */
    void (*usage)(FILE *f);          /* --help; NULL: podrun's */
    const char *program;             /* the program name it answers to (a link), NULL: none */
    const char *command;             /* `podrun <command> ...`, NULL: none */
    const char *verb;                /* a word that must follow the program or command
                                        ("launch" in `accelerate launch`), NULL: none */
};

extern const struct vocab torchrun_vocab, accelerate_vocab, paddle_vocab, deepspeed_vocab;
extern const struct frontend fe_podrun, fe_torchrun, fe_accelerate, fe_paddle, fe_deepspeed;

/* The front-end podrun answers to when started as `argv0` (a path: its last part counts), or
 * podrun's own. */
const struct frontend *frontend_for_program(const char *argv0);
/* The front-end of `podrun <word> ...` ("accelerate", "paddle"), or NULL. */
const struct frontend *frontend_for_command(const char *word);

/* A vocabulary's environment: its table, then its prefix rule, each word a cfg_set at the
 * vocabulary's rank. An empty variable is unset. */
int vocab_load_env(const struct vocab *v, struct cfg *c, char *const *envp, char *err,
                   size_t errlen);

/* The command line: the front-end's verb when it has one ("launch"), then options up to the first
 * non-option or "--", each a word of the front-end's vocabulary or one of podrun's own flags
 * (--<setting>, '_' or '-' alike, and its short form); then the program and its arguments
 * (cfg_set_program). Stops early (returning 0) at --help or --version. argv must outlive c. */
int frontend_parse_args(const struct frontend *fe, struct cfg *c, int argc, char **argv,
                        char *err, size_t errlen);

/* Every layer of a job's configuration into c (fresh from cfg_init): the front-end's environment,
 * podrun's (cfg_load_env), the command line, the vocabulary's config file (read through host),
 * discovery (the vocabulary's discover hook, else the scheduler's variables and files:
 * operators_load), then the vocabulary's finalize hook. cfg_set ranks the layers; the order here
 * only decides which of several bad inputs is reported: the environment's first. `host` is the
 * machine the config file and discovery are read from (discover/host.h); NULL: none, so no file
 * is read and only the schedulers' variables count. */
int frontend_load_host(const struct frontend *fe, struct cfg *c, int argc, char **argv,
                       char *const *envp, const struct discover_host *host, char *err,
                       size_t errlen);
/* frontend_load_host without a machine. */
int frontend_load(const struct frontend *fe, struct cfg *c, int argc, char **argv,
                  char *const *envp, char *err, size_t errlen);

#endif
