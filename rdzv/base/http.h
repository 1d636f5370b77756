/* rdzv/base/http.h — HTTP(S) requests on the agent's libuv loop.
 *
 * libcurl's multi-socket interface drives every transfer from the loop: curl tells the client
 * which sockets to watch (uv_poll) and when to wake it (uv_timer), so there is no thread of ours,
 * no blocking call and no polling timer. Name resolution runs in libcurl's resolver thread, as
 * libcurl does it; nothing else leaves the loop.
 *
 * A client owns the connections (HTTP/1.1, kept alive and reused between requests). A request is
 * made with one http_request_start and ends with exactly one on_done call, unless it is cancelled
 * first; after http_request_cancel returns, nothing runs for that request any more. Callbacks
 * never run from inside the call that started or cancelled a request.
 *
 * Errors are values: functions and results carry 0 or a negative errno-style code, and a text
 * (libcurl's own message, or the client's) saying what happened. The codes a result can carry:
 *   -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH   connecting failed (the OS error when known)
 *   -EHOSTUNREACH    the host name did not resolve
 *   -ETIMEDOUT       connect_timeout_ms, timeout_ms or idle_timeout_ms ran out
 *   -ECONNRESET      the connection was lost before the response was complete
 *   -EKEYREJECTED    the server's certificate did not verify against the trusted CAs
 *   -EPROTO          the TLS handshake failed, or the server's answer is not HTTP
 *   -EMSGSIZE        the response went over max_body (see below)
 *   -EINVAL          a bad URL, option or local certificate/key/CA
 *   -ENOMEM, -EIO    out of memory; any other libcurl failure
 *   or what an on_data callback returned.
 * A response with any HTTP status (404, 410, 503, ...) is a result with status 0 and that
 * http_status: what a status means is the caller's protocol. */
#ifndef PODRUN_RDZV_HTTP_H
#define PODRUN_RDZV_HTTP_H

#include <stddef.h>
#include <uv.h>

typedef struct http_client http_client_t;
typedef struct http_request http_request_t;

/* Who the client trusts and who it is. Strings and blobs are copied when a request starts.
 * With neither ca_file nor ca_pem the system's CAs are trusted; with either, only those. */
struct http_tls {
    const char *ca_file;       /* PEM file of the CAs to trust */
    const char *ca_pem;        /* ... or the PEM text (kubeconfig certificate-authority-data) */
    size_t ca_pem_len;
    const char *cert_file;     /* client certificate, PEM (file or text) */
    const char *cert_pem;
    size_t cert_pem_len;
    const char *key_file;      /* its private key, PEM (file or text) */
    const char *key_pem;
    size_t key_pem_len;
    int insecure;              /* 1: do not verify the server (insecure-skip-tls-verify) */
};

/* How the response body reaches the caller. */
enum http_body_mode {
    HTTP_BODY_BUFFER = 0,  /* collected, handed to on_done (at most max_body bytes) */
    HTTP_BODY_CHUNKS,      /* each piece to on_data as it arrives; nothing is kept */
    HTTP_BODY_LINES,       /* each '\n'-terminated line (without the '\n') to on_data as soon as
                            * it is complete; a last line without '\n' when the body ends. A line
                            * longer than max_body fails the request with -EMSGSIZE. */
};

/* Streaming: called for 2xx responses only — a non-2xx body is buffered and given to on_done, so
 * the caller can read the error object a server sends (a Kubernetes Status, an etcd error). `data`
 * is valid during the call. Returning non-zero ends the request: on_done gets that value as its
 * status (it should be a negative code), unless the request was cancelled in the callback. */
typedef int (*http_data_cb)(http_request_t *r, const char *data, size_t len, void *arg);

struct http_result {
    int status;           /* 0, or a negative code from the list above */
    long http_status;     /* the response's HTTP status; 0 when none was received */
    const char *body;     /* a buffered body (NUL-terminated, length body_len), else NULL */
    size_t body_len;
    const char *error;    /* what went wrong, one line; "" when status is 0 */
};
/* The result and everything it points to are valid during the call. r is freed after it. */
typedef void (*http_done_cb)(http_request_t *r, const struct http_result *res, void *arg);

struct http_request_opts {
    const char *method;               /* "GET" when NULL; "POST", "PUT", "DELETE", "PATCH", ... */
    const char *url;                  /* http:// or https:// */
    const char *bearer_token;         /* sends "Authorization: Bearer <token>" when set */
    const char *const *headers;       /* more "Name: value" lines, NULL-terminated; may be NULL */
    const void *body;                 /* request body, copied; sent when body_len > 0 or body set */
    size_t body_len;
    const char *content_type;         /* for a body; "application/json" when NULL */
    const struct http_tls *tls;       /* NULL: verify against the system's CAs */
    int connect_timeout_ms;           /* 0: 10 s */
    int timeout_ms;                   /* the whole request; 0: no limit (watch streams) */
    int idle_timeout_ms;              /* no byte for this long fails the request; 0: none */
    size_t max_body;                  /* bound on bytes held for this request; 0: 4 MiB */
    enum http_body_mode mode;
    http_data_cb on_data;             /* required for CHUNKS and LINES */
    http_done_cb on_done;             /* required */
    void *arg;
};

/* Makes a client on `loop`. 0 or -ENOMEM / -EIO (libcurl could not start) / -ELIBACC (no
 * libcurl in this image: http_library_error says so). */
int http_client_new(uv_loop_t *loop, http_client_t **out);

/* NULL when libcurl can be used; else one line naming what is missing and the package that
 * brings it. libcurl is loaded at run time, by the first client (rdzv/base/curl_dl.c). */
const char *http_library_error(void);

/* Cancels every request (no callbacks run) and closes the client. Its handles close through the
 * loop: the memory is released once the loop has run their close callbacks, so run the loop
 * before uv_loop_close. Safe to call from any callback of this client. */
void http_client_close(http_client_t *c);

/* Starts a request. On success *out (if out is set) is the request's handle, valid until on_done
 * runs or it is cancelled. Errors found before anything is sent are returned here and on_done is
 * not called: -EINVAL (no URL, no callback, a header or token with a line break), -ENOMEM,
 * -ESHUTDOWN (the client is closing). */
int http_request_start(http_client_t *c, const struct http_request_opts *o, http_request_t **out);

/* Stops a request now: its connection is closed, and neither on_data nor on_done runs for it
 * after this returns. Safe to call from any callback of this client, including r's own. */
void http_request_cancel(http_request_t *r);

/* The number of requests started and not yet done or cancelled. */
size_t http_client_active(const http_client_t *c);

#endif
