/* launcher/devices/ib.c — InfiniBand and RoCE ports, and whether they can be used (see ib.h). */
#include "launcher/devices/ib.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/devices/dl.h"
#include "launcher/devices/sysroot.h"
#include "launcher/devices/verbs_abi.h"

#define IB_VERBS_SONAME "libibverbs.so.1"
#define IB_GID_SCAN_MAX 256    /* GID table entries looked at per port */

struct ib_verbs_fns {
    dl_lib_t lib;
    verbs_get_device_list_fn get_list;
    verbs_free_device_list_fn free_list;
    verbs_get_device_name_fn dev_name;
    verbs_open_device_fn open;
    verbs_close_device_fn close;
    verbs_query_device_fn query_device;
    verbs_query_port_fn query_port;
    verbs_query_gid_ex_fn query_gid_ex;
};

static const char *const ib_state_names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE",
                                             "ACTIVE_DEFER"};

const char *ib_port_state_name(int state)
{
    if (state < 1 || state > 5)
        return "unknown";
    return ib_state_names[state];
}

bool ib_port_active(const struct ib_port *p)
{
    return p->state == VERBS_PORT_ACTIVE && p->link != IB_LINK_UNKNOWN;
}

static void ib_note(struct ib_info *ib, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ib_note(struct ib_info *ib, const char *fmt, ...)
{
    size_t used = strlen(ib->note);
    if (used + 3 >= sizeof ib->note)
        return;
    if (used) {
        memcpy(ib->note + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ib->note + used, sizeof ib->note - used, fmt, ap);
    va_end(ap);
}

/* The device named `name`, added (and the list kept sorted) when new; NULL when full. */
static struct ib_dev *ib_dev_get(struct ib_info *ib, const char *name)
{
    int i = 0;
    for (; i < ib->ndev; i++) {
        int c = strcmp(ib->dev[i].name, name);
        if (c == 0)
            return &ib->dev[i];
        if (c > 0)
            break;
    }
    if (ib->ndev == IB_DEV_MAX || strlen(name) >= IB_NAME_LEN)
        return NULL;
    memmove(&ib->dev[i + 1], &ib->dev[i], (size_t)(ib->ndev - i) * sizeof ib->dev[0]);
    ib->ndev++;
    struct ib_dev *d = &ib->dev[i];
    memset(d, 0, sizeof *d);
    memcpy(d->name, name, strlen(name) + 1);
    return d;
}

/* ---------- GIDs ---------- */

/* Whether a raw GID is an IPv4-mapped address (::ffff:a.b.c.d) other than 0.0.0.0; writes the
 * address. Link-local (fe80::) and other IPv6 GIDs are not. */
static bool ib_gid_ipv4(const unsigned char gid[16], char *out, size_t len)
{
    static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(gid, prefix, sizeof prefix) != 0 || !(gid[12] | gid[13] | gid[14] | gid[15]))
        return false;
    return inet_ntop(AF_INET, gid + 12, out, (socklen_t)len) != NULL;
}

/* sysfs prints a GID as eight colon-separated groups of four hex digits. */
static int ib_gid_parse(const char *text, unsigned char gid[16])
{
    unsigned g[8];
    char tail;
    if (sscanf(text, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x%c", &g[0], &g[1], &g[2], &g[3], &g[4],
               &g[5], &g[6], &g[7], &tail) != 8)
        return -EINVAL;
    for (int i = 0; i < 8; i++) {
        gid[2 * i] = (unsigned char)(g[i] >> 8);
        gid[2 * i + 1] = (unsigned char)g[i];
    }
    return 0;
}

static int ib_gid_index_cmp(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The numeric names in gids/, ascending; the table may be sparse. */
static int ib_gid_indices(const char *dev, int port, int *idx, int max)
{
    DIR *d = sysroot_opendir("/sys/class/infiniband/%s/ports/%d/gids", dev, port);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (end != e->d_name && !*end && v >= 0 && v < 65536)
            idx[n++] = (int)v;
    }
    closedir(d);
    qsort(idx, (size_t)n, sizeof idx[0], ib_gid_index_cmp);
    return n;
}

/* The lowest RoCE v2 IPv4-mapped GID of a port from sysfs. A slot whose type cannot be read
 * (EINVAL for an empty slot) is skipped. */
static void ib_sysfs_gid(const char *dev, struct ib_port *p)
{
    int idx[IB_GID_SCAN_MAX];
    int n = ib_gid_indices(dev, p->num, idx, IB_GID_SCAN_MAX);
    for (int i = 0; i < n; i++) {
        char type[32], text[64];
        unsigned char gid[16];
        if (sysroot_read(type, sizeof type, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d",
                         dev, p->num, idx[i]) < 0 ||
            strcmp(type, "RoCE v2") != 0)
            continue;
        if (sysroot_read(text, sizeof text, "/sys/class/infiniband/%s/ports/%d/gids/%d", dev,
                         p->num, idx[i]) < 0 ||
            ib_gid_parse(text, gid) < 0 || !ib_gid_ipv4(gid, p->gid_ipv4, sizeof p->gid_ipv4))
            continue;
        p->gid_index = idx[i];
        if (sysroot_read(p->gid_netdev, sizeof p->gid_netdev,
                         "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", dev, p->num,
                         idx[i]) < 0)
            p->gid_netdev[0] = '\0';
        return;
    }
}

/* ---------- sysfs ---------- */

static enum ib_link ib_link_parse(const char *s)
{
    if (strcmp(s, "InfiniBand") == 0)
        return IB_LINK_INFINIBAND;
    if (strcmp(s, "Ethernet") == 0)
        return IB_LINK_ETHERNET;
    return IB_LINK_UNKNOWN;
}

static void ib_sysfs_port(const char *dev, int num, struct ib_port *p)
{
    char buf[64];
    memset(p, 0, sizeof *p);
    p->num = num;
    p->gid_index = -1;
    if (sysroot_read(buf, sizeof buf, "/sys/class/infiniband/%s/ports/%d/state", dev, num) >= 0)
        p->state = atoi(buf);  /* "4: ACTIVE" */
    if (sysroot_read(buf, sizeof buf, "/sys/class/infiniband/%s/ports/%d/link_layer", dev, num) >= 0)
        p->link = ib_link_parse(buf);
    if (p->link == IB_LINK_ETHERNET)
        ib_sysfs_gid(dev, p);
}

static void ib_sysfs_ports(struct ib_dev *d)
{
    DIR *dir = sysroot_opendir("/sys/class/infiniband/%s/ports", d->name);
    if (!dir)
        return;
    int nums[IB_PORT_MAX], n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < IB_PORT_MAX) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (end != e->d_name && !*end && v > 0 && v < 256)
            nums[n++] = (int)v;
    }
    closedir(dir);
    qsort(nums, (size_t)n, sizeof nums[0], ib_gid_index_cmp);
    d->nports = n;
    for (int i = 0; i < n; i++)
        ib_sysfs_port(d->name, nums[i], &d->port[i]);
}

