/* launcher/devices/shm.c — whether /dev/shm is large enough (see shm.h). */
#include "launcher/devices/shm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "launcher/devices/sysroot.h"

int shm_stat(struct shm_info *out)
{
    memset(out, 0, sizeof *out);
    char path[SYSROOT_PATH_MAX];
    int rc = sysroot_path(path, sizeof path, "/dev/shm");
    if (rc < 0)
        return rc;
    struct statvfs st;
    if (statvfs(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    out->mounted = true;
    out->size = (uint64_t)st.f_blocks * st.f_frsize;
    out->avail = (uint64_t)st.f_bavail * st.f_frsize;
    return 0;
}

int shm_verdict(const struct shm_info *s, char *msg, size_t len)
{
    static const char fix[] =
        "give the pod an emptyDir volume with medium: Memory mounted at /dev/shm (docker: "
        "--shm-size=1g or --ipc=host)";
    if (!s->mounted) {
        snprintf(msg, len, "/dev/shm is missing: NCCL and DataLoader workers need shared memory; %s",
                 fix);
        return 1;
    }
    if (s->size >= SHM_MIN_BYTES) {
        if (len)
            msg[0] = '\0';
        return 0;
    }
    snprintf(msg, len, "/dev/shm is %llu MiB: NCCL and DataLoader workers fail with \"No space "
                       "left on device\" or \"unhandled system error\" below 1 GiB; %s",
             (unsigned long long)(s->size >> 20), fix);
    return 1;
}
