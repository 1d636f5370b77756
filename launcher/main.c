/* launcher/main.c — podrun's entry: subcommands, the configuration layers, then the agent. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "podrun/version.h"
#include "config.h"
#include "store_cmd.h"

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

static int cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "store") == 0)
        return store_cmd_main(argc - 1, argv + 1);
    ensure_std_fds();

    struct cfg cfg;
    char err[512];
    cfg_init(&cfg);
    int r = cfg_load_env(&cfg, environ, err, sizeof err);
    if (!r)
        r = cfg_parse_args(&cfg, argc, argv, err, sizeof err);
    if (!r && cfg.help) {
        cfg_usage(stdout);
        cfg_free(&cfg);
        return 0;
    }
    if (!r && cfg.version) {
        printf("podrun %s\n", PODRUN_VERSION_STRING);
        cfg_free(&cfg);
        return 0;
    }
    if (!r)
        r = cfg_finalize(&cfg, cpu_count(), 0, err, sizeof err);
    if (r) {
        fprintf(stderr, "podrun: %s\n", err);
        cfg_free(&cfg);
        return 2;
    }
    if (cfg.print_config) {
        cfg_print(&cfg, stdout);
        cfg_free(&cfg);
        return 0;
    }
    int code = agent_run(&cfg, environ);
    cfg_free(&cfg);
    return code;
}
