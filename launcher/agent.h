/* launcher/agent.h — the agent's state machine: the one place that ties config, rendezvous,
 * environment, workers, logs, PID-1 duties and the failure report together.
 *
 *   INIT ──► RENDEZVOUS ──► RUNNING ──► STOPPING ──► EXITING ──► DONE
 *                              │  (a failure, a signal,   ▲
 *                              │   or leftovers after     │
 *                              └─ success) ───────────────┘ (nothing left to stop)
 *
 * RENDEZVOUS decides the worker ranks and the store the workers use; a restart goes from
 * STOPPING back to RENDEZVOUS with the next attempt number. */
#ifndef PODRUN_LAUNCHER_AGENT_H
#define PODRUN_LAUNCHER_AGENT_H

#include "config/config.h"

/* Runs the job described by cfg (finalized) to the end and returns podrun's exit status. */
int agent_run(struct cfg *cfg, char **envp);

#endif
