/* launcher/discover/identity.c — this node's name and address (see identity.h). */
#include "discover/identity.h"

#include <stdio.h>

#include "rdzv/common.h"

void identity_resolve(struct identity *id, const struct cfg *c)
{
    char hn[IDENTITY_NAME_MAX];
    if (podrun_hostname(hn, sizeof hn) < 0 || !hn[0])
        snprintf(hn, sizeof hn, "localhost");
    snprintf(id->name, sizeof id->name, "%s", c->node_name ? c->node_name : hn);
    snprintf(id->host, sizeof id->host, "%s", c->local_addr ? c->local_addr : hn);
}
