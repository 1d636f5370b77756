/* rdzv/ranks.c — node ranks and global ranks for a closing round (see ranks.h). */
#include "rdzv/ranks.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rdzv_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int r = memcmp(a, b, la);
            if (r)
                return r < 0 ? -1 : 1;
            a += la;
            b += lb;
        } else {
            if (*a != *b)
                return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
            a++;
            b++;
        }
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int cmp_nodes(const void *pa, const void *pb)
{
    const rdzv_rank_node_t *a = *(const rdzv_rank_node_t *const *)pa;
    const rdzv_rank_node_t *b = *(const rdzv_rank_node_t *const *)pb;
    int r = strcmp(a->domain ? a->domain : "", b->domain ? b->domain : "");
    if (!r)
        r = rdzv_natural_cmp(a->name, b->name);
    if (!r)
        r = rdzv_natural_cmp(a->addr, b->addr);
    if (!r)
        r = strcmp(a->id, b->id);
    return r;
}

long long rdzv_assign_ranks(rdzv_rank_node_t *nodes, int n, int *order)
{
    if (n <= 0)
        return 0;
    rdzv_rank_node_t **v = malloc((size_t)n * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        v[i] = &nodes[i];
        v[i]->node_rank = -1;
        order[i] = -1;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_nodes);
    /* wanted ranks first, so that a free rank handed out below is never one somebody wants */
    for (int i = 0; i < n; i++) {
        int w = v[i]->want_rank;
        if (w >= 0 && w < n && order[w] < 0) {
            order[w] = (int)(v[i] - nodes);
            v[i]->node_rank = w;
        }
    }
    /* the others fill the free ranks from 0 up in the sort order: stable for the same nodes */
    int free_r = 0;
    for (int i = 0; i < n; i++) {
        if (v[i]->node_rank >= 0)
            continue;
        while (order[free_r] >= 0)
            free_r++;
        order[free_r] = (int)(v[i] - nodes);
        v[i]->node_rank = free_r;
    }
    free(v);
    long long base = 0;
    for (int r = 0; r < n; r++) {
        nodes[order[r]].rank_base = (int)base;
        base += nodes[order[r]].nproc;
    }
    return base;
}

static int same_domain(const rdzv_rank_node_t *a, const rdzv_rank_node_t *b)
{
    return strcmp(a->domain ? a->domain : "", b->domain ? b->domain : "") == 0;
}

int rdzv_pick_segments(const rdzv_rank_node_t *nodes, int n, int seg, int max, int *take)
{
    if (n <= 0)
        return 0;
    if (seg < 1)
        seg = 1;
    const rdzv_rank_node_t **v = malloc((size_t)n * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        v[i] = &nodes[i];
    qsort(v, (size_t)n, sizeof *v, cmp_nodes);
    int room = max / seg * seg, taken = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && same_domain(v[i], v[j]))
            j++;
        int whole = (j - i) / seg * seg;
        if (whole > room - taken)
            whole = room - taken;
        int got = 0;
        for (int pass = 1; pass >= 0; pass--)   /* the last round's members first */
            for (int k = i; k < j; k++)
                if ((v[k]->keep != 0) == pass) {
                    take[v[k] - nodes] = j - i < seg ? -1 : got < whole;
                    got += got < whole;
                }
        taken += whole;
        i = j;
    }
    free(v);
    return taken;
}
