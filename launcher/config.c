/* launcher/config.c — the option table, the layers (default < env < flag), validation.
 *
 * One table describes every option: its flag (both --dash-form and --underscore_form are
 * accepted), its type, its default and its help line. The same table drives the environment
 * layer (PET_<NAME>, then PODRUN_<NAME> which wins), --help and --print-config, so a new option
 * is one table row plus, for a new type, one parser. */
#include "config.h"
#include "env.h"
#include "rdzv/common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum opt_type {
    T_NPROC, T_NNODES, T_INT, T_PORT, T_BACKEND, T_ENDPOINT, T_STR, T_OPTSTR, T_RDZV_CONF,
    T_BOOL, T_DUR, T_START, T_STDSPEC, T_RANKS, T_TRISTATE,
};

enum { F_NO_ENV = 1, F_NO_FLAG = 2, F_ACTION = 4 };

struct opt_def {
    const char *name;       /* flag without "--", dash form; also the --print-config name */
    char shortc;
    enum opt_type type;
    size_t off;             /* field for the generic types */
    long min, max;          /* for T_INT */
    const char *def;        /* default as text, NULL for none */
    const char *metavar;
    const char *extra_env;  /* a torch-side variable that also sets it (lowest env priority) */
    unsigned flags;
    const char *help;
};

#define OFF(f) offsetof(struct cfg, f)

/* The --rdzv-conf keys: the options from join_timeout to timeout, in enum order. */
#define CFG_RDZV_CONF_FIRST CFG_JOIN_TIMEOUT
#define CFG_RDZV_CONF_LAST CFG_STORE_TIMEOUT

static bool is_rdzv_conf_key(int id)
{
    return id >= CFG_RDZV_CONF_FIRST && id <= CFG_RDZV_CONF_LAST;
}

