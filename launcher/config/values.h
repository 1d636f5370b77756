/* launcher/config/values.h — the kinds of value a setting can hold: one parse and one format per
 * kind, in a table indexed by the setting's type (settings.h). Pure code.
 *
 * Parsing and storing are two steps so that cfg_set can reject bad text from any source yet keep
 * a good value only when its source ranks high enough: parse never touches struct cfg, store
 * moves a parsed value into it, drop frees one that was not kept. */
#ifndef PODRUN_LAUNCHER_CONFIG_VALUES_H
#define PODRUN_LAUNCHER_CONFIG_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/config/settings.h"

/* One parsed value, before it is stored. */
union cfg_value {
    long i;                     /* INT, CHOICE, BOOL, TRISTATE */
    uint64_t ms;                /* DUR; SIZE (bytes) */
    char *s;                    /* STR, OPTSTR (NULL: unset), STDSPEC, RANKS: malloc'd */
    struct {
        int kind, n;            /* enum cfg_nproc_kind; n for CFG_NPROC_NUMBER */
    } nproc;
    struct {
        int min, max;
    } nnodes;
    struct {
        char *host;             /* malloc'd */
        int port;
        bool port_given;
        char *list;             /* malloc'd: the text of a list or URL (etcd), else NULL */
    } endpoint;
};

struct cfg_type {
    /* Parses text for setting s into *v. 0; or -EINVAL with one line in err, "<what>: <what is
     * expected>" (what names the input: "--nnodes 'x'"); or -ENOMEM. */
    int (*parse)(const struct cfg_setting *s, const char *text, const char *what,
                 union cfg_value *v, char *err, size_t errlen);
    /* Moves *v into c's field(s), freeing what they held. */
    void (*store)(struct cfg *c, const struct cfg_setting *s, union cfg_value *v);
    /* Frees a parsed value that was not stored (NULL: nothing to free). */
    void (*drop)(union cfg_value *v);
    /* Frees what c's field(s) hold and leaves them unset (cfg_init, cfg_free). */
    void (*clear)(struct cfg *c, const struct cfg_setting *s);
    /* The value as --print-config shows it. */
    void (*format)(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len);
    bool flag_alone;            /* given as a flag without a value, it means "1" */
};

extern const struct cfg_type cfg_types[CFG_T__COUNT];

/* "25", "2.5", "500ms", "30s", "10m", "1h" (bare numbers are seconds) in milliseconds, at most
 * 30 days. 0, -EINVAL, or -ERANGE. */
int cfg_parse_duration(const char *s, uint64_t *ms);

/* Expands a --redirects/--tee spec ("N" or "LR:N,...", already parsed) into one stream mask per
 * local rank. -ERANGE with *bad the local rank that is not below nproc. */
int cfg_stdspec_expand(const char *spec, int nproc, uint8_t *mask, long *bad);

/* Marks the local ranks of a --local-ranks-filter ("0,2") in mark[0..n). -EINVAL: not a list of
 * ranks; -ERANGE: *bad is not below n. */
int cfg_ranks_parse(const char *s, int n, bool *mark, long *bad);

/* A --signals-to-handle list ("SIGTERM,SIGUSR1"; names with or without "SIG", spaces around
 * them ignored) into a mask of 1 << signo. -EINVAL with the first bad name in bad (cut). */
int cfg_signals_parse(const char *s, uint64_t *mask, char *bad, size_t badlen);

/* A --fatal-exit-codes list ("3,42,64-78": codes 1-255, ranges inclusive) into mask: bit c of
 * mask[c / 64]. Empty: no code. -EINVAL with the first bad item in bad (cut). */
int cfg_codes_parse(const char *s, uint64_t mask[4], char *bad, size_t badlen);
/* Whether code is in a mask cfg_codes_parse filled. */
bool cfg_codes_has(const uint64_t mask[4], int code);

/* Splits torch's --duplicate-std*-filters list: items separated by ',', ",," standing for a comma
 * inside one; empty items dropped. The items point into buf (cap bytes); at most max. Returns
 * their number. */
size_t cfg_filters_split(const char *s, char *buf, size_t cap, const char **items, size_t max);

/* The next "KEY=VALUE" item of a --rdzv-conf list at *p: the key into key, *val pointing into it
 * after the '='. Empty items are skipped. 1 with an item, 0 at the end; -E2BIG for an item longer
 * than cap - 1, -EINVAL for one without "=" or without a key (*val then points at the item). */
int cfg_conf_next(const char **p, char *key, size_t cap, const char **val);

#endif
