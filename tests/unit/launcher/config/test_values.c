/* tests/unit/launcher/config/test_values.c — each kind of value: what parses, what a bad value is
 * told, and that what is printed parses back to the same value. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/config/values.h"

static char err[512];

static void test_durations(void)
{
    uint64_t ms;
    CHECK_EQ_INT(cfg_parse_duration("25", &ms), 0);
    CHECK_EQ_INT(ms, 25000);
    CHECK_EQ_INT(cfg_parse_duration("0.5", &ms), 0);
    CHECK_EQ_INT(ms, 500);
    CHECK_EQ_INT(cfg_parse_duration("250ms", &ms), 0);
    CHECK_EQ_INT(ms, 250);
    CHECK_EQ_INT(cfg_parse_duration("2m", &ms), 0);
    CHECK_EQ_INT(ms, 120000);
    CHECK_EQ_INT(cfg_parse_duration("1h", &ms), 0);
    CHECK_EQ_INT(ms, 3600000);
    CHECK(cfg_parse_duration("", &ms) < 0);
    CHECK(cfg_parse_duration("-1", &ms) < 0);
    CHECK(cfg_parse_duration("1d", &ms) < 0);
    CHECK(cfg_parse_duration("nan", &ms) < 0);
    CHECK(cfg_parse_duration("inf", &ms) < 0);
    CHECK(cfg_parse_duration(" 1", &ms) < 0);
    CHECK(cfg_parse_duration("1e12", &ms) < 0);
}

/* For every setting with a value: set it, print it, set what was printed, print again: the same
 * text. The printed form is what --print-config shows, so it must mean the value it shows. */
static void test_print_parses_back(void)
{
    static const struct {
        enum cfg_id id;
        const char *in, *shown;
    } cases[] = {
        {CFG_NPROC_PER_NODE, "7", "7"},
        {CFG_NNODES, "2:4", "2:4"},
        {CFG_NNODES, "3", "3"},
        {CFG_NODE_RANK, "5", "5"},
        {CFG_RDZV_BACKEND, "c10d", "c10d"},
        {CFG_RDZV_ENDPOINT, "[::1]:80", "[::1]:80"},
        {CFG_RDZV_ENDPOINT, "node0:1", "node0:1"},
        {CFG_RDZV_BACKEND, "etcd", "etcd"},
        {CFG_RDZV_ENDPOINT, "e0:2379,e1,[::1]:5", "e0:2379,e1,[::1]:5"},
        {CFG_RDZV_ENDPOINT, "https://e0:2379/", "https://e0:2379/"},
        {CFG_ETCD_CACERT, "/ca.pem", "/ca.pem"},
        {CFG_STANDALONE, "yes", "true"},
        {CFG_START_METHOD, "forkserver", "forkserver"},
        {CFG_LOG_DIR, "/x", "/x"},
        {CFG_TERM_TIMEOUT, "2.5", "2500ms"},
        {CFG_HANG_TIMEOUT, "1h", "3600s"},
        {CFG_REDIRECTS, "0:3,1:2", "0:3,1:2"},
        {CFG_LOCAL_RANKS_FILTER, "0,2", "0,2"},
        {CFG_IS_HOST, "false", "false"},
        {CFG_KEEP_ALIVE_MAX_ATTEMPT, "9", "9"},
        {CFG_PREFLIGHT_TCP_BYTES, "16777216", "16M"},
        {CFG_PREFLIGHT_TCP_BYTES, "1536k", "1536K"},
        {CFG_PREFLIGHT_NCCL_BYTES, "1G", "1G"},
        {CFG_PREFLIGHT_NCCL_BYTES, "1000", "1000"},
        {CFG_PREFLIGHT_NCCL_BYTES, "3072M", "3G"},
        {CFG_NUMA_BINDING, "core-complex", "core-complex"},
        {CFG_PREFLIGHT_MAX_RTT, "500ms", "500ms"},
    };
    struct cfg_src flag = {CFG_SRC_FLAG, "--x"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct cfg_setting *s = &cfg_settings[cases[i].id];
        struct cfg c;
        char once[128], twice[128];
        cfg_init(&c);
        CHECK_EQ_INT(cfg_set(&c, cases[i].id, cases[i].in, &flag, err, sizeof err), 0);
        cfg_types[s->type].format(&c, s, once, sizeof once);
        CHECK_EQ_STR(once, cases[i].shown);
        CHECK_EQ_INT(cfg_set(&c, cases[i].id, once, &flag, err, sizeof err), 0);
        cfg_types[s->type].format(&c, s, twice, sizeof twice);
        CHECK_EQ_STR(twice, once);
        cfg_free(&c);
    }
}

