/* tests/unit/launcher/frontends/test_deepspeed_hosts.c — what the deepspeed head and its hosts
 * exchange: world_info against the reference's example, .deepspeed_env files, launcher_args
 * words. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/frontends/deepspeed_hosts.h"

static char err[512];

/* reference/launchers.md §1.3's example, both ways; decoding takes either alphabet, padded or
 * not, and keeps the object's order as node order. */
static void test_world_info(void)
{
    struct resources r = {0};
    int a[] = {0, 1}, b[] = {0, 2};
    CHECK_EQ_INT(resources_add(&r, "t", "worker-0", 1, a, 2, err, sizeof err), 0);
    CHECK_EQ_INT(resources_add(&r, "t", "worker-1", 2, b, 2, err, sizeof err), 0);
    char *wi = NULL;
    CHECK_EQ_INT(deepspeed_hosts_world_encode(&r, &wi), 0);
    CHECK_EQ_STR(wi, "eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzAsIDJdfQ==");
    resources_free(&r);
    const char *forms[] = {wi, "eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzAsIDJdfQ"};
    for (int f = 0; f < 2; f++) {
        CHECK_EQ_INT(deepspeed_hosts_world_decode(forms[f], &r, err, sizeof err), 0);
        CHECK_EQ_INT(r.count, 2);
        CHECK_EQ_STR(r.nodes[0].host, "worker-0");
        CHECK_EQ_STR(r.nodes[1].host, "worker-1");
        CHECK_EQ_INT(r.nodes[1].slots[1], 2);
        resources_free(&r);
    }
    free(wi);
    /* {"z": [1], "a": [0]}: the order given, not sorted; standard alphabet */
    const char *za = "eyJ6IjogWzFdLCAiYSI6IFswXX0=";
    CHECK_EQ_INT(deepspeed_hosts_world_decode(za, &r, err, sizeof err), 0);
    CHECK_EQ_STR(r.nodes[0].host, "z");
    resources_free(&r);
    const char *bad[] = {NULL, "", "e", "eyJhIjogMX0", "eyJhIjogW119", "eyJhIjogWy0xXX0", "WzFd",
                         "eyJhIjogWzBdLCAiYSI6IFsxXX0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(deepspeed_hosts_world_decode(bad[i], &r, err, sizeof err), -EINVAL);
        CHECK(!strncmp(err, "--world_info", 12));
    }
}

struct kv {
    char text[512];
};

static int add_kv(void *arg, const char *k, const char *v)
{
    struct kv *x = arg;
    snprintf(x->text + strlen(x->text), sizeof x->text - strlen(x->text), "[%s=%s]", k, v);
    return 0;
}

/* A host name the head puts in world_info is text every agent's JSON parser takes back: UTF-8
 * up to U+10FFFF, without overlong forms or surrogates, else -EILSEQ before anything is sent. */
static void test_world_host_names(void)
{
    const char *ok[] = {"worker-0", "h\xc3\xa9te", "\xe2\x82\xac", "\xf0\x9f\x9a\x80",
                        "\xf4\x8f\xbf\xbf"};
    const char *bad[] = {"\xf7\x95\x95\x95r", "\xed\xa0\x80", "\xe0\x80\x80", "\xc0\xaf",
                         "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xc3"};
    int a[] = {0};
    for (int pass = 0; pass < 2; pass++) {
        const char *const *names = pass ? bad : ok;
        size_t n = pass ? sizeof bad / sizeof *bad : sizeof ok / sizeof *ok;
        for (size_t i = 0; i < n; i++) {
            struct resources r = {0}, back = {0};
            char *wi = NULL;
            CHECK_EQ_INT(resources_add(&r, "t", names[i], 1, a, 1, err, sizeof err), 0);
            int rc = deepspeed_hosts_world_encode(&r, &wi);
            if (pass) {
                CHECK_EQ_INT(rc, -EILSEQ);
            } else {
                CHECK_EQ_INT(rc, 0);
                CHECK_EQ_INT(deepspeed_hosts_world_decode(wi, &back, err, sizeof err), 0);
                CHECK_EQ_STR(back.nodes[0].host, names[i]);
                resources_free(&back);
            }
            free(wi);
            resources_free(&r);
        }
    }
}

static void test_env_file(void)
{
    struct kv x = {""};
    const char text[] = "NCCL_IB_HCA = mlx5_0\r\n# comment\n\n  PYTHONPATH=/a:/b=c  \nEMPTY=\n";
    CHECK_EQ_INT(deepspeed_hosts_env_file(text, sizeof text - 1, "~/.deepspeed_env", add_kv, &x,
                                          err, sizeof err), 0);
    CHECK_EQ_STR(x.text, "[NCCL_IB_HCA=mlx5_0][PYTHONPATH=/a:/b=c][EMPTY=]");
    const char bad[] = "A=1\nno equals here\n";
    CHECK_EQ_INT(deepspeed_hosts_env_file(bad, sizeof bad - 1, ".deepspeed_env", add_kv, &x, err,
                                          sizeof err), -EINVAL);
    CHECK(strstr(err, ".deepspeed_env line 2") != NULL);
    CHECK(deepspeed_hosts_exported("NCCL_DEBUG") && deepspeed_hosts_exported("PYTHONPATH") &&
          deepspeed_hosts_exported("UCX_TLS") && deepspeed_hosts_exported("AZUREML_RUN_ID"));
    CHECK(!deepspeed_hosts_exported("HOME") && !deepspeed_hosts_exported("CUDA_VISIBLE_DEVICES"));
}

static void test_words(void)
{
    char **w;
    int n;
    const char *text = "-R exec  -l 'a b' \"c\\\"d\" e\\ f";
    CHECK_EQ_INT(deepspeed_hosts_words_split(text, &w, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 6);
    const char *want[] = {"-R", "exec", "-l", "a b", "c\"d", "e f"};
    for (int i = 0; i < n && i < 6; i++)
        CHECK_EQ_STR(w[i], want[i]);
    deepspeed_hosts_words_free(w);
    CHECK_EQ_INT(deepspeed_hosts_words_split("-l 'open", &w, &n, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "not closed") != NULL);
}

int main(void)
{
    RUN(test_world_info);
    RUN(test_world_host_names);
    RUN(test_env_file);
    RUN(test_words);
    return check_result();
}
