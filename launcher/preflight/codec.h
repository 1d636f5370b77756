/* launcher/preflight/codec.h — the preflight check's values in the job store, as text.
 *
 * Pure code. A record is "key=value" lines; in a value a backslash and a newline are written as
 * "\\" and "\n", so any text round-trips. Decoders take bytes from other agents: anything that is
 * not a well-formed record is -EINVAL, never a crash, and every length is bounded.
 *
 *   node     one per node:  name, host, port (tcp listener, 0 for nccl), nproc, rank_base, passed,
 *            hosts_store
 *   figure   one per test end: ok, rtt, bw, reason
 *   plan     the judge's: skip=1, or link=A B lines (the round's links, in order)
 *   verdict  the judge's: nodes, host_bad (the store's host is bad), bad=RANK<TAB>NAME<TAB>KIND
 *            <TAB>REASON lines, line=TEXT lines (the table) */
#ifndef PODRUN_PREFLIGHT_CODEC_H
#define PODRUN_PREFLIGHT_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/preflight/plan.h"
#include "rdzv/base/text.h"

#define PF_HOST_MAX 256
#define PF_LINKS_MAX 70000     /* a plan names at most one link per node, plus one */
#define PF_LINE_MAX 1024

/* Appends "key=value\n" with the value escaped, to a growing text (rdzv/base/text.h: `textbuf_t b =
 * {0}`, freed with text_free; b.cut says memory ran out). */
void pf_kv_add(textbuf_t *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct pf_node_rec {
    char name[PF_NAME_MAX];
    char host[PF_HOST_MAX];
    int port;          /* 0: no listener */
    int nproc;
    int rank_base;
    bool passed;       /* passed a check of this run before */
    bool hosts_store;  /* this agent hosts the job store: it cannot leave the job */
};

int pf_node_encode(const struct pf_node_rec *r, textbuf_t *out);
int pf_node_decode(const char *val, size_t len, struct pf_node_rec *r);

int pf_figure_encode(const struct pf_figure *f, textbuf_t *out);
/* f->done is set on success. */
int pf_figure_decode(const char *val, size_t len, struct pf_figure *f);

struct pf_plan_rec {
    bool skip;
    int nlinks;
    struct pf_link *links;   /* malloc'd (pf_plan_free) */
};

int pf_plan_encode(bool skip, const struct pf_link *links, int n, textbuf_t *out);
/* Links must name node ranks below nnodes. */
int pf_plan_decode(const char *val, size_t len, int nnodes, struct pf_plan_rec *p);
void pf_plan_free(struct pf_plan_rec *p);

struct pf_verdict_rec {
    int nodes;
    bool skip;
    bool host_bad;
    int nbad;
    int *bad;            /* node ranks */
    char **bad_name, **bad_kind, **bad_reason;
    int nlines;
    char **lines;        /* the table, one line each */
};

/* The judge's side: start with pf_verdict_begin, add bad nodes and table lines. */
void pf_verdict_begin(textbuf_t *b, int nodes, bool skip);
void pf_verdict_host_bad(textbuf_t *b);
void pf_verdict_bad(textbuf_t *b, int rank, const char *name, const char *kind,
                    const char *reason);
void pf_verdict_line(textbuf_t *b, const char *text);
int pf_verdict_decode(const char *val, size_t len, struct pf_verdict_rec *v);
void pf_verdict_free(struct pf_verdict_rec *v);

/* The nccl helper's one line on its stdout (nccl_helpers.h):
 *   ok busbw=B algbw=B seconds=S version=V
 *   fail stage=STAGE REASON
 * parsed into f (done set; ok with bw the bus bandwidth, else the stage and reason). -EINVAL
 * when it is not such a line. */
int pf_helper_line_parse(const char *line, struct pf_figure *f);

#endif