static void ib_from_sysfs(struct ib_info *ib)
{
    DIR *dir = sysroot_opendir("/sys/class/infiniband");
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        struct ib_dev *d = ib_dev_get(ib, e->d_name);
        if (d)
            d->in_sysfs = true;
    }
    closedir(dir);
    for (int i = 0; i < ib->ndev; i++)
        ib_sysfs_ports(&ib->dev[i]);
}

/* Marks the devices whose uverbs character device is in this container's /dev. */
static void ib_uverbs(struct ib_info *ib)
{
    ib->dev_infiniband = sysroot_exists("/dev/infiniband");
    DIR *dir = sysroot_opendir("/sys/class/infiniband_verbs");
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        char name[IB_NAME_LEN];
        if (strncmp(e->d_name, "uverbs", 6) != 0 ||
            sysroot_read(name, sizeof name, "/sys/class/infiniband_verbs/%s/ibdev", e->d_name) <= 0)
            continue;
        for (int i = 0; i < ib->ndev; i++)
            if (strcmp(ib->dev[i].name, name) == 0 &&
                sysroot_exists("/dev/infiniband/%s", e->d_name))
                ib->dev[i].uverbs = true;
    }
    closedir(dir);
}

/* ---------- libibverbs ---------- */

static int ib_verbs_open(struct ib_verbs_fns *v, const char *soname, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    int rc = dl_open(&v->lib, soname, err, errlen);
    if (rc < 0)
        return rc;
    const dl_sym_t syms[] = {
        {"ibv_get_device_list", VERBS_VERSION, &v->get_list, false},
        {"ibv_free_device_list", VERBS_VERSION, &v->free_list, false},
        {"ibv_get_device_name", VERBS_VERSION, &v->dev_name, false},
        {"ibv_open_device", VERBS_VERSION, &v->open, false},
        {"ibv_close_device", VERBS_VERSION, &v->close, false},
        {"ibv_query_device", VERBS_VERSION, &v->query_device, false},
        {"ibv_query_port", VERBS_VERSION, &v->query_port, false},
        {"_ibv_query_gid_ex", VERBS_VERSION_GID_EX, &v->query_gid_ex, true},
    };
    rc = dl_bind(&v->lib, syms, sizeof syms / sizeof syms[0], err, errlen);
    if (rc < 0)
        dl_close(&v->lib);
    return rc;
}

