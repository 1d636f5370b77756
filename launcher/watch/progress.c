/* launcher/watch/progress.c — the trainer's progress file (progress.h). */
#include "launcher/watch/progress.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/base/common.h"

int progress_init(struct progress *p, const char *path)
{
    memset(p, 0, sizeof *p);
    p->last = -1;
    if (!path || !*path)
        return 0;
    char cwd[PATH_MAX];
    int n = path[0] == '/' || !getcwd(cwd, sizeof cwd)
                ? snprintf(p->path, sizeof p->path, "%s", path)
                : snprintf(p->path, sizeof p->path, "%s/%s", cwd, path);
    if (n < 0 || (size_t)n >= sizeof p->path) {
        p->path[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

/* The number in text[0..len): blanks around one run of digits, at most 2^62; -1 otherwise. */
static long long parse(const char *text, size_t len)
{
    size_t i = 0, end = len;
    while (i < end && isspace((unsigned char)text[i]))
        i++;
    while (end > i && isspace((unsigned char)text[end - 1]))
        end--;
    if (i == end || end - i > 19)
        return -1;
    long long v = 0;
    for (size_t k = i; k < end; k++) {
        if (!isdigit((unsigned char)text[k]))
            return -1;
        v = v * 10 + (text[k] - '0');
    }
    return v <= (1LL << 62) ? v : -1;
}

long long progress_read(struct progress *p, char *err, size_t cap)
{
    err[0] = '\0';
    if (!p->path[0])
        return -1;
    char buf[PROGRESS_FILE_MAX + 1];
    int fd = open(p->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno != ENOENT && !p->said)
            snprintf(err, cap, "cannot read the progress file %s: %s; give --progress-file a "
                     "file podrun can read", p->path, strerror(errno));
        p->said |= errno != ENOENT;
        return -1;
    }
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n == 0)
        return -1;   /* written but not yet filled: no value, as before the first one */
    long long v = n > 0 && n <= PROGRESS_FILE_MAX ? parse(buf, (size_t)n) : -1;
    if (v < 0) {
        if (!p->said)
            snprintf(err, cap, "the progress file %s does not hold a step number (%s); the "
                     "trainer should write only the step or checkpoint iteration, in decimal",
                     p->path, n < 0 ? strerror(errno)
                                    : n > PROGRESS_FILE_MAX ? "it is longer than 64 bytes"
                                                            : "it holds other text");
        p->said = true;
        return -1;
    }
    p->said = false;
    p->last = v;
    p->read_at = podrun_time_epoch();
    return v;
}

long long progress_last(const struct progress *p)
{
    return p->last;
}

int progress_env(const struct progress *p, char *var, size_t cap)
{
    if (!p->path[0])
        return 0;
    snprintf(var, cap, "PODRUN_PROGRESS_FILE=%s", p->path);
    return 1;
}
