/* rdzv/etcd/json.c — etcd's v3 JSON gateway: endpoints, base64, requests, answers (see
 * etcd/json.h). Requests are built and answers read with jansson; nothing here does I/O. */
#include "rdzv/etcd/json.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/b64.h"
#include "rdzv/base/common.h"

/* ---- endpoints ---- */

/* One ITEM of the list (len bytes at t) into *e. */
static int endpoint_parse(const char *t, size_t len, int tls_default, etcd_endpoint_t *e,
                          char *err, size_t errlen)
{
    char item[300];
    if (len == 0)
        return podrun_failf(-EINVAL, err, errlen, "an empty item in the etcd endpoint list");
    if (len >= sizeof item)
        return podrun_failf(-EINVAL, err, errlen, "etcd endpoint '%.40s...' is too long", t);
    memcpy(item, t, len);
    item[len] = '\0';
    const char *hp = item;
    e->tls = tls_default;
    if (strncmp(item, "http://", 7) == 0) {
        e->tls = 0;
        hp += 7;
    } else if (strncmp(item, "https://", 8) == 0) {
        e->tls = 1;
        hp += 8;
    } else if (strstr(item, "://")) {
        return podrun_failf(-EINVAL, err, errlen,
                            "etcd endpoint '%s': the scheme must be http:// or https://", item);
    }
    char hostport[300];
    snprintf(hostport, sizeof hostport, "%s", hp);
    size_t hl = strlen(hostport);
    if (hl && hostport[hl - 1] == '/')
        hostport[--hl] = '\0';
    bool has_port;
    if (!hl || podrun_hostport_parse(hostport, e->host, sizeof e->host, &e->port, &has_port) < 0 ||
        (has_port && e->port == 0))
        return podrun_failf(-EINVAL, err, errlen,
                            "etcd endpoint '%s': expected [http://|https://]HOST[:PORT], e.g. "
                            "etcd-0:2379", item);
    if (!has_port)
        e->port = ETCD_DEFAULT_PORT;
    char hostfmt[300];
    podrun_hostport_format(e->host, e->port, hostfmt, sizeof hostfmt);
    sfmt(e->url, sizeof e->url, "%s://%s", e->tls ? "https" : "http", hostfmt);
    return 0;
}

int etcd_endpoints_parse(const char *text, int tls_default, etcd_endpoint_t *out, int max,
                         char *err, size_t errlen)
{
    if (!text || !*text)
        return podrun_failf(-EINVAL, err, errlen, "no etcd endpoint given");
    int n = 0;
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (n == max)
            return podrun_failf(-EINVAL, err, errlen, "more than %d etcd endpoints", max);
        int r = endpoint_parse(p, len, tls_default, &out[n], err, errlen);
        if (r < 0)
            return r;
        n++;
        if (!p[len])
            return n;
        p += len + 1;
    }
}

/* ---- keys ---- */

size_t etcd_prefix_end(const char *prefix, size_t klen, char *out)
{
    memcpy(out, prefix, klen);
    for (size_t i = klen; i > 0; i--) {
        if ((unsigned char)out[i - 1] != 0xff) {
            out[i - 1]++;
            return i;
        }
    }
    return 0;
}

/* ---- requests ---- */

/* A JSON string holding the base64 of s[0..n); NULL without memory. */
static json_t *b64_json(const char *s, size_t n)
{
    char small[512], *buf = small;
    size_t need = B64_ENCODED_LEN(n) + 1;
    if (need > sizeof small && !(buf = malloc(need)))
        return NULL;
    size_t len = b64_encode(s, n, buf, 0);
    json_t *j = json_stringn(buf, len);
    if (buf != small)
        free(buf);
    return j;
}

/* Sets o[name] to v, which it steals; -1 when v is NULL or setting failed. */
static int put(json_t *o, const char *name, json_t *v)
{
    return v ? json_object_set_new(o, name, v) : -1;
}

