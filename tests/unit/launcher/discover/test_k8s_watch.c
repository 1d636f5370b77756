/* tests/unit/launcher/discover/test_k8s_watch.c — the pod watch against the test API server.
 *
 * tests/fakes/k8s_api.py (argv[1]) runs as a child process with its HTTPS API and a plain HTTP
 * control port; this test drives both from one loop: the watch under test, and the control
 * requests (through the same HTTP client) that add, change and delete pods, compact the history,
 * rotate the token, refuse access and restart the server. Credentials are an in-cluster service
 * account directory made here, or kubeconfig files. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "launcher/discover/k8s_watch.h"

static const char *fake_script;
static char dir[64];
static char sa_dir[128];
static pid_t fake_pid;
static int api_port, ctl_port;
static char api_host_port[16];
static uv_loop_t loop;
static http_client_t *http;

/* ---- files and the fake's process ---- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    size_t n = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
}

static int fake_start(void)
{
    char api_dir[128];
    snprintf(api_dir, sizeof api_dir, "%s/api", dir);
    int fds[2];
    if (pipe(fds))
        return -1;
    fake_pid = fork();
    if (fake_pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/usr/bin/python3", "python3", fake_script, "--dir", api_dir,
              "--bookmark-interval", "0.2", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[128] = {0};
    for (size_t n = 0; n < sizeof line - 1; n++)
        if (read(fds[0], line + n, 1) <= 0 || line[n] == '\n')
            break;
    close(fds[0]);
    if (sscanf(line, "PORT %d CONTROL %d", &api_port, &ctl_port) != 2)
        return -1;
    snprintf(api_host_port, sizeof api_host_port, "%d", api_port);
    /* a service account directory as the kubelet mounts it */
    char p[256], q[256];
    snprintf(sa_dir, sizeof sa_dir, "%s/sa", dir);
    mkdir(sa_dir, 0700);
    snprintf(p, sizeof p, "%s/api/token", dir);
    snprintf(q, sizeof q, "%s/token", sa_dir);
    copy_file(p, q);
    snprintf(p, sizeof p, "%s/api/pki/ca.crt", dir);
    snprintf(q, sizeof q, "%s/ca.crt", sa_dir);
    copy_file(p, q);
    snprintf(q, sizeof q, "%s/namespace", sa_dir);
    write_file(q, "default\n");
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void fake_stop(void)
{
    if (fake_pid > 0) {
        kill(fake_pid, SIGTERM);
        waitpid(fake_pid, NULL, 0);
    }
    if (dir[0])
        nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- the loop ---- */

static int watchdog_fired;
static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    watchdog_fired = 1;
}

/* Runs the loop until cond() holds, for at most 20 s. */
static int run_until(int (*cond)(void))
{
    uv_timer_t wd;
    uv_timer_init(&loop, &wd);
    watchdog_fired = 0;
    uv_timer_start(&wd, on_watchdog, 20000, 0);
    while (!cond() && !watchdog_fired)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&wd, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(!watchdog_fired);
    return !watchdog_fired;
}

static void run_for(int ms)
{
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, on_watchdog, (uint64_t)ms, 0);
    uint64_t end = uv_now(&loop) + (uint64_t)ms;
    while (uv_now(&loop) < end)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

/* ---- control requests ---- */

static struct {
    int done;
    long status;
    char body[1 << 20];
} ctl_reply;

static void ctl_done(http_request_t *r, const struct http_result *res, void *arg)
{
    (void)r, (void)arg;
    ctl_reply.done = 1;
    ctl_reply.status = res->http_status;
    snprintf(ctl_reply.body, sizeof ctl_reply.body, "%s", res->body ? res->body : "");
}

static int ctl_is_done(void)
{
    return ctl_reply.done;
}

/* POSTs (body set) or GETs path on the control port; the loop runs meanwhile. */
static const char *ctl(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *ctl(const char *path, const char *fmt, ...)
{
    char url[128], body[65536] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", ctl_port, path);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(body, sizeof body, fmt, ap);
        va_end(ap);
    }
    ctl_reply.done = 0;
    struct http_request_opts o = {.method = fmt ? "POST" : "GET", .url = url, .body = body,
                                  .body_len = strlen(body), .on_done = ctl_done,
                                  .max_body = sizeof ctl_reply.body - 1};
    if (!fmt)
        o.body = NULL;
    CHECK_EQ_INT(http_request_start(http, &o, NULL), 0);
    run_until(ctl_is_done);
    CHECK_EQ_INT(ctl_reply.status, 200);
    return ctl_reply.body;
}

