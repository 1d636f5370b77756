/* launcher/devices/sysroot.c — one root for /proc, /sys and /dev (see sysroot.h). */
#include "launcher/devices/sysroot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room left for the path under the root: sysfs paths are well under 512 bytes. */
#define SYSROOT_MAX (SYSROOT_PATH_MAX - 512)

static char sysroot_prefix[SYSROOT_MAX];

int sysroot_set(const char *root)
{
    size_t n = root ? strlen(root) : 0;
    while (n > 0 && root[n - 1] == '/')
        n--;
    if (n >= sizeof sysroot_prefix)
        return -ENAMETOOLONG;
    if (n)
        memcpy(sysroot_prefix, root, n);
    sysroot_prefix[n] = '\0';
    return 0;
}

const char *sysroot_get(void)
{
    return sysroot_prefix;
}

static int sysroot_vpath(char *buf, size_t len, const char *fmt, va_list ap)
{
    int n = snprintf(buf, len, "%s", sysroot_prefix);
    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    int m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
    if (m < 0 || (size_t)m >= len - (size_t)n)
        return -ENAMETOOLONG;
    return 0;
}

int sysroot_path(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sysroot_vpath(buf, len, fmt, ap);
    va_end(ap);
    return rc;
}

/* Reads at most len-1 bytes; sysfs and procfs files are small and read in one go. */
static int sysroot_vread(char *buf, size_t len, const char *fmt, va_list ap)
{
    char path[SYSROOT_PATH_MAX];
    int rc = sysroot_vpath(path, sizeof path, fmt, ap);
    if (rc < 0)
        return rc;
    if (len == 0)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t have = 0;
    while (have < len - 1) {
        ssize_t r = read(fd, buf + have, len - 1 - have);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        have += (size_t)r;
    }
    close(fd);
    while (have > 0 && (buf[have - 1] == '\n' || buf[have - 1] == ' ' || buf[have - 1] == '\t'))
        have--;
    buf[have] = '\0';
    return (int)have;
}

int sysroot_read(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sysroot_vread(buf, len, fmt, ap);
    va_end(ap);
    return rc;
}

int sysroot_read_long(long *out, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    int rc = sysroot_vread(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (rc < 0)
        return rc;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (end == buf || *end || errno)
        return -EINVAL;
    *out = v;
    return 0;
}

bool sysroot_exists(const char *fmt, ...)
{
    char path[SYSROOT_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int rc = sysroot_vpath(path, sizeof path, fmt, ap);
    va_end(ap);
    struct stat st;
    return rc == 0 && stat(path, &st) == 0;
}

DIR *sysroot_opendir(const char *fmt, ...)
{
    char path[SYSROOT_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int rc = sysroot_vpath(path, sizeof path, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    return opendir(path);
}
