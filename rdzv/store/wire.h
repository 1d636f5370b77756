/* rdzv/store/wire.h — the TCPStore wire codec for both torch dialects. Pure: no I/O, no globals.
 *
 * Framing (both dialects, see torch's Utils.hpp): a request is one opcode byte followed by its
 * arguments back to back; integers are little-endian; a key or value is a u64 length and the raw
 * bytes. There is no length prefix for the whole request, so the parser walks the arguments.
 *
 * The two dialects share every argument and reply layout; only the opcode numbers differ:
 *
 *   op             1.13  2.x   arguments                    reply
 *   VALIDATE        -     0    u32 magic 0x3C85F7CE         none (bad magic: close)
 *   SET             0     1    key, value                   none
 *   COMPARE_SET     1     2    key, expected, desired       vec (see keyspace.h)
 *   GET             2     3    key                          vec (missing key: empty)
 *   ADD             3     4    key, i64 delta               i64 new value
 *   CHECK           4     5    u64 n, n keys                u8 READY=0 / NOT_READY=1
 *   WAIT            5     6    u64 n, n keys                u8 STOP_WAITING=0, once, maybe later
 *   GETNUMKEYS      6     7    -                            i64
 *   WATCH_KEY       7     -    key                          u8 KEY_CALLBACK_REGISTERED=3, pushes
 *   DELETE_KEY      8     8    key                          i64 (0 or 1)
 *   APPEND          -     9    key, value                   none
 *   MULTI_GET       -    10    u64 n, n keys                n vecs
 *   MULTI_SET       -    11    u64 n, n (key, value) pairs  none
 *   CANCEL_WAIT     -    12    -                            u8 WAIT_CANCELED=1
 *   PING            -    13    u32 nonce                    u32 nonce
 *   QUEUE_PUSH      -    14    key, value                   none
 *   QUEUE_POP       -    15    key                          i64 length, then a vec if > 0
 *   QUEUE_LEN       -    16    key                          i64
 *   LIST            -    17    -                            i64 n, n vecs (every key)
 *   BARRIER         -    18    key, i64 world size          u8 STOP_WAITING=0, once, maybe later
 *
 * Internally an op is named by its 2.x number (WATCH_KEY, which 2.x lacks, gets 19). */
#ifndef PODRUN_RDZV_WIRE_H
#define PODRUN_RDZV_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rdzv/base/common.h"

typedef enum wire_dialect {
    WIRE_UNKNOWN = 0,
    WIRE_V1 = 1, /* torch 1.13 */
    WIRE_V2 = 2, /* torch >= 2.2: opens every connection with VALIDATE */
} wire_dialect_t;

typedef enum wire_op {
    WIRE_VALIDATE = 0,
    WIRE_SET = 1,
    WIRE_COMPARE_SET = 2,
    WIRE_GET = 3,
    WIRE_ADD = 4,
    WIRE_CHECK = 5,
    WIRE_WAIT = 6,
    WIRE_GETNUMKEYS = 7,
    WIRE_DELETE_KEY = 8,
    WIRE_APPEND = 9,
    WIRE_MULTI_GET = 10,
    WIRE_MULTI_SET = 11,
    WIRE_CANCEL_WAIT = 12,
    WIRE_PING = 13,
    WIRE_QUEUE_PUSH = 14,
    WIRE_QUEUE_POP = 15,
    WIRE_QUEUE_LEN = 16,
    WIRE_LIST = 17,
    WIRE_BARRIER = 18,
    WIRE_WATCH_KEY = 19,
    WIRE_OP_COUNT
} wire_op_t;

#define WIRE_MAGIC 0x3C85F7CEu
/* podrun's store writes these 4 bytes (as a u32) to a connection its allow-list refuses, then
 * closes it: podrun's client tells "refused" from "something else holds the port". */
#define WIRE_REFUSED 0x21434C41u
/* CheckResponseType, WaitResponseType and 1.13's WatchResponseType. */
enum { WIRE_READY = 0, WIRE_NOT_READY = 1 };
enum { WIRE_STOP_WAITING = 0, WIRE_WAIT_CANCELED = 1 };
enum { WIRE_KEY_UPDATED = 0, WIRE_KEY_CREATED = 1, WIRE_KEY_DELETED = 2,
       WIRE_KEY_CALLBACK_REGISTERED = 3 };

/* What the reply to an op looks like on the wire. */
typedef enum wire_reply_shape {
    WIRE_R_NONE, WIRE_R_U8, WIRE_R_U32, WIRE_R_I64, WIRE_R_VEC,
    WIRE_R_VECS,   /* n vectors, n known from the request (MULTI_GET) */
    WIRE_R_QPOP,   /* i64 length, then a vector if the length is > 0 */
    WIRE_R_LIST,   /* i64 n, then n vectors */
} wire_reply_shape_t;

/* Which keys a request carries. */
typedef enum wire_keys {
    WIRE_KEYS_NONE,
    WIRE_KEYS_ONE,     /* req.key */
    WIRE_KEYS_LIST,    /* req.list: n keys (CHECK, WAIT, MULTI_GET) */
    WIRE_KEYS_PAIRS,   /* req.list: n key/value pairs (MULTI_SET) */
} wire_keys_t;

typedef struct wire_limits {
    size_t max_key_len;      /* bytes per key */
    size_t max_value_len;    /* bytes per value */
    size_t max_keys;         /* keys in one CHECK/WAIT/MULTI_* */
    size_t max_request;      /* bytes in one request, opcode included */
} wire_limits_t;

