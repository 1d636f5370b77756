/* launcher/env/deepspeed.c — DeepSpeed's worker environment, world_info and the head's command
 * lines (see deepspeed.h). */
#include "env/deepspeed.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/environ.h"
#include "rdzv/common.h"

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

int ds_world_info_encode(const struct resources *r, char **out)
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

int ds_world_info_decode(const char *text, struct resources *r, char *err,
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

void ds_slots_format(const int *slots, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (cap)
        out[0] = '\0';
    for (size_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%d", i ? "," : "", slots[i]);
}

/* ---- the worker ---- */

const char *const env_deepspeed_vars[ENV_DEEPSPEED_NUM_VARS] = {
    "CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE", "CUDA_VISIBLE_DEVICES",
};

int env_deepspeed_build(char *const *base, const struct env_worker *w, const struct ds_worker *d,
                        char ***out, struct env_notes *notes)
{
    char vals[ENV_DEEPSPEED_NUM_VARS][64];
    snprintf(vals[0], sizeof vals[0], "%d", d->cross_rank);
    snprintf(vals[1], sizeof vals[1], "%d", d->cross_size);
    snprintf(vals[2], sizeof vals[2], "%d", w->local_world_size);
    size_t nbase = 0, bytes = 0;
    for (char *const *e = base; e && *e; e++)
        nbase++;
    if (d->devices)
        bytes += strlen(d->devices) + 32;
    char **mid = malloc((nbase + ENV_DEEPSPEED_NUM_VARS + 1) * sizeof(char *) + bytes + 3 * 80);
    if (!mid)
        return -ENOMEM;
    char *p = (char *)(mid + nbase + ENV_DEEPSPEED_NUM_VARS + 1);
    size_t n = 0;
    for (char *const *e = base; e && *e; e++) {
        bool ours = false;
        for (int i = 0; i < ENV_DEEPSPEED_NUM_VARS && !ours; i++)
            ours = env_is(*e, env_deepspeed_vars[i]) && (i < 3 || d->devices);
        if (!ours)
            mid[n++] = *e;
    }
    for (int i = 0; i < 3; i++) {
        mid[n++] = p;
        p += sprintf(p, "%s=%s", env_deepspeed_vars[i], vals[i]) + 1;
    }
    if (d->devices) {
        mid[n++] = p;
        sprintf(p, "CUDA_VISIBLE_DEVICES=%s", d->devices); /* the last string */
    }
    mid[n] = NULL;
    int r = env_torch_build(mid, w, out, notes);
    free(mid);
    return r;
}

int env_deepspeed_argv(char *const *argv, int script, int local_rank, char *buf, size_t cap,
                       char ***out)
{
    int n = 0;
    while (argv[n])
        n++;
    if (script < 0 || script >= n || cap < 24)
        return -EINVAL;
    char **a = malloc(((size_t)n + 2) * sizeof(char *));
    if (!a)
        return -ENOMEM;
    snprintf(buf, cap, "--local_rank=%d", local_rank);
    int k = 0;
    for (int i = 0; i < n; i++) {
        a[k++] = argv[i];
        if (i == script)
            a[k++] = buf;
    }
    a[k] = NULL;
    *out = a;
    return 0;
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

bool ds_exported_name(const char *name)
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

int ds_env_file_parse(const char *text, size_t len, const char *name,
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

void ds_words_free(char **words)
{
    for (char **w = words; w && *w; w++)
        free(*w);
    free(words);
}

int ds_words_split(const char *text, char ***out, int *count, char *err, size_t errlen)
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
            ds_words_free(v);
            return fail(-EINVAL, err, errlen, "--launcher_args \"%.80s\": a %c quote is not "
                        "closed", text, q);
        }
        if ((size_t)n + 2 > cap) {
            char **nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(w.p);
                ds_words_free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        if (w.oom) {
            free(w.p);
            ds_words_free(v);
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

bool ds_rcmd_is_exec(char *const *launcher_words, const char *pdsh_rcmd_type)
{
    const char *type = pdsh_rcmd_type;
    for (int i = 0; launcher_words && launcher_words[i]; i++) {
        if (!strcmp(launcher_words[i], "-R") && launcher_words[i + 1])
            type = launcher_words[++i];
        else if (!strncmp(launcher_words[i], "-R", 2) && launcher_words[i][2])
            type = launcher_words[i] + 2;
    }
    return type && !strcmp(type, "exec");
}

/* One word and a space for the remote shell: single-quoted, '%' doubled for pdsh unless
 * keep_percent. */
static void shell_word(struct sbuf *b, const char *w, bool keep_percent)
{
    sb_add(b, "'", 1);
    for (; *w; w++) {
        if (*w == '\'')
            sb_str(b, "'\\''");
        else if (*w == '%' && !keep_percent)
            sb_str(b, "%%");
        else
            sb_add(b, w, 1);
    }
    sb_add(b, "' ", 2);
}

int ds_remote_command(const struct ds_remote *r, char **out)
{
    struct sbuf b = {0};
    char t[512];
    if (r->venv_script) {
        /* '.', not bash's 'source', which sh lacks; a script that fails stops the host's
         * agent (and so the job) rather than running it outside the environment */
        sb_str(&b, ". ");
        shell_word(&b, r->venv_script, false);
        b.n--;   /* the separator comes next */
        sb_str(&b, " || exit 2; ");
    }
    for (int i = 0; i < r->nexports; i++) {
        const char *eq = strchr(r->exports[i], '=');
        if (!eq)
            continue;
        sb_str(&b, "export ");
        sb_add(&b, r->exports[i], (size_t)(eq - r->exports[i]));
        sb_add(&b, "=", 1);
        shell_word(&b, eq + 1, false);
        b.n--;
        sb_str(&b, "; ");
    }
    sb_str(&b, "cd ");
    shell_word(&b, r->cwd, false);
    b.n--;
    sb_str(&b, " && exec ");
    shell_word(&b, r->podrun, false);
    sb_str(&b, "deepspeed ");
    snprintf(t, sizeof t, "--world_info=%s", r->world_info);
    shell_word(&b, t, false);
    sb_str(&b, "--node_rank=%n ");
    snprintf(t, sizeof t, "--master_addr=%s", r->master_addr);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--master_port=%d", r->master_port);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--rdzv-id=%s", r->run_id);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--pid-file=%s/podrun-%s-", r->pid_dir, r->run_id);
    shell_word(&b, t, false);
    b.n -= 2;   /* the node rank outside the quotes: '...-'%n.pid */
    sb_str(&b, "'%n.pid ");
    if (r->addr_is_host)
        sb_str(&b, "--local-addr=%h ");
    if (r->name_is_host)
        sb_str(&b, "--node-name=%h ");
    for (int i = 0; i < r->noptions; i++)
        shell_word(&b, r->options[i], false);
    sb_str(&b, "-- ");
    for (int i = 0; i < r->program_argc; i++)
        shell_word(&b, r->program[i], false);
    if (b.n && b.p[b.n - 1] == ' ')
        b.p[--b.n] = '\0';
    return sb_done(&b, out);
}

int ds_stop_command(const struct ds_remote *r, char **out)
{
    struct sbuf b = {0};
    char t[512];
    snprintf(t, sizeof t, "%s/podrun-%s-", r->pid_dir, r->run_id);
    sb_str(&b, "f=");
    shell_word(&b, t, false);
    b.n -= 2;
    /* the file goes with the signal: a repeated stop must not make it a second SIGTERM, which
     * an agent takes as "kill the workers now" */
    sb_str(&b, "'%n.pid; if [ -f \"$f\" ]; then kill -TERM \"$(cat \"$f\")\"; rm -f \"$f\"; fi "
               "2>/dev/null; exit 0");
    return sb_done(&b, out);
}

int ds_pdsh_argv(const char *hosts, int fanout, char *const *launcher_words, bool exec,
                 const char *command, char *fanout_buf, char ***out)
{
    static char pdsh[] = "pdsh", dash_s[] = "-S", dash_f[] = "-f", dash_w[] = "-w", sh[] = "sh",
                dash_c[] = "-c";
    int nw = 0;
    while (launcher_words && launcher_words[nw])
        nw++;
    char **a = malloc(((size_t)nw + 12) * sizeof(char *));
    if (!a)
        return -ENOMEM;
    snprintf(fanout_buf, 16, "%d", fanout);
    int k = 0;
    a[k++] = pdsh;
    a[k++] = dash_s;
    a[k++] = dash_f;
    a[k++] = fanout_buf;
    a[k++] = dash_w;
    a[k++] = (char *)hosts;
    for (int i = 0; i < nw; i++)
        a[k++] = launcher_words[i];
    if (exec) {
        a[k++] = sh;
        a[k++] = dash_c;
    }
    a[k++] = (char *)command;
    a[k] = NULL;
    *out = a;
    return 0;
}

int ds_expand_host(const char *command, const char *host, int node_rank, char **out)
{
    struct sbuf b = {0};
    char num[16];
    snprintf(num, sizeof num, "%d", node_rank);
    for (const char *p = command; *p; p++) {
        if (*p == '%' && p[1] == 'n')
            sb_str(&b, num), p++;
        else if (*p == '%' && p[1] == 'h')
            sb_str(&b, host), p++;
        else if (*p == '%' && p[1] == '%')
            sb_add(&b, "%", 1), p++;
        else
            sb_add(&b, p, 1);
    }
    sb_add(&b, "", 0);
    return sb_done(&b, out);
}
