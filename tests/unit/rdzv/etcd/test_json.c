/* tests/unit/rdzv/etcd/test_json.c — etcd's JSON gateway as podrun speaks it: endpoint lists,
 * base64, request bodies, and answers taken from etcd 3.4 (including the forms it leaves fields
 * out of), error answers, watch messages, and bytes that are not an answer. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/etcd/json.h"

static void test_endpoints(void)
{
    etcd_endpoint_t ep[4];
    char err[256];
    CHECK_EQ_INT(etcd_endpoints_parse("e0,http://e1:12/,https://[::1]:5", 0, ep, 4, err,
                                      sizeof err), 3);
    CHECK_EQ_STR(ep[0].url, "http://e0:2379");
    CHECK_EQ_INT(ep[0].port, 2379);
    CHECK_EQ_STR(ep[1].url, "http://e1:12");
    CHECK_EQ_STR(ep[2].url, "https://[::1]:5");
    CHECK_EQ_STR(ep[2].host, "::1");
    CHECK_EQ_INT(ep[2].tls, 1);
    /* no scheme with TLS files: https */
    CHECK_EQ_INT(etcd_endpoints_parse("10.0.0.1:2379", 1, ep, 4, err, sizeof err), 1);
    CHECK_EQ_STR(ep[0].url, "https://10.0.0.1:2379");
    static const char *const bad[] = {"", "e0,", ",e0", "ftp://e0", "http://", "e0:0",
                                      "e0:70000", "http://e0/path", "a b", "e,e,e,e,e"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(etcd_endpoints_parse(bad[i], 0, ep, 4, err, sizeof err), -EINVAL);
        CHECK(err[0] != '\0');
    }
}

static void test_prefix_end(void)
{
    char end[8];
    CHECK_EQ_INT(etcd_prefix_end("ab/", 3, end), 3);
    CHECK(memcmp(end, "ab0", 3) == 0);
    CHECK_EQ_INT(etcd_prefix_end("a\xff", 2, end), 1);
    CHECK_EQ_INT(end[0], 'b');
    CHECK_EQ_INT(etcd_prefix_end("\xff\xff", 2, end), 0);
}

/* The field `path` ("a.b") of the JSON text. */
static json_t *field(json_t *root, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *j = root;
    for (char *save, *p = strtok_r(buf, ".", &save); p && j; p = strtok_r(NULL, ".", &save))
        j = json_is_array(j) ? json_array_get(j, (size_t)atoi(p)) : json_object_get(j, p);
    return j;
}

static const char *sfield(json_t *root, const char *path)
{
    json_t *j = field(root, path);
    return json_is_string(j) ? json_string_value(j) : "(none)";
}

