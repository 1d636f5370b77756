/* launcher/config/guards.h — the job store's guards from the config: the job's token (read from
 * --rdzv-token-file, or PODRUN_RDZV_TOKEN) and the --store-allow list (doc/store.md#security). */
#ifndef PODRUN_LAUNCHER_GUARDS_H
#define PODRUN_LAUNCHER_GUARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/config/config.h"
#include "rdzv/store/acl.h"
#include "rdzv/store/auth.h"

struct guards {
    bool has_token;
    auth_key_t token;
    bool has_allow;
    bool job;                 /* --store-allow names "job": the job's own pods are allowed */
    acl_t allow;              /* the blocks of --store-allow, then the job's addresses */
    size_t nblocks;           /* ... how many of the entries are --store-allow's */
};

/* Fills g from c: reads the token file (bounded) and parses the allow-list. The token's
 * variables are removed from this process's environment, so the workers started from it never
 * see the secret. 0, or -EINVAL with one line in err naming the input and the fix. */
int guards_load(const struct cfg *c, struct guards *g, char *err, size_t elen);
/* The job's own addresses now (discovery saw its pods change): they replace the previous ones
 * in the allow-list when --store-allow names "job". 0, or -ENOMEM (the list keeps what it had);
 * an address that is not one is skipped. */
int guards_set_job_addrs(struct guards *g, const char *const *ips, size_t n);
void guards_free(struct guards *g);

#endif
