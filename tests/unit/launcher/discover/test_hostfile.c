/* Hostfiles (DeepSpeed's grammar and error texts, OpenMPI/MPICH/Volcano lines), DeepSpeed's
 * resource selection with its documented examples, and finding this node's line. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/hostfile.h"

static char err[1024];
static char got[4096];

/* Parses text and renders the entries as "host:slots@line ..." (slots '-' when unset). */
static const char *parse(const char *text, enum hostfile_dialect d, const char *name)
{
    struct hostfile hf;
    err[0] = '\0';
    int rc = hostfile_parse(&hf, text, strlen(text), d, name, err, sizeof err);
    size_t o = 0;
    got[0] = '\0';
    if (rc)
        snprintf(got, sizeof got, "ERR %d", -rc);
    for (size_t i = 0; !rc && i < hf.count; i++) {
        const struct hostfile_entry *e = &hf.entries[i];
        char s[16];
        if (e->slots == HOSTFILE_SLOTS_UNSET)
            snprintf(s, sizeof s, "-");
        else
            snprintf(s, sizeof s, "%d", e->slots);
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%s:%s@%u", i ? " " : "", e->host, s,
                              e->line);
        if (e->max_slots != HOSTFILE_SLOTS_UNSET)
            o += (size_t)snprintf(got + o, sizeof got - o, "/max%d", e->max_slots);
    }
    hostfile_free(&hf);
    return got;
}

#define DS(text) parse(text, HOSTFILE_DEEPSPEED, "/job/hostfile")
#define ANY(text) parse(text, HOSTFILE_ANY, "/etc/mpi/hostfile")

static void test_deepspeed_grammar(void)
{
    CHECK_EQ_STR(DS("worker-0 slots=4\nworker-1 slots=4\n"), "worker-0:4@1 worker-1:4@2");
    /* comments, blank lines, tabs, anything after the digits, user@host, CRLF, a lone CR */
    CHECK_EQ_STR(DS("# pool\n\n  worker-0\tslots=8 max_slots=8\n   \n"
                    "worker-1 slots=2 # small\r\nroot@worker-2  slots=1\rworker-3 slots=16abc"),
                 "worker-0:8@3 worker-1:2@5 root@worker-2:1@6 worker-3:16@7");
    CHECK_EQ_STR(DS("  # indented comment\nw slots=0\n"), "w:0@2"); /* slots=0 is accepted */
    CHECK_EQ_STR(DS("w slots=1024"), "w:1024@1");
}

