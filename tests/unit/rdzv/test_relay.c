/* tests/unit/rdzv/test_relay.c — the relay tree, the links an assignment carries, the relay
 * datagram, and a push through the tree the coordinator lays out, with a relay dead, driven
 * without a network. */
#include <errno.h>
#include <string.h>

#include "rdzv/relay.h"
#include "tests/unit/rdzv/coord_world.h"

static void test_fanout(void)
{
    CHECK_EQ_INT(relay_fanout(1), 2);
    CHECK_EQ_INT(relay_fanout(4), 2);
    CHECK_EQ_INT(relay_fanout(5), 3);
    CHECK_EQ_INT(relay_fanout(1024), 32);
    CHECK_EQ_INT(relay_fanout(4096), 64);
    CHECK_EQ_INT(relay_fanout(16384), RELAY_FANOUT_MAX);
    CHECK_EQ_INT(relay_fanout(100000), RELAY_FANOUT_MAX);
}

/* Every member but the roots has exactly one parent, which lists it among its children, and
 * the depth is the least that fits: 2 hops up to f*f + f members. */
static void check_tree(int n)
{
    int f = relay_fanout(n), first, depth_max = 0;
    int *seen = calloc((size_t)n, sizeof *seen);
    for (int j = 0; j < n; j++) {
        int c = relay_children(j, n, f, &first);
        CHECK(c >= 0 && c <= f);
        for (int k = 0; k < c; k++) {
            CHECK_EQ_INT(relay_parent(first + k, f), j);
            seen[first + k]++;
        }
        int d = 1;
        for (int p = relay_parent(j, f); p >= 0; p = relay_parent(p, f))
            d++;
        if (d > depth_max)
            depth_max = d;
    }
    for (int j = 0; j < n; j++)
        CHECK_EQ_INT(seen[j], j < f ? 0 : 1);
    if (n <= f * f + f)
        CHECK(depth_max <= 2);
    free(seen);
}

