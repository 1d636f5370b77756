/* DeepSpeed's resource selection (--include/--exclude/--num_nodes/--num_gpus) with its
 * documented examples and error texts, and the pool a hostfile or a local run gives. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/resources.h"

static char err[1024];
static char got[4096];

static struct hostfile hf;
static struct resources pool;

static void load(const char *text, enum hostfile_dialect d, int default_slots)
{
    hostfile_free(&hf);
    resources_free(&pool);
    CHECK_EQ_INT(hostfile_parse(&hf, text, strlen(text), d, "/job/hostfile", err, sizeof err), 0);
    CHECK_EQ_INT(resources_from_hostfile(&pool, &hf, default_slots, err, sizeof err), 0);
}

/* Renders resources as "host:s,s host:s" in node order. */
static const char *render(const struct resources *r)
{
    size_t o = 0;
    got[0] = '\0';
    for (size_t i = 0; i < r->count; i++) {
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%s:", i ? " " : "", r->nodes[i].host);
        for (size_t k = 0; k < r->nodes[i].nslots; k++)
            o += (size_t)snprintf(got + o, sizeof got - o, "%s%d", k ? "," : "",
                                  r->nodes[i].slots[k]);
    }
    return got;
}

static const char *sel(const char *inc, const char *exc, int num_nodes, int num_gpus)
{
    struct resources out;
    struct resources_select s = {inc, exc, num_nodes, num_gpus};
    err[0] = '\0';
    int rc = resources_select(&out, &pool, &s, err, sizeof err);
    if (rc)
        snprintf(got, sizeof got, "ERR %d", -rc);
    else
        render(&out);
    resources_free(&out);
    return got;
}

static const char *const four =
    "worker-0 slots=4\nworker-1 slots=4\nworker-2 slots=4\nworker-3 slots=4\n";

static void test_select_documented(void)
{
    load(four, HOSTFILE_DEEPSPEED, -1);
    CHECK_EQ_STR(render(&pool),
                 "worker-0:0,1,2,3 worker-1:0,1,2,3 worker-2:0,1,2,3 worker-3:0,1,2,3");
    CHECK_EQ_STR(sel(NULL, NULL, -1, -1), render(&pool));
    CHECK_EQ_STR(sel("", "", -1, -1),
                 "worker-0:0,1,2,3 worker-1:0,1,2,3 worker-2:0,1,2,3 worker-3:0,1,2,3");
    /* runner.py --include help: all slots on worker-0 and slots [0, 2] on worker-1 (the
     * current regression, DeepSpeed#6671, would give worker-0 nothing) */
    CHECK_EQ_STR(sel("worker-0@worker-1:0,2", NULL, -1, -1), "worker-0:0,1,2,3 worker-1:0,2");
    CHECK_EQ_STR(sel("worker-0", NULL, -1, -1), "worker-0:0,1,2,3");
    /* and keeping worker-1 whole when it is named alone second */
    CHECK_EQ_STR(sel("worker-0:0,2@worker-1", NULL, -1, -1), "worker-0:0,2 worker-1:0,1,2,3");
    /* getting-started.md: only GPUs 0 and 1 on worker-2 */
    CHECK_EQ_STR(sel("worker-2:0,1", NULL, -1, -1), "worker-2:0,1");
    /* getting-started.md: all but GPU 0 on worker-2 and GPUs 0 and 1 on worker-3 */
    CHECK_EQ_STR(sel(NULL, "worker-2:0@worker-3:0,1", -1, -1),
                 "worker-0:0,1,2,3 worker-1:0,1,2,3 worker-2:1,2,3 worker-3:2,3");
    /* runner.py --exclude help: everything except slot 0 on worker-1 */
    CHECK_EQ_STR(sel(NULL, "worker-1:0", -1, -1),
                 "worker-0:0,1,2,3 worker-1:1,2,3 worker-2:0,1,2,3 worker-3:0,1,2,3");
    CHECK_EQ_STR(sel(NULL, "worker-1", -1, -1),
                 "worker-0:0,1,2,3 worker-2:0,1,2,3 worker-3:0,1,2,3");
    /* hostfile order, not the order named; slots sorted and deduplicated */
    CHECK_EQ_STR(sel("worker-3:3,1,3@worker-1:2", NULL, -1, -1), "worker-1:2 worker-3:1,3");
    /* named alone and with slots: alone wins, in both lists */
    CHECK_EQ_STR(sel("worker-0:1@worker-0", NULL, -1, -1), "worker-0:0,1,2,3");
    CHECK_EQ_STR(sel(NULL, "worker-0:1@worker-0@worker-1:0@worker-1:1", -1, -1),
                 "worker-1:2,3 worker-2:0,1,2,3 worker-3:0,1,2,3");
    /* getting-started.md: --num_nodes=2; and --num_gpus */
    CHECK_EQ_STR(sel(NULL, NULL, 2, -1), "worker-0:0,1,2,3 worker-1:0,1,2,3");
    CHECK_EQ_STR(sel(NULL, NULL, 9, -1), render(&pool));
    CHECK_EQ_STR(sel(NULL, NULL, -1, 2), "worker-0:0,1 worker-1:0,1 worker-2:0,1 worker-3:0,1");
    CHECK_EQ_STR(sel(NULL, NULL, 1, 1), "worker-0:0");
}

