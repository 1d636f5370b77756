/* launcher/commands/commands.h — podrun's subcommands that are not a job: `podrun NAME ...`.
 * Each takes argv with argv[0] its own name and returns the process exit code: 0 ok, 1 failure,
 * 2 usage error. */
#ifndef PODRUN_LAUNCHER_COMMANDS_H
#define PODRUN_LAUNCHER_COMMANDS_H

#include <stddef.h>

#include "launcher/config/config.h"
#include "launcher/devices/node.h"

/* `podrun store`: the job store alone in the foreground, or a small client for one. */
int commands_store_main(int argc, char **argv);

/* `podrun k8s`: k8s_tools.py's commands (wait_pods_running, fetch_ips, ...) without Python; its
 * exit codes are its own (see its usage). */
int commands_k8s_main(int argc, char **argv);

/* `podrun env`: what podrun derives on this node for the workers, with the reasons. */
int commands_env_main(int argc, char **argv);

/* `podrun preflight-nccl`: one GPU's part of the nccl check, exec'd by the agent (not for
 * people: its options are podrun's own, its output one line for the agent). */
int pf_nccl_child_main(int argc, char **argv);

/* For a job and for `podrun env` alike, once every layer of cfg is in: the node's devices probed
 * (*out, calloc'd: node_free and free it), cfg finalized with their GPU count, the binding and the
 * variables planned. everything: also what the job's settings do not use (`podrun env` shows all
 * of the node). 0, or a negative code with one line in err (a usage error). */
int commands_node_prepare(struct cfg *cfg, char **envp, bool everything,
                          struct node_devices **out, char *err, size_t errlen);

/* The address the workers' MASTER_ADDR will be: the job store's host. */
const char *commands_master(const struct cfg *cfg);

/* `podrun status HOST[:PORT]`: a running job's round, nodes, restarts and last failure, read
 * from its job store; its exit codes are its own (see its usage). */
int commands_status_main(int argc, char **argv);

#endif
