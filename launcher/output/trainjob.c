/* launcher/output/trainjob.c — the job's state to Kubeflow Trainer's status server (see the
 * header). One request at most in flight: what changes meanwhile is folded into the next. */
#include "launcher/output/trainjob.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/base/common.h"
#include "rdzv/base/http.h"

#define TRAINJOB_TOKEN_MAX 16384    /* a projected token is a JWT of a few KiB */
#define TRAINJOB_CA_MAX (1 << 20)   /* a CA bundle */
#define TRAINJOB_ANSWER_MAX 65536   /* the server answers with the payload or a Status */

struct trainjob {
    uv_loop_t *loop;
    http_client_t *http;
    uv_timer_t timer;           /* the next report once the interval allows it */
    uv_timer_t tick;            /* looks at the progress every interval */
    char *url, *ca_file, *token_file;
    uint64_t interval_ms;
    int (*progress)(void *arg, struct trainjob_progress *out);
    void (*say)(void *arg, const char *line);
    void *arg;

    struct trainjob_view v;     /* the job now */
    rdzv_failure_t root;        /* v.root points here once a failure is known */
    char state[16];
    bool poster;                /* node rank 0 of the latest round: this agent reports */
    bool dirty;                 /* v changed since the last report went out */
    bool in_flight;
    http_request_t *req;        /* ... that one */
    uint64_t next_ms;           /* loop time before which no report starts (but the last) */
    struct trainjob_progress sent_progress;   /* what the last report said of it */
    bool said;                  /* a failed report was said: no more lines */

    bool final;                 /* the job ended: one last report, then nothing */
    void (*sent)(void *);       /* ... whose answer trainjob_end's caller waits for */
    void *sent_arg;
    int closing;                /* handles still to close */
};

/* ---------- files read at every request (they rotate) ---------- */

