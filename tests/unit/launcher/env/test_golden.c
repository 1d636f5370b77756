/* tests/unit/launcher/env/test_golden.c — golden tables: for each front-end, a command line (and
 * config file, environment, rendezvous assignment, paddle's published endpoints) in, every
 * worker's argv and whole environment out, as the .txt files of tests/fixtures/golden/<front-end>
 * state.
 *
 * A case file:
 *   frontend: accelerate | paddle | torchrun
 *   args: the words after `podrun <frontend> [launch]`, split on spaces
 *   env: NAME=value            the inherited environment (repeated)
 *   file: PATH                 a config file the front-end may read, its lines follow as "| ..."
 *   assign: node_rank=R nnodes=N rank_base=B world=W store=HOST:PORT restart=K
 *   cores: N                   physical cores (accelerate's --cpu threads)
 *   paddle: c=..;s=..;t=..;d=..   one per node in node-rank order (';' separates its lines)
 *   ip: ADDR                   paddle's node address
 *   error: TEXT                the configuration is refused with one line holding TEXT
 *   worker: N                  then "argv: ..." and its environment, one NAME=value a line,
 *                              sorted; every variable is compared, nothing else may be there.
 * The expected tables were written from accelerate's and Paddle's source (reference/
 * launchers.md §2.4, §3.2), not from podrun's output. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/discover/host.h"
#include "launcher/env/accelerate.h"
#include "launcher/env/argv.h"
#include "launcher/env/nccl.h"
#include "launcher/env/paddle.h"
#include "launcher/env/torch.h"
#include "launcher/frontends/frontend.h"

#define MAXL 256

struct golden {
    char name[1024];
    char frontend[32];
    char args[2048];
    char *env[64];
    int nenv;
    char file_path[1024];
    char file[8192];
    int node_rank, nnodes, rank_base, world, restart, cores;
    char store_host[64];
    int store_port;
    char *paddle[16];
    int npaddle;
    char ip[64];
    char error[512];
    int nworkers;
    char *want[32][MAXL];   /* per worker: "argv: ..." then the env lines */
    int nwant[32];
};

static struct golden *G;   /* the case being run, for the file reader */

/* The machine a case runs on: its one file, no directories, no names. */
static int fake_read(const struct discover_host *h, const char *path, size_t max, char **text,
                     size_t *len)
{
    (void)h;
    if (!G->file_path[0] || strcmp(path, G->file_path))
        return -ENOENT;
    if (strlen(G->file) > max)
        return -EFBIG;
    *text = strdup(G->file);
    *len = strlen(G->file);
    return *text ? 0 : -ENOMEM;
}

static int fake_list(const struct discover_host *h, const char *path, char ***names,
                     size_t *count)
{
    (void)h, (void)path, (void)names, (void)count;
    return -ENOENT;
}

static int fake_self(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out)
{
    (void)h, (void)with_fqdn, (void)out;
    return -ENOENT;
}

static char *dupline(const char *s)
{
    char *d = strdup(s);
    size_t n = strlen(d);
    while (n && (d[n - 1] == '\n' || d[n - 1] == '\r'))
        d[--n] = '\0';
    return d;
}

static int load(const char *path, struct golden *g)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", path);
    g->nnodes = g->world = 1;
    g->cores = 4;
    snprintf(g->store_host, sizeof g->store_host, "127.0.0.1");
    g->store_port = 29500;
    char line[4096];
    int w = -1;
    while (fgets(line, sizeof line, f)) {
        char *l = dupline(line);
        if (!l[0] || l[0] == '#') {
            free(l);
            continue;
        }
        if (!strncmp(l, "frontend: ", 10))
            snprintf(g->frontend, sizeof g->frontend, "%s", l + 10);
        else if (!strncmp(l, "args: ", 6))
            snprintf(g->args, sizeof g->args, "%s", l + 6);
        else if (!strncmp(l, "env: ", 5) && g->nenv < 63)
            g->env[g->nenv++] = strdup(l + 5);
        else if (!strncmp(l, "file: ", 6))
            snprintf(g->file_path, sizeof g->file_path, "%s", l + 6);
        else if (!strncmp(l, "| ", 2) || !strcmp(l, "|")) {
            size_t o = strlen(g->file);
            snprintf(g->file + o, sizeof g->file - o, "%s\n", l[1] ? l + 2 : "");
        } else if (!strncmp(l, "assign: ", 8)) {
            char host[64];
            if (sscanf(l + 8, "node_rank=%d nnodes=%d rank_base=%d world=%d store=%63[^:]:%d "
                       "restart=%d", &g->node_rank, &g->nnodes, &g->rank_base, &g->world, host,
                       &g->store_port, &g->restart) == 7)
                snprintf(g->store_host, sizeof g->store_host, "%s", host);
        } else if (!strncmp(l, "cores: ", 7))
            g->cores = atoi(l + 7);
        else if (!strncmp(l, "paddle: ", 8) && g->npaddle < 16) {
            char *v = strdup(l + 8);
            for (char *p = v; *p; p++)
                *p = *p == ';' ? '\n' : *p;
            g->paddle[g->npaddle++] = v;
        } else if (!strncmp(l, "ip: ", 4))
            snprintf(g->ip, sizeof g->ip, "%s", l + 4);
        else if (!strncmp(l, "error: ", 7))
            snprintf(g->error, sizeof g->error, "%s", l + 7);
        else if (!strncmp(l, "worker: ", 8)) {
            w = atoi(l + 8);
            if (w >= 0 && w < 32 && w + 1 > g->nworkers)
                g->nworkers = w + 1;
        } else if (w >= 0 && w < 32 && g->nwant[w] < MAXL) {
            g->want[w][g->nwant[w]++] = strdup(l);
            free(l);
            continue;
        }
        free(l);
    }
    fclose(f);
    return 0;
}