static void test_select_uneven(void)
{
    load("a slots=2\nb slots=3\nc slots=0\n", HOSTFILE_DEEPSPEED, -1);
    /* a host with slots=0 stays in the unfiltered pool (DeepSpeed does the same) */
    CHECK_EQ_STR(sel(NULL, NULL, -1, -1), "a:0,1 b:0,1,2 c:");
    CHECK_EQ_STR(sel(NULL, "b:0", -1, -1), "a:0,1 b:1,2"); /* a filter drops empty hosts */
    CHECK_EQ_STR(sel("b@a:1", NULL, -1, -1), "a:1 b:0,1,2");
    CHECK_EQ_STR(sel(NULL, NULL, 2, 2), "a:0,1 b:0,1");
    CHECK_EQ_STR(sel(NULL, NULL, -1, 3), "ERR 22");
    CHECK_EQ_STR(err, "--num_gpus 3: host a has only 2 slots (/job/hostfile); lower --num_gpus "
                      "or give the host more slots");
    CHECK_EQ_STR(sel("c", NULL, -1, -1), "ERR 22");
    CHECK_EQ_STR(err, "--include \"c\" leaves no slot to run on (hosts in /job/hostfile: a, b, "
                      "c); select at least one");
}

static void test_select_errors(void)
{
    static const struct {
        const char *inc, *exc;
        int nn, ng;
        const char *msg;
    } t[] = {
        {"worker-0", "worker-1", -1, -1,
         "--include \"worker-0\" and --exclude \"worker-1\": include_str and exclude_str are "
         "mutually exclusive. (give one of them)"},
        {"worker-0", NULL, 2, -1,
         "--num_nodes with --include: Cannot specify num_nodes/gpus with include/exclude "
         "(choose resources one way)"},
        {NULL, "worker-0", -1, 0, /* DeepSpeed checks >= 0 here */
         "--num_gpus with --exclude: Cannot specify num_nodes/gpus with include/exclude "
         "(choose resources one way)"},
        {"worker-0", "worker-1", 1, -1, /* this check comes first in runner.py */
         "--num_nodes with --include: Cannot specify num_nodes/gpus with include/exclude "
         "(choose resources one way)"},
        {NULL, NULL, 0, -1, "--num_nodes 0: give at least 1 (or leave it out for all)"},
        {NULL, NULL, -1, 0, "--num_gpus 0: give at least 1 (or leave it out for all)"},
        {"worker-9", NULL, -1, -1,
         "--include \"worker-9\": Hostname 'worker-9' not found in hostfile (hosts in "
         "/job/hostfile: worker-0, worker-1, worker-2, worker-3)"},
        {NULL, "worker-9:0", -1, -1,
         "--exclude \"worker-9:0\": Hostname 'worker-9' not found in hostfile (hosts in "
         "/job/hostfile: worker-0, worker-1, worker-2, worker-3)"},
        {"worker-0:7", NULL, -1, -1,
         "--include \"worker-0:7\": No slot '7' specified on host 'worker-0' (it has slots "
         "0-3)"},
        {NULL, "worker-0:4", -1, -1,
         "--exclude \"worker-0:4\": No slot '4' specified on host 'worker-0' (it has slots "
         "0-3)"},
        {"worker-0:2000000", NULL, -1, -1,
         "--include \"worker-0:2000000\": No slot '2000000' specified on host 'worker-0' (it "
         "has slots 0-3)"},
        /* DeepSpeed's order: hosts as first named, slots ascending, a missing host in turn */
        {"worker-0:9,5", NULL, -1, -1,
         "--include \"worker-0:9,5\": No slot '5' specified on host 'worker-0' (it has slots "
         "0-3)"},
        {"worker-1:1@worker-0:9@worker-1:8", NULL, -1, -1,
         "--include \"worker-1:1@worker-0:9@worker-1:8\": No slot '8' specified on host "
         "'worker-1' (it has slots 0-3)"},
        {"worker-0:7@worker-9", NULL, -1, -1,
         "--include \"worker-0:7@worker-9\": No slot '7' specified on host 'worker-0' (it has "
         "slots 0-3)"},
        {"worker-9@worker-0:7", NULL, -1, -1,
         "--include \"worker-9@worker-0:7\": Hostname 'worker-9' not found in hostfile (hosts "
         "in /job/hostfile: worker-0, worker-1, worker-2, worker-3)"},
        /* what DeepSpeed dies on in int() or split() */
        {"worker-0:a", NULL, -1, -1,
         "--include \"worker-0:a\": slot \"a\" in \"worker-0:a\" is not a slot number; NODE_SPEC "
         "is NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"},
        {"worker-0:1,,2", NULL, -1, -1,
         "--include \"worker-0:1,,2\": slot \"\" in \"worker-0:1,,2\" is not a slot number; "
         "NODE_SPEC is NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"},
        {"worker-0:1234567890", NULL, -1, -1,
         "--include \"worker-0:1234567890\": slot \"1234567890\" in \"worker-0:1234567890\" is "
         "not a slot number; NODE_SPEC is NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. "
         "worker-0:0,2@worker-1"},
        {"worker-0:", NULL, -1, -1,
         "--include \"worker-0:\": \"worker-0:\" has no slot after ':'; NODE_SPEC is "
         "NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"},
        {"worker-0@", NULL, -1, -1,
         "--include \"worker-0@\": empty NODE_SPEC (an '@' too many); NODE_SPEC is "
         "NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"},
        {NULL, ":1", -1, -1,
         "--exclude \":1\": \":1\" has no host name; NODE_SPEC is NAME[:SLOT[,SLOT ...]], "
         "several joined by '@', e.g. worker-0:0,2@worker-1"},
        {"worker-0:1:2", NULL, -1, -1,
         "--include \"worker-0:1:2\": \"worker-0:1:2\" has more than one ':'; NODE_SPEC is "
         "NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"},
        /* syntax is checked before any host, as DeepSpeed parses the whole list first */
        {"worker-9@worker-0:x", NULL, -1, -1,
         "--include \"worker-9@worker-0:x\": slot \"x\" in \"worker-0:x\" is not a slot number; "
         "NODE_SPEC is NAME[:SLOT[,SLOT ...]], several joined by '@', e.g. worker-0:0,2@worker-1"},
        {NULL, "worker-0@worker-1@worker-2@worker-3", -1, -1,
         "--exclude \"worker-0@worker-1@worker-2@worker-3\" leaves no slot to run on (hosts in "
         "/job/hostfile: worker-0, worker-1, worker-2, worker-3); select at least one"},
    };
    load(four, HOSTFILE_DEEPSPEED, -1);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *r = sel(t[i].inc, t[i].exc, t[i].nn, t[i].ng);
        if (strcmp(err, t[i].msg) != 0)
            fprintf(stderr, "  case %zu: %s: %s\n", i, r, err);
        CHECK_EQ_STR(r, "ERR 22");
        CHECK_EQ_STR(err, t[i].msg);
    }
    load("a slots=0\n", HOSTFILE_DEEPSPEED, -1);
    CHECK_EQ_STR(sel(NULL, NULL, -1, -1), "ERR 22");
    CHECK_EQ_STR(err, "/job/hostfile: no host has a slot (hosts: a); give at least one host "
                      "slots=N");
}

