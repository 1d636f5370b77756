/* tests/fakes/fake_ibverbs.c — a libibverbs.so.1 whose HCAs come from a file.
 *
 * Exports the entry points podrun binds, at the symbol versions rdma-core exports them with
 * (fake_ibverbs.map), so podrun's versioned lookups are exercised as on a real system.
 * $PODRUN_FAKE_IBVERBS names the file, read at each ibv_get_device_list:
 *   list ERRNO                            ibv_get_device_list fails: NULL with errno
 *   dev NAME [open=ERRNO]                 a device; open=N makes ibv_open_device fail with N
 *   port DEV NUM state=N link=N gidlen=N  a port (link 1 InfiniBand, 2 Ethernet)
 *   gid DEV PORT INDEX TYPE ADDR          a GID: TYPE 0 IB, 1 RoCE v1, 2 RoCE v2; ADDR an IPv4
 *                                         address (IPv4-mapped GID) or "ll" (fe80::1)
 * fake_ibverbs_open_contexts() is the number of contexts opened and not yet closed. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakes/fake_conf.h"
#include "launcher/devices/verbs_abi.h"

#define FAKE_DEVS 8
#define FAKE_PORTS 4
#define FAKE_GIDS 16

struct ibv_device {
    char name[64];
    int open_errno;
    int nports;
    struct {
        int num, state, link, gidlen, ngids;
        struct {
            int index, type;
            uint8_t gid[16];
        } gids[FAKE_GIDS];
    } ports[FAKE_PORTS];
};

struct ibv_context {
    struct ibv_device *dev;
};

static struct ibv_device fake_devs[FAKE_DEVS];
static struct ibv_device *fake_list[FAKE_DEVS + 1];
static int fake_ndevs, fake_list_errno, fake_contexts;

int fake_ibverbs_open_contexts(void)
{
    return fake_contexts;
}

static struct ibv_device *fake_dev(const char *name)
{
    for (int i = 0; i < fake_ndevs; i++)
        if (strcmp(fake_devs[i].name, name) == 0)
            return &fake_devs[i];
    return NULL;
}

static void fake_line(const char *line)
{
    char name[64], addr[64];
    int num, idx, type;
    if (sscanf(line, "list %d", &fake_list_errno) == 1)
        return;
    if (sscanf(line, "dev %63s", name) == 1 && fake_ndevs < FAKE_DEVS) {
        struct ibv_device *d = &fake_devs[fake_ndevs++];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", name);
        d->open_errno = (int)fake_word_long(line, "open", 0);
    } else if (sscanf(line, "port %63s %d", name, &num) == 2 && fake_dev(name)) {
        struct ibv_device *d = fake_dev(name);
        if (d->nports == FAKE_PORTS)
            return;
        d->ports[d->nports].num = num;
        d->ports[d->nports].state = (int)fake_word_long(line, "state", 1);
        d->ports[d->nports].link = (int)fake_word_long(line, "link", 1);
        d->ports[d->nports].gidlen = (int)fake_word_long(line, "gidlen", 16);
        d->nports++;
    } else if (sscanf(line, "gid %63s %d %d %d %63s", name, &num, &idx, &type, addr) == 5 &&
               fake_dev(name)) {
        struct ibv_device *d = fake_dev(name);
        for (int p = 0; p < d->nports; p++) {
            if (d->ports[p].num != num || d->ports[p].ngids == FAKE_GIDS)
                continue;
            int k = d->ports[p].ngids++;
            d->ports[p].gids[k].index = idx;
            d->ports[p].gids[k].type = type;
            uint8_t *g = d->ports[p].gids[k].gid;
            memset(g, 0, 16);
            if (strcmp(addr, "ll") == 0) {
                g[0] = 0xfe, g[1] = 0x80, g[15] = 1;
            } else {
                g[10] = g[11] = 0xff;
                inet_pton(AF_INET, addr, g + 12);
            }
        }
    }
}

struct ibv_device **ibv_get_device_list(int *num)
{
    fake_ndevs = fake_list_errno = 0;
    FILE *f = fake_conf_open("PODRUN_FAKE_IBVERBS");
    char line[FAKE_LINE_MAX];
    while (f && fgets(line, sizeof line, f))
        fake_line(line);
    if (f)
        fclose(f);
    if (fake_list_errno) {
        errno = fake_list_errno;
        if (num)
            *num = 0;
        return NULL;
    }
    for (int i = 0; i < fake_ndevs; i++)
        fake_list[i] = &fake_devs[i];
    fake_list[fake_ndevs] = NULL;
    if (num)
        *num = fake_ndevs;
    return fake_list;
}

void ibv_free_device_list(struct ibv_device **list)
{
    (void)list;
}

const char *ibv_get_device_name(struct ibv_device *dev)
{
    return dev->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    if (dev->open_errno) {
        errno = dev->open_errno;
        return NULL;
    }
    struct ibv_context *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->dev = dev;
    fake_contexts++;
    return c;
}

int ibv_close_device(struct ibv_context *ctx)
{
    free(ctx);
    fake_contexts--;
    return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct verbs_device_attr *attr)
{
    memset(attr, 0, sizeof *attr);
    int max = 0;
    for (int p = 0; p < ctx->dev->nports; p++)
        if (ctx->dev->ports[p].num > max)
            max = ctx->dev->ports[p].num;
    attr->phys_port_cnt = (uint8_t)max;
    return 0;
}

/* The exported compat entry point: clears and fills the _compat_ibv_port_attr prefix. */
int ibv_query_port(struct ibv_context *ctx, uint8_t num, struct verbs_port_attr *attr)
{
    memset(attr, 0, sizeof *attr);
    for (int p = 0; p < ctx->dev->nports; p++)
        if (ctx->dev->ports[p].num == num) {
            attr->state = (uint32_t)ctx->dev->ports[p].state;
            attr->link_layer = (uint8_t)ctx->dev->ports[p].link;
            attr->gid_tbl_len = ctx->dev->ports[p].gidlen;
            return 0;
        }
    return EINVAL;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t num, int index, uint8_t gid[16])
{
    memset(gid, 0, 16);
    for (int p = 0; p < ctx->dev->nports; p++)
        for (int k = 0; ctx->dev->ports[p].num == num && k < ctx->dev->ports[p].ngids; k++)
            if (ctx->dev->ports[p].gids[k].index == index)
                memcpy(gid, ctx->dev->ports[p].gids[k].gid, 16);
    return 0;
}

int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t num, uint32_t index,
                      struct verbs_gid_entry *e, uint32_t flags, size_t size)
{
    if (flags || size < sizeof *e)
        return EINVAL;
    for (int p = 0; p < ctx->dev->nports; p++)
        for (int k = 0; (uint32_t)ctx->dev->ports[p].num == num && k < ctx->dev->ports[p].ngids; k++)
            if ((uint32_t)ctx->dev->ports[p].gids[k].index == index) {
                memset(e, 0, size);
                memcpy(e->gid, ctx->dev->ports[p].gids[k].gid, 16);
                e->gid_index = index;
                e->port_num = num;
                e->gid_type = (uint32_t)ctx->dev->ports[p].gids[k].type;
                e->ndev_ifindex = 1;  /* lo: exists on every host */
                return 0;
            }
    return ENODATA;
}
