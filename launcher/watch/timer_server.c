/* launcher/watch/timer_server.c — torch's file-based timer watchdog on the loop (timer_server.h). */
#include "launcher/watch/timer_server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdzv/base/common.h"

#define READ_BUDGET (64 * 1024)   /* bytes read per wake-up: the loop has other work */
#define COMPLAINTS_MAX 20         /* bad requests said; the rest are dropped silently */

static void say(struct timer_server *s, const char *fmt, const char *a, const char *b)
{
    char line[TIMERS_SCOPE_MAX + 256];
    if (s->complaints >= COMPLAINTS_MAX)
        return;
    if (++s->complaints == COMPLAINTS_MAX)
        snprintf(line, sizeof line, "further bad timer requests on %.200s are not said",
                 s->path);
    else
        snprintf(line, sizeof line, fmt, a, b);
    s->say(s->arg, line);
}

void timer_server_init(struct timer_server *s)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    timers_table_init(&s->table);
}

static void on_timer(uv_timer_t *t);

/* The one timer, armed for the earliest expiration held (now, if that passed). */
static void rearm(struct timer_server *s)
{
    double next = timers_next(&s->table);
    if (next < 0) {
        uv_timer_stop(&s->timer);
        return;
    }
    double ms = (next - podrun_time_epoch()) * 1000.0;
    uv_update_time(s->timer.loop);
    /* rounded up: a timer that fires early finds nothing expired and is armed again */
    uv_timer_start(&s->timer, on_timer, ms > 0 ? (uint64_t)ms + 1 : 0, 0);
}

static void on_timer(uv_timer_t *t)
{
    struct timer_server *s = t->data;
    struct timer_entry e;
    double now = podrun_time_epoch();
    while (s->fd >= 0 && timers_take_expired(&s->table, now, &e))
        s->expired(s->arg, &e, now - e.expiration);
    if (s->fd >= 0)
        rearm(s);
}

/* One request line: applied when it is good and comes from one of this node's workers. */
static void request(struct timer_server *s, const char *line, size_t len)
{
    struct timer_req r;
    char why[64];
    if (timers_parse(line, len, &r, why, sizeof why)) {
        char shown[80];
        snprintf(shown, sizeof shown, "%.*s%s", len > 60 ? 60 : (int)len, line,
                 len > 60 ? "..." : "");
        for (char *c = shown; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = '?';
        say(s, "ignoring a timer request that is not torch's (%s): %s", why, shown);
        return;
    }
    int lr = r.expiration < 0 ? -1 : s->rank_of(s->arg, r.pid);
    if (r.expiration >= 0 && lr < 0) {
        char pid[32];
        snprintf(pid, sizeof pid, "%d", (int)r.pid);
        say(s, "ignoring timer '%s' of pid %s: not a process of this node's running workers",
            r.scope, pid);
        return;
    }
    int rc = timers_apply(&s->table, &r, lr, podrun_time_epoch());
    if (rc)
        say(s, "ignoring timer '%s': %s", r.scope, podrun_strerror(rc));
}

/* Splits what was read into lines; a line that does not fit is skipped to its newline. */
static void take_lines(struct timer_server *s)
{
    size_t start = 0;
    for (size_t i = 0; i < s->blen; i++) {
        if (s->buf[i] != '\n')
            continue;
        if (!s->skipping && i > start)
            request(s, s->buf + start, i - start);
        s->skipping = false;
        start = i + 1;
    }
    memmove(s->buf, s->buf + start, s->blen - start);
    s->blen -= start;
    if (s->blen == sizeof s->buf - 1) {   /* full without a newline: too long */
        if (!s->skipping)
            say(s, "ignoring a timer request longer than %s bytes%s", "4096", "");
        s->skipping = true;
        s->blen = 0;
    }
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    struct timer_server *s = p->data;
    (void)events;
    if (status < 0)
        return;
    size_t budget = READ_BUDGET;
    while (budget > 0 && s->fd >= 0) {
        ssize_t n = read(s->fd, s->buf + s->blen, sizeof s->buf - 1 - s->blen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;   /* EAGAIN: all read (never 0: podrun holds a writer itself) */
        s->blen += (size_t)n;
        budget -= (size_t)n < budget ? (size_t)n : budget;
        take_lines(s);
    }
    rearm(s);
}

/* The FIFO at path, replacing one an earlier run left; any other file stays and is -EEXIST. */
static int make_fifo(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (!S_ISFIFO(sb.st_mode))
            return -EEXIST;
        if (unlink(path) < 0)
            return -errno;
    }
    return mkfifo(path, 0600) < 0 ? -errno : 0;
}

int timer_server_open(struct timer_server *s, uv_loop_t *loop, const char *path)
{
    if (snprintf(s->path, sizeof s->path, "%s", path) >= (int)sizeof s->path)
        return -ENAMETOOLONG;
    int r = make_fifo(path);
    if (r)
        return r;
    s->made = true;
    s->fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (s->fd < 0) {
        r = -errno;
        unlink(path);
        s->made = false;
        return r;
    }
    if ((r = uv_poll_init(loop, &s->poll, s->fd))) {
        close(s->fd);
        s->fd = -1;
        unlink(path);
        s->made = false;
        return r;
    }
    uv_timer_init(loop, &s->timer);
    s->poll.data = s->timer.data = s;
    s->handles = true;
    return uv_poll_start(&s->poll, UV_READABLE, on_readable);
}

void timer_server_forget(struct timer_server *s, int lr)
{
    if (s->fd >= 0 && timers_forget_rank(&s->table, lr))
        rearm(s);
}

void timer_server_clear(struct timer_server *s)
{
    if (s->fd < 0)
        return;
    timers_clear(&s->table);
    uv_timer_stop(&s->timer);
    s->complaints = 0;
}

void timer_server_stop(struct timer_server *s)
{
    if (s->made)
        unlink(s->path);
    s->made = false;
    if (s->fd < 0)
        return;
    timer_server_clear(s);
    uv_poll_stop(&s->poll);
    close(s->fd);
    s->fd = -1;
}

void timer_server_close(struct timer_server *s)
{
    timer_server_stop(s);
    if (s->handles) {
        uv_close((uv_handle_t *)&s->poll, NULL);
        uv_close((uv_handle_t *)&s->timer, NULL);
        s->handles = false;
    }
    timers_table_free(&s->table);
}
