/* rdzv/relay.c — the relay tree, the links an assignment carries and the relay datagram (see
 * relay.h). Pure: no I/O. */
#include "rdzv/relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/hmac.h>

#define MAGIC "PRLY1 "   /* the round's end; "PRLJ1 " joins going up, "PRLG1 " a go coming down */
#define MAGIC_AT 3        /* where the kind's letter is in the magic */
#define LABEL "podrun-relay-1"

int relay_fanout(int n)
{
    int f = 2;
    while (f < RELAY_FANOUT_MAX && (long)f * f < n)
        f++;
    return f;
}

int relay_parent(int j, int f)
{
    return j < f ? -1 : j / f - 1;
}

int relay_children(int j, int n, int f, int *first)
{
    long a = ((long)j + 1) * f;
    *first = a < n ? (int)a : n;
    long c = (long)n - a;
    return c <= 0 ? 0 : c < f ? (int)c : f;
}

int relay_addr_numeric(const char *addr)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, addr, buf) == 1 || inet_pton(AF_INET6, addr, buf) == 1;
}

/* "rank@addr:port"; an IPv6 address is written bare (the port follows the last ':'). */
static int ep_put(char *out, size_t cap, const relay_ep_t *e)
{
    return snprintf(out, cap, "%d@%s:%u", e->node_rank, e->addr, (unsigned)e->port);
}

static int ep_take(const char *s, size_t len, relay_ep_t *e)
{
    char tmp[RDZV_NAME_MAX + 24];
    if (len == 0 || len >= sizeof tmp)
        return -EINVAL;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    char *at = strchr(tmp, '@'), *colon = strrchr(tmp, ':'), *end;
    if (!at || !colon || colon < at)
        return -EINVAL;
    long rank = strtol(tmp, &end, 10);
    if (end != at || rank < 0 || rank > (1 << 24))
        return -EINVAL;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535 || colon == at + 1)
        return -EINVAL;
    *colon = '\0';
    if ((size_t)(colon - at) > sizeof e->addr || !relay_addr_numeric(at + 1))
        return -EINVAL;
    e->node_rank = (int)rank;
    e->port = (uint16_t)port;
    sfmt(e->addr, sizeof e->addr, "%s", at + 1);
    return 0;
}

void relay_links_put(kvbuf_t *b, const relay_links_t *l)
{
    char line[RELAY_LINKS_MAX];
    size_t n = 0;
    if (l->fed) {
        ep_put(line, sizeof line, &l->parent);
        kv_add(b, "relay_from", line, 0);
    }
    for (int i = 0; i < l->n && n < sizeof line; i++) {
        int w = ep_put(line + n, sizeof line - n, &l->child[i]);
        if (w < 0 || (size_t)w + 1 >= sizeof line - n)
            break;
        n += (size_t)w;
        line[n++] = i + 1 < l->n ? ' ' : '\0';
    }
    if (l->n > 0 && n > 0) {
        line[n - 1] = '\0';
        kv_add(b, "relay_to", line, 0);
    }
}

void relay_links_take(const char *text, size_t len, relay_links_t *l)
{
    memset(l, 0, sizeof *l);
    char line[RELAY_LINKS_MAX];
    /* what kv_get wrote is cut at the buffer and at a NUL in the value: read only that */
    size_t n = kv_get(text, len, "relay_from", line, sizeof line) >= 0 ? strlen(line) : 0;
    if (n > 0 && ep_take(line, n, &l->parent) == 0)
        l->fed = 1;
    n = kv_get(text, len, "relay_to", line, sizeof line) >= 0 ? strlen(line) : 0;
    for (const char *p = line, *end = line + n; p < end && l->n < RELAY_FANOUT_MAX;) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        size_t w = (size_t)((sp ? sp : end) - p);
        if (ep_take(p, w, &l->child[l->n]) == 0)
            l->n++;
        p += w + 1;
    }
}

