/* launcher/watch/timers.c — torch's file-based timer requests and the table of timers (timers.h). */
#include "launcher/watch/timers.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JSON number that is a whole pid (1 .. 2^22, Linux's PID_MAX_LIMIT). */
static int pid_of(json_t *v, pid_t *out)
{
    if (!json_is_integer(v))
        return -EINVAL;
    json_int_t p = json_integer_value(v);
    if (p < 1 || p > (1 << 22))
        return -EINVAL;
    *out = (pid_t)p;
    return 0;
}

static int bad(char *why, size_t wlen, const char *what)
{
    snprintf(why, wlen, "%s", what);
    return -EINVAL;
}

/* The fields torch's FileTimerServer reads: pid, scope_id, expiration_time, signal ("version"
 * is not checked there either). */
static int take_fields(json_t *o, struct timer_req *r, char *why, size_t wlen)
{
    if (!json_is_object(o))
        return bad(why, wlen, "not a JSON object");
    if (pid_of(json_object_get(o, "pid"), &r->pid))
        return bad(why, wlen, "no valid \"pid\"");
    json_t *s = json_object_get(o, "scope_id");
    if (!json_is_string(s))
        return bad(why, wlen, "no \"scope_id\" string");
    snprintf(r->scope, sizeof r->scope, "%s", json_string_value(s));
    for (char *c = r->scope; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = ' ';   /* it goes into one-line reasons */
    json_t *e = json_object_get(o, "expiration_time");
    if (!json_is_number(e) || !isfinite(json_number_value(e)))
        return bad(why, wlen, "no numeric \"expiration_time\"");
    r->expiration = json_number_value(e);
    json_t *g = json_object_get(o, "signal");
    if (!json_is_integer(g))
        return bad(why, wlen, "no integer \"signal\"");
    json_int_t sig = json_integer_value(g);
    r->signo = sig > 0 && sig < 65 ? (int)sig : sig > 0 ? -1 : 0;
    if (r->signo < 0)
        return bad(why, wlen, "\"signal\" is not a signal number");
    return 0;
}

int timers_parse(const char *line, size_t len, struct timer_req *r, char *why, size_t wlen)
{
    memset(r, 0, sizeof *r);
    if (len > TIMERS_LINE_MAX)
        return bad(why, wlen, "longer than PIPE_BUF");
    json_error_t err;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
    if (!o)
        return bad(why, wlen, "not JSON");
    int rc = take_fields(o, r, why, wlen);
    json_decref(o);
    return rc;
}

void timers_table_init(struct timer_table *t)
{
    memset(t, 0, sizeof *t);
}

void timers_table_free(struct timer_table *t)
{
    free(t->v);
    timers_table_init(t);
}

static int find(const struct timer_table *t, pid_t pid, const char *scope)
{
    for (int i = 0; i < t->n; i++)
        if (t->v[i].pid == pid && strcmp(t->v[i].scope, scope) == 0)
            return i;
    return -1;
}

static void drop(struct timer_table *t, int i)
{
    t->v[i] = t->v[--t->n];
}

int timers_apply(struct timer_table *t, const struct timer_req *r, int lr, double now)
{
    int i = find(t, r->pid, r->scope);
    if (r->expiration < 0) {
        if (i >= 0)
            drop(t, i);
        return 0;
    }
    if (i < 0) {
        if (t->n >= TIMERS_MAX)
            return -ENOSPC;
        if (t->n == t->cap) {
            int cap = t->cap ? 2 * t->cap : 16;
            struct timer_entry *v = realloc(t->v, (size_t)cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            t->v = v;
            t->cap = cap;
        }
        i = t->n++;
    }
    struct timer_entry *e = &t->v[i];
    e->pid = r->pid;
    e->lr = lr;
    memcpy(e->scope, r->scope, sizeof e->scope);
    e->expiration = r->expiration;
    e->acquired = now;
    e->signo = r->signo;
    return 0;
}

int timers_forget_rank(struct timer_table *t, int lr)
{
    int n = 0;
    for (int i = t->n - 1; i >= 0; i--)
        if (t->v[i].lr == lr) {
            drop(t, i);
            n++;
        }
    return n;
}

void timers_clear(struct timer_table *t)
{
    t->n = 0;
}

double timers_next(const struct timer_table *t)
{
    double m = -1;
    for (int i = 0; i < t->n; i++)
        if (m < 0 || t->v[i].expiration < m)
            m = t->v[i].expiration;
    return m;
}

int timers_take_expired(struct timer_table *t, double now, struct timer_entry *out)
{
    int first = -1;
    for (int i = 0; i < t->n && first < 0; i++)
        if (t->v[i].expiration <= now)
            first = i;
    if (first < 0)
        return 0;
    pid_t pid = t->v[first].pid;
    int best = -1, best_any = -1;
    for (int i = 0; i < t->n; i++) {
        const struct timer_entry *e = &t->v[i];
        if (e->pid != pid || e->expiration > now)
            continue;
        if (best_any < 0 || e->expiration < t->v[best_any].expiration)
            best_any = i;
        if (e->signo > 0 && (best < 0 || e->expiration < t->v[best].expiration))
            best = i;
    }
    *out = t->v[best >= 0 ? best : best_any];
    for (int i = t->n - 1; i >= 0; i--)
        if (t->v[i].pid == pid)
            drop(t, i);
    return 1;
}
