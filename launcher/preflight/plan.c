/* launcher/preflight/plan.c — pairing and judgement of the preflight check (pure; see plan.h). */
#include "launcher/preflight/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/text.h"

int pf_plan_round1(int n, struct pf_link *links)
{
    int k = 0;
    for (int i = 0; i + 1 < n; i += 2)
        links[k++] = (struct pf_link){i, i + 1};
    /* the odd one out: node 0 runs it after its first link, so no node runs two at once */
    if (n > 1 && n % 2)
        links[k++] = (struct pf_link){0, n - 1};
    return k;
}

void pf_figure_combine(const struct pf_figure *a, const struct pf_figure *b, const char *na,
                       const char *nb, struct pf_figure *out)
{
    memset(out, 0, sizeof *out);
    out->done = a->done || b->done;
    out->rtt = out->bw = -1;
    bool aok = a->done && a->ok, bok = b->done && b->ok;
    out->ok = aok && bok;
    const struct pf_figure *ends[2] = {a, b};
    const char *names[2] = {na ? na : "one end", nb ? nb : "the other end"};
    for (int i = 0; i < 2; i++) {
        const struct pf_figure *f = ends[i];
        if (f->done && f->ok) {
            if (f->rtt >= 0 && f->rtt > out->rtt)
                out->rtt = f->rtt;
            if (f->bw >= 0 && (out->bw < 0 || f->bw < out->bw))
                out->bw = f->bw;
            continue;
        }
        text_appendf(out->reason, sizeof out->reason, "%s%s: %s", out->reason[0] ? "; " : "",
                  names[i], f->done ? f->reason : "no result");
    }
}

static int pf_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

double pf_median_bw(const struct pf_figure *figs, int n)
{
    if (n <= 0)
        return -1;
    double *v = malloc((size_t)n * sizeof *v);
    int m = 0;
    for (int i = 0; v && i < n; i++)
        if (figs[i].done && figs[i].ok && figs[i].bw >= 0)
            v[m++] = figs[i].bw;
    double med = -1;
    if (m > 0) {
        qsort(v, (size_t)m, sizeof *v, pf_cmp_double);
        med = v[m / 2];
    }
    free(v);
    return med;
}

void pf_format_bw(double bw, char *buf, size_t len)
{
    if (bw < 0)
        snprintf(buf, len, "-");
    else if (bw >= 1e9)
        snprintf(buf, len, "%.2f GB/s", bw / 1e9);
    else if (bw >= 1e6)
        snprintf(buf, len, "%.1f MB/s", bw / 1e6);
    else
        snprintf(buf, len, "%.0f KB/s", bw / 1e3);
}

