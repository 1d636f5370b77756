/* tests/unit/launcher/devices/test_shm.c — /dev/shm's size and the warning that names the fix;
 * where this test may mount, a real 16 MiB tmpfs at the fixture's /dev/shm. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/devices/shm.h"
#include "launcher/devices/sysroot.h"
#include "tests/fixtures/machine.h"

static char root[256];

static void test_verdict_table(void)
{
    static const struct {
        int mounted;
        unsigned long long size;
        int rc;
        const char *msg;
    } cases[] = {
        {1, 64ULL << 20, 1, "/dev/shm is 64 MiB: NCCL and DataLoader workers fail"},
        {1, (1ULL << 30) - 1, 1, "/dev/shm is 1023 MiB"},
        {1, 1ULL << 30, 0, ""},
        {1, 32ULL << 30, 0, ""},
        {0, 0, 1, "/dev/shm is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct shm_info s = {.mounted = cases[i].mounted, .size = cases[i].size};
        char msg[512];
        CHECK_EQ_INT(shm_verdict(&s, msg, sizeof msg), cases[i].rc);
        CHECK(strstr(msg, cases[i].msg) == msg);
        if (cases[i].rc)
            CHECK(strstr(msg, "emptyDir volume with medium: Memory mounted at /dev/shm") != NULL);
    }
}

static void test_stat_fixture(void)
{
    sysroot_set(root);
    struct shm_info s;
    CHECK_EQ_INT(shm_stat(&s), 0);
    CHECK(s.mounted);
    CHECK(s.size > 0);
    CHECK(s.avail <= s.size);
    char bare[256];
    fx_root_make(bare, sizeof bare);
    sysroot_set(bare);
    CHECK_EQ_INT(shm_stat(&s), 0);
    CHECK(!s.mounted);
    fx_root_remove(bare);
    sysroot_set(root);
}

/* A 16 MiB tmpfs, as Docker's --shm-size=16m makes. Exits 77 when mounting is not allowed. */
static int small_shm_child(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/dev/shm", root);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", path, "tmpfs", 0, "size=16m") < 0)
        return 77;
    struct shm_info s;
    char msg[512];
    if (shm_stat(&s) != 0 || !s.mounted || s.size != 16ULL << 20)
        return 1;
    if (shm_verdict(&s, msg, sizeof msg) != 1 || strstr(msg, "/dev/shm is 16 MiB") != msg)
        return 2;
    return 0;
}

static void test_small_tmpfs(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(small_shm_child());
    int st;
    waitpid(pid, &st, 0);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
    if (rc == 77) {
        fprintf(stderr, "skip: cannot mount a tmpfs here\n");
        return;
    }
    CHECK_EQ_INT(rc, 0);
}

int main(void)
{
    if (fx_root_make(root, sizeof root) < 0 || fx_machine_dgx(root, NULL) < 0)
        return 1;
    RUN(test_verdict_table);
    RUN(test_stat_fixture);
    RUN(test_small_tmpfs);
    fx_root_remove(root);
    return check_result();
}
