/* tests/unit/launcher/test_rundir.c — the run directory: a private base under tmpdir removed at
 * the end, --log-dir kept, rank directories per attempt without the last attempt's files, log
 * files for exactly the streams asked for. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/frontends/frontend.h"
#include "launcher/workers/rundir.h"

static char tmp[] = "/tmp/podrun_rundir_test_XXXXXX";
static char err[512];

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* A finalized config from these flags, with TMPDIR the test's own directory. */
static void config(struct cfg *c, int argc, char **argv)
{
    char tmpdir[64];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
    char *env[] = {tmpdir, NULL};
    cfg_init(c);
    CHECK_EQ_INT(frontend_load(&fe_podrun, c, argc, argv, env, err, sizeof err), 0);
    CHECK_EQ_INT(cfg_finalize(c, 4, 0, err, sizeof err), 0);
}

static void test_private_base_removed(void)
{
    static char *argv[] = {"podrun", "--nproc-per-node", "2", "p", NULL};
    struct cfg c;
    struct rundir d;
    config(&c, 4, argv);
    CHECK_EQ_INT(rundir_open(&d, &c), 0);
    CHECK(strncmp(d.base, tmp, strlen(tmp)) == 0 && exists(d.base));
    CHECK(d.own_base && !d.keep && !d.log_files);
    CHECK_EQ_INT(rundir_attempt(&d, "job/1", 0), 0);
    char p[PATH_MAX + 32];
    rundir_path(&d, 1, "error.json", p, sizeof p);
    /* the id is one component; nothing kept: the ranks' files side by side */
    CHECK(strstr(p, "/job_1/attempt_0/1.error.json") != NULL);
    CHECK(exists(d.attempt));
    /* a file left by the attempt is gone when the next one starts */
    close(open(p, O_WRONLY | O_CREAT, 0644));
    CHECK(exists(p));
    CHECK_EQ_INT(rundir_attempt(&d, "job/1", 0), 0);
    CHECK(!exists(p));
    int fd = 7;
    CHECK_EQ_INT(rundir_log_file(&d, 0, 1, &fd, p, sizeof p), 0);
    CHECK_EQ_INT(fd, -1); /* nothing asked for log files */
    /* what a failed worker leaves goes with the directory */
    rundir_path(&d, 1, "error.json", p, sizeof p);
    close(open(p, O_WRONLY | O_CREAT, 0644));
    rundir_path(&d, 0, "heartbeat", p, sizeof p);
    close(open(p, O_WRONLY | O_CREAT, 0644));
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s", d.base);
    rundir_remove(&d, true);
    CHECK(!exists(base));
    cfg_free(&c);
}

static void test_log_files_asked_for(void)
{
    static char *argv[] = {"podrun", "--nproc-per-node", "2", "--tee", "1:2", "p", NULL};
    struct cfg c;
    struct rundir d;
    config(&c, 6, argv);
    CHECK_EQ_INT(rundir_open(&d, &c), 0);
    CHECK(d.log_files && d.keep);
    CHECK_EQ_INT(rundir_attempt(&d, "j", 3), 0);
    int fd;
    char p[PATH_MAX + 32];
    CHECK_EQ_INT(rundir_log_file(&d, 1, 2, &fd, p, sizeof p), 0);
    CHECK(fd >= 0 && strstr(p, "/j/attempt_3/1/stderr.log"));
    close(fd);
    CHECK_EQ_INT(rundir_log_file(&d, 1, 1, &fd, p, sizeof p), 0);
    CHECK_EQ_INT(fd, -1); /* rank 1's stdout was not named */
    CHECK_EQ_INT(rundir_log_file(&d, 0, 2, &fd, p, sizeof p), 0);
    CHECK_EQ_INT(fd, -1);
    rundir_path(&d, 0, "error.json", p, sizeof p);
    CHECK(strstr(p, "/j/attempt_3/0/error.json") != NULL); /* kept: torchrun's layout */
    rundir_remove(&d, true); /* kept: the files were asked for */
    CHECK(exists(d.attempt));
    cfg_free(&c);
}

static void test_log_dir_kept(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/logs", tmp);
    char *argv[] = {"podrun", "--log-dir", dir, "p", NULL};
    struct cfg c;
    struct rundir d;
    config(&c, 4, argv);
    CHECK_EQ_INT(rundir_open(&d, &c), 0);
    CHECK(!d.own_base && d.keep);
    CHECK(exists(dir));   /* made, and tried, before any attempt: the try leaves nothing */
    CHECK(rmdir(dir) == 0);
    CHECK_EQ_INT(rundir_open(&d, &c), 0);
    CHECK_EQ_INT(rundir_attempt(&d, "none", 0), 0);
    int fd;
    char p[PATH_MAX + 32];
    CHECK_EQ_INT(rundir_log_file(&d, 0, 1, &fd, p, sizeof p), 0);
    CHECK(fd >= 0); /* --log-dir alone: both streams */
    close(fd);
    rundir_remove(&d, true);
    CHECK(exists(p));
    cfg_free(&c);
    /* a --log-dir nothing can be written in is an error of rundir_open, before any attempt */
    char file[128], under[160];
    snprintf(file, sizeof file, "%s/file", tmp);
    close(open(file, O_WRONLY | O_CREAT, 0644));
    snprintf(under, sizeof under, "%s/logs", file);
    char *argv3[] = {"podrun", "--log-dir", under, "p", NULL};
    config(&c, 4, argv3);
    CHECK_EQ_INT(rundir_open(&d, &c), -ENOTDIR);
    CHECK_EQ_STR(d.base, under);
    cfg_free(&c);
    /* a TMPDIR that cannot hold the base: the first writable fallback does, and why is kept
     * (a place where none can is tests/integration/test_rundir.py's) */
    char *argv2[] = {"podrun", "p", NULL};
    char *env[] = {"TMPDIR=/proc/no/such/dir", NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_load(&fe_podrun, &c, 2, argv2, env, err, sizeof err), 0);
    CHECK_EQ_INT(cfg_finalize(&c, 4, 0, err, sizeof err), 0);
    CHECK_EQ_INT(rundir_open(&d, &c), 0);
    CHECK(d.own_base && d.fallback && strcmp(d.fallback, "/tmp") == 0);
    CHECK_EQ_INT(d.tried_err, -ENOENT);
    CHECK(strncmp(d.base, "/tmp/podrun_", 12) == 0);
    rundir_remove(&d, true);
    CHECK(!exists(d.base));
    cfg_free(&c);
}

int main(void)
{
    if (!mkdtemp(tmp))
        return 1;
    RUN(test_private_base_removed);
    RUN(test_log_files_asked_for);
    RUN(test_log_dir_kept);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return check_result();
}
