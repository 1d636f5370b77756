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
    int have_parent, n;
    struct sockaddr_storage parent;
    struct sockaddr_storage child[RELAY_FANOUT_MAX];
    int child_rank[RELAY_FANOUT_MAX];
    unsigned long dropped;
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

/* A datagram: this round's end for this node from its parent, or dropped. The children get it
 * before this node does anything else with it: each hop adds only its own sends. */
static void on_recv(uv_udp_t *u, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                    unsigned flags)
{
    relay_udp_t *r = u->data;
    if (n <= 0 || !from)
        return; /* nothing more to read, or an error the next datagram will show again */
    int round, to;
    const char *body;
    size_t blen;
    if ((flags & UV_UDP_PARTIAL) ||
        relay_msg_decode(r->key, r->run_id, buf->base, (size_t)n, &round, &to, &body, &blen) < 0 ||
        round != r->round || to != r->node_rank || (!r->key && !(r->have_parent &&
                                                                  same_ep(&r->parent, from)))) {
        r->dropped++;
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
    r->round = r->sent_round = r->taken_round = -1;
    int rc = uv_udp_init(loop, &r->udp);
    if (rc < 0) {
        free(r);
        return rc;
    }
    r->udp.data = r;
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
    r->n = 0;
    for (int i = 0; i < l->n; i++)
        if (ep_addr(l->child[i].addr, l->child[i].port, &r->child[r->n]) == 0)
            r->child_rank[r->n++] = l->child[i].node_rank;
}

int relay_udp_forward(relay_udp_t *r, int round, const char *body, size_t blen)
{
    if (round != r->round || r->sent_round == round)
        return 0;
    r->sent_round = round;
    int sent = 0;
    for (int i = 0; i < r->n; i++) {
        int len = relay_msg_encode(r->key, r->run_id, round, r->child_rank[i], body, blen, r->out,
                                   sizeof r->out);
        if (len < 0)
            break; /* too long to relay: the children read it from the store */
        uv_buf_t b = uv_buf_init(r->out, (unsigned)len);
        sent += uv_udp_try_send(&r->udp, &b, 1, (const struct sockaddr *)&r->child[i]) >= 0;
    }
    return sent;
}

unsigned long relay_udp_dropped(const relay_udp_t *r)
{
    return r->dropped;
}

static void on_closed(uv_handle_t *h)
{
    relay_udp_t *r = h->data;
    void (*closed)(void *) = r->closed;
    void *arg = r->closed_arg;
    free(r);
    if (closed)
        closed(arg);
}

void relay_udp_close(relay_udp_t *r, void (*closed)(void *), void *arg)
{
    r->closed = closed;
    r->closed_arg = arg;
    uv_close((uv_handle_t *)&r->udp, on_closed);
}
