/* launcher/discover/k8s_watch.h — the pods of a job, from the Kubernetes API, pushed on the loop.
 *
 * Credentials come from inside the cluster (KUBERNETES_SERVICE_HOST/PORT and the service
 * account's token, ca.crt and namespace files) or from a kubeconfig. A watch lists the pods by
 * selector, then watches from the list's resourceVersion with bookmarks; a 410 Gone lists again;
 * a lost connection or a server error reconnects after a bounded backoff; the token file is read
 * again for every request, so a rotated token is picked up. Everything runs on the caller's
 * libuv loop through rdzv/base/http.h. */
#ifndef PODRUN_DISCOVER_K8S_WATCH_H
#define PODRUN_DISCOVER_K8S_WATCH_H

#include <stddef.h>
#include <uv.h>

#include "launcher/discover/k8s_pods.h"
#include "rdzv/base/http.h"

#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Where credentials may come from; the caller fills it (k8s_source_from_env reads the
 * process environment). NULL fields are absent. */
struct k8s_source {
    const char *service_host;   /* KUBERNETES_SERVICE_HOST: in a cluster when set */
    const char *service_port;   /* KUBERNETES_SERVICE_PORT */
    const char *sa_dir;         /* the service account's files; NULL: K8S_SA_DIR */
    const char *kubeconfig;     /* KUBECONFIG: files separated by ':' */
    const char *home;           /* HOME, for ~/.kube/config */
    const char *context;        /* a kubeconfig context; NULL: its current-context */
};

void k8s_source_from_env(struct k8s_source *src);

/* Resolved credentials: the API server, its namespace, TLS and where the token is. */
struct k8s_creds {
    char *server;               /* https://HOST:PORT (no trailing '/') */
    char *namespace;            /* the default namespace: service account's, context's, "default" */
    char *token;                /* a fixed token (kubeconfig token) */
    char *token_file;           /* read before every request (service account, tokenFile) */
    char *origin;               /* for messages: "the in-cluster service account" / "kubeconfig
                                 * FILE, context NAME" */
    struct http_tls tls;        /* points into the buffers below */
    char *ca_file, *ca_pem, *cert_file, *cert_pem, *key_file, *key_pem;
};

/* In-cluster when service_host is set, else the kubeconfig (KUBECONFIG, else
 * HOME/.kube/config). 0, or a negative code with one line in err naming the file or variable:
 * -ENOENT (nothing to read), -EACCES, -EPROTO (a malformed file), -ENOTSUP (an exec plugin). */
int k8s_creds_load(const struct k8s_source *src, struct k8s_creds *out, char *err,
                   size_t err_cap);
void k8s_creds_free(struct k8s_creds *c);

/* The bearer token for the next request: the token file as it is now (a service account's token
 * is rotated under us; buf keeps the last one read when a read fails), else the kubeconfig's
 * token, else NULL. */
const char *k8s_creds_token(const struct k8s_creds *c, char *buf, size_t cap);

/* The one line for a 401/403 answer: the server's message, whose credentials, and the Role the
 * service account needs in namespace ns (pods: get, list, watch). */
void k8s_denied_line(const struct k8s_creds *c, const char *ns, long code, const char *msg,
                     char *out, size_t cap);

typedef struct k8s_watch k8s_watch_t;

/* The table after a list and after every event that changed it. It is the watch's own (valid
 * until the next callback or k8s_watch_stop); the first call comes after the first list, even
 * when no pod matches. */
typedef void (*k8s_change_cb)(k8s_watch_t *w, const struct k8s_pods *pods, void *arg);
/* The watch has given up: one line saying why and what to do (401/403 name the Role the
 * service account needs). err: -EACCES (401/403), -EINVAL (the server refused the request, e.g.
 * a bad selector), -EMSGSIZE (more pods than max_pods), -ENOMEM. Nothing runs after it; the
 * caller still calls k8s_watch_stop. */
typedef void (*k8s_fatal_cb)(k8s_watch_t *w, int err, const char *line, void *arg);
/* One line about a retry or a new list, for the agent's progress output. */
typedef void (*k8s_progress_cb)(k8s_watch_t *w, const char *line, void *arg);

struct k8s_watch_params {
    const char *namespace;      /* NULL: the credentials' namespace */
    const char *label_selector; /* NULL or "": every pod of the namespace */
    const char *field_selector;
    size_t max_pods;            /* 0: 4096 */
    int backoff_min_ms;         /* 0: 250 */
    int backoff_max_ms;         /* 0: 8000 */
    int watch_timeout_s;        /* the server ends each watch after this (timeoutSeconds); 0: 300 */
    int auth_retries;           /* 401/403 answers tolerated in a row before giving up; 0: 3 */
    k8s_change_cb on_change;    /* required */
    k8s_fatal_cb on_fatal;      /* required */
    k8s_progress_cb on_progress;
    void *arg;
};

/* Starts listing. creds must stay valid until k8s_watch_stop. 0, -EINVAL, -ENOMEM. */
int k8s_watch_start(uv_loop_t *loop, http_client_t *http, const struct k8s_creds *creds,
                    const struct k8s_watch_params *p, k8s_watch_t **out);

/* Stops: no callback runs after this returns, and the memory goes once the loop has closed the
 * watch's timer. Safe from inside any of its callbacks. */
void k8s_watch_stop(k8s_watch_t *w);

/* The current table (empty before the first list). */
const struct k8s_pods *k8s_watch_pods(const k8s_watch_t *w);

/* Counters, for tests and status: lists done (re-lists included) and watches opened. */
unsigned k8s_watch_lists(const k8s_watch_t *w);
unsigned k8s_watch_watches(const k8s_watch_t *w);

#endif
