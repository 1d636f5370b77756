/* rdzv/member.c — one node's side of the rendezvous, for every backend (member.h says what is
 * the member's and what is the transport's). Protocol: rdzv/rendezvous.h. */
#include "rdzv/member.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- lifetime ---- */

/* A copy of an optional string: NULL and "" both mean "not given" and stay NULL. */
int member_copy_str(char **dst, const char *src)
{
    *dst = NULL;
    if (!src || !*src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

int member_init(rdzv_member_t *m, const rdzv_backend_t *backend, const rdzv_transport_t *t,
                uv_loop_t *loop, const rdzv_params_t *p, const rdzv_node_desc_t *self,
                const rdzv_callbacks_t *cb, void *arg)
{
    m->base.backend = backend;
    m->t = t;
    m->loop = loop;
    m->p = *p;
    m->cb = *cb;
    m->arg = arg;
    m->nproc = self->nproc;
    m->service = self->service;
    m->progress = -1;
    sfmt(m->domain, sizeof m->domain, "%s", self->domain ? self->domain : "");
    m->state = MS_STARTING;
    m->node_rank = -1;
    m->end_round = -1;
    if (member_copy_str(&m->run_id, p->run_id) || member_copy_str(&m->local_addr, p->local_addr) ||
        member_copy_str(&m->expected, p->expected))
        return -ENOMEM;
    m->p.run_id = m->run_id;
    m->p.expected = m->expected;
    podrun_hostname(m->hostname, sizeof m->hostname);
    sfmt(m->name, sizeof m->name, "%s", self->name && *self->name ? self->name : m->hostname);
    sfmt(m->addr, sizeof m->addr, "%s",
         self->addr && *self->addr ? self->addr : m->local_addr ? m->local_addr : m->name);
    podrun_random_id(m->id, 16);
    if (rdzv_run_prefix(m->prefix, sizeof m->prefix, m->run_id ? m->run_id : "") < 0)
        return -EINVAL;
    m->plen = strlen(m->prefix);
    return 0;
}

void member_free(rdzv_member_t *m)
{
    void (*closed)(void *) = m->closed;
    void *arg = m->closed_arg;
    if (m->t->release)
        m->t->release(m);
    free(m->run_id);
    free(m->local_addr);
    free(m->expected);
    free(m->end_val);
    free(m);
    if (closed)
        closed(arg);
}

void member_maybe_free(rdzv_member_t *m)
{
    if (m->closing == 2 && m->handles == 0 && m->pending == 0 && !m->server)
        member_free(m);
}

void member_on_handle_closed(uv_handle_t *h)
{
    rdzv_member_t *m = h->data;
    m->handles--;
    member_maybe_free(m);
}

static void on_server_closed(void *arg)
{
    rdzv_member_t *m = arg;
    m->server = NULL;
    member_maybe_free(m);
}

void member_timer_init(rdzv_member_t *m, uv_timer_t *t)
{
    uv_timer_init(m->loop, t);
    t->data = m;
    m->handles++;
}

void member_close_handles(rdzv_member_t *m)
{
    uv_close((uv_handle_t *)&m->prog_timer, member_on_handle_closed);
    uv_close((uv_handle_t *)&m->defer_timer, member_on_handle_closed);
    m->closing = 2;
    if (m->server)
        store_server_close(m->server, on_server_closed, m);
    else
        member_maybe_free(m);
}

void member_on_store_log(void *arg, const char *line)
{
    rdzv_member_t *m = arg;
    if (m->cb.store_log)
        m->cb.store_log(m->arg, line);
}

void member_progress(rdzv_member_t *m, const char *fmt, ...)
{
    char line[RDZV_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (m->cb.progress)
        m->cb.progress(m->arg, line);
}

/* ---- the progress timer ---- */

static void on_prog_timer(uv_timer_t *t)
{
    rdzv_member_t *m = t->data;
    m->t->tick(m);
}

void member_timers_init(rdzv_member_t *m)
{
    member_timer_init(m, &m->prog_timer);
    member_timer_init(m, &m->defer_timer);
}

void member_start_progress(rdzv_member_t *m)
{
    uint64_t pi = (uint64_t)(m->p.progress_interval * 1000);
    uv_timer_start(&m->prog_timer, on_prog_timer, pi < 1000 ? pi : 1000, pi);
}

/* The waiting is over (lost, finished, leaving, closing): no more progress lines, and the
 * transport's periodic work for it stops. */
static void stop_waiting(rdzv_member_t *m)
{
    uv_timer_stop(&m->prog_timer);
    if (m->t->halt)
        m->t->halt(m);
}

/* ---- this node in the job ---- */

void member_fail(rdzv_member_t *m, int err, const char *why)
{
    if (m->state == MS_DEAD || m->closing)
        return;
    m->state = MS_DEAD;
    stop_waiting(m);
    if (m->cb.lost)
        m->cb.lost(m->arg, err, why);
}

int member_done_anyway(const rdzv_member_t *m)
{
    return m->closing || m->leaving || m->state == MS_FINISHED ||
           (m->state == MS_STOPPED && m->stop_action == RDZV_EXIT);
}

void member_key(const rdzv_member_t *m, char *out, size_t cap, const char *what, int num)
{
    rdzv_node_key(out, cap, m->prefix, m->id, what, num);
}

/* Fails the member with "<what> <the transport's place>". */
static void fail_at(rdzv_member_t *m, int err, const char *what)
{
    char why[RDZV_LINE_MAX];
    sfmt(why, sizeof why, "%s %s", what, m->t->what);
    member_fail(m, err, why);
}

static void finish(rdzv_member_t *m)
{
    m->state = MS_FINISHED;
    stop_waiting(m);
    if (m->cb.finished)
        m->cb.finished(m->arg);
}

void member_set_progress(rdzv_member_t *m, long long progress)
{
    m->progress = progress < 0 ? -1 : progress;
}

int member_join(rdzv_member_t *m)
{
    rdzv_desc_rec_t d;
    char key[320], val[1024];
    memset(&d, 0, sizeof d);
    sfmt(d.name, sizeof d.name, "%s", m->name);
    sfmt(d.addr, sizeof d.addr, "%s", m->addr);
    sfmt(d.host, sizeof d.host, "%s", m->hostname);
    d.nproc = m->nproc;
    d.service = m->service;
    sfmt(d.domain, sizeof d.domain, "%s", m->domain);
    d.want_rank = m->p.want_rank;
    d.pid = (int)getpid();
    d.has_progress = m->progress >= 0 && m->progress <= RDZV_PROGRESS_MAX;
    d.progress = d.has_progress ? m->progress : 0;
    int len = rdzv_desc_encode(&d, val, sizeof val);
    if (len >= 0 && m->t->join_extra) {
        kvbuf_t b = {val, sizeof val, (size_t)len, 0};
        m->t->join_extra(m, &b);
        len = b.overflow ? -ENOSPC : (int)b.len;
    }
    m->state = MS_JOINING;
    member_key(m, key, sizeof key, "join", m->join_k);
    int rc = len < 0 ? len : m->t->join(m, key, val, (size_t)len);
    if (rc < 0)
        fail_at(m, PODRUN_ESTORELOST, "could not send the join to");
    return rc;
}

/* The end record of the running round: finished, or the job's stop decision (this node's own
 * first record, if any, is found for the launcher's exit code). An unreadable record leaves
 * nothing to act on: this node is out (store lost). */
static void end_of_round(rdzv_member_t *m, const char *val, size_t len)
{
    rdzv_failure_t failures[RDZV_MAX_FAILURES];
    rdzv_decision_t d;
    int r = rdzv_end_decode(val, len, &d, failures);
    if (r < 0) {
        fail_at(m, PODRUN_ESTORELOST, "unreadable end-of-round record from");
        return;
    }
    if (r == 1) {
        finish(m);
        return;
    }
    for (int i = 0; i < d.n; i++)
        if (failures[i].node_rank == m->node_rank && strcmp(failures[i].node_name, m->name) == 0) {
            d.own = i;
            break;
        }
    m->state = MS_STOPPED;
    m->stop_action = d.action;
    if (m->cb.stopped)
        m->cb.stopped(m->arg, &d);
}

void member_on_end(rdzv_member_t *m, int round, const char *val, size_t len)
{
    if (round < m->end_round || m->closing)
        return;
    char *v = malloc(len + 1);
    if (v) {
        memcpy(v, val, len);
        v[len] = '\0';
        free(m->end_val);
        m->end_val = v;
        m->end_len = len;
        m->end_round = round;
    }
    if (m->state == MS_RUNNING && round == m->round)
        end_of_round(m, val, len);
}

void member_on_ending(rdzv_member_t *m, int round)
{
    if (m->cb.ending)
        m->cb.ending(m->arg, round);
}

/* The answer to this node's join: an assignment (RUNNING: wait for the round's end, then start
 * the workers through assigned()) or an error that ends this node's part in the job ("finished"
 * is not one: the job is done and this node exits 0 with it). */
void member_on_assign(rdzv_member_t *m, const char *val, size_t len)
{
    if (m->state != MS_JOINING || m->closing || len == 0)
        return;
    rdzv_assignment_t as;
    char host[RDZV_NAME_MAX], err[32], text[RDZV_LINE_MAX];
    if (rdzv_assign_decode(val, len, &as, host, sizeof host, err, sizeof err, text,
                           sizeof text) < 0) {
        fail_at(m, PODRUN_ESTORELOST, "unreadable assignment from");
        return;
    }
    if (err[0]) {
        if (strcmp(err, "finished") == 0) {
            member_progress(m, "%s", text);
            finish(m);
        } else {
            member_fail(m,
                        strcmp(err, "timeout") == 0      ? PODRUN_EJOINTIMEOUT
                        : strcmp(err, "rejected") == 0   ? PODRUN_EREJECTED
                        : strcmp(err, "excluded") == 0   ? PODRUN_EEXCLUDED
                        : strcmp(err, "noprogress") == 0 ? PODRUN_ENOPROGRESS
                                                         : PODRUN_EENDED,
                        text);
        }
        return;
    }
    m->state = MS_RUNNING;
    m->round = as.round;
    m->node_rank = as.node_rank;
    uv_timer_stop(&m->prog_timer);
    if (m->t->assigned && m->t->assigned(m, val, len) < 0) {
        fail_at(m, PODRUN_ESTORELOST, "could not wait on");
        return;
    }
    if (m->cb.assigned)
        m->cb.assigned(m->arg, &as);
    if (m->state == MS_RUNNING && m->end_round == m->round && m->end_val)
        end_of_round(m, m->end_val, m->end_len);
}

/* ---- the backend-table entries ---- */

/* The record goes out through the transport; the node's own name, address and the time fill
 * what the caller left out. Only while a round runs or has just stopped. */
int member_report_failure(rdzv_agent_t *base, const rdzv_failure_t *f)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    if (m->state != MS_RUNNING && m->state != MS_STOPPED)
        return -EINVAL;
    char key[320], val[2048];
    rdzv_failure_t g = *f;
    if (!g.node_name[0])
        sfmt(g.node_name, sizeof g.node_name, "%s", m->name);
    if (!g.host[0])
        sfmt(g.host, sizeof g.host, "%s", m->addr);
    if (g.time <= 0)
        g.time = podrun_time_epoch();
    int len = rdzv_failure_encode(&g, val, sizeof val);
    if (len < 0)
        return len;
    member_key(m, key, sizeof key, "fail", m->round);
    return m->t->put(m, key, val, (size_t)len, 0);
}

int member_report_done(rdzv_agent_t *base)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    if (m->state != MS_RUNNING)
        return -EINVAL;
    char key[320];
    member_key(m, key, sizeof key, "done", m->round);
    return m->t->put(m, key, "1", 1, 0);
}

/* The record names the lost node by what it joined with; the coordinator matches it against
 * the members of the round this agent runs in, so a report that arrives after that round is
 * over changes nothing. */
int member_report_peer_lost(rdzv_agent_t *base, const char *name, const char *addr,
                            const char *reason)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    if (m->state != MS_RUNNING)
        return -EINVAL;
    char key[320], val[1024];
    kvbuf_t b;
    kv_init(&b, val, sizeof val);
    kv_add(&b, "name", name, RDZV_NAME_MAX - 1);
    kv_add(&b, "addr", addr, RDZV_NAME_MAX - 1);
    kv_add(&b, "reason", reason, RDZV_REASON_MAX - 1);
    member_key(m, key, sizeof key, "peer", m->round);
    return m->t->put(m, key, val, b.len, 0);
}

