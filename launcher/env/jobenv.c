/* launcher/env/jobenv.c — the workers' environment per front-end, and paddle's endpoint agreement
 * through the job store (see jobenv.h). */
#include "launcher/env/jobenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/env/accelerate.h"
#include "launcher/env/deepspeed.h"
#include "launcher/env/environ.h"
#include "launcher/env/paddle.h"
#include "launcher/output/jsonline.h"
#include "rdzv/base/common.h"

#define MAX_PORTS 2049   /* servers + trainers + the master candidate */

/* ---- this node ------------------------------------------------------------------------------- */

/* psutil's cpu_count(logical=False): the distinct core sibling lists of the online CPUs. */
static int physical_cores(void)
{
    char seen[256][64];
    int n = 0;
    for (int cpu = 0; cpu < 4096; cpu++) {
        char p[96], buf[64];
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/core_cpus_list", cpu);
        FILE *f = fopen(p, "r");
        if (!f) {
            snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                     cpu);
            f = fopen(p, "r");
        }
        if (!f) {
            if (cpu > 0 && access("/sys/devices/system/cpu", F_OK) == 0 && n > 0)
                break;
            continue;
        }
        bool got = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        if (!got)
            continue;
        int k = 0;
        while (k < n && strcmp(seen[k], buf))
            k++;
        if (k == n && n < 256)
            snprintf(seen[n++], sizeof seen[0], "%s", buf);
    }
    if (n > 0)
        return n;
    long l = sysconf(_SC_NPROCESSORS_ONLN);
    return l > 0 ? (int)l : 1;
}

/* Paddle's node ip: gethostbyname(getfqdn(gethostname())), 127.0.0.1 when that fails; --host
 * (or POD_IP, or --local-addr) wins. */
static void node_ip(const struct cfg *c, char *out, size_t cap)
{
    if (c->local_addr) {
        snprintf(out, cap, "%s", c->local_addr);
        return;
    }
    char host[256];
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    snprintf(out, cap, "127.0.0.1");
    if (gethostname(host, sizeof host) || getaddrinfo(host, NULL, &hints, &res) || !res)
        return;
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)cap);
    freeaddrinfo(res);
}

static int mkdir_p(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return -errno;
            *s = '/';
        }
    return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

/* DeepSpeed's launch.py makes the directory and names the files after its start time, local
 * time to the second. */
static int ds_rank_log_dir(struct jobenv *je, char *err, size_t errlen)
{
    const char *dir = je->cfg->ds_each_rank_log;
    int r = mkdir_p(dir);
    if (r)
        return podrun_failf(r, err, errlen, "cannot create the log directory %s "
                            "(--enable_each_rank_log): %s; it must be a directory", dir,
                            strerror(-r));
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) ||
        !strftime(je->ds_log_stamp, sizeof je->ds_log_stamp, "%Y%m%d%H%M%S", &tm))
        snprintf(je->ds_log_stamp, sizeof je->ds_log_stamp, "%lld", (long long)now);
    return 0;
}

int jobenv_init(struct jobenv *je, uv_loop_t *loop, const struct cfg *c, char **envp,
                const char *node_name, char *err, size_t errlen)
{
    memset(je, 0, sizeof *je);
    je->loop = loop;
    je->cfg = c;
    je->envp = envp;
    je->node_name = node_name;
    if (!getcwd(je->cwd, sizeof je->cwd))
        snprintf(je->cwd, sizeof je->cwd, ".");
    if (c->worker_env == CFG_WORKER_ENV_ACCELERATE)
        je->physical_cores = physical_cores();
    if (jobenv_ds_rank_logs(c))
        return ds_rank_log_dir(je, err, errlen);
    if (c->worker_env != CFG_WORKER_ENV_PADDLE)
        return 0;
    node_ip(c, je->ip, sizeof je->ip);
    if (c->paddle_run_mode == CFG_PADDLE_PS)
        je->nservers = c->paddle_server_num;
    int n = c->nproc_per_node;
    je->log_fd = malloc((size_t)n * sizeof *je->log_fd);
    if (!je->log_fd)
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    for (int i = 0; i < n; i++)
        je->log_fd[i] = -1;
    char abs[PATH_MAX];
    int r = mkdir_p(c->paddle_log_dir);
    if (r || !realpath(c->paddle_log_dir, abs))
        return podrun_failf(r ? r : -errno, err, errlen, "cannot create the log directory %s "
                            "(--log_dir): %s", c->paddle_log_dir, strerror(r ? -r : errno));
    if (!(je->log_dir = strdup(abs)))
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    return 0;
}

