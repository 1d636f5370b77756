/* tests/unit/launcher/discover/test_kubeconfig.c — kubeconfig files as kubectl reads them:
 * contexts, clusters and users by name, several files merged, inline and file credentials,
 * and the users podrun cannot act as. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/kubeconfig.h"

/* base64 of "-----BEGIN CERTIFICATE-----\nCA\n" and friends, short stand-ins for PEM text */
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg=="
#define CERT_B64 "Q0VSVAo="
#define KEY_B64 "S0VZCg=="

static const char *typical =
    "apiVersion: v1\n"
    "kind: Config\n"
    "preferences: {}\n"
    "current-context: kind-train\n"
    "clusters:\n"
    "- cluster:\n"
    "    certificate-authority-data: " CA_B64 "\n"
    "    server: https://127.0.0.1:36443/\n"
    "  name: kind-train\n"
    "- cluster:\n"
    "    certificate-authority: pki/ca.crt\n"
    "    server: https://prod.example:6443\n"
    "    insecure-skip-tls-verify: true\n"
    "  name: prod\n"
    "contexts:\n"
    "- context:\n"
    "    cluster: kind-train\n"
    "    user: kind-train\n"
    "    namespace: ml\n"
    "  name: kind-train\n"
    "- context: {cluster: prod, user: ci}\n"
    "  name: prod-ci\n"
    "- context: {cluster: prod, user: gke}\n"
    "  name: prod-gke\n"
    "users:\n"
    "- name: kind-train\n"
    "  user:\n"
    "    client-certificate-data: " CERT_B64 "\n"
    "    client-key-data: " KEY_B64 "\n"
    "- name: ci\n"
    "  user:\n"
    "    tokenFile: secrets/token\n"
    "- name: gke\n"
    "  user:\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1beta1\n"
    "      command: gke-gcloud-auth-plugin\n"
    "      provideClusterInfo: true\n";

static int resolve_one(const char *text, const char *context, struct kubeconfig *kc, char *err,
                       size_t cap)
{
    struct kubeconfig_file *f;
    int rc = kubeconfig_file_parse(text, strlen(text), &f, err, cap);
    if (rc)
        return rc;
    rc = kubeconfig_resolve(&f, 1, context, kc, err, cap);
    kubeconfig_file_free(f);
    return rc;
}

static void test_current_context(void)
{
    struct kubeconfig kc;
    char err[256] = "";
    CHECK_EQ_INT(resolve_one(typical, NULL, &kc, err, sizeof err), 0);
    CHECK_EQ_STR(kc.context, "kind-train");
    CHECK_EQ_STR(kc.server, "https://127.0.0.1:36443/");
    CHECK_EQ_STR(kc.namespace, "ml");
    CHECK_EQ_STR(kc.ca_data, "-----BEGIN CERTIFICATE-----\nCA\n");
    CHECK_EQ_INT(kc.ca_data_len, 31);
    CHECK_EQ_STR(kc.cert_data, "CERT\n");
    CHECK_EQ_STR(kc.key_data, "KEY\n");
    CHECK(kc.token == NULL && kc.token_file == NULL && !kc.insecure);
    kubeconfig_free(&kc);
}

