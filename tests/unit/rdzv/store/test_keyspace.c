/* tests/unit/rdzv/store/test_keyspace.c — keys, ADD as decimal text, COMPARE_SET, waiters woken by
 * the write that satisfies them, watches, queues, byte limits, delete_except. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/store/keyspace.h"

typedef struct rec {
    int ready[8];   /* on_ready calls per owner index */
    int watch_type;
    char watch_old[32], watch_new[32];
    int watches;
} rec_t;

static ks_owner_t owners[8];
static rec_t rec;

static void on_ready(void *arg, ks_owner_t *o)
{
    (void)arg;
    rec.ready[o - owners]++;
}

static void on_watch(void *arg, ks_owner_t *o, int type, const char *key, size_t klen,
                     const char *old, size_t oldlen, const char *nv, size_t newlen)
{
    (void)arg;
    (void)o;
    (void)key;
    (void)klen;
    rec.watches++;
    rec.watch_type = type;
    snprintf(rec.watch_old, sizeof rec.watch_old, "%.*s", (int)oldlen, old);
    snprintf(rec.watch_new, sizeof rec.watch_new, "%.*s", (int)newlen, nv);
}

static keyspace_t *fresh(size_t max)
{
    keyspace_t *ks;
    memset(&rec, 0, sizeof rec);
    memset(owners, 0, sizeof owners);
    CHECK_EQ_INT(keyspace_new(max, on_ready, on_watch, NULL, &ks), 0);
    return ks;
}

#define S(x) {x, sizeof(x) - 1}

