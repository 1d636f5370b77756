/* launcher/devices/sysroot.h — the one root under which podrun reads /proc, /sys and /dev.
 *
 * Every path the device modules read goes through here, so a test (or a diagnosis run on a copy
 * of another machine's tree) points the whole discovery at a fixture directory with one call.
 * The root is process-wide: it describes the machine, which is one per process. The default is
 * "/", i.e. paths are used as written.
 *
 * Functions return 0 (or a length) on success and a negative errno on failure; none prints. */
#ifndef PODRUN_DEVICES_SYSROOT_H
#define PODRUN_DEVICES_SYSROOT_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>

#define SYSROOT_PATH_MAX 4096

/* Sets the root. NULL, "" and "/" mean the real root. Trailing slashes are dropped.
 * -ENAMETOOLONG when the root leaves no room for paths under it; the old root then stays. */
int sysroot_set(const char *root);

/* The root as a prefix to put before an absolute path: "" for the real root. */
const char *sysroot_get(void);

/* Writes root + the formatted absolute path into buf. -ENAMETOOLONG if it does not fit. */
int sysroot_path(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reads a small file under the root into buf (NUL-terminated, at most len-1 bytes), without its
 * trailing whitespace. Returns the length kept, or -errno (-ENOENT when absent; sysfs attributes
 * that have no value, such as an empty GID slot's type, fail with -EINVAL). */
int sysroot_read(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reads a file holding one decimal integer (sysfs style, e.g. "numa_node" = "-1\n").
 * -EINVAL when the text is not an integer. */
int sysroot_read_long(long *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether the path exists under the root (any file type; a dangling link counts as absent). */
bool sysroot_exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* opendir() of the path under the root; NULL with errno set on failure. */
DIR *sysroot_opendir(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