typedef struct wire_str {
    const char *p;
    size_t len;
} wire_str_t;

/* A decoded request. Strings point into the caller's buffer, so it is valid only as long as
 * those bytes are. Multi-key ops keep their keys (or key/value pairs) as the raw encoded list;
 * walk it with wire_list_next. */
typedef struct wire_req {
    wire_op_t op;
    wire_str_t key;      /* SET, COMPARE_SET, GET, ADD, DELETE_KEY, APPEND, QUEUE_*, WATCH_KEY */
    wire_str_t val;      /* SET, APPEND, QUEUE_PUSH value; COMPARE_SET expected */
    wire_str_t val2;     /* COMPARE_SET desired */
    int64_t num;         /* ADD delta */
    uint32_t u32;        /* VALIDATE magic, PING nonce */
    uint64_t n;          /* CHECK, WAIT, MULTI_GET: keys; MULTI_SET: pairs */
    wire_str_t list;     /* the n encoded keys or pairs */
} wire_req_t;

/* The parsers fail with PODRUN_EBADOP (unknown opcode for the dialect), PODRUN_ETOOBIG (a length
 * or count beyond the limits) or PODRUN_EMAGIC (VALIDATE with the wrong magic):
 * rdzv/base/common.h. */

/* Tells the dialect from the first bytes a connection sent: WIRE_V2 when they are
 * 00 CE F7 85 3C (VALIDATE + magic), WIRE_V1 as soon as they cannot be, WIRE_UNKNOWN while fewer
 * than 5 bytes have come and they still match. The bytes are not consumed. */
wire_dialect_t wire_sniff(const char *buf, size_t len);

/* Decodes one request from buf[0..len). Returns the number of bytes it used (> 0), 0 when the
 * request is not complete yet, or a PODRUN_E* code. When it returns 0, *need (if not NULL) is a
 * length the buffer must reach before decoding can make progress: callers re-parse only then. */
ssize_t wire_parse(wire_dialect_t d, const char *buf, size_t len, const wire_limits_t *lim,
                   wire_req_t *req, size_t *need);

/* Walks a request's list: the next key (and, for MULTI_SET, its value into *val). Returns 1 while
 * there is one, 0 at the end. The list was validated by wire_parse. */
typedef struct wire_iter {
    const char *p, *end;
} wire_iter_t;
void wire_iter_init(wire_iter_t *it, wire_str_t list);
int wire_list_next(wire_iter_t *it, wire_str_t *key, wire_str_t *val);

/* The opcode byte of `op` in dialect d, or -1 if the dialect has no such op. */
int wire_opcode(wire_dialect_t d, wire_op_t op);
const char *wire_op_name(wire_op_t op);
wire_reply_shape_t wire_reply_shape(wire_op_t op);
/* Whether an op changes the key space (SET, COMPARE_SET, ADD, DELETE_KEY, APPEND, MULTI_SET,
 * QUEUE_PUSH, QUEUE_POP, BARRIER), and which keys it carries: the op table's columns (wire.c). */
int wire_op_writes(wire_op_t op);
wire_keys_t wire_op_keys(wire_op_t op);

/* A growable output buffer. Functions return 0 or -ENOMEM; on -ENOMEM the buffer is unchanged. */
typedef struct wire_buf {
    char *p;
    size_t len, cap;
} wire_buf_t;
int wire_buf_reserve(wire_buf_t *b, size_t extra);
void wire_buf_free(wire_buf_t *b);
int wire_put_u8(wire_buf_t *b, uint8_t v);
int wire_put_u32(wire_buf_t *b, uint32_t v);
int wire_put_u64(wire_buf_t *b, uint64_t v);
int wire_put_i64(wire_buf_t *b, int64_t v);
int wire_put_str(wire_buf_t *b, const void *p, size_t len); /* u64 length + bytes */
/* A key list as CHECK/WAIT/MULTI_GET send it: u64 n, then each NUL-terminated key as a str.
 * On -ENOMEM part of the list may be in the buffer: callers drop the request. */
int wire_put_keys(wire_buf_t *b, const char *const *keys, size_t n);
/* The opcode byte of `op` for dialect d; -EINVAL if the dialect lacks it. */
int wire_put_op(wire_buf_t *b, wire_dialect_t d, wire_op_t op);

/* A decoded reply (client side). */
typedef struct wire_reply {
    uint8_t u8;
    uint32_t u32;
    int64_t num;        /* I64, QPOP length, LIST count */
    wire_str_t val;     /* VEC, QPOP value */
    wire_str_t list;    /* VECS, LIST: the encoded vectors; walk with wire_list_next */
} wire_reply_t;

/* Decodes one reply of the given shape (n: vectors expected for WIRE_R_VECS). Same return
 * convention as wire_parse; vector lengths are bounded by lim->max_value_len and the whole reply
 * by lim->max_request. */
ssize_t wire_reply_parse(wire_reply_shape_t shape, uint64_t n, const char *buf, size_t len,
                         const wire_limits_t *lim, wire_reply_t *out, size_t *need);

/* The clients' bounds on replies: trusted more than requests, but still bounded. */
extern const wire_limits_t wire_reply_limits;

/* The clients' connect backoff: returns the next pause in ms (*delay_ms with +/-50 % jitter
 * from *seed) and grows *delay_ms by 1.5, capped at 10 s. Start *delay_ms at 500. */
double wire_backoff_next(double *delay_ms, unsigned *seed);

static inline uint64_t wire_get_u64(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | u[i];
    return v;
}

static inline uint32_t wire_get_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

#endif
