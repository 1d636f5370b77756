/* launcher/commands/k8s.c — `podrun k8s`: PaddleCloud's k8s_tools.py without Python.
 *
 * The same commands with the same arguments, and byte for byte the same stdout (the formatters
 * are launcher/commands/k8s_tools.c's), so a script that ran `python k8s_tools.py CMD ...` runs
 * `podrun k8s CMD ...` unchanged. The differences are what a script can rely on instead of what
 * it had to work around: the waits follow a watch of the pods instead of listing them every 5 s
 * (the progress line is printed when the count changes), errors are one line on stderr instead
 * of a traceback, and the exit status says what happened (see usage). */
#include "launcher/commands/commands.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <uv.h>

#include "launcher/discover/k8s_watch.h"
#include "launcher/discover/identity.h"
#include "launcher/discover/k8s_pods.h"
#include "launcher/commands/k8s_tools.h"
#include "rdzv/base/common.h"
#include "rdzv/base/http.h"

enum {
    K8S_EXIT_OK = 0,
    K8S_EXIT_API = 1,        /* no credentials, an error answer, no answer in time */
    K8S_EXIT_USAGE = 2,
    K8S_EXIT_NONE = 3,       /* fetch_id printed None */
    K8S_EXIT_DENIED = 4,     /* 401/403 */
    K8S_EXIT_TIMEOUT = 124,  /* --timeout passed while waiting (timeout(1)'s code) */
};

#define ONE_SHOT_TIMEOUT_S 30.0

static const char usage[] =
    "usage: podrun k8s [--namespace NS] [--timeout S] COMMAND ARGS...\n"
    "\n"
    "k8s_tools.py's commands: the same arguments and the same output on stdout.\n"
    "  wait_pods_running SEL N       wait until at least N pods of SEL are Running\n"
    "  wait_containers_ready SEL     wait until every container of SEL's pods is ready\n"
    "  fetch_ips SEL [PORT]          IPs of SEL's Running pods, sorted as strings, joined by ','\n"
    "                                (a PORT after SEL is ignored, as k8s_tools.py ignores it)\n"
    "  fetch_ips_string SEL PHASE    the same for the pods in PHASE\n"
    "  fetch_endpoints SEL PORT      IP:PORT of SEL's Running pods, in that order\n"
    "  fetch_id SEL                  this pod's place among those IPs, or None\n"
    "  count_pods_by_phase SEL PHASE how many of SEL's pods are in PHASE (Terminating: being\n"
    "                                deleted)\n"
    "SEL is a label selector (app=x,tier in (a,b)). The waits follow a watch of the pods, not a\n"
    "5 s poll: wait_pods_running prints its progress line when the count changes,\n"
    "wait_containers_ready once.\n"
    "\n"
    "  --namespace NS   the pods' namespace (default: $NAMESPACE as k8s_tools.py, else the\n"
    "                   service account's, else the kubeconfig context's)\n"
    "  --timeout S      waits: give up after S seconds (default: wait forever, as k8s_tools.py);\n"
    "                   other commands: how long an unreachable API server is retried (default\n"
    "                   30)\n"
    "Credentials: in a pod, its service account (KUBERNETES_SERVICE_HOST); outside, KUBECONFIG\n"
    "or ~/.kube/config. This pod's IP (fetch_id): $POD_IP, else what the host name resolves to.\n"
    "\n"
    "exit status: 0 done; 1 the API server could not be used (no credentials, an error answer,\n"
    "no answer within --timeout); 2 usage error; 3 fetch_id found this pod's IP among none of\n"
    "the Running pods (it printed None); 4 the API server refused the credentials (401/403: the\n"
    "line names the Role the service account needs); 124 a wait passed --timeout.\n";

enum cmd_kind { CMD_WAIT_RUNNING, CMD_WAIT_READY, CMD_IPS, CMD_IPS_STRING, CMD_ENDPOINTS, CMD_ID,
                CMD_COUNT };

