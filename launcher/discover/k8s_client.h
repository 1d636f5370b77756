/* launcher/discover/k8s_client.h — one request at a time to the Kubernetes API about this pod,
 * on the agent's loop: the credentials (launcher/discover/k8s_watch.h), this pod's namespace and
 * name, and a request that reads the token file again each time (it rotates) and hands back the
 * status code and body. The JobSet in-place restart (launcher/operators/jobset_restart.h) and
 * the pod's Events (launcher/discover/k8s_events.h) share it. */
#ifndef PODRUN_DISCOVER_K8S_CLIENT_H
#define PODRUN_DISCOVER_K8S_CLIENT_H

#include <stddef.h>
#include <uv.h>

#include "launcher/discover/k8s_watch.h"
#include "rdzv/base/http.h"

#define K8S_CLIENT_NAME_MAX 254   /* a pod or object name (DNS subdomain) */

struct k8s_client {
    uv_loop_t *loop;
    http_client_t *http;
    struct k8s_creds creds;
    char ns[K8S_CLIENT_NAME_MAX];    /* this pod's namespace */
    char pod[K8S_CLIENT_NAME_MAX];   /* this pod's name */
    char token[16384];               /* the last token read */
};

/* In-cluster credentials, or a kubeconfig (k8s_source_from_env); ns NULL: the credentials'
 * namespace. 0, or a negative code with one line in err (no credentials: -ENOENT). */
int k8s_client_open(struct k8s_client *cl, uv_loop_t *loop, const struct k8s_source *src,
                    const char *ns, const char *pod, char *err, size_t err_cap);
/* Cancels what is in flight (no callback runs after this) and frees. */
void k8s_client_close(struct k8s_client *cl);

/* A request to SERVER + path (path starts with '/'). body NULL: none; ctype NULL: JSON.
 * timeout_ms bounds it whole (0: none, for a watch with mode HTTP_BODY_LINES). */
int k8s_client_request(struct k8s_client *cl, const char *method, const char *path,
                       const char *body, const char *ctype, int timeout_ms,
                       enum http_body_mode mode, http_data_cb on_data, http_done_cb on_done,
                       void *arg, http_request_t **out);

/* "403 Forbidden: <the Status' message>" (or the transport error) for a log line. */
void k8s_client_why(const struct http_result *res, char *out, size_t cap);

#endif
