/* launcher/output/logs.c — line assembly per worker stream and non-blocking output queues.
 *
 * Each worker stream reads straight into its own line buffer (alloc_cb hands libuv the free
 * tail of it), so a complete line is appended to the output queue as prefix + bytes + "\n" in
 * one step: queue appends are atomic on the single loop thread and the queue is written in
 * order, which is what keeps two workers' bytes out of one line.
 *
 * Output file descriptors: a pipe is reopened through /proc/self/fd/N with O_NONBLOCK, which
 * gives podrun its own open file description, so the non-blocking flag never leaks to whoever
 * shares the pipe; where that is impossible (a socket) O_NONBLOCK is set and restored at the
 * end. Regular files and terminals are written directly: they do not stall the way a pipe with
 * a stopped reader does. When stdout and stderr are the same file they share one queue, so
 * lines stay whole there too. */
#include "launcher/output/logs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "launcher/output/jsonline.h"
#include "rdzv/base/common.h"

static void sink_kick(struct log_sink *k);

static void on_writable(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    sink_kick(p->data);
}

static void sink_open(struct logs *L, struct log_sink *k, int fd)
{
    memset(k, 0, sizeof *k);
    k->L = L;
    k->fd = fd;
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        k->fd = -1;
        k->drop_err = errno;
        return;
    }
    if (S_ISFIFO(sb.st_mode)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        int nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (nfd >= 0) {
            k->fd = nfd;
            k->own_fd = true;
            k->nonblock = true;
        }
    }
    if (!k->nonblock && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode))) {
        k->orig_flags = fcntl(fd, F_GETFL);
        if (k->orig_flags >= 0 && fcntl(fd, F_SETFL, k->orig_flags | O_NONBLOCK) == 0) {
            k->restore_flags = !(k->orig_flags & O_NONBLOCK);
            k->nonblock = true;
        }
    }
    if (k->nonblock) {
        if (uv_poll_init(L->loop, &k->poll, k->fd) == 0) {
            k->poll_init = true;
            k->poll.data = k;
        } else {
            k->nonblock = false;   /* cannot wait for it: write it blocking */
            if (k->restore_flags)
                fcntl(fd, F_SETFL, k->orig_flags);
            k->restore_flags = false;
            if (k->own_fd) {
                close(k->fd);
                k->fd = fd;
                k->own_fd = false;
            }
        }
    }
}

static bool same_file(int a, int b)
{
    struct stat sa, sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino && sa.st_rdev == sb.st_rdev;
}

int logs_init(struct logs *L, uv_loop_t *loop)
{
    memset(L, 0, sizeof *L);
    L->loop = loop;
    L->filter[0].fd = L->filter[1].fd = -1;
    sink_open(L, &L->sink[0], 1);
    L->out = &L->sink[0];
    if (same_file(1, 2)) {
        L->err = L->out;
        L->sink[1].fd = -1;
    } else {
        sink_open(L, &L->sink[1], 2);
        L->err = &L->sink[1];
    }
    int r = uv_timer_init(loop, &L->drain_timer);
    L->drain_timer.data = L;
    if (!r && (r = uv_timer_init(loop, &L->partial_timer)) == 0) {
        L->partial_timer.data = L;
        L->partial_init = true;
    }
    return r;
}

static void set_paused(struct log_sink *k, bool pause);
static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

static size_t queued(const struct log_sink *k)
{
    return k->end - k->start;
}

static void check_drained(struct logs *L)
{
    if (L->on_drained && queued(L->out) == 0 && queued(L->err) == 0) {
        void (*cb)(struct logs *, bool) = L->on_drained;
        L->on_drained = NULL;
        uv_timer_stop(&L->drain_timer);
        cb(L, true);
    }
}

