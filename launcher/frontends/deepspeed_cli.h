/* launcher/frontends/deepspeed_cli.h — the deepspeed front-end's one call besides its vocabulary
 * (frontend.h: fe_deepspeed): which of the user's options the head passes on to every host's
 * agent. Pure code. */
#ifndef PODRUN_LAUNCHER_FRONTENDS_DEEPSPEED_CLI_H
#define PODRUN_LAUNCHER_FRONTENDS_DEEPSPEED_CLI_H

/* The options argv[0..nopts) (the command line between the program name and the script) less
 * the words only the head reads (the hostfile and its selection, --launcher*, --ssh_port,
 * --venv_script, --master_addr/--master_port/--node_rank, which the head gives each host
 * itself), each with its value when one follows. *out (malloc'd, NULL-terminated) points into
 * argv. 0 or -ENOMEM. */
int deepspeed_cli_forward_options(char **argv, int nopts, char ***out, int *nout);

#endif