/* path's bytes (at most max), NUL-terminated, in *out. 0 or a negative errno (-EFBIG: longer). */
static int read_small(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *buf = malloc(max + 1);
    size_t n = 0;
    int r = buf ? 0 : -ENOMEM;
    while (!r && n <= max) {
        ssize_t k = read(fd, buf + n, max + 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            r = k < 0 ? -errno : 0;
            break;
        }
        n += (size_t)k;
    }
    close(fd);
    if (!r && n > max)
        r = -EFBIG;
    if (r) {
        free(buf);
        return r;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* ---------- saying ---------- */

/* The first report that fails is said, with what the server answered; later ones are not: a
 * server that is down stays one line in the log, however long the job runs. */
static void say_failed(struct trainjob *t, const char *what)
{
    if (t->said || !t->say)
        return;
    t->said = true;
    char line[1024];
    snprintf(line, sizeof line, "TrainJob status: %.600s; the job goes on without reporting to "
             "KUBEFLOW_TRAINER_SERVER_URL=%s (further failures are not said)", what, t->url);
    t->say(t->arg, line);
}

/* The server's words: a Kubernetes Status's message and reason, else the body's first line. */
static void answer_words(const struct http_result *res, char *buf, size_t cap)
{
    json_error_t e;
    json_t *o = res->body ? json_loadb(res->body, res->body_len, 0, &e) : NULL;
    const char *msg = json_string_value(json_object_get(o, "message"));
    const char *reason = json_string_value(json_object_get(o, "reason"));
    if (msg)
        snprintf(buf, cap, "%s%s%s", msg, reason ? " / " : "", reason ? reason : "");
    else
        snprintf(buf, cap, "%.*s", res->body ? (int)strcspn(res->body, "\r\n") : 0,
                 res->body ? res->body : "");
    json_decref(o);
}

/* ---------- reporting ---------- */

static void kick(struct trainjob *t);

static void finish_final(struct trainjob *t)
{
    void (*sent)(void *) = t->sent;
    t->sent = NULL;
    if (sent)
        sent(t->sent_arg);
}

/* What to look at, for the answers that have a usual cause. */
static const struct {
    int status;                 /* a result's code, or 0 with ... */
    long http;                  /* ... this HTTP status */
    const char *hint;
} hints[] = {
    {-EKEYREJECTED, 0, "the server's certificate is not signed by the CA in "
                       "KUBEFLOW_TRAINER_SERVER_CA_CERT"},
    {-ECONNREFUSED, 0, "is the Trainer's controller running, with the TrainJobStatus feature "
                       "gate?"},
    {0, 403, "the token in KUBEFLOW_TRAINER_SERVER_TOKEN is not one the server takes for this "
             "TrainJob"},
    {0, 404, "the URL names no TrainJob status endpoint"},
    {0, 422, "the Trainer's API does not take this podrun's report: a version it does not know?"},
};

static const char *hint_for(const struct http_result *res)
{
    for (size_t i = 0; i < sizeof hints / sizeof *hints; i++)
        if (hints[i].status == res->status && (res->status || hints[i].http == res->http_status))
            return hints[i].hint;
    return NULL;
}

static void on_done(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r;
    struct trainjob *t = arg;
    t->in_flight = false;
    t->req = NULL;
    const char *hint = hint_for(res);
    char what[800];
    if (res->status) {
        snprintf(what, sizeof what, "cannot report to the server: %.400s%s%s%s", res->error,
                 hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
        say_failed(t, what);
    } else if (res->http_status != 200) {
        char words[300];
        answer_words(res, words, sizeof words);
        snprintf(what, sizeof what, "the server refused the report: HTTP %ld%s%s%s%s%s",
                 res->http_status, words[0] ? ": " : "", words, hint ? " (" : "",
                 hint ? hint : "", hint ? ")" : "");
        say_failed(t, what);
    }
    if (t->final && !t->dirty)
        finish_final(t);
    else
        kick(t);
}

/* The token and CA as they are now, the view as JSON, one POST. A report that cannot be made
 * (no token) counts as a failed one. */
static void send_now(struct trainjob *t)
{
    t->dirty = false;
    t->next_ms = uv_now(t->loop) + t->interval_ms;
    if (t->progress && t->progress(t->arg, &t->v.progress) != 0)
        t->v.progress = (struct trainjob_progress){-1, -1};
    t->sent_progress = t->v.progress;
    t->v.time = podrun_time_epoch();
    char *token = NULL, *ca = NULL, *body = NULL;
    size_t tlen = 0, calen = 0;
    char what[4400];   /* a path and a reason */
    int r = t->token_file ? read_small(t->token_file, TRAINJOB_TOKEN_MAX, &token, &tlen)
                          : -ENOENT;
    if (r) {
        snprintf(what, sizeof what, "cannot read the token %s%s: %s",
                 t->token_file ? "KUBEFLOW_TRAINER_SERVER_TOKEN=" : "",
                 t->token_file ? t->token_file : "(KUBEFLOW_TRAINER_SERVER_TOKEN is not set)",
                 podrun_strerror(r));
    } else if (t->ca_file && (r = read_small(t->ca_file, TRAINJOB_CA_MAX, &ca, &calen))) {
        snprintf(what, sizeof what, "cannot read the CA KUBEFLOW_TRAINER_SERVER_CA_CERT=%s: %s",
                 t->ca_file, podrun_strerror(r));
    } else if ((r = trainjob_payload(&t->v, &body))) {
        snprintf(what, sizeof what, "cannot make the report: %s", podrun_strerror(r));
    }
    if (!r) {
        while (tlen && strchr(" \t\r\n", token[tlen - 1]))   /* the file's newline */
            token[--tlen] = '\0';
        struct http_tls tls = {.ca_pem = ca, .ca_pem_len = calen};
        struct http_request_opts o = {
            .method = "POST", .url = t->url, .bearer_token = token, .body = body,
            .body_len = strlen(body), .tls = ca ? &tls : NULL,
            .connect_timeout_ms = TRAINJOB_CONNECT_MS, .timeout_ms = TRAINJOB_REQUEST_MS,
            .max_body = TRAINJOB_ANSWER_MAX, .on_done = on_done, .arg = t,
        };
        r = http_request_start(t->http, &o, &t->req);
        if (r)
            snprintf(what, sizeof what, "cannot send the report: %s%s", podrun_strerror(r),
                     r == -EINVAL ? " (a line break in the token, or a bad URL)" : "");
        else
            t->in_flight = true;
    }
    free(token);
    free(ca);
    free(body);
    if (r) {
        say_failed(t, what);
        if (t->final)
            finish_final(t);
    }
}

static void on_timer(uv_timer_t *h)
{
    kick(h->data);
}

/* Sends what changed when nothing is in flight and the interval allows it; else the answer, or
 * the timer, comes back here. The last report waits for nothing but the one in flight. */
static void kick(struct trainjob *t)
{
    if (t->closing || !t->poster || !t->dirty || t->in_flight)
        return;
    uint64_t now = uv_now(t->loop);
    if (!t->final && now < t->next_ms) {
        if (!uv_is_active((uv_handle_t *)&t->timer))
            uv_timer_start(&t->timer, on_timer, t->next_ms - now, 0);
        return;
    }
    uv_timer_stop(&t->timer);
    send_now(t);
}

static void changed(struct trainjob *t)
{
    if (t->final)
        return;
    t->dirty = true;
    kick(t);
}

/* While the workers run, a change in the trainer's progress is a report. */
static void on_tick(uv_timer_t *h)
{
    struct trainjob *t = h->data;
    struct trainjob_progress p;
    if (!t->poster || t->final || strcmp(t->state, "running") || t->progress(t->arg, &p))
        return;
    if (p.step != t->sent_progress.step || p.percent != t->sent_progress.percent)
        changed(t);
}

/* ---------- the agent's events ---------- */

static void set_state(struct trainjob *t, const char *s)
{
    snprintf(t->state, sizeof t->state, "%s", s);
}

void trainjob_round(struct trainjob *t, int round, int node_rank, int nodes, int workers,
                    int restarts)
{
    if (!t)
        return;
    t->poster = node_rank == 0;
    t->v.round = round;
    t->v.nodes = nodes;
    t->v.workers = workers;
    t->v.restarts = restarts;
    set_state(t, "running");
    changed(t);
}

void trainjob_failure(struct trainjob *t, const rdzv_failure_t *root)
{
    if (!t || !root)
        return;
    t->root = *root;
    t->v.root = &t->root;
    set_state(t, "stopping");
    changed(t);
}

void trainjob_restart(struct trainjob *t, int restarts)
{
    if (!t)
        return;
    t->v.restarts = restarts;
    set_state(t, "restarting");
    changed(t);
}

int trainjob_end(struct trainjob *t, const char *state, int exit_code, void (*sent)(void *),
                 void *arg)
{
    if (!t || !t->poster || t->final)
        return 0;
    set_state(t, state);
    t->v.exit_code = exit_code;
    t->dirty = true;
    t->final = true;
    t->sent = NULL;   /* a report that cannot even start calls nothing: 0 says so */
    uv_timer_stop(&t->tick);
    if (t->in_flight) {   /* the end says all an older report would: it goes now, in its place */
        http_request_cancel(t->req);
        t->req = NULL;
        t->in_flight = false;
    }
    kick(t);
    if (!t->in_flight)
        return 0;
    t->sent = sent;
    t->sent_arg = arg;
    return 1;
}

/* ---------- start and close ---------- */

static void on_closed(uv_handle_t *h)
{
    struct trainjob *t = h->data;
    if (--t->closing == 0) {
        free(t->url);
        free(t->ca_file);
        free(t->token_file);
        free(t);
    }
}

void trainjob_close(struct trainjob *t)
{
    if (!t || t->closing)
        return;
    t->closing = 2;
    http_client_close(t->http);
    uv_close((uv_handle_t *)&t->timer, on_closed);
    uv_close((uv_handle_t *)&t->tick, on_closed);
}

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

void trainjob_start(uv_loop_t *loop, const struct trainjob_params *p, struct trainjob **out)
{
    *out = NULL;
    if (!p->url || !*p->url || !p->interval_ms)
        return;
    struct trainjob *t = calloc(1, sizeof *t);
    int r = t ? http_client_new(loop, &t->http) : -ENOMEM;
    if (r) {
        char line[700];
        snprintf(line, sizeof line, "TrainJob status: cannot report to "
                 "KUBEFLOW_TRAINER_SERVER_URL=%s: %s; the job goes on without it", p->url,
                 r == -ELIBACC ? http_library_error() : podrun_strerror(r));
        if (p->say)
            p->say(p->arg, line);
        free(t);
        return;
    }
    t->loop = loop;
    if (!(t->url = strdup(p->url))) {
        http_client_close(t->http);
        free(t);
        return;
    }
    t->ca_file = dup_or_null(p->ca_file);
    t->token_file = dup_or_null(p->token_file);
    t->interval_ms = p->interval_ms;
    t->progress = p->progress;
    t->say = p->say;
    t->arg = p->arg;
    t->v = (struct trainjob_view){.state = t->state, .round = -1, .nodes = -1, .workers = -1,
                                  .max_restarts = p->max_restarts, .exit_code = -1,
                                  .progress = {-1, -1}};
    t->sent_progress = t->v.progress;
    set_state(t, "running");
    uv_timer_init(loop, &t->timer);
    uv_timer_init(loop, &t->tick);
    t->timer.data = t->tick.data = t;
    if (t->progress)
        uv_timer_start(&t->tick, on_tick, p->interval_ms, p->interval_ms);
    uv_unref((uv_handle_t *)&t->tick);   /* looking at the progress keeps nothing alive */
    *out = t;
}