static void sink_kick(struct log_sink *k)
{
    while (k->start < k->end && k->fd >= 0) {
        ssize_t n = write(k->fd, k->buf + k->start, k->end - k->start);
        if (n > 0) {
            k->start += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && k->poll_init) {
            if (!k->polling && uv_poll_start(&k->poll, UV_WRITABLE, on_writable) == 0)
                k->polling = true;
            break;
        }
        /* the reader is gone (EPIPE) or the file is unusable: nothing more can be delivered */
        k->drop_err = n < 0 ? errno : EIO;
        k->dropped += k->end - k->start;
        k->start = k->end;
        if (k->own_fd)
            close(k->fd);
        k->own_fd = false;
        k->fd = -1;
    }
    if (k->fd < 0) {
        k->dropped += k->end - k->start;
        k->start = k->end;
    }
    if (k->start == k->end) {
        k->start = k->end = 0;
        if (k->polling) {
            uv_poll_stop(&k->poll);
            k->polling = false;
        }
    }
    if (k->paused && queued(k) <= LOG_LOW_WATER)
        set_paused(k, false);
    check_drained(k->L);
}

/* Appends the pieces as one unit. Memory stays bounded: past LOG_HIGH_WATER the producers are
 * paused, so the queue exceeds it by at most what was already read. */
static void sink_append(struct log_sink *k, const char *a, size_t al, const char *b, size_t bl,
                        bool newline)
{
    if (k->open) {
        /* a worker's partial line is on the console: end it, so that these bytes start a line
         * of their own and the worker's rest comes on a new, prefixed one */
        k->open->at_start = true;
        k->open = NULL;
        sink_append(k, "\n", 1, "", 0, false);
    }
    if (k->fd < 0) {
        k->dropped += al + bl + newline;
        return;
    }
    size_t need = al + bl + (newline ? 1 : 0);
    if (k->end + need > k->cap && k->start > 0) {
        memmove(k->buf, k->buf + k->start, k->end - k->start);
        k->end -= k->start;
        k->start = 0;
    }
    if (k->end + need > k->cap) {
        size_t nc = k->cap ? k->cap : 16384;
        while (nc < k->end + need)
            nc *= 2;
        char *nb = realloc(k->buf, nc);
        if (!nb) {
            k->drop_err = ENOMEM;
            k->dropped += need;
            return;
        }
        k->buf = nb;
        k->cap = nc;
    }
    memcpy(k->buf + k->end, a, al);
    k->end += al;
    memcpy(k->buf + k->end, b, bl);
    k->end += bl;
    if (newline)
        k->buf[k->end++] = '\n';
    if (!k->paused && queued(k) > LOG_HIGH_WATER)
        set_paused(k, true);
}

static void set_paused(struct log_sink *k, bool pause)
{
    struct logs *L = k->L;
    k->paused = pause;
    for (int i = 0; i < L->nstreams; i++) {
        struct log_stream *s = L->streams[i];
        if (s->sink != k || !s->open || s->eof)
            continue;
        if (pause && s->reading) {
            uv_read_stop((uv_stream_t *)&s->pipe);
            s->reading = false;
        } else if (!pause && !s->reading) {
            if (uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb) == 0)
                s->reading = true;
            s->last_ms = uv_now(L->loop);   /* the pause was podrun's, not the worker's */
        }
    }
}

static void tail_add(struct log_stream *s, const char *p, size_t n)
{
    if (!s->keep_tail)
        return;
    if (!s->tail && !(s->tail = malloc(LOG_TAIL_BYTES)))
        return;
    if (n + 1 >= LOG_TAIL_BYTES) {
        p += n - (LOG_TAIL_BYTES - 1);
        n = LOG_TAIL_BYTES - 1;
        s->tail_len = 0;
    }
    if (s->tail_len + n + 1 > LOG_TAIL_BYTES) {
        size_t drop = s->tail_len + n + 1 - LOG_TAIL_BYTES;
        memmove(s->tail, s->tail + drop, s->tail_len - drop);
        s->tail_len -= drop;
    }
    memcpy(s->tail + s->tail_len, p, n);
    s->tail_len += n;
    s->tail[s->tail_len++] = '\n';
}

