/* tests/fuzz/fuzz_preflight.c — libFuzzer target: arbitrary bytes, as another agent could write
 * them into the job store, through every preflight record decoder (node, figure, plan, verdict)
 * and the nccl helper's result line. Nothing may crash, leak or read out of bounds, and what a
 * decoder accepts comes back the same from its encoder: encode(decode(encode(decode(x)))) ==
 * encode(decode(x)). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/preflight/codec.h"

static void same(const textbuf_t *a, const textbuf_t *b)
{
    if (a->cut || b->cut || a->len != b->len || (a->len && memcmp(a->s, b->s, a->len)))
        abort();
}

static void node(const char *d, size_t n)
{
    struct pf_node_rec a, b;
    textbuf_t x = {0}, y = {0};
    if (pf_node_decode(d, n, &a) < 0)
        return;
    pf_node_encode(&a, &x);
    if (pf_node_decode(x.s, x.len, &b) < 0)
        abort();
    pf_node_encode(&b, &y);
    same(&x, &y);
    text_free(&x);
    text_free(&y);
}

static void figure(const char *d, size_t n)
{
    struct pf_figure a, b;
    textbuf_t x = {0}, y = {0}, z = {0};
    if (pf_figure_decode(d, n, &a) < 0)
        return;
    pf_figure_encode(&a, &x);
    if (pf_figure_decode(x.s, x.len, &b) < 0)
        abort();
    pf_figure_encode(&b, &y);
    if (pf_figure_decode(y.s, y.len, &a) < 0)
        abort();
    pf_figure_encode(&a, &z);
    same(&y, &z);   /* numbers settle on their 9-digit text after one round */
    text_free(&x);
    text_free(&y);
    text_free(&z);
}

static void plan(const char *d, size_t n)
{
    struct pf_plan_rec a, b;
    textbuf_t x = {0}, y = {0};
    if (pf_plan_decode(d, n, 1000, &a) < 0)
        return;
    pf_plan_encode(a.skip, a.links, a.nlinks, &x);
    if (pf_plan_decode(x.s, x.len, 1000, &b) < 0)
        abort();
    pf_plan_encode(b.skip, b.links, b.nlinks, &y);
    same(&x, &y);
    pf_plan_free(&a);
    pf_plan_free(&b);
    text_free(&x);
    text_free(&y);
}

static void encode_verdict(const struct pf_verdict_rec *v, textbuf_t *out)
{
    pf_verdict_begin(out, v->nodes, v->skip);
    if (v->host_bad)
        pf_verdict_host_bad(out);
    for (int i = 0; i < v->nbad; i++)
        pf_verdict_bad(out, v->bad[i], v->bad_name[i], v->bad_kind[i], v->bad_reason[i]);
    for (int i = 0; i < v->nlines; i++)
        pf_verdict_line(out, v->lines[i]);
}

static void verdict(const char *d, size_t n)
{
    struct pf_verdict_rec a, b, c;
    textbuf_t x = {0}, y = {0}, z = {0};
    if (pf_verdict_decode(d, n, &a) < 0)
        return;
    encode_verdict(&a, &x);
    if (pf_verdict_decode(x.s, x.len, &b) < 0)
        abort();
    encode_verdict(&b, &y);
    if (pf_verdict_decode(y.s, y.len, &c) < 0)
        abort();
    encode_verdict(&c, &z);
    same(&y, &z);   /* names and kinds are cut to their bounds once */
    pf_verdict_free(&a);
    pf_verdict_free(&b);
    pf_verdict_free(&c);
    text_free(&x);
    text_free(&y);
    text_free(&z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    node(d, size);
    figure(d, size);
    plan(d, size);
    verdict(d, size);
    char *line = malloc(size + 1);
    if (line) {
        memcpy(line, data, size);
        line[size] = '\0';
        struct pf_figure f;
        pf_helper_line_parse(line, &f);
        free(line);
    }
    return 0;
}
