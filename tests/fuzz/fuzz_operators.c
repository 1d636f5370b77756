/* tests/fuzz/fuzz_operators.c — libFuzzer target for discovery from a pod's environment and
 * mounted files: every scheduler's adapter, the detection order, --discovery's modes and the
 * hostfile source. Input: one byte of mode (auto, env, hostfile, none, or --hostfile), then
 * NAME=value lines (at most 64, each a variable), then after a line "--" the text that every file
 * the adapters read holds. The machine is fixed: host name w-1, FQDN w-1.j.ns.svc, one address.
 * Checks that nothing crashes or leaks, that an error is one line, and that a result is one job:
 * a node rank below the node count. Each adapter whose variables are there is also applied
 * alone, whatever detection would have picked, so that the later ones see every input too. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/config.h"
#include "launcher/discover/host.h"
#include "launcher/frontends/frontend.h"
#include "launcher/operators/operators.h"
#include "launcher/operators/paddlejob.h"

#define ENV_MAX 64

static const char *file_text;
static size_t file_len;

static int fz_read(const struct discover_host *h, const char *path, size_t max, char **text,
                   size_t *len)
{
    (void)h, (void)path;
    if (!file_text)
        return -ENOENT;
    if (file_len > max)
        return -EFBIG;
    if (!(*text = malloc(file_len + 1)))
        return -ENOMEM;
    memcpy(*text, file_text, file_len);
    (*text)[file_len] = '\0';
    *len = file_len;
    return 0;
}

static int fz_list(const struct discover_host *h, const char *path, char ***names, size_t *n)
{
    (void)h, (void)path;
    if (!file_text)
        return -ENOENT;
    char **v = calloc(2, sizeof *v);
    if (!v)
        return -ENOMEM;
    v[0] = strdup("master.host");
    v[1] = strdup("worker.host");
    *names = v;
    *n = 2;
    return 0;
}

static int fz_self(const struct discover_host *h, bool fqdn, struct hostfile_self *out)
{
    static const char *addrs[] = {"10.0.0.2"};
    (void)h;
    out->hostname = "w-1";
    out->fqdn = fqdn ? "w-1.j.ns.svc" : NULL;
    out->addrs = addrs;
    out->naddrs = 1;
    return 0;
}

static void one_line(int r, const char *err)
{
    if (r && (!err[0] || strchr(err, '\n')))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const modes[] = {"auto", "env", "hostfile", "none"};
    char err[1024], *buf, *env[ENV_MAX + 1];
    size_t n = 0;
    if (size < 1 || !(buf = malloc(size)))
        return 0;
    int mode = data[0] % 5;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';     /* the last byte ends the text (input NULs end variables early) */
    file_text = NULL;
    for (char *p = buf; p && *p && n < ENV_MAX;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (!strcmp(p, "--")) {
            file_text = nl ? nl + 1 : "";
            file_len = strlen(file_text);
            break;
        }
        env[n++] = p;
        p = nl ? nl + 1 : NULL;
    }
    env[n] = NULL;

    struct discover_host host = {fz_read, fz_list, fz_self, NULL};
    char *argv[] = {"podrun", "--discovery", (char *)modes[mode % 4], "train.py", NULL};
    char *argv_hf[] = {"podrun", "--hostfile", "/job/hostfile", "train.py", NULL};
    struct cfg c;
    cfg_init(&c);
    err[0] = '\0';
    int r = frontend_load_host(&fe_podrun, &c, 4, mode == 4 ? argv_hf : argv, env, &host, err,
                               sizeof err);
    if (!r)
        r = cfg_finalize(&c, 4, 0, err, sizeof err);
    one_line(r, err);
    if (!r && !c.print_config && c.node_rank >= c.nnodes_max)
        abort();
    cfg_free(&c);

    static const struct op_adapter *const all[] = {&op_volcano, &op_paddlejob, &op_mpijob,
                                                   &op_trainjob, &op_pytorchjob, &op_lws,
                                                   &op_jobset, &op_slurm};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        struct op_ctx x = {env, &host, &c, mode == 2};
        struct cfg_src why;
        cfg_init(&c);
        x.cfg = &c;
        err[0] = '\0';
        if (all[i]->detect(&x, &why) && (r = all[i]->apply(&c, &x, err, sizeof err)))
            one_line(r, err);
        cfg_free(&c);
    }
    struct paddlejob_env p;
    err[0] = '\0';
    one_line(paddlejob_env_parse(&p, env, err, sizeof err), err);
    paddlejob_env_free(&p);
    free(buf);
    return 0;
}
