/* launcher/store_cmd.h — `podrun store`: run the job store alone, or talk to one. */
#ifndef PODRUN_LAUNCHER_STORE_CMD_H
#define PODRUN_LAUNCHER_STORE_CMD_H

/* argv[0] is "store". Returns the process exit code: 0 ok, 1 failure, 2 usage error. */
int store_cmd_main(int argc, char **argv);

#endif