static void test_bad_values_say_what_is_expected(void)
{
    static const struct {
        enum cfg_id id;
        const char *in, *needle;
    } cases[] = {
        {CFG_NPROC_PER_NODE, "0", "from 1 to 1024, 'auto', 'cpu', 'gpu' or 'xpu'"},
        {CFG_NNODES, "4:2", "MIN is larger than MAX; write MIN:MAX, e.g. 2:4"},
        {CFG_NNODES, "123456789012345678901234:1", "expected N or MIN:MAX, e.g. 2:4"},
        {CFG_MASTER_PORT, "0", "expected a whole number from 1 to 65535"},
        {CFG_RDZV_BACKEND, "zookeeper", "unknown rendezvous backend; use 'c10d', 'static' or "
                                        "'etcd'"},
        {CFG_RDZV_ENDPOINT, "e0:2379,", "an empty item in the etcd endpoint list"},
        {CFG_RDZV_ENDPOINT, "ftp://e0", "the scheme must be http:// or https://"},
        {CFG_RDZV_ENDPOINT, "http://e0:99999", "expected [http://|https://]HOST[:PORT]"},
        {CFG_RDZV_ENDPOINT, "e0,e1:0", "'e1:0': expected [http://|https://]HOST[:PORT]"},
        {CFG_START_METHOD, "thread", "use 'spawn', 'fork' or 'forkserver'"},
        {CFG_RDZV_ENDPOINT, "a b", "expected HOST or HOST:PORT (port 0-65535)"},
        {CFG_ROLE, "", "must not be empty"},
        {CFG_MODULE, "maybe", "expected 1/0, true/false or yes/no"},
        {CFG_TERM_TIMEOUT, "31d", "bare numbers are seconds, at most 30 days"},
        {CFG_TEE, "0:4", "with N 0-3"},
        {CFG_LOCAL_RANKS_FILTER, "0,,1", "local ranks separated by commas"},
        {CFG_PREFLIGHT_TCP_BYTES, "16MB", "such as 4096, 64K, 16M or 1G"},
        {CFG_PREFLIGHT_TCP_BYTES, "0", "a size from 1 to"},
        {CFG_PREFLIGHT_NCCL_BYTES, "99999999999999T", "a size from 4 to"},
        {CFG_PREFLIGHT_NCCL_BYTES, "-1K", "(powers of 1024)"},
        {CFG_NUMA_BINDING, "numa", "use 'none', 'node', 'socket', 'exclusive', 'core-complex' "
                                   "or 'cores'"},
        {CFG_PREFLIGHT, "ib", "use 'off', 'tcp' or 'nccl'"},
        {CFG_PREFLIGHT_POLICY, "ignore", "use 'warn', 'fail' or 'exclude'"},
        {CFG_VISIBLE_DEVICES, "mine", "use 'all' or 'per-rank'"},
    };
    struct cfg_src flag = {CFG_SRC_FLAG, "--it"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cfg c;
        cfg_init(&c);
        CHECK_EQ_INT(cfg_set(&c, cases[i].id, cases[i].in, &flag, err, sizeof err), -EINVAL);
        if (!strstr(err, cases[i].needle) || strncmp(err, "--it '", 6))
            fprintf(stderr, "case %zu: '%s'\n", i, err);
        CHECK(strstr(err, cases[i].needle) != NULL && !strncmp(err, "--it '", 6));
        CHECK_EQ_INT(c.src[cases[i].id].kind, CFG_SRC_DEFAULT); /* nothing kept */
        cfg_free(&c);
    }
}

