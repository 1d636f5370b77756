/* launcher/health/health.c — the agent's health port (health.h). */
#include "launcher/health/health.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct health {
    struct httpd *httpd;
    struct health_counters c;
    char *version, *node, *run_id, *role;
    void (*snapshot)(void *arg, struct health_snapshot *s);
    void *arg;
    uint64_t joined_ns;     /* uv_hrtime of the join in flight, 0: none */
};

static const char index_text[] = "podrun agent\n/healthz  200 while healthy, else 503 and why\n"
                                 "/metrics  Prometheus text format\n";

static char *text_copy(const char *s, size_t *len)
{
    *len = strlen(s);
    char *b = malloc(*len + 1);
    if (b)
        memcpy(b, s, *len + 1);
    return b;
}

static void take_snapshot(struct health *h, struct health_snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->state = "init";
    s->round = s->node_rank = s->nnodes = s->world_size = s->restart_count = -1;
    h->snapshot(h->arg, s);
}

/* One request: the answer is built now, on the loop, from the counters and a snapshot. */
static void on_request(void *arg, const struct httpd_request *req, struct httpd_reply *out)
{
    struct health *h = arg;
    struct health_snapshot s;
    out->content_type = "text/plain; charset=utf-8";
    if (strcmp(req->path, "/healthz") == 0) {
        take_snapshot(h, &s);
        char line[600];
        snprintf(line, sizeof line, "%s: %s\n", s.healthy ? "ok" : "unhealthy", s.reason);
        out->status = s.healthy ? 200 : 503;
        out->body = text_copy(line, &out->len);
    } else if (strcmp(req->path, "/metrics") == 0) {
        take_snapshot(h, &s);
        struct httpd_stats hs;
        httpd_stats(h->httpd, &hs);
        struct health_labels l = {h->version, h->node, h->run_id, h->role};
        struct prom p;
        metrics_init(&p);
        health_counters_render(&h->c, &s, &l, &hs, &p);
        if (p.oom) {
            metrics_free(&p);
            out->status = 500;
            out->body = text_copy("out of memory\n", &out->len);
            return;
        }
        out->status = 200;
        out->content_type = "text/plain; version=0.0.4; charset=utf-8";
        out->body = p.buf;   /* the server frees it */
        out->len = p.len;
    } else if (strcmp(req->path, "/") == 0) {
        out->status = 200;
        out->body = text_copy(index_text, &out->len);
    } else {
        out->status = 404;
        out->body = text_copy("not found: try /healthz or /metrics\n", &out->len);
    }
}

static void health_free(struct health *h)
{
    free(h->version);
    free(h->node);
    free(h->run_id);
    free(h->role);
    free(h);
}

int health_start(uv_loop_t *loop, const struct health_params *p, struct health **out)
{
    struct health *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    health_counters_init(&h->c);
    const struct health_labels *l = &p->labels;
    h->version = strdup(l->version ? l->version : "");
    h->node = strdup(l->node ? l->node : "");
    h->run_id = strdup(l->run_id ? l->run_id : "");
    h->role = strdup(l->role ? l->role : "");
    h->snapshot = p->snapshot;
    h->arg = p->arg;
    int r = !h->version || !h->node || !h->run_id || !h->role ? -ENOMEM : 0;
    if (!r)
        r = httpd_start(loop, p->host, p->port, p->limits, on_request, h, &h->httpd);
    if (r) {
        health_free(h);
        return r;
    }
    *out = h;
    return 0;
}

int health_port(const struct health *h)
{
    return h ? httpd_port(h->httpd) : 0;
}

void health_close(struct health *h)
{
    if (!h)
        return;
    httpd_close(h->httpd);   /* frees itself once its handles are closed */
    health_free(h);
}

void health_rdzv_joining(struct health *h)
{
    if (h)
        h->joined_ns = uv_hrtime();
}

void health_rdzv_assigned(struct health *h)
{
    if (!h)
        return;
    h->c.rounds++;
    if (h->joined_ns)
        metrics_histogram_observe(&h->c.rdzv_seconds, (double)(uv_hrtime() - h->joined_ns) / 1e9);
    h->joined_ns = 0;
}

void health_worker_exit(struct health *h, enum health_exit cause)
{
    if (h && cause >= 0 && cause < HEALTH_EXIT__COUNT)
        h->c.exits[cause]++;
}

void health_restart_recorded(struct health *h, const double *phases)
{
    if (!h)
        return;
    h->c.restart_records++;
    for (int p = 0; p < RESTARTS__PHASES; p++) {
        h->c.restart_phase_sum[p] += phases[p];
        h->c.restart_phase_last[p] = phases[p];
    }
}

void health_job_stopped(struct health *h, const rdzv_decision_t *d, double now)
{
    if (!h)
        return;
    if (d->action == RDZV_RESTART) {
        if (d->restart_counted)
            h->c.restarts_counted++;
        else
            h->c.restarts_uncounted++;
    }
    if (d->n > 0 && d->failures[0].time > 0) {
        double dt = now - d->failures[0].time;
        metrics_histogram_observe(&h->c.push_seconds, dt > 0 ? dt : 0);
    }
    h->c.n_bad = d->n_bad;
    memcpy(h->c.bad, d->bad, (size_t)d->n_bad * sizeof *d->bad);
}