/* A console line matching one of the stream's filters is copied to their file, whole and
 * prefixed; the file is a regular one, so the write does not wait on a reader. */
static void filter_line(struct log_stream *s, const char *p, size_t n)
{
    const struct log_filter *f = &s->L->filter[s->which == 2];
    if (f->fd < 0)
        return;
    for (size_t i = 0; i < f->n; i++)
        if (memmem(p, n, f->items[i], strlen(f->items[i]))) {
            struct iovec v[3] = {{s->prefix, s->prefix_len}, {(void *)p, n}, {"\n", 1}};
            ssize_t w;
            do
                w = writev(f->fd, v, 3);
            while (w < 0 && errno == EINTR);
            return;
        }
}

/* One console segment: the prefix when the worker's console line starts here (a lone '\r' at
 * the start needs none: it moves nothing), then the bytes, then '\n' when the line ends. A
 * segment that does not end the line leaves the sink open on this stream (sink_append). */
static void console_segment(struct log_stream *s, const char *p, size_t n, bool eol)
{
    struct log_sink *k = s->sink;
    if (k->open == s)
        k->open = NULL;   /* this stream's own continuation */
    bool prefix = s->at_start && !(n == 1 && p[0] == '\r' && !eol);
    if (prefix)
        sink_append(k, s->prefix, s->prefix_len, p, n, eol);
    else
        sink_append(k, p, n, "", 0, eol);
    s->at_start = eol || (n && p[n - 1] == '\r');
    if (!eol)
        k->open = s;
}

/* Bytes p[0..n) of the worker's current line to the console: a '\r' inside ends a segment (a
 * progress bar redraws its line: each redraw gets the prefix); eol ends the line. */
static void console_send(struct log_stream *s, const char *p, size_t n, bool eol)
{
    size_t i = 0;
    while (i < n) {
        const char *cr = memchr(p + i, '\r', n - i);
        if (!cr || (size_t)(cr - p) + 1 == n)
            break;   /* the last segment, which may end in '\r' ("\r\n") */
        size_t end = (size_t)(cr - p) + 1;
        console_segment(s, p + i, end - i, false);
        i = end;
    }
    if (i < n || eol)
        console_segment(s, p + i, n - i, eol);
}

/* A whole line: the console gets what it has not shown yet; the filters and the tail get the
 * whole line. */
static void emit_line(struct log_stream *s, const char *p, size_t n)
{
    size_t shown = s->shown < n ? s->shown : n;
    s->shown = 0;
    if (shown && shown == n && s->sink && s->sink->open == s)
        s->at_start = false;   /* the line was shown: only its end is left */
    if (s->sink) {
        console_send(s, p + shown, n - shown, true);
        filter_line(s, p, n);
    }
    tail_add(s, p, n);
}

/* The partial line's unshown bytes up to its last '\r' now (all of them when `all`): a
 * progress bar shows as it is drawn, not at the next newline. A '\r' that is the last byte
 * waits, as it may begin "\r\n"; so does a last character not yet whole, which another
 * worker's line could otherwise cut in two. */
static void show_partial(struct log_stream *s, bool all)
{
    if (!s->sink || s->shown >= s->len)
        return;
    size_t upto = logs_utf8_cut(s->line, s->len);   /* a character's rest may follow */
    if (upto <= s->shown)
        return;
    if (!all) {
        upto = 0;
        for (size_t i = s->len - 1; i > s->shown; i--)
            if (s->line[i - 1] == '\r') {
                upto = i;
                break;
            }
        if (upto <= s->shown)
            return;
    }
    console_send(s, s->line + s->shown, upto - s->shown, false);
    s->shown = upto;
}

/* How long a partial line waits for more bytes before it is shown as it is: a progress bar
 * (a '\r' in the line) briefly; other text longer, since block-buffered output ends its writes
 * mid-line and its lines should stay whole on the console. */