static const struct opt_def opts[CFG__COUNT] = {
    [CFG_NPROC_PER_NODE] = {"nproc-per-node", 0, T_NPROC, 0, 0, 0, "1", "N|auto|cpu|gpu", NULL, 0,
        "workers on this node; auto = GPUs, else CPUs"},
    [CFG_NNODES] = {"nnodes", 0, T_NNODES, 0, 0, 0, "1", "N|MIN:MAX", NULL, 0,
        "nodes in the job"},
    [CFG_NODE_RANK] = {"node-rank", 0, T_INT, OFF(node_rank), 0, 65535, "0", "N", NULL, 0,
        "this node's rank (static rendezvous)"},
    [CFG_RDZV_BACKEND] = {"rdzv-backend", 0, T_BACKEND, 0, 0, 0, "static", "static|c10d", NULL, 0,
        "rendezvous backend"},
    [CFG_RDZV_ENDPOINT] = {"rdzv-endpoint", 0, T_ENDPOINT, 0, 0, 0, NULL, "HOST[:PORT]", NULL, 0,
        "job store address (c10d port default 29400; static: master addr:port)"},
    [CFG_RDZV_ID] = {"rdzv-id", 0, T_STR, OFF(rdzv_id), 0, 0, "none", "ID", NULL, 0,
        "job id, TORCHELASTIC_RUN_ID"},
    [CFG_RDZV_CONF] = {"rdzv-conf", 0, T_RDZV_CONF, 0, 0, 0, NULL, "K=V,...", NULL, F_ACTION,
        "join_timeout, last_call_timeout, close_timeout, keep_alive_interval, "
        "keep_alive_max_attempt, is_host; timeout (static: join_timeout unless that is given, "
        "as torchrun), read_timeout (accepted for torchrun compatibility, unused)"},
    [CFG_STANDALONE] = {"standalone", 0, T_BOOL, OFF(standalone), 0, 0, "0", NULL, NULL, 0,
        "single-node job on a free local port with a random id"},
    [CFG_MASTER_ADDR] = {"master-addr", 0, T_STR, OFF(master_addr), 0, 0, "127.0.0.1", "HOST", NULL,
        0, "MASTER_ADDR given to workers"},
    [CFG_MASTER_PORT] = {"master-port", 0, T_PORT, OFF(master_port), 1, 65535, "29500", "PORT",
        NULL, 0, "MASTER_PORT given to workers"},
    [CFG_LOCAL_ADDR] = {"local-addr", 0, T_OPTSTR, OFF(local_addr), 0, 0, NULL, "ADDR", NULL, 0,
        "address this agent advertises and binds (workers get GLOO_SOCKET_IFNAME of its interface)"},
    [CFG_MAX_RESTARTS] = {"max-restarts", 0, T_INT, OFF(max_restarts), 0, 1000000, "0", "N", NULL,
        0, "in-place restarts of the job before it fails"},
    [CFG_MONITOR_INTERVAL] = {"monitor-interval", 0, T_DUR, OFF(monitor_interval_ms), 0, 0, "0.1",
        "SECONDS", NULL, 0, "accepted for torchrun compatibility (podrun is event driven)"},
    [CFG_START_METHOD] = {"start-method", 0, T_START, 0, 0, 0, "spawn", "spawn|fork|forkserver",
        NULL, 0, "accepted for torchrun compatibility (workers are always exec'd)"},
    [CFG_ROLE] = {"role", 0, T_STR, OFF(role), 0, 0, "default", "NAME", NULL, 0,
        "ROLE_NAME given to workers"},
    [CFG_MODULE] = {"module", 'm', T_BOOL, OFF(module), 0, 0, "0", NULL, NULL, 0,
        "PROGRAM is a python module (python -u -m)"},
    [CFG_NO_PYTHON] = {"no-python", 0, T_BOOL, OFF(no_python), 0, 0, "0", NULL, NULL, 0,
        "exec PROGRAM directly, even a .py file"},
    [CFG_RUN_PATH] = {"run-path", 0, T_BOOL, OFF(run_path), 0, 0, "0", NULL, NULL, 0,
        "run the script with runpy.run_path"},
    [CFG_PYTHON] = {"python", 0, T_STR, OFF(python), 0, 0, "python3", "PATH", "PYTHON_EXEC", 0,
        "interpreter for .py scripts and -m"},
    [CFG_LOG_DIR] = {"log-dir", 0, T_OPTSTR, OFF(log_dir), 0, 0, NULL, "DIR", NULL, 0,
        "per-rank logs in DIR/RUN_ID/attempt_N/LOCAL_RANK/{stdout,stderr}.log"},
    [CFG_REDIRECTS] = {"redirects", 'r', T_STDSPEC, OFF(redirects), 0, 0, NULL, "N|LR:N,...", NULL,
        0, "streams to log files only (1 stdout, 2 stderr, 3 both)"},
    [CFG_TEE] = {"tee", 't', T_STDSPEC, OFF(tee), 0, 0, NULL, "N|LR:N,...", NULL, 0,
        "streams to log files and the console (1 stdout, 2 stderr, 3 both)"},
    [CFG_LOCAL_RANKS_FILTER] = {"local-ranks-filter", 0, T_RANKS, OFF(local_ranks_filter), 0, 0,
        NULL, "LR,...", NULL, 0, "show only these local ranks on the console"},
    [CFG_LOG_LINE_PREFIX] = {"log-line-prefix", 0, T_STR, OFF(log_line_prefix), 0, 0,
        "[rank ${rank}]:", "TEMPLATE", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", 0,
        "console line prefix; ${rank} ${local_rank} ${role_name}"},
    [CFG_TERM_TIMEOUT] = {"term-timeout", 0, T_DUR, OFF(term_timeout_ms), 0, 0, "25", "SECONDS",
        NULL, 0, "grace between SIGTERM and SIGKILL when stopping workers"},
    [CFG_TERMINATION_LOG] = {"termination-log", 0, T_OPTSTR, OFF(termination_log), 0, 0, NULL,
        "PATH", NULL, 0, "failure summary file (default /dev/termination-log when writable)"},
    [CFG_HANG_TIMEOUT] = {"hang-timeout", 0, T_DUR, OFF(hang_timeout_ms), 0, 0, "0", "SECONDS",
        NULL, 0, "a worker silent this long has failed (0: off)"},
    [CFG_EXIT_CODE_PEER_FAILURE] = {"exit-code-peer-failure", 0, T_INT,
        OFF(exit_code_peer_failure), 1, 255, "170", "CODE", NULL, 0,
        "exit code when a worker on another node failed"},
    [CFG_EXIT_CODE_PEER_LOST] = {"exit-code-peer-lost", 0, T_INT, OFF(exit_code_peer_lost), 1,
        255, "171", "CODE", NULL, 0, "exit code when another node was lost, left or went silent"},
    [CFG_EXIT_CODE_STORE_LOST] = {"exit-code-store-lost", 0, T_INT, OFF(exit_code_store_lost), 1,
        255, "172", "CODE", NULL, 0, "exit code when the job store host was lost"},
    [CFG_EXIT_CODE_RDZV_TIMEOUT] = {"exit-code-rdzv-timeout", 0, T_INT,
        OFF(exit_code_rdzv_timeout), 1, 255, "173", "CODE", NULL, 0,
        "exit code when the rendezvous timed out (join_timeout)"},
    [CFG_EXIT_CODE_HANG] = {"exit-code-hang", 0, T_INT, OFF(exit_code_hang), 1, 255, "174",
        "CODE", NULL, 0, "exit code when this node's worker hung (--hang-timeout)"},
    [CFG_JOIN_TIMEOUT] = {"join_timeout", 0, T_DUR, OFF(join_timeout_ms), 0, 0, "600", NULL, NULL,
        F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_LAST_CALL_TIMEOUT] = {"last_call_timeout", 0, T_DUR, OFF(last_call_timeout_ms), 0, 0, "30",
        NULL, NULL, F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_CLOSE_TIMEOUT] = {"close_timeout", 0, T_DUR, OFF(close_timeout_ms), 0, 0, "30", NULL, NULL,
        F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_KEEP_ALIVE_INTERVAL] = {"keep_alive_interval", 0, T_DUR, OFF(keep_alive_interval_ms), 0, 0,
        "1", NULL, NULL, F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_KEEP_ALIVE_MAX_ATTEMPT] = {"keep_alive_max_attempt", 0, T_INT,
        OFF(keep_alive_max_attempt), 1, 1000, "3", NULL, NULL, F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_IS_HOST] = {"is_host", 0, T_TRISTATE, OFF(is_host), 0, 0, NULL, NULL, NULL,
        F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_READ_TIMEOUT] = {"read_timeout", 0, T_DUR, OFF(read_timeout_ms), 0, 0, "60", NULL, NULL,
        F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_STORE_TIMEOUT] = {"timeout", 0, T_DUR, OFF(store_timeout_ms), 0, 0, "900", NULL, NULL,
        F_NO_ENV | F_NO_FLAG, NULL},
    [CFG_PRINT_CONFIG] = {"print-config", 0, T_BOOL, OFF(print_config), 0, 0, "0", NULL, NULL,
        F_ACTION, "print every resolved value and where it came from, then exit"},
    [CFG_HELP] = {"help", 'h', T_BOOL, OFF(help), 0, 0, "0", NULL, NULL, F_NO_ENV | F_ACTION,
        "this help"},
    [CFG_VERSION] = {"version", 0, T_BOOL, OFF(version), 0, 0, "0", NULL, NULL,
        F_NO_ENV | F_ACTION, "print the version"},
};

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