/* The fields of a put, range or delete-range request. */
static json_t *op_fields(const etcd_op_t *op)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = put(o, "key", b64_json(op->key, op->klen));
    if (op->kind == ETCD_OP_PUT) {
        bad |= put(o, "value", b64_json(op->val ? op->val : "", op->val ? op->vlen : 0));
        if (op->lease)
            bad |= put(o, "lease", json_integer(op->lease));
    } else if (op->end) {
        bad |= put(o, "range_end", b64_json(op->end, op->elen));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The text of j, which is released; NULL without memory. */
static char *dump(json_t *j)
{
    if (!j)
        return NULL;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

char *etcd_req_op(const etcd_op_t *op)
{
    return dump(op_fields(op));
}

static json_t *txn_ops(const etcd_op_t *ops, size_t n)
{
    static const char *const names[] = {NULL, "request_put", "request_range",
                                        "request_delete_range"};
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *w = json_object();
        if (!w || ops[i].kind < ETCD_OP_PUT || ops[i].kind > ETCD_OP_DELETE ||
            put(w, names[ops[i].kind], op_fields(&ops[i])) || json_array_append_new(a, w)) {
            json_decref(w);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *txn_cmp(const etcd_cmp_t *c)
{
    static const char *const targets[] = {"VERSION", "CREATE", "MOD", "VALUE"};
    static const char *const fields[] = {"version", "create_revision", "mod_revision", "value"};
    if (c->target < ETCD_CMP_VERSION || c->target > ETCD_CMP_VALUE)
        return NULL;
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = put(o, "key", b64_json(c->key, c->klen)) | put(o, "result", json_string("EQUAL")) |
              put(o, "target", json_string(targets[c->target]));
    if (c->target == ETCD_CMP_VALUE)
        bad |= put(o, fields[c->target], b64_json(c->val ? c->val : "", c->val ? c->vlen : 0));
    else
        bad |= put(o, fields[c->target], json_integer(c->num));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *etcd_req_txn(const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ok, size_t nok,
                   const etcd_op_t *fail, size_t nfail)
{
    json_t *o = json_object(), *a = json_array();
    int bad = !o || !a;
    for (size_t i = 0; !bad && i < ncmp; i++) {
        json_t *c = txn_cmp(&cmp[i]);
        bad = !c || json_array_append_new(a, c);
    }
    if (bad) {
        json_decref(a);
        json_decref(o);
        return NULL;
    }
    bad = put(o, "compare", a) | put(o, "success", txn_ops(ok, nok)) |
          put(o, "failure", txn_ops(fail, nfail));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return dump(o);
}

char *etcd_req_lease_grant(int64_t ttl)
{
    return dump(json_pack("{sI}", "TTL", (json_int_t)ttl));
}

char *etcd_req_lease_id(int64_t id)
{
    return dump(json_pack("{sI}", "ID", (json_int_t)id));
}

/* One create request of a watch stream. */
static char *watch_create(const etcd_watch_spec_t *w)
{
    json_t *c = json_object(), *o = json_object();
    int bad = !c || !o || put(c, "key", b64_json(w->key, w->klen)) ||
              (w->end && put(c, "range_end", b64_json(w->end, w->elen))) ||
              (w->start_rev > 0 && put(c, "start_revision", json_integer(w->start_rev))) ||
              put(c, "watch_id", json_integer(w->watch_id));
    if (bad || json_object_set_new(o, "create_request", c)) {
        json_decref(c);
        json_decref(o);
        return NULL;
    }
    return dump(o);
}

char *etcd_req_watch(const etcd_watch_spec_t *w, size_t n)
{
    char *s = NULL;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char *one = watch_create(&w[i]);
        size_t l = one ? strlen(one) : 0;
        char *ns = one ? realloc(s, len + l + 2) : NULL;
        if (!ns) {
            free(one);
            free(s);
            return NULL;
        }
        s = ns;
        memcpy(s + len, one, l);
        len += l;
        s[len++] = '\n';
        s[len] = '\0';
        free(one);
    }
    return s ? s : strdup("");
}

size_t etcd_watch_group(const etcd_watch_spec_t *w, size_t n)
{
    size_t len = 0, k = 0;
    for (; k < n; k++) {
        etcd_watch_spec_t worst = w[k];
        worst.start_rev = INT64_MAX; /* a resumed stream names where it resumes */
        char *one = watch_create(&worst);
        size_t l = one ? strlen(one) + 1 : SIZE_MAX / 2;
        free(one);
        if (k > 0 && len + l > ETCD_WATCH_BODY_SAFE)
            break;
        len += l;
    }
    return k;
}

/* ---- answers ---- */

/* o[name] as a 64-bit number: a JSON integer or a string of digits (etcd's int64 form). Absent
 * or null: 0. -EPROTO for anything else. */
static int get_i64(json_t *o, const char *name, int64_t *out)
{
    json_t *v = json_object_get(o, name);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return -EPROTO;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    size_t i = s[0] == '-';
    if (n == i || n > 20)
        return -EPROTO;
    uint64_t acc = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || acc > (UINT64_MAX - 9) / 10)
            return -EPROTO;
        acc = acc * 10 + (uint64_t)(s[i] - '0');
    }
    if (acc > (uint64_t)INT64_MAX)
        return -EPROTO;
    *out = s[0] == '-' ? -(int64_t)acc : (int64_t)acc;
    return 0;
}

/* o[name] as a boolean: absent 0. */
static int get_bool(json_t *o, const char *name, int *out)
{
    json_t *v = json_object_get(o, name);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return -EPROTO;
    *out = json_is_true(v);
    return 0;
}

/* o[name] as base64 text (absent: ""), not yet decoded. */
static int get_b64(json_t *o, const char *name, const char **s, size_t *n)
{
    json_t *v = json_object_get(o, name);
    *s = "";
    *n = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) % 4)
        return -EPROTO;
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

/* The key-value objects of an answer, in order, with the index each belongs to. */
typedef struct kvref {
    json_t *kv;
    int op;
} kvref_t;

typedef struct kvlist {
    kvref_t *v;
    size_t n, cap;
} kvlist_t;

static int kvlist_add(kvlist_t *l, json_t *kv, int op)
{
    if (!json_is_object(kv))
        return -EPROTO;
    if (l->n == ETCD_MAX_KVS)
        return -E2BIG;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        kvref_t *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (kvref_t){kv, op};
    return 0;
}

/* Every kv of an array of kvs. */
static int collect_kvs(kvlist_t *l, json_t *arr, int op)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return -EPROTO;
    size_t i;
    json_t *kv;
    json_array_foreach(arr, i, kv) {
        int r = kvlist_add(l, kv, op);
        if (r)
            return r;
    }
    return 0;
}

