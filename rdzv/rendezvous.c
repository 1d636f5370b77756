/* rdzv/rendezvous.c — the launcher's one rendezvous API (rendezvous.h): the parameters every
 * backend shares, their defaults, the choice of backend, and the calls forwarded to it. */
#include "rdzv/rendezvous.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>

#include "rdzv/store/acl.h"
#include "rdzv/store/aclient.h"
#include "rdzv/backend.h"
#include "rdzv/member.h"
#include "rdzv/records.h"

static const rdzv_backend_t *const backends[] = {&rdzv_backend_store, &rdzv_backend_etcd};

void rdzv_params_default(rdzv_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->min_nodes = p->max_nodes = 1;
    p->want_rank = -1;
    p->join_timeout = 600;
    p->last_call_timeout = 30;
    p->close_timeout = 30;
    p->keep_alive_interval = 1;
    p->keep_alive_max_attempt = 3;
    p->progress_interval = 5;
    p->read_timeout = 60;
}

uint64_t rdzv_heartbeat_ms(const rdzv_params_t *p)
{
    double every = p->keep_alive_interval > 0 ? p->keep_alive_interval : 1;
    int attempts = p->keep_alive_max_attempt > 0 ? p->keep_alive_max_attempt : 3;
    int nodes = p->max_nodes > 0 ? p->max_nodes : 1;
    double ms = 1000.0 * every * ((nodes + RDZV_HEARTBEAT_RATE - 1) / RDZV_HEARTBEAT_RATE);
    double most = 1000.0 * RDZV_HANG_FACTOR * every * attempts / 3;
    if (ms > most)
        ms = most;
    return ms < 1 ? 1 : (uint64_t)ms;
}

/* Every field left at 0 (or below) gets its value from rdzv_params_default. */
static void fill_defaults(rdzv_params_t *p)
{
    rdzv_params_t d;
    rdzv_params_default(&d);
    if (p->join_timeout <= 0)
        p->join_timeout = d.join_timeout;
    if (p->last_call_timeout <= 0)
        p->last_call_timeout = d.last_call_timeout;
    if (p->close_timeout <= 0)
        p->close_timeout = d.close_timeout;
    if (p->keep_alive_interval <= 0)
        p->keep_alive_interval = d.keep_alive_interval;
    if (p->keep_alive_max_attempt <= 0)
        p->keep_alive_max_attempt = d.keep_alive_max_attempt;
    if (p->progress_interval <= 0)
        p->progress_interval = d.progress_interval;
    if (p->read_timeout <= 0)
        p->read_timeout = d.read_timeout;
}

/* The backend `name` names (NULL: the store), or NULL for an unknown one. */
static const rdzv_backend_t *find_backend(const char *name)
{
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
        if (!name || strcmp(name, backends[i]->name) == 0)
            return backends[i];
    return NULL;
}

/* The parameters every backend relies on: a run id that can be part of a key (no '/'), sane
 * node counts and ranks. What only one backend needs (the store's endpoint) it checks itself. */
int rdzv_agent_start(uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                     const rdzv_callbacks_t *cb, void *arg, rdzv_agent_t **out)
{
    *out = NULL;
    char prefix[RDZV_RUN_ID_MAX + 16];
    if (!loop || !p || !self || !cb || !p->run_id || !*p->run_id ||
        rdzv_run_prefix(prefix, sizeof prefix, p->run_id) < 0 || p->min_nodes < 1 || p->max_nodes < p->min_nodes ||
        p->want_rank < -1 || p->max_restarts < 0 || self->nproc < 0)
        return -EINVAL;
    const rdzv_backend_t *b = find_backend(p->backend);
    if (!b)
        return -EINVAL;
    rdzv_params_t q = *p;
    fill_defaults(&q);
    int r = b->start(loop, &q, self, cb, arg, out);
    if (r == 0)
        (*out)->backend = b;
    return r;
}

int rdzv_agent_report_failure(rdzv_agent_t *a, const rdzv_failure_t *f)
{
    return a->backend->report_failure(a, f);
}

