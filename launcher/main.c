/* launcher/main.c — podrun's entry: a command that is not a job (`podrun store`, `podrun k8s`,
 * `podrun env`), or a job under the front-end podrun was started as (podrun, a link named
 * torchrun, accelerate, paddle-launch or deepspeed) or named by its first word (`podrun
 * accelerate launch`, `podrun paddle`, `podrun deepspeed`): the configuration layers, then the
 * agent (or a deepspeed head's fan-out). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/agent.h"
#include "launcher/commands/commands.h"
#include "launcher/config/config.h"
#include "launcher/devices/node.h"
#include "launcher/discover/identity.h"
#include "launcher/fanout.h"
#include "launcher/frontends/frontend.h"
#include "podrun/version.h"

extern char **environ;

/* A child must never get podrun's own pipes as its 0/1/2 by accident: if podrun was started
 * with any of them closed, fill the slot with /dev/null. */
static void ensure_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
}

/* --pid-file (the head's stop finds this job's agent by it) and DeepSpeed's --save_pid
 * (/tmp/<pid>.deepspeed): podrun's pid while it runs. */
static void pid_file(const char *path, bool create)
{
    if (!create) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    } else {
        fprintf(stderr, "podrun: cannot write the pid file %s: %s\n", path, strerror(errno));
    }
}

/* The configured job: a deepspeed head fans out (fanout.c); a node runs its workers like any
 * job. argv[0] is the program or command name. */
static int run_configured(const struct frontend *fe, struct cfg *cfg, char **argv,
                          struct node_devices *nd)
{
    char save[64] = "";
    if (cfg->ds_mode == CFG_DS_MODE_LOCAL && fe == &fe_deepspeed)
        fprintf(stderr, "podrun: Unable to find hostfile, will proceed with training with local "
                "resources only.\n");
    if (cfg->ds_save_pid)
        snprintf(save, sizeof save, "/tmp/%d.deepspeed", (int)getpid());
    if (save[0])
        pid_file(save, true);
    if (cfg->ds_pid_file)
        pid_file(cfg->ds_pid_file, true);
    int code = cfg->ds_mode == CFG_DS_MODE_HEAD
                   ? fanout_run(cfg, argv + 1, (int)(cfg->program - argv) - 1, environ)
                   : agent_run(cfg, environ, nd);
    if (cfg->ds_pid_file)
        pid_file(cfg->ds_pid_file, false);
    if (save[0])
        pid_file(save, false);
    return code;
}

/* `podrun NAME ...` for a command that is not a job. */
static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"store", commands_store_main},
    {"k8s", commands_k8s_main},
    {"env", commands_env_main},
    {"preflight-nccl", pf_nccl_child_main},
    {"status", commands_status_main},
};

/* A job under front-end fe: argv[0] is the program or command name. */
static int run_job(const struct frontend *fe, int argc, char **argv)
{
    struct cfg cfg;
    char err[512];
    /* the machine discovery reads: mounted hostfiles, this host's names and addresses */
    struct discover_host host;
    static struct identity_machine machine;
    identity_host_init(&host, &machine);
    cfg_init(&cfg);
    int r = frontend_load_host(fe, &cfg, argc, argv, environ, &host, err, sizeof err);
    if (!r && cfg.help) {
        if (fe->usage)
            fe->usage(stdout);
        else
            cfg_usage(stdout);
        cfg_free(&cfg);
        return 0;
    }
    if (!r && cfg.version) {
        printf("podrun %s\n", PODRUN_VERSION_STRING);
        cfg_free(&cfg);
        return 0;
    }
    /* the devices first: --nproc-per-node gpu|auto count the GPUs */
    struct node_devices *nd = NULL;
    if (!r)
        r = commands_node_prepare(&cfg, environ, false, &nd, err, sizeof err);
    if (r) {
        fprintf(stderr, "podrun: %s\n", err);
        cfg_free(&cfg);
        return 2;
    }
    if (cfg.print_config) {
        node_resolve_master(nd, commands_master(&cfg));
        printf("%-32s %s\n", "front-end", fe->name);
        cfg_print(&cfg, stdout);
        node_print(nd, stdout, true);
        node_free(nd);
        free(nd);
        cfg_free(&cfg);
        return 0;
    }
    int code = run_configured(fe, &cfg, argv, nd);
    node_free(nd);
    free(nd);
    cfg_free(&cfg);
    return code;
}

int main(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    ensure_std_fds();
    const struct frontend *fe = frontend_for_program(argv[0]);
    const struct frontend *sub = fe == &fe_podrun && argc > 1 ? frontend_for_command(argv[1])
                                                               : NULL;
    if (sub)   /* `podrun accelerate launch ...`, `podrun deepspeed ...` */
        return run_job(sub, argc - 1, argv + 1);
    return run_job(fe, argc, argv);
}
