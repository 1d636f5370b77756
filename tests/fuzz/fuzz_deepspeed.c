/* tests/fuzz/fuzz_deepspeed.c — libFuzzer target for the deepspeed command line: its words with
 * a hostfile, and what the head builds from them. Input: command-line words, one per line (at
 * most 32; "train.py" is added after them), then after a line "--" the text of /job/hostfile
 * (no such line: no hostfile). The machine is fixed: host name worker-1, one address 10.0.0.2.
 * Checks that nothing crashes or leaks, that an error is one line, and that a result is one
 * job: a node rank below the node count, workers matching the slot ids, a head's world_info
 * that decodes to that many hosts (an elastic head's: a count in its range); then the word
 * list and world_info decoder take the same bytes, and the head's command lines are built from
 * the result. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/config.h"
#include "launcher/discover/host.h"
#include "launcher/fanout_cmd.h"
#include "launcher/frontends/deepspeed_cli.h"
#include "launcher/frontends/deepspeed_hosts.h"
#include "launcher/frontends/frontend.h"

#define WORDS_MAX 32

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
    (void)h, (void)path, (void)names, (void)n;
    return -ENOENT;
}

static const char *const addrs[] = {"10.0.0.2"};

static int fz_self(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out)
{
    (void)h;
    out->hostname = "worker-1";
    out->fqdn = with_fqdn ? "worker-1.job.ns.svc" : NULL;
    out->addrs = addrs;
    out->naddrs = 1;
    return 0;
}

static void one_line(const char *err)
{
    if (strchr(err, '\n'))
        abort();
}

static int ignore(void *arg, const char *k, const char *v)
{
    (void)arg, (void)k, (void)v;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[WORDS_MAX + 3];
    int argc = 0;
    argv[argc++] = "deepspeed";
    file_text = NULL;
    char *p = buf;
    while (p && argc < WORDS_MAX + 1) {
        char *nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (nl)
            *nl = '\0';
        if (!strcmp(p, "--")) {
            file_text = nl ? nl + 1 : "";
            file_len = strlen(file_text);
            break;
        }
        if (strlen(p) != (size_t)((nl ? nl : buf + size) - p))
            break;   /* a NUL inside: the words end */
        argv[argc++] = p;
        p = nl ? nl + 1 : NULL;
    }
    int nopts = argc - 1;
    argv[argc++] = "train.py";
    argv[argc] = NULL;

    struct discover_host h = {fz_read, fz_list, fz_self, NULL};
    struct cfg c;
    char err[512] = "";
    cfg_init(&c);
    int r = frontend_load_host(&fe_deepspeed, &c, argc, argv, NULL, &h, err, sizeof err);
    if (!r && !c.help && !c.version)
        r = cfg_finalize(&c, 4, 0, err, sizeof err);
    if (r) {
        one_line(err);
    } else if (!c.help && !c.version && c.program) {
        if (c.node_rank >= c.nnodes_max || c.nproc_per_node < 1)
            abort();
        if (c.ds_devices) {
            int n = 1;
            for (const char *d = c.ds_devices; *d; d++)
                n += *d == ',';
            if (n != c.nproc_per_node)
                abort();
        }
        if (c.ds_mode == CFG_DS_MODE_HEAD) {
            struct resources w;
            /* one agent per host: the node count, or (elastic) at least its least; hosts
             * beyond --max_elastic_nodes wait as spares, as under torch's elastic agent */
            if (deepspeed_hosts_world_decode(c.ds_world_info, &w, err, sizeof err) ||
                (c.ds_elastic ? (int)w.count < c.nnodes_min : (int)w.count != c.nnodes_max))
                abort();
            resources_free(&w);
            char **fwd = NULL, **words = NULL;
            int nfwd = 0;
            if (!deepspeed_cli_forward_options(argv + 1, nopts, &fwd, &nfwd) &&
                !deepspeed_hosts_words_split(c.ds_launcher_args, &words, NULL, err, sizeof err)) {
                struct fanout_cmd_agent rem = {"/bin/podrun", c.ds_world_info, c.master_addr,
                                               c.master_port, "0123456789abcdef", "/tmp", true,
                                               true, fwd, nfwd, c.program, c.program_argc, NULL,
                                               0, "/w", c.ds_venv_script};
                char *cmd = NULL, *stop = NULL, *one = NULL, fan[16], **pa = NULL;
                if (!fanout_cmd_start(&rem, &cmd) && !fanout_cmd_stop(&rem, &stop) &&
                    !fanout_cmd_pdsh_argv("a,b", 2, words, fanout_cmd_rcmd_is_exec(words, NULL),
                                          cmd, fan, &pa))
                    fanout_cmd_expand_host(cmd, "a", 1, &one);
                free(pa);
                free(cmd);
                free(stop);
                free(one);
            }
            free(fwd);
            deepspeed_hosts_words_free(words);
        }
    }
    cfg_free(&c);

    /* the same bytes as world_info, launcher_args and a .deepspeed_env file */
    struct resources w;
    if (deepspeed_hosts_world_decode(buf, &w, err, sizeof err) == 0)
        resources_free(&w);
    else
        one_line(err);
    char **words = NULL;
    if (deepspeed_hosts_words_split(buf, &words, NULL, err, sizeof err) == 0)
        deepspeed_hosts_words_free(words);
    if (deepspeed_hosts_env_file((const char *)data, size, "f", ignore, NULL, err, sizeof err))
        one_line(err);
    free(buf);
    return 0;
}
