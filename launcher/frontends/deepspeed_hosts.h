/* launcher/frontends/deepspeed_hosts.h — what the deepspeed head and the agents it starts
 * exchange (reference/launchers.md §1.3, §1.4), computed without I/O.
 *
 *  - world_info: launch.py's --world_info, the active hosts and their slot ids in node order, as
 *    Python's json.dumps text in URL-safe base64 (the head passes it to every host's agent).
 *  - .deepspeed_env files and the variables DeepSpeed exports to every host.
 *  - launcher_args: the words the head gives pdsh. */
#ifndef PODRUN_LAUNCHER_FRONTENDS_DEEPSPEED_HOSTS_H
#define PODRUN_LAUNCHER_FRONTENDS_DEEPSPEED_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/discover/hostfile.h"
#include "launcher/discover/resources.h"

/* ---- world_info ---- */

/* The encoded text of `r` ({"h0": [0, 1], "h1": [0]} in URL-safe base64 with '=' padding) into
 * a malloc'd string. 0, -EILSEQ (a host name that is not UTF-8 text) or -ENOMEM. */
int deepspeed_hosts_world_encode(const struct resources *r, char **out);

/* Decodes world_info (URL-safe or standard base64, padded or not, of a JSON object of host ->
 * list of slot ids) into r (hostfile order = the object's order); NULL or "" is no world. 0, or
 * -EINVAL with one line in err naming the input. The caller frees r with resources_free. */
int deepspeed_hosts_world_decode(const char *text, struct resources *r, char *err,
                                 size_t errlen);

/* "0,1,3" from a slot list. */
void deepspeed_hosts_slots_format(const int *slots, size_t n, char *out, size_t cap);

/* ---- what goes to every host ---- */

/* Whether DeepSpeed exports the variable `name` to the other hosts: its name starts with NCCL,
 * PYTHON, UCX, MV2, MLFLOW or one of Nebula's and AzureML's names (runner.py's EXPORT_ENVS). */
bool deepspeed_hosts_exported(const char *name);

/* One .deepspeed_env file's lines: KEY=VALUE, split at the first '=', key and value stripped.
 * Blank lines and lines starting with '#' are skipped (DeepSpeed crashes on them). Calls
 * add(arg, key, value) per line (key and value NUL-terminated copies valid during the call).
 * 0, or -EINVAL with one line in err naming the file and line. */
int deepspeed_hosts_env_file(const char *text, size_t len, const char *name,
                             int (*add)(void *arg, const char *key, const char *value), void *arg,
                             char *err, size_t errlen);

/* Splits a shell-like word list (launcher_args: spaces, '...', "...", backslash) into a
 * malloc'd NULL-terminated array of malloc'd words (deepspeed_hosts_words_free). 0, -EINVAL (an
 * unclosed quote, one line in err) or -ENOMEM. */
int deepspeed_hosts_words_split(const char *text, char ***out, int *count, char *err,
                                size_t errlen);
void deepspeed_hosts_words_free(char **words);

#endif
