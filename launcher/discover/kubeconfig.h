/* launcher/discover/kubeconfig.h — which API server and which credentials a kubeconfig names.
 * Pure: YAML (or JSON) text in, strings out; reading the files is the caller's.
 *
 * KUBECONFIG may list several files. As client-go merges them, the first file that sets
 * current-context wins, and a context, cluster or user is taken from the first file that defines
 * one of that name. Paths in a file (certificate-authority, client-certificate, client-key,
 * tokenFile) are relative to that file's directory: each comes with the index of its file.
 *
 * Supported: token, tokenFile, client certificates (file or -data), certificate-authority (file
 * or -data), insecure-skip-tls-verify, tls-server-name, the context's namespace. A user that
 * authenticates only through an exec plugin, an auth-provider or a password is refused with a
 * message naming it. */
#ifndef PODRUN_DISCOVER_KUBECONFIG_H
#define PODRUN_DISCOVER_KUBECONFIG_H

#include <stddef.h>

struct kubeconfig_file;    /* one parsed file */

/* What one context resolves to. Strings are malloc'd, NULL when absent; *_data are decoded
 * (PEM text) with their lengths. *_from is the index of the file the value came from. */
struct kubeconfig {
    char *context, *cluster, *user;      /* the names */
    char *server;
    char *namespace;
    char *ca_file, *ca_data;
    size_t ca_data_len;
    int insecure;
    char *tls_server_name;
    char *token, *token_file;
    char *cert_file, *cert_data;
    size_t cert_data_len;
    char *key_file, *key_data;
    size_t key_data_len;
    size_t cluster_from, user_from;
};

/* Parses one file's text. -EPROTO with err set when it is not YAML or not a mapping. */
int kubeconfig_file_parse(const char *text, size_t len, struct kubeconfig_file **out, char *err,
                          size_t err_cap);
void kubeconfig_file_free(struct kubeconfig_file *f);

/* Resolves `context` (NULL or "": current-context) across files[0..n). 0, or -ENOENT (no
 * current-context, or a name not defined), -EPROTO (a field of the wrong kind, bad base64),
 * -ENOTSUP (only an exec plugin, auth-provider or password), -ENOMEM; err says which. */
int kubeconfig_resolve(struct kubeconfig_file *const *files, size_t n, const char *context,
                       struct kubeconfig *out, char *err, size_t err_cap);
void kubeconfig_free(struct kubeconfig *kc);

#endif
