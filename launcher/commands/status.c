/* launcher/commands/status.c — `podrun status HOST[:PORT]`: how a running job is doing, read from
 * its job store by anyone who can reach it (an etcd job: from etcd, --rdzv-backend etcd).
 * Read-only: it connects, checks and gets the keys the coordinator publishes (rdzv/status.h)
 * and writes nothing.
 *
 * Exit status: 0 the job is running, forming or finished; 1 it ended without finishing (a
 * failure with no restarts left, a rendezvous timeout); 2 usage; 3 no job store answers there, or
 * it hosts no podrun job (the job has ended, or not started). */
#include "launcher/commands/commands.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include "launcher/output/jsonline.h"
#include "podrun/store.h"
#include "rdzv/store/auth.h"
#include "rdzv/base/common.h"
#include "rdzv/records.h"
#include "rdzv/badnodes.h"
#include "rdzv/etcd/client.h"
#include "rdzv/status.h"

#define STATUS_NODES_MAX 65536   /* nodes listed; a bigger job is counted, not listed */
#define STATUS_DEFAULT_PORT 29400

static const char usage[] =
    "usage: podrun status [--rdzv-id ID] [--json] [--watch [SECONDS]] [--timeout S]\n"
    "                     [--rdzv-token-file FILE] HOST[:PORT]\n"
    "       podrun status --rdzv-backend etcd --rdzv-endpoint ENDPOINTS --rdzv-id ID [...]\n"
    "\n"
    "How a running job is doing, read from its job store (any agent's --rdzv-endpoint; port\n"
    "29400 when left out), or from etcd for an etcd job: the round, each node with its node\n"
    "rank, global ranks, address, last heartbeat and last health check (ok, or what it found),\n"
    "the restarts used, and the last failure's root cause. It only reads.\n"
    "\n"
    "  --rdzv-id ID        the job, when the store hosts several (default: every one)\n"
    "  --rdzv-backend B    c10d or static (the default: a job store), or etcd\n"
    "  --rdzv-endpoint E   the agents' --rdzv-endpoint: HOST[:PORT] instead of the address,\n"
    "                      or etcd's members (HOST:2379,... or URLs)\n"
    "  --etcd-cacert FILE  etcd's TLS, as the agents were given it: the CA's certificate,\n"
    "  --etcd-cert FILE    this client's certificate\n"
    "  --etcd-key FILE     and its key\n"
    "  --json              one JSON object per job instead of text\n"
    "  --watch [SECONDS]   show it again every SECONDS (default 2) until the store is gone\n"
    "  --timeout S         seconds to wait for the store and its answers (default 5)\n"
    "  --rdzv-token-file FILE  the job's token, when its agents have one (also\n"
    "                      PODRUN_RDZV_TOKEN_FILE, or the token in PODRUN_RDZV_TOKEN)\n"
    "\n"
    "exit status: 0 the job runs, is forming or finished; 1 it ended without finishing; 2 usage;\n"
    "3 no job store (or etcd) answers there, or it holds no such podrun job.\n";

enum { ST_OK = 0, ST_ENDED = 1, ST_USAGE = 2, ST_GONE = 3 };

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "podrun status: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see podrun status --help)\n");
    return ST_USAGE;
}

struct opts {
    const char *run_id;
    int json;
    double watch;            /* 0: once */
    int timeout_ms;
    char host[256];
    int port;
    char addr[300];          /* HOST:PORT as shown */
    const char *token_file, *token;  /* the job's token, when it has one */
    const char *etcd;        /* etcd's members (--rdzv-backend etcd), else NULL: a job store */
    const char *cacert, *cert, *key;  /* etcd's TLS (PEM files), as the agents' */
};

/* "1.5s", "800ms", "3m" or "2" (seconds) for the watch interval. */
static int parse_seconds(const char *s, double *out)
{
    if (!s) /* an option without its value */
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double scale = !strcmp(end, "ms") ? 0.001 : !strcmp(end, "m") ? 60 : 1;
    if (errno || end == s || (*end && strcmp(end, "s") && strcmp(end, "ms") && strcmp(end, "m")) ||
        !(v * scale >= 0.1 && v * scale <= 3600))
        return -1;
    *out = v * scale;
    return 0;
}

