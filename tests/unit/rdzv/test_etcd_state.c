/* tests/unit/rdzv/test_etcd_state.c — the etcd backend's record of the job's state: what is
 * written reads back the same, names with blanks, '%' and newlines included, and records that
 * are not the backend's are refused without reading past them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/etcd_state.h"

static void test_round_trip(void)
{
    etcd_member_t m[3];
    memset(m, 0, sizeof m);
    const char *names[] = {"worker-0", "a b%c\nd\\e", ""};
    for (int i = 0; i < 3; i++) {
        snprintf(m[i].id, sizeof m[i].id, "%016x", 0xabc0 + i);
        snprintf(m[i].d.name, sizeof m[i].d.name, "%s", names[i]);
        snprintf(m[i].d.addr, sizeof m[i].d.addr, "10.0.0.%d", i + 1);
        snprintf(m[i].d.host, sizeof m[i].d.host, "host-%d", i);
        m[i].d.nproc = i + 1;
        m[i].d.want_rank = i == 1 ? 0 : -1;
        m[i].d.pid = 100 + i;
        m[i].node_rank = 2 - i;
        m[i].rank_base = i * 4;
        m[i].join_k = 7;
    }
    etcd_state_t s = {.round = 3, .phase = ETCD_PHASE_RUNNING, .restarts = 2, .nnodes = 3,
                      .world_size = 6, .store_port = 4321, .members = m, .n_members = 3};
    snprintf(s.store_host, sizeof s.store_host, "10.0.0.3");
    s.n_bad = 1;   /* the nodes remembered for their failures go to the next coordinator */
    s.bad[0] = (rdzv_badnode_t){"worker-2", 3, 1, 0, 1};
    char *text;
    size_t len;
    CHECK_EQ_INT(etcd_state_encode(&s, &text, &len), 0);
    etcd_state_t d;
    CHECK_EQ_INT(etcd_state_decode(text, len, &d), 0);
    CHECK_EQ_INT(d.round, 3);
    CHECK_EQ_INT(d.phase, ETCD_PHASE_RUNNING);
    CHECK_EQ_INT(d.restarts, 2);
    CHECK_EQ_INT(d.world_size, 6);
    CHECK_EQ_STR(d.store_host, "10.0.0.3");
    CHECK_EQ_INT(d.store_port, 4321);
    CHECK_EQ_INT(d.n_bad, 1);
    CHECK_EQ_STR(d.bad[0].name, "worker-2");
    CHECK_EQ_INT(d.bad[0].caused, 3);
    CHECK_EQ_INT(d.bad[0].checks, 1);
    CHECK_EQ_INT(d.bad[0].out, 1);
    CHECK_EQ_INT(d.n_members, 3);
    for (int i = 0; i < 3 && d.n_members == 3; i++) {
        CHECK_EQ_STR(d.members[i].id, m[i].id);
        CHECK_EQ_STR(d.members[i].d.name, names[i]);
        CHECK_EQ_STR(d.members[i].d.addr, m[i].d.addr);
        CHECK_EQ_STR(d.members[i].d.host, m[i].d.host);
        CHECK_EQ_INT(d.members[i].d.want_rank, m[i].d.want_rank);
        CHECK_EQ_INT(d.members[i].node_rank, m[i].node_rank);
        CHECK_EQ_INT(d.members[i].rank_base, m[i].rank_base);
        CHECK_EQ_INT(d.members[i].join_k, 7);
    }
    etcd_state_free(&d);
    free(text);

    etcd_state_t over = {.round = 5, .phase = ETCD_PHASE_OVER, .restarts = 1};
    snprintf(over.over_kind, sizeof over.over_kind, "ended");
    snprintf(over.over_text, sizeof over.over_text, "job 'j' stopped in round 5:\nbad");
    CHECK_EQ_INT(etcd_state_encode(&over, &text, &len), 0);
    CHECK_EQ_INT(etcd_state_decode(text, len, &d), 0);
    CHECK_EQ_INT(d.phase, ETCD_PHASE_OVER);
    CHECK_EQ_STR(d.over_kind, "ended");
    CHECK_EQ_STR(d.over_text, "job 'j' stopped in round 5:\nbad");
    CHECK_EQ_INT(d.n_members, 0);
    etcd_state_free(&d);
    free(text);
    over.phase = 9;
    CHECK_EQ_INT(etcd_state_encode(&over, &text, &len), -EINVAL);
}

static void test_refused(void)
{
    static const char *const bad[] = {
        "",
        "round=1\n",
        "phase=open\n",
        "round=x\nphase=open\nrestarts=0\n",
        "round=1\nphase=later\nrestarts=0\n",
        "round=1\nphase=open\nrestarts=-1\n",
        "round=1\nphase=open\nrestarts=0\nm=0123\n",
        "round=1\nphase=open\nrestarts=0\nm=000000000000abcg 0 0 0 1 -1 1 a b c\n",
        "round=1\nphase=open\nrestarts=0\nm=000000000000abcd 0 0 0 1 -1 1 a b\n",
        "round=1\nphase=open\nrestarts=0\nm=000000000000abcd 0 0 0 1 -1 1 a b c d\n",
        "round=1\nphase=open\nrestarts=0\nm=000000000000abcd 0 0 0 1 -1 1 a%2 b c\n",
        "round=1\nphase=open\nrestarts=0\nm=000000000000abcd 0 0 0 1 -1 1 a%00 b c\n",
        "round=1\nphase=open\nrestarts=0\nm=000000000000abcd -1 0 0 1 -1 1 a b c\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        etcd_state_t d;
        int rc = etcd_state_decode(bad[i], strlen(bad[i]), &d);
        if (rc != -EINVAL)
            fprintf(stderr, "case %zu: %d\n", i, rc);
        CHECK_EQ_INT(rc, -EINVAL);
        etcd_state_free(&d);
    }
    /* a value out of range reads as absent; unknown lines are skipped */
    const char *ok = "round=1\nphase=open\nrestarts=0\nstore_port=99999\nnew=1\n";
    etcd_state_t d;
    CHECK_EQ_INT(etcd_state_decode(ok, strlen(ok), &d), 0);
    CHECK_EQ_INT(d.store_port, 0);
    etcd_state_free(&d);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_refused);
    return check_result();
}
