/* rdzv/etcd_state.h — the job's state as the etcd backend keeps it in etcd, so that whichever
 * agent coordinates next starts where the last one left off (rdzv/backend_etcd.c). Pure code:
 * no I/O; the decoder takes any bytes.
 *
 * The record is "key=value\n" lines (rdzv/records.h) and one "m=" line per member:
 *   round=R  phase=open|running|over  restarts=K
 *   nnodes=N  world=W  store_host=H  store_port=P     running: what every assignment shares
 *   over_kind=finished|ended|timeout  over_text=...   over: what later joiners are told
 *   bad=...                                            the nodes remembered for their failures
 *   m=<id> <node_rank> <rank_base> <join_k> <nproc> <want_rank> <pid> <name> <addr> <host>
 * In an "m" line the strings are percent-encoded (every byte outside printable ASCII, and ' ',
 * '%', '\\'), so a member is one line of blank-separated fields whatever its name holds.
 * Running: the members of round R with their ranks; open: the members of round R-1, whom round R
 * expects back. At most ETCD_STATE_MAX_MEMBERS members. */
#ifndef PODRUN_RDZV_ETCD_STATE_H
#define PODRUN_RDZV_ETCD_STATE_H

#include <stddef.h>

#include "rdzv/records.h"
#include "rdzv/rendezvous.h"

#define ETCD_STATE_MAX_MEMBERS (1 << 17)

typedef struct etcd_member {
    char id[17];
    rdzv_desc_rec_t d;
    int node_rank, rank_base;
    int join_k;              /* the join its assignment answered */
} etcd_member_t;

enum { ETCD_PHASE_OPEN = 1, ETCD_PHASE_RUNNING, ETCD_PHASE_OVER }; /* = COORD_OPEN ... */

typedef struct etcd_state {
    int round, phase, restarts;
    int nnodes, world_size;
    char store_host[RDZV_NAME_MAX];
    int store_port;
    char over_kind[16];
    char over_text[RDZV_LINE_MAX];
    int n_bad;               /* the nodes remembered for their failures (rdzv/badnodes.h) */
    rdzv_badnode_t bad[RDZV_MAX_BAD_NODES];
    etcd_member_t *members;  /* decode: malloc'd (etcd_state_free) */
    int n_members;
} etcd_state_t;

/* The record in a malloc'd buffer (*out, *len). 0, -EINVAL (more than the members bound or a
 * bad phase), -ENOMEM. */
int etcd_state_encode(const etcd_state_t *s, char **out, size_t *len);
/* Reads a record: 0, -EINVAL (no round or phase, a bad member line, too many members), -ENOMEM.
 * s is always safe to free. Fields out of range are read as absent. */
int etcd_state_decode(const char *text, size_t len, etcd_state_t *s);
void etcd_state_free(etcd_state_t *s);

#endif