/* ---- the text a person reads ------------------------------------------------------------- */

/* Seconds with a tenth under a minute (heartbeats are a second apart), else podrun's usual. */
static void fmt_age(double seconds, char *buf, size_t cap)
{
    if (seconds < 0)
        seconds = 0;
    if (seconds < 60)
        snprintf(buf, cap, "%.1fs", seconds);
    else
        podrun_format_duration(seconds, buf, cap);
}

static const char *phase_word(const rdzv_status_t *s)
{
    if (s->phase == RDZV_JOB_RUNNING)
        return "running";
    if (s->phase == RDZV_JOB_OPEN)
        return s->round > 0 ? "restarting (rendezvous)" : "forming (rendezvous)";
    if (!strcmp(s->over, "finished"))
        return "finished";
    return "ended";
}

/* How long ago `t` (host clock) was, seen from the record's own time, plus how old the record
 * is by this machine's clock (0 when the clocks disagree the other way). */
static double age_of(const rdzv_status_t *s, double t, double now)
{
    double rec_age = now - s->time;
    return (s->time - t) + (rec_age > 0 ? rec_age : 0);
}

/* A node's health-check column: "ok, 1.2s ago", "FAILED, 0.3s ago" (its finding on a line of
 * its own), "off", "nothing to check", "no check yet", or "-" when its agent said nothing. */
static void health_word(const rdzv_status_t *s, const rdzv_health_t *h, double now, char *buf,
                        size_t cap)
{
    char ago[32];
    fmt_age(age_of(s, h->checked, now), ago, sizeof ago);
    switch (h->state) {
    case RDZV_HEALTH_OFF:
        snprintf(buf, cap, "off");
        break;
    case RDZV_HEALTH_IDLE:
        snprintf(buf, cap, "nothing to check");
        break;
    case RDZV_HEALTH_WAITING:
        snprintf(buf, cap, "no check yet");
        break;
    case RDZV_HEALTH_OK:
    case RDZV_HEALTH_FAILED:
        snprintf(buf, cap, "%s, %s ago", h->state == RDZV_HEALTH_OK ? "ok" : "FAILED", ago);
        break;
    default:
        snprintf(buf, cap, "-");
    }
}

static void print_failure(const rdzv_status_t *s, double now)
{
    if (s->failure_round < 0) {
        printf("last failure: none\n");
        return;
    }
    const rdzv_failure_t *f = &s->failure;
    char ago[32];
    fmt_age(age_of(s, f->time, now), ago, sizeof ago);
    printf("last failure: round %d, %s ago: ", s->failure_round, ago);
    if (f->rank >= 0)
        printf("rank %d (local rank %d) on %s (%s, node rank %d): %s", f->rank, f->local_rank,
               f->node_name, f->host, f->node_rank, f->reason);
    else
        printf("%s (%s): %s", f->node_name, f->host, f->reason);
    printf("; the job %s\n", s->failure_action == RDZV_RESTART ? "restarted in place" : "ended");
    if (f->message[0]) {
        /* the worker's own words, indented, one line of them at a time */
        const char *p = f->message;
        while (*p) {
            const char *nl = strchr(p, '\n');
            int n = nl ? (int)(nl - p) : (int)strlen(p);
            printf("  | %.*s\n", n, p);
            p += n + (nl != NULL);
        }
    }
}

/* The nodes the job remembers for their failures (rdzv/badnodes.h), worst first; the bad ones
 * (--max-node-failures reached, or asked) say so. */
static void print_bad(const rdzv_status_t *s)
{
    for (int i = 0; i < s->n_bad; i++) {
        char line[RDZV_NAME_MAX + 160];
        const rdzv_badnode_t *b = &s->bad[i];
        badnodes_describe(b, line, sizeof line);
        printf("%s%s%s\n", i ? "                  " : "failures by node: ", line,
               !badnodes_is_bad(b, s->max_node_failures) ? ""
               : b->out                                  ? ": a bad node"
                                                         : ": a bad node the job cannot do without");
    }
}

