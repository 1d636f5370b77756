/* tests/unit/rdzv/test_records.c — the key=value codec and the rendezvous records. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/records.h"

static void test_kv_codec(void)
{
    char buf[256], out[64];
    kvbuf_t b;
    kv_init(&b, buf, sizeof buf);
    kv_add(&b, "a", "x\ny\\z", 0);
    kv_add_int(&b, "n", -42);
    kv_add(&b, "ab", "second", 0);
    CHECK(!b.overflow);
    CHECK_EQ_INT(kv_get(buf, b.len, "a", out, sizeof out), 5);
    CHECK_EQ_STR(out, "x\ny\\z");
    CHECK_EQ_INT(kv_get_int(buf, b.len, "n", 0), -42);
    CHECK_EQ_INT(kv_get(buf, b.len, "ab", out, sizeof out), 6); /* not confused with "a" */
    CHECK_EQ_STR(out, "second");
    CHECK_EQ_INT(kv_get(buf, b.len, "missing", out, sizeof out), -1);
    CHECK_EQ_INT(kv_get_int(buf, b.len, "a", 7), 7); /* not a number */
    /* a cut never splits a UTF-8 sequence; a line that does not fit is dropped whole */
    kv_init(&b, buf, sizeof buf);
    kv_add(&b, "m", "ab\xc3\xa9z", 3);
    kv_get(buf, b.len, "m", out, sizeof out);
    CHECK_EQ_STR(out, "ab");
    char small[8];
    kv_init(&b, small, sizeof small);
    kv_add(&b, "k", "0123456789", 0);
    CHECK(b.overflow);
    CHECK_EQ_INT(b.len, 0);
    /* an output buffer that is too small truncates but reports the full length */
    kv_init(&b, buf, sizeof buf);
    kv_add(&b, "k", "0123456789", 0);
    char tiny[4];
    CHECK_EQ_INT(kv_get(buf, b.len, "k", tiny, sizeof tiny), 10);
    CHECK_EQ_STR(tiny, "012");
}

static void test_records_roundtrip(void)
{
    rdzv_failure_t f[RDZV_MAX_FAILURES], g[RDZV_MAX_FAILURES];
    rdzv_decision_t d = {0}, e;
    char buf[32768];
    for (int i = 0; i < 3; i++) {
        rdzv_failure_init(&f[i]);
        snprintf(f[i].host, sizeof f[i].host, "10.0.0.%d", i);
        snprintf(f[i].node_name, sizeof f[i].node_name, "worker-%d", i);
        f[i].node_rank = i;
        f[i].rank = 2 * i;
        f[i].signo = i == 1 ? 11 : 0;
        f[i].exit_code = i == 1 ? -1 : 3;
        f[i].time = 1700000000.25 + i;
        f[i].fatal = i == 2;   /* an exit code not to retry crosses nodes with the record */
        snprintf(f[i].reason, sizeof f[i].reason, "exited with code 3");
        snprintf(f[i].message, sizeof f[i].message, "Traceback:\n  line=1\\");
    }
    d.action = RDZV_EXIT;
    d.round = 4;
    d.next_round = 5;
    d.n = 3;
    d.failures = f;
    d.restart_count = 2;
    snprintf(d.reason, sizeof d.reason, "rank 0 on worker-0 exited with code 3");
    int len = rdzv_end_encode(&d, buf, sizeof buf);
    CHECK(len > 0);
    CHECK_EQ_INT(rdzv_end_decode(buf, (size_t)len, &e, g), 0);
    CHECK_EQ_INT(e.action, RDZV_EXIT);
    CHECK_EQ_INT(e.round, 4);
    CHECK_EQ_INT(e.n, 3);
    CHECK_EQ_INT(e.own, -1);
    CHECK_EQ_INT(e.restart_count, 2);
    CHECK_EQ_STR(e.reason, d.reason);
    CHECK(!g[0].fatal && !g[1].fatal && g[2].fatal);
    CHECK(strstr(buf, "fatal") != NULL);
    CHECK_EQ_STR(g[1].node_name, "worker-1");
    CHECK_EQ_INT(g[1].signo, 11);
    CHECK_EQ_INT(g[1].exit_code, -1);
    CHECK_EQ_INT(g[2].rank, 4);
    CHECK_EQ_STR(g[2].message, "Traceback:\n  line=1\\");
    CHECK(g[2].time > 1700000002.2 && g[2].time < 1700000002.3);
    len = rdzv_end_encode(NULL, buf, sizeof buf);
    CHECK_EQ_INT(rdzv_end_decode(buf, (size_t)len, &e, g), 1);
    CHECK_EQ_INT(rdzv_end_decode("garbage", 7, &e, g), -EINVAL);

    rdzv_assignment_t a = {.round = 1, .node_rank = 2, .nnodes = 3, .rank_base = 4,
                           .world_size = 9, .restart_count = 1, .store_host = "h",
                           .store_port = 29400};
    rdzv_assignment_t b;
    char host[64], err[32], text[256];
    len = rdzv_assign_encode(&a, buf, sizeof buf);
    CHECK_EQ_INT(rdzv_assign_decode(buf, (size_t)len, &b, host, sizeof host, err, sizeof err,
                                    text, sizeof text),
                 0);
    CHECK_EQ_STR(err, "");
    CHECK_EQ_INT(b.node_rank, 2);
    CHECK_EQ_INT(b.rank_base, 4);
    CHECK_EQ_STR(b.store_host, "h");
    CHECK_EQ_INT(b.store_port, 29400);
    /* inconsistent numbers are refused */
    CHECK_EQ_INT(rdzv_assign_decode("round=0\nnode_rank=5\nnnodes=2\n", 28, &b, host,
                                    sizeof host, err, sizeof err, text, sizeof text),
                 -EINVAL);
    rdzv_desc_rec_t dd;
    CHECK_EQ_INT(rdzv_desc_decode("nproc=1\n", 8, &dd), -EINVAL); /* no name */
    CHECK_EQ_INT(rdzv_desc_decode("name=x\nnproc=-3\n", 16, &dd), -EINVAL);
}

