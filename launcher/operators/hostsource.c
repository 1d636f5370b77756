/* launcher/operators/hostsource.c — a hostfile as the job's discovery (see hostsource.h). */
#include "launcher/operators/hostsource.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define fail(code, err, len, ...) podrun_failf(code, err, len, __VA_ARGS__)

/* This machine's names as the user's --node-name and --local-addr replace them: the name stands
 * for the host name and FQDN, the address for every interface address. */
static int self_names(const struct cfg *c, const struct discover_host *host, bool with_fqdn,
                      struct hostfile_self *me, const char **one_addr)
{
    memset(me, 0, sizeof *me);
    if (host && (!c->node_name || !c->local_addr)) {
        int r = host->self(host, with_fqdn && !c->node_name, me);
        if (r)
            return r;
    }
    if (c->node_name) {
        me->hostname = c->node_name;
        me->fqdn = NULL;
    }
    if (c->local_addr) {
        one_addr[0] = c->local_addr;
        me->addrs = one_addr;
        me->naddrs = 1;
    }
    return 0;
}

int hostsource_find_self(const struct hostfile *hf, const struct resources *active,
                         const struct cfg *c, const struct discover_host *host, size_t *entry,
                         size_t *node_rank, char *err, size_t errlen)
{
    struct hostfile_self me;
    const char *one[1];
    if (!host && !c->node_name && !c->local_addr)
        return fail(-ENOENT, err, errlen, "%s: this node's names are unknown; give --node-name "
                    "or --local-addr to find its line", hf->name);
    int r = self_names(c, host, false, &me, one);
    if (r)
        return fail(r, err, errlen, "cannot read this machine's names for %s: %s", hf->name,
                    strerror(-r));
    r = hostfile_find_self(hf, active, &me, entry, node_rank, err, errlen);
    /* the FQDN may cost a resolver lookup: only when the short names matched no line */
    if (r == -ENOENT && host && !c->node_name && !self_names(c, host, true, &me, one) && me.fqdn)
        r = hostfile_find_self(hf, active, &me, entry, node_rank, err, errlen);
    return r;
}

/* A node rank given above the file (flag, PODRUN_*, PET_*, config file): DeepSpeed's --no_ssh
 * --node_rank N takes the Nth selected line and never looks for this machine in the file. */
static bool given_rank(const struct cfg *c)
{
    return c->src[CFG_NODE_RANK].kind > CFG_SRC_HOSTFILE && c->node_rank >= 0;
}

/* The line at the given node rank (among `active`, or all lines). *mine says whether the
 * machine's own names also pick that line, so that its address is this node's to bind. */
static int at_given_rank(const struct hostfile *hf, const struct resources *active,
                         const struct cfg *c, const struct discover_host *host, size_t *entry,
                         size_t *node_rank, bool *mine, char *err, size_t errlen)
{
    size_t n = active ? active->count : hf->count, want = (size_t)c->node_rank, e;
    if (want >= n)
        return fail(-EINVAL, err, errlen, "%s %d is not below the %zu hosts selected in %s",
                    c->src[CFG_NODE_RANK].name, c->node_rank, n, hf->name);
    for (e = 0; active && e < hf->count && hf->entries[e].line != active->nodes[want].line;)
        e++;
    if (e >= hf->count)
        return fail(-EINVAL, err, errlen, "%s: no line for node rank %d", hf->name,
                    c->node_rank);
    size_t self_e = 0, self_rank = SIZE_MAX;   /* set by a search that finds this machine */
    char ignored[256];
    *mine = hostsource_find_self(hf, active, c, host, &self_e, &self_rank, ignored,
                                 sizeof ignored) == 0 && self_rank == want;
    *entry = e;
    *node_rank = want;
    return 0;
}

/* A line's host as an address for others: without "user@" and IPv6 brackets. */
static void host_text(const char *h, char *out, size_t cap)
{
    const char *at = strrchr(h, '@');
    if (at)
        h = at + 1;
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
        h++, n -= 2;
    snprintf(out, cap, "%.*s", (int)n, h);
}