/* Sends a control request that acts on open watch streams until cond() holds: the stream of
 * the watch under test may not have reached the server yet, and one it just left may linger
 * there for a moment, so one request alone could miss it. */
static void poke_until(const char *path, const char *body, int (*cond)(void))
{
    for (int i = 0; i < 100 && !cond(); i++) {
        ctl(path, "%s", body);
        run_for(100);
    }
    CHECK(cond());
}

static void put_pod(const char *name, const char *extra)
{
    ctl("/pod", "{\"name\": \"%s\", \"labels\": {\"app\": \"train\"}, \"phase\": \"Running\", "
                "\"ip\": \"10.1.0.%d\"%s%s}",
        name, (int)strlen(name), extra ? ", " : "", extra ? extra : "");
}

/* ---- what the watch told us ---- */

static struct seen {
    int changes, fatal, fatal_err, stop_in_change;
    size_t n;
    char fatal_line[1024];
    char progress[16384];
    k8s_watch_t *w;
} seen;

static void on_change(k8s_watch_t *w, const struct k8s_pods *pods, void *arg)
{
    (void)arg;
    seen.changes++;
    seen.n = pods->n;
    if (seen.stop_in_change) {
        k8s_watch_stop(w);
        seen.w = NULL;
    }
}

static void on_fatal(k8s_watch_t *w, int err, const char *line, void *arg)
{
    (void)w, (void)arg;
    seen.fatal++;
    seen.fatal_err = err;
    snprintf(seen.fatal_line, sizeof seen.fatal_line, "%s", line);
}

static void on_progress(k8s_watch_t *w, const char *line, void *arg)
{
    (void)w, (void)arg;
    size_t used = strlen(seen.progress);
    snprintf(seen.progress + used, sizeof seen.progress - used, "%s\n", line);
}

static struct k8s_creds creds;

static void in_cluster_creds(void)
{
    struct k8s_source src = {.service_host = "127.0.0.1", .service_port = api_host_port,
                             .sa_dir = sa_dir};
    char err[256] = "";
    int rc = k8s_creds_load(&src, &creds, err, sizeof err);
    if (rc)
        fprintf(stderr, "creds: %s\n", err);
    CHECK_EQ_INT(rc, 0);
}

static k8s_watch_t *watch(const char *selector, int auth_retries)
{
    memset(&seen, 0, sizeof seen);
    struct k8s_watch_params p = {.label_selector = selector, .backoff_min_ms = 50,
                                 .backoff_max_ms = 400, .auth_retries = auth_retries,
                                 .on_change = on_change, .on_fatal = on_fatal,
                                 .on_progress = on_progress};
    CHECK_EQ_INT(k8s_watch_start(&loop, http, &creds, &p, &seen.w), 0);
    return seen.w;
}

static void unwatch(void)
{
    k8s_watch_stop(seen.w);
    seen.w = NULL;
    k8s_creds_free(&creds);
    run_for(50);
}

static int synced(void)
{
    return seen.changes > 0 || seen.fatal;
}

static int fatal(void)
{
    return seen.fatal;
}

static const struct k8s_pod *find(const char *name)
{
    return k8s_pods_find(k8s_watch_pods(seen.w), "default", name);
}

static const char *wait_name;
static int has_pod(void)
{
    return find(wait_name) != NULL || seen.fatal;
}
static int lacks_pod(void)
{
    return find(wait_name) == NULL || seen.fatal;
}
static int is_crashing(void)
{
    const struct k8s_pod *p = find(wait_name);
    return (p && strcmp(p->why, "CrashLoopBackOff") == 0) || seen.fatal;
}
static int is_deleting(void)
{
    const struct k8s_pod *p = find(wait_name);
    return (p && p->deleting) || seen.fatal;
}

static void wait_for(int (*cond)(void), const char *name)
{
    wait_name = name;
    run_until(cond);
}

