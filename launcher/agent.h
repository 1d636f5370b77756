/* launcher/agent.h — the agent's state machine: the one place that ties config, rendezvous,
 * environment, workers, logs, PID-1 duties and the failure report together.
 *
 *   INIT ──► RENDEZVOUS ──► STARTING ──► RUNNING ──► STOPPING ──► EXITING ──► DONE
 *                                             │  (a failure, a signal,   ▲
 *                                             │   or leftovers after     │
 *                                             └─ success) ───────────────┘ (nothing left to stop)
 *
 * RENDEZVOUS decides the worker ranks and the store the workers use; STARTING derives what the
 * workers get from the node (once) and checks the nodes (--preflight) before any worker starts;
 * a restart goes from STOPPING back to RENDEZVOUS with the next attempt number, and one decided
 * while STARTING (no worker ran: the check excluded other nodes, a node was lost) goes through
 * STOPPING too. The states, the events and the table that moves between them are in
 * agent_fsm.h; doc/design.md#the-agents-states-and-events describes them. */
#ifndef PODRUN_LAUNCHER_AGENT_H
#define PODRUN_LAUNCHER_AGENT_H

#include "launcher/config/config.h"
#include "launcher/devices/node.h"

/* Runs the job described by cfg (finalized) on the node nd describes (node_plan done) to the end
 * and returns podrun's exit status. */
int agent_run(struct cfg *cfg, char **envp, struct node_devices *nd);

#endif
