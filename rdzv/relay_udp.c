/* rdzv/relay_udp.c — an agent's relay socket on its loop (see relay_udp.h). */
#include "rdzv/relay_udp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct relay_udp {
    uv_udp_t udp;
    const auth_key_t *key;
    const char *run_id;
    relay_udp_cb cb;
    void *arg;
    int round, node_rank, sent_round, taken_round;
    int have_parent, parent_rank, n;
    struct sockaddr_storage parent;
    struct sockaddr_storage child[RELAY_FANOUT_MAX];
    int child_rank[RELAY_FANOUT_MAX];
    unsigned long dropped;
    /* the restart (relay.h): the joins held for the parent, and who has sent */
    uv_timer_t gather_timer;
    relay_udp_gather_cb gather;
    relay_udp_go_cb go;
    void *restart_arg;
    char *held;
    size_t held_len, held_cap;
    int self_in, direct, children_in, go_round;
    unsigned char child_in[RELAY_FANOUT_MAX];
    void (*closed)(void *);
    void *closed_arg;
    char in[RELAY_DGRAM_MAX + 1];  /* one datagram read at a time */
    char out[RELAY_DGRAM_MAX];
};

static int ep_addr(const char *addr, uint16_t port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (uv_ip4_addr(addr, port, (struct sockaddr_in *)ss) == 0)
        return 0;
    return uv_ip6_addr(addr, port, (struct sockaddr_in6 *)ss);
}