static void test_tree_shapes(void)
{
    int sizes[] = {1, 2, 3, 4, 5, 7, 64, 100, 1000, 4096, 4160, 16384, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_tree(sizes[i]);
    int first;
    CHECK_EQ_INT(relay_children(0, 16384, 64, &first), 64);
    CHECK_EQ_INT(first, 64);
    CHECK_EQ_INT(relay_children(255, 16384, 64, &first), 0); /* (255+1)*64 = 16384: none left */
}

static void test_links_round_trip(void)
{
    relay_links_t l, r;
    memset(&l, 0, sizeof l);
    l.fed = 1;
    l.parent = (relay_ep_t){3, 4000, "10.0.0.4"};
    l.n = RELAY_FANOUT_MAX;
    for (int i = 0; i < l.n; i++) {
        l.child[i] = (relay_ep_t){100 + i, (uint16_t)(5000 + i), ""};
        snprintf(l.child[i].addr, sizeof l.child[i].addr, i % 2 ? "fd00::%x" : "10.1.%d.%d",
                 i, i + 1);
    }
    char buf[RELAY_LINKS_MAX + 64];
    kvbuf_t b;
    kv_init(&b, buf, sizeof buf);
    kv_add_int(&b, "round", 7);
    relay_links_put(&b, &l);
    CHECK(!b.overflow);
    relay_links_take(buf, b.len, &r);
    CHECK_EQ_INT(r.fed, 1);
    CHECK_EQ_INT(r.parent.node_rank, 3);
    CHECK_EQ_INT(r.parent.port, 4000);
    CHECK_EQ_STR(r.parent.addr, "10.0.0.4");
    CHECK_EQ_INT(r.n, RELAY_FANOUT_MAX);
    for (int i = 0; i < r.n; i++) {
        CHECK_EQ_INT(r.child[i].node_rank, 100 + i);
        CHECK_EQ_INT(r.child[i].port, 5000 + i);
        CHECK_EQ_STR(r.child[i].addr, l.child[i].addr);
    }
    /* no links: neither fed nor relaying */
    relay_links_take("round=1\n", 8, &r);
    CHECK_EQ_INT(r.fed, 0);
    CHECK_EQ_INT(r.n, 0);
    /* bad endpoints are dropped, the good ones kept; a bad parent leaves the node unfed */
    const char *bad = "relay_from=x@10.0.0.1:1\nrelay_to=1@10.0.0.2:0 2@host.example:5 "
                      "3@10.0.0.3:70000 4@10.0.0.4:44 5@:9 -1@10.0.0.6:6 6@10.0.0.7\n";
    relay_links_take(bad, strlen(bad), &r);
    CHECK_EQ_INT(r.fed, 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_INT(r.child[0].node_rank, 4);
    CHECK_EQ_INT(r.child[0].port, 44);
    CHECK(relay_addr_numeric("127.0.0.2") && relay_addr_numeric("::1"));
    CHECK(!relay_addr_numeric("node-1") && !relay_addr_numeric(""));
}

/* The round's end's datagrams: relay_kmsg_encode/decode of RELAY_END (another kind: -EINVAL). */
static int end_encode(const auth_key_t *key, const char *run_id, int round, int to,
                      const char *body, size_t blen, char *out, size_t cap)
{
    return relay_kmsg_encode(key, run_id, RELAY_END, round, to, body, blen, out, cap);
}

static int end_decode(const auth_key_t *key, const char *run_id, const char *msg, size_t len,
                      int *round, int *to, const char **body, size_t *blen)
{
    int kind, rc = relay_kmsg_decode(key, run_id, msg, len, &kind, round, to, body, blen);
    return rc < 0 ? rc : kind == RELAY_END ? 0 : -EINVAL;
}

static void test_msg(void)
{
    auth_key_t k, other;
    char err[256];
    CHECK(auth_key_from_token("0123456789abcdef0123", 20, "t", &k, err, sizeof err) == 0);
    CHECK(auth_key_from_token("0123456789abcdef0124", 20, "t", &other, err, sizeof err) == 0);
    const char *rec = "end=stop\naction=restart\nround=4\n";
    char m[512];
    const char *body;
    size_t blen;
    int round, to;
    for (int keyed = 0; keyed < 2; keyed++) {
        const auth_key_t *key = keyed ? &k : NULL;
        int n = end_encode(key, "job1", 4, 17, rec, strlen(rec), m, sizeof m);
        CHECK(n > 0);
        CHECK_EQ_INT(end_decode(key, "job1", m, (size_t)n, &round, &to, &body, &blen), 0);
        CHECK_EQ_INT(round, 4);
        CHECK_EQ_INT(to, 17);
        CHECK(blen == strlen(rec) && memcmp(body, rec, blen) == 0);
        /* every truncation is refused or, unsigned, reads as less of the record */
        for (int cut = 0; cut < n; cut++) {
            int r = end_decode(key, "job1", m, (size_t)cut, &round, &to, &body, &blen);
            CHECK(r == -EINVAL || (!keyed && blen < strlen(rec)));
        }
        CHECK_EQ_INT(end_encode(key, "job1", 4, 17, rec, strlen(rec), m, 20), -ENOSPC);
    }
    /* signed: another key, another run, another receiver or a changed record is refused */
    int n = end_encode(&k, "job1", 4, 17, rec, strlen(rec), m, sizeof m);
    CHECK_EQ_INT(end_decode(&other, "job1", m, (size_t)n, &round, &to, &body, &blen), -EINVAL);
    CHECK_EQ_INT(end_decode(&k, "job2", m, (size_t)n, &round, &to, &body, &blen), -EINVAL);
    CHECK_EQ_INT(end_decode(NULL, "job1", m, (size_t)n, &round, &to, &body, &blen), 0);
    char t[512];
    memcpy(t, m, (size_t)n);
    t[n - 3] ^= 1; /* the record */
    CHECK_EQ_INT(end_decode(&k, "job1", t, (size_t)n, &round, &to, &body, &blen), -EINVAL);
    memcpy(t, m, (size_t)n);
    t[9] = '8'; /* "PRLY1 4 17" -> "PRLY1 4 18" */
    CHECK_EQ_INT(end_decode(&k, "job1", t, (size_t)n, &round, &to, &body, &blen), -EINVAL);
    /* unsigned where a key is wanted, and garbage */
    n = end_encode(NULL, "job1", 4, 17, rec, strlen(rec), m, sizeof m);
    CHECK_EQ_INT(end_decode(&k, "job1", m, (size_t)n, &round, &to, &body, &blen), -EINVAL);
    const char *junk[] = {"", "PRLY1\n", "PRLY1 a b -\n", "PRLY1 1 2 - x\n", "PRLY2 1 2 -\n",
                          "PRLY1 -1 2 -\n", "PRLY1 1 99999999 -\n", "GET / HTTP/1.1\r\n"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
        CHECK_EQ_INT(end_decode(NULL, "job1", junk[i], strlen(junk[i]), &round, &to, &body,
                                      &blen), -EINVAL);
}

/* The coordinator lays the tree out over a round's members in its assignments; a push through
 * it reaches everyone but the subtree of a dead relay, and those learn it from the store with
 * their next heartbeat (the poll of a fed node), which a root never needs. */
#define N 60
static relay_links_t links[N];
static int node_of_rank[N];

static void deliver(int rank, int dead, int *got, int *hops, int hop)
{
    if (rank == dead || got[rank])
        return;
    got[rank] = 1;
    hops[rank] = hop;
    const relay_links_t *l = &links[rank];
    for (int k = 0; k < l->n; k++)
        deliver(l->child[k].node_rank, dead, got, hops, hop + 1);
}

static void test_push_through_coordinator_tree(void)
{
    coord_t *c = mk(N, N, 1, NULL);
    join_relay = 1;
    for (int i = 0; i < N; i++)
        join(c, i, "n", 1, -1, 0);
    join_relay = 0;
    int roots = 0, fed = 0, f = relay_fanout(N);
    for (int i = 0; i < N; i++) {
        char key[128];
        idkey(key, sizeof key, i, "assign", 0);
        const char *val = w_get(key);
        CHECK(val != NULL);
        if (!val)
            return;
        int r = node_rank_of(i, 0);
        CHECK(r >= 0 && r < N);
        node_of_rank[r] = i;
        relay_links_take(val, strlen(val), &links[r]);
    }
    /* every link names the right node: its address and relay port */
    for (int r = 0; r < N; r++) {
        roots += !links[r].fed;
        fed += links[r].fed;
        for (int k = 0; k < links[r].n; k++) {
            const relay_ep_t *e = &links[r].child[k];
            char want[32];
            snprintf(want, sizeof want, "10.0.0.%d", node_of_rank[e->node_rank] + 1);
            CHECK_EQ_STR(e->addr, want);
            CHECK_EQ_INT(e->port, 7000 + node_of_rank[e->node_rank]);
            CHECK(links[e->node_rank].fed);
            CHECK_EQ_INT(links[e->node_rank].parent.node_rank, r);
            CHECK_EQ_INT(links[e->node_rank].parent.port, 7000 + node_of_rank[r]);
        }
    }
    CHECK_EQ_INT(roots, f);
    CHECK_EQ_INT(fed, N - f);
    /* the push: the store wakes the roots, each relays on */
    for (int dead = -1; dead < N; dead++) {
        int got[N] = {0}, hops[N] = {0}, missed = 0;
        for (int r = 0; r < N; r++)
            if (!links[r].fed)
                deliver(r, dead, got, hops, 1);
        for (int r = 0; r < N; r++) {
            CHECK(got[r] || r == dead || links[r].fed);
            CHECK(!got[r] || hops[r] <= 2);
            missed += !got[r] && r != dead;
        }
        /* a dead relay costs exactly its subtree (its children here, the tree being 2 deep) */
        CHECK_EQ_INT(missed, dead >= 0 ? links[dead].n : 0);
        /* the next heartbeat: each fed node that missed it polls the store and relays on */
        for (int r = 0; r < N; r++)
            if (!got[r] && r != dead && links[r].fed)
                deliver(r, dead, got, hops, 1);
        for (int r = 0; r < N; r++)
            CHECK(got[r] || r == dead);
    }
    /* the host writes the decision to the roots alone: one end record, F waiters */
    coord_free(c);
}

/* A member without a relay port (another backend, an older agent) is outside the tree: it gets
 * no links and waits on the store itself; the others still form one. */
static void test_mixed_members(void)
{
    coord_t *c = mk(6, 6, 1, NULL);
    for (int i = 0; i < 6; i++) {
        join_relay = i != 2;
        join(c, i, "n", 1, -1, 0);
    }
    join_relay = 0;
    int in_tree = 0;
    for (int i = 0; i < 6; i++) {
        char key[128];
        idkey(key, sizeof key, i, "assign", 0);
        const char *val = w_get(key);
        CHECK(val != NULL);
        if (!val)
            continue;
        relay_links_t l;
        relay_links_take(val, strlen(val), &l);
        if (i == 2)
            CHECK(!l.fed && l.n == 0);
        in_tree += l.fed || l.n > 0;
        for (int k = 0; k < l.n; k++)
            CHECK(l.child[k].port != 7002);
    }
    /* 5 members, fan-out 3: 3 roots, 2 fed under the first: 3 with links */
    CHECK_EQ_INT(in_tree, 3);
    coord_free(c);
}

/* The kinds of datagram do not pass for each other; a gather's entries and a go read back. */
static void test_restart_records(void)
{
    char m[512], e[512];
    const char *body;
    size_t blen;
    int kind, round, to;
    int n = relay_kmsg_encode(NULL, "job1", RELAY_JOINS, 3, 1, "x", 1, m, sizeof m);
    CHECK(n > 0);
    CHECK_EQ_INT(end_decode(NULL, "job1", m, (size_t)n, &round, &to, &body, &blen), -EINVAL);
    CHECK_EQ_INT(relay_kmsg_decode(NULL, "job1", m, (size_t)n, &kind, &round, &to, &body, &blen), 0);
    CHECK_EQ_INT(kind, RELAY_JOINS);
    CHECK_EQ_INT(round, 3);
    /* with a key, the kind is signed: a go made a join by hand is dropped */
    auth_key_t k;
    memset(&k, 7, sizeof k);
    n = relay_kmsg_encode(&k, "job1", RELAY_GO, 3, 1, "x", 1, m, sizeof m);
    CHECK_EQ_INT(relay_kmsg_decode(&k, "job1", m, (size_t)n, &kind, &round, &to, &body, &blen), 0);
    CHECK_EQ_INT(kind, RELAY_GO);
    m[3] = 'J';
    CHECK_EQ_INT(relay_kmsg_decode(&k, "job1", m, (size_t)n, &kind, &round, &to, &body, &blen),
                 -EINVAL);
    m[3] = '\0';
    CHECK_EQ_INT(relay_kmsg_decode(NULL, "job1", m, (size_t)n, &kind, &round, &to, &body, &blen),
                 -EINVAL);

    int a = relay_entry_put(e, sizeof e, "00000000000000ab", 2, "name=x\n", 7);
    int b = relay_entry_put(e + a, sizeof e - (size_t)a, "00000000000000cd", 5, "", 0);
    CHECK(a > 0 && b > 0);
    char small[10];
    CHECK_EQ_INT(relay_entry_put(small, sizeof small, "00000000000000ab", 2, "name=x\n", 7),
                 -ENOSPC);
    const char *p = e, *end = e + a + b, *rec;
    uint64_t id;
    size_t len;
    int jk;
    CHECK_EQ_INT(relay_entry_next(&p, end, &id, &jk, &rec, &len), 0);
    CHECK(id == 0xab && jk == 2 && len == 7 && memcmp(rec, "name=x\n", 7) == 0);
    CHECK_EQ_INT(relay_entry_next(&p, end, &id, &jk, &rec, &len), 0);
    CHECK(id == 0xcd && jk == 5 && len == 0 && p == end);
    /* a length past the end, a bad id, no newline */
    const char *bad[] = {"00000000000000ab 1 99\nx", "zz 1 0\n", "00000000000000ab 1 0",
                         "0000000000000000 1 0\n", "00000000000000ab -1 0\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p = bad[i];
        CHECK_EQ_INT(relay_entry_next(&p, bad[i] + strlen(bad[i]), &id, &jk, &rec, &len), -EINVAL);
    }

    char go[RELAY_GO_MAX];
    int inplace, count;
    n = relay_go_encode(7, 2, 1, go, sizeof go);
    CHECK_EQ_INT(relay_go_decode(go, (size_t)n, &round, &count, &inplace), 0);
    CHECK(round == 7 && count == 2 && inplace == 1);
    n = relay_go_encode(7, 2, 0, go, sizeof go);
    CHECK_EQ_INT(relay_go_decode(go, (size_t)n, &round, &count, &inplace), 0);
    CHECK_EQ_INT(inplace, 0);
    CHECK_EQ_INT(relay_go_decode("round=1\nrestart_count=0\nmode=maybe\n", 35, &round, &count,
                                 &inplace), -EINVAL);
    CHECK_EQ_INT(relay_go_decode("mode=store\n", 11, &round, &count, &inplace), -EINVAL);
}

/* Node i's first join after the restart, as its relay puts it in a gather (relay.h). */
static size_t gather_entry(char *entries, size_t size, int i)
{
    char val[1024], ids[17];
    rdzv_desc_rec_t d = {0};
    snprintf(d.name, sizeof d.name, "w%02d", i);
    snprintf(d.addr, sizeof d.addr, "10.0.0.%d", i + 1);
    snprintf(d.host, sizeof d.host, "w%02d", i);
    d.nproc = 1, d.want_rank = -1, d.pid = 100 + i, d.relay_port = 7000 + i;
    int vl = rdzv_desc_encode(&d, val, sizeof val);
    snprintf(ids, sizeof ids, "%016x", i + 1);
    return (size_t)relay_entry_put(entries, size, ids, 1, val, (size_t)vl);
}

/* The fed members of a stopped round join through their root's gather; the round closes with
 * everyone in place, so the coordinator writes one go, "inplace", the roots' assignments and
 * none of the fed members': each moves its last one to the new round. A repeated direct join of
 * the same number (no go came in time) is the same join, and the fed members' assignments are
 * written then, each what the fed member made of its last; a gather cannot join a stranger or
 * a node twice. */
static void test_restart_through_gather(void)
{
    coord_t *c = mk(N, N, 2, NULL);
    char name[32], key[128], entries[N * 1200];
    join_relay = 1;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "w%02d", i);
        join(c, i, name, 1, -1, 0);
    }
    char *last[N];
    for (int i = 0; i < N; i++) {
        idkey(key, sizeof key, i, "assign", 0);
        last[i] = strdup(w_get(key));
        relay_links_take(last[i], strlen(last[i]), &links[i]);
    }
    fail(c, 0, 0, 0, now, "exit code 1");
    run_timers(c);
    CHECK_EQ_INT(end_of(0, NULL, NULL), 0);
    /* every fed node's join in one gather, written by node 0; the roots join themselves */
    size_t el = 0;
    int fed = 0;
    for (int i = 0; i < N; i++) {
        if (!links[i].fed)
            continue;
        el += gather_entry(entries + el, sizeof entries - el, i);
        fed++;
    }
    CHECK_EQ_INT(fed, N - relay_fanout(N));
    /* a stranger's entry and a malformed tail are dropped, the rest taken */
    el += (size_t)relay_entry_put(entries + el, sizeof entries - el, "00000000000000ff", 1, "x", 1);
    el += (size_t)snprintf(entries + el, sizeof entries - el, "garbage");
    wr(c, 0, "gather", 0, entries);
    for (int i = 0; i < N; i++)
        if (!links[i].fed) {
            snprintf(name, sizeof name, "w%02d", i);
            join(c, i, name, 1, -1, 1);
        }
    join_relay = 0;
    CHECK(logs_contain("joined through the relay tree, in place"));
    const char *go = w_get("podrun/job1/r/1/go");
    CHECK(go != NULL);
    int round, count, inplace;
    CHECK_EQ_INT(relay_go_decode(go, strlen(go), &round, &count, &inplace), 0);
    CHECK(round == 1 && count == 1 && inplace == 1);
    static char mine[N][512 + RELAY_LINKS_MAX];
    for (int i = 0; i < N; i++) {
        int n = relay_assign_inplace(last[i], strlen(last[i]), round, count, mine[i],
                                     sizeof mine[i]);
        CHECK(n > 0);
        idkey(key, sizeof key, i, "assign", 1);
        const char *theirs = w_get(key);
        CHECK(links[i].fed ? theirs == NULL : theirs != NULL);
        if (!links[i].fed && theirs)
            CHECK_EQ_STR(mine[i], theirs);
        free(last[i]);
    }
    /* a fed node that had no go in time joins the store with the same number: nothing changes
     * but that the fed members' assignments are written */
    int f = 0;
    while (!links[f].fed)
        f++;
    W.nlogs = 0;
    join(c, f, "again", 1, -1, 1);
    CHECK(!logs_contain("joined again while its round is running"));
    rdzv_assignment_t as;
    CHECK_EQ_INT(assigned(f, 1, &as, NULL, 0, NULL, 0), 1);
    for (int i = 0; i < N; i++) {
        idkey(key, sizeof key, i, "assign", 1);
        const char *theirs = w_get(key);
        CHECK(theirs != NULL);
        if (theirs)
            CHECK_EQ_STR(mine[i], theirs);
    }
    /* a gather cannot join a member of a running round, nor send a join it already sent */
    W.nlogs = 0;
    wr(c, 0, "gather", 1, entries);
    coord_info_t info;
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_RUNNING);
    CHECK(!logs_contain("rejected"));
    fail(c, 1, 1, 1, now, "exit code 1");
    run_timers(c);
    wr(c, 0, "gather", 2, entries);
    coord_info(c, &info);
    CHECK_EQ_INT(info.phase, COORD_OPEN);
    CHECK_EQ_INT(info.joined, 0);
    coord_free(c);
}