static uint64_t partial_idle_ms(const struct log_stream *s)
{
    return memchr(s->line, '\r', s->len) ? LOG_PARTIAL_MS : LOG_PARTIAL_IDLE_MS;
}

/* A partial line that has sat partial_idle_ms without more bytes is shown as it is; a stream
 * that is still writing (or paused by podrun) finishes its line first. */
static void on_partial_timer(uv_timer_t *t)
{
    struct logs *L = t->data;
    uint64_t now = uv_now(L->loop), next = 0;
    for (int i = 0; i < L->nstreams; i++) {
        struct log_stream *s = L->streams[i];
        if (!s->sink || s->eof || s->shown >= s->len)
            continue;
        uint64_t age = now - s->last_ms, idle = partial_idle_ms(s);
        uint64_t wait = age < idle ? idle - age : 0;
        if (!wait && !s->sink->paused) {
            show_partial(s, true);
            sink_kick(s->sink);
            continue;
        }
        wait = wait ? wait : idle;   /* paused: look again later */
        next = next && next < wait ? next : wait;
    }
    if (next)
        uv_timer_start(&L->partial_timer, on_partial_timer, next, 0);
}

static void arm_partial(struct log_stream *s)
{
    struct logs *L = s->L;
    if (!s->sink || s->shown >= s->len || !L->partial_init)
        return;
    uint64_t idle = partial_idle_ms(s);
    if (!uv_is_active((uv_handle_t *)&L->partial_timer) ||
        uv_timer_get_due_in(&L->partial_timer) > idle)
        uv_timer_start(&L->partial_timer, on_partial_timer, idle, 0);
}

void logs_set_filter(struct logs *L, int which, int fd, const char *const *items, size_t n)
{
    struct log_filter *f = &L->filter[which == 2];
    f->fd = fd;
    f->items = items;
    f->n = n;
}

