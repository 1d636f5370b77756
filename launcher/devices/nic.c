/* launcher/devices/nic.c — which interface holds an address (see nic.h). */
#include "devices/nic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int nic_for_addr(const char *addr, char *ifname, size_t len)
{
    unsigned char want[sizeof(struct in6_addr)];
    int fam = AF_INET;
    if (!addr || (inet_pton(AF_INET, addr, want) != 1 &&
                  (fam = AF_INET6, inet_pton(AF_INET6, addr, want) != 1)))
        return -EINVAL;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return -errno;
    int r = -ENOENT;
    for (struct ifaddrs *i = ifs; i && r; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != fam || !i->ifa_name)
            continue;
        const void *have = fam == AF_INET
                               ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (!memcmp(have, want, fam == AF_INET ? 4 : 16)) {
            snprintf(ifname, len, "%s", i->ifa_name);
            r = 0;
        }
    }
    freeifaddrs(ifs);
    return r;
}
