/* launcher/frontends/deepspeed_hosts.c — what the deepspeed head and its hosts exchange:
 * world_info, .deepspeed_env files, the exported variables, launcher_args words (see
 * deepspeed_hosts.h). */
#include "launcher/frontends/deepspeed_hosts.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/common.h"

#define fail(code, err, len, ...) podrun_failf(code, err, len, __VA_ARGS__)

/* ---- a growing string ---- */

struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static int sb_done(struct sbuf *b, char **out)
{
    if (b->oom || !b->p) {
        free(b->p);
        return -ENOMEM;
    }
    *out = b->p;
    return 0;
}

/* ---- world_info ---- */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void b64_encode(struct sbuf *b, const unsigned char *in, size_t n)
{
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        char q[4] = {b64url[v >> 18 & 63], b64url[v >> 12 & 63],
                     i + 1 < n ? b64url[v >> 6 & 63] : '=', i + 2 < n ? b64url[v & 63] : '='};
        sb_add(b, q, 4);
    }
}

/* One base64 digit, either alphabet; -1 for anything else. */
static int b64_digit(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-' || c == '+')
        return 62;
    if (c == '_' || c == '/')
        return 63;
    return -1;
}

/* text (padding optional) into a malloc'd buffer; -EINVAL for a byte that is not base64. */
static int b64_decode(const char *text, unsigned char **out, size_t *outlen)
{
    size_t n = strlen(text);
    while (n && text[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return -EINVAL;
    unsigned char *o = malloc(n / 4 * 3 + 3);
    if (!o)
        return -ENOMEM;
    size_t k = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int d = b64_digit((unsigned char)text[i]);
        if (d < 0) {
            free(o);
            return -EINVAL;
        }
        acc = (acc << 6 | (unsigned)d) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    *out = o;
    *outlen = k;
    return 0;
}

/* A JSON string as Python's json.dumps writes it (ASCII; others as \uXXXX are not needed: host
 * names are bytes without spaces, and non-ASCII bytes go through as they are). */
static void json_quote(struct sbuf *b, const char *s)
{
    sb_add(b, "\"", 1);
    for (; *s; s++) {
        char e[8];
        if (*s == '"' || *s == '\\') {
            e[0] = '\\', e[1] = *s;
            sb_add(b, e, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", (unsigned char)*s);
            sb_str(b, e);
        } else {
            sb_add(b, s, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* Whether s is UTF-8 text (JSON carries nothing else; DeepSpeed reads the file as UTF-8). */
static bool utf8_ok(const unsigned char *s)
{
    while (*s) {
        int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2
                : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || (n == 1 && *s < 0xc2))
            return false;
        s++;
        for (int i = 0; i < n; i++, s++)
            if ((*s & 0xc0) != 0x80)
                return false;
    }
    return true;
}

int deepspeed_hosts_world_encode(const struct resources *r, char **out)
{
    for (size_t i = 0; i < r->count; i++)
        if (!utf8_ok((const unsigned char *)r->nodes[i].host))
            return -EILSEQ;
    struct sbuf j = {0};
    sb_str(&j, "{");
    for (size_t i = 0; i < r->count; i++) {
        if (i)
            sb_str(&j, ", ");
        json_quote(&j, r->nodes[i].host);
        sb_str(&j, ": [");
        for (size_t k = 0; k < r->nodes[i].nslots; k++) {
            char d[16];
            snprintf(d, sizeof d, "%s%d", k ? ", " : "", r->nodes[i].slots[k]);
            sb_str(&j, d);
        }
        sb_str(&j, "]");
    }
    sb_str(&j, "}");
    if (j.oom) {
        free(j.p);
        return -ENOMEM;
    }
    struct sbuf b = {0};
    b64_encode(&b, (const unsigned char *)j.p, j.n);
    free(j.p);
    return sb_done(&b, out);
}

int deepspeed_hosts_world_decode(const char *text, struct resources *r, char *err,
                                 size_t errlen)
{
    unsigned char *raw = NULL;
    size_t n = 0;
    memset(r, 0, sizeof *r);
    int rc = b64_decode(text, &raw, &n);
    if (rc == -ENOMEM)
        return fail(rc, err, errlen, "out of memory");
    if (rc)
        return fail(-EINVAL, err, errlen, "--world_info: not base64; it is the head's encoding "
                    "of {\"host\": [slot, ...], ...}");
    json_error_t je;
    json_t *o = json_loadb((const char *)raw, n, JSON_REJECT_DUPLICATES, &je);
    free(raw);
    if (!o || !json_is_object(o) || json_object_size(o) == 0) {
        json_decref(o);
        return fail(-EINVAL, err, errlen, "--world_info: not a JSON object of host -> slot "
                    "list with at least one host");
    }
    const char *host;
    json_t *v;
    rc = 0;
    json_object_foreach(o, host, v) {
        int slots[HOSTFILE_SLOTS_MAX];
        size_t ns = 0, i;
        json_t *s;
        if (!json_is_array(v) || json_array_size(v) > HOSTFILE_SLOTS_MAX) {
            rc = fail(-EINVAL, err, errlen, "--world_info: host \"%.64s\" has no list of slot "
                      "ids", host);
            break;
        }
        json_array_foreach(v, i, s) {
            if (!json_is_integer(s) || json_integer_value(s) < 0 ||
                json_integer_value(s) >= HOSTFILE_SLOTS_MAX) {
                rc = fail(-EINVAL, err, errlen, "--world_info: host \"%.64s\": slot ids are "
                          "whole numbers from 0 to %d", host, HOSTFILE_SLOTS_MAX - 1);
                break;
            }
            slots[ns++] = (int)json_integer_value(s);
        }
        if (!rc && ns == 0)
            rc = fail(-EINVAL, err, errlen, "--world_info: host \"%.64s\" has no slot", host);
        if (!rc)
            rc = resources_add(r, "--world_info", host, 0, slots, ns, err, errlen);
        if (rc)
            break;
    }
    json_decref(o);
    if (rc)
        resources_free(r);
    return rc;
}

void deepspeed_hosts_slots_format(const int *slots, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (cap)
        out[0] = '\0';
    for (size_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%d", i ? "," : "", slots[i]);
}

/* ---- what goes to every host ---- */

/* runner.py: EXPORT_ENVS, the CUDA accelerator's export_envs() and NEBULA_EXPORT_ENVS, each
 * matched as a prefix of the variable's name. */
static const char *const exported[] = {
    "MLFLOW", "PYTHON", "MV2", "UCX", "NCCL",
    "DLTS_JOB_ID", "DLTS_NUM_WORKER", "NEBULA_PERSISTENT_STORAGE_PATH",
    "NEBULA_PERSISTENT_TIME_INTERVAL", "AML_RUN_ID", "AZUREML_RUN_TOKEN",
    "AZUREML_WORKSPACE_SCOPE", "AZUREML_EXPERIMENT_SCOPE", "AZUREML_RUN_HISTORY_SERVICE_ENDPOINT",
    "AZUREML_RUN_ID", "NEBULA_MEMORY_BUFFER_SIZE", "AZUREML_PARAMETER_ITPJOB_NAME",
    "FC_TASKROLE_NAME", "FC_TASK_INDEX", "MASTER_HOST", "LOCAL_HOST", "AZUREML_BLOB_ACCOUNT_NAME",
    "AZUREML_BLOB_ACCOUNT_KEY",
};

bool deepspeed_hosts_exported(const char *name)
{
    for (size_t i = 0; i < sizeof exported / sizeof *exported; i++)
        if (!strncmp(name, exported[i], strlen(exported[i])))
            return true;
    return false;
}

static const char *strip(const char *s, const char *e, size_t *n)
{
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    *n = (size_t)(e - s);
    return s;
}

int deepspeed_hosts_env_file(const char *text, size_t len, const char *name,
                             int (*add)(void *arg, const char *key, const char *value), void *arg,
                             char *err, size_t errlen)
{
    const char *p = text, *end = text + len;
    unsigned line = 0;
    while (p < end) {
        const char *nl = p;
        while (nl < end && *nl != '\n' && *nl != '\r')
            nl++;
        line++;
        size_t n;
        const char *s = strip(p, nl, &n);
        const char *eq = memchr(s, '=', n);
        if (memchr(p, '\0', (size_t)(nl - p)))
            return fail(-EINVAL, err, errlen, "%s line %u: a NUL byte; the file is KEY=VALUE "
                        "lines", name, line);
        if (n && s[0] != '#') {
            size_t kn, vn;
            const char *k = eq ? strip(s, eq, &kn) : NULL;
            if (!eq || !kn)
                return fail(-EINVAL, err, errlen, "%s line %u: \"%.*s\" is not KEY=VALUE", name,
                            line, (int)(n > 60 ? 60 : n), s);
            const char *v = strip(eq + 1, s + n, &vn);
            char *key = strndup(k, kn), *val = strndup(v, vn);
            int r = key && val ? add(arg, key, val) : -ENOMEM;
            free(key);
            free(val);
            if (r)
                return r == -ENOMEM ? fail(r, err, errlen, "out of memory") : r;
        }
        p = nl + (nl < end && *nl == '\r' && nl + 1 < end && nl[1] == '\n' ? 2 : 1);
    }
    return 0;
}

void deepspeed_hosts_words_free(char **words)
{
    for (char **w = words; w && *w; w++)
        free(*w);
    free(words);
}

int deepspeed_hosts_words_split(const char *text, char ***out, int *count, char *err,
                                size_t errlen)
{
    size_t cap = 8;
    int n = 0;
    char **v = calloc(cap, sizeof *v);
    if (!v)
        return -ENOMEM;
    const char *p = text ? text : "";
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        struct sbuf w = {0};
        sb_add(&w, "", 0);
        char q = 0;
        for (; *p && (q || !isspace((unsigned char)*p)); p++) {
            if (q == '\'' && *p == '\'')
                q = 0;
            else if (q == '"' && *p == '"')
                q = 0;
            else if (!q && (*p == '\'' || *p == '"'))
                q = *p;
            else if (*p == '\\' && q != '\'' && p[1])
                sb_add(&w, ++p, 1);
            else
                sb_add(&w, p, 1);
        }
        if (q) {
            free(w.p);
            deepspeed_hosts_words_free(v);
            return fail(-EINVAL, err, errlen, "--launcher_args \"%.80s\": a %c quote is not "
                        "closed", text, q);
        }
        if ((size_t)n + 2 > cap) {
            char **nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(w.p);
                deepspeed_hosts_words_free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        if (w.oom) {
            free(w.p);
            deepspeed_hosts_words_free(v);
            return -ENOMEM;
        }
        v[n++] = w.p;
        v[n] = NULL;
    }
    *out = v;
    if (count)
        *count = n;
    return 0;
}
