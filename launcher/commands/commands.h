/* launcher/commands/commands.h — podrun's subcommands that are not a job: `podrun NAME ...`.
 * Each takes argv with argv[0] its own name and returns the process exit code: 0 ok, 1 failure,
 * 2 usage error. */
#ifndef PODRUN_LAUNCHER_COMMANDS_H
#define PODRUN_LAUNCHER_COMMANDS_H

/* `podrun store`: the job store alone in the foreground, or a small client for one. */
int commands_store_main(int argc, char **argv);

/* `podrun k8s`: k8s_tools.py's commands (wait_pods_running, fetch_ips, ...) without Python; its
 * exit codes are its own (see its usage). */
int commands_k8s_main(int argc, char **argv);

#endif
