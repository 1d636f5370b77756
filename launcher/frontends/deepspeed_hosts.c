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

#include "rdzv/base/b64.h"
#include "rdzv/base/common.h"
#include "rdzv/base/text.h"

#define fail(code, err, len, ...) podrun_failf(code, err, len, __VA_ARGS__)

/* ---- growing text (rdzv/base/text.h) ---- */

static void add(textbuf_t *b, const char *s)
{
    text_add(b, s, strlen(s));
}

/* ---- world_info ---- */

/* A JSON string as Python's json.dumps writes it (ASCII; others as \uXXXX are not needed: host
 * names are bytes without spaces, and non-ASCII bytes go through as they are). */
static void json_quote(textbuf_t *b, const char *s)
{
    text_add(b, "\"", 1);
    for (; *s; s++) {
        char e[8];
        if (*s == '"' || *s == '\\') {
            e[0] = '\\', e[1] = *s;
            text_add(b, e, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", (unsigned char)*s);
            add(b, e);
        } else {
            text_add(b, s, 1);
        }
    }
    text_add(b, "\"", 1);
}

/* Whether s is UTF-8 text (JSON carries nothing else; DeepSpeed reads the file as UTF-8). */
static bool utf8_ok(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s++;
        int n = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
        if (n < 0)
            return false;
        /* the second byte's range: no overlong form, no surrogate, nothing above U+10FFFF,
         * which the agents' JSON parser refuses */
        unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        for (int i = 0; i < n; i++, s++)
            if (*s < (i ? 0x80u : lo) || *s > (i ? 0xbfu : hi))
                return false;
    }
    return true;
}

int deepspeed_hosts_world_encode(const struct resources *r, char **out)
{
    for (size_t i = 0; i < r->count; i++)
        if (!utf8_ok((const unsigned char *)r->nodes[i].host))
            return -EILSEQ;
    textbuf_t j = {0};
    add(&j, "{");
    for (size_t i = 0; i < r->count; i++) {
        if (i)
            add(&j, ", ");
        json_quote(&j, r->nodes[i].host);
        add(&j, ": [");
        for (size_t k = 0; k < r->nodes[i].nslots; k++) {
            char d[16];
            snprintf(d, sizeof d, "%s%d", k ? ", " : "", r->nodes[i].slots[k]);
            add(&j, d);
        }
        add(&j, "]");
    }
    add(&j, "}");
    char *b = j.cut ? NULL : malloc(B64_ENCODED_LEN(j.len) + 1);
    if (b)
        b64_encode(j.s, j.len, b, B64_URL);
    text_free(&j);
    if (!b)
        return -ENOMEM;
    *out = b;
    return 0;
}

int deepspeed_hosts_world_decode(const char *text, struct resources *r, char *err,
                                 size_t errlen)
{
    char *raw = NULL;
    size_t len = text ? strlen(text) : 0, n = 0;
    memset(r, 0, sizeof *r);
    if (!len)
        return fail(-EINVAL, err, errlen, "--world_info is empty; it is the head's encoding of "
                    "{\"host\": [slot, ...], ...}, or leave it out");
    /* any run of '=' at the end is padding, as it has always been read here (the head writes at
     * most two) */
    while (len && text[len - 1] == '=')
        len--;
    int rc = b64_decode_alloc(text, len, B64_ANY | B64_PAD_OPTIONAL, &raw, &n);
    if (rc == -ENOMEM)
        return fail(rc, err, errlen, "out of memory");
    if (rc)
        return fail(-EINVAL, err, errlen, "--world_info: not base64; it is the head's encoding "
                    "of {\"host\": [slot, ...], ...}");
    json_error_t je;
    json_t *o = json_loadb(raw, n, JSON_REJECT_DUPLICATES, &je);
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
        textbuf_t w = {0};
        text_add(&w, "", 0);
        char q = 0;
        for (; *p && (q || !isspace((unsigned char)*p)); p++) {
            if (q == '\'' && *p == '\'')
                q = 0;
            else if (q == '"' && *p == '"')
                q = 0;
            else if (!q && (*p == '\'' || *p == '"'))
                q = *p;
            else if (*p == '\\' && q != '\'' && p[1])
                text_add(&w, ++p, 1);
            else
                text_add(&w, p, 1);
        }
        if (q) {
            text_free(&w);
            deepspeed_hosts_words_free(v);
            return fail(-EINVAL, err, errlen, "--launcher_args \"%.80s\": a %c quote is not "
                        "closed", text, q);
        }
        if ((size_t)n + 2 > cap) {
            char **nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                text_free(&w);
                deepspeed_hosts_words_free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        if (w.cut) {
            text_free(&w);
            deepspeed_hosts_words_free(v);
            return -ENOMEM;
        }
        v[n++] = w.s;
        v[n] = NULL;
    }
    *out = v;
    if (count)
        *count = n;
    return 0;
}
