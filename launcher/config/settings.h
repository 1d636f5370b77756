/* launcher/config/settings.h — the table of podrun's settings: one row per value of struct cfg,
 * saying its name, type, default, the field it fills, its flag and environment names and its
 * help. --help, --print-config, the environment layer and podrun's own flags are all read off
 * this table, so a new setting is one row (and, for a new kind of value, one entry of values.c).
 * Pure code. */
#ifndef PODRUN_LAUNCHER_CONFIG_SETTINGS_H
#define PODRUN_LAUNCHER_CONFIG_SETTINGS_H

#include <stddef.h>

#include "launcher/config/config.h"

/* The kinds of value (values.c has one parse/format entry per kind). */
enum cfg_type_id {
    CFG_T_NPROC,    /* N | auto | cpu | gpu */
    CFG_T_NNODES,   /* N | MIN:MAX */
    CFG_T_INT,      /* a whole number in [min, max] */
    CFG_T_CHOICE,   /* one of `choices`, stored as its index */
    CFG_T_ENDPOINT, /* HOST[:PORT] */
    CFG_T_STR,      /* non-empty text */
    CFG_T_OPTSTR,   /* text; empty: unset */
    CFG_T_CONF,     /* K=V,... of the settings marked CFG_F_CONF_KEY */
    CFG_T_BOOL,
    CFG_T_TRISTATE, /* a bool that may be left to podrun: -1 */
    CFG_T_DUR,      /* a duration, kept in milliseconds */
    CFG_T_STDSPEC,  /* N | LOCAL_RANK:N,... with N a stream mask 0-3 */
    CFG_T_RANKS,    /* LOCAL_RANK,... */
    CFG_T_SIZE,     /* bytes: N with an optional K, M or G (powers of 1024), in [min, max] */
    CFG_T_OPTPORT,  /* a port 0-65535, or off: -1 */
    CFG_T_SIGNALS,  /* SIGNAME,... (text; cfg_signals_parse reads it) */
    CFG_T_CODES,    /* exit codes N[-M],... (text; cfg_codes_parse reads it); empty: none */
    CFG_T_PYBOOL,   /* a bool kept as Python writes it: "True" / "False" (accelerate's) */
    CFG_T__COUNT
};

enum {
    CFG_F_NO_ENV = 1,   /* no PODRUN_<NAME> */
    CFG_F_NO_FLAG = 2,  /* no --<name> */
    CFG_F_ACTION = 4,   /* something to do, not a value: not printed by --print-config */
    CFG_F_CONF_KEY = 8, /* a key of --rdzv-conf */
    CFG_F_SECRET = 16,  /* --print-config says whether it is set, never what it is */
    CFG_F_ACCELERATE = 32, /* accelerate's own: printed when the workers get accelerate's env */
    CFG_F_PADDLE = 64,  /* paddle's own: printed when the workers get paddle's env */
};

struct cfg_setting {
    const char *name;           /* --print-config name and podrun's flag (dash form) */
    char shortc;                /* -<c>, or 0 */
    enum cfg_type_id type;
    size_t off;                 /* the field of struct cfg (one-field types) */
    long min, max;              /* CFG_T_INT */
    const char *const *choices; /* CFG_T_CHOICE, NULL-terminated */
    const char *def;            /* the default as text, NULL for none */
    const char *metavar;
    const char *env;            /* the variable, when it is not PODRUN_<NAME> */
    unsigned flags;
    const char *help;
    const char *expect;         /* CFG_T_CHOICE: what a bad value is told */
};

extern const struct cfg_setting cfg_settings[CFG__COUNT];

/* The setting named by a long flag without its "--" ('_' and '-' are the same letter), or -1. */
int cfg_find_flag(const char *name, size_t len);
/* The setting of "-c", or -1. */
int cfg_find_short(char c);
/* The setting's environment variable: "PODRUN_NPROC_PER_NODE", or its own ("TMPDIR"); "" when
 * it has none. */
void cfg_env_name(enum cfg_id id, char *buf, size_t len);
/* "nproc-per-node" -> "NPROC_PER_NODE": the <NAME> of PODRUN_<NAME> (and torchrun's PET_<NAME>);
 * "" when the setting has no PODRUN_ variable. */
void cfg_env_suffix(enum cfg_id id, char *buf, size_t len);

#endif