void pf_format_rtt(double rtt, char *buf, size_t len)
{
    if (rtt < 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2f ms", rtt * 1e3);
}

bool pf_figure_passes(const struct pf_figure *f, const struct pf_bounds *b, double median,
                      char *why, size_t len)
{
    char x[32], y[32];
    if (len)
        why[0] = '\0';
    if (!f->done) {
        snprintf(why, len, "no result");
        return false;
    }
    if (!f->ok) {
        snprintf(why, len, "%s", f->reason[0] ? f->reason : "failed");
        return false;
    }
    if (b->max_rtt > 0 && f->rtt > b->max_rtt) {
        pf_format_rtt(f->rtt, x, sizeof x);
        pf_format_rtt(b->max_rtt, y, sizeof y);
        snprintf(why, len, "slow: round trip %s, over --preflight-max-rtt %s", x, y);
        return false;
    }
    if (b->min_bw > 0 && f->bw >= 0 && f->bw < b->min_bw) {
        pf_format_bw(f->bw, x, sizeof x);
        pf_format_bw(b->min_bw, y, sizeof y);
        snprintf(why, len, "slow: %s, under --preflight-min-bandwidth %s", x, y);
        return false;
    }
    if (b->slow_percent > 0 && median > 0 && f->bw >= 0 &&
        f->bw < median * b->slow_percent / 100.0) {
        pf_format_bw(f->bw, x, sizeof x);
        pf_format_bw(median, y, sizeof y);
        snprintf(why, len, "slow: %s, under %d%% of the median %s", x, b->slow_percent, y);
        return false;
    }
    return true;
}

/* Round 1's states: good where a link passed, bad where the node's own check failed, suspect
 * otherwise; pass1[L] whether link L passed. A node without links (one node alone) is good. */
static void pf_round1(const struct pf_judge *j, enum pf_state *state, bool *pass1)
{
    double median = pf_median_bw(j->figs[0], j->nlinks[0]);
    char why[PF_REASON_MAX];
    for (int k = 0; k < j->n; k++)
        state[k] = PF_GOOD;
    for (int l = 0; l < j->nlinks[0]; l++) {
        state[j->links[0][l].a] = state[j->links[0][l].b] = PF_SUSPECT;
        pass1[l] = pf_figure_passes(&j->figs[0][l], &j->bounds, median, why, sizeof why);
    }
    for (int l = 0; l < j->nlinks[0]; l++)
        if (pass1[l])
            state[j->links[0][l].a] = state[j->links[0][l].b] = PF_GOOD;
    if (!j->local)
        return;
    double lmed = pf_median_bw(j->local, j->n);
    for (int k = 0; k < j->n; k++)
        if (!pf_figure_passes(&j->local[k], &j->bounds, lmed, why, sizeof why))
            state[k] = PF_BAD;
}

/* The bandwidth of a node's best passing round-1 link, -1 when none passed. */
static double pf_best_bw(const struct pf_judge *j, const bool *pass1, int k, int *link)
{
    double best = -1;
    *link = -1;
    for (int l = 0; l < j->nlinks[0]; l++) {
        const struct pf_link *x = &j->links[0][l];
        if ((x->a != k && x->b != k))
            continue;
        if (*link < 0 || (pass1[l] && j->figs[0][l].bw > best)) {
            *link = l;
            if (pass1[l])
                best = j->figs[0][l].bw;
        }
    }
    return best;
}

int pf_plan_round2(const struct pf_judge *j, enum pf_state *state, struct pf_link *links2)
{
    bool *pass1 = calloc((size_t)(j->nlinks[0] ? j->nlinks[0] : 1), sizeof *pass1);
    int *sus = malloc((size_t)j->n * sizeof *sus), *good = malloc((size_t)j->n * sizeof *good);
    double *speed = malloc((size_t)j->n * sizeof *speed);
    int ns = 0, ng = 0, k2 = 0;
    if (!pass1 || !sus || !good || !speed)
        goto out;
    pf_round1(j, state, pass1);
    for (int k = 0; k < j->n; k++) {
        int l;
        speed[k] = pf_best_bw(j, pass1, k, &l);
        if (state[k] == PF_SUSPECT)
            sus[ns++] = k;
        else if (state[k] == PF_GOOD && l >= 0)
            good[ng++] = k;
    }
    /* the good nodes fastest first (ties: lower node rank): a suspect meets a node known to be
     * well, so its link says what the suspect is worth */
    for (int a = 0; a < ng; a++)
        for (int b = a + 1; b < ng; b++)
            if (speed[good[b]] > speed[good[a]]) {
                int t = good[a];
                good[a] = good[b];
                good[b] = t;
            }
    if (ng > 0) {
        for (int i = 0; i < ns; i++)
            links2[k2++] = (struct pf_link){good[i % ng], sus[i]};
    } else if (ns > 1) {
        /* nobody is known to be well: pair the suspects in another order than round 1's */
        for (int i = 0; i + 1 < ns; i += 2)
            links2[k2++] = (struct pf_link){sus[(i + 1) % ns], sus[(i + 2) % ns]};
        if (ns % 2)
            links2[k2++] = (struct pf_link){sus[0], sus[1 % ns]};
    }
out:
    free(pass1);
    free(sus);
    free(good);
    free(speed);
    return k2;
}

/* What kind of bad a failed figure shows, for the one-line summary. */
static const char *pf_kind(const char *why)
{
    if (!strncmp(why, "slow", 4))
        return "slow";
    if (strstr(why, "connect to") || strstr(why, "does not resolve") ||
        strstr(why, "did not come") || strstr(why, "no result") || strstr(why, "no address"))
        return "unreachable";
    return "failed";
}

/* The other end of link x from node k. */
static int pf_peer(const struct pf_link *x, int k)
{
    return x->a == k ? x->b : x->a;
}

static const char *pf_name(const char *const *names, int k, char *buf, size_t len)
{
    if (names && names[k] && names[k][0])
        return names[k];
    snprintf(buf, len, "node rank %d", k);
    return buf;
}

/* A suspect after round 2: cleared by a passing round-2 link, bad when its round-2 links failed
 * too, and without any round-2 link good only when every round-1 partner was bad itself. */
static void pf_judge_suspect(const struct pf_judge *j, const char *const *names,
                             const enum pf_state *state, const bool *pass1, int k,
                             struct pf_node_verdict *v)
{
    double med1 = pf_median_bw(j->figs[0], j->nlinks[0]);
    double med = med1 > 0 ? med1 : pf_median_bw(j->figs[1], j->nlinks[1]);
    char why[PF_REASON_MAX], nb[32];
    bool tested = false, partners_bad = true;
    for (int l = 0; l < j->nlinks[1]; l++) {
        const struct pf_link *x = &j->links[1][l];
        if (x->a != k && x->b != k)
            continue;
        tested = true;
        v->link = l;
        v->link_round = 1;
        if (pf_figure_passes(&j->figs[1][l], &j->bounds, med, why, sizeof why)) {
            v->state = PF_GOOD;
            v->reason[0] = '\0';
            return;
        }
    }
    v->state = PF_BAD;
    v->reason[0] = '\0';
    for (int l = 0; l < j->nlinks[0]; l++) {
        const struct pf_link *x = &j->links[0][l];
        if (x->a != k && x->b != k)
            continue;
        int p = pf_peer(x, k);
        partners_bad = partners_bad && state[p] == PF_BAD;
        pf_figure_passes(&j->figs[0][l], &j->bounds, med1, why, sizeof why);
        text_appendf(v->reason, sizeof v->reason, "%swith %s: %s", v->reason[0] ? "; " : "",
                  pf_name(names, p, nb, sizeof nb), why);
        snprintf(v->kind, sizeof v->kind, "%s", pf_kind(why));
        if (!tested && v->link < 0)
            v->link = l, v->link_round = 0;
    }
    (void)pass1;
    if (!tested) {
        if (partners_bad) {   /* its links failed at nodes that are bad themselves */
            v->state = PF_GOOD;
            v->reason[0] = '\0';
        } else {
            text_appendf(v->reason, sizeof v->reason, "; no other node was left to tell which end "
                      "of the link is bad");
        }
        return;
    }
    for (int l = 0; l < j->nlinks[1]; l++) {
        const struct pf_link *x = &j->links[1][l];
        if (x->a != k && x->b != k)
            continue;
        pf_figure_passes(&j->figs[1][l], &j->bounds, med, why, sizeof why);
        text_appendf(v->reason, sizeof v->reason, "; round 2 with %s: %s",
                  pf_name(names, pf_peer(x, k), nb, sizeof nb), why);
        snprintf(v->kind, sizeof v->kind, "%s", pf_kind(why));
    }
}

int pf_verdict(const struct pf_judge *j, const char *const *names, struct pf_node_verdict *v)
{
    enum pf_state *state = malloc((size_t)j->n * sizeof *state);
    bool *pass1 = calloc((size_t)(j->nlinks[0] ? j->nlinks[0] : 1), sizeof *pass1);
    int bad = 0;
    if (!state || !pass1) {
        free(state);
        free(pass1);
        return -1;
    }
    pf_round1(j, state, pass1);
    double lmed = j->local ? pf_median_bw(j->local, j->n) : -1;
    for (int k = 0; k < j->n; k++) {
        struct pf_node_verdict *x = &v[k];
        memset(x, 0, sizeof *x);
        x->link = -1;
        if (state[k] == PF_SUSPECT) {
            pf_judge_suspect(j, names, state, pass1, k, x);
        } else {
            pf_best_bw(j, pass1, k, &x->link);
            x->state = state[k];
            if (state[k] == PF_BAD) {
                char why[PF_REASON_MAX];
                pf_figure_passes(&j->local[k], &j->bounds, lmed, why, sizeof why);
                snprintf(x->reason, sizeof x->reason, "its own GPUs: %s", why);
                snprintf(x->kind, sizeof x->kind, "%s", !strncmp(why, "slow", 4)
                         ? "slow GPUs" : "GPUs failed");
            }
        }
        bad += x->state == PF_BAD;
    }
    free(state);
    free(pass1);
    return bad;
}
