/* launcher/devices/linkwatch.c — NCCL's links watched through sysfs (linkwatch.h). */
#include "launcher/devices/linkwatch.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/devices/sysroot.h"
#include "launcher/devices/watch_rules.h"

static bool port_active(const char *hca, int port)
{
    char st[64];
    return sysroot_read(st, sizeof st, "/sys/class/infiniband/%s/ports/%d/state", hca, port) > 0 &&
           watch_ib_state(st) == 4;
}

static void add_ports(struct linkwatch *w, const char *hca, const char *spec)
{
    DIR *d = sysroot_opendir("/sys/class/infiniband/%s/ports", hca);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && w->nports < LINKWATCH_MAX) {
        int p = atoi(e->d_name);
        if (p <= 0 || strlen(hca) >= LINKWATCH_NAME || !watch_nccl_selects(spec, hca, p) ||
            !port_active(hca, p))
            continue;
        snprintf(w->ports[w->nports].hca, LINKWATCH_NAME, "%s", hca);
        w->ports[w->nports++].port = p;
    }
    if (d)
        closedir(d);
}

static void add_ifs(struct linkwatch *w, const char *spec)
{
    DIR *d = sysroot_opendir("/sys/class/net");
    struct dirent *e;
    char st[32];
    while (d && (e = readdir(d)) != NULL && w->nifs < LINKWATCH_MAX) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= LINKWATCH_NAME ||
            !watch_nccl_selects(spec, e->d_name, 0) ||
            sysroot_read(st, sizeof st, "/sys/class/net/%s/operstate", e->d_name) <= 0 ||
            !watch_if_up(st))
            continue;
        memcpy(w->ifs[w->nifs++], e->d_name, strlen(e->d_name) + 1);   /* fits: checked above */
    }
    if (d)
        closedir(d);
}

int linkwatch_open(struct linkwatch *w, const char *ib_hca, int ib_off, const char *ifnames)
{
    memset(w, 0, sizeof *w);
    DIR *d = ib_off ? NULL : sysroot_opendir("/sys/class/infiniband");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && watch_nccl_selects(ib_hca, e->d_name, 0))
            add_ports(w, e->d_name, ib_hca);
    if (d)
        closedir(d);
    if (ifnames && *ifnames)
        add_ifs(w, ifnames);
    return w->nports + w->nifs;
}

int linkwatch_check(const struct linkwatch *w, char *why, size_t len)
{
    char st[64];
    for (int i = 0; i < w->nports; i++) {
        int n = sysroot_read(st, sizeof st, "/sys/class/infiniband/%s/ports/%d/state",
                             w->ports[i].hca, w->ports[i].port);
        if (n > 0 && watch_ib_state(st) == 4)
            continue;
        snprintf(why, len, "%s port %d: %s (was ACTIVE)", w->ports[i].hca, w->ports[i].port,
                 n > 0 ? watch_ib_state_name(st) : "gone");
        return 1;
    }
    for (int i = 0; i < w->nifs; i++) {
        int n = sysroot_read(st, sizeof st, "/sys/class/net/%s/operstate", w->ifs[i]);
        if (n > 0 && watch_if_up(st))
            continue;
        snprintf(why, len, "interface %s (NCCL_SOCKET_IFNAME): %s (was up)", w->ifs[i],
                 n > 0 ? st : "gone");
        return 1;
    }
    return 0;
}
