/* launcher/preflight/tcp.h — the tcp check of one link, agent to agent, on the agent's loop.
 *
 * Every agent listens (pf_tcp_listen) while the check runs; for each link both ends connect to
 * each other at once (pf_tcp_probe), so each direction is measured by the end that sends: first
 * round trips (small messages echoed back, the median of them), then throughput (a block of
 * `bytes` the listener counts and acknowledges; bytes over the time until the acknowledgement).
 * Nothing goes through the job store. Every step is bounded by the probe's deadline; a probe ends
 * with exactly one call of its callback.
 *
 * Wire format on a probe's connection: the 8 bytes "podrunpf", then messages: 'P' and 63 bytes
 * (echoed back whole), or 'B', an 8-byte big-endian length N and N bytes (answered with 'A' and
 * the 8-byte count). A connection that does not start with the 8 bytes is closed. */
#ifndef PODRUN_PREFLIGHT_TCP_H
#define PODRUN_PREFLIGHT_TCP_H

#include <stdint.h>
#include <uv.h>

#include "launcher/preflight/plan.h"

#define PF_TCP_PINGS 10

typedef struct pf_tcp_server pf_tcp_server_t;
typedef struct pf_tcp_probe pf_tcp_probe_t;

/* Listens on host (NULL: every address) at a free port, written to *port. 0 or a libuv error. */
int pf_tcp_listen(uv_loop_t *loop, const char *host, uint16_t *port, pf_tcp_server_t **out);
/* Closes the listener and every connection it serves; freed once closed. */
void pf_tcp_server_close(pf_tcp_server_t *s);

typedef void (*pf_tcp_done_cb)(void *arg, const struct pf_figure *f);

/* Measures the direction towards host:port; done() once, from the loop, with ok and the figures
 * or with why not (connect, a closed connection, the deadline). 0 or a libuv error (then done
 * is not called). */
int pf_tcp_probe(uv_loop_t *loop, const char *host, uint16_t port, uint64_t bytes,
                 uint64_t timeout_ms, pf_tcp_done_cb done, void *arg, pf_tcp_probe_t **out);
/* Stops a probe whose done() has not run; done() then never runs. */
void pf_tcp_probe_cancel(pf_tcp_probe_t *p);

#endif
