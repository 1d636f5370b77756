/* launcher/commands/env.c — `podrun env [OPTIONS] [PROGRAM...]`: what podrun derives on this node
 * for its workers, and why, without starting anything.
 *
 * The options are a job's (the same front-end, the same environment layers), so `podrun env` with
 * the job's own command line shows exactly what that job's workers would get: the GPUs and HCAs
 * found, the interface towards the master, every NCCL/Gloo/CUDA/OpenMP variable podrun sets, leaves
 * alone because it was already set, or does not set — each with its reason —, each local rank's
 * CPUs under --numa-binding, and the NCCL the torch of the workers' python loads (file, version). The master is the job's (--rdzv-endpoint, else --master-addr, else what
 * discovery finds in a scheduler's pod or a hostfile), resolved here as the agent would after its
 * rendezvous. */
#include "launcher/commands/commands.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/config/config.h"
#include "launcher/devices/node.h"
#include "launcher/devices/torchlib.h"
#include "launcher/discover/identity.h"
#include "launcher/frontends/frontend.h"
#include "rdzv/base/common.h"

extern char **environ;

int commands_node_prepare(struct cfg *cfg, char **envp, bool everything,
                          struct node_devices **out, char *err, size_t errlen)
{
    struct node_devices *nd = calloc(1, sizeof *nd);
    int r = 0;
    if (!nd)
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    if (node_probe(nd, cfg, envp) < 0)
        r = podrun_failf(-EINVAL, err, errlen, "--sysroot '%s': path too long; give a shorter one",
                         cfg->sysroot);
    if (!r && everything)
        node_probe_all(nd);
    if (!r)
        r = cfg_finalize(cfg, node_cpu_count(nd), node_gpu_count(nd), err, errlen);
    if (!r)
        r = node_plan(nd, cfg, err, errlen);
    if (r) {
        node_free(nd);
        free(nd);
        return r;
    }
    *out = nd;
    return 0;
}

/* Which NCCL the torch of the workers' python loads, its file and version, and why that one. */
static void env_nccl_print(const char *python)
{
    struct torchlib tl;
    char err[512], file[PATH_MAX], version[16], why[PATH_MAX + 640];
    if (torchlib_find(python, environ, &tl, err, sizeof err) < 0)
        snprintf(why, sizeof why, "from the loader's path: %s", err);
    else if (tl.nccl[0])
        snprintf(why, sizeof why, "the one the torch of the workers' python (%s) loads: its "
                 "wheel's, beside %s", python, tl.torch);
    else if (tl.torch[0])
        snprintf(why, sizeof why, "from the loader's path: the torch of the workers' python (%s) "
                 "carries no NCCL of its own (%s)", python, tl.torch);
    else
        snprintf(why, sizeof why, "from the loader's path: the workers' python (%s) has no torch",
                 python);
    if (torchlib_nccl_probe(tl.nccl[0] ? tl.nccl : NULL, file, sizeof file, version,
                            sizeof version, err, sizeof err) < 0)
        printf("%-11s none: %s\n", "NCCL", err);
    else
        printf("%-11s %s, version %s\n", "NCCL", file, version);
    printf("%-11s %s\n", "", why);
}

const char *commands_master(const struct cfg *cfg)
{
    return cfg->standalone ? "127.0.0.1" : cfg->rdzv_host;
}

int commands_env_main(int argc, char **argv)
{
    static char placeholder[] = "(no program)";
    static char *none[] = {placeholder, NULL};
    struct cfg cfg;
    char err[512];
    /* the machine a job's discovery reads, so that in a scheduler's pod the master is the job's */
    struct discover_host host;
    static struct identity_machine machine;
    identity_host_init(&host, &machine);
    cfg_init(&cfg);
    int r = frontend_load_host(&fe_podrun, &cfg, argc, argv, environ, &host, err, sizeof err);
    if (!r && cfg.help) {
        printf("usage: podrun env [OPTIONS] [PROGRAM [ARGS...]]\n\n"
               "Prints what podrun derives on this node for the workers of the job these options\n"
               "describe (the same options and PODRUN_/PET_ variables as a job): the devices\n"
               "found, every NCCL/Gloo/CUDA/OpenMP variable it sets, leaves alone or does not set,\n"
               "with the reason, and each local rank's CPUs. Nothing is started.\n");
        cfg_free(&cfg);
        return 0;
    }
    if (!r && !cfg.program)
        cfg_set_program(&cfg, none, 1);
    struct node_devices *nd = NULL;
    if (!r)
        r = commands_node_prepare(&cfg, environ, true, &nd, err, sizeof err);
    if (r) {
        fprintf(stderr, "podrun env: %s\n", err);
        cfg_free(&cfg);
        return 2;
    }
    node_resolve_master(nd, commands_master(&cfg));
    printf("podrun env: %d worker%s on this node; podrun never changes a variable that is set\n",
           cfg.nproc_per_node, cfg.nproc_per_node == 1 ? "" : "s");
    node_print(nd, stdout, false);
    env_nccl_print(cfg.python);
    node_free(nd);
    free(nd);
    cfg_free(&cfg);
    return 0;
}