/* Where the kvs of an answer are: "kvs" (range), each response_range of "responses" (txn),
 * each event's "kv" of "events" (watch; op 1 marks a DELETE). */
static int collect(kvlist_t *l, json_t *o)
{
    int r = collect_kvs(l, json_object_get(o, "kvs"), 0);
    json_t *arr = json_object_get(o, "responses");
    if (!r && arr && !json_is_null(arr)) {
        if (!json_is_array(arr))
            return -EPROTO;
        size_t i;
        json_t *resp;
        json_array_foreach(arr, i, resp) {
            if (!json_is_object(resp))
                return -EPROTO;
            json_t *rr = json_object_get(resp, "response_range");
            if (rr && !json_is_null(rr)) {
                if (!json_is_object(rr))
                    return -EPROTO;
                if ((r = collect_kvs(l, json_object_get(rr, "kvs"), (int)i)))
                    return r;
            }
        }
    }
    arr = json_object_get(o, "events");
    if (!r && arr && !json_is_null(arr)) {
        if (!json_is_array(arr))
            return -EPROTO;
        size_t i;
        json_t *ev;
        json_array_foreach(arr, i, ev) {
            if (!json_is_object(ev))
                return -EPROTO;
            json_t *type = json_object_get(ev, "type");
            int del = 0;
            if (type && json_is_string(type))
                del = strcmp(json_string_value(type), "DELETE") == 0;
            else if (type && json_is_integer(type))
                del = json_integer_value(type) == 1;
            else if (type && !json_is_null(type))
                return -EPROTO;
            if ((r = kvlist_add(l, json_object_get(ev, "kv"), del)))
                return r;
        }
    }
    return r;
}