/* ---- tests ---- */

static void test_list_then_watch(void)
{
    ctl("/pods", "[{\"name\": \"w-0\", \"labels\": {\"app\": \"train\"}, \"phase\": \"Running\", "
                 "\"ip\": \"10.1.0.1\"}, {\"name\": \"w-1\", \"labels\": {\"app\": \"train\"}, "
                 "\"phase\": \"Running\", \"ip\": \"10.1.0.2\"}, {\"name\": \"web\", \"labels\": "
                 "{\"app\": \"web\"}, \"phase\": \"Running\", \"ip\": \"10.1.9.9\"}]");
    in_cluster_creds();
    k8s_watch_t *w = watch("app=train", 0);
    run_until(synced);
    CHECK_EQ_INT(seen.changes, 1);
    CHECK_EQ_INT(seen.n, 2);
    CHECK_EQ_INT(k8s_watch_lists(w), 1);
    CHECK(find("w-0") && find("w-0")->ready);

    put_pod("w-2", NULL);
    wait_for(has_pod, "w-2");
    CHECK_EQ_INT(seen.n, 3);
    put_pod("w-1", "\"ready\": false, \"waiting\": \"CrashLoopBackOff\", \"restarts\": 3");
    wait_for(is_crashing, "w-1");
    CHECK_EQ_INT(find("w-1")->restarts, 3);
    ctl("/delete", "{\"name\": \"w-0\", \"graceful\": true}");
    wait_for(is_deleting, "w-0");
    CHECK_EQ_STR(find("w-0")->why, "Terminating");
    ctl("/delete", "{\"name\": \"w-0\"}");
    wait_for(lacks_pod, "w-0");
    CHECK_EQ_INT(seen.n, 2);

    /* a pod the selector does not match is not a change; bookmarks are not changes either */
    int before = seen.changes;
    ctl("/pod", "{\"name\": \"web-2\", \"labels\": {\"app\": \"web\"}}");
    run_for(500);
    CHECK_EQ_INT(seen.changes, before);
    CHECK(k8s_pods_find(k8s_watch_pods(w), "default", "web-2") == NULL);
    /* a label change out of the selector is a deletion for this watch */
    ctl("/pod", "{\"name\": \"w-2\", \"labels\": {\"app\": \"moved\"}}");
    wait_for(lacks_pod, "w-2");

    CHECK_EQ_INT(k8s_watch_lists(w), 1);
    CHECK_EQ_INT(k8s_watch_watches(w), 1);
    CHECK_EQ_INT(seen.fatal, 0);

    /* the watch asked for bookmarks from the list's version, with the selector */
    json_t *log = json_loads(ctl("/requests", NULL), 0, NULL);
    size_t i;
    json_t *q, *watch_q = NULL;
    json_array_foreach(log, i, q) {
        json_t *query = json_object_get(q, "query");
        if (json_object_get(query, "watch"))
            watch_q = query;
    }
    CHECK(watch_q != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(watch_q, "allowWatchBookmarks")), "true");
    CHECK_EQ_STR(json_string_value(json_object_get(watch_q, "labelSelector")), "app=train");
    CHECK(json_object_get(watch_q, "resourceVersion") != NULL);
    json_decref(log);
    unwatch();
}

static int relisted_twice(void)
{
    return (seen.w && k8s_watch_lists(seen.w) >= 2) || seen.fatal;
}
static int relisted_thrice(void)
{
    return (seen.w && k8s_watch_lists(seen.w) >= 3) || seen.fatal;
}

static void test_relist_on_gone(void)
{
    in_cluster_creds();
    k8s_watch_t *w = watch("app=train", 0);
    run_until(synced);
    /* The server is away while a pod is added and the history compacted: the watch resumes
     * from a version the server no longer has, is told 410, and lists again, which is the only
     * way it can learn of the pod it missed. */
    ctl("/restart", "{\"down_for\": 0.5, \"compact\": true, \"pods\": [{\"name\": \"w-3\", "
                    "\"labels\": {\"app\": \"train\"}, \"phase\": \"Running\"}]}");
    run_until(relisted_twice);
    wait_for(has_pod, "w-3");
    CHECK(strstr(seen.progress, "410 Gone") != NULL);
    /* an ERROR 410 inside the stream does the same */
    poke_until("/end-watches", "{\"expire\": true}", relisted_thrice);
    put_pod("w-4", NULL);
    wait_for(has_pod, "w-4");
    CHECK(k8s_watch_lists(w) >= 3);
    CHECK_EQ_INT(seen.fatal, 0);
    unwatch();
}

