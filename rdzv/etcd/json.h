/* rdzv/etcd/json.h — what podrun says to etcd and what it reads back, through etcd's v3 JSON
 * gateway: the endpoint list, base64, request bodies and the parsing of answers. Pure code: no
 * I/O, no globals.
 *
 * etcd (3.4 and later) serves its v3 gRPC API as JSON over HTTP POST: /v3/kv/range, /v3/kv/put,
 * /v3/kv/txn, /v3/kv/deleterange, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke and the
 * streaming /v3/watch (3.4 also answers under /v3beta/, 3.5 no longer does). Keys and values are
 * base64. 64-bit numbers come back as strings ("revision":"12") and are accepted in either form;
 * a field at its zero value is left out of an answer ("succeeded" false, "TTL" 0, an event's
 * "type" PUT, "watch_id" 0). A streaming answer wraps each message in {"result": ...}; an error
 * is {"error": text, "code": gRPC code, "message": text}, with a non-2xx HTTP status.
 *
 * Every parser takes any bytes: what is not an answer etcd could send is -EPROTO, never a crash,
 * and every length and count is bounded. */
#ifndef PODRUN_RDZV_ETCD_JSON_H
#define PODRUN_RDZV_ETCD_JSON_H

#include <stddef.h>
#include <stdint.h>

/* ---- endpoints ---- */

#define ETCD_MAX_ENDPOINTS 16
#define ETCD_DEFAULT_PORT 2379

typedef struct etcd_endpoint {
    char url[300];   /* "http://host:port" without a trailing '/'; an IPv6 host in brackets */
    char host[256];
    int port;
    int tls;         /* https */
} etcd_endpoint_t;

/* Parses "ITEM[,ITEM...]", each ITEM [http://|https://]HOST[:PORT][/] (port 2379 when left out;
 * an item without a scheme is https when tls_default is set, else http). Returns the number of
 * endpoints (1..max), or -EINVAL with one line in err naming the item and what is expected. */
int etcd_endpoints_parse(const char *text, int tls_default, etcd_endpoint_t *out, int max,
                         char *err, size_t errlen);

/* ---- keys (base64: rdzv/base/b64.h) ---- */

/* The end of the range of every key that starts with prefix: the prefix with its last byte
 * below 0xff incremented (etcd's "range_end"). out holds klen bytes; returns its length, 0 when
 * every byte is 0xff (then "\0" — every key from prefix on — is the end etcd expects). */
size_t etcd_prefix_end(const char *prefix, size_t klen, char *out);

/* ---- requests (each returns a malloc'd NUL-terminated JSON text, NULL without memory) ---- */

enum etcd_op_kind { ETCD_OP_PUT = 1, ETCD_OP_RANGE, ETCD_OP_DELETE };

typedef struct etcd_op {
    int kind;
    const char *key;
    size_t klen;
    const char *end;   /* RANGE and DELETE over [key, end); NULL: the key alone */
    size_t elen;
    const char *val;   /* PUT */
    size_t vlen;
    int64_t lease;     /* PUT: the lease the key lives with; 0: none */
} etcd_op_t;

enum etcd_cmp_target { ETCD_CMP_VERSION, ETCD_CMP_CREATE, ETCD_CMP_MOD, ETCD_CMP_VALUE };

/* One comparison of a transaction: the key's field equals num (VERSION, CREATE, MOD) or val. A
 * key that does not exist has version, create and mod revision 0. */
typedef struct etcd_cmp {
    const char *key;
    size_t klen;
    int target;
    int64_t num;
    const char *val;
    size_t vlen;
} etcd_cmp_t;

/* The body of /v3/kv/put, /v3/kv/range or /v3/kv/deleterange for one op. */
char *etcd_req_op(const etcd_op_t *op);
/* The body of /v3/kv/txn: if every comparison holds, the ops in ok, else those in fail. */
char *etcd_req_txn(const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ok, size_t nok,
                   const etcd_op_t *fail, size_t nfail);
/* /v3/lease/grant for a lease of ttl seconds. */
char *etcd_req_lease_grant(int64_t ttl);
/* /v3/lease/keepalive and /v3/lease/revoke. */
char *etcd_req_lease_id(int64_t id);

/* One watcher of a /v3/watch stream: the keys [key, end) (end NULL: key alone) from revision
 * start_rev on (0: from now), answered under watch_id (> 0). */
typedef struct etcd_watch_spec {
    const char *key;
    size_t klen;
    const char *end;
    size_t elen;
    int64_t start_rev;
    int64_t watch_id;
} etcd_watch_spec_t;

/* The body of /v3/watch creating n watchers on one stream: one create request per line. */
char *etcd_req_watch(const etcd_watch_spec_t *w, size_t n);

/* etcd's JSON gateway reads a stream's body in pieces (its JSON decoder's first read is 512
 * bytes) and Go's HTTP server discards the rest of a request's body once the first answer's
 * headers go out: a create request past the first piece is lost when etcd answers the first
 * ones before the gateway reads on, and that watcher never starts. So several watchers share a
 * stream only while their body, with any start revision, fits in the first piece. */
#define ETCD_WATCH_BODY_SAFE 512

/* How many of w[0..n) (at least one, when n > 0) go on one stream. */
size_t etcd_watch_group(const etcd_watch_spec_t *w, size_t n);

/* ---- answers ---- */

#define ETCD_MAX_KVS (1 << 20)

typedef struct etcd_kv {
    const char *key, *value; /* decoded, NUL-terminated (keys and values may hold NULs) */
    size_t klen, vlen;
    int64_t create_rev, mod_rev, version, lease;
    int op;                  /* txn: index of the response it came in; watch: 1 for DELETE */
} etcd_kv_t;

typedef struct etcd_resp {
    int64_t revision;        /* header.revision; 0 when there is no header */
    int64_t id, ttl;         /* lease grant and keepalive (ttl 0: the lease does not exist) */
    int succeeded;           /* txn */
    int64_t deleted;         /* deleterange */
    etcd_kv_t *kvs;          /* range, a txn's ranges (in order), a watch message's events */
    size_t n;
    int64_t watch_id, compact_rev;
    int created, canceled;
    char cancel_reason[128];
    int code;                /* an error answer: its gRPC code (2 when it has none) */
    char error[256];         /*   ... and its text */
    uint64_t sent_ms;        /* a call's answer (etcd/client.h): the loop time its attempt was
                                sent, so etcd handled it after then (a lease renewed then lasts
                                at least its ttl from then) */
    void *mem;               /* owned: etcd_resp_free */
} etcd_resp_t;

/* Parses one answer (a whole body, or one line of a stream). 0 for an answer, 1 for an error
 * answer (code and error set), -EPROTO for anything else, -ENOMEM. r is always safe to free. */
int etcd_resp_parse(const char *text, size_t len, etcd_resp_t *r);
void etcd_resp_free(etcd_resp_t *r);

/* gRPC codes a retry (maybe on another member) can get past: the cluster has no leader or is
 * changing it, a request timed out, etcd is overloaded. 1 or 0. */
int etcd_code_transient(int code);

#endif