void jobenv_cancel(struct jobenv *je)
{
    if (je->client) {
        store_aclient_close(je->client);
        je->client = NULL;
    }
    for (int i = 0; je->values && i < je->nnodes; i++)
        free(je->values[i]);
    free(je->values);
    je->values = NULL;
    je->ready = NULL;
}

void jobenv_free(struct jobenv *je)
{
    jobenv_cancel(je);
    env_paddle_plan_free(&je->plan);
    free(je->local_devices);
    free(je->log_fd);
    free(je->log_dir);
    je->local_devices = NULL;
    je->log_fd = NULL;
    je->log_dir = NULL;
}

bool jobenv_is_service(const struct jobenv *je, int lr)
{
    return lr < je->nservers;
}

bool jobenv_node_service(const struct jobenv *je)
{
    return je->nservers > 0 && je->nservers >= je->cfg->nproc_per_node;
}

/* ---- ports ----------------------------------------------------------------------------------- */

/* n ports that are free on ip now, all different: each is bound until every one is picked. */
static int free_ports(const char *ip, int n, int *ports)
{
    int fds[MAX_PORTS], r = 0, k = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    for (; k < n && !r; k++) {
        socklen_t l = sizeof sa;
        sa.sin_port = 0;
        fds[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[k] < 0 || bind(fds[k], (struct sockaddr *)&sa, sizeof sa) < 0 ||
            getsockname(fds[k], (struct sockaddr *)&sa, &l) < 0)
            r = -errno;
        else
            ports[k] = ntohs(sa.sin_port);
    }
    for (int i = 0; i < k; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return r;
}

/* The ports of `list`'s entries whose host is `host`, in list order. */
static int listed_ports(const char *list, const char *host, int *ports, int max)
{
    int n = 0;
    for (const char *p = list; p && *p && n < max;) {
        size_t l = strcspn(p, ",");
        char item[256], h[256];
        int port;
        bool given;
        snprintf(item, sizeof item, "%.*s", (int)(l < 255 ? l : 255), p);
        if (!podrun_hostport_parse(item, h, sizeof h, &port, &given) && given &&
            !strcmp(h, host))
            ports[n++] = port;
        p += l;
        if (*p == ',')
            p++;
    }
    return n;
}

/* "ip:p1,ip:p2,..." */
static void join_endpoints(const char *ip, const int *ports, int n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < n && o < cap; i++) {
        char ep[300];
        podrun_hostport_format(ip, ports[i], ep, sizeof ep);
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "", ep);
    }
}

/* This node's value for the round: c=<master candidate>, s=<servers>, t=<trainers>,
 * d=<each trainer's devices, ':' within one, ',' between>. */
