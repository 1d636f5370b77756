/* launcher/devices/nic.h — the network interface the workers' sockets should use.
 *
 * NCCL's bootstrap and Gloo each pick an interface on their own, and on a node with several
 * (a second NIC, docker0, the host ends of veth pairs) they often pick one the other nodes cannot
 * reach, and the job hangs at its first barrier. podrun asks the kernel instead: the interface the
 * route to the master address goes through (netlink RTM_GETROUTE; /proc/net/route under the
 * sysroot when netlink is unavailable), or, on the master itself, the interface that holds the
 * address. lo, docker*, veth* and virbr* are taken only when the master is local or sits on that
 * bridge (an on-link route), never as a guess.
 *
 * The deciding steps are pure functions over plain structs (nic_choose, nic_nccl_auto,
 * nic_route_proc), so their rules are table-tested; nic_for_master gathers the facts and calls
 * them. */
#ifndef PODRUN_DEVICES_NIC_H
#define PODRUN_DEVICES_NIC_H

#include <arpa/inet.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#define NIC_MAX_ADDRS 128

/* One address of one interface, as getifaddrs(3) lists them (in its order). */
struct nic_addr {
    char name[IF_NAMESIZE];
    unsigned flags;                 /* IFF_UP, IFF_RUNNING, IFF_LOOPBACK, ... */
    int family;                     /* AF_INET or AF_INET6 */
    unsigned char addr[16];         /* 4 bytes for AF_INET */
};

struct nic_addrs {
    int n;
    struct nic_addr a[NIC_MAX_ADDRS];
};

/* The kernel's answer to "how would you reach DST". */
struct nic_route {
    bool found;
    char oif[IF_NAMESIZE];          /* output interface */
    bool gateway;                   /* through a gateway; false: DST is on-link */
    bool local;                     /* DST is one of this host's addresses */
    bool has_src;
    unsigned char src[16];          /* the source address the kernel would use */
};

struct nic_choice {
    char ifname[IF_NAMESIZE];       /* "" when none fits */
    char addr[INET6_ADDRSTRLEN];    /* this node's address on it, "" unknown */
    char master[INET6_ADDRSTRLEN];  /* the master address, numeric */
    bool master_local;              /* the master address is this node's (or loopback) */
    char nccl_auto[160];            /* the interfaces NCCL's own selection would use, "a,b" */
    bool nccl_agrees;               /* ... which is exactly ifname */
    char reason[256];               /* why ifname, for `podrun env` */
};

/* This host's interface addresses (AF_INET and AF_INET6), in getifaddrs order. */
int nic_addrs_read(struct nic_addrs *out);

/* The route to `dst` (4 or 16 bytes by family) from the kernel over netlink. 0 with
 * out->found set; -ENETUNREACH and the like when the kernel has no route; other -errno when
 * netlink cannot be used. */
int nic_route_get(int family, const unsigned char *dst, struct nic_route *out);

/* The IPv4 route to `dst` from the text of /proc/net/route: the longest matching prefix among the
 * routes that are up, the lowest metric among equals. Pure. 0, or -ENETUNREACH when none. */
int nic_route_proc(const char *text, const unsigned char dst[4], struct nic_route *out);

/* Which interfaces NCCL's own selection would use, from the addresses alone: running
 * interfaces whose names start with "ib" if any; else all but docker*, lo and virbr*; else
 * docker*, then lo, then virbr*. Written comma-separated into out. Pure. */
void nic_nccl_auto(const struct nic_addrs *a, char *out, size_t len);

/* Decides the interface for a master address (family AF_INET/AF_INET6, 4 or 16 bytes) from the
 * host's addresses and the kernel's route (rt may say found = false). Pure. */
void nic_choose(const struct nic_addrs *a, const struct nic_route *rt, int family,
                const unsigned char *master, struct nic_choice *out);

/* All of the above for `master` (a numeric address or a host name, resolved with getaddrinfo,
 * which may block). -EINVAL with a line in err when the name does not resolve. */
int nic_for_master(const char *master, struct nic_choice *out, char *err, size_t errlen);

/* The interface that holds the numeric address `addr` (e.g. --local-addr). 0; -EINVAL when addr
 * is not a numeric address; -ENOENT when no interface holds it. */
int nic_ifname_for_addr(const char *addr, char *ifname, size_t len);

#endif
