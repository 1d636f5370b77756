/* launcher/discover/identity.h — who this node is: its name in the job, the address the other
 * nodes know it by, and the machine as discovery sees it (its names, its files). */
#ifndef PODRUN_LAUNCHER_DISCOVER_IDENTITY_H
#define PODRUN_LAUNCHER_DISCOVER_IDENTITY_H

#include "launcher/config/config.h"
#include "launcher/discover/host.h"

#define IDENTITY_NAME_MAX 128 /* with the NUL; host names are at most 64 bytes */
#define IDENTITY_ADDRS_MAX 64 /* interface addresses kept for matching a hostfile line */

struct identity {
    char name[IDENTITY_NAME_MAX]; /* --node-name, else the host name, else "localhost" */
    char host[IDENTITY_NAME_MAX]; /* --local-addr, else the host name */
};

/* Fills id from the configuration and this machine's host name. Names sort the nodes into node
 * ranks (rdzv/ranks.h) and name them in every report, so they must be stable across restarts:
 * nothing here is random. */
void identity_resolve(struct identity *id, const struct cfg *c);

/* This pod's name as the Kubernetes downward API gives it: POD_NAME, else HOSTNAME (a pod's host
 * name is its name by default), else the host name, written to buf. NULL when none is known. */
const char *identity_pod_name(char *buf, size_t cap);

/* This pod's IP as the downward API gives it (POD_IP), or NULL when it is not set. */
const char *identity_pod_ip(void);

/* The real machine for discovery (discover/host.h): files read with a bound, directories listed,
 * and this machine's names — gethostname(2), the canonical name the resolver gives for it (the
 * FQDN that a pod's /etc/hosts carries), every address getifaddrs(3) lists, loopback included.
 * `m` holds what self() returns and must outlive h. */
struct identity_machine {
    char hostname[256], fqdn[256];
    char addrs[IDENTITY_ADDRS_MAX][64];
    const char *addrv[IDENTITY_ADDRS_MAX];
    size_t naddrs;
    bool have_names, have_fqdn;
};
void identity_host_init(struct discover_host *h, struct identity_machine *m);

#endif
