/* rdzv/badnodes.c — the nodes a job remembers for their failures (see badnodes.h). Pure. */
#include "rdzv/badnodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MAX (RDZV_MAX_BAD_NODES * (RDZV_NAME_MAX + 48))

enum { NOTE_CAUSED, NOTE_CHECK, NOTE_ASKED };

int badnodes_failures(const rdzv_badnode_t *b)
{
    return b->caused + b->checks;
}

int badnodes_is_bad(const rdzv_badnode_t *b, int k)
{
    return b->asked || (k > 0 && badnodes_failures(b) >= k);
}

rdzv_badnode_t *badnodes_find(badnodes_t *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return &l->v[i];
    return NULL;
}

/* Worse first: left out, asked, then more failures; names break ties so every coordinator keeps
 * the same order. */
static int worse(const rdzv_badnode_t *a, const rdzv_badnode_t *b)
{
    if (a->out != b->out)
        return a->out > b->out;
    if (a->asked != b->asked)
        return a->asked > b->asked;
    if (badnodes_failures(a) != badnodes_failures(b))
        return badnodes_failures(a) > badnodes_failures(b);
    return strcmp(a->name, b->name) < 0;
}

/* Moves entry i up to its place (its counts only grow). */
static void bubble(badnodes_t *l, int i)
{
    while (i > 0 && worse(&l->v[i], &l->v[i - 1])) {
        rdzv_badnode_t t = l->v[i];
        l->v[i] = l->v[i - 1];
        l->v[--i] = t;
    }
}

/* The node's entry, made when it has none; NULL when the list is full of nodes left out. */
static rdzv_badnode_t *entry(badnodes_t *l, const char *name)
{
    rdzv_badnode_t *b = badnodes_find(l, name);
    if (b)
        return b;
    int i = l->n < RDZV_MAX_BAD_NODES ? l->n++ : RDZV_MAX_BAD_NODES - 1;
    if (i == RDZV_MAX_BAD_NODES - 1 && l->v[i].out && l->v[i].name[0])
        return NULL; /* full, and the least bad is left out (so are all): they stay */
    memset(&l->v[i], 0, sizeof l->v[i]);
    sfmt(l->v[i].name, sizeof l->v[i].name, "%s", name);
    return &l->v[i];
}

static void note_one(badnodes_t *l, const char *name, int what)
{
    if (!name[0])
        return;
    rdzv_badnode_t *b = entry(l, name);
    if (!b)
        return;
    if (what == NOTE_CAUSED)
        b->caused++;
    else if (what == NOTE_CHECK)
        b->checks++;
    else
        b->asked = 1;
    bubble(l, (int)(b - l->v));
}

void badnodes_note(badnodes_t *l, const rdzv_failure_t *f, int n)
{
    for (int i = 0; i < n; i++) {
        const char *r = f[i].reason;
        if (f[i].exclude)
            note_one(l, f[i].node_name, NOTE_ASKED);
        if (strstr(r, BADNODES_HEALTH) || strstr(r, BADNODES_PREFLIGHT))
            note_one(l, f[i].node_name, NOTE_CHECK);
        else if (i == 0 && strncmp(r, "agent left: ", 12) != 0)
            note_one(l, f[i].node_name, NOTE_CAUSED);
    }
}

void badnodes_describe(const rdzv_badnode_t *b, char *out, size_t cap)
{
    int k = badnodes_failures(b);
    char parts[96] = "";
    if (b->caused && b->checks)
        sfmt(parts, sizeof parts, ": %d caused a stop, %d failed check%s", b->caused, b->checks,
             b->checks == 1 ? "" : "s");
    sfmt(out, cap, "%s (%d failure%s%s%s%s)", b->name, k, k == 1 ? "" : "s", parts,
         b->asked ? "; a worker asked to leave it out" : "", b->out ? "; left out" : "");
}

void badnodes_put(kvbuf_t *b, const char *key, const rdzv_badnode_t *v, int n)
{
    char *text = malloc(TEXT_MAX);
    if (!text) {
        b->overflow = 1;
        return;
    }
    size_t len = 0;
    for (int i = 0; i < n && i < RDZV_MAX_BAD_NODES; i++) {
        if (strchr(v[i].name, '\n'))
            continue; /* one node a line: a name that would break it is not said */
        int w = snprintf(text + len, TEXT_MAX - len, "%s%d %d %d %d %s", len ? "\n" : "",
                         v[i].caused, v[i].checks, v[i].asked, v[i].out, v[i].name);
        if (w < 0 || (size_t)w >= TEXT_MAX - len)
            break;
        len += (size_t)w;
    }
    text[len] = '\0';
    kv_add(b, key, text, 0);
    free(text);
}

int badnodes_take(const char *text, size_t len, const char *key, rdzv_badnode_t *v, int cap)
{
    char *val = malloc(TEXT_MAX + 1);
    if (!val || kv_get(text, len, key, val, TEXT_MAX + 1) < 0) {
        free(val);
        return 0;
    }
    int n = 0;
    for (char *line = val, *next; line && n < cap; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        int caused, checks, asked, out, off = -1;
        if (sscanf(line, "%d %d %d %d %n", &caused, &checks, &asked, &out, &off) != 4 ||
            off < 0 || !line[off] || caused < 0 || checks < 0 || caused > 1 << 30 ||
            checks > 1 << 30)
            continue;
        rdzv_badnode_t *b = &v[n++];
        memset(b, 0, sizeof *b);
        b->caused = caused;
        b->checks = checks;
        b->asked = asked == 1;
        b->out = out == 1;
        sfmt(b->name, sizeof b->name, "%s", line + off);
    }
    free(val);
    return n;
}