/* The values, once this node's line is known. `first` is node rank 0's host and line. */
static int set_values(struct cfg *c, const char *file, const char *label, size_t rank,
                      size_t nnodes, const struct hostfile_entry *me, const char *first,
                      unsigned first_line, int slots, bool mine, char *err, size_t errlen)
{
    const char *lo = label ? " (" : "", *lc = label ? ")" : "", *l = label ? label : "";
    char h[HOSTFILE_NAME_MAX + 1];
    int r;
    if (slots == 0)
        return fail(-EINVAL, err, errlen, "%s line %u: slots=0 leaves this node no worker; give "
                    "it slots=N (N >= 1) or leave it out of the file", file, me->line);
    host_text(first, h, sizeof h);
    if ((r = op_setn(c, CFG_NODE_RANK, (long)rank, CFG_SRC_HOSTFILE, err, errlen,
                     "%s line %u%s%s%s", file, me->line, lo, l, lc)) ||
        (r = op_setn(c, CFG_NNODES, (long)nnodes, CFG_SRC_HOSTFILE, err, errlen, "%s%s%s%s", file,
                     lo, l, lc)) ||
        (r = op_set(c, CFG_RDZV_BACKEND, "static", CFG_SRC_HOSTFILE, err, errlen, "%s%s%s%s",
                    file, lo, l, lc)) ||
        (r = op_set(c, CFG_MASTER_ADDR, h, CFG_SRC_HOSTFILE, err, errlen, "%s line %u%s%s%s",
                    file, first_line, lo, l, lc)))
        return r;
    if (slots > 0 && (r = op_setn(c, CFG_NPROC_PER_NODE, slots, CFG_SRC_HOSTFILE, err, errlen,
                                  "%s line %u%s%s%s", file, me->line, lo, l, lc)))
        return r;
    host_text(me->host, h, sizeof h);
    if (mine && op_is_addr(h))
        return op_set(c, CFG_LOCAL_ADDR, h, CFG_SRC_HOSTFILE, err, errlen, "%s line %u%s%s%s",
                      file, me->line, lo, l, lc);
    return 0;
}

int hostsource_apply_parsed(struct cfg *c, const struct discover_host *host,
                            const struct hostfile *hf, const struct resources_select *sel,
                            const char *label, struct hostsource_node *out, char *err,
                            size_t errlen)
{
    struct resources pool, active;
    memset(&pool, 0, sizeof pool);
    memset(&active, 0, sizeof active);
    size_t entry = 0, rank = 0;
    int r = 0;
    if (sel && !(r = resources_from_hostfile(&pool, hf, -1, err, errlen)))
        r = resources_select(&active, &pool, sel, err, errlen);
    bool mine = true;   /* the line is this machine's own (its address may be bound) */
    if (!r && given_rank(c))
        r = at_given_rank(hf, sel ? &active : NULL, c, host, &entry, &rank, &mine, err, errlen);
    else if (!r)
        r = hostsource_find_self(hf, sel ? &active : NULL, c, host, &entry, &rank, err, errlen);
    if (!r) {
        const struct hostfile_entry *me = &hf->entries[entry];
        size_t nnodes = sel ? active.count : hf->count;
        const char *first = sel ? active.nodes[0].host : hf->entries[0].host;
        unsigned first_line = sel ? active.nodes[0].line : hf->entries[0].line;
        int slots = sel ? (int)active.nodes[rank].nslots : me->slots;
        r = set_values(c, hf->name, label, rank, nnodes, me, first, first_line, slots, mine,
                       err, errlen);
        if (!r && out) {
            out->node_rank = rank;
            out->nnodes = nnodes;
            out->line = me->line;
            out->nslots = slots > 0 ? (size_t)slots : 0;
            for (size_t i = 0; i < out->nslots; i++)
                out->slots[i] = sel ? active.nodes[rank].slots[i] : (int)i;
        }
    }
    resources_free(&active);
    resources_free(&pool);
    return r;
}

int hostsource_apply(struct cfg *c, const struct discover_host *host, const char *path,
                     enum hostfile_dialect dialect, const struct resources_select *sel,
                     const char *label, struct hostsource_node *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    if (!host)
        return fail(-ENOENT, err, errlen, "hostfile %s: no files can be read here", path);
    int r = host->read_file(host, path, DISCOVER_FILE_MAX, &text, &len);
    if (r == -EFBIG)
        return fail(r, err, errlen, "hostfile %s is longer than %u bytes; is it the right file?",
                    path, DISCOVER_FILE_MAX);
    if (r)
        return fail(r, err, errlen, "cannot read hostfile %s: %s%s", path, strerror(-r),
                    label ? "" : "; give --hostfile an existing file");
    struct hostfile hf;
    memset(&hf, 0, sizeof hf);
    r = hostfile_parse(&hf, text, len, dialect, path, err, errlen);
    if (!r)
        r = hostsource_apply_parsed(c, host, &hf, sel, label, out, err, errlen);
    hostfile_free(&hf);
    free(text);
    return r;
}