static void print_text(const struct opts *o, const rdzv_status_t *s, double now)
{
    char since[32], rec[32];
    fmt_age(age_of(s, s->round_since, now), since, sizeof since);
    fmt_age(now - s->time, rec, sizeof rec);
    printf("job '%s' at %s: %s, round %d for %s; restarts used %d of %d", s->run_id, o->addr,
           phase_word(s), s->round, since, s->restarts_used, s->max_restarts);
    if (s->phase == RDZV_JOB_RUNNING)
        printf("; %d node%s, world size %d", s->n_total, s->n_total == 1 ? "" : "s",
               s->world_size);
    printf(" (as of %s ago)\n", rec);
    if (s->line[0])
        printf("  %s\n", s->line);
    if (s->n_nodes) {
        printf("  %-9s %-11s %-7s %-20s %-24s %-9s %-14s %s\n", "node rank", "ranks",
               "workers", "node", "address", "state", "last heartbeat", "health check");
        for (int i = 0; i < s->n_nodes; i++) {
            const rdzv_status_node_t *n = &s->nodes[i];
            char rank[16] = "-", ranks[32] = "-", hb[32];
            if (n->node_rank >= 0) {
                snprintf(rank, sizeof rank, "%d", n->node_rank);
                snprintf(ranks, sizeof ranks, "%d-%d", n->rank_base, n->rank_base + n->nproc - 1);
            }
            fmt_age(age_of(s, n->last_seen, now), hb, sizeof hb);
            char hc[64], hb_ago[40];
            health_word(s, &n->health, now, hc, sizeof hc);
            snprintf(hb_ago, sizeof hb_ago, "%s ago", hb);
            printf("  %-9s %-11s %-7d %-20s %-24s %-9s %-14s %s\n", rank, ranks, n->nproc,
                   n->name, n->addr, rdzv_node_phase_names[n->phase], hb_ago, hc);
            if (n->health.state == RDZV_HEALTH_FAILED)
                printf("      health check on %s: %s\n", n->name, n->health.why);
        }
        if (s->n_total > s->n_nodes)
            printf("  ... and %d more nodes\n", s->n_total - s->n_nodes);
    }
    print_failure(s, now);
    print_bad(s);
}

/* ---- the same as JSON ------------------------------------------------------------------- */

/* ,"health_check":{state, interval, last_check, why}, or null when the node's agent said
 * nothing; last_check is null before the first check. */
static void json_health(struct jsonbuf *b, const rdzv_health_t *h)
{
    if (h->state <= RDZV_HEALTH_NONE || h->state >= RDZV_HEALTH__COUNT) {
        jsonline_raw(b, ",\"health_check\":null");
        return;
    }
    jsonline_raw(b, ",\"health_check\":");
    jsonline_field(b, 1, "state", rdzv_health_names[h->state]);
    jsonline_field_num(b, 0, "interval", h->interval);
    if (h->checked > 0)
        jsonline_field_num(b, 0, "last_check", h->checked);
    else
        jsonline_raw(b, ",\"last_check\":null");
    jsonline_field(b, 0, "why", h->why);
    jsonline_raw(b, "}");
}

