/* tests/fuzz/fuzz_relay.c — libFuzzer target: arbitrary bytes through the relay's decoders (the
 * links of an assignment, a datagram with and without the job's key). Nothing may crash or read
 * out of bounds; links that were read come back the same once written and read again; a datagram
 * that was read, encoded again with what it said, reads back the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/relay.h"

static void links(const char *d, size_t n)
{
    static char t2[RELAY_LINKS_MAX + 64], t3[RELAY_LINKS_MAX + 64];
    relay_links_t a, b, c;
    relay_links_take(d, n, &a);
    kvbuf_t k2, k3;
    kv_init(&k2, t2, sizeof t2);
    relay_links_put(&k2, &a);
    relay_links_take(t2, k2.len, &b);
    kv_init(&k3, t3, sizeof t3);
    relay_links_put(&k3, &b);
    relay_links_take(t3, k3.len, &c);
    if (k2.overflow || k2.len != k3.len || memcmp(t2, t3, k2.len) != 0 || b.fed != c.fed ||
        b.n != c.n)
        abort();
}

static void msg(const char *d, size_t n, const auth_key_t *key)
{
    static char out[RELAY_DGRAM_MAX];
    int kind, round, to, k2, r2, t2;
    const char *body, *b2;
    size_t blen, bl2;
    if (relay_kmsg_decode(key, "job1", d, n, &kind, &round, &to, &body, &blen) < 0)
        return;
    int len = relay_kmsg_encode(key, "job1", kind, round, to, body, blen, out, sizeof out);
    if (len < 0)
        return; /* longer than a datagram is sent */
    if (relay_kmsg_decode(key, "job1", out, (size_t)len, &k2, &r2, &t2, &b2, &bl2) < 0 ||
        k2 != kind || r2 != round || t2 != to || bl2 != blen || memcmp(b2, body, blen) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static auth_key_t key;
    static int have;
    char err[128];
    if (!have)
        have = auth_key_from_token("0123456789abcdef0123", 20, "fuzz", &key, err, sizeof err) == 0;
    const char *d = (const char *)data;
    links(d, size);
    msg(d, size, NULL);
    msg(d, size, &key);
    return 0;
}
