/* rdzv/relay.h — the end of a round relayed through the job's own agents, so that the store host
 * writes a decision to a few agents instead of to every one. Pure code: no I/O, no globals.
 *
 * The members of a round that can relay (their join record names a relay port) are put in node
 * rank order, j = 0..n-1, and laid out as a heap with F roots, F = relay_fanout(n): members
 * 0..F-1 are the roots, member j's children are (j+1)F .. (j+1)F+F-1, its parent j/F - 1. A root
 * WAITs on the round's end in the store as every agent used to; every other member is "fed": it
 * has no WAIT on the end, its parent sends it the end record in one datagram as soon as it has it,
 * and it sends the record on to its own children at once. So the host writes a decision F times
 * (F <= RELAY_FANOUT_MAX, whatever the job's size) and the last member hears it after
 * log_F(n) relay hops.
 *
 * Nothing depends on a relay staying up: a fed member asks the store for the round's end record
 * with every heartbeat while its round runs (the GET's answer is also the host's sign of life,
 * in place of a PING), so a member whose parent died, stalled or lost the datagram learns the
 * decision within one heartbeat period, and sends it on to its own children.
 *
 * The coordinator writes each member's links into its assignment ("relay_from", "relay_to"), so
 * an agent needs nothing else to relay; a member without a relay port (another backend, an
 * older agent) is left out of the tree and WAITs itself. A datagram names the run, the round and
 * the receiving node rank; with a job token it carries an HMAC-SHA-256 of all of it under the
 * job's key (a forged or replayed-elsewhere end record is dropped), without one the receiver
 * takes it only from its parent's address and port, the trust the store itself gives without a
 * token.
 *
 * The restart goes through the same tree. After a restart decision a member of the stopped round
 * sends its next join record up to its parent in a datagram instead of writing it to the store;
 * each relay gathers its own and its subtree's (until all its children have sent, or
 * RELAY_GATHER_MS), sends them on up in one datagram, and a root writes them to the store in one
 * record ("P n/<id>/gather/<seq>": entries of id, join number and join record), which the
 * coordinator reads as that many joins. When the next round closes with every member in the place
 * it had (node rank, first global rank, the same members), the coordinator also writes the round's
 * "go" ("P r/<R>/go": round, restart count, "inplace"); the roots read it with their own
 * assignment and send it down the same tree, and each member makes its assignment from its last
 * one (only the round and the restart count change, the links stay). Otherwise the go says
 * "store" and each member reads its assignment from the store as before. A member whose go has not
 * come one heartbeat period after it sent its join up (its relay died, stalled or lost it, or the
 * round is slow to close) joins the store directly with the same join number, which the
 * coordinator takes as the same join. */
#ifndef PODRUN_RDZV_RELAY_H
#define PODRUN_RDZV_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv/records.h"
#include "rdzv/rendezvous.h"
#include "rdzv/store/auth.h"

#define RELAY_FANOUT_MAX 64      /* the host's writes per decision, at most */
#define RELAY_DGRAM_MAX 60000    /* the largest datagram sent; a longer end record is not relayed
                                    (its fed members read it with their next heartbeat) */
#define RELAY_MAC_HEX 32         /* the MAC's first 16 bytes, in hex */
#define RELAY_LINKS_MAX (RELAY_FANOUT_MAX * (RDZV_NAME_MAX + 20) + RDZV_NAME_MAX + 64)

/* The fan-out for a round of n relaying members: ceil(sqrt(n)), at least 2 and at most
 * RELAY_FANOUT_MAX, so that up to 4096 members are two hops from the host and the host's writes
 * stop growing beyond that. */
int relay_fanout(int n);
/* Member j's parent in the heap of fan-out f, or -1 for a root. */
int relay_parent(int j, int f);
/* How many children member j has among n (0..f); *first gets the first one's index. */
int relay_children(int j, int n, int f, int *first);

/* One end of a relay link: a numeric address and a UDP port, and the member's node rank. */
typedef struct relay_ep {
    int node_rank;
    uint16_t port;
    char addr[RDZV_NAME_MAX];
} relay_ep_t;

/* What an assignment says about the relay: fed (a parent sends this member the round's end; it
 * does not WAIT on it) with the parent, and the children this member sends it on to. */
typedef struct relay_links {
    int fed;
    relay_ep_t parent;
    int n;
    relay_ep_t child[RELAY_FANOUT_MAX];
} relay_links_t;

/* Adds the links to an assignment being written ("relay_from=rank@addr:port",
 * "relay_to=rank@addr:port rank@addr:port ..."); nothing for a member outside the tree. */
void relay_links_put(kvbuf_t *b, const relay_links_t *l);
/* Reads them back from an assignment; absent lines mean no links (zeroed: not fed, no children).
 * A malformed endpoint is dropped, so the worst a bad record does is leave this member to learn
 * the end from the store. */
void relay_links_take(const char *text, size_t len, relay_links_t *l);
/* Whether `addr` is a numeric IPv4 or IPv6 address, which a relay can send to without a lookup. */
int relay_addr_numeric(const char *addr);

#define RELAY_GATHER_MS 100     /* how long a relay holds its subtree's joins for a late child */
#define RELAY_GO_MAX 256        /* a go record's length, at most */

/* A datagram's kind: the round's end (down), joins (up), a round's go (down). */
enum { RELAY_END = 'Y', RELAY_JOINS = 'J', RELAY_GO = 'G' };

/* A datagram of `kind`: "PRL<kind>1 <round> <to> <mac or ->\n" then the record's bytes, the MAC
 * over the run id, round, receiver and record under the job's key (`key` NULL: no token, "-").
 * Returns the length (< cap), or -ENOSPC. */
int relay_kmsg_encode(const auth_key_t *key, const char *run_id, int kind, int round, int to,
                      const char *body, size_t blen, char *out, size_t cap);
/* Reads a datagram: 0 with its kind, the round, the receiving rank and the record (pointing into
 * msg), or -EINVAL for anything malformed or, with a key, not signed with it. */
int relay_kmsg_decode(const auth_key_t *key, const char *run_id, const char *msg, size_t len,
                      int *kind, int *round, int *to, const char **body, size_t *blen);
/* One join in a gather: "<16 hex id> <k> <len>\n" and the join record. Returns its length or
 * -ENOSPC. */
int relay_entry_put(char *out, size_t cap, const char *id, int k, const char *rec, size_t len);
/* The next entry of a gather [*p, end): 0 and *p moved past it, or -EINVAL (malformed: the rest
 * of the gather is dropped, and those members join directly a heartbeat period later). */
int relay_entry_next(const char **p, const char *end, uint64_t *id, int *k, const char **rec,
                     size_t *len);

/* A go record: "round=<R>\nrestart_count=<n>\nmode=inplace|store\n". Length or -ENOSPC. */
int relay_go_encode(int round, int restart_count, int inplace, char *out, size_t cap);
/* 0 with the fields, or -EINVAL. */
int relay_go_decode(const char *text, size_t len, int *round, int *restart_count, int *inplace);
/* The assignment of round `round` with `restart_count` made from this member's last one `last`
 * (its links kept), for an in-place go. Length or a negative code. */
int relay_assign_inplace(const char *last, size_t len, int round, int restart_count, char *out,
                         size_t cap);

#endif
