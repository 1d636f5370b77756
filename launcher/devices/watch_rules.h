/* launcher/devices/watch_rules.h — what the checks during a run (devcheck.h) judge by: which
 * Xid errors mean a GPU cannot go on, what an InfiniBand port's state and an interface's
 * operstate say, and NCCL's syntax for naming HCAs and interfaces (NCCL_IB_HCA,
 * NCCL_SOCKET_IFNAME). Pure: no I/O. */
#ifndef PODRUN_DEVICES_WATCH_RULES_H
#define PODRUN_DEVICES_WATCH_RULES_H

#include <stdbool.h>

/* What Xid `xid` means when it is one after which the GPU (or its memory, or its NVLinks) cannot
 * be trusted for the rest of the run; NULL for the others (an application's own fault, such as
 * 13 or 43, ends that process, which is seen as its exit). */
const char *watch_xid_critical(unsigned long long xid);

/* An InfiniBand port's sysfs state ("4: ACTIVE"): its number (1 DOWN, 2 INIT, 3 ARMED,
 * 4 ACTIVE, 5 ACTIVE_DEFER), -1 when the text is not one. */
int watch_ib_state(const char *text);
/* The name after the number ("ACTIVE"), or the text itself. */
const char *watch_ib_state_name(const char *text);

/* An interface's operstate is one traffic can pass ("up", or "unknown" as loopback and some
 * virtual interfaces say). */
bool watch_if_up(const char *operstate);

/* Whether NCCL's list `spec` selects device `name` (port `port`; 0 when ports do not apply):
 * comma-separated "name[:port]" entries, matched as name prefixes unless the list starts with
 * '=' (exact names), and inverted when it starts with '^' (every device but those). An entry
 * without a port selects every port. NULL or "" selects everything. */
bool watch_nccl_selects(const char *spec, const char *name, int port);

#endif