static void test_set_get_delete(void)
{
    keyspace_t *ks = fresh(0);
    const char *v;
    size_t n;
    CHECK_EQ_INT(keyspace_get(ks, "a", 1, &v, &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(keyspace_set(ks, "a", 1, "hello", 5), 0);
    CHECK_EQ_INT(keyspace_get(ks, "a", 1, &v, &n), 1);
    CHECK_EQ_STR(v, "hello");
    CHECK_EQ_INT(keyspace_set(ks, "a", 1, "", 0), 0); /* empty value still exists */
    CHECK_EQ_INT(keyspace_get(ks, "a", 1, &v, &n), 1);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(keyspace_num_keys(ks), 1);
    CHECK_EQ_INT(keyspace_delete(ks, "a", 1), 1);
    CHECK_EQ_INT(keyspace_delete(ks, "a", 1), 0);
    CHECK_EQ_INT(keyspace_num_keys(ks), 0);
    CHECK_EQ_INT(keyspace_bytes(ks), 0);
    /* keys are bytes: NUL inside, and many of them (table growth) */
    CHECK_EQ_INT(keyspace_set(ks, "x\0y", 3, "1", 1), 0);
    CHECK_EQ_INT(keyspace_get(ks, "x", 1, &v, &n), 0);
    char k[32];
    for (int i = 0; i < 5000; i++) {
        int kl = snprintf(k, sizeof k, "key/%d", i);
        keyspace_set(ks, k, (size_t)kl, k, (size_t)kl);
    }
    CHECK_EQ_INT(keyspace_num_keys(ks), 5001);
    CHECK_EQ_INT(keyspace_get(ks, "key/4321", 8, &v, &n), 1);
    CHECK_EQ_STR(v, "key/4321");
    keyspace_free(ks);
}

static void test_add(void)
{
    keyspace_t *ks = fresh(0);
    int64_t r = 0;
    const char *v;
    size_t n;
    CHECK_EQ_INT(keyspace_add(ks, "c", 1, 5, &r), 0);
    CHECK_EQ_INT(r, 5);
    CHECK_EQ_INT(keyspace_add(ks, "c", 1, -7, &r), 0);
    CHECK_EQ_INT(r, -2);
    keyspace_get(ks, "c", 1, &v, &n);
    CHECK_EQ_STR(v, "-2"); /* stored as decimal text */
    keyspace_set(ks, "t", 1, " 12abc", 6); /* std::stoll reads the leading number */
    CHECK_EQ_INT(keyspace_add(ks, "t", 1, 1, &r), 0);
    CHECK_EQ_INT(r, 13);
    keyspace_set(ks, "bad", 3, "abc", 3);
    CHECK_EQ_INT(keyspace_add(ks, "bad", 3, 1, &r), -EINVAL);
    keyspace_get(ks, "bad", 3, &v, &n);
    CHECK_EQ_STR(v, "abc"); /* unchanged */
    keyspace_set(ks, "e", 1, "", 0);
    CHECK_EQ_INT(keyspace_add(ks, "e", 1, 1, &r), -EINVAL);
    keyspace_set(ks, "big", 3, "9223372036854775807", 19);
    CHECK_EQ_INT(keyspace_add(ks, "big", 3, 0, &r), 0);
    CHECK_EQ_INT(keyspace_add(ks, "big", 3, 1, &r), -ERANGE);
    keyspace_set(ks, "big", 3, "99999999999999999999", 20);
    CHECK_EQ_INT(keyspace_add(ks, "big", 3, 0, &r), -ERANGE);
    keyspace_free(ks);
}

static void test_compare_set(void)
{
    keyspace_t *ks = fresh(0);
    const char *cur, *v;
    size_t cl, n;
    /* missing, expected non-empty: nothing set, expected answered */
    CHECK_EQ_INT(keyspace_compare_set(ks, "k", 1, "x", 1, "y", 1, &cur, &cl), 0);
    CHECK(cl == 1 && cur[0] == 'x');
    CHECK_EQ_INT(keyspace_get(ks, "k", 1, &v, &n), 0);
    /* missing, expected empty: created */
    CHECK_EQ_INT(keyspace_compare_set(ks, "k", 1, "", 0, "y", 1, &cur, &cl), 1);
    CHECK(cl == 1 && cur[0] == 'y');
    /* present, mismatch: current value answered */
    CHECK_EQ_INT(keyspace_compare_set(ks, "k", 1, "q", 1, "z", 1, &cur, &cl), 0);
    CHECK(cl == 1 && cur[0] == 'y');
    /* present, match: swapped */
    CHECK_EQ_INT(keyspace_compare_set(ks, "k", 1, "y", 1, "zz", 2, &cur, &cl), 1);
    CHECK(cl == 2 && memcmp(cur, "zz", 2) == 0);
    keyspace_free(ks);
}

static void test_append(void)
{
    keyspace_t *ks = fresh(0);
    const char *v;
    size_t n;
    CHECK_EQ_INT(keyspace_append(ks, "a", 1, "ab", 2), 0);
    CHECK_EQ_INT(keyspace_append(ks, "a", 1, "cd", 2), 0);
    CHECK_EQ_INT(keyspace_get(ks, "a", 1, &v, &n), 1);
    CHECK_EQ_STR(v, "abcd");
    CHECK_EQ_INT(keyspace_bytes(ks), 5);
    keyspace_free(ks);
}

static void test_wait_counter(void)
{
    keyspace_t *ks = fresh(0);
    wire_str_t ab[] = {S("a"), S("b")}, a[] = {S("a")}, dup[] = {S("c"), S("c")};
    CHECK_EQ_INT(keyspace_wait(ks, &owners[0], ab, 2), 0);
    CHECK_EQ_INT(keyspace_wait(ks, &owners[1], a, 1), 0);
    CHECK_EQ_INT(keyspace_wait(ks, &owners[2], dup, 2), 0);
    CHECK_EQ_INT(keyspace_num_keys(ks), 0); /* waiting does not create keys */
    CHECK_EQ_INT(keyspace_check(ks, a, 1), 0);
    keyspace_set(ks, "a", 1, "1", 1);
    CHECK_EQ_INT(rec.ready[0], 0); /* still missing b */
    CHECK_EQ_INT(rec.ready[1], 1);
    int64_t r;
    keyspace_add(ks, "b", 1, 1, &r);
    CHECK_EQ_INT(rec.ready[0], 1);
    keyspace_set(ks, "b", 1, "2", 1); /* no second wake-up */
    CHECK_EQ_INT(rec.ready[0], 1);
    keyspace_append(ks, "c", 1, "x", 1);
    CHECK_EQ_INT(rec.ready[2], 1);
    CHECK_EQ_INT(keyspace_wait(ks, &owners[3], ab, 2), 1); /* all there: answered now */
    CHECK_EQ_INT(keyspace_check(ks, ab, 2), 1);
    CHECK(list_empty(&owners[0].waiters) && list_empty(&owners[1].waiters));
    keyspace_free(ks);
}

static void test_wait_woken_by_compare_set(void)
{
    keyspace_t *ks = fresh(0);
    wire_str_t k[] = {S("k")};
    const char *cur;
    size_t cl;
    CHECK_EQ_INT(keyspace_wait(ks, &owners[0], k, 1), 0);
    keyspace_compare_set(ks, "k", 1, "nope", 4, "v", 1, &cur, &cl);
    CHECK_EQ_INT(rec.ready[0], 0);
    keyspace_compare_set(ks, "k", 1, "", 0, "v", 1, &cur, &cl);
    CHECK_EQ_INT(rec.ready[0], 1);
    keyspace_free(ks);
}

static void test_barrier(void)
{
    keyspace_t *ks = fresh(0);
    wire_str_t b[] = {S("b")};
    int64_t n;
    const char *v;
    size_t vl;
    CHECK_EQ_INT(keyspace_wait(ks, &owners[3], b, 1), 0);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[0], "b", 1, 3, &n), 0);
    CHECK_EQ_INT(n, 1);
    /* the key exists now, but an arrival that is not the last wakes nobody */
    CHECK_EQ_INT(keyspace_check(ks, b, 1), 1);
    CHECK_EQ_INT(rec.ready[3], 0);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[1], "b", 1, 3, &n), 0);
    CHECK_EQ_INT(rec.ready[0] + rec.ready[1] + rec.ready[3], 0);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[2], "b", 1, 3, &n), 1);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(rec.ready[0] + rec.ready[1] + rec.ready[3], 3);
    CHECK(keyspace_get(ks, "b", 1, &v, &vl) && vl == 1 && v[0] == '3');
    /* past the count: answered at once */
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[2], "b", 1, 3, &n), 1);
    CHECK_EQ_INT(n, 4);
    /* a waiter on an existing key is released by a write of it; a cancelled one is not */
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[4], "c", 1, 2, &n), 0);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[5], "d", 1, 2, &n), 0);
    CHECK_EQ_INT(keyspace_cancel_waits(ks, &owners[5]), 1);
    keyspace_set(ks, "c", 1, "7", 1);
    keyspace_set(ks, "d", 1, "7", 1);
    CHECK_EQ_INT(rec.ready[4], 1);
    CHECK_EQ_INT(rec.ready[5], 0);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[4], "e", 1, 2, &n), 0);
    keyspace_append(ks, "e", 1, "0", 1);
    CHECK_EQ_INT(rec.ready[4], 2);
    /* a value that is not a number, or a count at its end, is refused and kept */
    keyspace_set(ks, "t", 1, "abc", 3);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[6], "t", 1, 2, &n), -EINVAL);
    keyspace_set(ks, "m", 1, "9223372036854775807", 19);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[6], "m", 1, 2, &n), -ERANGE);
    CHECK(list_empty(&owners[6].waiters));
    /* world sizes of 1 and below never wait */
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[6], "f", 1, 0, &n), 1);
    CHECK_EQ_INT(keyspace_barrier(ks, &owners[6], "g", 1, 1, &n), 1);
    keyspace_release(ks, &owners[0]);
    keyspace_free(ks);
}

