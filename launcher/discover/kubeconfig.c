/* launcher/discover/kubeconfig.c — kubeconfig files through libyaml's document loader
 * (launcher/discover/kubeconfig.h).
 *
 * Only the few paths below are walked (never the whole tree), so anchors and aliases cost
 * nothing however they are nested; the caller bounds the text's size. */
#include "launcher/discover/kubeconfig.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "rdzv/base/b64.h"
#include "rdzv/base/common.h"

struct kubeconfig_file {
    yaml_document_t doc;
};


int kubeconfig_file_parse(const char *text, size_t len, struct kubeconfig_file **out, char *err,
                          size_t err_cap)
{
    struct kubeconfig_file *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        free(f);
        return -ENOMEM;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&p, &f->doc);
    if (!ok) {
        sfmt(err, err_cap, "not YAML: %s (line %zu, column %zu)",
               p.problem ? p.problem : "parse error", p.problem_mark.line + 1,
               p.problem_mark.column + 1);
        yaml_parser_delete(&p);
        free(f);
        return -EPROTO;
    }
    yaml_parser_delete(&p);
    yaml_node_t *root = yaml_document_get_root_node(&f->doc);
    /* An empty file is an empty config (client-go accepts it); anything else must be a map. */
    if (root && root->type != YAML_MAPPING_NODE) {
        sfmt(err, err_cap, "not a kubeconfig: the top level is not a mapping");
        kubeconfig_file_free(f);
        return -EPROTO;
    }
    *out = f;
    return 0;
}

void kubeconfig_file_free(struct kubeconfig_file *f)
{
    if (!f)
        return;
    yaml_document_delete(&f->doc);
    free(f);
}

/* ---- walking a document ---- */

static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    size_t klen = strlen(key);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == klen &&
            memcmp(k->data.scalar.value, key, klen) == 0)
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

static int is_null(yaml_node_t *n)
{
    if (!n)
        return 1;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp((const char *)n->data.scalar.value, nulls[i]) == 0)
            return 1;
    return 0;
}

/* A string field: 1 and *s when set, 0 when absent or null, -EPROTO when not a plain string. */
static int get_str(yaml_document_t *d, yaml_node_t *m, const char *key, const char **s)
{
    yaml_node_t *n = map_get(d, m, key);
    *s = NULL;
    if (is_null(n))
        return 0;
    if (n->type != YAML_SCALAR_NODE ||
        strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
        return -EPROTO;
    *s = (const char *)n->data.scalar.value;
    return 1;
}

/* The entry named `name` in the list `list` (contexts, clusters, users) of the first file that
 * has one: its inner mapping (`inner`: context, cluster, user) and the file's index. */
static yaml_node_t *find_named(struct kubeconfig_file *const *files, size_t n, const char *list,
                               const char *inner, const char *name, size_t *from)
{
    for (size_t i = 0; i < n; i++) {
        yaml_document_t *d = &files[i]->doc;
        yaml_node_t *seq = map_get(d, yaml_document_get_root_node(d), list);
        if (!seq || seq->type != YAML_SEQUENCE_NODE)
            continue;
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++) {
            yaml_node_t *e = yaml_document_get_node(d, *it);
            const char *nm;
            if (get_str(d, e, "name", &nm) == 1 && strcmp(nm, name) == 0) {
                *from = i;
                yaml_node_t *body = map_get(d, e, inner);
                return body ? body : e;
            }
        }
    }
    return NULL;
}

/* ---- resolving a context ---- */

struct field {
    const char *key;
    size_t offset;          /* of the char * in struct kubeconfig */
    size_t len_offset;      /* of its size_t length, for -data fields; 0: a plain string */
};

#define STR(k, f) {k, offsetof(struct kubeconfig, f), 0}
#define DATA(k, f) {k, offsetof(struct kubeconfig, f), offsetof(struct kubeconfig, f##_len)}

static const struct field cluster_fields[] = {
    STR("server", server),
    STR("certificate-authority", ca_file),
    DATA("certificate-authority-data", ca_data),
    STR("tls-server-name", tls_server_name),
};

static const struct field user_fields[] = {
    STR("token", token),
    STR("tokenFile", token_file),
    STR("client-certificate", cert_file),
    DATA("client-certificate-data", cert_data),
    STR("client-key", key_file),
    DATA("client-key-data", key_data),
};

