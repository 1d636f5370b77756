/* launcher/preflight/preflight.c — the check's steps on the agent's loop (see preflight.h).
 *
 * One agent's way through the check, each step a store request or a test whose callback starts
 * the next one:
 *   connect to the job store (and, tcp, listen for the other agents)
 *   publish node/<me>; nccl: test this node's own GPUs, publish local/<me>
 *   judge: wait for every node/<k>, write plan/1 (skip=1 when every node passed before)
 *   read plan/1; run my links of round 1 in plan order: go barrier, test, publish res
 *   judge: wait for every result of the round (bounded), decide, write plan/2 (and, without a
 *     round 2, the verdict)
 *   read plan/2; run my links of round 2
 *   judge: wait for round 2's results, write the verdict
 *   read the verdict; say so (read/<me>) and wait until every agent has: done(); then the last
 *     agent through (done, a counter) deletes the keys; close.
 * Any store error ends the check with outcome.err; a wait that times out is a result ("no result
 * from node-3 within 120s"), not an error. */
#include "launcher/preflight/preflight.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/preflight/codec.h"
#include "launcher/preflight/nccl_helpers.h"
#include "rdzv/store/aclient.h"
#include "rdzv/base/common.h"
#include "launcher/preflight/tcp.h"
#include "rdzv/records.h"

#define PF_KEY_MAX 512     /* the prefix stays under PF_TEXT + 32, a key under this */
#define PF_TEXT 256

struct pf_get {
    struct preflight *pf;
    int idx;
};

struct preflight {
    struct pf_params p;
    char run_id[PF_TEXT], name[PF_NAME_MAX], addr[PF_HOST_MAX], bind[PF_TEXT];
    char store_host[PF_TEXT], exe[PF_TEXT * 4], nccl_lib[PF_TEXT * 4], cudart_lib[PF_TEXT * 4];
    char python[PF_TEXT * 4];
    char prefix[PF_KEY_MAX];
    char idprefix[PF_KEY_MAX];     /* nccl: the helpers' unique ids, outside "podrun/" */
    bool has_token;
    auth_key_t token;
    uint64_t t0;
    bool judge, done_called, cancelled, closing;
    int ops;                       /* store requests whose callbacks have not run */
    store_aclient_t *sc;
    pf_tcp_server_t *srv;
    uint16_t port;
    pf_tcp_probe_t *probe;
    pf_nccl_helpers_t *helpers;

    /* many GETs at once: values by index, then gdone */
    int ng, gpending;
    char **gv;
    size_t *gl;
    struct pf_get *gctx;
    void (*gdone)(struct preflight *pf);

    struct pf_node_rec *nodes;     /* n entries */
    bool *have_node;
    struct pf_plan_rec plan[2];
    int nplans;
    int r, li;                     /* the round and the link I am at */
    struct pf_figure local_self;   /* nccl: this node's own GPUs */
    struct pf_figure *local;       /* judge, nccl: every node's */
    struct pf_figure *link_figs[2];/* judge: combined per link */
    uint64_t timeout_ms;
    struct pf_verdict_rec verdict;
    bool have_verdict;
    char key[PF_KEY_MAX];
};