static int compose_mine(struct jobenv *je, int nproc, char *err, size_t errlen)
{
    const struct cfg *c = je->cfg;
    int ns = je->nservers, nt = nproc - ns;
    int ports[MAX_PORTS] = {0};
    if (nproc + 1 > MAX_PORTS)
        return podrun_failf(-E2BIG, err, errlen, "too many workers");
    int r = 0;
    if (c->paddle_servers && c->paddle_trainers) {
        const char *host = strstr(c->paddle_servers, "127.0.0.1") ? "127.0.0.1" : je->ip;
        if (listed_ports(c->paddle_servers, host, ports, ns) != ns ||
            listed_ports(c->paddle_trainers, host, ports + ns, nt) != nt)
            return podrun_failf(-EINVAL, err, errlen, "--servers/--trainers changed under podrun");
        if (host != je->ip)   /* printing je->ip into itself would empty it */
            snprintf(je->ip, sizeof je->ip, "%s", host);
        ports[nproc] = 0;
    } else if (c->paddle_ips && !ns) {
        for (int i = 0; i < nt; i++)
            ports[i] = c->paddle_start_port + i;
        r = free_ports(je->ip, 1, ports + nproc);
    } else {
        r = free_ports(je->ip, nproc + 1, ports);
    }
    if (r)
        return podrun_failf(r, err, errlen, "cannot find free ports on %s for the workers: %s",
                            je->ip, podrun_strerror(r));
    char s[1024], t[1024], cand[300], d[512] = "", devs[256] = "", bad[64];
    if (env_paddle_devices(je->envp, c->paddle_devices, 0, devs, sizeof devs, bad, sizeof bad))
        return podrun_failf(-EINVAL, err, errlen, "--devices %s: device %s is not visible on this "
                            "node (CUDA_VISIBLE_DEVICES)", c->paddle_devices, bad);
    free(je->local_devices);
    je->local_devices = strdup(devs);
    /* each trainer's devices: all of them for a lone trainer, else one each */
    size_t o = 0;
    for (int i = 0; devs[0] && i < nt && o < sizeof d; i++) {
        char one[sizeof devs] = "";
        const char *p = devs;
        for (int k = 0; k < i && p; k++)
            p = (p = strchr(p, ',')) ? p + 1 : NULL;
        if (nt == 1)
            snprintf(one, sizeof one, "%s", devs);
        else if (p)
            snprintf(one, sizeof one, "%.*s", (int)strcspn(p, ","), p);
        for (char *q = one; *q; q++)
            *q = *q == ',' ? ':' : *q;
        if (one[0])
            o += (size_t)snprintf(d + o, sizeof d - o, "%s%s", o ? "," : "", one);
    }
    join_endpoints(je->ip, ports, ns, s, sizeof s);
    join_endpoints(je->ip, ports + ns, nt, t, sizeof t);
    if (ports[nproc])
        podrun_hostport_format(je->ip, ports[nproc], cand, sizeof cand);
    else
        cand[0] = '\0';
    snprintf(je->mine, sizeof je->mine, "c=%s\ns=%s\nt=%s\nd=%s\n", cand, s, t, d);
    return 0;
}

/* ---- the agreement --------------------------------------------------------------------------- */

/* Every node's value is in: the job's plan (env/paddle.h), and the legacy launcher's
 * endpoints.log beside the worker logs. */
static int make_plan(struct jobenv *je, char *why, size_t wlen)
{
    env_paddle_plan_free(&je->plan);
    int r = env_paddle_plan(je->values, je->nnodes, je->node_rank, je->cfg->nproc_per_node,
                            je->nservers, je->cfg->paddle_ips != NULL, &je->plan);
    if (r)
        return podrun_failf(r, why, wlen, "out of memory");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/endpoints.log", je->log_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "PADDLE_TRAINER_ENDPOINTS: \n");
        for (const char *p = je->plan.trainers; *p;) {
            size_t l = strcspn(p, ",");
            fprintf(f, "%s%.*s", p == je->plan.trainers ? "" : "\n", (int)l, p);
            p += l;
            if (*p == ',')
                p++;
        }
        fclose(f);
    }
    return 0;
}

static void finish(struct jobenv *je, int status, const char *why)
{
    jobenv_ready_cb cb = je->ready;
    if (je->client) {
        store_aclient_close(je->client);
        je->client = NULL;
    }
    je->ready = NULL;
    if (cb)
        cb(je, status, why);
}

