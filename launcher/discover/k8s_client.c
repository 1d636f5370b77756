/* launcher/discover/k8s_client.c — requests about this pod to the Kubernetes API (see
 * k8s_client.h). */
#include "launcher/discover/k8s_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/k8s_pods.h"
#include "rdzv/base/common.h"

int k8s_client_open(struct k8s_client *cl, uv_loop_t *loop, const struct k8s_source *src,
                    const char *ns, const char *pod, char *err, size_t err_cap)
{
    memset(cl, 0, sizeof *cl);
    cl->loop = loop;
    if (!pod || !*pod || strlen(pod) >= sizeof cl->pod) {
        snprintf(err, err_cap, "this pod's name is unknown (set POD_NAME from the downward API: "
                 "fieldRef metadata.name)");
        return -EINVAL;
    }
    int r = k8s_creds_load(src, &cl->creds, err, err_cap);
    if (r)
        return r;
    snprintf(cl->pod, sizeof cl->pod, "%s", pod);
    snprintf(cl->ns, sizeof cl->ns, "%s", ns && *ns ? ns : cl->creds.namespace);
    if ((r = http_client_new(loop, &cl->http))) {
        const char *lib = http_library_error();
        snprintf(err, err_cap, "cannot reach the Kubernetes API: %s",
                 lib ? lib : podrun_strerror(r));
        k8s_creds_free(&cl->creds);
        return r;
    }
    return 0;
}

void k8s_client_close(struct k8s_client *cl)
{
    if (cl->http)
        http_client_close(cl->http);
    cl->http = NULL;
    k8s_creds_free(&cl->creds);
}

int k8s_client_request(struct k8s_client *cl, const char *method, const char *path,
                       const char *body, const char *ctype, int timeout_ms,
                       enum http_body_mode mode, http_data_cb on_data, http_done_cb on_done,
                       void *arg, http_request_t **out)
{
    size_t n = strlen(cl->creds.server) + strlen(path) + 1;
    char *url = malloc(n);
    if (!url)
        return -ENOMEM;
    snprintf(url, n, "%s%s", cl->creds.server, path);
    struct http_request_opts o = {
        .method = method, .url = url,
        .bearer_token = k8s_creds_token(&cl->creds, cl->token, sizeof cl->token),
        .headers = (const char *const[]){"Accept: application/json", NULL},
        .body = body, .body_len = body ? strlen(body) : 0, .content_type = ctype,
        .tls = &cl->creds.tls, .connect_timeout_ms = timeout_ms ? timeout_ms : 0,
        .timeout_ms = timeout_ms, .max_body = 1 << 20, .mode = mode, .on_data = on_data,
        .on_done = on_done, .arg = arg,
    };
    /* a watch: the server ends it at its timeoutSeconds; long silence past that is a dead peer */
    if (!timeout_ms)
        o.idle_timeout_ms = 360000;
    int r = http_request_start(cl->http, &o, out);
    free(url);
    return r;
}

void k8s_client_why(const struct http_result *res, char *out, size_t cap)
{
    struct k8s_status st;
    memset(&st, 0, sizeof st);
    if (res->status) {
        snprintf(out, cap, "%s", res->error && *res->error ? res->error : strerror(-res->status));
        return;
    }
    if (res->body)
        k8s_status_parse(res->body, res->body_len, &st);
    snprintf(out, cap, "%ld %s%s%s", res->http_status, st.reason[0] ? st.reason : "HTTP error",
             st.message[0] ? ": " : "", st.message);
}