const char *cfg_name(enum cfg_id id)
{
    return (unsigned)id < CFG__COUNT ? opts[id].name : "?";
}

void cfg_src_describe(const struct cfg_src *s, char *buf, size_t len)
{
    switch (s->kind) {
    case CFG_SRC_DEFAULT: snprintf(buf, len, "default"); break;
    case CFG_SRC_OPERATOR: snprintf(buf, len, "operator env %s", s->name); break;
    case CFG_SRC_ENV: snprintf(buf, len, "env %s", s->name); break;
    case CFG_SRC_FILE: snprintf(buf, len, "config file %s", s->name); break;
    case CFG_SRC_FLAG: snprintf(buf, len, "flag %s", s->name); break;
    case CFG_SRC_DERIVED: snprintf(buf, len, "from %s", s->name); break;
    }
}

/* "--nproc-per-node 'x'" or "PODRUN_NPROC_PER_NODE='x'": how an error names its input. */
static void input_name(enum cfg_id id, const struct cfg_src *s, const char *val, char *buf,
                       size_t len)
{
    const char *v = val ? val : "";
    switch (s->kind) {
    case CFG_SRC_FLAG: snprintf(buf, len, "%s '%s'", s->name, v); break;
    case CFG_SRC_ENV:
    case CFG_SRC_OPERATOR: snprintf(buf, len, "%s='%s'", s->name, v); break;
    case CFG_SRC_FILE: snprintf(buf, len, "%s: %s '%s'", s->name, opts[id].name, v); break;
    default: snprintf(buf, len, "%s '%s'", opts[id].name, v); break;
    }
}

/* "25", "2.5", "500ms", "30s", "10m", "1h" → milliseconds; bare numbers are seconds. */
int cfg_parse_duration(const char *s, uint64_t *ms)
{
    if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '.' && isdigit((unsigned char)s[1]))))
        return -EINVAL;   /* also keeps out "-1", " 1", "nan", "inf" */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -EINVAL;
    double scale = 1000;
    if (!*end || !strcmp(end, "s"))
        scale = 1000;
    else if (!strcmp(end, "ms"))
        scale = 1;
    else if (!strcmp(end, "m"))
        scale = 60000;
    else if (!strcmp(end, "h"))
        scale = 3600000;
    else
        return -EINVAL;
    double r = v * scale;
    if (r > 30.0 * 24 * 3600 * 1000)   /* a month bounds every wait */
        return -ERANGE;
    *ms = (uint64_t)(r + 0.5);
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *yes[] = {"1", "true", "yes", "on", "True", "TRUE", "Yes", "YES", "ON"};
    static const char *no[] = {"0", "false", "no", "off", "False", "FALSE", "No", "NO", "OFF"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (!strcmp(s, yes[i])) { *out = true; return 0; }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (!strcmp(s, no[i])) { *out = false; return 0; }
    return -EINVAL;
}

static int set_str(char **field, const char *v)
{
    char *d = strdup(v);
    if (!d)
        return -ENOMEM;
    free(*field);
    *field = d;
    return 0;
}

/* Copies the next item of a non-empty "a,b,c" list at *p into item and moves *p past it and its
 * comma; -EINVAL for an empty or overlong item or a trailing comma. */
static int next_item(const char **p, char *item, size_t cap)
{
    size_t n = strcspn(*p, ",");
    if (n == 0 || n >= cap)
        return -EINVAL;
    memcpy(item, *p, n);
    item[n] = 0;
    *p += n;
    if (**p == ',' && !*++*p)
        return -EINVAL;
    return 0;
}

/* "N" (all local ranks) or "LR:N,LR:N" with N in 0..3: syntax only; ranks are checked against
 * nproc in cfg_finalize. */
static int check_stdspec(const char *s)
{
    long v;
    if (!strchr(s, ':'))
        return podrun_parse_int(s, 0, 3, &v);
    for (const char *p = s; *p;) {
        char item[32];
        if (next_item(&p, item, sizeof item))
            return -EINVAL;
        char *colon = strchr(item, ':');
        if (!colon)
            return -EINVAL;
        *colon = 0;
        if (podrun_parse_int(item, 0, CFG_MAX_NPROC - 1, &v) || podrun_parse_int(colon + 1, 0, 3, &v))
            return -EINVAL;
    }
    return 0;
}