static void on_got(store_aclient_t *cl, int status, const char *val, size_t len, int64_t num,
                   void *arg)
{
    struct jobenv *je = arg;
    (void)cl, (void)num;
    if (!je->ready || status == UV_ECANCELED)
        return;
    char why[256];
    if (status) {
        snprintf(why, sizeof why, "cannot read the workers' endpoints from the job store: %s",
                 podrun_strerror(status));
        finish(je, status, why);
        return;
    }
    if (!(je->values[je->got] = strndup(val, len))) {
        finish(je, -ENOMEM, "out of memory");
        return;
    }
    if (++je->got < je->nnodes)
        return;
    int r = make_plan(je, why, sizeof why);
    finish(je, r, r ? why : NULL);
}

static void on_waited(store_aclient_t *cl, int status, const char *val, size_t len, int64_t num,
                      void *arg)
{
    struct jobenv *je = arg;
    (void)val, (void)len, (void)num;
    if (!je->ready || status == UV_ECANCELED)
        return;
    if (status) {
        char why[256];
        snprintf(why, sizeof why, "the other nodes did not say where their workers listen "
                 "within %.0fs: %s", je->wait_ms / 1000.0, podrun_strerror(status));
        finish(je, status, why);
        return;
    }
    for (int k = 0; k < je->nnodes; k++) {
        char key[128];
        snprintf(key, sizeof key, "%s%d", je->key_prefix, k);
        int r = store_aclient_get(cl, key, on_got, je);
        if (r) {
            finish(je, r, "cannot ask the job store for the workers' endpoints");
            return;
        }
    }
}

static void on_set(store_aclient_t *cl, int status, const char *val, size_t len, int64_t num,
                   void *arg)
{
    (void)cl, (void)status, (void)val, (void)len, (void)num, (void)arg;
}

/* This node's value, then a WAIT for every node's. */
static void publish(struct jobenv *je, store_aclient_t *cl)
{
    char key[128];
    snprintf(key, sizeof key, "%s%d", je->key_prefix, je->node_rank);
    int r = store_aclient_set(cl, key, je->mine, strlen(je->mine), on_set, je);
    char (*keys)[128] = malloc((size_t)je->nnodes * sizeof *keys);
    const char **kp = malloc((size_t)je->nnodes * sizeof *kp);
    for (int k = 0; !r && keys && kp && k < je->nnodes; k++) {
        snprintf(keys[k], sizeof keys[k], "%s%d", je->key_prefix, k);
        kp[k] = keys[k];
    }
    if (!r && (!keys || !kp))
        r = -ENOMEM;
    if (!r)
        r = store_aclient_wait(cl, kp, (size_t)je->nnodes, je->wait_ms, on_waited, je);
    free(keys);
    free(kp);
    if (r)
        finish(je, r, "cannot publish this node's worker endpoints in the job store");
}

static void on_open(store_aclient_t *cl, int status, const char *val, size_t len, int64_t num,
                    void *arg)
{
    struct jobenv *je = arg;
    (void)val, (void)len, (void)num;
    if (!je->ready || status == UV_ECANCELED)
        return;
    if (status) {
        char why[256];
        snprintf(why, sizeof why, "node rank 0 did not open the round's endpoints in the job "
                 "store within %.0fs: %s", je->wait_ms / 1000.0, podrun_strerror(status));
        finish(je, status, why);
        return;
    }
    publish(je, cl);
}

/* The store of node rank 0 is emptied for each round's workers once that node is assigned (the
 * etcd backend; the c10d host before any assignment), which may be after a faster node has
 * written to it: node rank 0 marks the round open after that, and the others publish only then. */
