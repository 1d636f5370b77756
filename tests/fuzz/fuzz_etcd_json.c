/* tests/fuzz/fuzz_etcd_json.c — libFuzzer target: arbitrary bytes as an answer from etcd's JSON
 * gateway (a whole body or one watch line), as an endpoint list, and as the etcd backend's state
 * record. Nothing may crash, leak or read out of bounds; every key and value an answer yields
 * must lie within its stated length; a state record that decodes must encode and decode to the
 * same text again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/json.h"
#include "rdzv/etcd_state.h"

static void answer(const char *d, size_t n)
{
    etcd_resp_t r;
    int rc = etcd_resp_parse(d, n, &r);
    if (rc == 0) {
        for (size_t i = 0; i < r.n; i++) {
            /* each string is NUL-terminated at its length: touching every byte finds a lie */
            if (r.kvs[i].key[r.kvs[i].klen] != '\0' || r.kvs[i].value[r.kvs[i].vlen] != '\0')
                abort();
            volatile char x = 0;
            for (size_t k = 0; k < r.kvs[i].klen; k++)
                x ^= r.kvs[i].key[k];
            for (size_t k = 0; k < r.kvs[i].vlen; k++)
                x ^= r.kvs[i].value[k];
            (void)x;
        }
    } else if (rc == 1) {
        if (r.code < 1 || r.code > 16 || r.n || memchr(r.error, '\0', sizeof r.error) == NULL)
            abort();
    }
    etcd_resp_free(&r);
}

static void state(const char *d, size_t n)
{
    etcd_state_t a, b;
    if (etcd_state_decode(d, n, &a) == 0) {
        char *t2 = NULL, *t3 = NULL;
        size_t n2, n3;
        if (etcd_state_encode(&a, &t2, &n2) < 0 || etcd_state_decode(t2, n2, &b) < 0 ||
            etcd_state_encode(&b, &t3, &n3) < 0 || n2 != n3 || memcmp(t2, t3, n2) != 0)
            abort();
        free(t2);
        free(t3);
        etcd_state_free(&b);
    }
    etcd_state_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    answer(d, size);
    state(d, size);
    if (size < 4096) {
        char *text = malloc(size + 1), err[256];
        etcd_endpoint_t ep[ETCD_MAX_ENDPOINTS];
        memcpy(text, d, size);
        text[size] = '\0';
        int n = etcd_endpoints_parse(text, size & 1, ep, ETCD_MAX_ENDPOINTS, err, sizeof err);
        for (int i = 0; i < n; i++)
            if (!memchr(ep[i].url, '\0', sizeof ep[i].url) || ep[i].port < 1 || ep[i].port > 65535)
                abort();
        free(text);
    }
    return 0;
}
