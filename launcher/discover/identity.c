/* launcher/discover/identity.c — this node's name and address, and the machine as discovery reads
 * it (see identity.h). */
#include "launcher/discover/identity.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdzv/base/common.h"

void identity_resolve(struct identity *id, const struct cfg *c)
{
    char hn[IDENTITY_NAME_MAX];
    if (podrun_hostname(hn, sizeof hn) < 0 || !hn[0])
        snprintf(hn, sizeof hn, "localhost");
    snprintf(id->name, sizeof id->name, "%s", c->node_name ? c->node_name : hn);
    snprintf(id->host, sizeof id->host, "%s", c->local_addr ? c->local_addr : hn);
}

const char *identity_pod_name(char *buf, size_t cap)
{
    const char *pod = getenv("POD_NAME");
    if (!pod || !*pod)
        pod = getenv("HOSTNAME");
    if ((!pod || !*pod) && podrun_hostname(buf, cap) == 0)
        pod = buf;
    return pod;
}

const char *identity_pod_ip(void)
{
    const char *ip = getenv("POD_IP");
    return ip && *ip ? ip : NULL;
}

/* ---- the machine for discovery ---- */

/* A whole regular file, at most max bytes: a hostfile is small, and a FIFO or a device mounted
 * where a hostfile should be must not hang or flood the agent. */
static int read_file(const struct discover_host *h, const char *path, size_t max, char **text,
                     size_t *len)
{
    (void)h;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    int e = fstat(fd, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? -EISDIR
                                        : !S_ISREG(st.st_mode) ? -EINVAL : 0;
    if (e) {
        close(fd);
        return e;
    }
    size_t cap = (size_t)st.st_size < max ? (size_t)st.st_size + 1 : max + 1, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            e = -errno;
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            free(buf);
            close(fd);
            return -EFBIG;
        }
        if (n == cap) { /* the file grew since fstat */
            size_t ncap = cap * 2 < max + 1 ? cap * 2 : max + 1;
            char *nb = ncap > cap ? realloc(buf, ncap + 1) : NULL;
            if (!nb) {
                free(buf);
                close(fd);
                return ncap > cap ? -ENOMEM : -EFBIG;
            }
            buf = nb;
            cap = ncap;
        }
    }
    close(fd);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_dir(const struct discover_host *h, const char *path, char ***names,
                    size_t *count)
{
    (void)h;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    char **v = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == DISCOVER_DIR_MAX) {
            r = -E2BIG;
            break;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
            cap = nc;
        }
        if (!(v[n] = strdup(e->d_name))) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (r) {
        discover_names_free(v, n);
        return r;
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_name);
    *names = v;
    *count = n;
    return 0;
}

/* Every interface address, IPv4 and IPv6, as text. */
static void gather_addrs(struct identity_machine *m)
{
    struct ifaddrs *ifs = NULL;
    m->naddrs = 0;
    if (getifaddrs(&ifs) < 0)
        return;
    for (struct ifaddrs *i = ifs; i && m->naddrs < IDENTITY_ADDRS_MAX; i = i->ifa_next) {
        const void *a;
        if (!i->ifa_addr)
            continue;
        if (i->ifa_addr->sa_family == AF_INET)
            a = &((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr;
        else if (i->ifa_addr->sa_family == AF_INET6)
            a = &((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr;
        else
            continue;
        char *out = m->addrs[m->naddrs];
        if (inet_ntop(i->ifa_addr->sa_family, a, out, sizeof m->addrs[0])) {
            m->addrv[m->naddrs] = out;
            m->naddrs++;
        }
    }
    freeifaddrs(ifs);
}

/* The canonical name of this host: in a pod with a subdomain, kubelet's /etc/hosts line
 * "IP host.sub.ns.svc.cluster.local host" makes it the pod's FQDN. "" when there is none. */
static void gather_fqdn(struct identity_machine *m)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_CANONNAME;
    m->fqdn[0] = '\0';
    if (!m->hostname[0] || getaddrinfo(m->hostname, NULL, &hints, &res) != 0)
        return;
    if (res && res->ai_canonname)
        snprintf(m->fqdn, sizeof m->fqdn, "%s", res->ai_canonname);
    freeaddrinfo(res);
}

static int self(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out)
{
    struct identity_machine *m = h->data;
    if (!m->have_names) {
        if (podrun_hostname(m->hostname, sizeof m->hostname) < 0)
            m->hostname[0] = '\0';
        gather_addrs(m);
        m->have_names = true;
    }
    if (with_fqdn && !m->have_fqdn) {
        gather_fqdn(m);
        m->have_fqdn = true;
    }
    out->hostname = m->hostname[0] ? m->hostname : NULL;
    out->fqdn = with_fqdn && m->fqdn[0] ? m->fqdn : NULL;
    out->addrs = m->addrv;
    out->naddrs = m->naddrs;
    return 0;
}

void identity_host_init(struct discover_host *h, struct identity_machine *m)
{
    memset(m, 0, sizeof *m);
    h->read_file = read_file;
    h->list_dir = list_dir;
    h->self = self;
    h->data = m;
}
