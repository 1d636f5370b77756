/* SLURM hostlists: expansion (zero padding, several groups, separators, bounds, every error
 * text), compression (ranges, padding, order kept) and the round trip between them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/discover/hostlist.h"

static char err[512];
static char got[8192];

/* Expands text and returns the names joined by ' ', or "ERR <code>" with err holding the line. */
static const char *expand(const char *text, size_t max)
{
    struct hostlist hl;
    err[0] = '\0';
    int rc = hostlist_expand(text, max, "SLURM_JOB_NODELIST", &hl, err, sizeof err);
    if (rc) {
        snprintf(got, sizeof got, "ERR %d", -rc);
        hostlist_free(&hl);
        return got;
    }
    size_t o = 0;
    got[0] = '\0';
    for (size_t i = 0; i < hl.count && o < sizeof got; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%s", i ? " " : "", hl.names[i]);
    hostlist_free(&hl);
    return got;
}

static void test_expand_golden(void)
{
    static const struct {
        const char *in, *out;
    } t[] = {
        {"node[01-04,07],gpu-[1-2]", "node01 node02 node03 node04 node07 gpu-1 gpu-2"},
        {"rack[1-2]-n[1-3]", "rack1-n1 rack1-n2 rack1-n3 rack2-n1 rack2-n2 rack2-n3"},
        {"a[1-2]b[3,5]c", "a1b3c a1b5c a2b3c a2b5c"},
        {"n[8-10]", "n8 n9 n10"},
        {"n[08-10]", "n08 n09 n10"},        /* the low end's digits set the padding */
        {"n[1-010]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10"},
        {"n[001-3]", "n001 n002 n003"},
        {"n[0]", "n0"},
        {"n[00]", "n00"},
        {"n[3,1-2]", "n3 n1 n2"},           /* order as written */
        {"n1,n1", "n1 n1"},                 /* duplicates kept, as SLURM does */
        {"n[1-2],n[2-3]", "n1 n2 n2 n3"},
        {"node1", "node1"},
        {"[1-3]", "1 2 3"},
        {"gpu[0-1]-ib", "gpu0-ib gpu1-ib"}, /* pdsh's suffix form */
        {"a, b\tc,,d\ne\r\nf", "a b c d e f"},
        {"  ,x, ", "x"},
        {"", ""},
        {" , \t", ""},
        {"h\xc3\xa9[1-2]", "h\xc3\xa9" "1 h\xc3\xa9" "2"},
        {"n[0-2],m[7]", "n0 n1 n2 m7"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *r = expand(t[i].in, 0);
        if (strcmp(r, t[i].out) != 0)
            fprintf(stderr, "  expand(\"%s\") = \"%s\" (%s)\n", t[i].in, r, err);
        CHECK_EQ_STR(r, t[i].out);
    }
}

static void test_expand_errors(void)
{
    static const struct {
        const char *in;
        int code;
        const char *msg;
    } t[] = {
        {"node[3-1]", EINVAL,
         "SLURM_JOB_NODELIST: range \"3-1\" in \"node[3-1]\" runs backwards; write it LOW-HIGH"},
        {"node[1-x]", EINVAL,
         "SLURM_JOB_NODELIST: bad range \"1-x\" in \"node[1-x]\"; a range is N or LOW-HIGH in "
         "digits, ranges joined by ',' as in node[01-04,07]"},
        {"n[1,,2]", EINVAL,
         "SLURM_JOB_NODELIST: bad range \"\" in \"n[1,,2]\"; a range is N or LOW-HIGH in digits, "
         "ranges joined by ',' as in node[01-04,07]"},
        {"n[ 3]", EINVAL,
         "SLURM_JOB_NODELIST: bad range \" 3\" in \"n[ 3]\"; a range is N or LOW-HIGH in digits, "
         "ranges joined by ',' as in node[01-04,07]"},
        {"n[+3]", EINVAL,
         "SLURM_JOB_NODELIST: bad range \"+3\" in \"n[+3]\"; a range is N or LOW-HIGH in digits, "
         "ranges joined by ',' as in node[01-04,07]"},
        {"n[3-]", EINVAL,
         "SLURM_JOB_NODELIST: bad range \"3-\" in \"n[3-]\"; a range is N or LOW-HIGH in digits, "
         "ranges joined by ',' as in node[01-04,07]"},
        {"n[-3]", EINVAL,
         "SLURM_JOB_NODELIST: bad range \"-3\" in \"n[-3]\"; a range is N or LOW-HIGH in digits, "
         "ranges joined by ',' as in node[01-04,07]"},
        {"node[]", EINVAL,
         "SLURM_JOB_NODELIST: empty brackets in \"node[]\"; put numbers in them, e.g. node[1-4]"},
        {"a,node[1-2,b", EINVAL,
         "SLURM_JOB_NODELIST: '[' without ']' in \"node[1-2,b\"; close the range, e.g. node[1-4]"},
        {"node1],b", EINVAL,
         "SLURM_JOB_NODELIST: ']' without '[' in \"node1]\"; a range is written name[1-4]"},
        {"n[1[2]]", EINVAL,
         "SLURM_JOB_NODELIST: '[' inside brackets in \"n[1[2]]\"; brackets do not nest"},
        {"a\x01z", EINVAL,
         "SLURM_JOB_NODELIST: control byte 0x01 in \"a\\x01z\"; host names are plain text"},
        {"n[1234567890123456789]", ERANGE,
         "SLURM_JOB_NODELIST: number in \"1234567890123456789\" of \"n[1234567890123456789]\" "
         "has more than 18 digits; host numbers are shorter"},
        {"n[1-65537]", E2BIG,
         "SLURM_JOB_NODELIST: \"n[1-65537]\" names more than 65536 hosts; list fewer"},
        {"n[0-999999999999999999]", E2BIG,
         "SLURM_JOB_NODELIST: \"n[0-999999999999999999]\" names more than 65536 hosts; list "
         "fewer"},
        {"a[1-300]b[1-300]", E2BIG,
         "SLURM_JOB_NODELIST: \"a[1-300]b[1-300]\" names more than 65536 hosts; list fewer"},
        {"a[1-40000],b[1-40000]", E2BIG,
         "SLURM_JOB_NODELIST: \"a[1-40000],b[1-40000]\" names more than 65536 hosts; list fewer"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "ERR %d", t[i].code);
        const char *r = expand(t[i].in, 0);
        if (strcmp(r, want) != 0 || strcmp(err, t[i].msg) != 0)
            fprintf(stderr, "  expand(\"%s\"): %s: %s\n", t[i].in, r, err);
        CHECK_EQ_STR(r, want);
        CHECK_EQ_STR(err, t[i].msg);
    }
}

static void test_expand_bounds(void)
{
    struct hostlist hl;
    /* exactly the bound is fine; the caller's bound wins when lower */
    CHECK_EQ_INT(hostlist_expand("n[1-65536]", 0, NULL, &hl, err, sizeof err), 0);
    CHECK_EQ_INT(hl.count, 65536);
    CHECK_EQ_STR(hl.names[65535], "n65536");
    hostlist_free(&hl);
    CHECK_EQ_STR(expand("n[1-4]", 3), "ERR 7");
    CHECK_EQ_STR(err, "SLURM_JOB_NODELIST: \"n[1-4]\" names more than 3 hosts; list fewer");
    CHECK_EQ_STR(expand("n[1-3]", 3), "n1 n2 n3");
    CHECK_EQ_STR(expand("a,b,c,d", 3), "ERR 7");
    /* NULL names the input "hostlist" */
    CHECK_EQ_INT(hostlist_expand("x]", 0, NULL, &hl, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "hostlist: ']' without '[' in \"x]\"; a range is written name[1-4]");
    hostlist_free(&hl);

    /* names up to HOSTLIST_NAME_MAX bytes; the longest expansion decides */
    char t[400];
    memset(t, 'x', 252);
    strcpy(t + 252, "[1-100]");
    CHECK_EQ_INT(hostlist_expand(t, 0, NULL, &hl, err, sizeof err), 0);
    CHECK_EQ_INT(strlen(hl.names[99]), 255);
    hostlist_free(&hl);
    memset(t, 'x', 253);
    strcpy(t + 253, "[1-100]");
    CHECK_EQ_INT(hostlist_expand(t, 0, NULL, &hl, err, sizeof err), -ENAMETOOLONG);
    CHECK(strstr(err, "gives names longer than 255 bytes; host names are shorter") != NULL);
    hostlist_free(&hl);
    /* many one-digit groups: bounded by the name length, not by the stack */
    for (int i = 0; i < 130; i++)
        memcpy(t + 3 * i, "[1]", 3);
    t[390] = '\0';
    CHECK_EQ_INT(hostlist_expand(t, 0, NULL, &hl, err, sizeof err), 0);
    CHECK_EQ_INT(hl.count, 1);
    CHECK_EQ_INT(strlen(hl.names[0]), 130);
    hostlist_free(&hl);
}

static const char *compress(const char *const *names, size_t n)
{
    static char out[512];
    int rc = hostlist_compress(names, n, out, sizeof out);
    if (rc < 0)
        snprintf(out, sizeof out, "ERR %d", -rc);
    else
        CHECK_EQ_INT(rc, strlen(out));
    return out;
}

/* a compound array of names and its length, as two arguments */
#define NAMES(...)                                                                               \
    (const char *const[]){__VA_ARGS__}, sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *)

static void test_compress_golden(void)
{
    CHECK_EQ_STR(compress(NAMES("n1", "n2", "n3", "n5")), "n[1-3,5]");
    CHECK_EQ_STR(compress(NAMES("node01", "node02", "node03", "node04", "node07", "gpu-1",
                                "gpu-2")),
                 "node[01-04,07],gpu-[1-2]");
    CHECK_EQ_STR(compress(NAMES("n9", "n10", "n11")), "n[9-11]");
    CHECK_EQ_STR(compress(NAMES("n08", "n09", "n10", "n11")), "n[08-11]");
    /* a padded and an unpadded name cannot share a range */
    CHECK_EQ_STR(compress(NAMES("n8", "n9", "n010", "n011")), "n[8-9,010-011]");
    CHECK_EQ_STR(compress(NAMES("n099", "n100", "n0101", "n0102")), "n[099-100,0101-0102]");
    CHECK_EQ_STR(compress(NAMES("n1")), "n1");
    CHECK_EQ_STR(compress(NAMES("node007")), "node007");
    CHECK_EQ_STR(compress(NAMES("a", "b")), "a,b");
    CHECK_EQ_STR(compress(NAMES("n5", "n6", "n7", "n1", "n2", "n3")), "n[5-7,1-3]");
    CHECK_EQ_STR(compress(NAMES("n1", "n1", "n1", "n1")), "n[1,1,1,1]");
    CHECK_EQ_STR(compress(NAMES("n1", "gpu1", "n2")), "n1,gpu1,n2");
    CHECK_EQ_STR(compress(NAMES("rack1-n1", "rack1-n2", "rack2-n1")), "rack1-n[1-2],rack2-n1");
    CHECK_EQ_STR(compress(NAMES("123", "124", "125")), "[123-125]");
    /* brackets only where shorter */
    CHECK_EQ_STR(compress(NAMES("1", "7")), "1,7");
    CHECK_EQ_STR(compress(NAMES("n09", "n10")), "n09,n10");
    CHECK_EQ_STR(compress(NAMES("n3", "n2", "n1")), "n3,n2,n1");
    CHECK_EQ_STR(compress(NAMES("gpu0-ib", "gpu1-ib")), "gpu0-ib,gpu1-ib");
    CHECK_EQ_STR(compress(NAMES("n", "n1")), "n,n1");
    CHECK_EQ_STR(compress(NAMES("a,b")), "ERR 22");
    CHECK_EQ_STR(compress(NAMES("a b")), "ERR 22");
    CHECK_EQ_STR(compress(NAMES("a[1]")), "ERR 22");
    CHECK_EQ_STR(compress(NAMES("")), "ERR 22");
    CHECK_EQ_INT(hostlist_compress(NULL, 0, got, sizeof got), 0);
    CHECK_EQ_STR(got, "");

    char small[11];
    CHECK_EQ_INT(hostlist_compress(NAMES("n1", "n2", "n3", "x", "y"), small, 11), 10);
    CHECK_EQ_STR(small, "n[1-3],x,y");
    CHECK_EQ_INT(hostlist_compress(NAMES("n1", "n2", "n3", "x", "y"), small, 10), -ENOSPC);
    CHECK_EQ_STR(small, "n[1-3],x,"); /* cut, still terminated */
}

/* expand(compress(names)) must give names back, for lists chosen to stress padding. */
static void test_round_trip(void)
{
    static const char *lists[] = {
        "n[8-12],n[008-012],n9,n09,n009,n[99-101],x,x,y1,y01,[0-3],n[5,3,4]",
        "rack[1-3]-n[01-02],gpu[098-102],a0,a00,a000,a1",
        "n[0-20],n[20-0]",
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        struct hostlist a, b;
        char out[4096];
        CHECK_EQ_INT(hostlist_expand(lists[i], 0, NULL, &a, err, sizeof err),
                     strstr(lists[i], "20-0") ? -EINVAL : 0);
        if (a.count == 0) {
            hostlist_free(&a);
            continue;
        }
        CHECK(hostlist_compress((const char *const *)a.names, a.count, out, sizeof out) > 0);
        CHECK_EQ_INT(hostlist_expand(out, 0, NULL, &b, err, sizeof err), 0);
        CHECK_EQ_INT(b.count, a.count);
        for (size_t k = 0; k < a.count && k < b.count; k++)
            CHECK_EQ_STR(b.names[k], a.names[k]);
        hostlist_free(&a);
        hostlist_free(&b);
    }
}

static void test_quote(void)
{
    char q[16];
    hostlist_quote(q, sizeof q, "a\"b\\c\n", 6);
    CHECK_EQ_STR(q, "a\\x22b\\x5cc...");
    hostlist_quote(q, sizeof q, "plain", 5);
    CHECK_EQ_STR(q, "plain");
    hostlist_quote(q, sizeof q, "0123456789abcdefgh", 18);
    CHECK_EQ_STR(q, "0123456789ab...");
}

int main(void)
{
    RUN(test_expand_golden);
    RUN(test_expand_errors);
    RUN(test_expand_bounds);
    RUN(test_compress_golden);
    RUN(test_round_trip);
    RUN(test_quote);
    return check_result();
}
