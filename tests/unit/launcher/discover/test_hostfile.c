/* Hostfiles (DeepSpeed's grammar and error texts, OpenMPI/MPICH/Volcano lines) and finding this
 * node's line, also among the nodes a resource selection keeps. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/hostfile.h"
#include "launcher/discover/resources.h"

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

/* ---- this node's line ---- */

static struct hostfile hf;

static int find(const char *text, enum hostfile_dialect d, const struct resources *act,
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
    struct resources all, act;
    struct resources_select s = {NULL, "w-0", -1, -1};
    const char *ds = "w-0 slots=2\nw-1 slots=2\nw-2 slots=2\n";
    find(ds, HOSTFILE_DEEPSPEED, NULL, "w-0", NULL, NULL, 0, &rank);
    CHECK_EQ_INT(resources_from_hostfile(&all, &hf, -1, err, sizeof err), 0);
    CHECK_EQ_INT(resources_select(&act, &all, &s, err, sizeof err), 0);
    CHECK_EQ_INT(find(ds, HOSTFILE_DEEPSPEED, &act, "w-2", NULL, NULL, 0, &rank), 0);
    CHECK_EQ_INT(rank, 1);
    CHECK_EQ_INT(find(ds, HOSTFILE_DEEPSPEED, &act, "w-0", NULL, NULL, 0, &rank), -ESRCH);
    CHECK_EQ_STR(err, "this pod is line 1 (w-0) of hostfile /etc/mpi/hostfile, which the "
                      "resource selection leaves out; select it, or do not start podrun in this "
                      "pod");
    resources_free(&all);
    resources_free(&act);
}

int main(void)
{
    RUN(test_deepspeed_grammar);
    RUN(test_deepspeed_errors);
    RUN(test_limits);
    RUN(test_any_grammar);
    RUN(test_any_errors);
    RUN(test_find_self);
    hostfile_free(&hf);
    return check_result();
}