/* New bytes are at line[len .. len+n): emit every complete line, keep the rest. */
static void consume(struct log_stream *s, size_t n)
{
    if (s->file_fd >= 0) {
        const char *p = s->line + s->len;
        size_t left = n;
        while (left) {
            ssize_t w = write(s->file_fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                close(s->file_fd);   /* disk full or gone: keep the console going */
                s->file_fd = -1;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    s->bytes += n;
    size_t start = 0, scan = s->len, end = s->len + n;
    while (scan < end) {
        char *nl = memchr(s->line + scan, '\n', end - scan);
        if (!nl)
            break;
        size_t pos = (size_t)(nl - s->line);
        emit_line(s, s->line + start, pos - start);
        start = scan = pos + 1;
    }
    s->len = end - start;
    if (start && s->len)
        memmove(s->line, s->line + start, s->len);
    show_partial(s, false);
    arm_partial(s);
    if (s->sink)
        sink_kick(s->sink);
}

static void flush_partial(struct log_stream *s)
{
    if (s->len) {
        emit_line(s, s->line, s->len);
        s->len = 0;
        if (s->sink)
            sink_kick(s->sink);
    }
}

size_t logs_utf8_cut(const char *p, size_t n)
{
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)p[n - back];
        if ((c & 0xc0) == 0x80)
            continue;   /* a continuation byte: its lead is further back */
        size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                    : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > back && n > back ? n - back : n;
    }
    return n;
}

/* A full buffer without a newline: out as a prefixed chunk, never dropped; cut before a
 * character the buffer does not hold whole, whose first bytes start the next chunk. */
static void flush_long(struct log_stream *s)
{
    size_t cut = logs_utf8_cut(s->line, s->len);
    if (s->shown > cut)
        cut = s->len;   /* those bytes are on the console already */
    emit_line(s, s->line, cut);
    s->len -= cut;
    memmove(s->line, s->line + cut, s->len);
    if (s->sink)
        sink_kick(s->sink);
}

void logs_stream_note(struct log_stream *s, const char *text, size_t len)
{
    if (!s->L || !s->open)
        return;
    flush_partial(s);
    for (size_t off = 0; s->file_fd >= 0 && off < len;) {
        ssize_t w = write(s->file_fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;   /* the worker's own bytes will find the same trouble and say it */
        off += (size_t)w;
    }
    for (size_t i = 0; s->sink && i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - text - i) : len - i;
        console_send(s, text + i, n, true);
        i += n + 1;
    }
    if (s->sink)
        sink_kick(s->sink);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct log_stream *s = h->data;
    if (!s->line) {   /* first read: the buffer is empty (len 0) */
        if (!(s->line = malloc(LOG_LINE_MAX))) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
    } else if (s->len == LOG_LINE_MAX) {
        flush_long(s);
    }
    *buf = uv_buf_init(s->line + s->len, (unsigned)(LOG_LINE_MAX - s->len));
}

static void close_stream(struct log_stream *s)
{
    flush_partial(s);
    if (s->sink && s->sink->open == s)
        s->sink->open = NULL;
    s->eof = true;
    s->reading = false;
    if (s->open) {
        uv_close((uv_handle_t *)&s->pipe, NULL);
        s->open = false;
    }
    if (s->file_fd >= 0) {
        close(s->file_fd);
        s->file_fd = -1;
    }
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct log_stream *s = st->data;
    if (nread > 0) {
        s->last_ms = uv_now(s->L->loop);
        consume(s, (size_t)nread);
    }
    else if (nread < 0)
        close_stream(s);   /* EOF, or an error that makes the pipe unreadable */
}

int logs_stream_open(struct logs *L, struct log_stream *s, int which, const char *prefix,
                     bool console, int file_fd, bool keep_tail, int *child_fd)
{
    memset(s, 0, sizeof *s);
    s->L = L;
    s->which = which;
    s->file_fd = file_fd;
    s->keep_tail = keep_tail;
    s->sink = console ? (which == 2 ? L->err : L->out) : NULL;
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    s->prefix_len = strlen(s->prefix);
    s->at_start = true;
    if (L->nstreams == L->cap) {
        int nc = L->cap ? L->cap * 2 : 16;
        struct log_stream **ns = realloc(L->streams, (size_t)nc * sizeof *ns);
        if (!ns)
            return -ENOMEM;
        L->streams = ns;
        L->cap = nc;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    int r = uv_pipe_init(L->loop, &s->pipe, 0);
    if (!r && (r = uv_pipe_open(&s->pipe, fds[0])) != 0)
        uv_close((uv_handle_t *)&s->pipe, NULL);
    if (r) {
        close(fds[0]);
        close(fds[1]);
        return r;
    }
    s->pipe.data = s;
    s->open = true;
    s->last_ms = uv_now(L->loop);
    L->streams[L->nstreams++] = s;
    if (!(s->sink && s->sink->paused)) {
        r = uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb);
        s->reading = r == 0;
    }
    *child_fd = fds[1];
    return 0;
}

/* Reads what the pipe holds now, without waiting (EAGAIN, or EOF which the read callback or
 * close_stream sees). */
static void read_now(struct log_stream *s)
{
    int fd = -1;
    uv_fileno((uv_handle_t *)&s->pipe, &fd);
    for (;;) {
        uv_buf_t b;
        alloc_cb((uv_handle_t *)&s->pipe, 0, &b);
        if (!b.len)
            break;
        ssize_t n = read(fd, b.base, b.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        s->last_ms = uv_now(s->L->loop);
        consume(s, (size_t)n);
    }
}

void logs_stream_pull(struct log_stream *s)
{
    if (s->open && s->reading)   /* a paused stream stays paused: the console is behind */
        read_now(s);
}

void logs_stream_finish(struct log_stream *s)
{
    if (!s->open)
        return;
    read_now(s);
    close_stream(s);
}

void logs_stream_forget(struct log_stream *s)
{
    struct logs *L = s->L;
    if (!L)
        return;
    close_stream(s);
    for (int i = 0; i < L->nstreams; i++)
        if (L->streams[i] == s) {
            L->streams[i] = L->streams[--L->nstreams];
            break;
        }
    free(s->line);
    free(s->tail);
    s->line = s->tail = NULL;
    s->tail_len = 0;
    s->L = NULL;
}

const char *logs_stream_tail(const struct log_stream *s, size_t *len)
{
    *len = s->tail ? s->tail_len : 0;
    return s->tail;
}

void logs_set_json(struct logs *L, const char *node, const char *run_id)
{
    L->json = true;
    L->json_node = node;
    L->json_run_id = run_id;
}

/* One JSON object for podrun's own text on sink k; without memory the text goes out as it is
 * rather than not at all. */
static void json_out(struct logs *L, struct log_sink *k, const char *source, const char *text,
                     size_t len)
{
    struct jsonbuf b;
    jsonline_init(&b);
    jsonline_log(&b, podrun_time_epoch(), source, L->json_node, L->json_run_id, text, len);
    if (b.oom)
        sink_append(k, text, len, "", 0, false);
    else
        sink_append(k, b.buf, b.len, "", 0, false);
    jsonline_free(&b);
    sink_kick(k);
}

void logs_message(struct logs *L, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    if (L->json) {
        json_out(L, L->err, "podrun", buf, (size_t)n);
        return;
    }
    sink_append(L->err, "podrun: ", 8, buf, (size_t)n, true);
    sink_kick(L->err);
}

void logs_text(struct logs *L, int which, const char *source, const char *data, size_t len)
{
    struct log_sink *k = which == 2 ? L->err : L->out;
    if (L->json) {
        json_out(L, k, source, data, len);
        return;
    }
    sink_append(k, data, len, "", 0, false);
    sink_kick(k);
}

void logs_write(struct logs *L, int which, const char *data, size_t len)
{
    logs_text(L, which, "podrun", data, len);
}

bool logs_stream_paused(const struct log_stream *s)
{
    return s->L && s->open && !s->eof && !s->reading && s->sink && s->sink->paused;
}

static size_t note_one(struct log_sink *k, const char *name, char *buf, size_t cap, bool mark)
{
    if (k->dropped <= k->dropped_said || cap == 0)
        return 0;
    int n = snprintf(buf, cap, "podrun: %llu bytes of worker output could not be written to "
                     "%s: %s\n", (unsigned long long)(k->dropped - k->dropped_said), name,
                     strerror(k->drop_err ? k->drop_err : EIO));
    if (mark)
        k->dropped_said = k->dropped;
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t logs_dropped_note(struct logs *L, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap)
        buf[0] = 0;
    n += note_one(L->out, L->err == L->out ? "stdout and stderr" : "stdout", buf, cap, false);
    if (L->err != L->out)
        n += note_one(L->err, "stderr", buf + n, cap - n, false);
    return n;
}

bool logs_say_dropped(struct logs *L)
{
    char line[2][256];
    struct log_sink *other[2] = {L->err, L->out};
    size_t n[2] = {0, 0};
    /* each stream's loss is said on the other one; the same file has no other */
    bool said = false;
    n[0] = note_one(L->out, L->err == L->out ? "stdout and stderr" : "stdout", line[0],
                    sizeof line[0], true);
    if (L->err != L->out)
        n[1] = note_one(L->err, "stderr", line[1], sizeof line[1], true);
    for (int i = 0; i < 2; i++)
        if (n[i] && other[i] != (i ? L->err : L->out) && other[i]->fd >= 0) {
            sink_append(other[i], line[i], n[i], "", 0, false);
            sink_kick(other[i]);
            said = true;
        }
    return said;
}

static void on_drain_timeout(uv_timer_t *t)
{
    struct logs *L = t->data;
    void (*cb)(struct logs *, bool) = L->on_drained;
    L->on_drained = NULL;
    if (cb)
        cb(L, false);
}

void logs_drain(struct logs *L, uint64_t timeout_ms, void (*cb)(struct logs *, bool))
{
    L->on_drained = cb;
    uv_timer_start(&L->drain_timer, on_drain_timeout, timeout_ms, 0);
    check_drained(L);
}

static void sink_close(struct log_sink *k, int orig_fd)
{
    if (k->poll_init) {
        uv_close((uv_handle_t *)&k->poll, NULL);
        k->poll_init = false;
    }
    if (k->restore_flags)
        fcntl(orig_fd, F_SETFL, k->orig_flags);
    if (k->own_fd && k->fd >= 0)
        close(k->fd);
    k->own_fd = false;
    free(k->buf);
    k->buf = NULL;
}

void logs_close(struct logs *L)
{
    for (int i = 0; i < L->nstreams; i++) {
        struct log_stream *s = L->streams[i];
        close_stream(s);
        free(s->line);
        free(s->tail);
        s->line = s->tail = NULL;
    }
    free(L->streams);
    L->streams = NULL;
    L->nstreams = 0;
    sink_close(&L->sink[0], 1);
    if (L->err != L->out)
        sink_close(&L->sink[1], 2);
    uv_close((uv_handle_t *)&L->drain_timer, NULL);
    if (L->partial_init)
        uv_close((uv_handle_t *)&L->partial_timer, NULL);
    L->partial_init = false;
}

/* The template's value of `name` (len n) in tmp, or NULL for a name it does not know. */
static const char *prefix_value(const char *name, size_t n, int rank, int local_rank,
                                const char *role, char *tmp, size_t cap)
{
    static const char *const names[] = {"rank", "local_rank", "role_name", "hostname"};
    size_t k = 0;
    while (k < 4 && !(strlen(names[k]) == n && !strncmp(name, names[k], n)))
        k++;
    switch (k) {
    case 0:
        snprintf(tmp, cap, "%d", rank);
        return tmp;
    case 1:
        snprintf(tmp, cap, "%d", local_rank);
        return tmp;
    case 2:
        return role ? role : "default";
    case 3:   /* torch 2.x's: socket.gethostname(), the short name, not the FQDN */
        if (gethostname(tmp, cap - 1))
            snprintf(tmp, cap, "localhost");
        tmp[cap - 1] = '\0';
        return tmp;
    default:
        return NULL;
    }
}

/* Python's string.Template.safe_substitute, as torch applies it: ${name} and $name, $$ is $,
 * anything else (an unknown name, a lone $) stays as written. */
int logs_expand_prefix(const char *tmpl, int rank, int local_rank, const char *role, char *buf,
                       size_t len)
{
    size_t o = 0;
    if (!len)
        return -EINVAL;
    for (const char *p = tmpl; *p;) {
        char tmp[256];
        const char *rep = NULL;
        size_t skip = 0;
        if (p[0] == '$' && p[1] == '$') {
            rep = "$", skip = 2;
        } else if (p[0] == '$') {
            bool braced = p[1] == '{';
            const char *name = p + 1 + braced;
            size_t n = 0;
            if (isalpha((unsigned char)name[0]) || name[0] == '_')
                while (isalnum((unsigned char)name[n]) || name[n] == '_')
                    n++;
            if (n && (!braced || name[n] == '}')) {
                rep = prefix_value(name, n, rank, local_rank, role, tmp, sizeof tmp);
                skip = 1 + braced + n + braced;
            }
        }
        if (rep) {
            size_t l = strlen(rep);
            if (o + l >= len)
                return -ENOSPC;
            memcpy(buf + o, rep, l);
            o += l;
            p += skip;
        } else {
            if (o + 1 >= len)
                return -ENOSPC;
            buf[o++] = *p++;
        }
    }
    buf[o] = 0;
    return 0;
}
