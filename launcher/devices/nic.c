/* launcher/devices/nic.c — the interface the workers' sockets should use (see nic.h). */
#include "launcher/devices/nic.h"

#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "launcher/devices/sysroot.h"

/* Interfaces NCCL and Gloo should not be pointed at by a guess. */
static const char *const nic_skip_prefixes[] = {"lo", "docker", "veth", "virbr"};

static bool nic_has_prefix(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

static bool nic_skipped(const char *name)
{
    for (size_t i = 0; i < sizeof nic_skip_prefixes / sizeof nic_skip_prefixes[0]; i++)
        if (nic_has_prefix(name, nic_skip_prefixes[i]))
            return true;
    return false;
}

static size_t nic_alen(int family)
{
    return family == AF_INET ? 4 : 16;
}

static bool nic_loopback(int family, const unsigned char *a)
{
    static const unsigned char v6[16] = {[15] = 1};
    return family == AF_INET ? a[0] == 127 : memcmp(a, v6, 16) == 0;
}

static void nic_ntop(int family, const unsigned char *a, char *out, size_t len)
{
    if (!inet_ntop(family, a, out, (socklen_t)len))
        out[0] = '\0';
}

/* ---------- facts ---------- */

int nic_addrs_read(struct nic_addrs *out)
{
    memset(out, 0, sizeof *out);
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0)
        return -errno;
    for (struct ifaddrs *i = ifs; i && out->n < NIC_MAX_ADDRS; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_name || strlen(i->ifa_name) >= IF_NAMESIZE)
            continue;
        int fam = i->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        struct nic_addr *a = &out->a[out->n++];
        memcpy(a->name, i->ifa_name, strlen(i->ifa_name) + 1);
        a->flags = i->ifa_flags;
        a->family = fam;
        if (fam == AF_INET)
            memcpy(a->addr, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, 4);
        else
            memcpy(a->addr, &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, 16);
    }
    freeifaddrs(ifs);
    return 0;
}

/* Reads the attributes of one RTM_NEWROUTE answer. */
static void nic_route_parse(struct nlmsghdr *nh, int family, struct nic_route *out)
{
    struct rtmsg *rt = NLMSG_DATA(nh);
    int len = (int)RTM_PAYLOAD(nh);
    out->found = true;
    out->local = rt->rtm_type == RTN_LOCAL;
    for (struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int)) {
            int ifindex;
            memcpy(&ifindex, RTA_DATA(a), sizeof ifindex);
            if (!if_indextoname((unsigned)ifindex, out->oif))
                out->oif[0] = '\0';
        } else if (a->rta_type == RTA_GATEWAY)
            out->gateway = true;
        else if (a->rta_type == RTA_PREFSRC && RTA_PAYLOAD(a) >= nic_alen(family)) {
            memcpy(out->src, RTA_DATA(a), nic_alen(family));
            out->has_src = true;
        }
    }
}

int nic_route_get(int family, const unsigned char *dst, struct nic_route *out)
{
    memset(out, 0, sizeof *out);
    struct {
        struct nlmsghdr nh;
        struct rtmsg rt;
        char attrs[64];
    } req;
    memset(&req, 0, sizeof req);
    size_t alen = nic_alen(family);
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof req.rt);
    req.nh.nlmsg_type = RTM_GETROUTE;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.nh.nlmsg_seq = 1;
    req.rt.rtm_family = (unsigned char)family;
    req.rt.rtm_dst_len = (unsigned char)(alen * 8);
    struct rtattr *a = (struct rtattr *)(void *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
    a->rta_type = RTA_DST;
    a->rta_len = (unsigned short)RTA_LENGTH(alen);
    memcpy(RTA_DATA(a), dst, alen);
    req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_LENGTH(alen);

    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return -errno;
    /* The kernel answers a route query at once; the timeout only bounds a broken stack. */
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int rc = -EIO;
    if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    union {
        char buf[8192];
        struct nlmsghdr align;
    } r;
    ssize_t n = recv(fd, r.buf, sizeof r.buf, 0);
    if (n < 0)
        rc = -errno;
    int left = n > 0 ? (int)n : 0;
    for (struct nlmsghdr *nh = &r.align; n > 0 && NLMSG_OK(nh, (unsigned)left);
         nh = NLMSG_NEXT(nh, left)) {
        if (nh->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = NLMSG_DATA(nh);
            rc = e->error ? e->error : -EIO;
            break;
        }
        if (nh->nlmsg_type == RTM_NEWROUTE) {
            nic_route_parse(nh, family, out);
            rc = 0;
            break;
        }
    }
    close(fd);
    return rc;
}