static void test_deepspeed_errors(void)
{
    static const struct {
        const char *in;
        const char *msg;
    } t[] = {
        {"worker-0 slots=4\nworker-1\n",
         "/job/hostfile:2: Hostfile contains a bad entry: worker-1, unable to proceed with "
         "launching (a line is \"HOSTNAME slots=N\")"},
        {"worker-0 slots=\n",
         "/job/hostfile:1: Hostfile contains a bad entry: worker-0 slots=, unable to proceed "
         "with launching (a line is \"HOSTNAME slots=N\")"},
        {"worker-0 slots=a\n",
         "/job/hostfile:1: Hostfile contains a bad entry: worker-0 slots=a, unable to proceed "
         "with launching (a line is \"HOSTNAME slots=N\")"},
        {"  slots=4  \n",
         "/job/hostfile:1: Hostfile contains a bad entry: slots=4, unable to proceed with "
         "launching (a line is \"HOSTNAME slots=N\")"},
        {"worker-0 4\n",
         "/job/hostfile:1: Hostfile contains a bad entry: worker-0 4, unable to proceed with "
         "launching (a line is \"HOSTNAME slots=N\")"},
        {"worker-0:4\n", /* the MPICH form is not DeepSpeed's */
         "/job/hostfile:1: Hostfile contains a bad entry: worker-0:4, unable to proceed with "
         "launching (a line is \"HOSTNAME slots=N\")"},
        {"worker-0 # slots=4\n",
         "/job/hostfile:1: Hostfile contains a bad entry: worker-0 # slots=4, unable to proceed "
         "with launching (a line is \"HOSTNAME slots=N\")"},
        {"a slots=1\nb slots=1\na slots=2\n",
         "/job/hostfile:3: Hostfile contains multiple entries for a, unable to proceed with "
         "launching (line 1 has it too; list each host once)"},
        /* the first problem in file order wins, as in DeepSpeed's loop */
        {"a slots=1\nb slots=1\nb slots=1\na slots=1\nbad\n",
         "/job/hostfile:3: Hostfile contains multiple entries for b, unable to proceed with "
         "launching (line 2 has it too; list each host once)"},
        {"a slots=1\nbad\na slots=1\n",
         "/job/hostfile:2: Hostfile contains a bad entry: bad, unable to proceed with launching "
         "(a line is \"HOSTNAME slots=N\")"},
        {"# nothing\n\n",
         "/job/hostfile: Hostfile is empty or not formatted correctly, unable to proceed with "
         "launching. (add one \"HOSTNAME slots=N\" line per host)"},
        {"", "/job/hostfile: Hostfile is empty or not formatted correctly, unable to proceed "
             "with launching. (add one \"HOSTNAME slots=N\" line per host)"},
        {"w slots=1025\n",
         "/job/hostfile:1: slots=1025 for host w is more than 1024; slots are one host's GPUs"},
        {"w slots=99999999999999999999\n",
         "/job/hostfile:1: slots=99999999999999999999 for host w is more than 1024; slots are "
         "one host's GPUs"},
        {"w slots=1\nx\x02 slots=1\n",
         "/job/hostfile:2: control byte 0x02; a hostfile is plain text"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *r = DS(t[i].in);
        if (strcmp(err, t[i].msg) != 0)
            fprintf(stderr, "  DS(\"%s\"): %s: %s\n", t[i].in, r, err);
        CHECK_EQ_STR(r, "ERR 22");
        CHECK_EQ_STR(err, t[i].msg);
    }
}

static void test_limits(void)
{
    struct hostfile hf;
    /* a NUL inside the text is an error, not the end */
    CHECK_EQ_INT(hostfile_parse(&hf, "a slots=1\n\0b slots=1\n", 21, HOSTFILE_DEEPSPEED, "f",
                                err, sizeof err),
                 -EINVAL);
    CHECK_EQ_STR(err, "f:2: control byte 0x00; a hostfile is plain text");
    hostfile_free(&hf);

    static char big[HOSTFILE_LINE_MAX + 64];
    memset(big, 'a', HOSTFILE_LINE_MAX + 1);
    big[HOSTFILE_LINE_MAX + 1] = '\0';
    CHECK_EQ_STR(ANY(big), "ERR 22");
    CHECK_EQ_STR(err, "/etc/mpi/hostfile:1: line is longer than 4096 bytes; a line names one host");
    memset(big, 'a', 256);
    strcpy(big + 256, " slots=1");
    CHECK_EQ_STR(DS(big), "ERR 22");
    CHECK(strstr(err, "/job/hostfile:1: host name aaaa") == err);
    CHECK(strstr(err, "... is longer than 255 bytes") != NULL);

    /* HOSTFILE_HOSTS_MAX host lines, then one more */
    size_t cap = (size_t)(HOSTFILE_HOSTS_MAX + 1) * 8 + 1, o = 0;
    char *text = malloc(cap);
    for (int i = 0; i <= HOSTFILE_HOSTS_MAX; i++)
        o += (size_t)snprintf(text + o, cap - o, "h%05d\n", i);
    CHECK_EQ_INT(hostfile_parse(&hf, text, o - 7, HOSTFILE_ANY, "f", err, sizeof err), 0);
    CHECK_EQ_INT(hf.count, HOSTFILE_HOSTS_MAX);
    hostfile_free(&hf);
    CHECK_EQ_INT(hostfile_parse(&hf, text, o, HOSTFILE_ANY, "f", err, sizeof err), -E2BIG);
    CHECK_EQ_STR(err, "f:65537: more than 65536 hosts; split the job");
    hostfile_free(&hf);
    /* a repeat at the end of a long file is still found */
    memcpy(text + o - 7, "h00001\n", 7);
    CHECK_EQ_INT(hostfile_parse(&hf, text, o, HOSTFILE_DEEPSPEED, "f", err, sizeof err), -EINVAL);
    hostfile_free(&hf);
    CHECK_EQ_INT(hostfile_parse(&hf, text, o - 7, HOSTFILE_ANY, "f", err, sizeof err), 0);
    hostfile_free(&hf);
    free(text);
}

static void test_any_grammar(void)
{
    /* Volcano's /etc/volcano/<task>.host: one FQDN per line */
    CHECK_EQ_STR(ANY("job-worker-0.job\njob-worker-1.job\n"),
                 "job-worker-0.job:-@1 job-worker-1.job:-@2");
    /* MPIJob, OpenMPI: host slots=N, spaces around '=', max_slots, comments anywhere */
    CHECK_EQ_STR(ANY("job-worker-0.job.ns.svc slots=2\n"
                     "job-worker-1.job.ns.svc slots = 2 max_slots=4 # spare\n"
                     "# job-worker-2.job.ns.svc slots=2\n"
                     "job-worker-3.job.ns.svc\tcount=3 username=mpi cores=8\n"),
                 "job-worker-0.job.ns.svc:2@1 job-worker-1.job.ns.svc:2@2/max4 "
                 "job-worker-3.job.ns.svc:3@4");
    /* MPIJob, Intel MPI / MPICH: host:N */
    CHECK_EQ_STR(ANY("job-worker-0.job.ns.svc:2\njob-worker-1.job.ns.svc:4\n"),
                 "job-worker-0.job.ns.svc:2@1 job-worker-1.job.ns.svc:4@2");
    /* addresses, IPv6 kept whole */
    CHECK_EQ_STR(ANY("10.0.0.1 slots=1\nfe80::1 slots=2\n::1\n"),
                 "10.0.0.1:1@1 fe80::1:2@2 ::1:-@3");
    CHECK_EQ_STR(ANY("a slots =1\nb max-slots= 3 cpu=2\n"), "a:1@1 b:2@2/max3");
}

static void test_any_errors(void)
{
    static const struct {
        const char *in;
        const char *msg;
    } t[] = {
        {"slots=4\n", "/etc/mpi/hostfile:1: \"slots=4\" has no host name in front; a line is "
                      "HOST, HOST slots=N [max_slots=N] or HOST:N"},
        {"a\n= 4\n", "/etc/mpi/hostfile:2: \"=4\" has no host name in front; a line is HOST, "
                     "HOST slots=N [max_slots=N] or HOST:N"},
        {"h foo=1\n", "/etc/mpi/hostfile:1: \"foo=1\" is not a hostfile setting; a line is "
                      "HOST, HOST slots=N [max_slots=N] or HOST:N"},
        {"h 4\n", "/etc/mpi/hostfile:1: \"4\" after host h is not KEY=VALUE; a line is HOST, "
                  "HOST slots=N [max_slots=N] or HOST:N"},
        {"h slots=\n", "/etc/mpi/hostfile:1: \"slots=\" has no value; a line is HOST, HOST "
                       "slots=N [max_slots=N] or HOST:N"},
        {"h slots=x\n", "/etc/mpi/hostfile:1: \"slots=x\" for host h is not a number"},
        {"h slots=2000\n", "/etc/mpi/hostfile:1: \"slots=2000\" for host h is more than 1024; "
                           "slots are one host's GPUs"},
        {"h:x\n", "/etc/mpi/hostfile:1: \"h:x\": the count after ':' is not a number; a line is "
                  "HOST, HOST slots=N [max_slots=N] or HOST:N"},
        {"h:\n", "/etc/mpi/hostfile:1: \"h:\": the count after ':' is not a number; a line is "
                 "HOST, HOST slots=N [max_slots=N] or HOST:N"},
        {"h:5000\n", "/etc/mpi/hostfile:1: \"h:5000\" is more than 1024 slots; slots are one "
                     "host's GPUs"},
        {":4\n", "/etc/mpi/hostfile:1: \":4\" has no host name; a line is HOST, HOST slots=N "
                 "[max_slots=N] or HOST:N"},
        {"h:4 slots=2\n", "/etc/mpi/hostfile:1: host h has its slots given twice; give it once"},
        {"h slots=4 max_slots=2\n",
         "/etc/mpi/hostfile:1: host h has max_slots=2 below slots=4; raise max_slots"},
        {"a\nb\na slots=2\n",
         "/etc/mpi/hostfile:3: host a is listed twice (lines 1 and 3); list each host once"},
        {"# empty\n   # still\n",
         "/etc/mpi/hostfile: no host in it (only blank lines and comments); list one host per "
         "line"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *r = ANY(t[i].in);
        if (strcmp(err, t[i].msg) != 0)
            fprintf(stderr, "  ANY(\"%s\"): %s: %s\n", t[i].in, r, err);
        CHECK_EQ_STR(r, "ERR 22");
        CHECK_EQ_STR(err, t[i].msg);
    }
    /* an odd file name is quoted, and the message stays one line */
    parse("x:y\n", HOSTFILE_ANY, "a\nb");
    CHECK(strncmp(err, "a\\x0ab:1: ", 10) == 0);
    CHECK(strchr(err, '\n') == NULL);
}

/* ---- resources and selection ---- */

static struct hostfile hf;
static struct hostfile_resources pool;

static void load(const char *text, enum hostfile_dialect d, int default_slots)
{
    hostfile_free(&hf);
    hostfile_resources_free(&pool);
    CHECK_EQ_INT(hostfile_parse(&hf, text, strlen(text), d, "/job/hostfile", err, sizeof err), 0);
    CHECK_EQ_INT(hostfile_resources_from(&pool, &hf, default_slots, err, sizeof err), 0);
}

/* Renders resources as "host:s,s host:s" in node order. */
static const char *render(const struct hostfile_resources *r)
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
    struct hostfile_resources out;
    struct hostfile_select s = {inc, exc, num_nodes, num_gpus};
    err[0] = '\0';
    int rc = hostfile_select(&out, &pool, &s, err, sizeof err);
    if (rc)
        snprintf(got, sizeof got, "ERR %d", -rc);
    else
        render(&out);
    hostfile_resources_free(&out);
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
    struct hostfile_resources r;
    hostfile_free(&hf);
    CHECK_EQ_INT(hostfile_parse(&hf, "a slots=1\nb\n", 12, HOSTFILE_ANY, "/etc/volcano/w.host",
                                err, sizeof err),
                 0);
    CHECK_EQ_INT(hostfile_resources_from(&r, &hf, -1, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "/etc/volcano/w.host:2: host b has no slot count; write it as \"b slots=N\"");
    hostfile_resources_free(&r);

    /* a pool without a file: localhost with the ids CUDA_VISIBLE_DEVICES lists */
    hostfile_resources_free(&pool);
    int ids[] = {3, 2, 3};
    CHECK_EQ_INT(hostfile_resources_add(&pool, "CUDA_VISIBLE_DEVICES", "localhost", 0, ids, 3,
                                        err, sizeof err),
                 0);
    CHECK_EQ_STR(render(&pool), "localhost:2,3");
    CHECK_EQ_STR(sel("localhost:2,3", NULL, -1, -1), "localhost:2,3");
    CHECK_EQ_STR(sel("localhost:0", NULL, -1, -1), "ERR 22");
    CHECK_EQ_STR(err, "--include \"localhost:0\": No slot '0' specified on host 'localhost' (it "
                      "has slots 2-3)");
    CHECK_EQ_STR(sel(NULL, "localhost:2", -1, -1), "localhost:3");
    CHECK_EQ_STR(sel(NULL, NULL, -1, 1), "localhost:2");
    CHECK_EQ_INT(hostfile_resources_add(&pool, NULL, "localhost", 0, ids, 1, err, sizeof err),
                 -EINVAL);
    CHECK_EQ_STR(err, "host localhost is listed twice; list each host once");
    int bad = HOSTFILE_SLOTS_MAX;
    CHECK_EQ_INT(hostfile_resources_add(&pool, NULL, "x", 0, &bad, 1, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "host x: slot id 1024 is not in 0..1023");
}

/* ---- this node's line ---- */

static int find(const char *text, enum hostfile_dialect d, const struct hostfile_resources *act,
                const char *hostname, const char *fqdn, const char *const *addrs, size_t naddrs,
                size_t *rank)
{
    size_t entry = 99;
    struct hostfile_self me = {hostname, fqdn, addrs, naddrs};
    hostfile_free(&hf);
    CHECK_EQ_INT(hostfile_parse(&hf, text, strlen(text), d, "/etc/mpi/hostfile", err, sizeof err),
                 0);
    *rank = 99;
    int rc = hostfile_find_self(&hf, act, &me, &entry, rank, err, sizeof err);
    if (rc == 0 && !act)
        CHECK_EQ_INT(entry, *rank);
    return rc;
}

static void test_find_self(void)
{
    size_t rank;
    const char *mpijob = "job-worker-0.job.ns.svc slots=1\njob-worker-1.job.ns.svc slots=1\n"
                         "job-worker-2.job.ns.svc slots=1\n";
    const char *no_addr[] = {"127.0.0.1"};
    /* the pod's short hostname is the FQDN entry's first label */
    CHECK_EQ_INT(find(mpijob, HOSTFILE_ANY, NULL, "job-worker-1",
                      "job-worker-1.job.ns.svc.cluster.local", no_addr, 1, &rank),
                 0);
    CHECK_EQ_INT(rank, 1);
    /* exact FQDN, case and a trailing dot ignored */
    CHECK_EQ_INT(find(mpijob, HOSTFILE_ANY, NULL, "x", "JOB-worker-2.job.ns.svc.", NULL, 0, &rank),
                 0);
    CHECK_EQ_INT(rank, 2);
    /* a short entry and a hostname that is an FQDN */
    CHECK_EQ_INT(find("w-0\nw-1\n", HOSTFILE_ANY, NULL, "w-1.example.com", NULL, NULL, 0, &rank),
                 0);
    CHECK_EQ_INT(rank, 1);
    /* by address, IPv4 and IPv6 in any spelling; user@ is not part of the host */
    const char *addrs[] = {"127.0.0.1", "10.0.0.2", "fe80::0:1%eth0"};
    CHECK_EQ_INT(find("10.0.0.1\n10.0.0.2\n", HOSTFILE_ANY, NULL, "pod", NULL, addrs, 3, &rank), 0);
    CHECK_EQ_INT(rank, 1);
    CHECK_EQ_INT(find("a slots=1\nroot@[FE80::1] slots=2\n", HOSTFILE_DEEPSPEED, NULL, "pod",
                      NULL, addrs, 3, &rank),
                 0);
    CHECK_EQ_INT(rank, 1);
    CHECK_EQ_INT(find("a slots=1\nroot@b slots=2\n", HOSTFILE_DEEPSPEED, NULL, "b", NULL, NULL, 0,
                      &rank),
                 0);
    CHECK_EQ_INT(rank, 1);
    /* an address entry does not match a name, nor a dotted name a different dotted name */
    const char *ten[] = {"10.0.0.9"};
    CHECK_EQ_INT(find("10.0.0.1\n", HOSTFILE_ANY, NULL, "10", NULL, ten, 1, &rank), -ENOENT);
    CHECK_EQ_INT(find("w-0.a.svc\n", HOSTFILE_ANY, NULL, "w-1", "w-0.b.svc", NULL, 0, &rank),
                 -ENOENT);

    CHECK_EQ_INT(find(mpijob, HOSTFILE_ANY, NULL, "job-worker-7",
                      "job-worker-7.job.ns.svc.cluster.local", addrs, 2, &rank),
                 -ENOENT);
    CHECK_EQ_STR(err, "this pod (job-worker-7, job-worker-7.job.ns.svc.cluster.local, 127.0.0.1, "
                      "10.0.0.2) is not in hostfile /etc/mpi/hostfile (hosts: "
                      "job-worker-0.job.ns.svc, job-worker-1.job.ns.svc, job-worker-2.job.ns.svc); "
                      "add its name or address to the file");
    CHECK_EQ_INT(find("h0\nh1\nh2\nh3\nh4\nh5\nh6\nh7\nh8\nh9\n", HOSTFILE_ANY, NULL, "z", "z",
                      NULL, 0, &rank),
                 -ENOENT);
    CHECK_EQ_STR(err, "this pod (z) is not in hostfile /etc/mpi/hostfile (hosts: h0, h1, h2, h3, "
                      "h4, h5, h6, h7, h8, h9); add its name or address to the file");
    /* a long list is cut, with the count */
    char many[4096];
    size_t o = 0;
    for (int i = 0; i < 200; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "host-%03d\n", i);
    CHECK_EQ_INT(find(many, HOSTFILE_ANY, NULL, "z", NULL, NULL, 0, &rank), -ENOENT);
    CHECK(strstr(err, "(hosts: host-000, host-001, ") != NULL);
    CHECK(strstr(err, ", ... (200 in all)); add its name or address to the file") != NULL);
    CHECK_EQ_INT(find("w-0.a slots=1\nw-1.a slots=1\nw-0.b slots=1\n", HOSTFILE_DEEPSPEED, NULL,
                      "w-0", NULL, NULL, 0, &rank),
                 -EEXIST);
    CHECK_EQ_STR(err, "this pod (w-0) is named by two lines of hostfile /etc/mpi/hostfile: line "
                      "1 (w-0.a) and line 3 (w-0.b); keep one line per pod");
    const char *both[] = {"10.0.0.1"};
    CHECK_EQ_INT(find("w-0\n10.0.0.1\n", HOSTFILE_ANY, NULL, "w-0", NULL, both, 1, &rank),
                 -EEXIST);

    /* node rank counts active nodes only */
    struct hostfile_resources all, act;
    struct hostfile_select s = {NULL, "w-0", -1, -1};
    const char *ds = "w-0 slots=2\nw-1 slots=2\nw-2 slots=2\n";
    find(ds, HOSTFILE_DEEPSPEED, NULL, "w-0", NULL, NULL, 0, &rank);
    CHECK_EQ_INT(hostfile_resources_from(&all, &hf, -1, err, sizeof err), 0);
    CHECK_EQ_INT(hostfile_select(&act, &all, &s, err, sizeof err), 0);
    CHECK_EQ_INT(find(ds, HOSTFILE_DEEPSPEED, &act, "w-2", NULL, NULL, 0, &rank), 0);
    CHECK_EQ_INT(rank, 1);
    CHECK_EQ_INT(find(ds, HOSTFILE_DEEPSPEED, &act, "w-0", NULL, NULL, 0, &rank), -ESRCH);
    CHECK_EQ_STR(err, "this pod is line 1 (w-0) of hostfile /etc/mpi/hostfile, which the "
                      "resource selection leaves out; select it, or do not start podrun in this "
                      "pod");
    hostfile_resources_free(&all);
    hostfile_resources_free(&act);
}

int main(void)
{
    RUN(test_deepspeed_grammar);
    RUN(test_deepspeed_errors);
    RUN(test_limits);
    RUN(test_any_grammar);
    RUN(test_any_errors);
    RUN(test_select_documented);
    RUN(test_select_uneven);
    RUN(test_select_errors);
    RUN(test_resources);
    RUN(test_find_self);
    hostfile_free(&hf);
    hostfile_resources_free(&pool);
    return check_result();
}