/* A round that does not keep every member in place (one is gone) gets a "store" go: the fed
 * members read their assignments from the store as any other node. */
static void test_restart_gather_not_in_place(void)
{
    coord_t *c = mk(4, 5, 2, NULL);
    char name[32], entries[5 * 1200];
    join_relay = 1;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "w%02d", i);
        join(c, i, name, 1, -1, 0);
    }
    conn_close(c, 4);
    run_timers(c);
    size_t el = 0;
    for (int i = 1; i < 4; i++)
        el += gather_entry(entries + el, sizeof entries - el, i);
    entries[el] = '\0';
    wr(c, 0, "gather", 0, entries);
    join(c, 0, "w00", 1, -1, 1);
    join_relay = 0;
    const char *go = w_get("podrun/job1/r/1/go");
    CHECK(go != NULL);
    int round, count, inplace = 1;
    if (go)
        CHECK_EQ_INT(relay_go_decode(go, strlen(go), &round, &count, &inplace), 0);
    CHECK_EQ_INT(inplace, 0);
    for (int i = 0; i < 4; i++) {
        rdzv_assignment_t as;
        CHECK_EQ_INT(assigned(i, 1, &as, NULL, 0, NULL, 0), 1);
    }
    coord_free(c);
}

int main(void)
{
    RUN(test_fanout);
    RUN(test_tree_shapes);
    RUN(test_links_round_trip);
    RUN(test_msg);
    RUN(test_push_through_coordinator_tree);
    RUN(test_mixed_members);
    RUN(test_restart_records);
    RUN(test_restart_through_gather);
    RUN(test_restart_gather_not_in_place);
    return check_result();
}