/* The lowest RoCE v2 IPv4-mapped GID from the provider's table; sysfs when the library is
 * older than _ibv_query_gid_ex (rdma-core 32). */
static void ib_verbs_gid(const struct ib_verbs_fns *v, struct ibv_context *ctx, const char *dev,
                         int table_len, struct ib_port *p)
{
    if (!v->query_gid_ex) {
        ib_sysfs_gid(dev, p);
        return;
    }
    if (table_len > IB_GID_SCAN_MAX)
        table_len = IB_GID_SCAN_MAX;
    for (int i = 0; i < table_len; i++) {
        struct verbs_gid_entry e;
        memset(&e, 0, sizeof e);
        if (v->query_gid_ex(ctx, (uint32_t)p->num, (uint32_t)i, &e, 0, sizeof e) != 0 ||
            e.gid_type != VERBS_GID_TYPE_ROCE_V2 || !ib_gid_ipv4(e.gid, p->gid_ipv4, sizeof p->gid_ipv4))
            continue;
        p->gid_index = i;
        if (!if_indextoname(e.ndev_ifindex, p->gid_netdev))
            p->gid_netdev[0] = '\0';
        return;
    }
}

/* Replaces a device's ports with what the provider reports; false when it cannot be opened. */
static bool ib_verbs_device(const struct ib_verbs_fns *v, struct ibv_device *dev, struct ib_dev *d,
                            struct ib_info *ib)
{
    errno = 0;
    struct ibv_context *ctx = v->open(dev);
    if (!ctx) {
        ib_note(ib, "ibv_open_device(%s): %s", d->name, errno ? strerror(errno) : "failed");
        return false;
    }
    struct verbs_device_attr attr;
    memset(&attr, 0, sizeof attr);
    if (v->query_device(ctx, &attr) != 0) {
        ib_note(ib, "ibv_query_device(%s) failed", d->name);
        v->close(ctx);
        return false;
    }
    d->nports = 0;
    for (int num = 1; num <= attr.phys_port_cnt && d->nports < IB_PORT_MAX; num++) {
        struct verbs_port_attr pa;
        memset(&pa, 0, sizeof pa);
        if (v->query_port(ctx, (uint8_t)num, &pa) != 0)
            continue;
        struct ib_port *p = &d->port[d->nports++];
        memset(p, 0, sizeof *p);
        p->num = num;
        p->gid_index = -1;
        p->state = (int)pa.state;
        p->link = pa.link_layer == VERBS_LINK_LAYER_INFINIBAND ? IB_LINK_INFINIBAND
                  : pa.link_layer == VERBS_LINK_LAYER_ETHERNET  ? IB_LINK_ETHERNET
                                                                : IB_LINK_UNKNOWN;
        if (p->link == IB_LINK_ETHERNET)
            ib_verbs_gid(v, ctx, d->name, pa.gid_tbl_len, p);
    }
    v->close(ctx);
    return true;
}

static void ib_from_verbs(const struct ib_opts *o, struct ib_info *ib)
{
    struct ib_verbs_fns v;
    char err[256];
    const char *soname = o && o->verbs_lib ? o->verbs_lib : IB_VERBS_SONAME;
    if (ib_verbs_open(&v, soname, err, sizeof err) < 0) {
        ib->verbs = IB_VERBS_MISSING;
        ib_note(ib, "%s", err);
        return;
    }
    int num = 0;
    errno = 0;
    struct ibv_device **list = v.get_list(&num);
    if (!list || num <= 0) {
        ib->verbs = IB_VERBS_EMPTY;
        if (!list && errno)
            ib_note(ib, "ibv_get_device_list: %s", strerror(errno));
    } else
        ib->verbs = IB_VERBS_LISTED;
    for (int i = 0; list && i < num; i++) {
        const char *name = v.dev_name(list[i]);
        struct ib_dev *d = name ? ib_dev_get(ib, name) : NULL;
        if (!d)
            continue;
        d->listed = true;
        d->opened = ib_verbs_device(&v, list[i], d, ib);
    }
    if (list)
        v.free_list(list);
    dl_close(&v.lib);
}

int ib_discover(const struct ib_opts *opts, struct ib_info *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    ib_from_sysfs(out);
    if (opts && opts->skip_verbs)
        out->verbs = IB_VERBS_SKIPPED;
    else
        ib_from_verbs(opts, out);
    /* A device verbs could not open keeps the ports sysfs showed. */
    ib_uverbs(out);
    return 0;
}