/* "0,2,...": each local rank below n (marked in mark[] when given). -EINVAL: not a list of
 * ranks; -ERANGE: *bad is not below n. */
static int parse_ranks(const char *s, int n, bool *mark, long *bad)
{
    if (!*s)
        return -EINVAL;
    for (const char *p = s; *p;) {
        char item[16];
        long v;
        if (next_item(&p, item, sizeof item) || podrun_parse_int(item, 0, CFG_MAX_NPROC - 1, &v))
            return -EINVAL;
        if (v >= n) {
            *bad = v;
            return -ERANGE;
        }
        if (mark)
            mark[v] = true;
    }
    return 0;
}

static int set_endpoint(struct cfg *c, const char *v)
{
    char host[256];
    int port;
    bool given;
    int r = podrun_hostport_parse(v, host, sizeof host, &port, &given);
    if (!r)
        r = set_str(&c->rdzv_host, host);
    if (r)
        return r;
    c->rdzv_port = port;
    c->rdzv_port_given = given;
    return 0;
}

/* --rdzv-conf k=v,k=v: each known key becomes its own value with the same source. */
static int set_rdzv_conf(struct cfg *c, const char *v, const struct cfg_src *src, char *err,
                         size_t errlen)
{
    char what[160];
    input_name(CFG_RDZV_CONF, src, v, what, sizeof what);
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char item[128];
        if (n >= sizeof item)
            return fail(err, errlen, "%s: entry too long; use KEY=VALUE,KEY=VALUE", what);
        memcpy(item, p, n);
        item[n] = 0;
        p += n;
        if (*p == ',')
            p++;
        if (n == 0)
            continue;
        char *eq = strchr(item, '=');
        if (!eq || eq == item)
            return fail(err, errlen, "%s: '%s' is not KEY=VALUE", what, item);
        *eq = 0;
        enum cfg_id id = CFG_RDZV_CONF_FIRST;
        while (id <= CFG_RDZV_CONF_LAST && strcmp(item, opts[id].name))
            id++;
        if (id > CFG_RDZV_CONF_LAST) {
            char known[256];
            size_t kl = 0;
            for (int k = CFG_RDZV_CONF_FIRST; k <= CFG_RDZV_CONF_LAST; k++)
                kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s",
                                       k == CFG_RDZV_CONF_FIRST ? "" : ", ", opts[k].name);
            return fail(err, errlen, "%s: unknown key '%s'; known keys: %s", what, item, known);
        }
        int r = cfg_set(c, id, eq + 1, src, err, errlen);
        if (r)
            return r;
    }
    c->src[CFG_RDZV_CONF] = *src;
    return 0;
}

