/* rdzv/store/wire.c — the TCPStore wire codec (see wire.h for the op table). */
#include "rdzv/store/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* How an op's arguments are laid out after the opcode byte. */
enum args {
    A_NONE, A_U32, A_KEY, A_KEY_VAL, A_KEY_VAL_VAL, A_KEY_I64, A_KEYS, A_PAIRS,
};

/* One row per op: every fact about an op is here, and nothing else switches over the ops. */
static const struct op_info {
    const char *name;
    unsigned char args;
    unsigned char reply;
    unsigned char writes;       /* changes the key space (wire_op_writes) */
    unsigned char keys;         /* which keys it carries (wire_op_keys) */
} ops[WIRE_OP_COUNT] = {
    /*                    name           args           reply        writes keys */
    [WIRE_VALIDATE] =    {"VALIDATE",    A_U32,         WIRE_R_NONE, 0, WIRE_KEYS_NONE},
    [WIRE_SET] =         {"SET",         A_KEY_VAL,     WIRE_R_NONE, 1, WIRE_KEYS_ONE},
    [WIRE_COMPARE_SET] = {"COMPARE_SET", A_KEY_VAL_VAL, WIRE_R_VEC,  1, WIRE_KEYS_ONE},
    [WIRE_GET] =         {"GET",         A_KEY,         WIRE_R_VEC,  0, WIRE_KEYS_ONE},
    [WIRE_ADD] =         {"ADD",         A_KEY_I64,     WIRE_R_I64,  1, WIRE_KEYS_ONE},
    [WIRE_CHECK] =       {"CHECK",       A_KEYS,        WIRE_R_U8,   0, WIRE_KEYS_LIST},
    [WIRE_WAIT] =        {"WAIT",        A_KEYS,        WIRE_R_U8,   0, WIRE_KEYS_LIST},
    [WIRE_GETNUMKEYS] =  {"GETNUMKEYS",  A_NONE,        WIRE_R_I64,  0, WIRE_KEYS_NONE},
    [WIRE_DELETE_KEY] =  {"DELETE_KEY",  A_KEY,         WIRE_R_I64,  1, WIRE_KEYS_ONE},
    [WIRE_APPEND] =      {"APPEND",      A_KEY_VAL,     WIRE_R_NONE, 1, WIRE_KEYS_ONE},
    [WIRE_MULTI_GET] =   {"MULTI_GET",   A_KEYS,        WIRE_R_VECS, 0, WIRE_KEYS_LIST},
    [WIRE_MULTI_SET] =   {"MULTI_SET",   A_PAIRS,       WIRE_R_NONE, 1, WIRE_KEYS_PAIRS},
    [WIRE_CANCEL_WAIT] = {"CANCEL_WAIT", A_NONE,        WIRE_R_U8,   0, WIRE_KEYS_NONE},
    [WIRE_PING] =        {"PING",        A_U32,         WIRE_R_U32,  0, WIRE_KEYS_NONE},
    [WIRE_QUEUE_PUSH] =  {"QUEUE_PUSH",  A_KEY_VAL,     WIRE_R_NONE, 1, WIRE_KEYS_ONE},
    [WIRE_QUEUE_POP] =   {"QUEUE_POP",   A_KEY,         WIRE_R_QPOP, 1, WIRE_KEYS_ONE},
    [WIRE_QUEUE_LEN] =   {"QUEUE_LEN",   A_KEY,         WIRE_R_I64,  0, WIRE_KEYS_ONE},
    [WIRE_LIST] =        {"LIST",        A_NONE,        WIRE_R_LIST, 0, WIRE_KEYS_NONE},
    [WIRE_BARRIER] =     {"BARRIER",     A_KEY_I64,     WIRE_R_U8,   1, WIRE_KEYS_ONE},
    [WIRE_WATCH_KEY] =   {"WATCH_KEY",   A_KEY,         WIRE_R_U8,   0, WIRE_KEYS_ONE},
};

/* 1.13's QueryType (TCPStore.cpp, anonymous namespace). */
static const signed char v1_ops[] = {
    WIRE_SET, WIRE_COMPARE_SET, WIRE_GET, WIRE_ADD, WIRE_CHECK,
    WIRE_WAIT, WIRE_GETNUMKEYS, WIRE_WATCH_KEY, WIRE_DELETE_KEY,
};
#define V1_OPS ((int)sizeof v1_ops)
#define V2_OPS (WIRE_BARRIER + 1)

static const unsigned char v2_hello[5] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};

wire_dialect_t wire_sniff(const char *buf, size_t len)
{
    size_t n = len < 5 ? len : 5;
    if (memcmp(buf, v2_hello, n) != 0)
        return WIRE_V1;
    return n == 5 ? WIRE_V2 : WIRE_UNKNOWN;
}

int wire_opcode(wire_dialect_t d, wire_op_t op)
{
    if (d == WIRE_V2)
        return (int)op < V2_OPS ? (int)op : -1;
    for (int i = 0; i < V1_OPS; i++)
        if (v1_ops[i] == (int)op)
            return i;
    return -1;
}