static const struct cmd {
    const char *name;
    enum cmd_kind kind;
    int min_args, max_args;   /* after SEL... : arguments including SEL */
    const char *args;
} cmds[] = {
    {"wait_pods_running", CMD_WAIT_RUNNING, 2, 2, "SEL N"},
    {"wait_containers_ready", CMD_WAIT_READY, 1, 1, "SEL"},
    {"fetch_ips", CMD_IPS, 1, 2, "SEL [PORT]"},
    {"fetch_ips_string", CMD_IPS_STRING, 2, 2, "SEL PHASE"},
    {"fetch_endpoints", CMD_ENDPOINTS, 2, 2, "SEL PORT"},
    {"fetch_id", CMD_ID, 1, 1, "SEL"},
    {"count_pods_by_phase", CMD_COUNT, 2, 2, "SEL PHASE"},
};

struct run {
    uv_loop_t *loop;
    const struct cmd *cmd;
    char **args;
    long desired;               /* wait_pods_running */
    long last_count;            /* the count last said, -1 before */
    int said_waiting;
    char local_ip[64];          /* fetch_id */
    double timeout_s;
    http_client_t *http;
    k8s_watch_t *watch;
    uv_timer_t timer;
    uv_signal_t sigterm, sigint;
    char last_retry[512];
    int code;
    int done;
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "podrun k8s: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see podrun k8s --help)\n");
    return K8S_EXIT_USAGE;
}