static void print_json(const struct opts *o, const rdzv_status_t *s)
{
    struct jsonbuf b;
    jsonline_init(&b);
    jsonline_field(&b, 1, "run_id", s->run_id);
    jsonline_field(&b, 0, "store", o->addr);
    jsonline_field(&b, 0, "phase",
                   s->phase == RDZV_JOB_RUNNING ? "running"
                   : s->phase == RDZV_JOB_OPEN  ? "rendezvous"
                                               : (!strcmp(s->over, "finished") ? "finished"
                                                                                : "ended"));
    jsonline_field_num(&b, 0, "round", s->round);
    jsonline_field_num(&b, 0, "round_since", s->round_since);
    jsonline_field_num(&b, 0, "time", s->time);
    jsonline_field_num(&b, 0, "restarts_used", s->restarts_used);
    jsonline_field_num(&b, 0, "max_restarts", s->max_restarts);
    jsonline_field_num(&b, 0, "min_nodes", s->min_nodes);
    jsonline_field_num(&b, 0, "max_nodes", s->max_nodes);
    jsonline_field_num(&b, 0, "nodes_total", s->n_total);
    jsonline_field_num(&b, 0, "world_size", s->world_size);
    jsonline_field(&b, 0, "line", s->line);
    jsonline_raw(&b, ",\"nodes\":[");
    for (int i = 0; i < s->n_nodes; i++) {
        const rdzv_status_node_t *n = &s->nodes[i];
        if (i)
            jsonline_raw(&b, ",");
        jsonline_field(&b, 1, "name", n->name);
        jsonline_field(&b, 0, "addr", n->addr);
        jsonline_field(&b, 0, "state", rdzv_node_phase_names[n->phase]);
        jsonline_field_num(&b, 0, "node_rank", n->node_rank);
        jsonline_field_num(&b, 0, "rank_base", n->rank_base);
        jsonline_field_num(&b, 0, "nproc", n->nproc);
        jsonline_field_num(&b, 0, "last_heartbeat", n->last_seen);
        json_health(&b, &n->health);
        jsonline_raw(&b, "}");
    }
    jsonline_raw(&b, "],\"last_failure\":");
    if (s->failure_round < 0) {
        jsonline_raw(&b, "null");
    } else {
        const rdzv_failure_t *f = &s->failure;
        jsonline_field_num(&b, 1, "round", s->failure_round);
        jsonline_field(&b, 0, "then", s->failure_action == RDZV_RESTART ? "restarted" : "ended");
        jsonline_field_num(&b, 0, "time", f->time);
        jsonline_field(&b, 0, "node", f->node_name);
        jsonline_field(&b, 0, "host", f->host);
        jsonline_field_num(&b, 0, "node_rank", f->node_rank);
        jsonline_field_num(&b, 0, "rank", f->rank);
        jsonline_field_num(&b, 0, "local_rank", f->local_rank);
        jsonline_field_num(&b, 0, "exit_code", f->exit_code);
        jsonline_field_num(&b, 0, "signal", f->signo);
        jsonline_field(&b, 0, "reason", f->reason);
        jsonline_field(&b, 0, "message", f->message);
        jsonline_raw(&b, "}");
    }
    jsonline_raw(&b, ",\"bad_nodes\":[");
    for (int i = 0; i < s->n_bad; i++) {
        const rdzv_badnode_t *x = &s->bad[i];
        if (i)
            jsonline_raw(&b, ",");
        jsonline_field(&b, 1, "name", x->name);
        jsonline_field_num(&b, 0, "caused", x->caused);
        jsonline_field_num(&b, 0, "failed_checks", x->checks);
        jsonline_field_num(&b, 0, "asked", x->asked);
        jsonline_field_num(&b, 0, "left_out", x->out);
        jsonline_field_num(&b, 0, "bad", badnodes_is_bad(x, s->max_node_failures));
        jsonline_raw(&b, "}");
    }
    jsonline_raw(&b, "]}\n");
    if (!b.oom)
        fputs(b.buf, stdout);
    jsonline_free(&b);
}

/* ---- reading the store ------------------------------------------------------------------ */

/* GET of a key that must exist: CHECK first, since a TCPStore GET of a missing key is not an
 * error on every server. 1 with *val (malloc'ed), 0 when the key is not there, < 0 on errors. */
static int get_existing(podrun_store_t *st, const char *key, char **val, size_t *len)
{
    const char *keys[] = {key};
    int r = podrun_store_check(st, keys, 1);
    if (r <= 0)
        return r;
    r = podrun_store_get(st, key, val, len);
    return r < 0 ? r : 1;
}

/* One look at every job the store hosts (or the one named): printed, and the exit status of
 * what was seen. */
