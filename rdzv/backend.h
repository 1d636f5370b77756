/* rdzv/backend.h — what a rendezvous backend implements behind rdzv/rendezvous.h.
 *
 * The launcher sees one API. rendezvous.c checks the parameters every backend shares, fills
 * their defaults, picks the backend by rdzv_params_t.backend and forwards each call. A backend
 * keeps rendezvous.h's whole contract (who decides, what is pushed, which callbacks run when,
 * and that `closed` runs last); only how nodes meet differs: "store" hosts the job store and the
 * coordinator in one agent (backend_store.c); "etcd" keeps the job's state in etcd, where any
 * agent can take over coordinating it (backend_etcd.c).
 *
 * An agent of any backend begins with rdzv_agent_t, so the API's handle is the backend's own
 * struct: rendezvous.c only ever reads `backend` from it. Both backends' agents begin with
 * rdzv_member_t (member.h), which holds the node's side of the protocol once; what a backend adds
 * is its transport, and the coordinator runs on a loop through host.h. */
#ifndef PODRUN_RDZV_BACKEND_H
#define PODRUN_RDZV_BACKEND_H

#include "rdzv/rendezvous.h"

typedef struct rdzv_backend {
    const char *name; /* what rdzv_params_t.backend names */
    /* rdzv_agent_start with parameters already checked and defaulted (strings still the
     * caller's: copy what outlives the call). */
    int (*start)(uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                 const rdzv_callbacks_t *cb, void *arg, rdzv_agent_t **out);
    int (*report_failure)(rdzv_agent_t *a, const rdzv_failure_t *f);
    int (*report_done)(rdzv_agent_t *a);
    /* optional (NULL: -ENOTSUP) */
    int (*report_peer_lost)(rdzv_agent_t *a, const char *name, const char *addr,
                            const char *reason);
    /* optional (NULL: -ENOTSUP) */
    int (*report_health)(rdzv_agent_t *a, const rdzv_health_t *h);
    int (*leave)(rdzv_agent_t *a, const char *reason, void (*sent)(void *), void *arg);
    int (*rejoin)(rdzv_agent_t *a);
    void (*close)(rdzv_agent_t *a, void (*closed)(void *), void *arg);
    uint16_t (*store_port)(const rdzv_agent_t *a);
    /* optional (NULL: zeroes) */
    void (*stats)(const rdzv_agent_t *a, rdzv_stats_t *out);
} rdzv_backend_t;

/* The first member of every backend's agent. */
struct rdzv_agent {
    const rdzv_backend_t *backend;
};

extern const rdzv_backend_t rdzv_backend_store;
extern const rdzv_backend_t rdzv_backend_etcd;

#endif
