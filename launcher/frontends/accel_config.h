/* launcher/frontends/accel_config.h — an accelerate config file (YAML, or JSON for a path ending
 * in .json) as accelerate's launcher sees it: yaml.safe_load / json.load, then Python's str() of
 * each value, since that text is what ends up in its workers' environment ("True", "2",
 * "1.0", "FULL_SHARD").
 *
 * YAML scalars are resolved as PyYAML's safe loader (YAML 1.1) resolves plain scalars: null
 * (~, null, empty), booleans (true/yes/on and their false forms, three casings each), integers
 * (decimal, 0x, 0b, 0-prefixed octal, '_' ignored) and floats (a '.' is required, an exponent
 * needs its sign, .inf, .nan); everything else, and every quoted scalar, is a string. A float is
 * written as Python's repr writes it (1.0, 1e-05, 1e+16).
 *
 * Pure code: text in, a tree out. Bounded: at most ACC_CONFIG_MAX_DEPTH levels and
 * ACC_CONFIG_MAX_ENTRIES entries in all. */
#ifndef PODRUN_LAUNCHER_FRONTENDS_ACCEL_CONFIG_H
#define PODRUN_LAUNCHER_FRONTENDS_ACCEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define ACC_CONFIG_MAX_DEPTH 8
#define ACC_CONFIG_MAX_ENTRIES 4096
#define ACC_CONFIG_MAX_BYTES (1 << 20)

enum acc_kind {
    ACC_NULL,      /* None */
    ACC_SCALAR,    /* text is str(value) */
    ACC_MAP,       /* sub[0..nsub) */
    ACC_LIST,      /* a sequence: its items are not kept (no launching key is one) */
};

struct acc_entry {
    char *key;               /* str(key) */
    enum acc_kind kind;
    char *text;              /* ACC_SCALAR */
    struct acc_entry *sub;   /* ACC_MAP; a key given twice keeps the last value, as Python's */
    size_t nsub;
};

struct acc_file {
    struct acc_entry *top;   /* the top-level mapping */
    size_t n;
};

/* Parses text[0..len). 0; or -EINVAL with one line in err saying what is wrong and where (the
 * caller puts the file's name in front). */
int acc_config_parse(const char *text, size_t len, bool json, struct acc_file *out, char *err,
                     size_t errlen);
void acc_config_free(struct acc_file *f);

/* The entry `key` among v[0..n), or NULL. */
const struct acc_entry *acc_config_get(const struct acc_entry *v, size_t n, const char *key);

/* Python's repr of a float into buf ("1.0", "0.001", "1e-05", "1.5e+20", "inf", "nan"). */
void acc_py_float(double v, char *buf, size_t cap);

#endif