static int look(const struct opts *o, podrun_store_t *st, rdzv_status_node_t *nodes, int first)
{
    char *runs = NULL;
    size_t rlen = 0;
    int r = get_existing(st, RDZV_RUNS_KEY, &runs, &rlen);
    if (r <= 0) {
        if (r == 0)
            fprintf(stderr, "podrun status: %s is a job store without a podrun job (no %s key): "
                    "point at an agent's --rdzv-endpoint\n", o->addr, RDZV_RUNS_KEY);
        else if (first && !o->token_file && !o->token) {
            /* a store that holds a token closes a connection that reads podrun's keys
             * without it */
            fprintf(stderr, "podrun status: the job store at %s closed the connection when asked "
                    "for the job's keys: the job has a token; give it with --rdzv-token-file "
                    "(or PODRUN_RDZV_TOKEN)\n", o->addr);
            return ST_USAGE;
        } else
            fprintf(stderr, "podrun status: %s: %s\n", o->addr, podrun_store_strerror(r));
        return r == 0 ? ST_GONE : -1;
    }
    int worst = ST_OK, shown = 0;
    double now = podrun_time_epoch();
    for (char *id = runs, *nl; id < runs + rlen && *id; id = nl + 1) {
        nl = memchr(id, '\n', (size_t)(runs + rlen - id));
        if (!nl)
            nl = runs + rlen;
        *nl = '\0';
        if (!*id || (o->run_id && strcmp(o->run_id, id) != 0))
            continue;
        char key[RDZV_RUN_ID_MAX + 32], *text = NULL;
        size_t tlen = 0;
        if (rdzv_run_prefix(key, sizeof key, id) < 0)
            continue;   /* not a run id podrun writes */
        strcat(key, RDZV_STATUS_KEY);
        r = get_existing(st, key, &text, &tlen);
        rdzv_status_t s;
        if (r < 0) {
            free(runs);
            fprintf(stderr, "podrun status: %s: %s\n", o->addr, podrun_store_strerror(r));
            return -1;
        }
        if (r == 0 || rdzv_status_decode(text, tlen, &s, nodes, STATUS_NODES_MAX) < 0) {
            printf("job '%s' at %s: no state published yet\n", id, o->addr);
            free(text);
            shown++;
            continue;
        }
        free(text);
        if (o->json)
            print_json(o, &s);
        else
            print_text(o, &s, now);
        shown++;
        if (s.phase == RDZV_JOB_OVER && strcmp(s.over, "finished") != 0)
            worst = ST_ENDED;
    }
    free(runs);
    if (!shown) {
        fprintf(stderr, "podrun status: %s hosts no job '%s'\n", o->addr,
                o->run_id ? o->run_id : "");
        return ST_GONE;
    }
    fflush(stdout);
    return worst;
}

/* The token's bytes from its file or variable into key; 0, or -1 with the line said. */
static int load_token(const struct opts *o, auth_key_t *key)
{
    char buf[AUTH_TOKEN_MAX + 256], err[256];
    size_t len = 0;
    const char *what = "PODRUN_RDZV_TOKEN";
    if (o->token_file) {
        int fd = open(o->token_file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "podrun status: --rdzv-token-file %s: %s\n", o->token_file,
                    strerror(errno));
            return -1;
        }
        ssize_t n;
        while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) > 0)
            len += (size_t)n;
        close(fd);
        what = o->token_file;
    } else {
        len = strlen(o->token) < sizeof buf ? strlen(o->token) : sizeof buf;
        memcpy(buf, o->token, len);
    }
    if (auth_key_from_token(buf, len, what, key, err, sizeof err) < 0) {
        fprintf(stderr, "podrun status: %s\n", err);
        return -1;
    }
    return 0;
}

/* The token handshake (rdzv/store/auth.h) as two GETs on this connection, so that a job whose
 * agents hold a token lets this reader see its keys. 0, or -1 with the line said. */