/* One line of /proc/net/route: Iface Destination Gateway Flags RefCnt Use Metric Mask ... The
 * addresses are the kernel's __be32 printed as a host integer, which is what the four address
 * bytes read back as with memcpy, on any byte order. */
int nic_route_proc(const char *text, const unsigned char dst[4], struct nic_route *out)
{
    memset(out, 0, sizeof *out);
    uint32_t d;
    memcpy(&d, dst, 4);
    int best_bits = -1;
    unsigned long best_metric = 0;
    const char *line = strchr(text, '\n');  /* the header line */
    while (line && *++line) {
        char name[IF_NAMESIZE + 1];
        unsigned long dest, gw, flags, refcnt, use, metric, mask;
        if (sscanf(line, "%16s %lx %lx %lx %lu %lu %lu %lx", name, &dest, &gw, &flags, &refcnt,
                   &use, &metric, &mask) == 8 &&
            strlen(name) < IF_NAMESIZE && (flags & 0x1) /* RTF_UP */ &&
            (d & (uint32_t)mask) == (uint32_t)dest) {
            int bits = __builtin_popcount((unsigned)mask);
            if (bits > best_bits || (bits == best_bits && metric < best_metric)) {
                best_bits = bits;
                best_metric = metric;
                out->found = true;
                memcpy(out->oif, name, strlen(name) + 1);
                out->gateway = (flags & 0x2) != 0; /* RTF_GATEWAY */
            }
        }
        line = strchr(line, '\n');
    }
    return out->found ? 0 : -ENETUNREACH;
}

/* ---------- NCCL's own choice ---------- */

/* Appends `name` to a comma list unless it is there already. */
static void nic_list_add(char *out, size_t len, const char *name)
{
    size_t nl = strlen(name), used = strlen(out);
    for (const char *p = out; *p;) {
        size_t n = strcspn(p, ",");
        if (n == nl && strncmp(p, name, nl) == 0)
            return;
        p += n + (p[n] == ',');
    }
    if (used + nl + 2 > len)
        return;
    snprintf(out + used, len - used, "%s%s", used ? "," : "", name);
}

/* NCCL's candidates: running, AF_INET/AF_INET6, not the IPv6 loopback. */
static bool nic_nccl_candidate(const struct nic_addr *a)
{
    return (a->flags & IFF_RUNNING) && !(a->family == AF_INET6 && nic_loopback(AF_INET6, a->addr));
}

/* Pass `pass` of NCCL's search: 0 "ib*", 1 not docker/lo/virbr, 2 docker*, 3 lo*, 4 virbr*. */
static bool nic_nccl_pass(const char *name, int pass)
{
    switch (pass) {
    case 0: return nic_has_prefix(name, "ib");
    case 1: return !nic_has_prefix(name, "docker") && !nic_has_prefix(name, "lo") &&
                   !nic_has_prefix(name, "virbr");
    case 2: return nic_has_prefix(name, "docker");
    case 3: return nic_has_prefix(name, "lo");
    default: return nic_has_prefix(name, "virbr");
    }
}

void nic_nccl_auto(const struct nic_addrs *a, char *out, size_t len)
{
    if (len)
        out[0] = '\0';
    for (int pass = 0; pass < 5 && len && !out[0]; pass++)
        for (int i = 0; i < a->n; i++)
            if (nic_nccl_candidate(&a->a[i]) && nic_nccl_pass(a->a[i].name, pass))
                nic_list_add(out, len, a->a[i].name);
}