static void say(const char *text, size_t len)
{
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* Ends the run with `code`: nothing else runs, the loop drains. */
static void finish(struct run *r, int code)
{
    if (r->done)
        return;
    r->done = 1;
    r->code = code;
    k8s_watch_stop(r->watch);
    r->watch = NULL;
    http_client_close(r->http);
    r->http = NULL;
    uv_close((uv_handle_t *)&r->timer, NULL);
    uv_close((uv_handle_t *)&r->sigterm, NULL);
    uv_close((uv_handle_t *)&r->sigint, NULL);
}

/* A formatter's result: its bytes on stdout, or the one line for what k8s_tools.py would have
 * died of. */
static int print_result(const struct k8s_pods *pods, int n, char *buf)
{
    if (n >= 0) {
        say(buf, (size_t)n);
        return K8S_EXIT_OK;
    }
    if (n == -ENODATA) {
        for (size_t i = 0; i < pods->n; i++)
            if (!pods->pods[i]->ip[0])
                fprintf(stderr, "podrun k8s: pod %s is %s but has no IP yet\n",
                        pods->pods[i]->name, k8s_pod_status(pods->pods[i]));
    } else {
        fprintf(stderr, "podrun k8s: %s\n", podrun_strerror(n));
    }
    return K8S_EXIT_API;
}

static size_t count_phase(const struct k8s_pods *pods, const char *phase)
{
    size_t n = 0;
    for (size_t i = 0; i < pods->n; i++)
        n += strcmp(k8s_pod_status(pods->pods[i]), phase) == 0;
    return n;
}

/* The table after the list and after every change: a one-shot command answers the first time,
 * a wait when its condition holds (saying the progress line when what it counts changed). */
static void on_change(k8s_watch_t *w, const struct k8s_pods *pods, void *arg)
{
    (void)w;
    struct run *r = arg;
    if (r->done)
        return;
    size_t cap = 64 + pods->n * (K8S_IP_MAX + 16 + strlen(r->args[1] ? r->args[1] : ""));
    char *buf = malloc(cap);
    if (!buf) {
        fprintf(stderr, "podrun k8s: out of memory\n");
        finish(r, K8S_EXIT_API);
        return;
    }
    int n, code = -1;
    switch (r->cmd->kind) {
    case CMD_WAIT_RUNNING: {
        size_t count = count_phase(pods, "Running");
        if ((long)count >= r->desired) {
            code = K8S_EXIT_OK;
        } else if ((long)count != r->last_count) {
            r->last_count = (long)count;
            n = k8s_tools_wait_running_progress(count, buf, cap);
            if (n > 0)
                say(buf, (size_t)n);
        }
        break;
    }
    case CMD_WAIT_READY:
        if (k8s_tools_containers_all_ready(pods)) {
            code = K8S_EXIT_OK;
        } else if (!r->said_waiting) {
            r->said_waiting = 1;
            n = k8s_tools_wait_ready_progress(buf, cap);
            if (n > 0)
                say(buf, (size_t)n);
        }
        break;
    case CMD_IPS:
        code = print_result(pods, k8s_tools_fetch_ips(pods, NULL, buf, cap), buf);
        break;
    case CMD_IPS_STRING:
        code = print_result(pods, k8s_tools_fetch_ips(pods, r->args[1], buf, cap), buf);
        break;
    case CMD_ENDPOINTS:
        code = print_result(pods, k8s_tools_fetch_endpoints(pods, r->args[1], buf, cap), buf);
        break;
    case CMD_ID:
        n = k8s_tools_fetch_id(pods, r->local_ip, buf, cap);
        code = print_result(pods, n, buf);
        if (code == K8S_EXIT_OK && strcmp(buf, "None\n") == 0)
            code = K8S_EXIT_NONE;
        break;
    case CMD_COUNT:
        code = print_result(pods, k8s_tools_count_pods_by_phase(pods, r->args[1], buf, cap),
                            buf);
        break;
    }
    free(buf);
    if (code >= 0)
        finish(r, code);
}

static void on_fatal(k8s_watch_t *w, int err, const char *line, void *arg)
{
    (void)w;
    struct run *r = arg;
    fprintf(stderr, "podrun k8s: %s\n", line);
    finish(r, err == -EACCES ? K8S_EXIT_DENIED : K8S_EXIT_API);
}

/* A retry of the watch: said on stderr, kept for the timeout's line. */
static void on_progress(k8s_watch_t *w, const char *line, void *arg)
{
    (void)w;
    struct run *r = arg;
    snprintf(r->last_retry, sizeof r->last_retry, "%s", line);
    fprintf(stderr, "podrun k8s: %s\n", line);
}

static void on_timeout(uv_timer_t *t)
{
    struct run *r = t->data;
    int wait = r->cmd->kind == CMD_WAIT_RUNNING || r->cmd->kind == CMD_WAIT_READY;
    if (wait && k8s_watch_lists(r->watch) > 0)
        fprintf(stderr, "podrun k8s: %s: not done within %gs\n", r->cmd->name, r->timeout_s);
    else
        fprintf(stderr, "podrun k8s: %s: no answer from the API server within %gs%s%s\n",
                r->cmd->name, r->timeout_s, r->last_retry[0] ? ": " : "", r->last_retry);
    finish(r, wait && k8s_watch_lists(r->watch) > 0 ? K8S_EXIT_TIMEOUT : K8S_EXIT_API);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct run *r = s->data;
    finish(r, 128 + signum);
}

/* This pod's IP as k8s_tools.py finds it (gethostbyname(gethostname())), unless the downward
 * API gave it as POD_IP. */
static int local_ip(char *out, size_t cap)
{
    const char *ip = identity_pod_ip();
    if (ip) {
        snprintf(out, cap, "%s", ip);
        return 0;
    }
    char hn[256];
    if (podrun_hostname(hn, sizeof hn) < 0) {
        fprintf(stderr, "podrun k8s: fetch_id: cannot read this host's name; set POD_IP\n");
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(hn, NULL, &hints, &res);
    if (rc || !res) {
        fprintf(stderr, "podrun k8s: fetch_id: this host's name %s does not resolve (%s); set "
                "POD_IP\n", hn, gai_strerror(rc));
        return -1;
    }
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)cap);
    freeaddrinfo(res);
    return 0;
}