static int authenticate(const struct opts *o, podrun_store_t *st)
{
    auth_key_t key;
    uint8_t nc[AUTH_NONCE_LEN];
    char k1[AUTH_KEY_MAX], k2[AUTH_KEY_MAX], *rep = NULL;
    size_t rlen = 0;
    if (load_token(o, &key) < 0)
        return -1;
    if (getrandom(nc, sizeof nc, 0) != (ssize_t)sizeof nc) {
        fprintf(stderr, "podrun status: no random bytes for the token handshake\n");
        return -1;
    }
    auth_client_hello(nc, k1, sizeof k1);
    int r = podrun_store_get(st, k1, &rep, &rlen);
    if (r == 0)
        r = auth_client_prove(&key, nc, rep, rlen, k2, sizeof k2);
    free(rep);
    rep = NULL;
    if (r == AUTH_OPEN) {
        fprintf(stderr, "podrun status: the job store at %s asks for no token: leave out "
                "--rdzv-token-file\n", o->addr);
        return -1;
    }
    if (r == 0 && (r = podrun_store_get(st, k2, &rep, &rlen)) == 0 &&
        !auth_client_accepted(rep, rlen))
        r = -EACCES;
    free(rep);
    if (r < 0) {
        fprintf(stderr, "podrun status: the job store at %s did not take this token (%s): give "
                "the job's own\n", o->addr, r == -EACCES ? "a different token" :
                podrun_store_strerror(r));
        return -1;
    }
    return 0;
}

static int connect_store(const struct opts *o, podrun_store_t **st)
{
    int r = podrun_store_connect(o->host, (uint16_t)o->port, o->timeout_ms, st);
    if (r < 0) {
        fprintf(stderr, "podrun status: no job store answers at %s (%s): the job has ended or "
                "has not started\n", o->addr, podrun_store_strerror(r));
        return r;
    }
    if ((o->token_file || o->token) && authenticate(o, *st) < 0)
        return -1;
    return 0;
}

/* ---- reading etcd ------------------------------------------------------------------------ */

struct etcd_read {
    int done, status;
    char *val;   /* the record, NULL when the key is not there */
    size_t len;
    char err[256];
};

static void on_etcd_read(void *arg, int status, const etcd_resp_t *r)
{
    struct etcd_read *e = arg;
    e->done = 1;
    e->status = status;
    if (status != 0)
        snprintf(e->err, sizeof e->err, "%s", r->error[0] ? r->error : "no answer");
    else if (r->n > 0 && (e->val = malloc(r->kvs[0].vlen + 1))) {
        memcpy(e->val, r->kvs[0].value, r->kvs[0].vlen);
        e->val[r->kvs[0].vlen] = '\0';
        e->len = r->kvs[0].vlen;
    }
}

/* One look at the job's record in etcd (P RDZV_ETCD_STATUS_KEY, which its leading agent
 * writes): printed, and the exit status of what was seen; -1 when etcd did not answer. */
static int look_etcd(const struct opts *o, uv_loop_t *loop, etcd_client_t *ec,
                     rdzv_status_node_t *nodes)
{
    char key[RDZV_NAME_MAX + 32];
    snprintf(key, sizeof key, "podrun/%s/%s", o->run_id, RDZV_ETCD_STATUS_KEY);
    etcd_op_t op = {ETCD_OP_RANGE, key, strlen(key), NULL, 0, NULL, 0, 0};
    struct etcd_read e = {0};
    int r = etcd_call(ec, "kv/range", etcd_req_op(&op), ETCD_CALL_ONCE, on_etcd_read, &e, NULL);
    if (r < 0) {
        fprintf(stderr, "podrun status: cannot ask etcd at %s: %s\n", o->etcd, podrun_strerror(r));
        return -1;
    }
    while (!e.done && uv_run(loop, UV_RUN_ONCE))
        ;
    if (e.status != 0) {
        fprintf(stderr, "podrun status: no etcd answers at %s (%s)\n", o->etcd, e.err);
        return -1;
    }
    rdzv_status_t s;
    if (!e.val) {
        fprintf(stderr, "podrun status: etcd at %s holds no job '%s' (no key %s): it has ended, "
                "has not started, or runs under another --rdzv-id\n", o->etcd, o->run_id, key);
        return ST_GONE;
    }
    r = rdzv_status_decode(e.val, e.len, &s, nodes, STATUS_NODES_MAX);
    free(e.val);
    if (r < 0) {
        printf("job '%s' at %s: no state published yet\n", o->run_id, o->addr);
        return ST_OK;
    }
    if (o->json)
        print_json(o, &s);
    else
        print_text(o, &s, podrun_time_epoch());
    fflush(stdout);
    return s.phase == RDZV_JOB_OVER && strcmp(s.over, "finished") != 0 ? ST_ENDED : ST_OK;
}