const char *wire_op_name(wire_op_t op)
{
    return (unsigned)op < WIRE_OP_COUNT ? ops[op].name : "?";
}

wire_reply_shape_t wire_reply_shape(wire_op_t op)
{
    return (unsigned)op < WIRE_OP_COUNT ? (wire_reply_shape_t)ops[op].reply : WIRE_R_NONE;
}

int wire_op_writes(wire_op_t op)
{
    return (unsigned)op < WIRE_OP_COUNT && ops[op].writes;
}

wire_keys_t wire_op_keys(wire_op_t op)
{
    return (unsigned)op < WIRE_OP_COUNT ? (wire_keys_t)ops[op].keys : WIRE_KEYS_NONE;
}

/* A read cursor over an incomplete buffer: every take either succeeds or records how many bytes
 * the buffer must hold before it could. */
typedef struct cur {
    const char *base;
    size_t off, len, max;
    size_t need;
} cur_t;

enum { OK = 1, MORE = 0 };

static int take(cur_t *c, size_t n, const char **p)
{
    if (n > c->max - c->off)
        return PODRUN_ETOOBIG;
    if (n > c->len - c->off) {
        c->need = c->off + n;
        return MORE;
    }
    if (p)
        *p = c->base + c->off;
    c->off += n;
    return OK;
}

static int take_u64(cur_t *c, uint64_t *v)
{
    const char *p;
    int r = take(c, 8, &p);
    if (r == OK)
        *v = wire_get_u64(p);
    return r;
}

static int take_str(cur_t *c, size_t limit, wire_str_t *s)
{
    uint64_t n;
    int r = take_u64(c, &n);
    if (r != OK)
        return r;
    if (n > limit)
        return PODRUN_ETOOBIG;
    s->len = (size_t)n;
    return take(c, s->len, &s->p);
}

/* n keys (pairs: key and value each) back to back; records them as one raw list. */
static int take_list(cur_t *c, const wire_limits_t *lim, int pairs, wire_req_t *req)
{
    int r = take_u64(c, &req->n);
    if (r != OK)
        return r;
    if (req->n > lim->max_keys)
        return PODRUN_ETOOBIG;
    size_t start = c->off;
    wire_str_t s;
    for (uint64_t i = 0; i < req->n; i++) {
        if ((r = take_str(c, lim->max_key_len, &s)) != OK)
            return r;
        if (pairs && (r = take_str(c, lim->max_value_len, &s)) != OK)
            return r;
    }
    req->list.p = c->base + start;
    req->list.len = c->off - start;
    return OK;
}

static int take_args(cur_t *c, const wire_limits_t *lim, int args, wire_req_t *req)
{
    const char *p;
    uint64_t v;
    int r = OK;
    switch (args) {
    case A_NONE:
        return OK;
    case A_U32:
        if ((r = take(c, 4, &p)) == OK)
            req->u32 = wire_get_u32(p);
        return r;
    case A_KEYS:
    case A_PAIRS:
        return take_list(c, lim, args == A_PAIRS, req);
    }
    if ((r = take_str(c, lim->max_key_len, &req->key)) != OK)
        return r;
    switch (args) {
    case A_KEY_I64:
        if ((r = take_u64(c, &v)) == OK)
            req->num = (int64_t)v;
        return r;
    case A_KEY_VAL_VAL:
        if ((r = take_str(c, lim->max_value_len, &req->val)) != OK)
            return r;
        return take_str(c, lim->max_value_len, &req->val2);
    case A_KEY_VAL:
        return take_str(c, lim->max_value_len, &req->val);
    }
    return OK; /* A_KEY */
}

ssize_t wire_parse(wire_dialect_t d, const char *buf, size_t len, const wire_limits_t *lim,
                   wire_req_t *req, size_t *need)
{
    cur_t c = {buf, 0, len, lim->max_request ? lim->max_request : SIZE_MAX, 0};
    if (len == 0) {
        if (need)
            *need = 1;
        return 0;
    }
    unsigned code = (unsigned char)buf[0];
    int op;
    if (d == WIRE_V2)
        op = code < V2_OPS ? (int)code : -1;
    else
        op = code < V1_OPS ? v1_ops[code] : -1;
    if (op < 0)
        return PODRUN_EBADOP;
    memset(req, 0, sizeof *req);
    req->op = (wire_op_t)op;
    c.off = 1;
    int r = take_args(&c, lim, ops[op].args, req);
    if (r < 0)
        return r;
    if (r == MORE) {
        if (need)
            *need = c.need;
        return 0;
    }
    if (op == WIRE_VALIDATE && req->u32 != WIRE_MAGIC)
        return PODRUN_EMAGIC;
    return (ssize_t)c.off;
}

void wire_iter_init(wire_iter_t *it, wire_str_t list)
{
    it->p = list.p;
    it->end = list.p + list.len;
}

/* The list was walked by the parser already, so lengths are known to fit. */
static wire_str_t iter_str(wire_iter_t *it)
{
    wire_str_t s;
    s.len = (size_t)wire_get_u64(it->p);
    s.p = it->p + 8;
    it->p += 8 + s.len;
    return s;
}

