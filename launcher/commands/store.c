/* launcher/commands/store.c — `podrun store`: the job store alone in the foreground (a drop-in
 * TCPStore server for any job, torch 1.13 and 2.x clients alike), and a small shell client for
 * looking into a running store. */
#include "launcher/commands/commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "podrun/store.h"
#include "rdzv/base/common.h"
#include "rdzv/store/server.h"

static const char usage[] =
    "usage: podrun store [--host H] [--port P] [LIMITS]     run a job store in the foreground\n"
    "       podrun store [--timeout S] COMMAND ADDR [ARGS]  talk to a running store\n"
    "\n"
    "The store speaks PyTorch's TCPStore protocol, 1.13 and 2.x dialects on one port, so\n"
    "TCPStore(host, port, is_master=False) clients and torchrun workers can use it. It prints\n"
    "\"podrun store: listening on H:P\" on stderr once bound; SIGTERM or SIGINT stop it.\n"
    "\n"
    "  --host H                   address to bind (default: every address, IPv6 and IPv4)\n"
    "  --port P                   port (default 29500; 0 picks a free one)\n"
    "  --max-key-len N            bytes per key (default 8K)\n"
    "  --max-value-len N          bytes per value (default 8M)\n"
    "  --max-keys-per-request N   keys in one CHECK/WAIT/MULTI_GET/MULTI_SET (default 128K)\n"
    "  --max-connections N        open client connections (default 65536)\n"
    "  --max-total-bytes N        keys and values held in all (default 1G)\n"
    "  --max-pending-bytes N      replies not yet read and requests not yet complete, all\n"
    "                             clients together (default 256M)\n"
    "  Sizes take a K, M or G suffix (powers of 1024). A client that breaks a limit or sends\n"
    "  bytes that are not a request is disconnected; everyone else is served on.\n"
    "\n"
    "Commands (ADDR is HOST:PORT; keys are sent as given: torch's client prefixes \"/\"):\n"
    "  get ADDR KEY               print the value (empty if the key does not exist)\n"
    "  set ADDR KEY VALUE         store VALUE\n"
    "  add ADDR KEY [N]           add N (default 1) to a counter, print the result\n"
    "  wait ADDR KEY...           wait until every KEY exists (exit 1 after --timeout)\n"
    "  keys ADDR                  print the number of keys\n"
    "  delete ADDR KEY            delete KEY, print 1 if it existed, else 0\n"
    "  ping ADDR                  check that a store answers\n"
    "  --timeout S                seconds to wait for the store and for its answers, `wait`\n"
    "                             included (default 30, at most 2147483)\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "podrun store: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see podrun store --help)\n");
    return 2;
}

/* "8M" → 8388608. Returns 0 or -1 when it is not a size. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    }
    if (*end || (shift && v > (SIZE_MAX >> shift)))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int parse_port(const char *s, uint16_t *out)
{
    long v;
    if (podrun_parse_int(s, 0, 65535, &v) < 0)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

/* ---- server ----------------------------------------------------------------------------- */

typedef struct run {
    uv_signal_t sigterm, sigint;
    store_server_t *srv;
} run_t;

static void on_closed(void *arg)
{
    (void)arg;
}

static void on_signal(uv_signal_t *sig, int signum)
{
    run_t *r = sig->data;
    (void)signum;
    if (r->srv) {
        store_server_close(r->srv, on_closed, NULL);
        r->srv = NULL;
    }
    uv_close((uv_handle_t *)&r->sigterm, NULL);
    uv_close((uv_handle_t *)&r->sigint, NULL);
}

/* The server's lines, on stderr as podrun store's own. */
static void on_log(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "podrun store: %s\n", line);
}

