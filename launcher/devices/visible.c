/* launcher/devices/visible.c — which GPUs CUDA shows a worker (pure; see visible.h). */
#include "launcher/devices/visible.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIS_ENTRY_MAX 128    /* longest list entry looked at; UUIDs are 40 characters */

/* What NVIDIA_VISIBLE_DEVICES leaves: per GPU, allowed or not, and which MIG devices. */
struct vis_filter {
    bool gpu[GPU_MAX];
    uint32_t mig[GPU_MAX];   /* bit j: migs[j] allowed */
};

static void vis_note(struct gpu_visible *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vis_note(struct gpu_visible *v, const char *fmt, ...)
{
    size_t used = strlen(v->note);
    if (used + 3 >= sizeof v->note)
        return;
    if (used) {
        memcpy(v->note + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->note + used, sizeof v->note - used, fmt, ap);
    va_end(ap);
}

/* Copies the next comma-separated entry of *p into buf (cut at VIS_ENTRY_MAX) and advances *p
 * past it; false when the list is exhausted. */
static bool vis_next(const char **p, char *buf, size_t len)
{
    if (!*p)
        return false;
    const char *comma = strchr(*p, ',');
    size_t n = comma ? (size_t)(comma - *p) : strlen(*p);
    size_t k = n < len ? n : len - 1;
    memcpy(buf, *p, k);
    buf[k] = '\0';
    *p = comma ? comma + 1 : NULL;
    return true;
}

static void vis_trim(char *s)
{
    size_t n = strlen(s), i = 0;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (isspace((unsigned char)s[i]))
        i++;
    memmove(s, s + i, n - i + 1);
}

/* torch's reading of an index entry: an optional sign, then the leading digits ("1gpu2" is 1);
 * -1 for no digits or a negative number. */
static long vis_strtoul(const char *s)
{
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!isdigit((unsigned char)*p))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)*p) && v < 1000000)
        v = v * 10 + (*p++ - '0');
    return neg ? -1 : v;
}

/* ---------- NVIDIA_VISIBLE_DEVICES ---------- */

static void vis_filter_all(const struct gpu_list *g, struct vis_filter *f, bool on)
{
    for (int i = 0; i < g->n; i++) {
        f->gpu[i] = on;
        f->mig[i] = on ? UINT32_MAX : 0;
    }
}

/* Applies one UUID entry; false when it names nothing here. */
static bool vis_nvidia_uuid(const struct gpu_list *g, const char *e, struct vis_filter *f)
{
    for (int i = 0; i < g->n; i++) {
        if (strcmp(g->dev[i].uuid, e) == 0) {
            f->gpu[i] = true;
            f->mig[i] = UINT32_MAX;
            return true;
        }
        for (int j = 0; j < g->dev[i].nmig; j++)
            if (strcmp(g->dev[i].migs[j].uuid, e) == 0) {
                f->gpu[i] = true;
                f->mig[i] |= 1u << j;
                return true;
            }
    }
    return false;
}

/* Host indices ("2" or "2:1", GPU 2's MIG device 1) are renumbered inside a container, so they
 * are applied only when this process sees more GPUs than the list names. */
static void vis_nvidia_indices(const struct gpu_list *g, const char *list, int entries,
                               struct vis_filter *f, struct gpu_visible *v)
{
    if (entries >= g->n) {
        vis_note(v, "NVIDIA_VISIBLE_DEVICES names host indices and %d GPU(s) are visible: the "
                    "container runtime has applied it", g->n);
        vis_filter_all(g, f, true);
        return;
    }
    char e[VIS_ENTRY_MAX];
    const char *p = list;
    while (vis_next(&p, e, sizeof e)) {
        vis_trim(e);
        unsigned gi, mi;
        char tail;
        int k = sscanf(e, "%u:%u%c", &gi, &mi, &tail);
        if (k < 1 || !isdigit((unsigned char)e[0]))
            continue;
        if (gi >= (unsigned)g->n) {
            vis_note(v, "NVIDIA_VISIBLE_DEVICES entry %s names no GPU on this node", e);
            continue;
        }
        f->gpu[gi] = true;
        if (k == 2 && mi < 32)
            f->mig[gi] |= 1u << mi;
        else
            f->mig[gi] = UINT32_MAX;
    }
}

static void vis_nvidia(const struct gpu_list *g, const char *val, struct vis_filter *f,
                       struct gpu_visible *v)
{
    if (!val || strcmp(val, "all") == 0) {
        vis_filter_all(g, f, true);
        return;
    }
    if (!*val || strcmp(val, "none") == 0 || strcmp(val, "void") == 0) {
        vis_filter_all(g, f, false);
        if (g->n)
            vis_note(v, "NVIDIA_VISIBLE_DEVICES=%s: this container was given no GPU", val);
        return;
    }
    if (val[0] == '/') {
        vis_filter_all(g, f, true);
        vis_note(v, "NVIDIA_VISIBLE_DEVICES is a device-list path (%s): not read", val);
        return;
    }
    vis_filter_all(g, f, false);
    char e[VIS_ENTRY_MAX];
    const char *p = val;
    int entries = 0, indices = 0;
    while (vis_next(&p, e, sizeof e)) {
        vis_trim(e);
        entries++;
        if (isdigit((unsigned char)e[0]))
            indices++;
        else if (!vis_nvidia_uuid(g, e, f))
            vis_note(v, "NVIDIA_VISIBLE_DEVICES entry %s names no GPU on this node", e);
    }
    if (indices)
        vis_nvidia_indices(g, val, entries, f, v);
}

