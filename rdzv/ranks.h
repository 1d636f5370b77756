/* rdzv/ranks.h — who gets which rank when a round closes. Pure code: no I/O, no state.
 *
 * The rule (rdzv/rendezvous.h, "Node ranks"): a node's wanted rank (--node-rank) is honoured when
 * it is below the number of nodes in the round; the remaining node ranks go to the other nodes in
 * the order (NVLink domain, then name, then address, both natural order so worker-2 < worker-10,
 * then id), so the nodes of one domain get contiguous node ranks, and the order is
 * deterministic and stable across restarts for the same set of nodes. Global ranks are contiguous
 * per node in node-rank order: a node's first global rank is the sum of nproc of the nodes with
 * lower node ranks. */
#ifndef PODRUN_RDZV_RANKS_H
#define PODRUN_RDZV_RANKS_H

typedef struct rdzv_rank_node {
    const char *name, *addr, *id; /* the sort keys, in this order */
    int want_rank;                /* -1: any */
    int nproc;                    /* its workers, >= 0 */
    int node_rank, rank_base;     /* out */
    const char *domain;           /* NVLink domain, the first sort key; NULL or "": none (one
                                     domain of its own, before every named one) */
    int keep;                     /* rdzv_pick_segments: a member of the last round, taken
                                     before the other nodes of its domain */
} rdzv_rank_node_t;

/* Gives each of nodes[0..n) its node_rank (0..n-1, each once) and rank_base, and order[r] the
 * index of the node with node rank r (order holds n ints). Two nodes wanting the same rank (the
 * coordinator rejects that earlier) cannot both have it: the first in the sort order does, the
 * other gets a free rank like a node that wanted none. Returns the world size (the sum of nproc),
 * or -ENOMEM. */
long long rdzv_assign_ranks(rdzv_rank_node_t *nodes, int n, int *order);

/* Whole segments (--segment-size seg > 1): which of nodes[0..n) a round takes. Per domain,
 * floor(count / seg) * seg of its nodes: the members of the last round (keep) first, so that a
 * restart keeps the survivors and a spare only fills a gap, then the others in the sort order
 * above; domains in sort order, until `max` nodes (rounded down to a multiple of seg) are taken. take[i] is 1 for a node taken, 0 for
 * one left to wait (the remainder of its domain, or no room), -1 for one whose domain has fewer
 * than seg nodes joined. Returns the number taken, or -ENOMEM. */
int rdzv_pick_segments(const rdzv_rank_node_t *nodes, int n, int seg, int max, int *take);

/* Natural order: digit runs compare as numbers, so "worker-2" < "worker-10", "node007" ==
 * "node7". */
int rdzv_natural_cmp(const char *a, const char *b);

#endif
