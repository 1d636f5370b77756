/* launcher/devices/linkwatch.h — the links NCCL was told to use, watched through sysfs (under
 * the sysroot) while the workers run: each InfiniBand/RoCE port of NCCL_IB_HCA that was ACTIVE
 * when the watch began (/sys/class/infiniband/<hca>/ports/<p>/state) and each interface of
 * NCCL_SOCKET_IFNAME that was up (/sys/class/net/<if>/operstate). A link that was not usable at
 * the start is not NCCL's and not watched. A check reads one small file per link. */
#ifndef PODRUN_DEVICES_LINKWATCH_H
#define PODRUN_DEVICES_LINKWATCH_H

#include <stddef.h>

#define LINKWATCH_MAX 64
#define LINKWATCH_NAME 64

struct linkwatch {
    int nports, nifs;
    struct {
        char hca[LINKWATCH_NAME];
        int port;
    } ports[LINKWATCH_MAX];
    char ifs[LINKWATCH_MAX][LINKWATCH_NAME];
};

/* The links to watch: ib_hca (NCCL_IB_HCA's syntax; NULL or "": every HCA; ib_off: none) and
 * ifnames (NCCL_SOCKET_IFNAME's; NULL: none). Returns how many links are watched. */
int linkwatch_open(struct linkwatch *w, const char *ib_hca, int ib_off, const char *ifnames);
/* 0 when every watched link is still usable; 1 with "mlx5_0 port 1: DOWN (was ACTIVE)" in why
 * for the first that is not. */
int linkwatch_check(const struct linkwatch *w, char *why, size_t len);

#endif
