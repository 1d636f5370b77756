/* tests/unit/launcher/devices/test_torchlib.c — which NCCL the workers' torch loads: the python is
 * asked where torch is, the wheel's libraries are found beside it, NCCL's version is read. A
 * shell script plays the python (it answers as python -c would); the fake libnccl.so.2 (on
 * LD_LIBRARY_PATH) plays the loader's NCCL. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/devices/torchlib.h"

extern char **environ;

static char top[64];

static void put(const char *rel, const char *text, int mode)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", top, rel);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    chmod(path, (mode_t)mode);
}

static void dir(const char *rel)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", top, rel);
    CHECK_EQ_INT(mkdir(path, 0755), 0);
}

static void test_version_text(void)
{
    char buf[16];
    torchlib_nccl_version_text(23007, buf, sizeof buf);
    CHECK_EQ_STR(buf, "2.30.7");
    torchlib_nccl_version_text(22803, buf, sizeof buf);
    CHECK_EQ_STR(buf, "2.28.3");
    torchlib_nccl_version_text(2708, buf, sizeof buf);   /* before 2.9: X*1000+Y*100+Z */
    CHECK_EQ_STR(buf, "2.7.8");
}

/* A venv's layout: site/torch, site/nvidia/nccl/lib, site/nvidia/cu13/lib. */
static void test_wheel_libraries_beside_torch(void)
{
    dir("site");
    dir("site/torch");
    dir("site/nvidia");
    dir("site/nvidia/nccl");
    dir("site/nvidia/nccl/lib");
    dir("site/nvidia/cu13");
    dir("site/nvidia/cu13/lib");
    put("site/nvidia/nccl/lib/libnccl.so.2", "", 0644);
    put("site/nvidia/cu13/lib/libcudart.so.13", "", 0644);
    char script[PATH_MAX + 32], py[PATH_MAX], want[PATH_MAX];
    snprintf(script, sizeof script, "#!/bin/sh\necho %s/site/torch\n", top);
    put("python", script, 0755);
    snprintf(py, sizeof py, "%s/python", top);
    struct torchlib tl;
    char err[512] = "";
    CHECK_EQ_INT(torchlib_find(py, environ, &tl, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/site/torch", top);
    CHECK_EQ_STR(tl.torch, want);
    snprintf(want, sizeof want, "%s/site/nvidia/nccl/lib/libnccl.so.2", top);
    CHECK_EQ_STR(tl.nccl, want);
    snprintf(want, sizeof want, "%s/site/nvidia/cu13/lib/libcudart.so.13", top);
    CHECK_EQ_STR(tl.cudart, want);
}

/* A torch without its own NCCL, and a python without torch: the loader's path decides. */
static void test_no_wheel_libraries(void)
{
    dir("bare");
    dir("bare/torch");
    char script[PATH_MAX + 32], py[PATH_MAX];
    snprintf(script, sizeof script, "#!/bin/sh\necho %s/bare/torch\n", top);
    put("python-bare", script, 0755);
    put("python-none", "#!/bin/sh\necho\n", 0755);
    struct torchlib tl;
    char err[512] = "";
    snprintf(py, sizeof py, "%s/python-bare", top);
    CHECK_EQ_INT(torchlib_find(py, environ, &tl, err, sizeof err), 0);
    CHECK(tl.torch[0] == '/');
    CHECK_EQ_STR(tl.nccl, "");
    CHECK_EQ_STR(tl.cudart, "");
    snprintf(py, sizeof py, "%s/python-none", top);
    CHECK_EQ_INT(torchlib_find(py, environ, &tl, err, sizeof err), 0);
    CHECK_EQ_STR(tl.torch, "");
    CHECK_EQ_STR(tl.nccl, "");
}

static void test_python_that_cannot_run_is_named(void)
{
    struct torchlib tl;
    char err[512] = "";
    CHECK_EQ_INT(torchlib_find("/nonexistent/python3", environ, &tl, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "cannot run the workers' python '/nonexistent/python3': No such file or "
                 "directory");
    CHECK_EQ_STR(tl.nccl, "");
}

/* The loader's libnccl.so.2 (the fake): its file and the version it reports. */
static void test_probe_names_file_and_version(void)
{
    char file[PATH_MAX], version[16], err[512] = "";
    CHECK_EQ_INT(torchlib_nccl_probe(NULL, file, sizeof file, version, sizeof version, err,
                                     sizeof err), 0);
    CHECK(file[0] == '/' && strstr(file, "/libnccl.so.2") != NULL);
    CHECK_EQ_STR(version, "2.28.3");
    CHECK_EQ_INT(torchlib_nccl_probe("/nonexistent/libnccl.so.2", file, sizeof file, version,
                                     sizeof version, err, sizeof err), -ENOENT);
    CHECK(strstr(err, "/nonexistent/libnccl.so.2") == err);
}

int main(void)
{
    snprintf(top, sizeof top, "/tmp/podrun-torchlib-XXXXXX");
    if (!mkdtemp(top))
        return 1;
    RUN(test_version_text);
    RUN(test_wheel_libraries_beside_torch);
    RUN(test_no_wheel_libraries);
    RUN(test_python_that_cannot_run_is_named);
    RUN(test_probe_names_file_and_version);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (system(cmd) != 0)
        return 1;
    return check_result();
}
