/* launcher/devices/nic.h — this machine's network interfaces. */
#ifndef PODRUN_LAUNCHER_DEVICES_NIC_H
#define PODRUN_LAUNCHER_DEVICES_NIC_H

#include <stddef.h>

/* The name of the interface that holds the IPv4 or IPv6 address `addr` ("eth1"). gloo picks its
 * address from the host name otherwise, which on a multi-homed node (or in a network namespace)
 * is often not the one the other nodes reach: the agent gives workers GLOO_SOCKET_IFNAME of the
 * interface of --local-addr. 0; -EINVAL when addr is not an IP address; -ENOENT when no
 * interface holds it; -errno when the interfaces cannot be listed. */
int nic_for_addr(const char *addr, char *ifname, size_t len);

#endif