/* ---------- the choice ---------- */

static const struct nic_addr *nic_find_addr(const struct nic_addrs *a, int family,
                                            const unsigned char *addr)
{
    for (int i = 0; i < a->n; i++)
        if (a->a[i].family == family && memcmp(a->a[i].addr, addr, nic_alen(family)) == 0)
            return &a->a[i];
    return NULL;
}

static const struct nic_addr *nic_first_of(const struct nic_addrs *a, const char *name, int family)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->a[i].name, name) == 0 && a->a[i].family == family)
            return &a->a[i];
    return NULL;
}

/* A loopback master that no interface holds (127.0.0.2) is reached through the loopback
 * interface. */
static const struct nic_addr *nic_loopback_if(const struct nic_addrs *a, int family)
{
    for (int i = 0; i < a->n; i++)
        if ((a->a[i].flags & IFF_LOOPBACK) && a->a[i].family == family)
            return &a->a[i];
    return NULL;
}

/* The first up, running interface of the family that is not lo/docker/veth/virbr (nor an IPv6
 * link-local address). */
static const struct nic_addr *nic_fallback(const struct nic_addrs *a, int family)
{
    for (int i = 0; i < a->n; i++) {
        const struct nic_addr *x = &a->a[i];
        bool linklocal = family == AF_INET6 && x->addr[0] == 0xfe && (x->addr[1] & 0xc0) == 0x80;
        if (x->family == family && (x->flags & IFF_UP) && (x->flags & IFF_RUNNING) &&
            !(x->flags & IFF_LOOPBACK) && !nic_skipped(x->name) && !linklocal)
            return x;
    }
    return NULL;
}

/* Whether the route's interface may be used: anything but lo/docker/veth/virbr, and those only
 * for an on-link destination (the master sits on that bridge, on this host). */
static bool nic_route_usable(const struct nic_route *rt, char *why, size_t len)
{
    if (!rt->found || !rt->oif[0])
        return false;
    if (!nic_skipped(rt->oif))
        return true;
    if (!rt->gateway && !nic_has_prefix(rt->oif, "lo"))
        return true;
    snprintf(why, len, "the route to it goes through %s%s, ", rt->oif,
             rt->gateway ? " via a gateway" : "");
    return false;
}

static void nic_set(struct nic_choice *out, const char *name)
{
    snprintf(out->ifname, sizeof out->ifname, "%s", name);
}