static void test_cancel_and_release(void)
{
    keyspace_t *ks = fresh(0);
    wire_str_t k[] = {S("k")}, j[] = {S("j")};
    keyspace_wait(ks, &owners[0], k, 1);
    keyspace_wait(ks, &owners[0], j, 1);
    keyspace_wait(ks, &owners[1], k, 1);
    CHECK_EQ_INT(keyspace_cancel_waits(ks, &owners[0]), 2);
    CHECK(list_empty(&owners[0].waiters));
    keyspace_set(ks, "k", 1, "", 0);
    CHECK_EQ_INT(rec.ready[0], 0);
    CHECK_EQ_INT(rec.ready[1], 1);
    /* key j had only owner 0's waiter: nothing left behind */
    CHECK_EQ_INT(keyspace_bytes(ks), 1);
    keyspace_wait(ks, &owners[2], j, 1);
    keyspace_watch(ks, &owners[2], "w", 1);
    keyspace_release(ks, &owners[2]);
    keyspace_set(ks, "j", 1, "", 0);
    keyspace_set(ks, "w", 1, "", 0);
    CHECK_EQ_INT(rec.ready[2], 0);
    CHECK_EQ_INT(rec.watches, 0);
    keyspace_free(ks);
}

static void test_watch(void)
{
    keyspace_t *ks = fresh(0);
    int64_t r;
    CHECK_EQ_INT(keyspace_watch(ks, &owners[0], "w", 1), 0);
    keyspace_set(ks, "w", 1, "one", 3);
    CHECK_EQ_INT(rec.watch_type, WIRE_KEY_CREATED);
    CHECK_EQ_STR(rec.watch_old, "");
    CHECK_EQ_STR(rec.watch_new, "one");
    keyspace_set(ks, "w", 1, "two", 3);
    CHECK_EQ_INT(rec.watch_type, WIRE_KEY_UPDATED);
    CHECK_EQ_STR(rec.watch_old, "one");
    CHECK_EQ_STR(rec.watch_new, "two");
    keyspace_delete(ks, "w", 1);
    CHECK_EQ_INT(rec.watch_type, WIRE_KEY_DELETED);
    CHECK_EQ_STR(rec.watch_old, "two");
    keyspace_add(ks, "w", 1, 4, &r);
    CHECK_EQ_INT(rec.watch_type, WIRE_KEY_CREATED);
    CHECK_EQ_STR(rec.watch_new, "4");
    CHECK_EQ_INT(rec.watches, 4);
    keyspace_release(ks, &owners[0]);
    keyspace_free(ks);
}

