/* launcher/discover/identity.h — who this node is: its name in the job and the address the other
 * nodes know it by. */
#ifndef PODRUN_LAUNCHER_DISCOVER_IDENTITY_H
#define PODRUN_LAUNCHER_DISCOVER_IDENTITY_H

#include "config/config.h"

#define IDENTITY_NAME_MAX 128 /* with the NUL; host names are at most 64 bytes */

struct identity {
    char name[IDENTITY_NAME_MAX]; /* --node-name, else the host name, else "localhost" */
    char host[IDENTITY_NAME_MAX]; /* --local-addr, else the host name */
};

/* Fills id from the configuration and this machine's host name. Names sort the nodes into node
 * ranks (rdzv/ranks.h) and name them in every report, so they must be stable across restarts:
 * nothing here is random. */
void identity_resolve(struct identity *id, const struct cfg *c);

#endif