int rdzv_agent_report_done(rdzv_agent_t *a)
{
    return a->backend->report_done(a);
}

int rdzv_agent_report_peer_lost(rdzv_agent_t *a, const char *name, const char *addr,
                                const char *reason)
{
    if (!a->backend->report_peer_lost)
        return -ENOTSUP;
    return a->backend->report_peer_lost(a, name ? name : "", addr ? addr : "",
                                        reason ? reason : "");
}

int rdzv_agent_report_health(rdzv_agent_t *a, const rdzv_health_t *h)
{
    if (!a->backend->report_health)
        return -ENOTSUP;
    return a->backend->report_health(a, h);
}

int rdzv_agent_leave(rdzv_agent_t *a, const char *reason, void (*sent)(void *), void *arg)
{
    return a->backend->leave(a, reason, sent, arg);
}

void rdzv_agent_set_progress(rdzv_agent_t *a, long long progress)
{
    if (a)   /* every backend's agent begins with its member (backend.h) */
        member_set_progress((rdzv_member_t *)a, progress);
}

int rdzv_agent_rejoin(rdzv_agent_t *a)
{
    return a->backend->rejoin(a);
}

void rdzv_agent_close(rdzv_agent_t *a, void (*closed)(void *), void *arg)
{
    if (a)
        a->backend->close(a, closed, arg);
}

void rdzv_agent_stats(const rdzv_agent_t *a, rdzv_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (a && a->backend->stats)
        a->backend->stats(a, out);
}

uint16_t rdzv_agent_store_port(const rdzv_agent_t *a)
{
    return a->backend->store_port(a);
}

/* ---- who hosts ---- */

static int addr_parse(const char *text, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (uv_ip4_addr(text, 0, (struct sockaddr_in *)ss) == 0)
        return 0;
    return uv_ip6_addr(text, 0, (struct sockaddr_in6 *)ss);
}

/* Does address sa stand for this node: local_addr itself when one is given (agents sharing a
 * machine each have their own), else loopback or any interface's address. */
static int addr_is_self(const struct sockaddr *sa, const char *local_addr)
{
    if (local_addr) {
        struct sockaddr_storage la;
        return addr_parse(local_addr, &la) == 0 &&
               acl_same_ip(sa, (const struct sockaddr *)&la);
    }
    return store_aclient_is_local(sa);
}

/* This machine's host name, short or full, either way round ("node-1" and "node-1.example"). */
static int is_own_name(const char *name)
{
    char hn[256];
    if (strcmp(name, "localhost") == 0)
        return 1;
    if (podrun_hostname(hn, sizeof hn) < 0 || !hn[0])
        return 0;
    size_t el = strlen(name), hl = strlen(hn);
    if (strcmp(name, hn) == 0)
        return 1;
    if (el < hl && strncmp(hn, name, el) == 0 && hn[el] == '.')
        return 1;
    return hl < el && strncmp(name, hn, hl) == 0 && name[hl] == '.';
}

int rdzv_endpoint_is_local(const char *endpoint_host, const char *local_addr)
{
    if (!endpoint_host || !*endpoint_host)
        return 0;
    if (local_addr && !*local_addr)
        local_addr = NULL;
    if (local_addr && strcmp(endpoint_host, local_addr) == 0)
        return 1;
    struct sockaddr_storage ss;
    if (addr_parse(endpoint_host, &ss) == 0)
        return addr_is_self((const struct sockaddr *)&ss, local_addr);
    if (!local_addr && is_own_name(endpoint_host))
        return 1;
    /* a name: what it resolves to (once, at start; torchrun asks the resolver too) */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(endpoint_host, NULL, &hints, &res) != 0)
        return 0;
    int found = 0;
    for (struct addrinfo *ai = res; ai && !found; ai = ai->ai_next)
        found = (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
                addr_is_self(ai->ai_addr, local_addr);
    freeaddrinfo(res);
    return found;
}