/* ---------- the CUDA device list ---------- */

static void vis_token(const struct gpu_list *g, struct gpu_slot *s, int ordinal)
{
    const struct gpu_dev *d = &g->dev[s->gpu];
    const char *uuid = s->mig < 0 ? d->uuid : d->migs[s->mig].uuid;
    if (uuid[0])
        snprintf(s->token, sizeof s->token, "%s", uuid);
    else
        snprintf(s->token, sizeof s->token, "%d", ordinal);
}

/* Every device CUDA would list with CUDA_VISIBLE_DEVICES unset, in PCI order. */
static void vis_devices(const struct gpu_list *g, const struct vis_filter *f, struct gpu_visible *all,
                        struct gpu_visible *v)
{
    all->n = 0;
    for (int i = 0; i < g->n && all->n < GPU_MAX; i++) {
        const struct gpu_dev *d = &g->dev[i];
        if (!f->gpu[i])
            continue;
        if (d->mig != 1) {
            all->slot[all->n++] = (struct gpu_slot){.gpu = i, .mig = -1};
            continue;
        }
        if (d->nmig == 0)
            vis_note(v, "GPU %s has MIG enabled and no MIG device: CUDA cannot use it",
                     d->pci[0] ? d->pci : d->uuid);
        for (int j = 0; j < d->nmig && all->n < GPU_MAX; j++)
            if (f->mig[i] & (1u << j)) {
                all->slot[all->n++] = (struct gpu_slot){.gpu = i, .mig = j};
                all->mig = true;
            }
    }
    for (int k = 0; k < all->n; k++)
        vis_token(g, &all->slot[k], k);
}

/* Whether FASTEST_FIRST is known to give the PCI order: one device, or one model and no MIG. */
static bool vis_one_model(const struct gpu_list *g, const struct gpu_visible *all)
{
    if (all->n <= 1)
        return true;
    if (all->mig)
        return false;
    const char *name = g->dev[all->slot[0].gpu].name;
    for (int k = 0; k < all->n; k++)
        if (!name[0] || strcmp(g->dev[all->slot[k].gpu].name, name) != 0)
            return false;
    return true;
}

/* ---------- CUDA_VISIBLE_DEVICES ---------- */

static const char *vis_uuid_of(const struct gpu_list *g, const struct gpu_slot *s)
{
    return s->mig < 0 ? g->dev[s->gpu].uuid : g->dev[s->gpu].migs[s->mig].uuid;
}

/* Whether a MIG entry of the older "MIG-GPU-<uuid>/<gi>/<ci>" form names this MIG slot. */
static bool vis_mig_legacy_match(const struct gpu_list *g, const struct gpu_slot *s, const char *e)
{
    const char *uuid = e + 4, *slash = strchr(uuid, '/');
    unsigned gi, ci;
    char tail;
    if (!slash || s->mig < 0 || sscanf(slash, "/%u/%u%c", &gi, &ci, &tail) != 2)
        return false;
    const struct gpu_dev *d = &g->dev[s->gpu];
    size_t ul = (size_t)(slash - uuid);
    return strlen(d->uuid) == ul && strncmp(d->uuid, uuid, ul) == 0 &&
           d->migs[s->mig].gpu_instance == (int)gi && d->migs[s->mig].compute_instance == (int)ci;
}

/* The slot of `all` an entry of a UUID list names: >= 0, -1 none, -2 ambiguous. */
static int vis_match_uuid(const struct gpu_list *g, const struct gpu_visible *all, const char *e,
                          bool mig)
{
    int found = -1;
    bool legacy = mig && strncmp(e, "MIG-GPU-", 8) == 0;
    for (int k = 0; k < all->n; k++) {
        const struct gpu_slot *s = &all->slot[k];
        if ((s->mig >= 0) != mig)
            continue;
        const char *u = vis_uuid_of(g, s);
        bool hit = legacy ? vis_mig_legacy_match(g, s, e) : (u[0] && strncmp(u, e, strlen(e)) == 0);
        if (!hit)
            continue;
        if (found >= 0)
            return -2;
        found = k;
    }
    return found;
}

static bool vis_taken(const struct gpu_visible *v, const struct gpu_slot *s)
{
    for (int k = 0; k < v->n; k++)
        if (v->slot[k].gpu == s->gpu && v->slot[k].mig == s->mig)
            return true;
    return false;
}

/* Resolves one entry to a slot of `all`: >= 0; -1 ends the list; -3 empties it (a device named
 * twice). The note says which. */