static int watches_again(void)
{
    return (seen.w && k8s_watch_watches(seen.w) >= 2) || seen.fatal;
}

static void test_token_rotation(void)
{
    in_cluster_creds();
    k8s_watch_t *w = watch("app=train", 2);
    run_until(synced);
    /* a new token in the service account's file; the old one is refused from now on */
    char token_path[256];
    snprintf(token_path, sizeof token_path, "%s/token", sa_dir);
    ctl("/rotate-token", "{\"write\": [\"%s\"]}", token_path);
    poke_until("/end-watches", "{}", watches_again);
    put_pod("w-5", NULL);
    wait_for(has_pod, "w-5");
    CHECK_EQ_INT(seen.fatal, 0);
    CHECK_EQ_INT(k8s_watch_lists(w), 1);
    unwatch();
}

static void test_forbidden_and_unauthorized(void)
{
    ctl("/deny", "{\"verbs\": [\"list\", \"watch\", \"get\"]}");
    in_cluster_creds();
    watch("app=train", 2);
    run_until(fatal);
    CHECK_EQ_INT(seen.fatal_err, -EACCES);
    CHECK_EQ_INT(seen.changes, 0);
    CHECK(strstr(seen.fatal_line, "403 Forbidden: pods is forbidden: User "
                                  "\"system:serviceaccount:default:default\" cannot list "
                                  "resource \"pods\" in API group \"\" in the namespace "
                                  "\"default\"") != NULL);
    CHECK(strstr(seen.fatal_line, "needs a Role in namespace default with rules [apiGroups: "
                                  "[\"\"], resources: [\"pods\"], verbs: [\"get\", \"list\", "
                                  "\"watch\"]] and a RoleBinding") != NULL);
    CHECK(strstr(seen.fatal_line, "in-cluster service account") != NULL);
    CHECK(strchr(seen.fatal_line, '\n') == NULL);
    CHECK(strstr(seen.progress, "403") != NULL);   /* tried again once before giving up */
    unwatch();
    ctl("/deny", "{\"verbs\": []}");

    /* a token the server does not know */
    char bad_sa[160], p[256];
    snprintf(bad_sa, sizeof bad_sa, "%s/sa-bad", dir);
    mkdir(bad_sa, 0700);
    snprintf(p, sizeof p, "%s/token", bad_sa);
    write_file(p, "not-the-token\n");
    char q[256];
    snprintf(p, sizeof p, "%s/ca.crt", sa_dir);
    snprintf(q, sizeof q, "%s/ca.crt", bad_sa);
    copy_file(p, q);
    struct k8s_source src = {.service_host = "127.0.0.1", .service_port = api_host_port,
                             .sa_dir = bad_sa};
    char err[256];
    CHECK_EQ_INT(k8s_creds_load(&src, &creds, err, sizeof err), 0);
    CHECK_EQ_STR(creds.namespace, "default");   /* no namespace file: "default" */
    watch(NULL, 1);
    run_until(fatal);
    CHECK_EQ_INT(seen.fatal_err, -EACCES);
    CHECK(strstr(seen.fatal_line, "401 Unauthorized") != NULL);
    unwatch();

    /* a selector the server cannot parse is a usage error, not something to retry */
    in_cluster_creds();
    watch("app in (", 0);
    run_until(fatal);
    CHECK_EQ_INT(seen.fatal_err, -EINVAL);
    CHECK(strstr(seen.fatal_line, "400 BadRequest: unable to parse requirement") != NULL);
    unwatch();
}