/* A new state, interval or finding is a record; a check that found what the last one did
 * leaves only its time, for the transport's next periodic write to carry (rendezvous.h: a
 * healthy job writes no more than its heartbeats however often it checks). */
int member_report_health(rdzv_agent_t *base, const rdzv_health_t *h)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    const rdzv_health_t *o = &m->health_sent;
    if (h->state == o->state && h->interval == o->interval && strcmp(h->why, o->why) == 0) {
        m->health_unsent = h->checked;
        return 0;
    }
    char key[320], val[512];
    int len = rdzv_health_encode(h, podrun_time_epoch(), val, sizeof val);
    if (len < 0)
        return len;
    member_key(m, key, sizeof key, "health", -1);
    int r = m->t->put(m, key, val, (size_t)len, 0);
    if (r == 0) {
        m->health_sent = *h;
        m->health_unsent = 0;
    }
    return r;
}

/* Runs the leave's `sent` callback, once. */
static void leave_done(rdzv_member_t *m)
{
    void (*sent)(void *) = m->leave_sent;
    m->leave_sent = NULL;
    if (sent)
        sent(m->leave_arg);
}

void member_leave_sent(rdzv_member_t *m)
{
    leave_done(m);
    member_maybe_free(m);
}

static void on_defer(uv_timer_t *t)
{
    leave_done(t->data);
}

