/* launcher/devices/ib.h — the node's InfiniBand and RoCE ports, and whether this container can
 * use them.
 *
 * Two views, merged per device. sysfs (under sysroot.h): /sys/class/infiniband/<dev>/ports/<p>/
 * {state, link_layer, gids/N, gid_attrs/types/N, gid_attrs/ndevs/N}, and which device has a
 * /dev/infiniband/uverbsN (/sys/class/infiniband_verbs/uverbsN/ibdev). libibverbs
 * (dlopen("libibverbs.so.1")): the device list, and for each device it can open, its ports as the
 * provider reports them. A device verbs opened is described by verbs; any other by sysfs.
 *
 * What NCCL needs to use a port: state ACTIVE, link layer InfiniBand or Ethernet (RoCE), the
 * device's uverbs character device inside the container, and for RoCE a usable GID: podrun picks
 * the lowest index whose type is RoCE v2 and whose address is IPv4-mapped and not link-local —
 * the one NCCL 2.21+ picks by default. Empty GID slots (unreadable type, zero GID) are skipped,
 * so sparse tables (SR-IOV and macvlan pods) work. */
#ifndef PODRUN_DEVICES_IB_H
#define PODRUN_DEVICES_IB_H

#include <net/if.h>
#include <stdbool.h>

#define IB_DEV_MAX 32       /* NCCL uses at most 32 HCAs */
#define IB_PORT_MAX 4
#define IB_NAME_LEN 64

enum ib_link {
    IB_LINK_UNKNOWN,
    IB_LINK_INFINIBAND,
    IB_LINK_ETHERNET,       /* RoCE */
};

enum ib_verbs {
    IB_VERBS_SKIPPED,       /* not consulted (ib_opts.skip_verbs) */
    IB_VERBS_MISSING,       /* libibverbs.so.1 not loadable */
    IB_VERBS_EMPTY,         /* loaded, lists no device */
    IB_VERBS_LISTED,        /* lists at least one device */
};

struct ib_port {
    int num;                        /* 1-based, as NCCL_IB_HCA writes it */
    int state;                      /* 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER; 0 unknown */
    enum ib_link link;
    int gid_index;                  /* RoCE v2 IPv4-mapped GID, -1 none (or not RoCE) */
    char gid_ipv4[16];              /* that GID's IPv4 address */
    char gid_netdev[IF_NAMESIZE];   /* the netdev of that GID (sysfs ndevs), "" unknown */
};

struct ib_dev {
    char name[IB_NAME_LEN];
    int nports;
    struct ib_port port[IB_PORT_MAX];
    bool uverbs;                    /* its /dev/infiniband/uverbsN exists in this container */
    bool in_sysfs;                  /* /sys/class/infiniband/<name> exists */
    bool listed;                    /* libibverbs lists it */
    bool opened;                    /* libibverbs opened it; the ports are verbs' view */
};

struct ib_info {
    int ndev;
    struct ib_dev dev[IB_DEV_MAX];  /* sorted by name */
    enum ib_verbs verbs;
    bool dev_infiniband;            /* /dev/infiniband exists */
    char note[512];                 /* what verbs could not do, and why; "" none */
};

struct ib_opts {
    const char *verbs_lib;          /* NULL: "libibverbs.so.1" */
    bool skip_verbs;                /* sysfs only */
};

/* Fills *out. Never fails for want of hardware: a node without HCAs gives ndev == 0. Every
 * device opened is closed again before returning. Returns 0, or -EINVAL for a NULL argument. */
int ib_discover(const struct ib_opts *opts, struct ib_info *out);

/* Whether a port is one NCCL would use: ACTIVE, InfiniBand or Ethernet. */
bool ib_port_active(const struct ib_port *p);

/* "DOWN", "ACTIVE", ... for a port state; "unknown" otherwise. */
const char *ib_port_state_name(int state);

#endif