static void test_queues(void)
{
    keyspace_t *ks = fresh(0);
    wire_str_t q[] = {S("q")};
    char *item;
    size_t il;
    CHECK_EQ_INT(keyspace_queue_pop(ks, "q", 1, &item, &il), 0);
    CHECK(item == NULL);
    CHECK_EQ_INT(keyspace_wait(ks, &owners[0], q, 1), 0);
    CHECK_EQ_INT(keyspace_wait(ks, &owners[1], q, 1), 0);
    keyspace_queue_push(ks, "q", 1, "a", 1);
    CHECK_EQ_INT(rec.ready[0] + rec.ready[1], 1); /* one item wakes one waiter */
    CHECK_EQ_INT(rec.ready[0], 1);                /* the oldest */
    keyspace_queue_push(ks, "q", 1, "bc", 2);
    CHECK_EQ_INT(rec.ready[1], 1);
    CHECK_EQ_INT(keyspace_queue_len(ks, "q", 1), 2);
    CHECK_EQ_INT(keyspace_num_keys(ks), 0); /* queues are not keys */
    CHECK_EQ_INT(keyspace_check(ks, q, 1), 1);
    CHECK_EQ_INT(keyspace_queue_pop(ks, "q", 1, &item, &il), 2);
    CHECK(il == 1 && item[0] == 'a');
    free(item);
    CHECK_EQ_INT(keyspace_queue_pop(ks, "q", 1, &item, &il), 1);
    CHECK(il == 2 && memcmp(item, "bc", 2) == 0);
    free(item);
    CHECK_EQ_INT(keyspace_queue_len(ks, "q", 1), 0);
    CHECK_EQ_INT(keyspace_check(ks, q, 1), 0);
    CHECK_EQ_INT(keyspace_bytes(ks), 0);
    keyspace_free(ks);
}

static void test_byte_limit(void)
{
    keyspace_t *ks = fresh(10);
    const char *v;
    size_t n;
    int64_t r;
    CHECK_EQ_INT(keyspace_set(ks, "a", 1, "12345678", 8), 0);  /* 9 bytes */
    CHECK_EQ_INT(keyspace_set(ks, "b", 1, "1", 1), -ENOSPC);   /* would be 11 */
    CHECK_EQ_INT(keyspace_get(ks, "b", 1, &v, &n), 0);
    CHECK_EQ_INT(keyspace_set(ks, "a", 1, "123456789", 9), 0); /* replacing counts the change */
    CHECK_EQ_INT(keyspace_append(ks, "a", 1, "x", 1), -ENOSPC);
    CHECK_EQ_INT(keyspace_set(ks, "a", 1, "1", 1), 0);
    CHECK_EQ_INT(keyspace_add(ks, "a", 1, 1000000000, &r), -ENOSPC);
    CHECK_EQ_INT(keyspace_get(ks, "a", 1, &v, &n), 1);
    CHECK_EQ_STR(v, "1");
    CHECK_EQ_INT(keyspace_queue_push(ks, "q", 1, "12345678", 8), -ENOSPC);
    CHECK_EQ_INT(keyspace_bytes(ks), 2);
    keyspace_free(ks);
}

static void test_delete_except(void)
{
    keyspace_t *ks = fresh(0);
    wire_str_t w[] = {S("/worker/x")};
    keyspace_set(ks, "podrun/a", 8, "1", 1);
    keyspace_set(ks, "podrun/b", 8, "1", 1);
    keyspace_set(ks, "/worker/a", 9, "1", 1);
    keyspace_set(ks, "init/", 5, "2", 1);
    keyspace_queue_push(ks, "/worker/q", 9, "i", 1);
    keyspace_wait(ks, &owners[0], w, 1);
    CHECK_EQ_INT(keyspace_delete_except(ks, "podrun/", 7), 2);
    CHECK_EQ_INT(keyspace_num_keys(ks), 2);
    CHECK_EQ_INT(keyspace_queue_len(ks, "/worker/q", 9), 0);
    /* a waiter survives and is woken by the next attempt's write */
    keyspace_set(ks, "/worker/x", 9, "", 0);
    CHECK_EQ_INT(rec.ready[0], 1);
    keyspace_free(ks);
}

int main(void)
{
    RUN(test_set_get_delete);
    RUN(test_add);
    RUN(test_compare_set);
    RUN(test_append);
    RUN(test_wait_counter);
    RUN(test_wait_woken_by_compare_set);
    RUN(test_barrier);
    RUN(test_cancel_and_release);
    RUN(test_watch);
    RUN(test_queues);
    RUN(test_byte_limit);
    RUN(test_delete_except);
    return check_result();
}