static void test_server_restart(void)
{
    in_cluster_creds();
    k8s_watch_t *w = watch("app=train", 0);
    run_until(synced);
    size_t n = seen.n;
    /* the server goes away for a second with the watch open, then comes back on its port */
    ctl("/restart", "{\"down_for\": 1.0}");
    run_until(watches_again);
    put_pod("w-6", NULL);
    wait_for(has_pod, "w-6");
    CHECK_EQ_INT(seen.n, n + 1);
    CHECK_EQ_INT(seen.fatal, 0);
    CHECK_EQ_INT(k8s_watch_lists(w), 1);   /* resumed from its version, no new list */
    CHECK(strstr(seen.progress, "watching again in") != NULL);
    unwatch();
}

static unsigned watch_mark;
static int watches_since_mark(void)
{
    return (seen.w && k8s_watch_watches(seen.w) > watch_mark) || seen.fatal;
}

static void test_bad_stream_lines(void)
{
    in_cluster_creds();
    k8s_watch_t *w = watch("app=train", 0);
    run_until(synced);
    /* a line that is not an event costs the stream, not the table: watch again from where it
     * was, without listing */
    poke_until("/inject", "{\"line\": \"{\\\"type\\\": \\\"ADDED\\\", \\\"object\\\": 3}\"}",
               watches_again);
    CHECK(strstr(seen.progress, "a watch event does not parse: not a watch event") != NULL);
    /* an ERROR event other than 410: the same */
    watch_mark = k8s_watch_watches(w);
    poke_until("/inject",
               "{\"line\": \"{\\\"type\\\":\\\"ERROR\\\",\\\"object\\\":{\\\"kind\\\":"
               "\\\"Status\\\",\\\"apiVersion\\\":\\\"v1\\\",\\\"metadata\\\":{},"
               "\\\"status\\\":\\\"Failure\\\",\\\"message\\\":\\\"etcd is down\\\","
               "\\\"reason\\\":\\\"InternalError\\\",\\\"code\\\":500}}\"}",
               watches_since_mark);
    CHECK(strstr(seen.progress, "the watch ended with 500 InternalError: etcd is down") != NULL);
    put_pod("w-8", NULL);
    wait_for(has_pod, "w-8");
    CHECK_EQ_INT(k8s_watch_lists(w), 1);
    CHECK_EQ_INT(seen.fatal, 0);
    unwatch();
}

static void test_paged_list(void)
{
    static char body[1 << 17];
    size_t used = 0;
    used += (size_t)snprintf(body + used, sizeof body - used, "[");
    for (int i = 0; i < 520; i++)
        used += (size_t)snprintf(body + used, sizeof body - used,
                                 "%s{\"name\": \"m-%d\", \"labels\": {\"app\": \"many\"}}",
                                 i ? ", " : "", i);
    snprintf(body + used, sizeof body - used, "]");
    ctl("/pods", "%s", body);
    in_cluster_creds();
    k8s_watch_t *w = watch("app=many", 0);
    run_until(synced);
    CHECK_EQ_INT(seen.n, 520);
    CHECK_EQ_INT(k8s_watch_lists(w), 1);
    CHECK(strstr(ctl("/requests", NULL), "\"continue\"") != NULL);
    /* the order of node ranks: names in natural order */
    const struct k8s_pod *v[520];
    k8s_pods_sorted(k8s_watch_pods(w), K8S_ORDER_INDEX, v);
    CHECK_EQ_STR(v[9]->name, "m-9");
    CHECK_EQ_STR(v[10]->name, "m-10");
    CHECK_EQ_STR(v[519]->name, "m-519");
    unwatch();
}

static void test_stop_from_callback(void)
{
    in_cluster_creds();
    watch("app=train", 0);
    seen.stop_in_change = 1;
    run_until(synced);
    CHECK(seen.w == NULL);
    put_pod("w-7", NULL);
    run_for(300);
    CHECK_EQ_INT(seen.changes, 1);
    k8s_creds_free(&creds);
}

