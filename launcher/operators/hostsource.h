/* launcher/operators/hostsource.h — a hostfile as the job's discovery: every node reads the same
 * file (podrun --hostfile, MPIJob's /etc/mpi/hostfile, a Volcano <task>.host file, DeepSpeed's
 * /job/hostfile), finds its own line, and knows its node rank, the node count and the store's
 * host without ssh and without asking anyone.
 *
 * This node's line: with --local-addr and/or --node-name given, those stand for this machine's
 * addresses and its host name (so several agents on one machine each find their own line);
 * otherwise the line that names this machine's host name, its FQDN (looked up only when the host
 * name matches no line) or one of its interface addresses (hostfile.h: hostfile_find_self).
 *
 * Pure code: the file and the machine's names come through discover/host.h. */
#ifndef PODRUN_LAUNCHER_OPERATORS_HOSTSOURCE_H
#define PODRUN_LAUNCHER_OPERATORS_HOSTSOURCE_H

#include <stddef.h>

#include "launcher/config/config.h"
#include "launcher/discover/host.h"
#include "launcher/discover/hostfile.h"
#include "launcher/discover/resources.h"

/* What the file says about this node, for a front-end that needs more than the config holds
 * (DeepSpeed's CUDA_VISIBLE_DEVICES from the selected slot ids). */
struct hostsource_node {
    size_t node_rank, nnodes;
    unsigned line;                   /* this node's line in the file */
    size_t nslots;                   /* its selected slot ids; 0 when the line gives no slots */
    int slots[HOSTFILE_SLOTS_MAX];
};

/* Reads the hostfile at `path` (as given, not under the discovery root) through host, parses it
 * in `dialect`, applies DeepSpeed's selection `sel` (NULL: every line is a node), finds this
 * node's line and sets, at CFG_SRC_HOSTFILE, each value's source naming the file and line
 * ("/etc/mpi/hostfile line 3 (MPIJob)"; label may be NULL):
 *   node-rank       this node's index among the selected lines (line order is node order)
 *   nnodes          the number of selected lines
 *   rdzv-backend    static; master-addr = the first selected line's host: node rank 0 hosts the
 *                   job store at --master-addr:--master-port, so the port stays the user's
 *   nproc-per-node  this line's selected slots, when the file gives slots
 *   local-addr      this line's host, when it is an address (the one the others reach it at)
 * Every value ranks below PET_*, PODRUN_* and flags. Errors (one line in err, naming the file
 * and line): the file is missing or too long (-ENOENT, -EFBIG), a line does not parse (-EINVAL),
 * this node is in no line or in two (-ENOENT, -EEXIST) or is left out by the selection (-ESRCH),
 * its line gives slots=0 (-EINVAL). out (may be NULL) gets what the file says about this node. */
int hostsource_apply(struct cfg *c, const struct discover_host *host, const char *path,
                     enum hostfile_dialect dialect, const struct resources_select *sel,
                     const char *label, struct hostsource_node *out, char *err, size_t errlen);

/* The same for a hostfile already parsed (a Volcano host list from the environment): `hf`'s
 * name stands for the file in sources and messages. */
int hostsource_apply_parsed(struct cfg *c, const struct discover_host *host,
                            const struct hostfile *hf, const struct resources_select *sel,
                            const char *label, struct hostsource_node *out, char *err,
                            size_t errlen);

/* This node's line of hf (rule above): *entry its index in hf, *node_rank its index among
 * `active` (NULL: among all lines). 0, or -ENOENT / -EEXIST / -ESRCH with one line in err. */
int hostsource_find_self(const struct hostfile *hf, const struct resources *active,
                         const struct cfg *c, const struct discover_host *host, size_t *entry,
                         size_t *node_rank, char *err, size_t errlen);

#endif
