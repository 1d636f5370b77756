/* launcher/preflight/plan.h — which nodes test which, and which nodes are bad.
 *
 * Pure code. The check pairs nodes and measures each pair's link (tcp: round trip and throughput
 * between the two agents; nccl: an all_reduce over both nodes' GPUs), in at most two rounds, the
 * idea of DLRover's pairwise check without a master pod:
 *
 *   round 1  nodes 0-1, 2-3, ...; with an odd count the last node also pairs with node 0 (node 0
 *            runs that link after its first). Both ends of a link that passed are good; a node
 *            none of whose links passed is a suspect.
 *   round 2  each suspect pairs with a good node, the fastest first (a good node may serve several
 *            suspects, one after the other). Without any good node the suspects pair among
 *            themselves in another order. A suspect whose round-2 link passes is good (its
 *            round-1 partner was the bad one); one whose link fails again is bad.
 * A node whose own check failed (nccl: the all_reduce among its own GPUs) is bad whatever its
 * links say; its partners become suspects unless another link cleared them.
 *
 * A link or node "passes" when its test ran to the end and its figures are within the bounds:
 * round trip at most max_rtt, bandwidth at least min_bw and at least slow_percent % of the
 * median (the upper median, so one slow link of two is measured against the fast one). */
#ifndef PODRUN_PREFLIGHT_PLAN_H
#define PODRUN_PREFLIGHT_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#define PF_REASON_MAX 240
#define PF_NAME_MAX 128

/* One measurement: a link (or one end of it), or a node's own check. */
struct pf_figure {
    bool done;                  /* a result came at all */
    bool ok;                    /* the test ran to the end */
    double rtt;                 /* seconds; < 0 not measured */
    double bw;                  /* bytes per second (nccl: bus bandwidth); < 0 not measured */
    char reason[PF_REASON_MAX]; /* why not ok */
};

struct pf_link {
    int a, b;                   /* node ranks */
};

struct pf_bounds {
    double max_rtt;             /* seconds, 0: none */
    double min_bw;              /* bytes per second, 0: none */
    int slow_percent;           /* 0: none */
};

enum pf_state { PF_GOOD, PF_SUSPECT, PF_BAD };

/* What the judge knows after a round, and decides. */
struct pf_judge {
    int n;
    struct pf_bounds bounds;
    const struct pf_figure *local;  /* n entries (nccl), NULL (tcp) */
    int nlinks[2];
    const struct pf_link *links[2]; /* rounds 1 and 2 */
    const struct pf_figure *figs[2];/* one combined figure per link */
};

/* One node's line of the verdict. */
struct pf_node_verdict {
    enum pf_state state;            /* GOOD or BAD */
    int link;                       /* the link whose figures describe it (-1: none) */
    int link_round;                 /* 0 or 1 */
    char kind[24];                  /* bad: "slow", "unreachable", "failed", "own GPUs" */
    char reason[PF_REASON_MAX * 2]; /* why bad ("" when good) */
};

/* Round 1's links for n nodes into links (room for n entries); returns their number (0 for one
 * node). */
int pf_plan_round1(int n, struct pf_link *links);

/* Both ends' figures of one link as the link's: both ok, the longer round trip and the lower
 * bandwidth; else not ok, with each end's reason, named by node (names may be NULL). */
void pf_figure_combine(const struct pf_figure *a, const struct pf_figure *b, const char *na,
                       const char *nb, struct pf_figure *out);

/* The median a figure is measured against: the upper median of the bandwidths of the tests that
 * ran to the end, -1 when none did. */
double pf_median_bw(const struct pf_figure *figs, int n);

/* Whether a figure passes, against the bounds and a median (< 0: no median); when not, why into
 * why ("" when it passes). */
bool pf_figure_passes(const struct pf_figure *f, const struct pf_bounds *b, double median,
                      char *why, size_t len);

/* After round 1 (j->nlinks[1] == 0): every node's state into state[n]; the round-2 links into
 * links2 (room for n entries); returns their number (0: no round 2 is needed). */
int pf_plan_round2(const struct pf_judge *j, enum pf_state *state, struct pf_link *links2);

/* After the last round: every node's verdict into v[n]; returns the number of bad nodes. names
 * (n entries) name the nodes in the reasons. */
int pf_verdict(const struct pf_judge *j, const char *const *names, struct pf_node_verdict *v);

/* "2.10 GB/s", "35.2 MB/s", "900 KB/s"; "0.12 ms"; "-" for a figure not measured. */
void pf_format_bw(double bw, char *buf, size_t len);
void pf_format_rtt(double rtt, char *buf, size_t len);

#endif