static void test_requests(void)
{
    etcd_op_t put = {ETCD_OP_PUT, "foo", 3, NULL, 0, "bar", 3, 42};
    char *s = etcd_req_op(&put);
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    CHECK_EQ_STR(sfield(j, "key"), "Zm9v");
    CHECK_EQ_STR(sfield(j, "value"), "YmFy");
    CHECK_EQ_INT(json_integer_value(field(j, "lease")), 42);
    json_decref(j);
    free(s);

    etcd_op_t range = {ETCD_OP_RANGE, "a/", 2, "a0", 2, NULL, 0, 0};
    etcd_cmp_t cmp = {"k", 1, ETCD_CMP_CREATE, 0, NULL, 0};
    s = etcd_req_txn(&cmp, 1, &put, 1, &range, 1);
    j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    CHECK_EQ_STR(sfield(j, "compare.0.target"), "CREATE");
    CHECK_EQ_STR(sfield(j, "compare.0.result"), "EQUAL");
    CHECK_EQ_INT(json_integer_value(field(j, "compare.0.create_revision")), 0);
    CHECK_EQ_STR(sfield(j, "success.0.request_put.key"), "Zm9v");
    CHECK_EQ_STR(sfield(j, "failure.0.request_range.range_end"), "YTA=");
    json_decref(j);
    free(s);

    etcd_watch_spec_t w[2] = {{"a", 1, "b", 1, 0, 1}, {"k", 1, NULL, 0, 17, 2}};
    s = etcd_req_watch(w, 2);
    char *nl = strchr(s, '\n');
    CHECK(nl && nl[1] && strchr(nl + 1, '\n'));
    j = json_loadb(s, (size_t)(nl - s), 0, NULL);
    CHECK_EQ_STR(sfield(j, "create_request.range_end"), "Yg==");
    CHECK(field(j, "create_request.start_revision") == NULL);
    json_decref(j);
    j = json_loads(nl + 1, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK_EQ_INT(json_integer_value(field(j, "create_request.start_revision")), 17);
    CHECK_EQ_INT(json_integer_value(field(j, "create_request.watch_id")), 2);
    json_decref(j);
    free(s);
}

/* The body length of the first k watchers on one stream, each resuming at a large revision. */
static size_t watch_body_len(const etcd_watch_spec_t *w, size_t k)
{
    etcd_watch_spec_t r[8];
    for (size_t i = 0; i < k; i++) {
        r[i] = w[i];
        r[i].start_rev = 9223372036854775807LL;
    }
    char *s = etcd_req_watch(r, k);
    size_t len = s ? strlen(s) : 0;
    free(s);
    return len;
}

/* An agent's three watchers under a run id of n digits, as the backend makes them. */
static size_t agent_watchers(int n, char keys[3][2][200], etcd_watch_spec_t w[3])
{
    char id[64];
    for (int i = 0; i < n; i++)
        id[i] = (char)('0' + (i * 7 + 3) % 10);
    id[n] = '\0';
    snprintf(keys[0][0], 200, "podrun/%s/n/0123456789abcdef/assign/", id);
    snprintf(keys[1][0], 200, "podrun/%s/r/", id);
    snprintf(keys[2][0], 200, "podrun/%s/leader", id);
    for (int i = 0; i < 3; i++) {
        size_t kl = strlen(keys[i][0]);
        size_t el = i < 2 ? etcd_prefix_end(keys[i][0], kl, keys[i][1]) : 0;
        w[i] = (etcd_watch_spec_t){keys[i][0], kl, i < 2 ? keys[i][1] : NULL, el, 0, i + 1};
    }
    return 3;
}

/* Several watchers share a stream only while their create requests fit in what etcd's gateway
 * reads of the body first: a run id of 39 digits (uuid4().int) made the third one past it. */
static void test_watch_groups(void)
{
    char keys[3][2][200];
    etcd_watch_spec_t w[3];
    for (int n = 1; n <= 60; n++) {
        size_t total = agent_watchers(n, keys, w), seen = 0;
        while (seen < total) {
            size_t k = etcd_watch_group(w + seen, total - seen);
            CHECK(k >= 1);
            CHECK(k == 1 || watch_body_len(w + seen, k) <= ETCD_WATCH_BODY_SAFE);
            seen += k;
        }
        CHECK_EQ_INT((int)seen, 3);
    }
    agent_watchers(8, keys, w);
    CHECK_EQ_INT((int)etcd_watch_group(w, 3), 3); /* a short id: one stream */
    agent_watchers(39, keys, w);
    CHECK(etcd_watch_group(w, 3) < 3);
    char big[700];
    memset(big, 'k', sizeof big);
    etcd_watch_spec_t one[2] = {{big, sizeof big, NULL, 0, 0, 1}, {"a", 1, NULL, 0, 0, 2}};
    CHECK_EQ_INT((int)etcd_watch_group(one, 2), 1); /* alone on its stream, whatever its size */
    CHECK_EQ_INT((int)etcd_watch_group(one + 1, 1), 1);
    CHECK_EQ_INT((int)etcd_watch_group(one, 0), 0);
}

/* Answers as etcd 3.4's gateway writes them. */
static void test_answers(void)
{
    etcd_resp_t r;
    const char *range =
        "{\"header\":{\"cluster_id\":\"324952591200643719\",\"member_id\":\"3319814642761637952\","
        "\"revision\":\"9\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":"
        "\"2\",\"mod_revision\":\"8\",\"version\":\"3\",\"value\":\"YmFy\",\"lease\":"
        "\"7587852352478532617\"},{\"key\":\"YQ==\",\"create_revision\":\"4\",\"mod_revision\":"
        "\"4\",\"version\":\"1\"}],\"count\":\"2\"}";
    CHECK_EQ_INT(etcd_resp_parse(range, strlen(range), &r), 0);
    CHECK_EQ_INT(r.revision, 9);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.kvs[0].key, "foo");
    CHECK_EQ_STR(r.kvs[0].value, "bar");
    CHECK_EQ_INT(r.kvs[0].lease, 7587852352478532617LL);
    CHECK_EQ_INT(r.kvs[0].mod_rev, 8);
    CHECK_EQ_STR(r.kvs[1].value, ""); /* an empty value is left out */
    CHECK_EQ_INT(r.kvs[1].vlen, 0);
    etcd_resp_free(&r);

    /* a txn that failed its comparison: "succeeded" left out, the failure branch's range */
    const char *txn = "{\"header\":{\"revision\":\"2\"},\"responses\":[{\"response_put\":{"
                      "\"header\":{\"revision\":\"2\"}}},{\"response_range\":{\"header\":{},"
                      "\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"value\":\"eA==\"}],"
                      "\"count\":\"1\"}}]}";
    CHECK_EQ_INT(etcd_resp_parse(txn, strlen(txn), &r), 0);
    CHECK_EQ_INT(r.succeeded, 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_INT(r.kvs[0].op, 1);
    CHECK_EQ_INT(r.kvs[0].create_rev, 2);
    etcd_resp_free(&r);

    const char *grant = "{\"header\":{\"revision\":\"2\"},\"ID\":\"2324035546083133192\","
                        "\"TTL\":\"2\"}";
    CHECK_EQ_INT(etcd_resp_parse(grant, strlen(grant), &r), 0);
    CHECK_EQ_INT(r.id, 2324035546083133192LL);
    CHECK_EQ_INT(r.ttl, 2);
    etcd_resp_free(&r);

    /* keepalive of a lease that is gone: TTL left out, i.e. 0 */
    const char *ka = "{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"1\"}}";
    CHECK_EQ_INT(etcd_resp_parse(ka, strlen(ka), &r), 0);
    CHECK_EQ_INT(r.id, 1);
    CHECK_EQ_INT(r.ttl, 0);
    etcd_resp_free(&r);

    const char *err = "{\"error\":\"etcdserver: requested lease not found\",\"message\":"
                      "\"etcdserver: requested lease not found\",\"code\":5}";
    CHECK_EQ_INT(etcd_resp_parse(err, strlen(err), &r), 1);
    CHECK_EQ_INT(r.code, 5);
    CHECK_EQ_STR(r.error, "etcdserver: requested lease not found");
    CHECK(!etcd_code_transient(r.code));
    etcd_resp_free(&r);
    const char *serr = "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
                       "\"etcdserver: no leader\"}}";
    CHECK_EQ_INT(etcd_resp_parse(serr, strlen(serr), &r), 1);
    CHECK_EQ_INT(r.code, 14);
    CHECK(etcd_code_transient(r.code));
    etcd_resp_free(&r);
}

static void test_watch_messages(void)
{
    etcd_resp_t r;
    const char *created = "{\"result\":{\"header\":{\"revision\":\"3\"},\"watch_id\":\"5\","
                          "\"created\":true}}";
    CHECK_EQ_INT(etcd_resp_parse(created, strlen(created), &r), 0);
    CHECK_EQ_INT(r.watch_id, 5);
    CHECK_EQ_INT(r.created, 1);
    CHECK_EQ_INT(r.revision, 3);
    etcd_resp_free(&r);
    const char *events =
        "{\"result\":{\"header\":{\"revision\":\"6\"},\"watch_id\":\"7\",\"events\":[{\"kv\":{"
        "\"key\":\"Yg==\",\"create_revision\":\"5\",\"mod_revision\":\"5\",\"version\":\"1\","
        "\"value\":\"Yg==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"Yg==\",\"mod_revision\":"
        "\"6\"}}]}}";
    CHECK_EQ_INT(etcd_resp_parse(events, strlen(events), &r), 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_INT(r.kvs[0].op, 0);
    CHECK_EQ_INT(r.kvs[1].op, 1);
    CHECK_EQ_INT(r.kvs[1].mod_rev, 6);
    etcd_resp_free(&r);
    const char *compacted = "{\"result\":{\"header\":{\"revision\":\"90\"},\"watch_id\":\"1\","
                            "\"canceled\":true,\"compact_revision\":\"50\",\"cancel_reason\":"
                            "\"mvcc: required revision has been compacted\"}}";
    CHECK_EQ_INT(etcd_resp_parse(compacted, strlen(compacted), &r), 0);
    CHECK_EQ_INT(r.canceled, 1);
    CHECK_EQ_INT(r.compact_rev, 50);
    CHECK(strstr(r.cancel_reason, "compacted") != NULL);
    etcd_resp_free(&r);
}

static void test_not_answers(void)
{
    static const char *const bad[] = {
        "", "404 page not found", "[]", "{\"kvs\":{}}", "{\"kvs\":[1]}",
        "{\"kvs\":[{\"key\":\"Zm9\"}]}", "{\"kvs\":[{\"key\":\"!!!!\"}]}",
        "{\"header\":{\"revision\":\"12x\"}}", "{\"header\":{\"revision\":1.5}}",
        "{\"header\":{\"revision\":\"99999999999999999999\"}}", "{\"ID\":true}",
        "{\"succeeded\":\"yes\"}", "{\"events\":[{\"type\":[],\"kv\":{}}]}",
        "{\"responses\":[{\"response_range\":{\"kvs\":5}}]}", "{\"a\":1,\"a\":2}",
        "{\"error\":5}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        etcd_resp_t r;
        int rc = etcd_resp_parse(bad[i], strlen(bad[i]), &r);
        if (rc != -EPROTO)
            fprintf(stderr, "case %zu: %d\n", i, rc);
        CHECK_EQ_INT(rc, -EPROTO);
        CHECK(r.kvs == NULL && r.n == 0);
        etcd_resp_free(&r);
    }
}

int main(void)
{
    RUN(test_endpoints);
    RUN(test_prefix_end);
    RUN(test_requests);
    RUN(test_watch_groups);
    RUN(test_answers);
    RUN(test_watch_messages);
    RUN(test_not_answers);
    return check_result();
}