/* Another node's text never brings control bytes into a log: escapes and carriage returns become
 * '?', a worker message keeps its lines. */
static void test_untrusted_text(void)
{
    /* as an agent would send it: the escape bytes raw, a newline in a value escaped */
    static const char desc[] = "name=node\x1b" "[2J\r1\nnproc=1\n";
    rdzv_desc_rec_t d;
    CHECK_EQ_INT(rdzv_desc_decode(desc, sizeof desc - 1, &d), 0);
    CHECK_EQ_STR(d.name, "node?[2J?1");
    static const char fail[] = "reason=exit\x07" "ed\nmessage=Traceback:\\n  line 1\x1b\n";
    rdzv_failure_t f;
    CHECK_EQ_INT(rdzv_failure_decode(fail, sizeof fail - 1, &f), 0);
    CHECK_EQ_STR(f.reason, "exit?ed");
    CHECK_EQ_STR(f.message, "Traceback:\n  line 1?");
}

/* The only keys under "podrun/" a client may write (the store refuses every other). */
/* The NVLink domain is written only when set: a record without it is byte for byte what older
 * agents send, and it reads back as "" (no domain). */
static void test_desc_domain(void)
{
    rdzv_desc_rec_t d = {0}, e;
    char buf[1024];
    snprintf(d.name, sizeof d.name, "node-1");
    d.nproc = 8;
    d.want_rank = -1;
    int len = rdzv_desc_encode(&d, buf, sizeof buf);
    CHECK(len > 0);
    CHECK(strstr(buf, "domain=") == NULL);
    CHECK_EQ_INT(rdzv_desc_decode(buf, (size_t)len, &e), 0);
    CHECK_EQ_STR(e.domain, "");
    snprintf(d.domain, sizeof d.domain, "0011aabb-0000-0000-0000-000000000001/7");
    len = rdzv_desc_encode(&d, buf, sizeof buf);
    CHECK_EQ_INT(rdzv_desc_decode(buf, (size_t)len, &e), 0);
    CHECK_EQ_STR(e.domain, "0011aabb-0000-0000-0000-000000000001/7");
    CHECK_EQ_INT(e.nproc, 8);
}

