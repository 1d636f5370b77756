/* launcher/output/logs.h — worker output through pipes on the loop, out line by line with a prefix.
 *
 * Guarantees: every byte a worker writes before its pipe is drained comes out; a line on the
 * console is one worker's bytes only, prefixed; a line longer than LOG_LINE_MAX is split into
 * chunks that are each prefixed, cut between UTF-8 characters; a partial last line is flushed (with a newline) at the end.
 * podrun's own stdout and stderr are written without ever blocking the loop on a slow reader:
 * output queues up to LOG_HIGH_WATER, then reading from the workers' pipes pauses (so workers
 * block in write(), as they would on a slow terminal) until the queue is down to LOG_LOW_WATER. */
#ifndef PODRUN_LAUNCHER_LOGS_H
#define PODRUN_LAUNCHER_LOGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define LOG_LINE_MAX (16 * 1024)     /* longest line kept whole */
#define LOG_TAIL_BYTES 2048          /* stderr kept per worker for the failure report */
#define LOG_HIGH_WATER (256 * 1024)
#define LOG_LOW_WATER (64 * 1024)
#define LOG_PARTIAL_MS 100           /* a partial progress line ('\r') idle this long is shown */
#define LOG_PARTIAL_IDLE_MS 1000     /* any other partial line idle this long is shown */

struct logs;

struct log_sink {
    struct logs *L;
    int fd;                  /* where bytes go; -1: nowhere (closed or broken) */
    bool own_fd;             /* a non-blocking reopening of the pipe, closed at the end */
    bool restore_flags;      /* O_NONBLOCK was set on a shared descriptor: undo at the end */
    int orig_flags;
    bool nonblock;
    bool paused;             /* the streams writing here are paused */
    uv_poll_t poll;
    bool poll_init, polling;
    char *buf;
    size_t start, end, cap;
    uint64_t dropped;        /* bytes that could not be delivered (reader gone) */
    uint64_t dropped_said;   /* of those, already reported */
    int drop_err;            /* why (an errno value) */
    struct log_stream *open; /* its partial line is on the console, not yet ended */
};

struct log_stream {
    struct logs *L;
    int which;               /* 1 stdout, 2 stderr */
    uv_pipe_t pipe;
    bool open, reading, eof;
    struct log_sink *sink;   /* NULL: not shown on the console */
    int file_fd;             /* -1: no log file */
    char prefix[96];
    size_t prefix_len;
    char *line;              /* LOG_LINE_MAX bytes, allocated on first read */
    size_t len;
    size_t shown;            /* of line[0..len), the bytes already on the console */
    bool at_start;           /* the console line of this stream needs the prefix next */
    bool keep_tail;
    char *tail;              /* the last LOG_TAIL_BYTES of complete lines */
    size_t tail_len;
    uint64_t bytes;
    uint64_t last_ms;        /* uv_now() of the last read from the worker (hang watchdog) */
};

struct logs {
    uv_loop_t *loop;
    struct log_sink sink[2];     /* podrun's stdout, stderr */
    struct log_sink *out, *err;  /* err == out when both are the same file */
    struct log_stream **streams;
    int nstreams, cap;
    /* torch 2.x's --duplicate-std{out,err}-filters: a console line holding any of items also
     * goes, prefixed, to fd (all ranks together). [0] stdout, [1] stderr; fd -1: none. */
    struct log_filter {
        int fd;
        const char *const *items;
        size_t n;
    } filter[2];
    uv_timer_t drain_timer;
    uv_timer_t partial_timer;    /* shows partial lines that went idle (progress bars) */
    bool partial_init;
    void (*on_drained)(struct logs *L, bool complete);
    void *data;
    /* --log-format json: podrun's own lines as JSON objects naming this node and job; the
     * strings are the caller's and may change (a pod's name once discovery found it) */
    bool json;
    const char *json_node, *json_run_id;
};