/* Decodes the collected kvs into one block: the array, then every key and value. */
static int decode_kvs(const kvlist_t *l, etcd_resp_t *r)
{
    size_t bytes = l->n * sizeof(etcd_kv_t);
    for (size_t i = 0; i < l->n; i++) {
        const char *s;
        size_t n, m;
        if (get_b64(l->v[i].kv, "key", &s, &n) || get_b64(l->v[i].kv, "value", &s, &m))
            return -EPROTO;
        bytes += n / 4 * 3 + m / 4 * 3 + 2;
    }
    char *mem = malloc(bytes ? bytes : 1);
    if (!mem)
        return -ENOMEM;
    r->mem = mem;
    r->kvs = (etcd_kv_t *)mem;
    r->n = l->n;
    char *p = mem + l->n * sizeof(etcd_kv_t);
    for (size_t i = 0; i < l->n; i++) {
        etcd_kv_t *kv = &r->kvs[i];
        json_t *o = l->v[i].kv;
        const char *s;
        size_t n;
        kv->op = l->v[i].op;
        if (get_i64(o, "create_revision", &kv->create_rev) || get_i64(o, "mod_revision", &kv->mod_rev) ||
            get_i64(o, "version", &kv->version) || get_i64(o, "lease", &kv->lease))
            return -EPROTO;
        get_b64(o, "key", &s, &n);
        int k = b64_decode(s, n, p, n / 4 * 3, 0);
        if (k < 0)
            return -EPROTO;
        kv->key = p;
        kv->klen = (size_t)k;
        p[k] = '\0';
        p += k + 1;
        get_b64(o, "value", &s, &n);
        int v = b64_decode(s, n, p, n / 4 * 3, 0);
        if (v < 0)
            return -EPROTO;
        kv->value = p;
        kv->vlen = (size_t)v;
        p[v] = '\0';
        p += v + 1;
    }
    return 0;
}

/* An error answer: {"error": text, "code": N, "message": text}, or a stream's
 * {"error": {"grpc_code": N, "message": text, ...}}. */
static int parse_error(json_t *e, json_t *top, etcd_resp_t *r)
{
    json_t *msg = NULL, *code = NULL;
    if (json_is_object(e)) {
        msg = json_object_get(e, "message");
        code = json_object_get(e, "grpc_code");
        if (!code)
            code = json_object_get(e, "code");
    } else if (json_is_string(e)) {
        msg = e;
        code = json_object_get(top, "code");
    } else {
        return -EPROTO;
    }
    r->code = code && json_is_integer(code) ? (int)json_integer_value(code) : 2;
    if (r->code <= 0 || r->code > 16)
        r->code = 2; /* Unknown */
    const char *m = msg && json_is_string(msg) ? json_string_value(msg) : "error without text";
    snprintf(r->error, sizeof r->error, "%s", m);
    return 1;
}

static int parse_object(json_t *top, etcd_resp_t *r)
{
    if (!json_is_object(top))
        return -EPROTO;
    json_t *o = top, *res = json_object_get(top, "result");
    if (res && json_is_object(res))
        o = res;
    json_t *e = json_object_get(top, "error");
    if (e && !json_is_null(e))
        return parse_error(e, top, r);
    json_t *h = json_object_get(o, "header");
    if (h && !json_is_null(h)) {
        if (!json_is_object(h) || get_i64(h, "revision", &r->revision))
            return -EPROTO;
    }
    json_t *reason = json_object_get(o, "cancel_reason");
    if (reason && json_is_string(reason))
        snprintf(r->cancel_reason, sizeof r->cancel_reason, "%s", json_string_value(reason));
    if (get_i64(o, "ID", &r->id) || get_i64(o, "TTL", &r->ttl) ||
        get_bool(o, "succeeded", &r->succeeded) || get_i64(o, "deleted", &r->deleted) ||
        get_i64(o, "watch_id", &r->watch_id) || get_i64(o, "compact_revision", &r->compact_rev) ||
        get_bool(o, "created", &r->created) || get_bool(o, "canceled", &r->canceled))
        return -EPROTO;
    kvlist_t l = {0};
    int rc = collect(&l, o);
    if (!rc)
        rc = decode_kvs(&l, r);
    free(l.v);
    return rc;
}

int etcd_resp_parse(const char *text, size_t len, etcd_resp_t *r)
{
    memset(r, 0, sizeof *r);
    json_error_t jerr;
    json_t *top = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!top)
        return -EPROTO;
    int rc = parse_object(top, r);
    json_decref(top);
    if (rc < 0 || rc == 1) {
        free(r->mem);
        r->mem = NULL;
        r->kvs = NULL;
        r->n = 0;
    }
    return rc;
}

void etcd_resp_free(etcd_resp_t *r)
{
    if (!r)
        return;
    free(r->mem);
    r->mem = NULL;
    r->kvs = NULL;
    r->n = 0;
}

int etcd_code_transient(int code)
{
    /* DeadlineExceeded, ResourceExhausted, Aborted, Unavailable; Unknown covers "etcdserver:
     * leader changed" and "request timed out" from older servers */
    return code == 2 || code == 4 || code == 8 || code == 10 || code == 14;
}