static int vis_entry(const struct gpu_list *g, const struct gpu_visible *all, const char *raw,
                     const char *prefix, struct gpu_visible *v, char seen[][VIS_ENTRY_MAX], int nseen)
{
    char e[VIS_ENTRY_MAX];
    snprintf(e, sizeof e, "%s", raw);
    if (!prefix)
        vis_trim(e);
    for (int i = 0; i < nseen; i++)
        if (strcmp(seen[i], e) == 0) {
            vis_note(v, "CUDA_VISIBLE_DEVICES names %s twice: CUDA then shows no device", e);
            return -3;
        }
    int k;
    if (prefix) {
        if (strncmp(e, prefix, strlen(prefix)) != 0) {
            vis_note(v, "CUDA_VISIBLE_DEVICES entry '%s' is not a %s UUID: the list ends there", e,
                     prefix);
            return -1;
        }
        k = vis_match_uuid(g, all, e, prefix[0] == 'M');
        if (k < 0) {
            vis_note(v, "CUDA_VISIBLE_DEVICES entry %s %s: the list ends there", e,
                     k == -2 ? "matches more than one device" : "names no device visible here");
            return -1;
        }
    } else {
        long x = vis_strtoul(e);
        if (x < 0) {
            vis_note(v, "CUDA_VISIBLE_DEVICES entry '%s' is not a device index: the list ends there", e);
            return -1;
        }
        if (x >= all->n) {
            vis_note(v, "CUDA_VISIBLE_DEVICES index %ld is past the last of %d device(s): the "
                        "list ends there", x, all->n);
            return -1;
        }
        k = (int)x;
    }
    if (vis_taken(v, &all->slot[k])) {
        vis_note(v, "CUDA_VISIBLE_DEVICES names device %s twice: CUDA then shows no device", e);
        return -3;
    }
    return k;
}

static void vis_cuda(const struct gpu_list *g, const struct gpu_visible *all, const char *val,
                     struct gpu_visible *v)
{
    const char *prefix = strncmp(val, "GPU-", 4) == 0 ? "GPU-"
                         : strncmp(val, "MIG-", 4) == 0 ? "MIG-" : NULL;
    char seen[GPU_MAX][VIS_ENTRY_MAX];
    int nseen = 0;
    char e[VIS_ENTRY_MAX];
    const char *p = val;
    v->n = 0;
    while (v->n < GPU_MAX && vis_next(&p, e, sizeof e)) {
        int k = vis_entry(g, all, e, prefix, v, seen, nseen);
        if (k == -3)
            v->n = 0;
        if (k < 0)
            break;
        snprintf(seen[nseen++], VIS_ENTRY_MAX, "%s", e);
        v->slot[v->n++] = all->slot[k];
    }
    if (prefix)
        v->order_known = true;  /* a UUID list fixes the order itself */
}

int visible_resolve(const struct gpu_list *g, const struct gpu_visible_env *env,
                    struct gpu_visible *out)
{
    if (!g || !env || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    struct vis_filter f;
    memset(&f, 0, sizeof f);
    vis_nvidia(g, env->nvidia_visible_devices, &f, out);

    struct gpu_visible all;
    memset(&all, 0, sizeof all);
    vis_devices(g, &f, &all, out);

    const char *order = env->cuda_device_order;
    bool pci = order && strcmp(order, "PCI_BUS_ID") == 0;
    if (order && !pci && strcmp(order, "FASTEST_FIRST") != 0)
        vis_note(out, "CUDA_DEVICE_ORDER=%s is neither FASTEST_FIRST nor PCI_BUS_ID; read as "
                      "FASTEST_FIRST", order);
    bool pci_known = true;
    for (int k = 0; k < all.n; k++)
        pci_known = pci_known && g->dev[all.slot[k].gpu].pci[0];
    out->order_known = (pci && pci_known) || vis_one_model(g, &all);

    const char *cvd = env->cuda_visible_devices;
    if (!cvd) {
        memcpy(out->slot, all.slot, sizeof all.slot);
        out->n = all.n;
    } else if (!*cvd) {
        if (all.n)
            vis_note(out, "CUDA_VISIBLE_DEVICES is empty: no GPU is visible");
    } else
        vis_cuda(g, &all, cvd, out);
    for (int k = 0; k < out->n; k++)
        if (out->slot[k].mig >= 0)
            out->mig = true;
    if (!out->order_known && out->n > 1 && pci)
        vis_note(out, "CUDA_DEVICE_ORDER is PCI_BUS_ID but the GPUs' PCI addresses are unknown "
                      "here: which one is CUDA device i is CUDA's choice");
    else if (!out->order_known && out->n > 1)
        vis_note(out, "%s and CUDA_DEVICE_ORDER is FASTEST_FIRST: which one is CUDA device i is "
                      "CUDA's choice",
                 g->dev[out->slot[0].gpu].name[0] ? "the devices differ (models or MIG sizes)"
                                                  : "the devices' models are unknown");
    return 0;
}
