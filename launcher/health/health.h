/* launcher/health/health.h — `--health-port`: an agent's /healthz and /metrics, served on its own
 * loop (httpd.h) from counters the agent feeds as things happen and a snapshot of its state
 * taken at each request (counters.h).
 *
 *   GET /healthz   200 "ok: ..." while the agent and its workers are healthy (starting, waiting
 *                  for the rendezvous, running); 503 with the reason once a worker failed or
 *                  hung, the job is stopping or restarting, this node lost the job, or the agent
 *                  is exiting. Usable as a Kubernetes liveness or readiness probe.
 *   GET /metrics   Prometheus text format (counters.h lists the metrics).
 *   GET /          the two paths, as text.
 * Every function takes NULL (no health port) and does nothing with it, so the agent calls them
 * whether or not the port was asked for. */
#ifndef PODRUN_LAUNCHER_HEALTH_HEALTH_H
#define PODRUN_LAUNCHER_HEALTH_HEALTH_H

#include <uv.h>

#include "launcher/health/counters.h"
#include "launcher/health/httpd.h"

struct health;

struct health_params {
    const char *host;                 /* NULL: every address */
    int port;                         /* 0: a free one */
    const struct httpd_limits *limits;  /* NULL: httpd's defaults */
    struct health_labels labels;      /* strings copied */
    void (*snapshot)(void *arg, struct health_snapshot *s);
    void *arg;
};

/* 0, or a negative errno from binding the port. */
int health_start(uv_loop_t *loop, const struct health_params *p, struct health **out);
int health_port(const struct health *h);
void health_close(struct health *h);

/* The agent's events. */
void health_rdzv_joining(struct health *h);   /* a join or rejoin went out */
void health_rdzv_assigned(struct health *h);  /* this node got its ranks */
void health_worker_exit(struct health *h, enum health_exit cause);
/* The job was stopped for a restart or for good: d's root cause (if any) timed at its record's
 * time against now (epoch s). */
void health_job_stopped(struct health *h, const rdzv_decision_t *d, double now);
/* A restart's record (launcher/output/restarts.h): the seconds of each of its phases. */
void health_restart_recorded(struct health *h, const double *phases);

#endif
