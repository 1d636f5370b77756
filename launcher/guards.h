/* launcher/guards.h — the job store's guards from the config: the job's token (read from
 * --rdzv-token-file, or PODRUN_RDZV_TOKEN) and the --store-allow list (README "Security"). */
#ifndef PODRUN_LAUNCHER_GUARDS_H
#define PODRUN_LAUNCHER_GUARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "rdzv/acl.h"
#include "rdzv/auth.h"

struct guards {
    bool has_token;
    auth_key_t token;
    bool has_allow;
    acl_t allow;
};

/* Fills g from c: reads the token file (bounded) and parses the allow-list. The token's
 * variables are removed from this process's environment, so the workers started from it never
 * see the secret. 0, or -EINVAL with one line in err naming the input and the fix. */
int guards_load(const struct cfg *c, struct guards *g, char *err, size_t elen);
void guards_free(struct guards *g);

#endif
