/* launcher/fanout.h — the head node of a `deepspeed` job with several hosts: it starts one podrun
 * agent per host through pdsh (or ssh where pdsh is not installed) and waits for them.
 *
 * The agents do the job: they rendezvous at the first host (--master_addr:--master_port, node
 * rank = pdsh's %n), so a failure anywhere stops every host through the job store, as in any
 * podrun job. The head only carries what DeepSpeed carries to the hosts (the NCCL*, PYTHON*,
 * UCX*, ... variables and .deepspeed_env), passes pdsh's output through, and stops the job:
 *  - SIGINT/SIGTERM: a second fan-out runs each host's stop command, SIGTERM to the pid its
 *    agent wrote for this job (the agent stops its own workers' process groups) — never a
 *    pattern that matches other jobs; the head exits 128+signal once pdsh is done;
 *  - a host pdsh cannot reach (its command exits 255 before the host printed anything): one line
 *    naming the host, then the same stop of every other host, since they would wait for it.
 * Exit: the code of the host whose worker failed first (its worker's code, 128+N for a signal,
 * as on that node) rather than a stopped host's 170-174; else pdsh -S's (the largest code of
 * the hosts, 255 for one not reached), or 128+signal for the head's own. */
#ifndef PODRUN_LAUNCHER_FANOUT_H
#define PODRUN_LAUNCHER_FANOUT_H

#include "launcher/config/config.h"

/* Runs the head. opts/nopts: the user's options (main's argv between the program name and the
 * script), passed on to the agents less the head's own words. Returns the exit code. */
int fanout_run(const struct cfg *c, char **opts, int nopts, char **envp);

#endif