void nic_choose(const struct nic_addrs *a, const struct nic_route *rt, int family,
                const unsigned char *master, struct nic_choice *out)
{
    memset(out, 0, sizeof *out);
    nic_ntop(family, master, out->master, sizeof out->master);
    nic_nccl_auto(a, out->nccl_auto, sizeof out->nccl_auto);
    const struct nic_addr *held = nic_find_addr(a, family, master), *pick = NULL;
    char why[96] = "";
    if (held || nic_loopback(family, master) || (rt->found && rt->local)) {
        out->master_local = true;
        bool loop = nic_loopback(family, master);
        pick = held ? held : loop ? nic_loopback_if(a, family) : NULL;
        if (pick) {
            nic_set(out, pick->name);
            snprintf(out->reason, sizeof out->reason,
                     loop ? "%s: MASTER_ADDR %s is a loopback address, all workers are on this node"
                          : "%s holds MASTER_ADDR %s: this node hosts the master",
                     pick->name, out->master);
        } else if (rt->oif[0]) {
            nic_set(out, rt->oif);
            snprintf(out->reason, sizeof out->reason, "MASTER_ADDR %s is this node's, on %s",
                     out->master, rt->oif);
        }
    } else if (nic_route_usable(rt, why, sizeof why)) {
        nic_set(out, rt->oif);
        char src[INET6_ADDRSTRLEN] = "";
        if (rt->has_src)
            nic_ntop(family, rt->src, src, sizeof src);
        snprintf(out->reason, sizeof out->reason, "the route to MASTER_ADDR %s goes through %s%s%s%s",
                 out->master, rt->oif, src[0] ? " (source " : "", src, src[0] ? ")" : "");
    } else if ((pick = nic_fallback(a, family))) {
        nic_set(out, pick->name);
        snprintf(out->reason, sizeof out->reason,
                 "%sno usable route to MASTER_ADDR %s: %s is the first up interface that is not "
                 "lo, docker*, veth* or virbr*", why, out->master, pick->name);
    } else
        snprintf(out->reason, sizeof out->reason,
                 "%sno usable route to MASTER_ADDR %s and no up interface besides lo, docker*, "
                 "veth* and virbr*", why, out->master);
    if (out->ifname[0]) {
        const struct nic_addr *mine = nic_first_of(a, out->ifname, family);
        if (rt->found && rt->has_src && strcmp(rt->oif, out->ifname) == 0 && !out->master_local)
            nic_ntop(family, rt->src, out->addr, sizeof out->addr);
        else if (out->master_local && held)
            nic_ntop(family, held->addr, out->addr, sizeof out->addr);
        else if (mine)
            nic_ntop(family, mine->addr, out->addr, sizeof out->addr);
        out->nccl_agrees = strcmp(out->nccl_auto, out->ifname) == 0;
    }
}

/* ---------- gathering ---------- */

/* A numeric address or the first address a host name resolves to. */
static int nic_resolve(const char *host, int *family, unsigned char *addr, char *err, size_t errlen)
{
    if (inet_pton(AF_INET, host, addr) == 1) {
        *family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, host, addr) == 1) {
        *family = AF_INET6;
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "MASTER_ADDR %s does not resolve (%s): give a reachable host name or "
                              "address", host, rc ? gai_strerror(rc) : "no address");
        return -EINVAL;
    }
    *family = res->ai_family;
    if (*family == AF_INET)
        memcpy(addr, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr, 4);
    else
        memcpy(addr, &((struct sockaddr_in6 *)(void *)res->ai_addr)->sin6_addr, 16);
    freeaddrinfo(res);
    return 0;
}

int nic_for_master(const char *master, struct nic_choice *out, char *err, size_t errlen)
{
    unsigned char addr[16];
    int family;
    memset(out, 0, sizeof *out);
    int rc = nic_resolve(master, &family, addr, err, errlen);
    if (rc < 0)
        return rc;
    struct nic_addrs addrs;
    if ((rc = nic_addrs_read(&addrs)) < 0) {
        snprintf(err, errlen, "getifaddrs: %s", strerror(-rc));
        return rc;
    }
    struct nic_route rt;
    rc = nic_route_get(family, addr, &rt);
    if (rc < 0 && rc != -ENETUNREACH && rc != -EHOSTUNREACH && family == AF_INET) {
        /* No netlink (a seccomp profile, an old sandbox): the IPv4 table in procfs. */
        char text[16384];
        if (sysroot_read(text, sizeof text, "/proc/net/route") >= 0)
            nic_route_proc(text, addr, &rt);
    }
    nic_choose(&addrs, &rt, family, addr, out);
    return 0;
}

int nic_ifname_for_addr(const char *addr, char *ifname, size_t len)
{
    unsigned char want[16];
    int family = AF_INET;
    if (inet_pton(AF_INET, addr, want) != 1) {
        family = AF_INET6;
        if (inet_pton(AF_INET6, addr, want) != 1)
            return -EINVAL;
    }
    struct nic_addrs addrs;
    int rc = nic_addrs_read(&addrs);
    if (rc < 0)
        return rc;
    const struct nic_addr *a = nic_find_addr(&addrs, family, want);
    if (!a)
        return -ENOENT;
    snprintf(ifname, len, "%s", a->name);
    return 0;
}