static int serve(const char *host, uint16_t port, const store_limits_t *lim)
{
    static const podrun_log_t log = {on_log, NULL};
    uv_loop_t loop;
    run_t r = {0};
    if (uv_loop_init(&loop) < 0) {
        fprintf(stderr, "podrun store: cannot start an event loop\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    int e = store_server_start(&loop, host, port, lim, &log, &r.srv);
    if (e < 0) {
        fprintf(stderr, "podrun store: cannot listen on %s:%u: %s (pick another --port or "
                        "--host)\n", host && *host ? host : "0.0.0.0", port, podrun_strerror(e));
        uv_run(&loop, UV_RUN_DEFAULT); /* lets the listeners that failed finish closing */
        uv_loop_close(&loop);
        return 1;
    }
    uv_signal_init(&loop, &r.sigterm);
    uv_signal_init(&loop, &r.sigint);
    r.sigterm.data = r.sigint.data = &r;
    uv_signal_start(&r.sigterm, on_signal, SIGTERM);
    uv_signal_start(&r.sigint, on_signal, SIGINT);
    fprintf(stderr, "podrun store: listening on %s:%u\n", host && *host ? host : "0.0.0.0",
            store_server_port(r.srv));
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}

/* ---- client commands -------------------------------------------------------------------- */

/* HOST:PORT or [V6]:PORT, the port named and not 0. */
static int split_addr(const char *addr, char *host, size_t hostlen, uint16_t *port)
{
    int p;
    bool has_port;
    if (podrun_hostport_parse(addr, host, hostlen, &p, &has_port) < 0 || !has_port || !p)
        return -1;
    *port = (uint16_t)p;
    return 0;
}

static int fail(const char *what, int err)
{
    fprintf(stderr, "podrun store: %s: %s\n", what, podrun_store_strerror(err));
    return 1;
}

static int client_cmd(const char *cmd, int argc, char **argv, int timeout_s)
{
    static const struct { const char *name; int min, max; } cmds[] = {
        {"get", 1, 1}, {"set", 2, 2}, {"add", 1, 2}, {"wait", 1, 1 << 20},
        {"keys", 0, 0}, {"delete", 1, 1}, {"ping", 0, 0},
    };
    int i, n = (int)(sizeof cmds / sizeof cmds[0]);
    for (i = 0; i < n && strcmp(cmds[i].name, cmd) != 0; i++)
        ;
    if (i == n)
        return usage_error("unknown command or argument '%s'", cmd);
    if (argc < 1)
        return usage_error("%s needs an address HOST:PORT", cmd);
    char host[256];
    uint16_t port;
    if (split_addr(argv[0], host, sizeof host, &port) < 0)
        return usage_error("'%s' is not an address HOST:PORT", argv[0]);
    if (argc - 1 < cmds[i].min || argc - 1 > cmds[i].max)
        return usage_error("wrong number of arguments for '%s'", cmd);
    int64_t delta = 1;
    if (!strcmp(cmd, "add") && argc == 3) {
        char *end;
        errno = 0;
        long long v = strtoll(argv[2], &end, 10);
        if (errno || end == argv[2] || *end)
            return usage_error("'%s' is not an integer for add", argv[2]);
        delta = v;
    }

    podrun_store_t *s;
    int r = podrun_store_connect(host, port, timeout_s * 1000, &s);
    if (r < 0) {
        fprintf(stderr, "podrun store: cannot reach a store at %s: %s\n", argv[0],
                podrun_store_strerror(r));
        return 1;
    }
    int rc = 0;
    char *val = NULL;
    size_t len = 0;
    int64_t num = 0;
    if (!strcmp(cmd, "get")) {
        if ((r = podrun_store_get(s, argv[1], &val, &len)) < 0)
            rc = fail("get", r);
        else {
            fwrite(val, 1, len, stdout);
            fputc('\n', stdout);
        }
    } else if (!strcmp(cmd, "set")) {
        if ((r = podrun_store_set(s, argv[1], argv[2], strlen(argv[2]))) < 0 ||
            (r = podrun_store_ping(s)) < 0) /* the ping makes sure the set was applied */
            rc = fail("set", r);
    } else if (!strcmp(cmd, "add")) {
        if ((r = podrun_store_add(s, argv[1], delta, &num)) < 0)
            rc = fail("add", r);
        else
            printf("%" PRId64 "\n", num);
    } else if (!strcmp(cmd, "wait")) {
        r = podrun_store_wait(s, (const char *const *)argv + 1, (size_t)argc - 1,
                              timeout_s * 1000);
        if (r < 0)
            rc = fail("wait", r);
    } else if (!strcmp(cmd, "keys")) {
        if ((r = podrun_store_num_keys(s, &num)) < 0)
            rc = fail("keys", r);
        else
            printf("%" PRId64 "\n", num);
    } else if (!strcmp(cmd, "delete")) {
        if ((r = podrun_store_delete(s, argv[1])) < 0)
            rc = fail("delete", r);
        else
            printf("%d\n", r);
    } else if (!strcmp(cmd, "ping")) {
        if ((r = podrun_store_ping(s)) < 0)
            rc = fail("ping", r);
        else
            printf("ok\n");
    }
    free(val);
    podrun_store_close(s);
    return rc;
}

/* ---- entry ------------------------------------------------------------------------------ */

int commands_store_main(int argc, char **argv)
{
    enum {
        O_HOST = 256, O_PORT, O_KEY, O_VALUE, O_KEYS, O_CONNS, O_BYTES, O_PENDING, O_TIMEOUT,
        O_HELP
    };
    static const struct option opts[] = {
        {"host", required_argument, 0, O_HOST},
        {"port", required_argument, 0, O_PORT},
        {"max-key-len", required_argument, 0, O_KEY},
        {"max-value-len", required_argument, 0, O_VALUE},
        {"max-keys-per-request", required_argument, 0, O_KEYS},
        {"max-connections", required_argument, 0, O_CONNS},
        {"max-total-bytes", required_argument, 0, O_BYTES},
        {"max-pending-bytes", required_argument, 0, O_PENDING},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    store_limits_t lim;
    store_limits_default(&lim);
    const char *host = "";
    uint16_t port = 29500;
    int timeout_s = 30;
    size_t v;

    optind = 1;
    opterr = 0;
    int c;
    /* "+": stop at the first non-option, so a command's arguments may start with '-' */
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        switch (c) {
        case O_HOST:
            host = optarg;
            break;
        case O_PORT:
            if (parse_port(optarg, &port) < 0)
                return usage_error("--port '%s' is not a port number 0-65535", optarg);
            break;
        case O_KEY: case O_VALUE: case O_KEYS: case O_CONNS: case O_BYTES: case O_PENDING:
            if (parse_size(optarg, &v) < 0 || v == 0)
                return usage_error("'%s' is not a positive size (like 4096, 8K, 8M, 1G)",
                                   optarg);
            if (c == O_KEY) lim.max_key_len = v;
            else if (c == O_VALUE) lim.max_value_len = v;
            else if (c == O_KEYS) lim.max_keys_per_req = v;
            else if (c == O_CONNS) lim.max_connections = v;
            else if (c == O_PENDING) lim.max_pending_bytes = v;
            else lim.max_total_bytes = v;
            break;
        case O_TIMEOUT:
            /* in milliseconds it must fit an int */
            if (parse_size(optarg, &v) < 0 || v > INT_MAX / 1000)
                return usage_error("--timeout '%s' is not a number of seconds from 0 to 2147483",
                                   optarg);
            timeout_s = (int)v;
            break;
        case 'h':
        case O_HELP:
            fputs(usage, stdout);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return client_cmd(argv[optind], argc - optind - 1, argv + optind + 1, timeout_s);
    return serve(host, port, &lim);
}