/* The leave record goes out if the transport has something to send it on; `sent` runs once it
 * is written, or from the loop at once when it cannot be (never from inside this call). */
int member_leave(rdzv_agent_t *base, const char *reason, void (*sent)(void *), void *arg)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    if (m->leaving || m->closing)
        return -EALREADY;
    m->leaving = 1;
    m->leave_sent = sent;
    m->leave_arg = arg;
    stop_waiting(m);
    char key[320], val[RDZV_REASON_MAX];
    sfmt(val, sizeof val, "%s", reason ? reason : "shutting down");
    member_key(m, key, sizeof key, "leave", -1);
    if (m->t->put(m, key, val, strlen(val), 1) == 0)
        return 0;
    uv_timer_start(&m->defer_timer, on_defer, 0, 0);
    return 0;
}

/* The next join (k+1) of a stopped agent: a fresh answer key, so no answer to the last join can
 * be read as this one's. */
int member_rejoin(rdzv_agent_t *base)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    if (m->state != MS_STOPPED || m->stop_action != RDZV_RESTART || m->closing || m->leaving)
        return -EINVAL;
    m->join_k++;
    int rc = member_join(m);
    if (rc == 0)
        member_start_progress(m);
    return rc;
}

/* Stops the waiting and hands over to the transport, which closes what it holds and then
 * calls member_close_handles; `closed` runs once everything is freed. */
void member_close(rdzv_agent_t *base, void (*closed)(void *), void *arg)
{
    rdzv_member_t *m = (rdzv_member_t *)base;
    if (m->closing)
        return;
    m->closing = 1;
    m->closed = closed;
    m->closed_arg = arg;
    stop_waiting(m);
    uv_timer_stop(&m->defer_timer);
    m->t->close(m);
}

uint16_t member_store_port(const rdzv_agent_t *base)
{
    return ((const rdzv_member_t *)base)->port;
}
