/* launcher/workers/stacks.c — the stacks of hung workers before the kill (stacks.h). */
#include "launcher/workers/stacks.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/workers/init.h"

#define STACKS_POLL_MS 10
#define STACKS_RAW_MAX (256 * 1024)   /* of one rank's dump, what the file keeps */

/* Arms faulthandler for the trigger in every Python process of a worker, then hands over to the
 * sitecustomize it hides. Silent: any failure leaves the process as it would be without it. A
 * process that already handles the signal keeps its handler. */
static const char site_py[] =
    "# podrun: lets the agent ask this process for its stacks before it kills a hung worker\n"
    "# (faulthandler on PODRUN_STACKS_SIGNAL, into PODRUN_STACKS_FILE); then runs the\n"
    "# sitecustomize this file hides on sys.path, if there is one.\n"
    "import os, sys\n"
    "def _podrun_arm():\n"
    "    path, sig = os.environ.get('PODRUN_STACKS_FILE'), os.environ.get('PODRUN_STACKS_SIGNAL')\n"
    "    if not path or not sig:\n"
    "        return\n"
    "    try:\n"
    "        import faulthandler, signal\n"
    "        n = int(sig)\n"
    "        if signal.getsignal(n) != signal.SIG_DFL:\n"
    "            return\n"
    "        f = open(path, 'a')\n"
    "        faulthandler.register(n, file=f, all_threads=True)\n"
    "        sys._podrun_stacks_file = f\n"
    "    except Exception:\n"
    "        pass\n"
    "def _podrun_chain():\n"
    "    here = os.path.dirname(os.path.abspath(__file__))\n"
    "    saved = sys.path[:]\n"
    "    mine = sys.modules.pop('sitecustomize', None)\n"
    "    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]\n"
    "    try:\n"
    "        import sitecustomize\n"
    "    except ImportError as e:\n"
    "        if getattr(e, 'name', 'sitecustomize') != 'sitecustomize':\n"
    "            raise\n"
    "        sys.modules['sitecustomize'] = mine\n"
    "    finally:\n"
    "        sys.path[:] = saved\n"
    "_podrun_arm()\n"
    "_podrun_chain()\n";

int stacks_signal(void)
{
    return SIGRTMIN + STACKS_SIGNAL_OFFSET;
}

int stacks_write_site(const char *dir)
{
    char p[PATH_MAX + 32];
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    if (snprintf(p, sizeof p, "%s/sitecustomize.py", dir) >= (int)sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, site_py, sizeof site_py - 1);
    int r = w == (ssize_t)(sizeof site_py - 1) ? 0 : w < 0 ? -errno : -EIO;
    close(fd);
    return r;
}

void stacks_remove_site(const char *dir)
{
    char p[PATH_MAX + 48];
    snprintf(p, sizeof p, "%s/sitecustomize.py", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/__pycache__", dir);
    DIR *d = opendir(p);
    for (struct dirent *e; d && (e = readdir(d));) {
        char f[PATH_MAX + 320];
        if (e->d_name[0] != '.' && snprintf(f, sizeof f, "%s/%s", p, e->d_name) < (int)sizeof f)
            unlink(f);
    }
    if (d)
        closedir(d);
    rmdir(p);
    rmdir(dir);
}

void stacks_init(struct stacks *s, uv_loop_t *loop)
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
}

/* The whole of a small /proc file, NUL-terminated; its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

/* Whether pid catches signal sig (the SigCgt mask of /proc/PID/status). */
static bool catches(pid_t pid, int sig)
{
    char p[64], buf[2048];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    if (read_small(p, buf, sizeof buf) < 0)
        return false;
    const char *c = strstr(buf, "\nSigCgt:");
    unsigned long long mask;
    return c && sscanf(c + 8, "%llx", &mask) == 1 && sig >= 1 && sig <= 64 &&
           (mask >> (sig - 1) & 1);
}

/* What /proc says of one process of a target without ptrace: its state, the syscall it is in
 * (number and first arguments; "running" when none) and the kernel function it sleeps in. */