static void test_named_context(void)
{
    struct kubeconfig kc;
    char err[256] = "";
    CHECK_EQ_INT(resolve_one(typical, "prod-ci", &kc, err, sizeof err), 0);
    CHECK_EQ_STR(kc.server, "https://prod.example:6443");
    CHECK_EQ_STR(kc.ca_file, "pki/ca.crt");
    CHECK_EQ_STR(kc.token_file, "secrets/token");
    CHECK(kc.namespace == NULL);
    CHECK_EQ_INT(kc.insecure, 1);
    kubeconfig_free(&kc);

    CHECK_EQ_INT(resolve_one(typical, "prod-gke", &kc, err, sizeof err), -ENOTSUP);
    CHECK(strstr(err, "exec plugin (gke-gcloud-auth-plugin)") != NULL);
    CHECK_EQ_INT(resolve_one(typical, "nope", &kc, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "context \"nope\" is not defined");
}

static void test_json_and_token(void)
{
    const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"fake\","
                       "\"clusters\":[{\"name\":\"fake\",\"cluster\":{\"server\":"
                       "\"https://127.0.0.1:1234\",\"certificate-authority-data\":\"" CA_B64
                       "\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"token\":\"tok-1\"}}],"
                       "\"contexts\":[{\"name\":\"fake\",\"context\":{\"cluster\":\"fake\","
                       "\"user\":\"u\",\"namespace\":\"default\"}}]}";
    struct kubeconfig kc;
    char err[256] = "";
    CHECK_EQ_INT(resolve_one(json, "", &kc, err, sizeof err), 0);
    CHECK_EQ_STR(kc.token, "tok-1");
    CHECK_EQ_STR(kc.user, "u");
    kubeconfig_free(&kc);
}

static void test_merged_files(void)
{
    /* first file: the current context and an override of cluster "c"; second: the rest */
    const char *a = "current-context: work\n"
                    "clusters:\n- name: c\n  cluster: {server: 'https://first:1'}\n";
    const char *b = "current-context: other\n"
                    "clusters:\n- name: c\n  cluster: {server: 'https://second:2'}\n"
                    "contexts:\n- name: work\n  context: {cluster: c, user: me}\n"
                    "users:\n- name: me\n  user: {token: abc}\n";
    struct kubeconfig_file *f[2];
    char err[256] = "";
    CHECK_EQ_INT(kubeconfig_file_parse(a, strlen(a), &f[0], err, sizeof err), 0);
    CHECK_EQ_INT(kubeconfig_file_parse(b, strlen(b), &f[1], err, sizeof err), 0);
    struct kubeconfig kc;
    CHECK_EQ_INT(kubeconfig_resolve(f, 2, NULL, &kc, err, sizeof err), 0);
    CHECK_EQ_STR(kc.context, "work");
    CHECK_EQ_STR(kc.server, "https://first:1");
    CHECK_EQ_INT(kc.cluster_from, 0);
    CHECK_EQ_INT(kc.user_from, 1);
    CHECK_EQ_STR(kc.token, "abc");
    kubeconfig_free(&kc);
    kubeconfig_file_free(f[0]);
    kubeconfig_file_free(f[1]);
}

static void test_anchors_and_nulls(void)
{
    const char *y = "current-context: x\n"
                    "base: &srv {server: 'https://a:1', certificate-authority: ~}\n"
                    "clusters:\n- name: c\n  cluster: *srv\n"
                    "contexts:\n- name: x\n  context: {cluster: c, user: u, namespace: null}\n"
                    "users:\n- name: u\n  user: {token: \"t\", tokenFile: ''}\n";
    struct kubeconfig kc;
    char err[256] = "";
    CHECK_EQ_INT(resolve_one(y, NULL, &kc, err, sizeof err), 0);
    CHECK_EQ_STR(kc.server, "https://a:1");
    CHECK(kc.ca_file == NULL && kc.namespace == NULL);
    CHECK_EQ_STR(kc.token, "t");
    kubeconfig_free(&kc);
}

static void test_bad_files(void)
{
    struct kubeconfig kc;
    char err[256];
    struct {
        const char *text;
        int rc;
        const char *msg;
    } cases[] = {
        {"- a\n- b\n", -EPROTO, "not a kubeconfig: the top level is not a mapping"},
        {"a: [1, 2\n", -EPROTO, "not YAML"},
        {"", -ENOENT, "no current-context is set and no context was named"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n", -ENOENT,
         "context \"x\" names no cluster"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n", -ENOENT,
         "cluster \"c\" (context \"x\") is not defined"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n"
         "  cluster: {certificate-authority-data: 'not*base64'}\n", -EPROTO,
         "cluster \"c\": certificate-authority-data is not base64"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n"
         "  cluster: {server: [a]}\n", -EPROTO, "cluster \"c\": server is not a string"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n"
         "  cluster: {}\n", -ENOENT, "cluster \"c\" has no server"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n"
         "- name: c\n  cluster: {server: s}\nusers:\n- name: u\n"
         "  user: {username: a, password: b}\n",
         -ENOTSUP, "user \"u\" has a password (basic auth)"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n"
         "- name: c\n  cluster: {server: s}\nusers:\n- name: u\n  user: {client-certificate: c}\n",
         -ENOENT, "user \"u\" has a client certificate but no client key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(resolve_one(cases[i].text, NULL, &kc, err, sizeof err), cases[i].rc);
        if (strncmp(err, cases[i].msg, strlen(cases[i].msg)) != 0)
            fprintf(stderr, "case %zu: \"%s\"\n", i, err);
        CHECK(strncmp(err, cases[i].msg, strlen(cases[i].msg)) == 0);
    }
    /* a context with no user is anonymous, which is allowed */
    const char *anon = "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                       "clusters:\n- name: c\n  cluster: {server: s}\n";
    CHECK_EQ_INT(resolve_one(anon, NULL, &kc, err, sizeof err), 0);
    CHECK(kc.user == NULL && kc.token == NULL);
    kubeconfig_free(&kc);
}

int main(void)
{
    RUN(test_current_context);
    RUN(test_named_context);
    RUN(test_json_and_token);
    RUN(test_merged_files);
    RUN(test_anchors_and_nulls);
    RUN(test_bad_files);
    return check_result();
}