static int parse_args(struct run *r, int argc, char **argv, const char **ns)
{
    static const struct option opts[] = {
        {"namespace", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+hn:t:", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'h':
            fputs(usage, stdout);
            return -1;
        case 'n':
            *ns = optarg;
            break;
        case 't':
            r->timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(r->timeout_s > 0) || r->timeout_s > 2147483.0)
                return usage_error("--timeout '%s': expected seconds, more than 0", optarg);
            break;
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error("no command; one of wait_pods_running, wait_containers_ready, "
                           "fetch_ips, fetch_ips_string, fetch_endpoints, fetch_id, "
                           "count_pods_by_phase");
    const char *name = argv[optind];
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0] && !r->cmd; i++)
        if (strcmp(name, cmds[i].name) == 0)
            r->cmd = &cmds[i];
    if (!r->cmd)
        return usage_error("unknown command '%s'", name);
    int nargs = argc - optind - 1;
    if (nargs < r->cmd->min_args || nargs > r->cmd->max_args)
        return usage_error("%s takes %s", r->cmd->name, r->cmd->args);
    r->args = argv + optind + 1;
    if (r->cmd->kind == CMD_WAIT_RUNNING) {
        char *end;
        errno = 0;
        r->desired = strtol(r->args[1], &end, 10);
        if (errno || end == r->args[1] || *end || r->desired < 0)
            return usage_error("wait_pods_running: N '%s' is not a number of pods", r->args[1]);
    }
    return 0;
}

int commands_k8s_main(int argc, char **argv)
{
    struct run r = {.last_count = -1};
    const char *ns = getenv("NAMESPACE");
    int rc = parse_args(&r, argc, argv, &ns);
    if (rc || !r.cmd || !r.args) /* without an error, parse_args named the command and its args */
        return rc < 0 ? 0 : rc;
    int wait = r.cmd->kind == CMD_WAIT_RUNNING || r.cmd->kind == CMD_WAIT_READY;
    if (!wait && r.timeout_s == 0)
        r.timeout_s = ONE_SHOT_TIMEOUT_S;
    if (r.cmd->kind == CMD_ID && local_ip(r.local_ip, sizeof r.local_ip))
        return K8S_EXIT_API;

    struct k8s_source src;
    k8s_source_from_env(&src);
    struct k8s_creds creds;
    char err[1024];
    if (k8s_creds_load(&src, &creds, err, sizeof err)) {
        fprintf(stderr, "podrun k8s: %s\n", err);
        return K8S_EXIT_API;
    }
    /* k8s_tools.py prints this before it asks anything */
    if (r.cmd->kind == CMD_WAIT_RUNNING || r.cmd->kind == CMD_WAIT_READY) {
        char head[2048];
        int n = r.cmd->kind == CMD_WAIT_RUNNING
                    ? k8s_tools_wait_running_header(r.args[0], r.args[1], head, sizeof head)
                    : k8s_tools_wait_ready_header(r.args[0], head, sizeof head);
        if (n > 0)
            say(head, (size_t)n);
    }
    r.loop = uv_default_loop();
    uv_timer_init(r.loop, &r.timer);
    r.timer.data = &r;
    uv_signal_init(r.loop, &r.sigterm);
    uv_signal_init(r.loop, &r.sigint);
    r.sigterm.data = r.sigint.data = &r;
    uv_signal_start(&r.sigterm, on_signal, SIGTERM);
    uv_signal_start(&r.sigint, on_signal, SIGINT);
    struct k8s_watch_params wp = {
        .namespace = ns && *ns ? ns : NULL, .label_selector = r.args[0],
        .on_change = on_change, .on_fatal = on_fatal, .on_progress = on_progress, .arg = &r,
    };
    if ((rc = http_client_new(r.loop, &r.http)) ||
        (rc = k8s_watch_start(r.loop, r.http, &creds, &wp, &r.watch))) {
        fprintf(stderr, "podrun k8s: cannot start: %s\n",
                rc == -ELIBACC ? http_library_error() : podrun_strerror(rc));
        finish(&r, K8S_EXIT_API);
    } else if (r.timeout_s > 0) {
        uv_timer_start(&r.timer, on_timeout, (uint64_t)(r.timeout_s * 1000.0), 0);
    }
    uv_run(r.loop, UV_RUN_DEFAULT);
    uv_loop_close(r.loop);
    k8s_creds_free(&creds);
    return r.code;
}
