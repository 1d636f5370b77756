/* launcher/health/httpd.h — a small HTTP/1.1 server on the agent's libuv loop: one GET or HEAD per
 * connection, answered by a handler and closed.
 *
 * It serves probes and scrapers next to a running job, so what a client can cost is bounded:
 * at most max_conns connections at once (one more is accepted and closed at once, so the listen
 * queue never fills with it), at most max_request bytes of request head per connection (in a
 * buffer of that size, allocated with the connection), and timeout_ms from accept until the
 * answer is written, however slowly the client sends or reads. Nothing here blocks: reads,
 * writes and timers are the loop's, and the handler builds its answer at once. Bad bytes cost
 * that connection only, with a 400 (or 405, 414, 431) when the client can still read one. */
#ifndef PODRUN_LAUNCHER_HEALTH_HTTPD_H
#define PODRUN_LAUNCHER_HEALTH_HTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "launcher/health/port.h"
#include "launcher/health/request.h"

struct httpd_limits {
    int max_conns;          /* connections open at once; default 16 */
    size_t max_request;     /* bytes of request head; default 8 KiB */
    uint64_t timeout_ms;    /* from accept until the answer is out; default 5000 */
};

/* What a handler answers: status and body (malloc'ed; the server frees it; NULL for none). */
struct httpd_reply {
    int status;
    const char *content_type;
    char *body;
    size_t len;
};

/* Called once per complete GET or HEAD request; fills the reply before it returns. */
typedef void (*httpd_handler)(void *arg, const struct httpd_request *req,
                              struct httpd_reply *out);

struct httpd;

/* Binds host (NULL: every address, IPv6 dual-stack first) and port (0: a free one) and serves
 * on loop. lim NULL: the defaults. 0 or a negative errno (the port is taken, ...). */
int httpd_start(uv_loop_t *loop, const char *host, int port, const struct httpd_limits *lim,
                httpd_handler handler, void *arg, struct httpd **out);
/* The port bound. */
int httpd_port(const struct httpd *d);
void httpd_stats(const struct httpd *d, struct httpd_stats *out);
/* Stops listening and closes every connection; the memory goes once the loop has closed the
 * handles (run the loop before uv_loop_close). */
void httpd_close(struct httpd *d);

#endif