static void test_agent_record_key(void)
{
    const char *p = "podrun/job/";
    const char *good[] = {
        "podrun/job/n/0123456789abcdef/join/0", "podrun/job/n/0123456789abcdef/join/17",
        "podrun/job/n/0123456789abcdef/hb",     "podrun/job/n/0123456789abcdef/fail/3",
        "podrun/job/n/0123456789abcdef/done/0", "podrun/job/n/0123456789abcdef/leave",
        "podrun/job/n/0123456789abcdef/peer/2", "podrun/job/n/0123456789abcdef/join/1073741824",
        "podrun/job/n/0123456789abcdef/health", "podrun/job/n/0123456789abcdef/gather/4",
    };
    const char *bad[] = {
        "podrun/job/r/0/end", "podrun/job/status", "podrun/job/n/0123456789abcdef/assign/0",
        "podrun/job/n/0123456789abcdef/join", "podrun/job/n/0123456789abcdef/join/",
        "podrun/job/n/0123456789abcdef/join/01", "podrun/job/n/0123456789abcdef/join/-1",
        "podrun/job/n/0123456789abcdef/join/1073741825", "podrun/job/n/0123456789abcdef/hb/1",
        "podrun/job/n/0123456789abcdef/leavex", "podrun/job/n/0123456789ABCDEF/hb",
        "podrun/job/n/0123456789abcde/hb", "podrun/job/n/0123456789abcdef0/hb",
        "podrun/other/n/0123456789abcdef/hb", "podrun/job/n/0123456789abcdef/fail/1/x",
        "podrun/job/n/0123456789abcdef/health/1", "podrun/job/n/0123456789abcdef/healthy",
        "podrun/job/n/0123456789abcdef/gather", "podrun/job/r/1/go",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(rdzv_agent_record_key(good[i], strlen(good[i]), p));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!rdzv_agent_record_key(bad[i], strlen(bad[i]), p));
    /* the length is the key's, not the string's */
    CHECK(!rdzv_agent_record_key("podrun/job/n/0123456789abcdef/hb", 30, p));
}

/* A health record and a heartbeat's check age place the check on the reader's clock (the age,
 * not the sender's time, travels); a finding is cut and cleaned like any text from a peer. */
static void test_health(void)
{
    char buf[512];
    rdzv_health_t h = {RDZV_HEALTH_FAILED, 5, 1000.0, "GPU 3: Xid 79\x1b[2J"}, d;
    int len = rdzv_health_encode(&h, 1002.5, buf, sizeof buf);
    CHECK(len > 0);
    CHECK_EQ_INT(rdzv_health_decode(buf, (size_t)len, 2000.0, &d), 0);
    CHECK_EQ_INT(d.state, RDZV_HEALTH_FAILED);
    CHECK(d.interval == 5 && d.checked == 1997.5);
    CHECK_EQ_STR(d.why, "GPU 3: Xid 79?[2J");
    h = (rdzv_health_t){RDZV_HEALTH_WAITING, 0.1, 0, "ignored"};
    len = rdzv_health_encode(&h, 1002.5, buf, sizeof buf);
    CHECK_EQ_INT(rdzv_health_decode(buf, (size_t)len, 2000.0, &d), 0);
    CHECK(d.state == RDZV_HEALTH_WAITING && d.checked == 0 && d.why[0] == '\0');
    /* no state, or one out of range: no record */
    CHECK_EQ_INT(rdzv_health_decode("interval=1\n", 11, 1, &d), -EINVAL);
    CHECK_EQ_INT(rdzv_health_decode("state=6\n", 8, 1, &d), -EINVAL);
    /* a heartbeat: empty, or the age of a check that found no news */
    CHECK(rdzv_health_ago_decode("", 0, 50) == 0);
    len = rdzv_health_ago_encode(40.0, 40.25, buf, sizeof buf);
    CHECK(len > 0 && rdzv_health_ago_decode(buf, (size_t)len, 100.0) == 99.75);
    CHECK(rdzv_health_ago_decode("ago=-3\n", 7, 100.0) == 0);
    CHECK(rdzv_health_ago_decode("ago=x\n", 6, 100.0) == 0);
}

/* Any text is a run id; its keys are one path component, and one run's keys never lie under
 * another's ("exp" and "exp/1"). */
static void test_run_prefix(void)
{
    char out[RDZV_RUN_ID_MAX + 16];
    CHECK_EQ_INT(rdzv_run_prefix(out, sizeof out, "job1"), 12);
    CHECK_EQ_STR(out, "podrun/job1/");
    CHECK_EQ_INT(rdzv_run_prefix(out, sizeof out, "exp/1"), 15);
    CHECK_EQ_STR(out, "podrun/exp%2F1/");
    CHECK_EQ_INT(rdzv_run_prefix(out, sizeof out, "100%/a b"), 20);
    CHECK_EQ_STR(out, "podrun/100%25%2Fa b/");
    char id[200];
    memset(id, 'a', 128);
    id[128] = '\0';
    CHECK_EQ_INT(rdzv_run_prefix(out, sizeof out, id), 136);
    id[127] = '/';   /* 130 once escaped */
    CHECK_EQ_INT(rdzv_run_prefix(out, sizeof out, id), -ENAMETOOLONG);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(rdzv_run_prefix(out, 10, "job1"), -ENAMETOOLONG);
}

int main(void)
{
    RUN(test_kv_codec);
    RUN(test_desc_domain);
    RUN(test_agent_record_key);
    RUN(test_untrusted_text);
    RUN(test_records_roundtrip);
    RUN(test_health);
    RUN(test_run_prefix);
    return check_result();
}
