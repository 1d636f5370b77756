/* rdzv/coordinator_badnodes.c — the nodes the job remembers for their failures (rdzv/badnodes.h)
 * in the round state machine: counted at each stop decision, left out when they join again. */
#include "rdzv/coordinator_int.h"

#include <stdio.h>
#include <string.h>

/* The nodes the open (or next) round may still have without `self`: those joined, expected back,
 * running or waiting, that are not left out themselves. */
static int others(const coord_t *c, const cnode_t *self)
{
    int k = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const cnode_t *m = c->nodes[i];
        if (m == self || !(m->state == NS_JOINED || m->state == NS_STOPPED ||
                           m->state == NS_WAITING || m->state == NS_MEMBER))
            continue;
        rdzv_badnode_t *b = badnodes_find((badnodes_t *)&c->bad, m->d.name);
        k += !(b && b->out);
    }
    return k;
}

/* Why the job cannot do without node n, in why[0..cap) ("" when it can): it is the agent whose
 * exit ends the job store, another node has its name (the list cannot tell them apart), or the
 * other nodes are fewer than --nnodes' minimum. Returns how many others there are. */
static int cannot(const coord_t *c, const cnode_t *n, char *why, size_t cap)
{
    int left = others(c, n);
    why[0] = '\0';
    if (strcmp(n->ids, c->host_id) == 0) {
        sfmt(why, cap, "it hosts the job store");
        return left;
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i] != n && c->nodes[i]->state != NS_GONE &&
            strcmp(c->nodes[i]->d.name, n->d.name) == 0) {
            sfmt(why, cap, "another node has its name, and nodes are told apart by name "
                 "(--node-name)");
            return left;
        }
    if (left < c->p.min_nodes)
        sfmt(why, cap, "%d other node%s, at least %d needed (--nnodes)", left,
             left == 1 ? "" : "s", c->p.min_nodes);
    return left;
}

/* The live node named `name`, or NULL. */
static cnode_t *by_name(const coord_t *c, const char *name)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i]->state != NS_GONE && strcmp(c->nodes[i]->d.name, name) == 0)
            return c->nodes[i];
    return NULL;
}

/* The stop decision d is made: its failures are counted, and a node that has just become bad
 * is left out of the rounds to come when the job can do without it, which is said once (where
 * it cannot, its rejoin says why it stays). d carries the list, so that every agent can show
 * it. */
void coord_badnodes_decided(coord_t *c, rdzv_decision_t *d)
{
    badnodes_note(&c->bad, c->failures, c->n_failures);
    for (int i = 0; i < c->bad.n; i++) {
        rdzv_badnode_t *b = &c->bad.v[i];
        if (b->out || !badnodes_is_bad(b, c->p.max_node_failures))
            continue;
        const cnode_t *n = by_name(c, b->name);
        char why[160] = "", line[RDZV_NAME_MAX + 160];
        if (n)
            cannot(c, n, why, sizeof why);
        if (why[0])
            continue;   /* its rejoin says why it stays */
        b->out = 1;
        badnodes_describe(b, line, sizeof line);
        coord_act_log(c, "rendezvous '%s': %s is a bad node (%s): it is left out of the rounds to "
                      "come", c->run_id, line,
                      b->asked ? "a worker asked" : "--max-node-failures reached");
    }
    d->n_bad = c->bad.n;
    memcpy(d->bad, c->bad.v, (size_t)c->bad.n * sizeof *d->bad);
}

/* A bad node joins (again): where the job can do without it it is answered "excluded" and is out
 * of the job; else it is admitted, and the log says why. 1 when it was left out. */
int coord_badnodes_refuse(coord_t *c, cnode_t *n, int idx, double now)
{
    rdzv_badnode_t *b = badnodes_find(&c->bad, n->d.name);
    if (!b || !badnodes_is_bad(b, c->p.max_node_failures))
        return 0;
    char why[160], line[RDZV_NAME_MAX + 160], text[RDZV_LINE_MAX];
    int left = cannot(c, n, why, sizeof why);
    b->out = !why[0];
    badnodes_describe(b, line, sizeof line);
    if (why[0]) {
        coord_act_log(c, "rendezvous '%s': %s is a bad node, but the job cannot do without it "
                      "(%s): it stays", c->run_id, line, why);
        return 0;
    }
    sfmt(text, sizeof text, "rendezvous '%s': this node is left out of the job as a bad node: %s; "
         "the job goes on with the other %d node%s", c->run_id, line, left, left == 1 ? "" : "s");
    coord_act_log(c, "rendezvous '%s': left out %s", c->run_id, line);
    coord_answer_error(c, n, "excluded", text);
    coord_round_node_gone(c, n, idx, FK_LEFT, "left out as a bad node", now);
    return 1;
}