int logs_init(struct logs *L, uv_loop_t *loop);
/* Creates the pipe for one worker stream. `which` 1 or 2 picks podrun's stdout or stderr for
 * the console (console=false: not shown); file_fd (or -1) gets the raw bytes and is closed with
 * the stream. *child_fd is the write end for the worker; close it after the fork. */
int logs_stream_open(struct logs *L, struct log_stream *s, int which, const char *prefix,
                     bool console, int file_fd, bool keep_tail, int *child_fd);
/* Reads what is in the pipe now without waiting (the stream stays open): lets the agent see a
 * failed worker's last lines before the pipe's own read event comes round. */
void logs_stream_pull(struct log_stream *s);
/* Reads what is left in the pipe without waiting, flushes a partial last line, closes. */
void logs_stream_finish(struct log_stream *s);
/* Drops a finished stream from the logs so its struct can be opened again (a restart); its
 * pipe handle must have finished closing (any later loop iteration). */
void logs_stream_forget(struct log_stream *s);
/* podrun's text about this worker in the worker's own stream (its log file, its prefixed
 * console lines), after the partial line it may have left; not in its tail, which stays the
 * worker's own words. Nothing once the stream is finished. */
void logs_stream_note(struct log_stream *s, const char *text, size_t len);
/* The last lines of the stream (keep_tail streams), not NUL-terminated. */
const char *logs_stream_tail(const struct log_stream *s, size_t *len);

/* Copies console lines of stream `which` (1, 2) holding any of items[0..n) to fd (which the
 * caller keeps open and closes; -1: no copy). items must outlive the logs. */
void logs_set_filter(struct logs *L, int which, int fd, const char *const *items, size_t n);

/* podrun's own messages: "podrun: <text>\n" on stderr, in order with the workers' lines; under
 * --log-format json one object {"time","source":"podrun","node","run_id","msg"} per message. */
void logs_message(struct logs *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* podrun's own text as it is (a report of many lines); under --log-format json one object whose
 * source is "podrun" and whose msg is the whole text. */
void logs_write(struct logs *L, int which, const char *data, size_t len);
/* The same with the source named: "report" (the failure report), "store" (the job store this
 * agent hosts), ... Under the human format the text is written as it is. */
void logs_text(struct logs *L, int which, const char *source, const char *data, size_t len);
/* Switches podrun's own lines to JSON; node and run_id are read at each line (NULL: left out). */
void logs_set_json(struct logs *L, const char *node, const char *run_id);

/* A stream of this worker's is paused because podrun's own output is behind: the worker
 * is blocked in write() by podrun, not hung. */
bool logs_stream_paused(const struct log_stream *s);

/* For each of podrun's stdout and stderr that lost bytes not yet said (logs_say_dropped), a line
 * "podrun: N bytes of worker output could not be written to stdout: REASON\n" into buf
 * (NUL-terminated; its length is returned, 0 if nothing was lost). */
size_t logs_dropped_note(struct logs *L, char *buf, size_t cap);
/* Writes such lines (for losses not said before) on the other stream, where that one still
 * works; true if it wrote one. */
bool logs_say_dropped(struct logs *L);

/* Calls on_drained once both sinks are empty (complete=true) or timeout_ms passed (false). */
void logs_drain(struct logs *L, uint64_t timeout_ms, void (*cb)(struct logs *, bool));
void logs_close(struct logs *L);

/* The longest head of p[0..n) that does not end inside a UTF-8 character: the cut goes before
 * the lead byte of a last character that is not whole. Where the last four bytes hold no lead
 * byte (not UTF-8), or the character is all there is, n. */
size_t logs_utf8_cut(const char *p, size_t n);

/* Expands rank, local_rank, role_name and hostname in a prefix template, as ${name} or $name
 * ($$ is $; an unknown name is kept as written). */
int logs_expand_prefix(const char *tmpl, int rank, int local_rank, const char *role, char *buf,
                       size_t len);

#endif
