/* launcher/devices/torchlib.c — which NCCL (and CUDA runtime) the workers' torch loads (see
 * torchlib.h). */
#include "launcher/devices/torchlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/devices/dl.h"

#define TORCHLIB_ANSWER_MS 15000   /* a cold interpreter on a loaded node, not a hang */

/* Prints torch's package directory, or an empty line; torch itself is not imported. */
static const char torchlib_script[] =
    "import importlib.util as u\n"
    "s = u.find_spec('torch')\n"
    "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n";

/* The libraries a wheel's torch carries, relative to its package directory, in the order its
 * RPATH searches them: CUDA 13 wheels put the runtime in nvidia/cu13, CUDA 12 ones in
 * nvidia/cuda_runtime; NCCL is in nvidia/nccl in both. */
static const char *const torchlib_nccl_paths[] = {"../nvidia/nccl/lib/libnccl.so.2"};
static const char *const torchlib_cudart_paths[] = {"../nvidia/cu13/lib/libcudart.so.13",
                                                    "../nvidia/cuda_runtime/lib/libcudart.so.12"};

static long torchlib_ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Reads the child's stdout until it closes or the deadline passes: 0, or -ETIMEDOUT. */
static int torchlib_read(int fd, char *buf, size_t len)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t used = 0;
    for (;;) {
        long left = TORCHLIB_ANSWER_MS - torchlib_ms_since(&t0);
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -ETIMEDOUT;
        ssize_t n = read(fd, buf + used, len - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used == len - 1)
            break;   /* longer than any path: what fits is read, the rest is not an answer */
    }
    buf[used] = '\0';
    return 0;
}

/* Runs python -c SCRIPT with envp; its first line of stdout in `line`. Its stderr goes nowhere:
 * a warning printed at start-up is not the answer. */
static int torchlib_ask(const char *python, char *const envp[], char *line, size_t len,
                        char *err, size_t errlen)
{
    int p[2], e[2];
    line[0] = '\0';
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(e, O_CLOEXEC) < 0) {   /* carries exec's errno back, closed by a successful exec */
        int r = -errno;
        close(p[0]);
        close(p[1]);
        return r;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(p[1], 1);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 2);
        }
        char *argv[] = {(char *)python, (char *)"-c", (char *)torchlib_script, NULL};
        execvpe(python, argv, envp);
        int why = errno;
        (void)!write(e[1], &why, sizeof why);
        _exit(127);
    }
    int r = pid < 0 ? -errno : 0;
    close(p[1]);
    close(e[1]);
    if (r == 0) {
        r = torchlib_read(p[0], line, len);
        int why = 0;
        if (read(e[0], &why, sizeof why) == (ssize_t)sizeof why) {
            r = why > 0 ? -why : -ENOEXEC;
            snprintf(err, errlen, "cannot run the workers' python '%s': %s", python,
                     strerror(why));
        } else if (r == -ETIMEDOUT) {
            kill(pid, SIGKILL);
            snprintf(err, errlen, "the workers' python '%s' did not say where torch is within "
                     "%d s", python, TORCHLIB_ANSWER_MS / 1000);
        } else if (r < 0) {
            snprintf(err, errlen, "reading the workers' python '%s': %s", python,
                     strerror(-r));
        }
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    close(p[0]);
    close(e[0]);
    if (r == 0)
        line[strcspn(line, "\n")] = '\0';
    return r;
}

/* The first of `rel` (relative to torch's directory) that is a file, into out; "" if none. */
static void torchlib_pick(const char *torch, const char *const *rel, size_t n, char *out,
                          size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        struct stat st;
        int k = snprintf(path, sizeof path, "%s/%s", torch, rel[i]);
        if (k > 0 && (size_t)k < sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            /* the "../" spelled out: the path a reader finds in site-packages */
            char real[PATH_MAX];
            snprintf(out, len, "%s", realpath(path, real) ? real : path);
            return;
        }
    }
}

int torchlib_find(const char *python, char *const envp[], struct torchlib *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    char line[PATH_MAX + 2];
    int r = torchlib_ask(python, envp, line, sizeof line, err, errlen);
    if (r < 0)
        return r;
    if (line[0] != '/')
        return 0;   /* no torch (or a line that is no package directory) */
    if (strlen(line) >= sizeof out->torch)
        return 0;   /* longer than any path */
    memcpy(out->torch, line, strlen(line) + 1);
    torchlib_pick(out->torch, torchlib_nccl_paths,
                  sizeof torchlib_nccl_paths / sizeof *torchlib_nccl_paths, out->nccl,
                  sizeof out->nccl);
    torchlib_pick(out->torch, torchlib_cudart_paths,
                  sizeof torchlib_cudart_paths / sizeof *torchlib_cudart_paths, out->cudart,
                  sizeof out->cudart);
    return 0;
}

void torchlib_nccl_version_text(int code, char *buf, size_t len)
{
    /* NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 on */
    int major = code >= 10000 ? code / 10000 : code / 1000;
    int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
    snprintf(buf, len, "%d.%d.%d", major, minor, code % 100);
}

int torchlib_nccl_probe(const char *path, char *file, size_t flen, char *version, size_t vlen,
                        char *err, size_t errlen)
{
    dl_lib_t lib = {0};
    int (*get_version)(int *) = NULL;
    const dl_sym_t syms[] = {{"ncclGetVersion", NULL, &get_version, false}};
    int r = dl_open(&lib, path ? path : "libnccl.so.2", err, errlen);
    if (r == 0)
        r = dl_bind(&lib, syms, 1, err, errlen);
    if (r < 0 || !get_version) {
        dl_close(&lib);
        return r < 0 ? r : -ENOENT;
    }
    struct link_map *map = NULL;
    snprintf(file, flen, "%s", dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map &&
             map->l_name[0] ? map->l_name : lib.name);
    int code = 0;
    if (get_version(&code) != 0 || code <= 0)
        snprintf(version, vlen, "unknown");
    else
        torchlib_nccl_version_text(code, version, vlen);
    dl_close(&lib);
    return 0;
}
