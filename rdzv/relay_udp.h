/* rdzv/relay_udp.h — an agent's relay socket on its loop (the tree and the datagram: relay.h).
 *
 * One UDP socket bound to the address the agent advertises, port chosen by the kernel. While a
 * round runs it takes that round's end record from its parent (checked: the round, this node's
 * rank, and the job token's MAC or, without a token, the parent's address and port), sends it on
 * to its children before anything else is done with it, and hands it to `cb` once per round.
 * Sending never blocks: a datagram the socket cannot take now is dropped, and the children read
 * the record from the store with their next heartbeat (relay.h). */
#ifndef PODRUN_RDZV_RELAY_UDP_H
#define PODRUN_RDZV_RELAY_UDP_H

#include <uv.h>

#include "rdzv/relay.h"

typedef struct relay_udp relay_udp_t;

/* A round's end record arrived from the parent: round, the record. */
typedef void (*relay_udp_cb)(void *arg, int round, const char *body, size_t blen);

/* Opens the socket on `addr` (a numeric address of this machine). `key` (NULL: no token) and
 * `run_id` must outlive the socket. 0, or a negative code (the address is not numeric or not
 * this machine's: the agent then waits on the store itself). */
int relay_udp_open(uv_loop_t *loop, const char *addr, const auth_key_t *key, const char *run_id,
                   relay_udp_cb cb, void *arg, relay_udp_t **out);
/* The port the socket is bound to. */
uint16_t relay_udp_port(const relay_udp_t *r);
/* The running round, this node's rank in it and its links (from its assignment): what the
 * socket takes from now on and whom it sends to. */
void relay_udp_links(relay_udp_t *r, int round, int node_rank, const relay_links_t *l);
/* Sends round `round`'s end record to every child, once per round (a second call for the same
 * round, from the store after the relay's datagram or the other way round, sends nothing).
 * Returns how many datagrams went out. */
int relay_udp_forward(relay_udp_t *r, int round, const char *body, size_t blen);
/* The restart through the tree (relay.h). `gather` writes joins that reached a node that takes
 * them to the store (a root, or a member that gave up on its parent): entries (relay_entry_put).
 * `go` is a round's go record from the parent (already sent on to the children). */
typedef void (*relay_udp_gather_cb)(void *arg, const char *entries, size_t len);
typedef void (*relay_udp_go_cb)(void *arg, const char *body, size_t blen);
void relay_udp_on_restart(relay_udp_t *r, relay_udp_gather_cb gather, relay_udp_go_cb go,
                          void *arg);
/* Whether this node has links in round `round` (a parent or children) to rejoin through. */
int relay_udp_in_tree(const relay_udp_t *r, int round);
/* This node rejoins: `entry` is its own join (relay_entry_put) to send up with its subtree's, or
 * NULL for a node that joins the store itself (its subtree's joins then go to `gather`). The
 * joins go up once every child has sent its own, or RELAY_GATHER_MS after the first one still
 * waiting. */
void relay_udp_rejoin(relay_udp_t *r, const char *entry, size_t len);
/* From now on the joins this node holds or still gets go to `gather`: its parent did not bring
 * the go in time. */
void relay_udp_direct(relay_udp_t *r);
/* Sends a go record (read from the store, or from the parent) on to the children, once per
 * round: 1, or 0 for a round whose go was sent on already. */
int relay_udp_go(relay_udp_t *r, const char *body, size_t blen);
/* Datagrams dropped: malformed, unsigned, from a stranger, or for another round or node. */
unsigned long relay_udp_dropped(const relay_udp_t *r);
/* Closes the socket; `closed` runs from the loop once it is closed, and the socket is freed. */
void relay_udp_close(relay_udp_t *r, void (*closed)(void *), void *arg);

#endif
