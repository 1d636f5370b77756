/* launcher/operators/adapter.h — what the adapters share: reading the environment with the
 * source's own name in every message, writing a value with its source, naming a conflict, and
 * this machine's names as discovery matches them. Internal to launcher/operators. Pure code. */
#ifndef PODRUN_LAUNCHER_OPERATORS_ADAPTER_H
#define PODRUN_LAUNCHER_OPERATORS_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/operators/operators.h"

#define OP_NODES_MAX 65536 /* nodes in one job, as --nnodes takes them */
#define OP_PATH_MAX 4096

/* NAME's value, or NULL when it is unset or empty (an empty variable is unset, as everywhere). */
const char *op_get(const struct op_ctx *x, const char *name);

/* NAME as a whole number in [min, max] into *out: 0; 1 when NAME is unset; -EINVAL with one line,
 * "WORLD_SIZE='abc' (PyTorchJob): expected a whole number from 1 to 65536". */
int op_num(const struct op_ctx *x, const char *name, const char *label, long min, long max,
           long *out, char *err, size_t errlen);

/* cfg_set(id, value) at `kind` with the source named by fmt: "RANK (Volcano pytorch plugin)". */
int op_set(struct cfg *c, enum cfg_id id, const char *value, enum cfg_src_kind kind, char *err,
           size_t errlen, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* The same for a number. */
int op_setn(struct cfg *c, enum cfg_id id, long value, enum cfg_src_kind kind, char *err,
            size_t errlen, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* One line about two inputs that contradict each other: -EINVAL. The text names both values
 * with their sources and says what to fix. */
int op_conflict(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* `abs` (a path a scheduler mounts, "/etc/volcano") under the discovery root. -ENAMETOOLONG. */
int op_path(const struct op_ctx *x, const char *abs, char *out, size_t cap);

/* Sets `discovered` to the adapter's name, its source being what detect() found. */
int op_discovered(struct cfg *c, const char *name, const struct cfg_src *why, char *err,
                  size_t errlen);

/* Whether text is an IPv4 or IPv6 address (brackets allowed). */
bool op_is_addr(const char *text);

/* Splits "a,b,c" (no empty item, none longer than cap-1) into a freshly parsed hostfile so that
 * a host list from the environment and a .host file are matched the same way. `name` names the
 * list in messages. 0 or -EINVAL/-ENOMEM with one line in err. */
int op_hostlist_csv(struct hostfile *hf, const char *csv, const char *name, char *err,
                    size_t errlen);

#endif