static int copy_fields(yaml_document_t *d, yaml_node_t *m, const struct field *fs, size_t nf,
                       struct kubeconfig *kc, const char *what, const char *name, char *err,
                       size_t err_cap)
{
    for (size_t i = 0; i < nf; i++) {
        const char *s;
        int rc = get_str(d, m, fs[i].key, &s);
        if (rc < 0) {
            sfmt(err, err_cap, "%s \"%s\": %s is not a string", what, name, fs[i].key);
            return rc;
        }
        if (rc == 0)
            continue;
        char **dst = (char **)((char *)kc + fs[i].offset);
        if (fs[i].len_offset) {
            size_t *len = (size_t *)((char *)kc + fs[i].len_offset);
            if (b64_decode_alloc(s, strlen(s), B64_BLANKS | B64_PAD_OPTIONAL, dst, len) != 0) {
                sfmt(err, err_cap, "%s \"%s\": %s is not base64", what, name, fs[i].key);
                return -EPROTO;
            }
        } else if (!(*dst = strdup(s))) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int is_true(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    const char *s;
    if (get_str(d, m, key, &s) != 1)
        return 0;
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (strcmp(s, yes[i]) == 0)
            return 1;
    return 0;
}

static int dup_into(char **dst, const char *s)
{
    return (*dst = strdup(s)) ? 0 : -ENOMEM;
}

/* A user with none of the credentials podrun sends: say what it has instead. */
static int user_unsupported(yaml_document_t *d, yaml_node_t *u, const char *name, char *err,
                            size_t err_cap)
{
    const char *cmd = NULL;
    if (map_get(d, u, "exec")) {
        get_str(d, map_get(d, u, "exec"), "command", &cmd);
        sfmt(err, err_cap, "user \"%s\" authenticates through an exec plugin (%s); podrun "
               "sends a token, a tokenFile or a client certificate", name, cmd ? cmd : "?");
        return -ENOTSUP;
    }
    if (map_get(d, u, "auth-provider")) {
        sfmt(err, err_cap, "user \"%s\" authenticates through an auth-provider; podrun sends a "
               "token, a tokenFile or a client certificate", name);
        return -ENOTSUP;
    }
    if (map_get(d, u, "password")) {
        sfmt(err, err_cap, "user \"%s\" has a password (basic auth); podrun sends a token, a "
               "tokenFile or a client certificate", name);
        return -ENOTSUP;
    }
    return 0;
}

static int resolve(struct kubeconfig_file *const *files, size_t n, const char *context,
                   struct kubeconfig *kc, char *err, size_t err_cap)
{
    const char *ctx = context && *context ? context : NULL;
    for (size_t i = 0; !ctx && i < n; i++) {
        yaml_document_t *d = &files[i]->doc;
        if (get_str(d, yaml_document_get_root_node(d), "current-context", &ctx) < 0)
            ctx = NULL;
    }
    if (!ctx) {
        sfmt(err, err_cap, "no current-context is set and no context was named");
        return -ENOENT;
    }
    size_t from;
    yaml_node_t *c = find_named(files, n, "contexts", "context", ctx, &from);
    if (!c) {
        sfmt(err, err_cap, "context \"%s\" is not defined", ctx);
        return -ENOENT;
    }
    yaml_document_t *d = &files[from]->doc;
    const char *cluster, *user, *ns;
    if (get_str(d, c, "cluster", &cluster) != 1 || get_str(d, c, "user", &user) < 0 ||
        get_str(d, c, "namespace", &ns) < 0) {
        sfmt(err, err_cap, "context \"%s\" names no cluster", ctx);
        return -ENOENT;
    }
    int rc;
    if ((rc = dup_into(&kc->context, ctx)) || (rc = dup_into(&kc->cluster, cluster)) ||
        (user && (rc = dup_into(&kc->user, user))) || (ns && (rc = dup_into(&kc->namespace, ns))))
        return rc;

    yaml_node_t *cl = find_named(files, n, "clusters", "cluster", cluster, &kc->cluster_from);
    if (!cl) {
        sfmt(err, err_cap, "cluster \"%s\" (context \"%s\") is not defined", cluster, ctx);
        return -ENOENT;
    }
    d = &files[kc->cluster_from]->doc;
    if ((rc = copy_fields(d, cl, cluster_fields, sizeof cluster_fields / sizeof *cluster_fields,
                          kc, "cluster", cluster, err, err_cap)))
        return rc;
    kc->insecure = is_true(d, cl, "insecure-skip-tls-verify");
    if (!kc->server) {
        sfmt(err, err_cap, "cluster \"%s\" has no server", cluster);
        return -ENOENT;
    }
    if (!user)
        return 0;   /* no user: the server is asked anonymously */
    yaml_node_t *u = find_named(files, n, "users", "user", user, &kc->user_from);
    if (!u) {
        sfmt(err, err_cap, "user \"%s\" (context \"%s\") is not defined", user, ctx);
        return -ENOENT;
    }
    d = &files[kc->user_from]->doc;
    if ((rc = copy_fields(d, u, user_fields, sizeof user_fields / sizeof *user_fields, kc, "user",
                          user, err, err_cap)))
        return rc;
    if (!kc->token && !kc->token_file && !kc->cert_file && !kc->cert_data)
        return user_unsupported(d, u, user, err, err_cap);
    if ((kc->cert_file || kc->cert_data) && !(kc->key_file || kc->key_data)) {
        sfmt(err, err_cap, "user \"%s\" has a client certificate but no client key", user);
        return -ENOENT;
    }
    return 0;
}

int kubeconfig_resolve(struct kubeconfig_file *const *files, size_t n, const char *context,
                       struct kubeconfig *out, char *err, size_t err_cap)
{
    memset(out, 0, sizeof *out);
    int rc = resolve(files, n, context, out, err, err_cap);
    if (rc)
        kubeconfig_free(out);
    return rc;
}

void kubeconfig_free(struct kubeconfig *kc)
{
    char **strs[] = {&kc->context, &kc->cluster, &kc->user, &kc->server, &kc->namespace,
                     &kc->ca_file, &kc->ca_data, &kc->tls_server_name, &kc->token,
                     &kc->token_file, &kc->cert_file, &kc->cert_data, &kc->key_file,
                     &kc->key_data};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    memset(kc, 0, sizeof *kc);
}