int wire_list_next(wire_iter_t *it, wire_str_t *key, wire_str_t *val)
{
    if (!it->p || it->p >= it->end)
        return 0;
    *key = iter_str(it);
    if (val)
        *val = iter_str(it);
    return 1;
}

int wire_buf_reserve(wire_buf_t *b, size_t extra)
{
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len)
        return -ENOMEM;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

void wire_buf_free(wire_buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int wire_put_u8(wire_buf_t *b, uint8_t v)
{
    if (wire_buf_reserve(b, 1))
        return -ENOMEM;
    b->p[b->len++] = (char)v;
    return 0;
}

int wire_put_u32(wire_buf_t *b, uint32_t v)
{
    if (wire_buf_reserve(b, 4))
        return -ENOMEM;
    for (int i = 0; i < 4; i++)
        b->p[b->len++] = (char)(v >> (8 * i));
    return 0;
}

int wire_put_u64(wire_buf_t *b, uint64_t v)
{
    if (wire_buf_reserve(b, 8))
        return -ENOMEM;
    for (int i = 0; i < 8; i++)
        b->p[b->len++] = (char)(v >> (8 * i));
    return 0;
}

int wire_put_i64(wire_buf_t *b, int64_t v)
{
    return wire_put_u64(b, (uint64_t)v);
}

int wire_put_str(wire_buf_t *b, const void *p, size_t len)
{
    if (len > SIZE_MAX - 8 || wire_buf_reserve(b, 8 + len))
        return -ENOMEM;
    wire_put_u64(b, len);
    if (len)
        memcpy(b->p + b->len, p, len);
    b->len += len;
    return 0;
}

int wire_put_keys(wire_buf_t *b, const char *const *keys, size_t n)
{
    if (wire_put_u64(b, n))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (wire_put_str(b, keys[i], strlen(keys[i])))
            return -ENOMEM;
    return 0;
}

int wire_put_op(wire_buf_t *b, wire_dialect_t d, wire_op_t op)
{
    int code = wire_opcode(d, op);
    if (code < 0)
        return -EINVAL;
    return wire_put_u8(b, (uint8_t)code);
}

static int take_vecs(cur_t *c, const wire_limits_t *lim, uint64_t n, wire_reply_t *out)
{
    size_t start = c->off;
    wire_str_t s;
    for (uint64_t i = 0; i < n; i++) {
        int r = take_str(c, lim->max_value_len, &s);
        if (r != OK)
            return r;
    }
    out->list.p = c->base + start;
    out->list.len = c->off - start;
    return OK;
}

ssize_t wire_reply_parse(wire_reply_shape_t shape, uint64_t n, const char *buf, size_t len,
                         const wire_limits_t *lim, wire_reply_t *out, size_t *need)
{
    cur_t c = {buf, 0, len, lim->max_request ? lim->max_request : SIZE_MAX, 0};
    const char *p;
    uint64_t v;
    int r = OK;
    memset(out, 0, sizeof *out);
    switch (shape) {
    case WIRE_R_NONE:
        return 0;
    case WIRE_R_U8:
        if ((r = take(&c, 1, &p)) == OK)
            out->u8 = (uint8_t)*p;
        break;
    case WIRE_R_U32:
        if ((r = take(&c, 4, &p)) == OK)
            out->u32 = wire_get_u32(p);
        break;
    case WIRE_R_I64:
        if ((r = take_u64(&c, &v)) == OK)
            out->num = (int64_t)v;
        break;
    case WIRE_R_VEC:
        r = take_str(&c, lim->max_value_len, &out->val);
        break;
    case WIRE_R_VECS:
        r = take_vecs(&c, lim, n, out);
        break;
    case WIRE_R_QPOP:
        if ((r = take_u64(&c, &v)) == OK) {
            out->num = (int64_t)v;
            if (out->num > 0)
                r = take_str(&c, lim->max_value_len, &out->val);
            else if (out->num < 0)
                r = PODRUN_ETOOBIG;
        }
        break;
    case WIRE_R_LIST:
        if ((r = take_u64(&c, &v)) == OK) {
            out->num = (int64_t)v;
            r = v > lim->max_keys ? PODRUN_ETOOBIG : take_vecs(&c, lim, v, out);
        }
        break;
    }
    if (r < 0)
        return r;
    if (r == MORE) {
        if (need)
            *need = c.need;
        return 0;
    }
    return (ssize_t)c.off;
}

const wire_limits_t wire_reply_limits = {
    .max_key_len = (size_t)1 << 30,
    .max_value_len = (size_t)1 << 32,
    .max_keys = (size_t)1 << 24,
    .max_request = 0,
};

double wire_backoff_next(double *delay_ms, unsigned *seed)
{
    double r01 = (double)rand_r(seed) / RAND_MAX;
    double d = *delay_ms * (0.5 + r01);
    *delay_ms = *delay_ms * 1.5 > 10000 ? 10000 : *delay_ms * 1.5;
    return d;
}