static void note_native(struct stacks_target *t, pid_t pid, const char *comm, char state)
{
    char p[64], sc[256] = "?", wchan[128] = "?";
    snprintf(p, sizeof p, "/proc/%d/syscall", (int)pid);
    if (read_small(p, sc, sizeof sc) > 0)
        sc[strcspn(sc, "\n")] = 0;
    snprintf(p, sizeof p, "/proc/%d/wchan", (int)pid);
    if (read_small(p, wchan, sizeof wchan) <= 0)
        snprintf(wchan, sizeof wchan, "?");
    /* syscall: "NR arg1 .. arg6 sp pc"; the number and two arguments say enough */
    char shortsc[64];
    int f = 0;
    size_t i = 0;
    for (; sc[i] && i < sizeof shortsc - 1; i++) {
        if (sc[i] == ' ' && ++f == 3)
            break;
        shortsc[i] = sc[i];
    }
    shortsc[i] = 0;
    size_t used = strlen(t->native);
    snprintf(t->native + used, sizeof t->native - used,
             "pid %d (%s) state %c, syscall %s, wchan %s\n", (int)pid, comm, state, shortsc,
             wchan);
}

static off_t size_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : 0;
}

/* One pass over /proc: each process of a target's group is noted, and asked when it catches
 * the trigger. Returns how many were asked. */
static int ask_all(struct stacks *s)
{
    int asked = 0, sig = stacks_signal();
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name), pgrp;
        char comm[64], state;
        if (init_proc_stat(pid, comm, sizeof comm, &state, &pgrp) < 0)
            continue;
        for (int i = 0; i < s->n; i++) {
            struct stacks_target *t = &s->t[i];
            if (t->pgid != pgrp)
                continue;
            note_native(t, pid, comm, state);
            if (catches(pid, sig) && kill(pid, sig) == 0) {
                t->asked++;
                asked++;
            }
        }
    }
    if (d)
        closedir(d);
    return asked;
}

/* Whether s, the first frame's file, lies among installed code (the standard library, site- or
 * dist-packages) rather than the user's. */
static bool installed(const char *file, size_t len)
{
    static const char *const dirs[] = {"/site-packages/", "/dist-packages/", "/lib/python"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        if (memmem(file, len, dirs[i], strlen(dirs[i])))
            return true;
    return false;
}

/* The functions of torch.distributed that wait for peers: a thread in one is the one to name. */
static bool collective(const char *fn, size_t len)
{
    static const char *const names[] = {
        "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "broadcast",
        "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "reduce_scatter",
        "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
        "send", "recv", "init_process_group", "rendezvous"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == len && !memcmp(fn, names[i], len))
            return true;
    return false;
}

struct frame {
    const char *file, *fn;
    size_t flen, fnlen;
    long line;
};

/* `  File "F", line N in FN` */
static bool parse_frame(const char *l, size_t len, struct frame *f)
{
    static const char lead[] = "  File \"";
    if (len < sizeof lead || memcmp(l, lead, sizeof lead - 1))
        return false;
    const char *file = l + sizeof lead - 1, *end = l + len;
    const char *q = memchr(file, '"', (size_t)(end - file));
    if (!q || end - q < 10 || memcmp(q, "\", line ", 8))
        return false;
    char *after;
    long line = strtol(q + 8, &after, 10);
    if (after >= end || end - after < 4 || memcmp(after, " in ", 4))
        return false;
    *f = (struct frame){file, after + 4, (size_t)(q - file), (size_t)(end - after - 4), line};
    return true;
}

int stacks_summary(const char *text, size_t len, char *out, size_t cap)
{
    struct frame first = {0}, where = {0}, best_first = {0}, best_where = {0};
    bool in_block = false, have = false, coll = false, best_coll = false;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct frame f;
        if (parse_frame(p, l, &f) && in_block) {
            if (!first.fn)
                first = f;
            if (!where.fn && !installed(f.file, f.flen))
                where = f;
            coll |= collective(f.fn, f.fnlen);
        } else if (l && p[0] != ' ') {   /* "Thread 0x… (most recent call first):" */
            in_block = true;
            first = where = (struct frame){0};
            coll = false;
        }
        /* the block so far stands if it has a frame and no collective block came before */
        if (in_block && first.fn && (!best_coll || coll)) {
            best_first = first;
            best_where = where.fn ? where : first;
            best_coll = coll;
            have = true;
        }
        p = nl ? nl + 1 : end;
    }
    if (!have)
        return -1;
    const char *base = best_where.file;
    for (const char *c = best_where.file; c < best_where.file + best_where.flen; c++)
        if (*c == '/')
            base = c + 1;
    snprintf(out, cap, "%.*s at %.*s:%ld", (int)best_first.fnlen, best_first.fn,
             (int)(best_where.file + best_where.flen - base), base, best_where.line);
    return 0;
}

