/* launcher/workers/rundir.c — the run directory (see rundir.h). */
#include "launcher/workers/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/env/jobenv.h"

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. */
static int pathf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pathf(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* 1: path was made now (it is empty), 0: it was there already, or -errno. */
static int mkdir_p(char *path)
{
    /* the parents exist but for the first worker's directory: one call then, not one per level */
    if (mkdir(path, 0755) == 0)
        return 1;
    if (errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -errno;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        int r = mkdir(path, 0755);
        *p = '/';
        if (r < 0 && errno != EEXIST)
            return -errno;
    }
    if (mkdir(path, 0755) == 0)
        return 1;
    return errno == EEXIST ? 0 : -errno;
}

/* A run id as one path component. */
static void path_safe(const char *in, char *out, size_t len)
{
    snprintf(out, len, "%s", in);
    for (char *p = out; *p; p++)
        if (*p == '/' || (p == out && *p == '.'))
            *p = '_';
}

void rundir_path(const struct rundir *d, int lr, const char *file, char *out, size_t len)
{
    if (d->keep)
        pathf(out, len, "%s/%d/%s", d->attempt, lr, file);
    else
        pathf(out, len, "%s/%d.%s", d->attempt, lr, file);
}

static void unlink_rank_files(const struct rundir *d, int lr)
{
    char p[PATH_MAX + 32];
    rundir_path(d, lr, "error.json", p, sizeof p);
    unlink(p);
    rundir_path(d, lr, "heartbeat", p, sizeof p);
    unlink(p);
}

/* Where the private directory goes when tmpdir cannot hold it, in order. */
static const char *const fallbacks[] = {"/tmp", "/dev/shm", "/var/tmp", "/run"};

static int make_private(struct rundir *d, const char *under)
{
    if (pathf(d->base, sizeof d->base, "%s/podrun_XXXXXX", under))
        return -ENAMETOOLONG;
    return mkdtemp(d->base) ? 0 : -errno;
}

/* dir exists (made if missing) and a directory can be made in it, as every attempt does: found
 * now, an unwritable --log-dir costs no attempt, and no restart could mend it. 0 or -errno. */
static int writable(const char *dir)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s", dir);
    int r = mkdir_p(p);
    if (r < 0)
        return r;
    if (pathf(p, sizeof p, "%s/.podrun_XXXXXX", dir))
        return -ENAMETOOLONG;
    if (!mkdtemp(p))
        return -errno;
    rmdir(p);
    return 0;
}

int rundir_open(struct rundir *d, const struct cfg *cfg)
{
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    d->nproc = cfg->nproc_per_node;
    /* DeepSpeed's per-rank files are the front-end's own (jobenv_log_fd) */
    for (int i = 0; i < d->nproc && !jobenv_ds_rank_logs(cfg); i++)
        d->log_files |= cfg->redirect_mask[i] || cfg->tee_mask[i];
    if (cfg->log_dir) {
        d->keep = true;
        int r = pathf(d->base, sizeof d->base, "%s", cfg->log_dir);
        return r ? r : writable(d->base);
    }
    int r = make_private(d, cfg->tmpdir);
    d->tried = cfg->tmpdir;
    d->tried_err = r;
    /* a read-only root (no writable /tmp) is common in hardened pods: look for another place */
    for (size_t i = 0; r && i < sizeof fallbacks / sizeof *fallbacks; i++)
        if (strcmp(fallbacks[i], cfg->tmpdir) && (r = make_private(d, fallbacks[i])) == 0)
            d->fallback = fallbacks[i];
    if (r) {
        snprintf(d->base, sizeof d->base, "%s", cfg->tmpdir);
        return d->tried_err;
    }
    d->own_base = true;
    /* files the user asked for: per-rank logs, or the filtered copies of the console */
    d->keep = d->log_files || cfg->dup_filters[0] || cfg->dup_filters[1];
    return 0;
}

int rundir_attempt(struct rundir *d, const char *run_id, int attempt)
{
    char id[256];
    path_safe(run_id, id, sizeof id);
    if (pathf(d->attempt, sizeof d->attempt, "%s/%s/attempt_%d", d->base, id, attempt))
        return -ENAMETOOLONG;
    char p[PATH_MAX + 16];
    if (!d->keep) { /* one directory, whose files nobody but the agent reads */
        snprintf(p, sizeof p, "%s", d->attempt);
        int r = mkdir_p(p);
        for (int i = 0; r == 0 && i < d->nproc; i++)
            unlink_rank_files(d, i);
        return r < 0 ? r : 0;
    }
    for (int i = 0; i < d->nproc; i++) {
        if (pathf(p, sizeof p, "%s/%d", d->attempt, i))
            return -ENAMETOOLONG;
        int r = mkdir_p(p);
        if (r < 0)
            return r;
        if (r == 0) /* a directory of an earlier run (--log-dir): its files are not this run's */
            unlink_rank_files(d, i);
    }
    return 0;
}

int rundir_log_file(const struct rundir *d, int lr, int stream, int *fd, char *path,
                    size_t plen)
{
    const struct cfg *c = d->cfg;
    bool want = d->log_files ? ((c->redirect_mask[lr] | c->tee_mask[lr]) & stream)
                             : c->log_dir != NULL;
    *fd = -1;
    if (!want || jobenv_ds_rank_logs(c))
        return 0;
    rundir_path(d, lr, stream == 1 ? "stdout.log" : "stderr.log", path, plen);
    *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return *fd < 0 ? -errno : 0;
}

void rundir_remove(struct rundir *d, bool all)
{
    if (d->keep || !d->base[0])
        return;
    if (d->attempt[0]) {
        if (rmdir(d->attempt) < 0 && errno == ENOTEMPTY) {
            for (int i = 0; i < d->nproc; i++)
                unlink_rank_files(d, i); /* a worker's error.json or heartbeat */
            rmdir(d->attempt);
        }
        char *slash = strrchr(d->attempt, '/');
        if (slash) {
            *slash = 0;
            rmdir(d->attempt);
            *slash = '/';
        }
    }
    if (all && d->own_base)
        rmdir(d->base);
}