static int same_ep(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return 0;
    if (b->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    relay_udp_t *r = h->data;
    *buf = uv_buf_init(r->in, sizeof r->in);
}

/* Sends the held joins on: to the parent in datagrams of whole entries, or, for a node that
 * joins the store itself, to `gather`. */
static void flush_held(relay_udp_t *r)
{
    uv_timer_stop(&r->gather_timer);
    if (r->held_len == 0)
        return;
    if (r->direct || !r->have_parent) {
        if (r->gather)
            r->gather(r->restart_arg, r->held, r->held_len);
        r->held_len = 0;
        return;
    }
    const char *p = r->held, *end = r->held + r->held_len;
    while (p < end) {
        const char *q = p, *rec;
        uint64_t id;
        int k;
        size_t len;
        /* as many whole entries as one datagram takes (a header is under 128 bytes) */
        while (q < end) {
            const char *at = q;
            if (relay_entry_next(&q, end, &id, &k, &rec, &len) < 0) {
                q = end;
                break;
            }
            if ((size_t)(q - p) > RELAY_DGRAM_MAX - 128) {
                q = at > p ? at : q;
                break;
            }
        }
        int n = relay_kmsg_encode(r->key, r->run_id, RELAY_JOINS, r->round, r->parent_rank, p,
                                  (size_t)(q - p), r->out, sizeof r->out);
        if (n > 0) {
            uv_buf_t b = uv_buf_init(r->out, (unsigned)n);
            uv_udp_try_send(&r->udp, &b, 1, (const struct sockaddr *)&r->parent);
        }
        p = q;
    }
    r->held_len = 0;
}

static void on_gather_timer(uv_timer_t *t)
{
    flush_held(t->data);
}

/* Joins held until every child has sent (or the gather time), once this node rejoined. */
static void maybe_flush(relay_udp_t *r)
{
    if (!r->self_in)
        return;
    if (r->children_in >= r->n)
        flush_held(r);
    else if (!uv_is_active((uv_handle_t *)&r->gather_timer))
        uv_timer_start(&r->gather_timer, on_gather_timer, RELAY_GATHER_MS, 0);
}

/* Keeps the well-formed entries of `body` for the parent (or the store). */
static void hold(relay_udp_t *r, const char *body, size_t blen)
{
    const char *p = body, *end = body + blen, *rec;
    uint64_t id;
    int k;
    size_t len;
    while (p < end && relay_entry_next(&p, end, &id, &k, &rec, &len) == 0) {}
    size_t good = (size_t)(p - body); /* up to the first malformed entry */
    if (good == 0)
        return;
    if (r->held_len + good > r->held_cap) {
        size_t cap = (r->held_len + good) * 2;
        char *h = realloc(r->held, cap);
        if (!h)
            return; /* those members join the store a heartbeat period later */
        r->held = h, r->held_cap = cap;
    }
    memcpy(r->held + r->held_len, body, good);
    r->held_len += good;
}

static int child_of(const relay_udp_t *r, const struct sockaddr *from)
{
    for (int i = 0; i < r->n; i++)
        if (same_ep(&r->child[i], from))
            return i;
    return -1;
}

/* A datagram: this round's end or go for this node from its parent, or joins for it from a
 * child, or dropped. The children get an end or a go before this node does anything else with
 * it: each hop adds only its own sends. */
static void on_recv(uv_udp_t *u, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                    unsigned flags)
{
    relay_udp_t *r = u->data;
    if (n <= 0 || !from)
        return; /* nothing more to read, or an error the next datagram will show again */
    int kind, round, to;
    const char *body;
    size_t blen;
    if ((flags & UV_UDP_PARTIAL) ||
        relay_kmsg_decode(r->key, r->run_id, buf->base, (size_t)n, &kind, &round, &to, &body,
                          &blen) < 0 ||
        round != r->round || to != r->node_rank) {
        r->dropped++;
        return;
    }
    if (kind == RELAY_JOINS) {
        int c = child_of(r, from);
        if (!r->key && c < 0) {
            r->dropped++;
            return;
        }
        hold(r, body, blen);
        if (c >= 0 && !r->child_in[c]) {
            r->child_in[c] = 1;
            r->children_in++;
        }
        maybe_flush(r);
        return;
    }
    if (!r->key && !(r->have_parent && same_ep(&r->parent, from))) {
        r->dropped++;
        return;
    }
    if (kind == RELAY_GO) {
        if (relay_udp_go(r, body, blen) && r->go) /* not a duplicate */
            r->go(r->restart_arg, body, blen);
        return;
    }
    if (r->taken_round == round)
        return; /* a duplicate */
    r->taken_round = round;
    relay_udp_forward(r, round, body, blen);
    r->cb(r->arg, round, body, blen);
}

int relay_udp_open(uv_loop_t *loop, const char *addr, const auth_key_t *key, const char *run_id,
                   relay_udp_cb cb, void *arg, relay_udp_t **out)
{
    struct sockaddr_storage ss;
    if (!addr || !relay_addr_numeric(addr) || ep_addr(addr, 0, &ss) < 0)
        return -EINVAL;
    relay_udp_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->key = key, r->run_id = run_id, r->cb = cb, r->arg = arg;
    r->round = r->sent_round = r->taken_round = r->go_round = -1;
    int rc = uv_udp_init(loop, &r->udp);
    if (rc < 0) {
        free(r);
        return rc;
    }
    r->udp.data = r;
    uv_timer_init(loop, &r->gather_timer);
    r->gather_timer.data = r;
    rc = uv_udp_bind(&r->udp, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_udp_recv_start(&r->udp, on_alloc, on_recv);
    if (rc < 0) {
        relay_udp_close(r, NULL, NULL);
        return rc;
    }
    *out = r;
    return 0;
}

uint16_t relay_udp_port(const relay_udp_t *r)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_udp_getsockname(&r->udp, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

void relay_udp_links(relay_udp_t *r, int round, int node_rank, const relay_links_t *l)
{
    r->round = round;
    r->node_rank = node_rank;
    r->have_parent = l->fed && ep_addr(l->parent.addr, l->parent.port, &r->parent) == 0;
    r->parent_rank = l->parent.node_rank;
    r->n = 0;
    uv_timer_stop(&r->gather_timer);
    r->held_len = 0;
    r->self_in = r->direct = r->children_in = 0;
    memset(r->child_in, 0, sizeof r->child_in);
    for (int i = 0; i < l->n; i++)
        if (ep_addr(l->child[i].addr, l->child[i].port, &r->child[r->n]) == 0)
            r->child_rank[r->n++] = l->child[i].node_rank;
}

/* One datagram of `kind` to each child; how many went out. */
static int to_children(relay_udp_t *r, int kind, const char *body, size_t blen)
{
    int sent = 0;
    for (int i = 0; i < r->n; i++) {
        int len = relay_kmsg_encode(r->key, r->run_id, kind, r->round, r->child_rank[i], body,
                                    blen, r->out, sizeof r->out);
        if (len < 0)
            break; /* too long to relay: the children read it from the store */
        uv_buf_t b = uv_buf_init(r->out, (unsigned)len);
        sent += uv_udp_try_send(&r->udp, &b, 1, (const struct sockaddr *)&r->child[i]) >= 0;
    }
    return sent;
}

int relay_udp_forward(relay_udp_t *r, int round, const char *body, size_t blen)
{
    if (round != r->round || r->sent_round == round)
        return 0;
    r->sent_round = round;
    return to_children(r, RELAY_END, body, blen);
}

void relay_udp_on_restart(relay_udp_t *r, relay_udp_gather_cb gather, relay_udp_go_cb go,
                          void *arg)
{
    r->gather = gather, r->go = go, r->restart_arg = arg;
}

int relay_udp_in_tree(const relay_udp_t *r, int round)
{
    return r->round == round && (r->have_parent || r->n > 0);
}

void relay_udp_rejoin(relay_udp_t *r, const char *entry, size_t len)
{
    if (entry)
        hold(r, entry, len);
    else
        r->direct = 1;
    r->self_in = 1;
    maybe_flush(r);
}

void relay_udp_direct(relay_udp_t *r)
{
    r->direct = 1;
    flush_held(r);
}

int relay_udp_go(relay_udp_t *r, const char *body, size_t blen)
{
    if (r->go_round == r->round)
        return 0;
    r->go_round = r->round;
    to_children(r, RELAY_GO, body, blen);
    return 1;
}

unsigned long relay_udp_dropped(const relay_udp_t *r)
{
    return r->dropped;
}

static void on_timer_closed(uv_handle_t *h)
{
    relay_udp_t *r = h->data;
    void (*closed)(void *) = r->closed;
    void *arg = r->closed_arg;
    free(r->held);
    free(r);
    if (closed)
        closed(arg);
}

static void on_closed(uv_handle_t *h)
{
    relay_udp_t *r = h->data;
    uv_close((uv_handle_t *)&r->gather_timer, on_timer_closed);
}

void relay_udp_close(relay_udp_t *r, void (*closed)(void *), void *arg)
{
    r->closed = closed;
    r->closed_arg = arg;
    uv_close((uv_handle_t *)&r->udp, on_closed);
}