static void on_connected(store_aclient_t *cl, int status, void *arg)
{
    struct jobenv *je = arg;
    char why[256];
    if (!je->ready) {
        if (!status)
            store_aclient_close(cl);
        return;
    }
    if (status) {
        je->client = NULL;   /* freed after this callback */
        snprintf(why, sizeof why, "cannot reach the job store to agree on the workers' "
                 "endpoints: %s", podrun_strerror(status));
        finish(je, status, why);
        return;
    }
    char key[128];
    snprintf(key, sizeof key, "%sopen", je->key_prefix);
    int r;
    if (je->node_rank == 0) {
        if (!(r = store_aclient_set(cl, key, "1", 1, on_set, je)))
            publish(je, cl);
    } else {
        const char *kp[] = {key};
        r = store_aclient_wait(cl, kp, 1, je->wait_ms, on_open, je);
    }
    if (r)
        finish(je, r, "cannot publish this node's worker endpoints in the job store");
}

int jobenv_prepare(struct jobenv *je, const rdzv_assignment_t *as, int nproc, const char *dir,
                   jobenv_ready_cb ready, void *data)
{
    je->rank_base = as->rank_base;
    if (je->cfg->worker_env != CFG_WORKER_ENV_PADDLE)
        return 0;
    jobenv_cancel(je);
    je->round = as->round;
    je->node_rank = as->node_rank;
    je->nnodes = as->nnodes;
    je->got = 0;
    je->data = data;
    uint64_t ms = je->cfg->join_timeout_ms;
    je->wait_ms = ms > INT32_MAX ? INT32_MAX : (int)ms;
    snprintf(je->key_prefix, sizeof je->key_prefix, "paddle/r%d/", as->round);
    snprintf(je->gloo_path, sizeof je->gloo_path, "%s/gloo", dir);
    char why[256];
    int r = compose_mine(je, nproc, why, sizeof why);
    if (r)
        return r;
    if (!(je->values = calloc((size_t)je->nnodes, sizeof *je->values)))
        return -ENOMEM;
    je->ready = ready;
    r = store_aclient_connect(je->loop, as->store_host, as->store_port, je->wait_ms, on_connected,
                              je, &je->client);
    if (r) {
        je->ready = NULL;
        return r;
    }
    store_aclient_source(je->client, je->cfg->local_addr);   /* for the store's allow-list */
    return 1;
}

/* ---- per worker ------------------------------------------------------------------------------ */

int jobenv_worker_env(struct jobenv *je, int lr, const struct env_worker *ew, char ***out,
                      struct env_notes *notes)
{
    const struct cfg *c = je->cfg;
    switch (c->worker_env) {
    case CFG_WORKER_ENV_ACCELERATE: {
        struct env_accelerate m = {je->physical_cores, 0, je->cwd};
        return env_accelerate_build(je->envp, ew, c, &m, out, notes);
    }
    case CFG_WORKER_ENV_PADDLE: {
        struct env_paddle_node n = {je->nnodes, je->ip, je->node_name, je->log_dir,
                                    je->gloo_path, je->local_devices};
        if (notes)
            *notes = (struct env_notes){0};
        return env_paddle_worker_env(je->envp, c, &je->plan, &n, lr, ew, out);
    }
    case CFG_WORKER_ENV_DEEPSPEED: {
        struct ds_worker d = {ew->group_rank, ew->group_world_size, c->ds_devices};
        return env_deepspeed_build(je->envp, ew, &d, out, notes);
    }
    default:
        return env_torch_build(je->envp, ew, out, notes);
    }
}

/* By name: '=' sorts below the digits, so "A=" against "A1=" is not the names' order. */
static int envlog_cmp(const void *x, const void *y)
{
    const char *a = *(const char *const *)x, *b = *(const char *const *)y;
    size_t la = strcspn(a, "="), lb = strcspn(b, "=");
    int r = strncmp(a, b, la < lb ? la : lb);
    return r ? r : (la > lb) - (la < lb);
}