/* What the rank's raw file gained since the ask (at most STACKS_RAW_MAX bytes). */
static char *read_dump(const struct stacks_target *t, size_t *len)
{
    *len = 0;
    off_t n = t->size - t->from;
    if (n <= 0)
        return NULL;
    if (n > STACKS_RAW_MAX)
        n = STACKS_RAW_MAX;
    char *buf = malloc((size_t)n + 1);
    int fd = open(t->raw, O_RDONLY | O_CLOEXEC);
    ssize_t got = buf && fd >= 0 ? pread(fd, buf, (size_t)n, t->from) : -1;
    if (fd >= 0)
        close(fd);
    if (got <= 0) {
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    *len = (size_t)got;
    return buf;
}

/* Appends to a growing buffer; a failed allocation only cuts the text. */
struct text {
    char *b;
    size_t n, cap;
};

static void add(struct text *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if (x->n + (size_t)k + 1 > x->cap) {
        size_t cap = (x->cap ? 2 * x->cap : 4096) + (size_t)k;
        char *b = realloc(x->b, cap);
        if (!b)
            return;
        x->b = b;
        x->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(x->b + x->n, x->cap - x->n, fmt, ap);
    va_end(ap);
    x->n += (size_t)k;
}

static void finish(struct stacks *s)
{
    uv_timer_stop(&s->timer);
    uint64_t took = uv_now(s->loop) - s->started;
    struct text x = {0};
    char note[STACKS_NOTE_MAX] = "";
    size_t nn = 0;
    int left = 0;
    for (int i = 0; i < s->n; i++) {
        struct stacks_target *t = &s->t[i];
        t->size = size_of(t->raw);
        size_t dl;
        char *dump = read_dump(t, &dl), sum[320], line[400];
        t->at = x.n;
        add(&x, "--- rank %d (process group %d) ---\n%s", t->rank, (int)t->pgid,
            t->native[0] ? t->native : "no process left\n");
        if (dump)
            add(&x, "%.*s%s", (int)dl, dump, dl && dump[dl - 1] != '\n' ? "\n" : "");
        else
            add(&x, "%s\n", t->asked ? "no Python stack came within the bound"
                                     : "no Python stack: no process catches the trigger");
        t->len = x.n > t->at ? x.n - t->at : 0;
        if (dump && stacks_summary(dump, dl, sum, sizeof sum) == 0)
            snprintf(line, sizeof line, "rank %d was in %s", t->rank, sum);
        else {
            /* the worker itself: its first native line, without the trailing newline */
            size_t k = strcspn(t->native, "\n");
            snprintf(line, sizeof line, "rank %d showed no Python stack; %.*s", t->rank,
                     (int)(k < 300 ? k : 300), t->native[0] ? t->native : "no process left");
        }
        free(dump);
        if (nn + strlen(line) + 2 < sizeof note - 64)
            nn += (size_t)snprintf(note + nn, sizeof note - nn, "%s\n", line);
        else
            left++;
    }
    if (left)
        snprintf(note + nn, sizeof note - nn, "(%d more ranks in the file)\n", left);
    int fd = open(s->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (x.b && write(fd, x.b, x.n) < 0)
            s->file[0] = 0;
        close(fd);
    } else {
        s->file[0] = 0;   /* the caller says so */
    }
    s->busy = false;
    s->done(s->arg, note, x.b ? x.b : "", x.n, took);
    free(x.b);
}

/* Done once every asked group's file grew and then held still for one poll, or at the bound. */
static void on_poll(uv_timer_t *h)
{
    struct stacks *s = h->data;
    bool all = true;
    for (int i = 0; i < s->n; i++) {
        struct stacks_target *t = &s->t[i];
        if (!t->asked)
            continue;
        off_t now = size_of(t->raw);
        t->stable = t->grew && now == t->size;
        t->grew |= now > t->from;
        t->size = now;
        all &= t->stable;
    }
    if (all || uv_now(s->loop) - s->started >= STACKS_BOUND_MS)
        finish(s);
}

int stacks_start(struct stacks *s, struct stacks_target *t, int n, const char *file)
{
    if (s->busy)
        return -EBUSY;
    s->busy = true;
    s->t = t;
    s->n = n;
    snprintf(s->file, sizeof s->file, "%s", file);
    uv_update_time(s->loop);
    s->started = uv_now(s->loop);
    for (int i = 0; i < n; i++) {
        t[i].from = t[i].size = size_of(t[i].raw);
        t[i].grew = t[i].stable = false;
        t[i].asked = 0;
        t[i].native[0] = 0;
    }
    int asked = ask_all(s);
    uv_timer_start(&s->timer, on_poll, asked ? STACKS_POLL_MS : 0, STACKS_POLL_MS);
    return 0;
}

void stacks_close(struct stacks *s)
{
    if (s->loop)
        uv_close((uv_handle_t *)&s->timer, NULL);
}
