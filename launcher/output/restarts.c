/* launcher/output/restarts.c — one record per restart (restarts.h). */
#include "launcher/output/restarts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/output/jsonline.h"
#include "rdzv/base/common.h"

static const char *const restarts_phase_names[RESTARTS__PHASES] = RESTARTS_PHASE_NAMES;

/* The restart moves to phase p now; a phase already begun keeps its start. */
static void mark(struct restarts *r, enum restarts_phase p)
{
    if (!r->at[p])
        r->at[p] = uv_hrtime();
}

void restarts_stopping(struct restarts *r)
{
    if (r->stopping)
        return;
    /* a restart begins here: what was marked before (the last assignment) is not part of it */
    memset(r->at, 0, sizeof r->at);
    r->stopping = podrun_time_epoch();
    mark(r, RESTARTS_STOP);
}

void restarts_decided(struct restarts *r, const rdzv_decision_t *d)
{
    restarts_stopping(r);   /* no worker ran here: the decision is what this node saw first */
    r->pending = d->action == RDZV_RESTART;
    r->has_root = d->n > 0;
    if (r->has_root)
        r->root = d->failures[0];
    snprintf(r->why, sizeof r->why, "%s", d->reason);
    r->restart_count = d->restart_count;
    r->counted = d->restart_counted;
}

void restarts_gone(struct restarts *r)
{
    mark(r, RESTARTS_GPU_WAIT);
}

void restarts_rejoining(struct restarts *r)
{
    mark(r, RESTARTS_RENDEZVOUS);
}

void restarts_assigned(struct restarts *r)
{
    mark(r, RESTARTS_SPAWN);
}

/* Seconds from phase p's start to the next phase that began (or to `now`); 0 when p did not
 * come. Detect runs on two clocks: the failing node's epoch time to this node's. */
static void phases(struct restarts *r, uint64_t now)
{
    double detect = r->has_root && r->root.time > 0 ? r->stopping - r->root.time : 0;
    r->last[RESTARTS_DETECT] = detect > 0 ? detect : 0;   /* clocks that disagree: not < 0 */
    for (int p = RESTARTS_STOP; p < RESTARTS__PHASES; p++) {
        uint64_t end = now;
        for (int q = p + 1; q < RESTARTS__PHASES; q++)
            if (r->at[q]) {
                end = r->at[q];
                break;
            }
        r->last[p] = r->at[p] && end > r->at[p] ? (double)(end - r->at[p]) / 1e9 : 0;
    }
}

/* ,"key":seconds to the microsecond (a double's 17 digits say nothing more here). */
static void seconds(struct jsonbuf *b, int first, const char *key, double v)
{
    char num[48];
    jsonline_raw(b, first ? "{" : ",");
    jsonline_str(b, key, strlen(key));
    snprintf(num, sizeof num, ":%.6f", v);
    jsonline_raw(b, num);
}

/* The record as one JSON line (doc/failures.md#one-record-per-restart). */
static void record(const struct restarts *r, struct jsonbuf *b, int attempt, int round,
                   const char *node)
{
    char when[40];
    time_t t = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    jsonline_field(b, 1, "time", when);
    jsonline_field(b, 0, "node", node);
    jsonline_field_num(b, 0, "attempt", attempt);
    jsonline_field_num(b, 0, "round", round);
    jsonline_field_num(b, 0, "restart", r->restart_count);
    jsonline_raw(b, r->counted ? ",\"counted\":true" : ",\"counted\":false");
    jsonline_field(b, 0, "why", r->why);
    if (r->has_root) {
        const rdzv_failure_t *f = &r->root;
        jsonline_raw(b, ",\"failure\":");
        jsonline_field(b, 1, "node", f->node_name);
        jsonline_field(b, 0, "host", f->host);
        jsonline_field_num(b, 0, "node_rank", f->node_rank);
        jsonline_field_num(b, 0, "rank", f->rank);
        jsonline_field_num(b, 0, "local_rank", f->local_rank);
        if (f->signo > 0)
            jsonline_field_num(b, 0, "signal", f->signo);
        else
            jsonline_field_num(b, 0, "exit_code", f->exit_code);
        jsonline_field(b, 0, "reason", f->reason);
        seconds(b, 0, "time", f->time);
        jsonline_raw(b, "}");
    } else {
        jsonline_raw(b, ",\"failure\":null");
    }
    double total = 0;
    jsonline_raw(b, ",\"seconds\":");
    for (int p = 0; p < RESTARTS__PHASES; p++) {
        seconds(b, p == 0, restarts_phase_names[p], r->last[p]);
        total += r->last[p];
    }
    seconds(b, 0, "total", total);
    jsonline_raw(b, "}}\n");
}

/* One write with O_APPEND: a reader never sees half a line from this node. */
static int append(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, text, len);
    int r = w < 0 ? -errno : (size_t)w < len ? -EIO : 0;
    close(fd);
    return r;
}

int restarts_spawning(struct restarts *r, const char *attempt_dir, int attempt, int round,
                      const char *node)
{
    if (!r->pending)
        return 0;
    phases(r, uv_hrtime());
    r->records++;
    /* beside attempt_<n>, absolute: the workers may change their directory */
    const char *slash = strrchr(attempt_dir, '/');
    int dl = slash ? (int)(slash - attempt_dir) : 1;
    char cwd[PATH_MAX] = ".";
    if (attempt_dir[0] != '/' && !getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    int pl = snprintf(r->path, sizeof r->path, "%s%s%.*s/restarts.jsonl",
                      attempt_dir[0] == '/' ? "" : cwd, attempt_dir[0] == '/' ? "" : "/", dl,
                      slash ? attempt_dir : ".");
    int rc = -ENAMETOOLONG;
    if (pl < 0 || (size_t)pl >= sizeof r->path) {
        r->path[0] = '\0';   /* a cut path would name another file: no file, no variables */
    } else {
        struct jsonbuf b;
        jsonline_init(&b);
        record(r, &b, attempt, round, node);
        rc = b.oom ? -ENOMEM : append(r->path, b.buf, b.len);
        jsonline_free(&b);
    }
    r->pending = false;
    r->stopping = 0;
    memset(r->at, 0, sizeof r->at);
    return rc ? rc : 1;
}

int restarts_env(const struct restarts *r, int attempt, char *attempt_var, char *file_var,
                 size_t cap)
{
    if (!r->path[0])
        return 0;
    snprintf(attempt_var, cap, "PODRUN_ATTEMPT=%d", attempt);
    snprintf(file_var, cap, "PODRUN_RESTARTS_FILE=%s", r->path);
    return 2;
}

void restarts_end(struct restarts *r, bool keep)
{
    if (r->path[0] && !keep)
        unlink(r->path);
}