int cfg_set(struct cfg *c, enum cfg_id id, const char *v, const struct cfg_src *src, char *err,
            size_t errlen)
{
    const struct opt_def *o = &opts[id];
    char *base = (char *)c;
    char what[160];
    long n;
    uint64_t ms;
    bool b;
    int r = 0;
    input_name(id, src, v, what, sizeof what);
    if (!v)
        return fail(err, errlen, "%s needs a value", o->name);
    if (is_rdzv_conf_key(id) && src->kind != CFG_SRC_DEFAULT)
        snprintf(what, sizeof what, "--rdzv-conf %s=%s", o->name, v);

    switch (o->type) {
    case T_NPROC:
        if (!strcmp(v, "auto")) c->nproc_kind = CFG_NPROC_AUTO;
        else if (!strcmp(v, "cpu")) c->nproc_kind = CFG_NPROC_CPU;
        else if (!strcmp(v, "gpu")) c->nproc_kind = CFG_NPROC_GPU;
        else if (podrun_parse_int(v, 1, CFG_MAX_NPROC, &n) == 0) {
            c->nproc_kind = CFG_NPROC_NUMBER;
            c->nproc_per_node = (int)n;
        } else
            return fail(err, errlen, "%s: expected a number of workers from 1 to %d, 'auto', "
                        "'cpu' or 'gpu'", what, CFG_MAX_NPROC);
        break;
    case T_NNODES: {
        long lo, hi;
        const char *colon = strchr(v, ':');
        if (colon) {
            char a[24];
            size_t al = (size_t)(colon - v);
            if (al >= sizeof a)
                return fail(err, errlen, "%s: expected N or MIN:MAX, e.g. 2:4", what);
            memcpy(a, v, al);
            a[al] = 0;
            if (podrun_parse_int(a, 1, 65536, &lo) || podrun_parse_int(colon + 1, 1, 65536, &hi))
                return fail(err, errlen, "%s: expected N or MIN:MAX with numbers from 1 to "
                            "65536, e.g. 2:4", what);
            if (lo > hi)
                return fail(err, errlen, "%s: MIN is larger than MAX; write MIN:MAX, e.g. %ld:%ld",
                            what, hi, lo);
        } else {
            if (podrun_parse_int(v, 1, 65536, &lo))
                return fail(err, errlen, "%s: expected N or MIN:MAX with numbers from 1 to "
                            "65536, e.g. 2:4", what);
            hi = lo;
        }
        c->nnodes_min = (int)lo;
        c->nnodes_max = (int)hi;
        break;
    }
    case T_INT:
    case T_PORT:
        if (podrun_parse_int(v, o->min, o->max, &n))
            return fail(err, errlen, "%s: expected a whole number from %ld to %ld", what, o->min,
                        o->max);
        *(int *)(base + o->off) = (int)n;
        break;
    case T_BACKEND:
        if (!strcmp(v, "static")) c->rdzv_backend = CFG_BACKEND_STATIC;
        else if (!strcmp(v, "c10d")) c->rdzv_backend = CFG_BACKEND_C10D;
        else
            return fail(err, errlen, "%s: unknown rendezvous backend; use 'c10d' or 'static'",
                        what);
        break;
    case T_ENDPOINT:
        r = set_endpoint(c, v);
        if (r == -EINVAL)
            return fail(err, errlen, "%s: expected HOST or HOST:PORT (port 0-65535), e.g. "
                        "node0:29400", what);
        break;
    case T_STR:
        if (!*v)
            return fail(err, errlen, "%s: must not be empty", what);
        r = set_str((char **)(base + o->off), v);
        break;
    case T_OPTSTR:
        if (!*v) {
            free(*(char **)(base + o->off));
            *(char **)(base + o->off) = NULL;
        } else {
            r = set_str((char **)(base + o->off), v);
        }
        break;
    case T_RDZV_CONF:
        return set_rdzv_conf(c, v, src, err, errlen);
    case T_BOOL:
        if (parse_bool(v, &b))
            return fail(err, errlen, "%s: expected 1/0, true/false or yes/no", what);
        *(bool *)(base + o->off) = b;
        break;
    case T_TRISTATE:
        if (parse_bool(v, &b))
            return fail(err, errlen, "%s: expected 1/0, true/false or yes/no", what);
        *(int *)(base + o->off) = b;
        break;
    case T_DUR:
        if (cfg_parse_duration(v, &ms))
            return fail(err, errlen, "%s: expected a duration such as 30, 2.5, 500ms, 10m or 1h "
                        "(bare numbers are seconds, at most 30 days)", what);
        *(uint64_t *)(base + o->off) = ms;
        break;
    case T_START:
        if (!strcmp(v, "spawn")) c->start_method = CFG_START_SPAWN;
        else if (!strcmp(v, "fork")) c->start_method = CFG_START_FORK;
        else if (!strcmp(v, "forkserver")) c->start_method = CFG_START_FORKSERVER;
        else
            return fail(err, errlen, "%s: use 'spawn', 'fork' or 'forkserver'", what);
        break;
    case T_STDSPEC:
        if (check_stdspec(v))
            return fail(err, errlen, "%s: expected N or LOCAL_RANK:N,... with N 0-3 "
                        "(1 stdout, 2 stderr, 3 both), e.g. 3 or 0:3,1:2", what);
        r = set_str((char **)(base + o->off), v);
        break;
    case T_RANKS:
        if (parse_ranks(v, CFG_MAX_NPROC, NULL, &(long){0}))
            return fail(err, errlen, "%s: expected local ranks separated by commas, e.g. 0,2",
                        what);
        r = set_str((char **)(base + o->off), v);
        break;
    }
    if (r == -ENOMEM)
        return fail(err, errlen, "out of memory");
    if (r)
        return fail(err, errlen, "%s: invalid value", what);
    c->src[id] = *src;
    return 0;
}

void cfg_init(struct cfg *c)
{
    memset(c, 0, sizeof *c);
    c->is_host = -1;
    struct cfg_src def = {CFG_SRC_DEFAULT, ""};
    for (int i = 0; i < CFG__COUNT; i++)
        if (opts[i].def)
            cfg_set(c, (enum cfg_id)i, opts[i].def, &def, NULL, 0);
}

void cfg_free(struct cfg *c)
{
    char **strs[] = {&c->rdzv_host, &c->rdzv_id, &c->master_addr, &c->local_addr, &c->role,
                     &c->python, &c->log_dir, &c->redirects, &c->tee, &c->local_ranks_filter,
                     &c->log_line_prefix, &c->termination_log};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    free(c->redirect_mask);
    free(c->tee_mask);
    free(c->console_rank);
    c->redirect_mask = c->tee_mask = NULL;
    c->console_rank = NULL;
}

/* "nproc-per-node" → "NPROC_PER_NODE" */
static void env_suffix(const char *name, char *buf, size_t len)
{
    size_t i = 0;
    for (; name[i] && i + 1 < len; i++)
        buf[i] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
    buf[i] = 0;
}

int cfg_load_env(struct cfg *c, char *const *envp, char *err, size_t errlen)
{
    for (int i = 0; i < CFG__COUNT; i++) {
        const struct opt_def *o = &opts[i];
        if (o->flags & F_NO_ENV)
            continue;
        char suffix[40];
        env_suffix(o->name, suffix, sizeof suffix);
        /* lowest first, so that PODRUN_ wins over PET_, which wins over the torch variable */
        struct cfg_src names[3];
        int nn = 0;
        if (o->extra_env)
            snprintf(names[nn++].name, sizeof names[0].name, "%s", o->extra_env);
        snprintf(names[nn++].name, sizeof names[0].name, "PET_%s", suffix);
        snprintf(names[nn++].name, sizeof names[0].name, "PODRUN_%s", suffix);
        for (int k = 0; k < nn; k++) {
            const char *v = env_get(envp, names[k].name);
            if (!v || !*v)
                continue;
            names[k].kind = CFG_SRC_ENV;
            int r = cfg_set(c, (enum cfg_id)i, v, &names[k], err, errlen);
            if (r)
                return r;
        }
    }
    return 0;
}