static void pf_step_plan(struct preflight *pf);
static void pf_to_plan(struct preflight *pf);
static void pf_next_link(struct preflight *pf);
static void pf_judge_round(struct preflight *pf);
static void pf_wait_verdict(struct preflight *pf);
static void pf_fail(struct preflight *pf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int pf_ms(uint64_t ms)
{
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static const char *pf_keyf(struct preflight *pf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *pf_keyf(struct preflight *pf, const char *fmt, ...)
{
    int n = snprintf(pf->key, sizeof pf->key, "%s", pf->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pf->key + n, sizeof pf->key - (size_t)n, fmt, ap);
    va_end(ap);
    return pf->key;
}

/* A key of the helpers' unique ids (idprefix), in the same buffer as pf_keyf's. */
static const char *pf_idkeyf(struct preflight *pf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *pf_idkeyf(struct preflight *pf, const char *fmt, ...)
{
    int n = snprintf(pf->key, sizeof pf->key, "%s", pf->idprefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pf->key + n, sizeof pf->key - (size_t)n, fmt, ap);
    va_end(ap);
    return pf->key;
}

static void pf_log(struct preflight *pf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pf_log(struct preflight *pf, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (pf->p.log)
        pf->p.log(pf->p.arg, line);
}

static const char *pf_node_name(struct preflight *pf, int k, char *buf, size_t len)
{
    if (pf->have_node[k] && pf->nodes[k].name[0])
        return pf->nodes[k].name;
    snprintf(buf, len, "node rank %d", k);
    return buf;
}

/* ---------- life ---------- */

static void pf_free(struct preflight *pf)
{
    for (int i = 0; i < pf->ng; i++)
        free(pf->gv[i]);
    free(pf->gv);
    free(pf->gl);
    free(pf->gctx);
    free(pf->nodes);
    free(pf->have_node);
    free(pf->local);
    if (pf->have_verdict)
        pf_verdict_free(&pf->verdict);
    for (int i = 0; i < 2; i++) {
        pf_plan_free(&pf->plan[i]);
        free(pf->link_figs[i]);
    }
    free(pf);
}

static void pf_maybe_free(struct preflight *pf)
{
    if (pf->closing && pf->ops == 0)
        pf_free(pf);
}

/* Lets go of everything: the probe and helpers stop, the listener and the connection close.
 * Closing the connection runs its pending callbacks, which must not free the check under us:
 * a reference is held meanwhile. */
static void pf_close(struct preflight *pf)
{
    if (pf->closing) {
        pf_maybe_free(pf);
        return;
    }
    pf->closing = true;
    pf->ops++;
    if (pf->probe)
        pf_tcp_probe_cancel(pf->probe);
    pf->probe = NULL;
    if (pf->helpers)
        pf_nccl_helpers_cancel(pf->helpers);
    pf->helpers = NULL;
    if (pf->srv)
        pf_tcp_server_close(pf->srv);
    pf->srv = NULL;
    store_aclient_t *sc = pf->sc;
    pf->sc = NULL;
    if (sc)
        store_aclient_close(sc);
    pf->ops--;
    pf_maybe_free(pf);
}

static void pf_outcome_init(struct preflight *pf, struct pf_outcome *o)
{
    memset(o, 0, sizeof *o);
    o->nnodes = pf->p.nnodes;
    o->seconds = (double)(uv_hrtime() - pf->t0) / 1e9;
}

/* The one call of done(); the caller may cancel from inside it, so a reference is held. */
static void pf_deliver(struct preflight *pf, const struct pf_outcome *o)
{
    if (pf->done_called || pf->cancelled)
        return;
    pf->done_called = true;
    pf->ops++;
    pf->p.done(pf->p.arg, o);
    pf->ops--;
}

static void pf_fail(struct preflight *pf, const char *fmt, ...)
{
    struct pf_outcome o;
    pf_outcome_init(pf, &o);
    o.err = -EIO;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o.why, sizeof o.why, fmt, ap);
    va_end(ap);
    pf_deliver(pf, &o);
    pf_close(pf);
}

/* Every store callback starts here: false when the check is over and the reply means nothing. */
static bool pf_reply(struct preflight *pf)
{
    pf->ops--;
    if (pf->closing || pf->cancelled) {
        pf_maybe_free(pf);
        return false;
    }
    return true;
}

/* ---------- store helpers ---------- */

static void pf_set_done(store_aclient_t *c, int status, const char *v, size_t l, int64_t n,
                        void *arg)
{
    (void)c, (void)v, (void)l, (void)n;
    struct preflight *pf = arg;
    if (pf_reply(pf) && status < 0)
        pf_fail(pf, "cannot write to the job store: %s", podrun_strerror(status));
}

static void pf_set(struct preflight *pf, const char *key, const textbuf_t *b)
{
    if (b->cut || !pf->sc) {
        pf_fail(pf, "out of memory");
        return;
    }
    pf->ops++;
    int r = store_aclient_set(pf->sc, key, b->s, b->len, pf_set_done, pf);
    if (r < 0) {
        pf->ops--;
        pf_fail(pf, "cannot write to the job store: %s", podrun_strerror(r));
    }
}

static void pf_got(store_aclient_t *c, int status, const char *val, size_t len, int64_t num,
                   void *arg)
{
    (void)c, (void)num;
    struct pf_get *g = arg;
    struct preflight *pf = g->pf;
    if (!pf_reply(pf))
        return;
    if (status < 0) {
        pf_fail(pf, "cannot read the job store: %s", podrun_strerror(status));
        return;
    }
    free(pf->gv[g->idx]);
    pf->gv[g->idx] = malloc(len + 1);
    if (pf->gv[g->idx]) {
        memcpy(pf->gv[g->idx], val, len);
        pf->gv[g->idx][len] = '\0';
    }
    pf->gl[g->idx] = len;
    if (--pf->gpending == 0)
        pf->gdone(pf);
}

/* GETs keys[0..n) (a missing key reads as empty); then done(pf) with pf->gv/gl. */
static void pf_get_all(struct preflight *pf, char **keys, int n, void (*done)(struct preflight *))
{
    for (int i = 0; i < pf->ng; i++)
        free(pf->gv[i]);
    free(pf->gv);
    free(pf->gl);
    free(pf->gctx);
    pf->ng = n;
    pf->gv = calloc((size_t)(n ? n : 1), sizeof *pf->gv);
    pf->gl = calloc((size_t)(n ? n : 1), sizeof *pf->gl);
    pf->gctx = calloc((size_t)(n ? n : 1), sizeof *pf->gctx);
    if (!pf->gv || !pf->gl || !pf->gctx) {
        pf->ng = 0;
        pf_fail(pf, "out of memory");
        return;
    }
    pf->gdone = done;
    pf->gpending = n;
    if (n == 0) {
        done(pf);
        return;
    }
    for (int i = 0; i < n; i++) {
        pf->gctx[i] = (struct pf_get){pf, i};
        pf->ops++;
        int r = store_aclient_get(pf->sc, keys[i], pf_got, &pf->gctx[i]);
        if (r < 0) {
            pf->ops--;
            pf_fail(pf, "cannot read the job store: %s", podrun_strerror(r));
            return;
        }
    }
}

/* A list of keys built with pf_keyf, one allocation each. */
struct pf_keys {
    char **k;
    int n, cap;
};

static void pf_keys_add(struct pf_keys *ks, const char *key)
{
    if (ks->n == ks->cap) {
        int cap = ks->cap ? 2 * ks->cap : 16;
        char **k2 = realloc(ks->k, (size_t)cap * sizeof *k2);
        if (!k2)
            return;
        ks->k = k2;
        ks->cap = cap;
    }
    if ((ks->k[ks->n] = strdup(key)))
        ks->n++;
}

static void pf_keys_free(struct pf_keys *ks)
{
    for (int i = 0; i < ks->n; i++)
        free(ks->k[i]);
    free(ks->k);
    memset(ks, 0, sizeof *ks);
}

/* WAITs for keys (timeout: then on anyway, the missing ones read as empty), then GETs them. */
struct pf_wait {
    struct preflight *pf;
    struct pf_keys keys;
    void (*then)(struct preflight *pf);
};

static void pf_waited(store_aclient_t *c, int status, const char *v, size_t l, int64_t n,
                      void *arg)
{
    (void)c, (void)v, (void)l, (void)n;
    struct pf_wait *w = arg;
    struct preflight *pf = w->pf;
    if (pf_reply(pf)) {
        if (status < 0 && status != PODRUN_ETIMEDOUT)
            pf_fail(pf, "cannot wait on the job store: %s", podrun_strerror(status));
        else
            pf_get_all(pf, w->keys.k, w->keys.n, w->then);
    }
    pf_keys_free(&w->keys);
    free(w);
}

static void pf_wait_get(struct preflight *pf, struct pf_keys *keys, uint64_t timeout_ms,
                        void (*then)(struct preflight *))
{
    struct pf_wait *w = calloc(1, sizeof *w);
    if (!w || keys->n == 0) {
        if (w && keys->n == 0) {
            free(w);
            pf_keys_free(keys);
            pf_get_all(pf, NULL, 0, then);
            return;
        }
        pf_keys_free(keys);
        pf_fail(pf, "out of memory");
        return;
    }
    w->pf = pf;
    w->keys = *keys;
    w->then = then;
    memset(keys, 0, sizeof *keys);
    pf->ops++;
    int r = store_aclient_wait(pf->sc, (const char *const *)w->keys.k, (size_t)w->keys.n,
                               pf_ms(timeout_ms), pf_waited, w);
    if (r < 0) {
        pf->ops--;
        pf_keys_free(&w->keys);
        free(w);
        pf_fail(pf, "cannot wait on the job store: %s", podrun_strerror(r));
    }
}

/* ---------- the nodes ---------- */

/* Judge: every node's record is in (or its wait timed out): plan/1. */
static void pf_nodes_read(struct preflight *pf)
{
    size_t n = (size_t)pf->p.nnodes;
    bool all_passed = true;
    for (size_t k = 0; k < n; k++) {
        pf->have_node[k] = pf->gv[k] && pf_node_decode(pf->gv[k], pf->gl[k], &pf->nodes[k]) == 0;
        all_passed = all_passed && pf->have_node[k] && pf->nodes[k].passed;
    }
    struct pf_link *links = calloc(n, sizeof *links);
    if (!links) {
        pf_fail(pf, "out of memory");
        return;
    }
    int nl = pf_plan_round1((int)n, links);
    textbuf_t b = {0};
    pf_plan_encode(all_passed, links, all_passed ? 0 : nl, &b);
    free(links);
    pf_set(pf, pf_keyf(pf, "plan/1"), &b);
    text_free(&b);
    if (all_passed && !pf->closing) {
        textbuf_t v = {0};
        pf_verdict_begin(&v, (int)n, true);
        pf_set(pf, pf_keyf(pf, "verdict"), &v);
        text_free(&v);
    }
    if (!pf->closing)
        pf_step_plan(pf);
}

/* The judge reads every node's record before it writes plan/1 and only then waits for it: a
 * WAIT holds back every later request on the connection. */
static void pf_to_plan(struct preflight *pf)
{
    if (!pf->judge) {
        pf_step_plan(pf);
        return;
    }
    struct pf_keys ks = {0};
    for (int k = 0; k < pf->p.nnodes; k++)
        pf_keys_add(&ks, pf_keyf(pf, "node/%d", k));
    pf_wait_get(pf, &ks, 2 * pf->timeout_ms, pf_nodes_read);
}

/* ---------- the plan ---------- */

static void pf_plan_read(struct preflight *pf)
{
    struct pf_plan_rec *pl = &pf->plan[pf->nplans];
    if (!pf->gv[0] || pf_plan_decode(pf->gv[0], pf->gl[0], pf->p.nnodes, pl) < 0) {
        char nb[32];
        pf_fail(pf, "no plan %d from the judge (%s) within %.0fs", pf->nplans + 1,
                pf_node_name(pf, 0, nb, sizeof nb), 8 * pf->timeout_ms / 1e3);
        return;
    }
    pf->nplans++;
    if (pl->skip) {
        pf_wait_verdict(pf);
        return;
    }
    pf->r = pf->nplans - 1;
    pf->li = -1;
    pf_next_link(pf);
}

/* Waits for the plan of the next round (the judge writes it). */
static void pf_step_plan(struct preflight *pf)
{
    struct pf_keys ks = {0};
    pf_keys_add(&ks, pf_keyf(pf, "plan/%d", pf->nplans + 1));
    pf_wait_get(pf, &ks, 8 * pf->timeout_ms, pf_plan_read);
}

/* ---------- one link ---------- */

static const struct pf_link *pf_cur(struct preflight *pf)
{
    return &pf->plan[pf->r].links[pf->li];
}

static int pf_peer_of(struct preflight *pf)
{
    const struct pf_link *l = pf_cur(pf);
    return l->a == pf->p.node_rank ? l->b : l->a;
}

static void pf_link_result(struct preflight *pf, const struct pf_figure *f)
{
    textbuf_t b = {0};
    pf_figure_encode(f, &b);
    pf_set(pf, pf_keyf(pf, "res/%d/%d/%d", pf->r, pf->li, pf->p.node_rank), &b);
    text_free(&b);
    if (!pf->closing)
        pf_next_link(pf);
}

static void pf_probe_done(void *arg, const struct pf_figure *f)
{
    struct preflight *pf = arg;
    pf->probe = NULL;
    pf_link_result(pf, f);
}

static void pf_helpers_done(void *arg, const struct pf_figure *f)
{
    struct preflight *pf = arg;
    pf->helpers = NULL;
    pf_link_result(pf, f);
}

static void pf_test_failed(struct preflight *pf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void pf_test_failed(struct preflight *pf, const char *fmt, ...)
{
    struct pf_figure f = {.done = true, .ok = false, .rtt = -1, .bw = -1};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f.reason, sizeof f.reason, fmt, ap);
    va_end(ap);
    pf_link_result(pf, &f);
}

static int pf_start_helpers(struct preflight *pf, const char *key, const char *what, int nranks,
                            int first, void (*done)(void *, const struct pf_figure *))
{
    struct pf_nccl_test t = {
        .exe = pf->exe, .store_host = pf->store_host, .store_port = pf->p.store_port,
        .key = key, .what = what, .nranks = nranks, .first_rank = first, .nproc = pf->p.nproc,
        .bytes = pf->p.nccl_bytes, .timeout_ms = pf->timeout_ms,
        .nccl_lib = pf->nccl_lib[0] ? pf->nccl_lib : NULL,
        .cudart_lib = pf->cudart_lib[0] ? pf->cudart_lib : NULL,
        .python = pf->python[0] ? pf->python : NULL,
        .env = pf->p.helper_env, .env_arg = pf->p.arg,
    };
    return pf_nccl_helpers_start(pf->p.loop, &t, done, pf, &pf->helpers);
}

/* Both ends are at the link: measure it. */
static void pf_link_go(struct preflight *pf)
{
    int peer = pf_peer_of(pf);
    char nb[32];
    const char *pname = pf_node_name(pf, peer, nb, sizeof nb);
    if (!pf->have_node[peer]) {
        pf_test_failed(pf, "%s published no address", pname);
        return;
    }
    bool came = pf->gv[1] && pf->gl[1] > 0;
    if (!came) {
        pf_test_failed(pf, "%s did not come to the test within %.0fs", pname,
                       2 * pf->timeout_ms / 1e3);
        return;
    }
    const struct pf_node_rec *n = &pf->nodes[peer];
    int r;
    if (pf->p.mode == PF_MODE_TCP) {
        r = pf_tcp_probe(pf->p.loop, n->host, (uint16_t)n->port, pf->p.tcp_bytes, pf->timeout_ms,
                         pf_probe_done, pf, &pf->probe);
        if (r < 0) {
            pf_test_failed(pf, "cannot test the link with %s: %s", pname, uv_strerror(r));
        }
        return;
    }
    /* nccl: the lower node rank's GPUs come first in the pair's communicator */
    const struct pf_link *l = pf_cur(pf);
    int me = pf->p.node_rank;
    int nother = n->nproc, first = me == l->a ? 0 : nother;
    char key[PF_KEY_MAX + 64], what[200];
    snprintf(key, sizeof key, "%snccl/%d/%d/id", pf->idprefix, pf->r, pf->li);
    snprintf(what, sizeof what, "the link with %s", pname);
    r = pf_start_helpers(pf, key, what, pf->p.nproc + nother, first, pf_helpers_done);
    if (r < 0)
        pf_test_failed(pf, "cannot start the nccl check: %s", podrun_strerror(r));
}

/* The peer's record (and its go key), read after both ends said they are ready. */
static void pf_link_ready(struct preflight *pf)
{
    int peer = pf_peer_of(pf);
    if (pf->gv[0] && pf_node_decode(pf->gv[0], pf->gl[0], &pf->nodes[peer]) == 0)
        pf->have_node[peer] = true;
    pf_link_go(pf);
}

/* The next link of this round that involves this node: say ready, wait for the peer. */
static void pf_next_link(struct preflight *pf)
{
    const struct pf_plan_rec *pl = &pf->plan[pf->r];
    int me = pf->p.node_rank;
    while (++pf->li < pl->nlinks && pl->links[pf->li].a != me && pl->links[pf->li].b != me)
        ;
    if (pf->li >= pl->nlinks) {
        if (pf->judge)
            pf_judge_round(pf);
        else if (pf->r == 0)
            pf_step_plan(pf);
        else
            pf_wait_verdict(pf);
        return;
    }
    int peer = pf_peer_of(pf);
    textbuf_t b = {0};
    pf_kv_add(&b, "ready", "1");
    pf_set(pf, pf_keyf(pf, "go/%d/%d/%d", pf->r, pf->li, me), &b);
    text_free(&b);
    if (pf->closing)
        return;
    struct pf_keys ks = {0};
    pf_keys_add(&ks, pf_keyf(pf, "node/%d", peer));
    pf_keys_add(&ks, pf_keyf(pf, "go/%d/%d/%d", pf->r, pf->li, peer));
    pf_wait_get(pf, &ks, 2 * pf->timeout_ms, pf_link_ready);
}

/* ---------- the judge ---------- */

/* The table line of one node. */
static void pf_table_line(struct preflight *pf, int k, const struct pf_node_verdict *v,
                          textbuf_t *out)
{
    char nb[32], a[32], b[32], line[PF_LINE_MAX];
    const char *name = pf_node_name(pf, k, nb, sizeof nb);
    const struct pf_figure *lf = v->link >= 0 ? &pf->link_figs[v->link_round][v->link] : NULL;
    char result[PF_REASON_MAX * 2 + 8];
    if (v->state == PF_BAD)
        snprintf(result, sizeof result, "BAD: %s", v->reason);
    else
        snprintf(result, sizeof result, "ok");
    if (pf->p.mode == PF_MODE_TCP) {
        pf_format_rtt(lf && lf->ok ? lf->rtt : -1, a, sizeof a);
        pf_format_bw(lf && lf->ok ? lf->bw : -1, b, sizeof b);
        snprintf(line, sizeof line, "  %-20s %-5d %-24s %-10s %-11s %s", name, k,
                 pf->have_node[k] ? pf->nodes[k].host : "?", a, b, result);
    } else {
        pf_format_bw(pf->local && pf->local[k].ok ? pf->local[k].bw : -1, a, sizeof a);
        pf_format_bw(lf && lf->ok ? lf->bw : -1, b, sizeof b);
        snprintf(line, sizeof line, "  %-20s %-5d %-14s %-14s %s", name, k, a, b, result);
    }
    pf_verdict_line(out, line);
}

/* The verdict: the table and the bad nodes, for every agent to read. */
static void pf_write_verdict(struct preflight *pf)
{
    int n = pf->p.nnodes;
    struct pf_node_verdict *v = calloc((size_t)n, sizeof *v);
    const char **names = calloc((size_t)n, sizeof *names);
    char (*nbuf)[32] = calloc((size_t)n, sizeof *nbuf);
    if (!v || !names || !nbuf) {
        free(v);
        free(names);
        free(nbuf);
        pf_fail(pf, "out of memory");
        return;
    }
    for (int k = 0; k < n; k++)
        names[k] = pf_node_name(pf, k, nbuf[k], sizeof nbuf[k]);
    struct pf_judge j = {
        .n = n, .bounds = pf->p.bounds, .local = pf->local,
        .nlinks = {pf->plan[0].nlinks, pf->nplans > 1 ? pf->plan[1].nlinks : 0},
        .links = {pf->plan[0].links, pf->nplans > 1 ? pf->plan[1].links : NULL},
        .figs = {pf->link_figs[0], pf->link_figs[1]},
    };
    int nbad = pf_verdict(&j, names, v);
    textbuf_t b = {0};
    pf_verdict_begin(&b, n, false);
    for (int k = 0; k < n; k++) {
        if (v[k].state != PF_BAD)
            continue;
        pf_verdict_bad(&b, k, names[k], v[k].kind, v[k].reason);
        if (pf->have_node[k] && pf->nodes[k].hosts_store)
            pf_verdict_host_bad(&b);
    }
    char head[PF_LINE_MAX];
    int rounds = 1 + (j.nlinks[1] > 0);
    snprintf(head, sizeof head, "preflight %s: %d node%s, %d round%s of pairs, %.2fs, %d bad",
             pf->p.mode == PF_MODE_TCP ? "tcp" : "nccl", n, n == 1 ? "" : "s", rounds,
             rounds == 1 ? "" : "s", (double)(uv_hrtime() - pf->t0) / 1e9, nbad < 0 ? 0 : nbad);
    pf_verdict_line(&b, head);
    if (pf->p.mode == PF_MODE_TCP)
        snprintf(head, sizeof head, "  %-20s %-5s %-24s %-10s %-11s %s", "node", "rank",
                 "address", "round trip", "bandwidth", "result");
    else
        snprintf(head, sizeof head, "  %-20s %-5s %-14s %-14s %s", "node", "rank",
                 "own GPUs", "link", "result (bus bandwidth of the all_reduce)");
    pf_verdict_line(&b, head);
    for (int k = 0; k < n; k++)
        pf_table_line(pf, k, &v[k], &b);
    pf_set(pf, pf_keyf(pf, "verdict"), &b);
    text_free(&b);
    free(v);
    free(names);
    free(nbuf);
}

/* Judge: a round's results are in (or their wait timed out): combine both ends of each link;
 * after round 1 plan round 2, after the last round write the verdict. */
static void pf_results_read(struct preflight *pf)
{
    int r = pf->r, n = pf->p.nnodes;
    const struct pf_plan_rec *pl = &pf->plan[r];
    free(pf->link_figs[r]);
    pf->link_figs[r] = calloc((size_t)(pl->nlinks ? pl->nlinks : 1), sizeof **pf->link_figs);
    if (!pf->link_figs[r]) {
        pf_fail(pf, "out of memory");
        return;
    }
    for (int l = 0; l < pl->nlinks; l++) {
        struct pf_figure ends[2];
        for (int e = 0; e < 2; e++) {
            int i = 2 * l + e;
            if (!pf->gv[i] || pf_figure_decode(pf->gv[i], pf->gl[i], &ends[e]) < 0) {
                memset(&ends[e], 0, sizeof ends[e]);
                ends[e].rtt = ends[e].bw = -1;
            }
        }
        char na[32], nb[32];
        pf_figure_combine(&ends[0], &ends[1], pf_node_name(pf, pl->links[l].a, na, sizeof na),
                          pf_node_name(pf, pl->links[l].b, nb, sizeof nb), &pf->link_figs[r][l]);
    }
    if (r == 0 && pf->p.mode == PF_MODE_NCCL) {
        for (int k = 0; k < n; k++) {
            int i = 2 * pl->nlinks + k;
            if (!pf->gv[i] || pf_figure_decode(pf->gv[i], pf->gl[i], &pf->local[k]) < 0) {
                memset(&pf->local[k], 0, sizeof pf->local[k]);
                pf->local[k].rtt = pf->local[k].bw = -1;
            }
        }
    }
    if (r == 1) {
        pf_write_verdict(pf);
        if (!pf->closing)
            pf_wait_verdict(pf);
        return;
    }
    enum pf_state *st = calloc((size_t)n, sizeof *st);
    struct pf_link *l2 = calloc((size_t)n, sizeof *l2);
    if (!st || !l2) {
        free(st);
        free(l2);
        pf_fail(pf, "out of memory");
        return;
    }
    struct pf_judge j = {.n = n, .bounds = pf->p.bounds, .local = pf->local,
                         .nlinks = {pl->nlinks, 0}, .links = {pl->links, NULL},
                         .figs = {pf->link_figs[0], NULL}};
    int n2 = pf_plan_round2(&j, st, l2);
    textbuf_t b = {0};
    pf_plan_encode(false, l2, n2, &b);
    pf_set(pf, pf_keyf(pf, "plan/2"), &b);
    text_free(&b);
    free(st);
    free(l2);
    if (!pf->closing)
        pf_step_plan(pf);   /* the judge reads plan/2 like everyone: an empty one ends here */
}

/* Judge: waits for both ends of every link of the round (and, nccl, every node's own check). */
static void pf_judge_round(struct preflight *pf)
{
    const struct pf_plan_rec *pl = &pf->plan[pf->r];
    struct pf_keys ks = {0};
    for (int l = 0; l < pl->nlinks; l++) {
        pf_keys_add(&ks, pf_keyf(pf, "res/%d/%d/%d", pf->r, l, pl->links[l].a));
        pf_keys_add(&ks, pf_keyf(pf, "res/%d/%d/%d", pf->r, l, pl->links[l].b));
    }
    if (pf->r == 0 && pf->p.mode == PF_MODE_NCCL)
        for (int k = 0; k < pf->p.nnodes; k++)
            pf_keys_add(&ks, pf_keyf(pf, "local/%d", k));
    if (ks.n != 2 * pl->nlinks + (pf->r == 0 && pf->p.mode == PF_MODE_NCCL ? pf->p.nnodes : 0)) {
        pf_keys_free(&ks);
        pf_fail(pf, "out of memory");
        return;
    }
    /* the slowest node runs two links of up to a go wait and a test each */
    pf_wait_get(pf, &ks, 6 * pf->timeout_ms, pf_results_read);
}

/* ---------- the verdict ---------- */

static void pf_cleanup_added(store_aclient_t *c, int status, const char *v, size_t l, int64_t n,
                             void *arg);

static void pf_deleted(store_aclient_t *c, int status, const char *v, size_t l, int64_t n,
                       void *arg)
{
    (void)c, (void)status, (void)v, (void)l, (void)n;
    struct preflight *pf = arg;
    pf->ops--;
    if (pf->ops == 0)
        pf_close(pf);
}

static void pf_delete(struct preflight *pf, const char *key)
{
    pf->ops++;
    if (store_aclient_delete(pf->sc, key, pf_deleted, pf) < 0)
        pf->ops--;
}

/* The last agent through deletes the check's keys: it knows them from the plans. */
static void pf_cleanup_added(store_aclient_t *c, int status, const char *v, size_t l, int64_t n,
                             void *arg)
{
    (void)c, (void)v, (void)l;
    struct preflight *pf = arg;
    pf->ops--;
    if (status < 0 || n != pf->p.nnodes || pf->closing || !pf->sc) {
        if (pf->ops == 0)
            pf_close(pf);
        return;
    }
    pf->ops++;   /* held while the deletes are queued */
    for (int k = 0; k < pf->p.nnodes; k++) {
        pf_delete(pf, pf_keyf(pf, "node/%d", k));
        pf_delete(pf, pf_keyf(pf, "local/%d", k));
        pf_delete(pf, pf_idkeyf(pf, "nccl/local/%d/id", k));
        pf_delete(pf, pf_keyf(pf, "read/%d", k));
    }
    for (int r = 0; r < pf->nplans; r++) {
        pf_delete(pf, pf_keyf(pf, "plan/%d", r + 1));
        for (int li = 0; li < pf->plan[r].nlinks; li++) {
            const struct pf_link *x = &pf->plan[r].links[li];
            pf_delete(pf, pf_idkeyf(pf, "nccl/%d/%d/id", r, li));
            for (int e = 0; e < 2; e++) {
                int k = e ? x->b : x->a;
                pf_delete(pf, pf_keyf(pf, "go/%d/%d/%d", r, li, k));
                pf_delete(pf, pf_keyf(pf, "res/%d/%d/%d", r, li, k));
            }
        }
    }
    pf_delete(pf, pf_keyf(pf, "verdict"));
    pf_delete(pf, pf_keyf(pf, "done"));
    pf->ops--;
    if (pf->ops == 0)
        pf_close(pf);
}

/* done() with the verdict this agent has read (once: pf_deliver). */
static void pf_deliver_verdict(struct preflight *pf)
{
    struct pf_outcome o;
    pf_outcome_init(pf, &o);
    struct pf_verdict_rec *vr = &pf->verdict;
    o.skipped = vr->skip;
    o.host_bad = vr->host_bad;
    o.nbad = vr->nbad;
    o.lines = vr->lines;
    o.nlines = vr->nlines;
    for (int i = 0; i < vr->nbad; i++) {
        if (vr->bad[i] == pf->p.node_rank) {
            o.self_bad = true;
            snprintf(o.self_reason, sizeof o.self_reason, "%s", vr->bad_reason[i]);
        }
        size_t used = strlen(o.bad_summary);
        snprintf(o.bad_summary + used, sizeof o.bad_summary - used, "%s%s (%s)",
                 i ? ", " : "", vr->bad_name[i], vr->bad_kind[i]);
    }
    pf_deliver(pf, &o);
}

/* Every agent has read the verdict (or the wait for the slow ones timed out): only now does
 * any agent act on it, so none leaves the job, or shuts the job store, while another is still
 * reading. Then the last one through deletes the keys. */
static void pf_all_read(struct preflight *pf)
{
    pf_deliver_verdict(pf);
    if (pf->closing || pf->cancelled || !pf->sc) {   /* cancelled from inside done() */
        pf_close(pf);
        return;
    }
    pf->ops++;
    if (store_aclient_add(pf->sc, pf_keyf(pf, "done"), 1, pf_cleanup_added, pf) < 0) {
        pf->ops--;
        pf_close(pf);
    }
}

/* The verdict is in: say so (read/<me>) and wait for every agent to have it. The SET goes out
 * before the WAIT on the one connection, so no agent can miss another's. */
static void pf_verdict_read(struct preflight *pf)
{
    char nb[32];
    if (!pf->gv[0] || pf_verdict_decode(pf->gv[0], pf->gl[0], &pf->verdict) < 0 ||
        pf->verdict.nodes != pf->p.nnodes) {
        pf_fail(pf, "no verdict from the judge (%s) within %.0fs", pf_node_name(pf, 0, nb,
                sizeof nb), 8 * pf->timeout_ms / 1e3);
        return;
    }
    pf->have_verdict = true;
    textbuf_t b = {0};
    pf_kv_add(&b, "read", "1");
    pf_set(pf, pf_keyf(pf, "read/%d", pf->p.node_rank), &b);
    text_free(&b);
    if (pf->closing)
        return;
    struct pf_keys ks = {0};
    for (int k = 0; k < pf->p.nnodes; k++)
        pf_keys_add(&ks, pf_keyf(pf, "read/%d", k));
    pf_wait_get(pf, &ks, 2 * pf->timeout_ms, pf_all_read);
}

static void pf_wait_verdict(struct preflight *pf)
{
    struct pf_keys ks = {0};
    pf_keys_add(&ks, pf_keyf(pf, "verdict"));
    pf_wait_get(pf, &ks, 8 * pf->timeout_ms, pf_verdict_read);
}

/* ---------- the start ---------- */

/* nccl: this node's own GPUs are done; publish, then on to the plan. */
static void pf_local_done(void *arg, const struct pf_figure *f)
{
    struct preflight *pf = arg;
    pf->helpers = NULL;
    pf->local_self = *f;
    textbuf_t b = {0};
    pf_figure_encode(f, &b);
    pf_set(pf, pf_keyf(pf, "local/%d", pf->p.node_rank), &b);
    text_free(&b);
    if (pf->closing)
        return;
    if (pf->p.nnodes == 1) {   /* nothing to pair: the judge judges at once */
        pf->nplans = 1;
        pf->r = 0;
        pf_judge_round(pf);
        return;
    }
    pf_to_plan(pf);
}

static void pf_connected(store_aclient_t *c, int status, void *arg)
{
    struct preflight *pf = arg;
    if (!pf_reply(pf))
        return;
    if (status < 0) {
        pf->sc = NULL;   /* freed by the client itself */
        pf_fail(pf, "cannot reach the job store at %s:%u: %s", pf->store_host, pf->p.store_port,
                podrun_strerror(status));
        return;
    }
    pf->sc = c;
    struct pf_node_rec me = {.port = pf->port, .nproc = pf->p.nproc,
                             .rank_base = pf->p.rank_base, .passed = pf->p.passed,
                             .hosts_store = pf->p.hosts_store};
    snprintf(me.name, sizeof me.name, "%s", pf->name);
    snprintf(me.host, sizeof me.host, "%s", pf->addr);
    pf->nodes[pf->p.node_rank] = me;
    pf->have_node[pf->p.node_rank] = true;
    textbuf_t b = {0};
    pf_node_encode(&me, &b);
    pf_set(pf, pf_keyf(pf, "node/%d", pf->p.node_rank), &b);
    text_free(&b);
    if (pf->closing)
        return;
    if (pf->p.mode == PF_MODE_NCCL) {
        char key[PF_KEY_MAX + 64];
        snprintf(key, sizeof key, "%snccl/local/%d/id", pf->idprefix, pf->p.node_rank);
        int r = pf_start_helpers(pf, key, "this node's GPUs", pf->p.nproc, 0, pf_local_done);
        if (r < 0) {
            struct pf_figure f = {.done = true, .rtt = -1, .bw = -1};
            snprintf(f.reason, sizeof f.reason, "cannot start the nccl check: %s",
                     podrun_strerror(r));
            pf_local_done(pf, &f);
        }
        return;
    }
    pf_to_plan(pf);
}

#define COPY(dst, src) snprintf(dst, sizeof dst, "%s", (src) ? (src) : "")

int pf_start(const struct pf_params *p, preflight_t **out)
{
    if (p->nnodes < 1 || p->node_rank < 0 || p->node_rank >= p->nnodes || p->nproc < 1)
        return -EINVAL;
    struct preflight *pf = calloc(1, sizeof *pf);
    if (!pf)
        return -ENOMEM;
    pf->p = *p;
    COPY(pf->run_id, p->run_id);
    COPY(pf->name, p->name);
    COPY(pf->addr, p->addr);
    COPY(pf->bind, p->bind_addr);
    COPY(pf->store_host, p->store_host);
    COPY(pf->exe, p->exe);
    COPY(pf->nccl_lib, p->nccl_lib);
    COPY(pf->cudart_lib, p->cudart_lib);
    COPY(pf->python, p->python);
    char run[RDZV_RUN_ID_MAX + 16];   /* "podrun/<escaped id>/" */
    if (rdzv_run_prefix(run, sizeof run, pf->run_id) < 0) {
        free(pf);
        return -EINVAL;
    }
    snprintf(pf->prefix, sizeof pf->prefix, "%spf/%d/", run, p->round);
    snprintf(pf->idprefix, sizeof pf->idprefix, "podrun-pf/%s%d/", run + sizeof "podrun/" - 1,
             p->round);
    if (p->token) {
        pf->has_token = true;
        pf->token = *p->token;
    }
    pf->p.token = NULL;   /* the copy above is the one used */
    pf->t0 = uv_hrtime();
    pf->judge = p->node_rank == 0;
    pf->timeout_ms = p->timeout_ms ? p->timeout_ms : 60000;
    pf->nodes = calloc((size_t)p->nnodes, sizeof *pf->nodes);
    pf->have_node = calloc((size_t)p->nnodes, sizeof *pf->have_node);
    pf->local = p->mode == PF_MODE_NCCL ? calloc((size_t)p->nnodes, sizeof *pf->local) : NULL;
    if (!pf->nodes || !pf->have_node || (p->mode == PF_MODE_NCCL && !pf->local)) {
        pf_free(pf);
        return -ENOMEM;
    }
    int r = 0;
    if (p->mode == PF_MODE_TCP)
        r = pf_tcp_listen(p->loop, pf->bind[0] ? pf->bind : NULL, &pf->port, &pf->srv);
    if (r == 0) {
        pf->ops++;
        r = store_aclient_connect(p->loop, pf->store_host, p->store_port,
                                  pf_ms(2 * pf->timeout_ms), pf_connected, pf, &pf->sc);
        if (r < 0)
            pf->ops--;
        else {   /* the check's keys lie under "podrun/": with a token, only for those who hold it */
            store_aclient_auth(pf->sc, pf->has_token ? &pf->token : NULL);
            store_aclient_source(pf->sc, pf->bind[0] ? pf->bind : NULL);
        }
    }
    if (r < 0) {
        if (pf->srv)
            pf_tcp_server_close(pf->srv);
        pf_free(pf);
        return r;
    }
    pf_log(pf, "preflight %s: checking %d node%s (node rank %d%s)",
           p->mode == PF_MODE_TCP ? "tcp" : "nccl", p->nnodes, p->nnodes == 1 ? "" : "s",
           p->node_rank, pf->judge ? ", the judge" : "");
    *out = pf;
    return 0;
}

int pf_reaped(preflight_t *pf, pid_t pid, int wstatus)
{
    return pf->helpers && pf_nccl_helpers_reaped(pf->helpers, pid, wstatus);
}

int pf_verdict_now(preflight_t *pf)
{
    if (!pf->have_verdict || pf->done_called || pf->cancelled || pf->closing)
        return 0;
    pf_deliver_verdict(pf);   /* the wait for read/<k> goes on; it only adds to done */
    return 1;
}

void pf_cancel(preflight_t *pf)
{
    pf->cancelled = true;
    pf_close(pf);
}