static void msg_mac(const auth_key_t *key, const char *run_id, const char *head, size_t hlen,
                    const char *body, size_t blen, char hex[RELAY_MAC_HEX + 1])
{
    struct hmac_sha256_ctx h;
    uint8_t d[SHA256_DIGEST_SIZE];
    hmac_sha256_set_key(&h, sizeof key->k, key->k);
    hmac_sha256_update(&h, sizeof LABEL, (const uint8_t *)LABEL);
    hmac_sha256_update(&h, strlen(run_id) + 1, (const uint8_t *)run_id);
    hmac_sha256_update(&h, hlen, (const uint8_t *)head);
    hmac_sha256_update(&h, blen, (const uint8_t *)body);
    hmac_sha256_digest(&h, sizeof d, d);
    for (int i = 0; i < RELAY_MAC_HEX / 2; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
}

int relay_kmsg_encode(const auth_key_t *key, const char *run_id, int kind, int round, int to,
                      const char *body, size_t blen, char *out, size_t cap)
{
    char head[64];
    int hl = snprintf(head, sizeof head, MAGIC "%d %d ", round, to);
    head[MAGIC_AT] = (char)kind;
    char mac[RELAY_MAC_HEX + 1] = "-";
    if (key)
        msg_mac(key, run_id, head, (size_t)hl, body, blen, mac);
    int n = snprintf(out, cap, "%s%s\n", head, mac);
    if (n < 0 || (size_t)n + blen >= cap)
        return -ENOSPC;
    memcpy(out + n, body, blen);
    return n + (int)blen;
}

int relay_kmsg_decode(const auth_key_t *key, const char *run_id, const char *msg, size_t len,
                      int *kind, int *round, int *to, const char **body, size_t *blen)
{
    const char *nl = memchr(msg, '\n', len < 128 ? len : 128);
    if (!nl || len < sizeof MAGIC || memcmp(msg, MAGIC, MAGIC_AT) != 0 ||
        memcmp(msg + MAGIC_AT + 1, &MAGIC[MAGIC_AT + 1], sizeof MAGIC - MAGIC_AT - 2) != 0 ||
        !msg[MAGIC_AT] || !strchr("YJG", msg[MAGIC_AT]))
        return -EINVAL;
    char head[128];
    size_t hlen = (size_t)(nl - msg);
    memcpy(head, msg, hlen);
    head[hlen] = '\0';
    long r, t;
    char mac[RELAY_MAC_HEX + 2];
    int used = 0;
    if (sscanf(head + sizeof MAGIC - 1, "%ld %ld %33s%n", &r, &t, mac, &used) != 3 ||
        head[sizeof MAGIC - 1 + (size_t)used] != '\0' || r < 0 || r > (1 << 30) || t < 0 ||
        t > (1 << 24))
        return -EINVAL;
    *body = nl + 1;
    *blen = len - hlen - 1;
    if (key) {
        char want[RELAY_MAC_HEX + 1];
        size_t signed_len = (size_t)(strrchr(head, ' ') - head) + 1;
        msg_mac(key, run_id, head, signed_len, *body, *blen, want);
        if (strlen(mac) != RELAY_MAC_HEX || !auth_equal(mac, want, RELAY_MAC_HEX))
            return -EINVAL;
    }
    *kind = msg[MAGIC_AT];
    *round = (int)r;
    *to = (int)t;
    return 0;
}

int relay_entry_put(char *out, size_t cap, const char *id, int k, const char *rec, size_t len)
{
    int n = snprintf(out, cap, "%.16s %d %zu\n", id, k, len);
    if (n < 0 || (size_t)n + len > cap)
        return -ENOSPC;
    memcpy(out + n, rec, len);
    return n + (int)len;
}

int relay_entry_next(const char **p, const char *end, uint64_t *id, int *k, const char **rec,
                     size_t *len)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p) < 64 ? (size_t)(end - *p) : 64);
    if (!nl)
        return -EINVAL;
    char head[64], ids[17];
    memcpy(head, *p, (size_t)(nl - *p));
    head[nl - *p] = '\0';
    long kk;
    unsigned long ll;
    int used = 0;
    if (sscanf(head, "%16[0-9a-f] %ld %lu%n", ids, &kk, &ll, &used) != 3 || head[used] ||
        strlen(ids) != 16 || kk < 0 || kk > (1L << 30) || ll > (size_t)(end - nl - 1))
        return -EINVAL;
    *id = strtoull(ids, NULL, 16);
    *k = (int)kk;
    *rec = nl + 1;
    *len = (size_t)ll;
    *p = nl + 1 + ll;
    return *id ? 0 : -EINVAL;
}

int relay_go_encode(int round, int restart_count, int inplace, char *out, size_t cap)
{
    kvbuf_t b;
    kv_init(&b, out, cap);
    kv_add_int(&b, "round", round);
    kv_add_int(&b, "restart_count", restart_count);
    kv_add(&b, "mode", inplace ? "inplace" : "store", 16);
    return b.overflow ? -ENOSPC : (int)b.len;
}

int relay_go_decode(const char *text, size_t len, int *round, int *restart_count, int *inplace)
{
    char mode[16];
    long long r = kv_get_int(text, len, "round", -1), n = kv_get_int(text, len, "restart_count", -1);
    if (r < 0 || r > (1 << 30) || n < 0 || n > (1 << 30) ||
        kv_get(text, len, "mode", mode, sizeof mode) < 0)
        return -EINVAL;
    *inplace = strcmp(mode, "inplace") == 0;
    if (!*inplace && strcmp(mode, "store") != 0)
        return -EINVAL;
    *round = (int)r;
    *restart_count = (int)n;
    return 0;
}

int relay_assign_inplace(const char *last, size_t len, int round, int restart_count, char *out,
                         size_t cap)
{
    rdzv_assignment_t a;
    char host[RDZV_NAME_MAX], err[32], text[8];
    if (rdzv_assign_decode(last, len, &a, host, sizeof host, err, sizeof err, text, sizeof text) < 0 ||
        err[0])
        return -EINVAL;
    a.round = round;
    a.restart_count = restart_count;
    int n = rdzv_assign_encode(&a, out, cap);
    if (n < 0)
        return n;
    relay_links_t l;
    relay_links_take(last, len, &l);
    kvbuf_t b = {out, cap, (size_t)n, 0};
    relay_links_put(&b, &l);
    return b.overflow ? -ENOSPC : (int)b.len;
}