/* Finds the option for "--name" (dashes or underscores) or "-c". */
static int find_long(const char *name, size_t len)
{
    for (int i = 0; i < CFG__COUNT; i++) {
        const char *o = opts[i].name;
        if (opts[i].flags & F_NO_FLAG || strlen(o) != len)
            continue;
        size_t k = 0;
        for (; k < len; k++) {
            char a = name[k] == '_' ? '-' : name[k];
            if (a != o[k])
                break;
        }
        if (k == len)
            return i;
    }
    return -1;
}

static int find_short(char ch)
{
    for (int i = 0; i < CFG__COUNT; i++)
        if (opts[i].shortc && opts[i].shortc == ch)
            return i;
    return -1;
}

int cfg_parse_args(struct cfg *c, int argc, char **argv, char *err, size_t errlen)
{
    int i = 1;
    while (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        int id;
        const char *val = NULL;
        struct cfg_src s = {CFG_SRC_FLAG, ""};
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            id = find_long(name, len);
            snprintf(s.name, sizeof s.name, "--%.*s", (int)(len < 40 ? len : 40), name);
            if (id < 0)
                return fail(err, errlen, "unknown option '%.*s'; see podrun --help",
                            (int)(eq ? (size_t)(eq - a) : strlen(a)), a);
            if (eq)
                val = eq + 1;
        } else {
            id = find_short(a[1]);
            snprintf(s.name, sizeof s.name, "-%c", a[1]);
            if (id < 0)
                return fail(err, errlen, "unknown option '%s'; see podrun --help", a);
            if (a[2])
                val = a + 2;
        }
        i++;
        if (opts[id].type == T_BOOL) {
            if (!val)
                val = "1";
            else if (a[1] != '-')
                return fail(err, errlen, "option %s takes no value; write %s alone", s.name,
                            s.name);
        } else if (!val) {
            if (i >= argc)
                return fail(err, errlen, "option %s needs a value, e.g. %s %s", s.name, s.name,
                            opts[id].metavar ? opts[id].metavar : "VALUE");
            val = argv[i++];
        }
        int r = cfg_set(c, (enum cfg_id)id, val, &s, err, errlen);
        if (r)
            return r;
        if ((id == CFG_HELP && c->help) || (id == CFG_VERSION && c->version))
            return 0;
    }
    c->program = i < argc ? argv + i : NULL;
    c->program_argc = i < argc ? argc - i : 0;
    return 0;
}

static void derive(struct cfg *c, enum cfg_id id, const char *from)
{
    c->src[id].kind = CFG_SRC_DERIVED;
    snprintf(c->src[id].name, sizeof c->src[id].name, "%s", from);
}

