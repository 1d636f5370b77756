/* launcher/operators/jobset_ipr.c — what a JobSet says about in-place restart (see
 * jobset_ipr.h). */
#include "launcher/operators/jobset_ipr.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static long attempt_field(json_t *status, const char *key)
{
    json_t *v = json_object_get(status, key);
    /* the API's type is int32: anything else is not an attempt */
    return json_is_integer(v) && json_integer_value(v) >= 0 &&
                   json_integer_value(v) <= INT32_MAX
               ? (long)json_integer_value(v)
               : -1;
}

static int ipr_from_object(json_t *o, struct jobset_ipr *out)
{
    json_t *meta = json_object_get(o, "metadata");
    if (!json_is_object(o) || !json_is_object(meta))
        return -EPROTO;
    memset(out, 0, sizeof *out);
    const char *strategy = json_string_value(json_object_get(
        json_object_get(json_object_get(o, "spec"), "failurePolicy"), "restartStrategy"));
    out->in_place = strategy && strcmp(strategy, "InPlaceRestart") == 0;
    out->disabled = json_object_get(json_object_get(meta, "annotations"), JOBSET_DISABLE_KEY) != NULL;
    json_t *status = json_object_get(o, "status");
    out->current = attempt_field(status, "currentInPlaceRestartAttempt");
    out->previous = attempt_field(status, "previousInPlaceRestartAttempt");
    const char *ts = json_string_value(json_object_get(status, "terminalState"));
    snprintf(out->terminal, sizeof out->terminal, "%s", ts ? ts : "");
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    snprintf(out->rv, sizeof out->rv, "%s", rv ? rv : "");
    return 0;
}

int jobset_ipr_parse(const char *json, size_t len, struct jobset_ipr *out)
{
    json_t *o = json_loadb(json, len, 0, NULL);
    int r = ipr_from_object(o, out);
    json_decref(o);
    return r;
}

int jobset_ipr_event(const char *line, size_t len, struct jobset_ipr *out)
{
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    int r = -EPROTO;
    if (!type || !json_is_object(obj)) {
        r = -EPROTO;
    } else if (strcmp(type, "ERROR") == 0) {
        json_t *code = json_object_get(obj, "code");
        r = json_is_integer(code) && json_integer_value(code) == 410 ? -ESTALE : -EIO;
    } else if (strcmp(type, "BOOKMARK") == 0) {
        const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                           "resourceVersion"));
        r = rv ? 0 : -EPROTO;
        if (rv)
            snprintf(out->rv, sizeof out->rv, "%s", rv);
    } else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
        r = ipr_from_object(obj, out) == 0 ? 1 : -EPROTO;
    } else if (strcmp(type, "DELETED") == 0) {
        r = 0;   /* the JobSet is going: its pods go with it */
    }
    json_decref(ev);
    return r;
}

enum jobset_ipr_step jobset_ipr_step(const struct jobset_ipr *s, long attempt)
{
    if (s->previous >= 0 && attempt <= s->previous)
        return JOBSET_IPR_BEHIND;
    if (s->current >= 0 && attempt == s->current)
        return JOBSET_IPR_LIFT;
    return JOBSET_IPR_WAIT;
}

long jobset_ipr_first(const struct jobset_ipr *s)
{
    long n = s->current < 0 ? 0 : s->current + 1;
    return n > s->previous ? n : s->previous + 1;
}