static void unload(struct golden *g)
{
    for (int i = 0; i < g->nenv; i++)
        free(g->env[i]);
    for (int i = 0; i < g->npaddle; i++)
        free(g->paddle[i]);
    for (int w = 0; w < 32; w++)
        for (int i = 0; i < g->nwant[w]; i++)
            free(g->want[w][i]);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Compares worker w's actual argv and environment with the table, line by line. */
static void compare(struct golden *g, int w, char **argv, char **env)
{
    char *got[MAXL];
    int n = 0;
    char av[2048] = "argv:";
    for (char **a = argv; *a; a++)
        snprintf(av + strlen(av), sizeof av - strlen(av), " %s", *a);
    got[n++] = av;
    char *sorted[MAXL];
    int ns = 0;
    for (char **e = env; *e && ns < MAXL; e++)
        sorted[ns++] = *e;
    qsort(sorted, (size_t)ns, sizeof *sorted, cmp);
    for (int i = 0; i < ns && n < MAXL; i++)
        got[n++] = sorted[i];
    int bad = 0;
    for (int i = 0; i < n || i < g->nwant[w]; i++) {
        const char *a = i < n ? got[i] : "(nothing)", *b = i < g->nwant[w] ? g->want[w][i]
                                                                            : "(nothing)";
        if (strcmp(a, b)) {
            if (!bad++)
                fprintf(stderr, "%s worker %d:\n", g->name, w);
            fprintf(stderr, "  line %d: got  %s\n          want %s\n", i + 1, a, b);
        }
    }
    CHECK_EQ_INT(bad, 0);
}

static void run_case(struct golden *g)
{
    G = g;
    const struct frontend *fe = frontend_for_command(g->frontend);
    if (!strcmp(g->frontend, "torchrun"))
        fe = &fe_torchrun;
    CHECK(fe != NULL);
    if (!fe)
        return;
    char *words[128];
    int argc = 0;
    words[argc++] = (char *)(fe->command ? fe->command : "torchrun");
    if (fe->verb)
        words[argc++] = (char *)fe->verb;
    char args[2048];
    snprintf(args, sizeof args, "%s", g->args);
    for (char *t = strtok(args, " "); t && argc < 127; t = strtok(NULL, " "))
        words[argc++] = t;
    words[argc] = NULL;
    char *envp[65];
    for (int i = 0; i < g->nenv; i++)
        envp[i] = g->env[i];
    envp[g->nenv] = NULL;

    struct cfg c;
    char err[512] = "";
    const struct discover_host host = {fake_read, fake_list, fake_self, NULL};
    cfg_init(&c);
    int r = frontend_load_host(fe, &c, argc, words, envp, &host, err, sizeof err);
    if (!r)
        r = cfg_finalize(&c, 4, 0, err, sizeof err);
    if (g->error[0]) {
        CHECK(r == -EINVAL && strstr(err, g->error) && !strchr(err, '\n'));
        if (!(r == -EINVAL && strstr(err, g->error)))
            fprintf(stderr, "%s: want error '%s', got %d '%s'\n", g->name, g->error, r, err);
        cfg_free(&c);
        return;
    }
    CHECK_EQ_INT(r, 0);
    if (r) {
        fprintf(stderr, "%s: %s\n", g->name, err);
        cfg_free(&c);
        return;
    }
    CHECK_EQ_INT(c.nproc_per_node, g->nworkers);
    char **argv = NULL;
    CHECK_EQ_INT(env_argv_build(&c, &argv), 0);
    struct env_paddle_plan plan;
    memset(&plan, 0, sizeof plan);
    int ns = c.paddle_run_mode == CFG_PADDLE_PS ? c.paddle_server_num : 0;
    if (c.worker_env == CFG_WORKER_ENV_PADDLE)
        CHECK_EQ_INT(env_paddle_plan(g->paddle, g->npaddle, g->node_rank, c.nproc_per_node, ns,
                                     c.paddle_ips != NULL, &plan), 0);
    char devs[256] = "", bad[64];
    env_paddle_devices(envp, c.paddle_devices, 0, devs, sizeof devs, bad, sizeof bad);
    /* what the agent derives from a node of no GPU, HCA or known interface (node_worker_vars):
     * the launcher's OMP_NUM_THREADS rule */
    struct nccl_facts facts = {.nlocal = c.nproc_per_node, .omp = nccl_omp_rule(c.worker_env)};
    struct nccl_env ne;
    CHECK_EQ_INT(nccl_env_derive(&facts, envp, &ne), 0);
    char dvals[NCCL_ENV_MAX][NCCL_ENV_VALUE_LEN + 64], *derived[NCCL_ENV_MAX + 1];
    int nderived = 0;
    for (int k = 0; k < ne.n; k++)
        if (ne.var[k].action == NCCL_ENV_SET) {
            snprintf(dvals[nderived], sizeof dvals[nderived], "%s=%s", ne.var[k].name,
                     ne.var[k].value);
            derived[nderived] = dvals[nderived];
            nderived++;
        }
    derived[nderived] = NULL;
    for (int i = 0; i < c.nproc_per_node && i < g->nworkers; i++) {
        char errfile[64];
        snprintf(errfile, sizeof errfile, "/run/podrun/%d/error.json", i);
        struct env_worker ew = {
            .derived = derived, .local_rank = i, .rank = g->rank_base + i,
            .group_rank = g->node_rank,
            .role_rank = g->rank_base + i, .local_world_size = c.nproc_per_node,
            .world_size = g->world, .group_world_size = g->nnodes, .role_world_size = g->world,
            .role_name = c.role, .master_addr = g->store_host, .master_port = g->store_port,
            .restart_count = g->restart, .max_restarts = c.max_restarts, .run_id = c.rdzv_id,
            .use_agent_store = true, .error_file = errfile,
            .signals_to_handle = c.signals_to_handle,
        };
        char **env = NULL;
        struct env_notes notes;
        if (c.worker_env == CFG_WORKER_ENV_ACCELERATE) {
            struct env_accelerate m = {g->cores, 0, "/work"};
            r = env_accelerate_build(envp, &ew, &c, &m, &env, &notes);
        } else if (c.worker_env == CFG_WORKER_ENV_PADDLE) {
            struct env_paddle_node n = {g->nnodes, g->ip, "node0", "/work/log", "/tmp/gloo",
                                        devs};
            r = env_paddle_worker_env(envp, &c, &plan, &n, i, &ew, &env);
        } else {
            r = env_torch_build(envp, &ew, &env, &notes);
        }
        CHECK_EQ_INT(r, 0);
        if (!r)
            compare(g, i, argv, env);
        free(env);
    }
    env_paddle_plan_free(&plan);
    free(argv);
    cfg_free(&c);
}

static void run_dir(const char *frontend)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", GOLDEN_DIR, frontend);
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    CHECK(n > 2);
    int cases = 0;
    for (int i = 0; i < n; i++) {
        const char *f = list[i]->d_name;
        size_t l = strlen(f);
        if (l > 4 && !strcmp(f + l - 4, ".txt")) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, f);
            struct golden *g = calloc(1, sizeof *g);
            CHECK(g && load(path, g) == 0);
            int before = check_failures;
            run_case(g);
            fprintf(stderr, "  %s %s/%s\n", check_failures == before ? "ok  " : "FAIL", frontend,
                    f);
            unload(g);
            free(g);
            cases++;
        }
        free(list[i]);
    }
    free(list);
    CHECK(cases > 0);
}

static void test_accelerate(void)
{
    run_dir("accelerate");
}

static void test_paddle(void)
{
    run_dir("paddle");
}

static void test_torchrun(void)
{
    run_dir("torchrun");
}

int main(void)
{
    RUN(test_accelerate);
    RUN(test_paddle);
    RUN(test_torchrun);
    return check_result();
}