static void test_kubeconfig_credentials(void)
{
    /* client certificate and CA as files relative to the kubeconfig, as kubectl reads them */
    char kc[256], text[1024];
    snprintf(kc, sizeof kc, "%s/api/kubeconfig", dir);
    snprintf(text, sizeof text,
             "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
             "clusters:\n- name: fake\n  cluster:\n    server: https://localhost:%d/\n"
             "    certificate-authority: pki/ca.crt\n"
             "users:\n- name: cert\n  user:\n    client-certificate: pki/client.crt\n"
             "    client-key: pki/client.key\n"
             "- name: tok\n  user:\n    tokenFile: token\n"
             "contexts:\n- name: fake\n  context: {cluster: fake, user: cert, namespace: default}\n"
             "- name: tok\n  context: {cluster: fake, user: tok}\n",
             api_port);
    write_file(kc, text);
    const char *contexts[] = {"fake", "tok"};
    for (int i = 0; i < 2; i++) {
        char list[400];
        snprintf(list, sizeof list, "%s/missing-config:%s", dir, kc);
        struct k8s_source src = {.kubeconfig = list, .context = contexts[i]};
        char err[256] = "";
        int rc = k8s_creds_load(&src, &creds, err, sizeof err);
        if (rc)
            fprintf(stderr, "creds: %s\n", err);
        CHECK_EQ_INT(rc, 0);
        CHECK(strstr(creds.origin, "context") != NULL);
        watch("app=train", 0);
        run_until(synced);
        CHECK_EQ_INT(seen.fatal, 0);
        CHECK(seen.n >= 3);
        unwatch();
    }
    json_t *log = json_loads(ctl("/requests", NULL), 0, NULL);
    json_t *last = json_array_get(log, json_array_size(log) - 1);
    CHECK_EQ_STR(json_string_value(json_object_get(last, "user")),
                 "system:serviceaccount:default:default");
    int cert_user = 0;
    size_t i;
    json_t *q;
    json_array_foreach(log, i, q)
        cert_user |= json_is_string(json_object_get(q, "user")) &&
                     strcmp(json_string_value(json_object_get(q, "user")),
                            "podrun-test-client") == 0;
    CHECK(cert_user);
    json_decref(log);
}

static void test_credential_errors(void)
{
    char err[256], empty[160];
    struct k8s_source src = {.service_host = "127.0.0.1", .service_port = api_host_port};
    snprintf(empty, sizeof empty, "%s/empty-sa", dir);
    mkdir(empty, 0700);
    src.sa_dir = empty;
    CHECK_EQ_INT(k8s_creds_load(&src, &creds, err, sizeof err), -ENOENT);
    CHECK(strstr(err, "automountServiceAccountToken") != NULL);
    src.service_port = NULL;
    CHECK_EQ_INT(k8s_creds_load(&src, &creds, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not");

    struct k8s_source none = {0};
    CHECK_EQ_INT(k8s_creds_load(&none, &creds, err, sizeof err), -ENOENT);
    CHECK(strstr(err, "neither KUBECONFIG nor HOME") != NULL);
    struct k8s_source home = {.home = empty};
    CHECK_EQ_INT(k8s_creds_load(&home, &creds, err, sizeof err), -ENOENT);
    CHECK(strstr(err, "/.kube/config") != NULL);
    char bad[200];
    snprintf(bad, sizeof bad, "%s/bad-kubeconfig", dir);
    write_file(bad, "clusters: [\n");
    struct k8s_source badsrc = {.kubeconfig = bad};
    CHECK_EQ_INT(k8s_creds_load(&badsrc, &creds, err, sizeof err), -EPROTO);
    CHECK(strstr(err, bad) != NULL && strstr(err, "not YAML") != NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_k8s_watch tests/fakes/k8s_api.py\n");
        return 2;
    }
    fake_script = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "/tmp/podrun-k8s-XXXXXX");
    if (!mkdtemp(dir) || fake_start() != 0) {
        fprintf(stderr, "test_k8s_watch: the test API server did not start\n");
        fake_stop();
        return 1;
    }
    uv_loop_init(&loop);
    if (http_client_new(&loop, &http) != 0)
        return 1;
    RUN(test_list_then_watch);
    RUN(test_relist_on_gone);
    RUN(test_token_rotation);
    RUN(test_forbidden_and_unauthorized);
    RUN(test_server_restart);
    RUN(test_bad_stream_lines);
    RUN(test_paged_list);
    RUN(test_stop_from_callback);
    RUN(test_kubeconfig_credentials);
    RUN(test_credential_errors);
    http_client_close(http);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    fake_stop();
    return check_result();
}