/* The environment v[0..n) (sorted) as Python's json.dump(indent=4, sort_keys=True) lays it out. */
static void backup_env(const char *path, char **v, size_t n)
{
    struct jsonbuf b;
    jsonline_init(&b);
    jsonline_raw(&b, "{");
    for (size_t i = 0; i < n; i++) {
        size_t nl = strcspn(v[i], "=");
        jsonline_raw(&b, i ? ",\n    " : "\n    ");
        jsonline_str(&b, v[i], nl);
        jsonline_raw(&b, ": ");
        jsonline_str(&b, v[i] + nl + (v[i][nl] == '='), strlen(v[i] + nl + (v[i][nl] == '=')));
    }
    jsonline_raw(&b, n ? "\n}" : "}");
    FILE *f = b.oom ? NULL : fopen(path, "we");
    if (f) {
        fwrite(b.buf, 1, b.len, f);
        fclose(f);
    }
    jsonline_free(&b);
}

int jobenv_paddle_files(const struct jobenv *je, int lr, char ***env)
{
    if (je->cfg->worker_env != CFG_WORKER_ENV_PADDLE || !je->log_dir)
        return 0;
    size_t n = 0;
    while ((*env)[n])
        n++;
    char **v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    memcpy(v, *env, n * sizeof *v);
    qsort(v, n, sizeof *v, envlog_cmp);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/envlog.%d", je->log_dir, lr);
    FILE *f = fopen(path, je->cfg->paddle_log_overwrite ? "we" : "ae");
    if (f) {
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s\n", v[i]);
        fclose(f);
    }
    const char *id = env_get(*env, "PADDLE_TRAINER_ID");
    if (!id) {
        free(v);
        return 0;
    }
    snprintf(path, sizeof path, "%s/backup_env.%s.json", je->log_dir, id);
    backup_env(path, v, n);
    free(v);
    /* what Paddle leaves to the file: a list too long for the environment */
    const char *lim = env_get(je->envp, "PADDLE_ENV_LIMIT_LEN");
    long max = lim ? strtol(lim, NULL, 10) : 48000;
    static const char *const lists[] = {"TRAINER_IP_PORT_LIST", "PADDLE_TRAINER_ENDPOINTS"};
    const char *drop[3] = {NULL};
    size_t nd = 0;
    for (size_t i = 0; i < 2; i++) {
        const char *val = env_get(*env, lists[i]);
        if (val && (long)strlen(val) >= max)
            drop[nd++] = lists[i];
    }
    struct env_set s = ENV_SET_INIT;
    env_set_add(&s, "PADDLE_BACKUP_ENV_PATH", "%s", path);
    char **out;
    int r = env_set_finish(&s, *env, drop, &out);
    if (r)
        return r;
    free(*env);
    *env = out;
    return 0;
}

int jobenv_log_fd(struct jobenv *je, int lr, int stream, int *fd, char *path, size_t plen)
{
    *fd = -1;
    if (jobenv_ds_rank_logs(je->cfg)) {
        /* stdout and stderr in one file, as launch.py's Popen(stdout=f, stderr=f) */
        snprintf(path, plen, "%s/%s_rank%d.log", je->cfg->ds_each_rank_log, je->ds_log_stamp,
                 je->rank_base + lr);
        int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (stream == 1 ? O_TRUNC : 0);
        *fd = open(path, flags, 0644);
        return *fd < 0 ? -errno : 0;
    }
    if (je->cfg->worker_env != CFG_WORKER_ENV_PADDLE || !je->log_dir)
        return 0;
    bool server = jobenv_is_service(je, lr);
    snprintf(path, plen, "%s/%s.%d", je->log_dir, server ? "serverlog" : "workerlog",
             server ? lr : lr - je->nservers);
    /* both streams append to one file; --log_overwrite empties it first, once */
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
    if (stream == 1 && je->cfg->paddle_log_overwrite)
        flags |= O_TRUNC;
    *fd = open(path, flags, 0644);
    return *fd < 0 ? -errno : 0;
}
