/* tests/unit/rdzv/store/loop_client.h — for tests that run the store's server and its async
 * client on one libuv loop: turning the loop until a reply came or a time passed, and the
 * callbacks that keep a request's result (status, value, number, order of arrival). */
#ifndef PODRUN_TESTS_LOOP_CLIENT_H
#define PODRUN_TESTS_LOOP_CLIENT_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "rdzv/store/aclient.h"

static uv_loop_t *loop;

static inline void lc_on_deadline(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Runs the loop until *flag becomes non-zero or ms pass. */
static inline void spin(volatile int *flag, int ms)
{
    uv_timer_t t;
    int expired = 0;
    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, lc_on_deadline, (uint64_t)ms, 0);
    while (!*flag && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* One request's result; order counts replies from 1 since seq was last set to 0. */
typedef struct res {
    int done, status;
    char val[128];
    int64_t num;
    int order;
} res_t;
static int seq;

static inline void on_reply(store_aclient_t *c, int status, const char *val, size_t len,
                            int64_t num, void *arg)
{
    (void)c;
    res_t *r = arg;
    r->done = 1;
    r->status = status;
    r->num = num;
    r->order = ++seq;
    snprintf(r->val, sizeof r->val, "%.*s", (int)len, val ? val : "");
}

static inline void on_conn(store_aclient_t *c, int status, void *arg)
{
    (void)c;
    res_t *r = arg;
    r->done = 1;
    r->status = status;
}

#endif