static void test_stream_specs(void)
{
    uint8_t m[4];
    long bad = -1;
    CHECK_EQ_INT(cfg_stdspec_expand("3", 4, m, &bad), 0);
    CHECK(m[0] == 3 && m[3] == 3);
    CHECK_EQ_INT(cfg_stdspec_expand("0:1,2:2", 4, m, &bad), 0);
    CHECK(m[0] == 1 && m[1] == 0 && m[2] == 2 && m[3] == 0);
    CHECK_EQ_INT(cfg_stdspec_expand("0:1,5:2", 4, m, &bad), -ERANGE);
    CHECK_EQ_INT(bad, 5);
    CHECK_EQ_INT(cfg_stdspec_expand(NULL, 4, m, &bad), 0);
    CHECK(m[0] == 0 && m[2] == 0);
    bool mark[4] = {0};
    CHECK_EQ_INT(cfg_ranks_parse("1,3", 4, mark, &bad), 0);
    CHECK(!mark[0] && mark[1] && !mark[2] && mark[3]);
    CHECK_EQ_INT(cfg_ranks_parse("1,4", 4, mark, &bad), -ERANGE);
    CHECK_EQ_INT(bad, 4);
    CHECK_EQ_INT(cfg_ranks_parse("1,", 4, mark, &bad), -EINVAL);
}

static void test_conf_items(void)
{
    const char *p = ",a=1,,b=x=y,", *val;
    char key[16];
    CHECK_EQ_INT(cfg_conf_next(&p, key, sizeof key, &val), 1);
    CHECK_EQ_STR(key, "a");
    CHECK_EQ_STR(val, "1");
    CHECK_EQ_INT(cfg_conf_next(&p, key, sizeof key, &val), 1);
    CHECK_EQ_STR(key, "b");
    CHECK_EQ_STR(val, "x=y");
    CHECK_EQ_INT(cfg_conf_next(&p, key, sizeof key, &val), 0);
    p = "=1";
    CHECK_EQ_INT(cfg_conf_next(&p, key, sizeof key, &val), -EINVAL);
    p = "averyveryverylongkey=1";
    CHECK_EQ_INT(cfg_conf_next(&p, key, sizeof key, &val), -E2BIG);
}

/* --fatal-exit-codes: codes and ranges 1-255, spaces around items; anything else names the item */
static void test_exit_code_lists(void)
{
    uint64_t m[4];
    char bad[80];
    CHECK_EQ_INT(cfg_codes_parse("3, 42,64-66,255", m, bad, sizeof bad), 0);
    CHECK(cfg_codes_has(m, 3) && cfg_codes_has(m, 42) && cfg_codes_has(m, 64));
    CHECK(cfg_codes_has(m, 65) && cfg_codes_has(m, 66) && cfg_codes_has(m, 255));
    CHECK(!cfg_codes_has(m, 1) && !cfg_codes_has(m, 67) && !cfg_codes_has(m, 0));
    CHECK(!cfg_codes_has(m, 256) && !cfg_codes_has(m, -1));
    CHECK_EQ_INT(cfg_codes_parse("", m, bad, sizeof bad), 0);
    CHECK(!cfg_codes_has(m, 3));
    CHECK_EQ_INT(cfg_codes_parse(NULL, m, bad, sizeof bad), 0);
    const char *no[] = {"0", "256", "3,,4", "x", "5-", "-5", "9-3", "3-4-5", "1e2", "+3", "3;4"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        CHECK_EQ_INT(cfg_codes_parse(no[i], m, bad, sizeof bad), -EINVAL);
        CHECK(bad[0] || strstr(no[i], ",,"));
    }
    CHECK_EQ_INT(cfg_codes_parse("3,abc,4", m, bad, sizeof bad), -EINVAL);
    CHECK_EQ_STR(bad, "abc");
}

int main(void)
{
    RUN(test_durations);
    RUN(test_print_parses_back);
    RUN(test_bad_values_say_what_is_expected);
    RUN(test_stream_specs);
    RUN(test_conf_items);
    RUN(test_exit_code_lists);
    return check_result();
}
