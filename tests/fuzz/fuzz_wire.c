/* tests/fuzz/fuzz_wire.c — libFuzzer target: arbitrary bytes through the dialect sniffer, the
 * request decoder of both dialects (applied to a small key space, as the server would) and the
 * reply decoder. Nothing may crash, hang, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/store/keyspace.h"
#include "rdzv/store/wire.h"

static void on_ready(void *arg, ks_owner_t *o)
{
    (void)arg;
    (void)o;
}

static void apply(keyspace_t *ks, ks_owner_t *o, const wire_req_t *q)
{
    const char *v;
    size_t n;
    int64_t r;
    wire_str_t keys[64];
    size_t nk = 0;
    wire_iter_t it;
    wire_str_t k, val;
    char *item;
    switch (q->op) {
    case WIRE_SET: keyspace_set(ks, q->key.p, q->key.len, q->val.p, q->val.len); break;
    case WIRE_GET: keyspace_get(ks, q->key.p, q->key.len, &v, &n); break;
    case WIRE_ADD: keyspace_add(ks, q->key.p, q->key.len, q->num, &r); break;
    case WIRE_APPEND: keyspace_append(ks, q->key.p, q->key.len, q->val.p, q->val.len); break;
    case WIRE_DELETE_KEY: keyspace_delete(ks, q->key.p, q->key.len); break;
    case WIRE_COMPARE_SET:
        keyspace_compare_set(ks, q->key.p, q->key.len, q->val.p, q->val.len, q->val2.p,
                             q->val2.len, &v, &n);
        break;
    case WIRE_CHECK:
    case WIRE_WAIT:
    case WIRE_MULTI_GET:
        wire_iter_init(&it, q->list);
        while (nk < 64 && wire_list_next(&it, &keys[nk], NULL))
            nk++;
        if (q->op == WIRE_WAIT)
            keyspace_wait(ks, o, keys, nk);
        else
            keyspace_check(ks, keys, nk);
        break;
    case WIRE_MULTI_SET:
        wire_iter_init(&it, q->list);
        while (wire_list_next(&it, &k, &val))
            keyspace_set(ks, k.p, k.len, val.p, val.len);
        break;
    case WIRE_CANCEL_WAIT: keyspace_cancel_waits(ks, o); break;
    case WIRE_QUEUE_PUSH: keyspace_queue_push(ks, q->key.p, q->key.len, q->val.p, q->val.len); break;
    case WIRE_QUEUE_POP:
        keyspace_queue_pop(ks, q->key.p, q->key.len, &item, &n);
        free(item);
        break;
    case WIRE_BARRIER: keyspace_barrier(ks, o, q->key.p, q->key.len, q->num, &r); break;
    case WIRE_WATCH_KEY: keyspace_watch(ks, o, q->key.p, q->key.len); break;
    case WIRE_LIST: keyspace_delete_except(ks, "/", 1); break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const wire_limits_t lim = {64, 256, 32, 4096};
    const char *p = (const char *)data;
    keyspace_t *ks;
    ks_owner_t owner = {0};
    if (keyspace_new(2048, on_ready, NULL, NULL, &ks) != 0)
        return 0;
    wire_dialect_t d = wire_sniff(p, size);
    if (d == WIRE_UNKNOWN)
        d = WIRE_V1;
    size_t off = 0;
    while (off < size) {
        wire_req_t q;
        size_t need = 0;
        ssize_t r = wire_parse(d, p + off, size - off, &lim, &q, &need);
        if (r < 0)
            break;
        if (r == 0) {
            if (need <= size - off) /* "need more" must ask for more than is there */
                __builtin_trap();
            break;
        }
        if ((size_t)r > size - off)
            __builtin_trap();
        apply(ks, &owner, &q);
        off += (size_t)r;
    }
    keyspace_release(ks, &owner);
    keyspace_free(ks);
    /* the same bytes as every kind of reply */
    for (int shape = WIRE_R_U8; shape <= WIRE_R_LIST; shape++) {
        wire_reply_t rep;
        ssize_t r = wire_reply_parse((wire_reply_shape_t)shape, 3, p, size, &lim, &rep, NULL);
        if (r > (ssize_t)size)
            __builtin_trap();
        if (r > 0 && (shape == WIRE_R_VECS || shape == WIRE_R_LIST)) {
            wire_iter_t it;
            wire_str_t s;
            wire_iter_init(&it, rep.list);
            while (wire_list_next(&it, &s, NULL))
                ;
        }
    }
    return 0;
}