/* --watch's pause between two looks. */
static void pause_for(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

static int run_etcd(const struct opts *o, rdzv_status_node_t *nodes)
{
    etcd_endpoint_t ep[ETCD_MAX_ENDPOINTS];
    char err[256];
    int n = etcd_endpoints_parse(o->etcd, o->cacert || o->cert, ep, ETCD_MAX_ENDPOINTS, err,
                                 sizeof err);
    uv_loop_t loop;
    etcd_client_t *ec = NULL;
    if (n < 0 || uv_loop_init(&loop) < 0)
        return ST_USAGE;   /* checked by the caller: not reached */
    etcd_client_conf_t conf = {.endpoints = ep, .n_endpoints = n, .cacert = o->cacert,
                               .cert = o->cert, .key = o->key, .timeout_ms = o->timeout_ms};
    int rc = etcd_client_new(&loop, &conf, &ec);
    if (rc < 0) {
        fprintf(stderr, "podrun status: cannot talk to etcd at %s: %s\n", o->etcd,
                podrun_strerror(rc));
        rc = ST_GONE;
    }
    for (int first = 1; ec; first = 0) {
        if (!first && !o->json)
            printf("\n");
        rc = look_etcd(o, &loop, ec, nodes);
        if (rc < 0) {   /* etcd did not answer */
            rc = ST_GONE;
            break;
        }
        if (!o->watch || rc == ST_GONE)
            break;
        pause_for(o->watch);
    }
    if (ec)
        etcd_client_close(ec);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
}

static int run(const struct opts *o)
{
    rdzv_status_node_t *nodes = malloc(STATUS_NODES_MAX * sizeof *nodes);
    if (!nodes) {
        fprintf(stderr, "podrun status: out of memory\n");
        return 1;
    }
    podrun_store_t *st = NULL;
    int rc = ST_GONE;
    if (o->etcd) {
        rc = run_etcd(o, nodes);
        goto out;
    }
    if (connect_store(o, &st) < 0)
        goto out;
    for (int first = 1;; first = 0) {
        if (!first && !o->json)
            printf("\n");
        rc = look(o, st, nodes, first);
        if (rc < 0) {   /* the store went away between two looks: the job has ended */
            fprintf(stderr, "podrun status: the job store at %s is gone: the job has ended "
                    "(each agent's exit code and /dev/termination-log say how)\n", o->addr);
            rc = ST_GONE;
            break;
        }
        if (!o->watch || rc == ST_GONE)
            break;
        pause_for(o->watch);
    }
out:
    if (st)
        podrun_store_close(st);
    free(nodes);
    return rc;
}

/* --rdzv-backend etcd: etcd's members from --rdzv-endpoint, and the job by its id (etcd holds
 * any number of jobs, none listed). Then the look. */
static int etcd_opts(struct opts *o, const char *endpoint, int nargs)
{
    etcd_endpoint_t ep[ETCD_MAX_ENDPOINTS];
    char err[256];
    if (nargs)
        return usage_error("%s", "with --rdzv-backend etcd, give etcd's members as "
                           "--rdzv-endpoint, not as an address");
    if (!endpoint)
        return usage_error("%s", "--rdzv-backend etcd needs --rdzv-endpoint: etcd's members "
                           "(HOST:2379,... or URLs), as the agents were given");
    if (!o->run_id)
        return usage_error("%s", "--rdzv-backend etcd needs --rdzv-id: the job's id, as the "
                           "agents were given");
    if (etcd_endpoints_parse(endpoint, o->cacert || o->cert, ep, ETCD_MAX_ENDPOINTS, err,
                             sizeof err) < 0)
        return usage_error("--rdzv-endpoint: %s", err);
    o->etcd = endpoint;
    snprintf(o->addr, sizeof o->addr, "etcd %s", endpoint);
    return run(o);
}

int commands_status_main(int argc, char **argv)
{
    enum { O_ID = 256, O_JSON, O_WATCH, O_TIMEOUT, O_HELP, O_TOKEN, O_BACKEND, O_ENDPOINT,
           O_CACERT, O_CERT, O_KEY };
    static const struct option lopts[] = {
        {"rdzv-id", required_argument, 0, O_ID}, {"rdzv_id", required_argument, 0, O_ID},
        {"json", no_argument, 0, O_JSON},         {"watch", optional_argument, 0, O_WATCH},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"help", no_argument, 0, O_HELP},
        {"rdzv-token-file", required_argument, 0, O_TOKEN},
        {"rdzv_token_file", required_argument, 0, O_TOKEN},
        {"rdzv-backend", required_argument, 0, O_BACKEND},
        {"rdzv_backend", required_argument, 0, O_BACKEND},
        {"rdzv-endpoint", required_argument, 0, O_ENDPOINT},
        {"rdzv_endpoint", required_argument, 0, O_ENDPOINT},
        {"etcd-cacert", required_argument, 0, O_CACERT},
        {"etcd-cert", required_argument, 0, O_CERT},
        {"etcd-key", required_argument, 0, O_KEY},
        {0, 0, 0, 0},
    };
    const char *backend = "c10d", *endpoint = NULL;
    struct opts o = {.timeout_ms = 5000};
    /* the agents' own variables, so that a pod's environment works as it is */
    const char *tf = getenv("PODRUN_RDZV_TOKEN_FILE"), *tv = getenv("PODRUN_RDZV_TOKEN");
    o.token_file = tf && *tf ? tf : NULL;
    o.token = tv && *tv ? tv : NULL;
    optind = 1;
    opterr = 0;
    int c;
    double t;
    while ((c = getopt_long(argc, argv, "+:hw", lopts, NULL)) != -1) {
        switch (c) {
        case O_ID:
            if (!optarg || !*optarg)
                return usage_error("--rdzv-id needs a job id%s", "");
            o.run_id = optarg;
            break;
        case O_JSON:
            o.json = 1;
            break;
        case 'w':
        case O_WATCH:
            o.watch = 2;
            /* "--watch 5" as well as "--watch=5": a following number is the interval */
            if (!optarg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9' &&
                optind + 1 < argc)
                optarg = argv[optind++];
            if (optarg && parse_seconds(optarg, &o.watch) < 0)
                return usage_error("--watch '%s': expected seconds from 0.1 to 3600", optarg);
            break;
        case O_TIMEOUT:
            if (parse_seconds(optarg, &t) < 0)
                return usage_error("--timeout '%s': expected seconds from 0.1 to 3600", optarg);
            o.timeout_ms = (int)(t * 1000);
            break;
        case O_TOKEN:
            o.token_file = optarg;
            break;
        case O_BACKEND:
            backend = optarg ? optarg : "";   /* required_argument: never NULL */
            if (strcmp(backend, "c10d") && strcmp(backend, "static") &&
                strcmp(backend, "etcd") && strcmp(backend, "etcd-v2"))
                return usage_error("--rdzv-backend '%s': expected c10d, static or etcd", backend);
            break;
        case O_ENDPOINT:
            endpoint = optarg;
            break;
        case O_CACERT:
            o.cacert = optarg;
            break;
        case O_CERT:
            o.cert = optarg;
            break;
        case O_KEY:
            o.key = optarg;
            break;
        case 'h':
        case O_HELP:
            fputs(usage, stdout);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!strncmp(backend, "etcd", 4))
        return etcd_opts(&o, endpoint, argc - optind);
    if (optind != argc - (endpoint ? 0 : 1))
        return usage_error("%s", optind >= argc ? "give the job store's address HOST[:PORT]"
                                                : "give exactly one address HOST[:PORT]");
    const char *where = endpoint ? endpoint : argv[optind];
    bool has_port;
    if (podrun_hostport_parse(where, o.host, sizeof o.host, &o.port, &has_port) < 0)
        return usage_error("'%s' is not an address HOST[:PORT]", where);
    if (!has_port)
        o.port = STATUS_DEFAULT_PORT;
    if (o.port == 0)
        return usage_error("'%s': port 0 is no job store's port", where);
    podrun_hostport_format(o.host, o.port, o.addr, sizeof o.addr);
    return run(&o);
}