static void test_resources(void)
{
    /* lines without slots take the default, or are an error without one */
    load("a\nb slots=2\nc:3\n", HOSTFILE_ANY, 1);
    CHECK_EQ_STR(render(&pool), "a:0 b:0,1 c:0,1,2");
    CHECK_EQ_INT(pool.nodes[2].line, 3);
    struct resources r;
    hostfile_free(&hf);
    CHECK_EQ_INT(hostfile_parse(&hf, "a slots=1\nb\n", 12, HOSTFILE_ANY, "/etc/volcano/w.host",
                                err, sizeof err),
                 0);
    CHECK_EQ_INT(resources_from_hostfile(&r, &hf, -1, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "/etc/volcano/w.host:2: host b has no slot count; write it as \"b slots=N\"");
    resources_free(&r);

    /* a pool without a file: localhost with the ids CUDA_VISIBLE_DEVICES lists */
    resources_free(&pool);
    int ids[] = {3, 2, 3};
    CHECK_EQ_INT(resources_add(&pool, "CUDA_VISIBLE_DEVICES", "localhost", 0, ids, 3,
                                        err, sizeof err),
                 0);
    CHECK_EQ_STR(render(&pool), "localhost:2,3");
    CHECK_EQ_STR(sel("localhost:2,3", NULL, -1, -1), "localhost:2,3");
    CHECK_EQ_STR(sel("localhost:0", NULL, -1, -1), "ERR 22");
    CHECK_EQ_STR(err, "--include \"localhost:0\": No slot '0' specified on host 'localhost' (it "
                      "has slots 2-3)");
    CHECK_EQ_STR(sel(NULL, "localhost:2", -1, -1), "localhost:3");
    CHECK_EQ_STR(sel(NULL, NULL, -1, 1), "localhost:2");
    CHECK_EQ_INT(resources_add(&pool, NULL, "localhost", 0, ids, 1, err, sizeof err),
                 -EINVAL);
    CHECK_EQ_STR(err, "host localhost is listed twice; list each host once");
    int bad = HOSTFILE_SLOTS_MAX;
    CHECK_EQ_INT(resources_add(&pool, NULL, "x", 0, &bad, 1, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "host x: slot id 1024 is not in 0..1023");
}

int main(void)
{
    RUN(test_select_documented);
    RUN(test_select_uneven);
    RUN(test_select_errors);
    RUN(test_resources);
    hostfile_free(&hf);
    resources_free(&pool);
    return check_result();
}
