/* rdzv/badnodes.h — the nodes a job remembers for their failures (doc/failures.md#bad-nodes).
 * Pure code: no I/O, no globals; the decoder takes any bytes.
 *
 * The coordinator keeps one list per job, by node name (what a replaced pod keeps): for each
 * node how many of the job's stops it was the root cause of, how many health or preflight checks
 * it failed, and whether a worker of it asked to leave it out (launcher/control.h). A node is
 * bad once those failures reach --max-node-failures, or at once when it asked; a bad node is
 * left out of later rounds where the job can do without it (coordinator_badnodes.c). The list
 * travels in every stop decision (so every agent's /metrics and report can show it), in
 * `podrun status`'s record, and in the etcd backend's state (so a new coordinator keeps it).
 *
 * What counts, from a decision's failure records (the same on every coordinator):
 *  - the root cause ([0]) is its node's failure: a worker that failed or hung, or the node lost
 *    or silent; a node that left on purpose (SIGTERM: "agent left: ...") is not counted;
 *  - every record that is a failed check ("health check: ..." from the run-time check,
 *    "excluded by the preflight check" under --preflight-policy exclude) counts for its node;
 *  - a record whose worker asked to be left out (exclude=1) makes its node bad at once. */
#ifndef PODRUN_RDZV_BADNODES_H
#define PODRUN_RDZV_BADNODES_H

#include <stddef.h>

#include "rdzv/records.h"
#include "rdzv/rendezvous.h"

/* What the agents' own records say when a check found their node bad (launcher/agent_watch.c,
 * launcher/agent_preflight.c). */
#define BADNODES_HEALTH "health check: "
#define BADNODES_PREFLIGHT "excluded by the preflight check"

typedef struct badnodes {
    rdzv_badnode_t v[RDZV_MAX_BAD_NODES];
    int n;
} badnodes_t;

/* Its failures: the stops it caused and the checks it failed. */
int badnodes_failures(const rdzv_badnode_t *b);
/* 1 when b is bad under --max-node-failures k (0: only a node that asked is). */
int badnodes_is_bad(const rdzv_badnode_t *b, int k);
/* The node's entry, or NULL. */
rdzv_badnode_t *badnodes_find(badnodes_t *l, const char *name);
/* Counts a decision's failure records (the rules above). The list stays worst first; when it is
 * full a new node takes the place of the least bad one that is not left out. */
void badnodes_note(badnodes_t *l, const rdzv_failure_t *f, int n);
/* One line for a node: "node-2 (3 failures: 2 caused a stop, 1 failed check; left out)". */
void badnodes_describe(const rdzv_badnode_t *b, char *out, size_t cap);

/* The list as one "key=" value: a line "caused checks asked out name" per node. */
void badnodes_put(kvbuf_t *b, const char *key, const rdzv_badnode_t *v, int n);
/* Reads it back into v[0..cap); the count. Lines that do not parse are skipped. */
int badnodes_take(const char *text, size_t len, const char *key, rdzv_badnode_t *v, int cap);

#endif