/* Expands "N" or "LR:N,…" into one mask per local rank. */
static int expand_stdspec(const char *spec, int nproc, uint8_t *mask, const char *what, char *err,
                          size_t errlen)
{
    memset(mask, 0, (size_t)nproc);
    if (!spec)
        return 0;
    long v, lr;
    if (!strchr(spec, ':')) {
        podrun_parse_int(spec, 0, 3, &v);
        memset(mask, (int)v, (size_t)nproc);
        return 0;
    }
    const char *p = spec;
    while (*p) {
        char item[32];
        size_t n = strcspn(p, ",");
        memcpy(item, p, n);
        item[n] = 0;
        char *colon = strchr(item, ':');
        *colon = 0;
        podrun_parse_int(item, 0, CFG_MAX_NPROC - 1, &lr);
        podrun_parse_int(colon + 1, 0, 3, &v);
        if (lr >= nproc)
            return fail(err, errlen, "%s '%s': local rank %ld is not below --nproc-per-node %d",
                        what, spec, lr, nproc);
        mask[lr] = (uint8_t)v;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int cfg_finalize(struct cfg *c, int ncpus, int ngpus, char *err, size_t errlen)
{
    if (c->help || c->version)
        return 0;
    char what[160];
    switch (c->nproc_kind) {
    case CFG_NPROC_NUMBER:
        break;
    case CFG_NPROC_GPU:
        if (ngpus <= 0)
            return fail(err, errlen, "--nproc-per-node gpu: no GPU found on this node; give a "
                        "number of workers, 'cpu' or 'auto'");
        c->nproc_per_node = ngpus;
        break;
    case CFG_NPROC_CPU:
        c->nproc_per_node = ncpus;
        break;
    case CFG_NPROC_AUTO:
        c->nproc_per_node = ngpus > 0 ? ngpus : ncpus;
        break;
    }
    if (c->nproc_per_node < 1)
        c->nproc_per_node = 1;
    if (c->nproc_per_node > CFG_MAX_NPROC)
        c->nproc_per_node = CFG_MAX_NPROC;

    if (c->module && c->no_python)
        return fail(err, errlen, "--module and --no-python exclude each other: -m runs a python "
                    "module, --no-python runs PROGRAM directly; keep one");
    if (c->run_path && c->no_python)
        return fail(err, errlen, "--run-path and --no-python exclude each other; keep one");
    if (c->run_path && c->module)
        return fail(err, errlen, "--run-path and --module exclude each other; keep one");

    if (c->standalone) {
        if (c->src[CFG_NNODES].kind != CFG_SRC_DEFAULT && c->nnodes_max != 1)
            return fail(err, errlen, "--standalone runs one node, but --nnodes is %d:%d; drop "
                        "one of them", c->nnodes_min, c->nnodes_max);
        c->rdzv_backend = CFG_BACKEND_C10D;
        derive(c, CFG_RDZV_BACKEND, "--standalone");
        set_str(&c->rdzv_host, "localhost");
        c->rdzv_port = 0;
        derive(c, CFG_RDZV_ENDPOINT, "--standalone");
    }
    /* torchrun's static rendezvous waits for the other nodes as long as its store `timeout` */
    if (c->rdzv_backend == CFG_BACKEND_STATIC && c->src[CFG_STORE_TIMEOUT].kind != CFG_SRC_DEFAULT &&
        c->src[CFG_JOIN_TIMEOUT].kind == CFG_SRC_DEFAULT) {
        c->join_timeout_ms = c->store_timeout_ms;
        derive(c, CFG_JOIN_TIMEOUT, "rdzv-conf timeout");
    }
    if (c->node_rank >= c->nnodes_max) {
        cfg_src_describe(&c->src[CFG_NODE_RANK], what, sizeof what);
        return fail(err, errlen, "--node-rank %d (%s) must be below --nnodes %d", c->node_rank,
                    what, c->nnodes_max);
    }
    if (!c->rdzv_host) {
        if (c->rdzv_backend == CFG_BACKEND_STATIC) {
            if (set_str(&c->rdzv_host, c->master_addr))
                return fail(err, errlen, "out of memory");
            c->rdzv_port = c->master_port;
            derive(c, CFG_RDZV_ENDPOINT, "--master-addr/--master-port");
        } else if (c->nnodes_max > 1) {
            return fail(err, errlen, "--rdzv-backend c10d needs --rdzv-endpoint HOST[:PORT], the "
                        "address of the node that hosts the job store");
        } else {
            set_str(&c->rdzv_host, "localhost");
            derive(c, CFG_RDZV_ENDPOINT, "--rdzv-backend c10d");
        }
    }
    /* an explicit :0 is a free port that the hosting node binds, as torchrun does */
    if (c->rdzv_port == 0 && c->rdzv_backend == CFG_BACKEND_C10D && !c->standalone &&
        !c->rdzv_port_given)
        c->rdzv_port = CFG_DEFAULT_C10D_PORT;
    if (c->rdzv_port == 0 && c->rdzv_port_given && !c->standalone && c->nnodes_max > 1 &&
        (c->rdzv_backend == CFG_BACKEND_STATIC ? c->node_rank != 0 : c->is_host != 1))
        return fail(err, errlen, "--rdzv-endpoint %s:0 (a free port) works only on a single node "
                    "or the node that hosts the job store (%s); the other nodes cannot find the "
                    "port: give its number", c->rdzv_host,
                    c->rdzv_backend == CFG_BACKEND_STATIC ? "--node-rank 0"
                                                          : "--rdzv-conf is_host=1");

    int n = c->nproc_per_node;
    free(c->redirect_mask);
    free(c->tee_mask);
    free(c->console_rank);
    c->redirect_mask = calloc((size_t)n, 1);
    c->tee_mask = calloc((size_t)n, 1);
    c->console_rank = calloc((size_t)n, sizeof(bool));
    if (!c->redirect_mask || !c->tee_mask || !c->console_rank)
        return fail(err, errlen, "out of memory");
    int r = expand_stdspec(c->redirects, n, c->redirect_mask, "--redirects", err, errlen);
    if (!r)
        r = expand_stdspec(c->tee, n, c->tee_mask, "--tee", err, errlen);
    if (r)
        return r;
    long bad = 0;
    if (!c->local_ranks_filter) {
        for (int i = 0; i < n; i++)
            c->console_rank[i] = true;
    } else if (parse_ranks(c->local_ranks_filter, n, c->console_rank, &bad)) {
        return fail(err, errlen, "--local-ranks-filter '%s': local rank %ld is not below "
                    "--nproc-per-node %d", c->local_ranks_filter, bad, n);
    }
    if (!c->program && !c->print_config)
        return fail(err, errlen, "no program to run; usage: podrun [options] [--] PROGRAM "
                    "[ARGS...] (see podrun --help)");
    if (c->program && !c->program[0][0])
        return fail(err, errlen, "the program name is empty; usage: podrun [options] [--] "
                    "PROGRAM [ARGS...] (see podrun --help)");
    return 0;
}

static void format_value(const struct cfg *c, int id, char *buf, size_t len)
{
    const struct opt_def *o = &opts[id];
    const char *base = (const char *)c;
    switch (o->type) {
    case T_NPROC: {
        static const char *kind[] = {"", "auto", "cpu", "gpu"};
        if (c->nproc_kind == CFG_NPROC_NUMBER)
            snprintf(buf, len, "%d", c->nproc_per_node);
        else
            snprintf(buf, len, "%d (%s)", c->nproc_per_node, kind[c->nproc_kind]);
        break;
    }
    case T_NNODES:
        if (c->nnodes_min == c->nnodes_max)
            snprintf(buf, len, "%d", c->nnodes_min);
        else
            snprintf(buf, len, "%d:%d", c->nnodes_min, c->nnodes_max);
        break;
    case T_INT:
    case T_PORT:
        snprintf(buf, len, "%d", *(const int *)(base + o->off));
        break;
    case T_BACKEND:
        snprintf(buf, len, "%s", c->rdzv_backend == CFG_BACKEND_C10D ? "c10d" : "static");
        break;
    case T_ENDPOINT:
        if (!c->rdzv_host)
            snprintf(buf, len, "(none)");
        else
            podrun_hostport_format(c->rdzv_host, c->rdzv_port, buf, len);
        break;
    case T_STR:
    case T_OPTSTR:
    case T_STDSPEC:
    case T_RANKS: {
        const char *s = *(char *const *)(base + o->off);
        snprintf(buf, len, "%s", s ? s : "(none)");
        break;
    }
    case T_RDZV_CONF:
        snprintf(buf, len, "(see the keys below)");
        break;
    case T_BOOL:
        snprintf(buf, len, "%s", *(const bool *)(base + o->off) ? "true" : "false");
        break;
    case T_TRISTATE: {
        int v = *(const int *)(base + o->off);
        snprintf(buf, len, "%s", v < 0 ? "(from the endpoint)" : v ? "true" : "false");
        break;
    }
    case T_DUR: {
        uint64_t ms = *(const uint64_t *)(base + o->off);
        if (ms % 1000 == 0)
            snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
        else
            snprintf(buf, len, "%llums", (unsigned long long)ms);
        break;
    }
    case T_START: {
        static const char *m[] = {"spawn", "fork", "forkserver"};
        snprintf(buf, len, "%s", m[c->start_method]);
        break;
    }
    }
}

void cfg_print(const struct cfg *c, FILE *f)
{
    char val[512], src[96];
    for (int i = 0; i < CFG__COUNT; i++) {
        if (opts[i].flags & F_ACTION)
            continue;
        format_value(c, i, val, sizeof val);
        cfg_src_describe(&c->src[i], src, sizeof src);
        char name[48];
        if (is_rdzv_conf_key(i))
            snprintf(name, sizeof name, "rdzv-conf %s", opts[i].name);
        else
            snprintf(name, sizeof name, "%s", opts[i].name);
        const char *note = "";
        if (i == CFG_READ_TIMEOUT ||
            (i == CFG_STORE_TIMEOUT && c->src[CFG_JOIN_TIMEOUT].kind != CFG_SRC_DERIVED))
            note = "; accepted for torchrun compatibility, unused";
        else if (i == CFG_STORE_TIMEOUT)
            note = "; used as join_timeout";
        fprintf(f, "%-32s %-24s (%s%s)\n", name, val, src, note);
    }
    fprintf(f, "%-32s", "program");
    if (!c->program)
        fprintf(f, " (none)");
    for (int i = 0; i < c->program_argc; i++)
        fprintf(f, " %s", c->program[i]);
    fprintf(f, "\n");
}

void cfg_usage(FILE *f)
{
    fprintf(f,
            "usage: podrun [options] [--] PROGRAM [ARGS...]\n"
            "       podrun store [options]\n"
            "\n"
            "Starts --nproc-per-node workers running PROGRAM, each in its own process group with\n"
            "torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), prefixes\n"
            "their output with [rank N]:, forwards signals, reaps every child as PID 1, and exits\n"
            "with the first failing worker's code. A PROGRAM ending in .py, or given with -m, runs\n"
            "under --python -u.\n\n"
            "options (also settable as PODRUN_<NAME> or PET_<NAME>, e.g. PODRUN_NPROC_PER_NODE;\n"
            "--dash-names and --underscore_names both work):\n");
    for (int i = 0; i < CFG__COUNT; i++) {
        const struct opt_def *o = &opts[i];
        if (o->flags & F_NO_FLAG)
            continue;
        char flag[64];
        if (o->shortc)
            snprintf(flag, sizeof flag, "-%c, --%s%s%s", o->shortc, o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        else
            snprintf(flag, sizeof flag, "    --%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        fprintf(f, "  %-36s %s", flag, o->help);
        if (o->def && o->type != T_BOOL)
            fprintf(f, " [%s]", o->def);
        fprintf(f, "\n");
    }
    fprintf(f, "\nexit status: 0 when every worker of the job succeeded; on the node whose worker\n"
               "failed first, that worker's code (128+N for a death by signal N; 127 program not\n"
               "found; 126 not executable) once restarts are used up; 128+N when podrun itself\n"
               "was stopped by signal N; 2 for a usage error; 1 when podrun could not start the\n"
               "job (the store port taken, a spawn failure, a node rejected or too late); on\n"
               "every other node the --exit-code-* value for the reason it was stopped (170 peer\n"
               "failure, 171 peer lost, 172 store lost, 173 rendezvous timeout, 174 hang).\n");
}
