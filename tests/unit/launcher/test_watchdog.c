/* tests/unit/launcher/test_watchdog.c — the hang watchdog on a real loop: a silent worker is
 * hung after the timeout, one that touches its heartbeat file or writes is not, and a worker no
 * longer watched is left alone. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "tests/unit/check.h"
#include "launcher/frontends/frontend.h"
#include "launcher/watch/watchdog.h"

static char tmp[] = "/tmp/podrun_watchdog_test_XXXXXX";
static char err[512];
static uv_loop_t *loop;
static struct log_stream streams[6];
static struct rundir dir;
static int hung[3], watched[3] = {1, 1, 1};
static char reason[128];

static bool watching(void *arg, int lr)
{
    (void)arg;
    return watched[lr];
}

static void on_hung(void *arg, int lr, const char *why)
{
    (void)arg;
    hung[lr]++;
    snprintf(reason, sizeof reason, "%s", why);
}

/* Worker 1 touches its heartbeat file, worker 2 "writes" (its stream's last read moves). */
static void on_life(uv_timer_t *t)
{
    char p[PATH_MAX + 32];
    rundir_path(&dir, 1, "heartbeat", p, sizeof p);
    close(open(p, O_WRONLY | O_CREAT, 0644));
    utimensat(AT_FDCWD, p, NULL, 0);
    streams[2 * 2 + 1].last_ms = uv_now(t->loop);
}

static void on_end(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void test_hang(void)
{
    static char *argv[] = {"podrun", "--nproc-per-node", "3", "p", NULL};
    struct cfg c;
    char tmpdir[64];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
    char *env[] = {tmpdir, NULL};
    cfg_init(&c);
    CHECK_EQ_INT(frontend_load(&fe_podrun, &c, 4, argv, env, err, sizeof err), 0);
    CHECK_EQ_INT(cfg_finalize(&c, 4, 0, err, sizeof err), 0);
    CHECK_EQ_INT(rundir_open(&dir, &c), 0);
    CHECK_EQ_INT(rundir_attempt(&dir, "w", 0), 0);

    struct watchdog off;
    CHECK_EQ_INT(watchdog_init(&off, loop, 3, 0), 0);
    CHECK(off.timers == NULL);
    watchdog_arm(&off, 0); /* off: nothing happens */

    struct watchdog w;
    CHECK_EQ_INT(watchdog_init(&w, loop, 3, 400), 0);
    w.streams = streams;
    w.dir = &dir;
    w.watching = watching;
    w.hung = on_hung;
    for (int i = 0; i < 6; i++)
        streams[i].last_ms = uv_now(loop);
    for (int i = 0; i < 3; i++)
        watchdog_arm(&w, i);
    uv_timer_t life, end;
    uv_timer_init(loop, &life);
    uv_timer_init(loop, &end);
    uv_timer_start(&life, on_life, 20, 20);
    uv_timer_start(&end, on_end, 1000, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(hung[0], 1);
    CHECK_EQ_INT(hung[1], 0);
    CHECK_EQ_INT(hung[2], 0);
    CHECK_EQ_STR(reason, "hang: no output or heartbeat for 0.4s");
    /* a worker that is not watched any more is not declared hung */
    uv_timer_stop(&life);
    watched[1] = 0;
    uv_timer_start(&end, on_end, 900, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(hung[1], 0);
    CHECK_EQ_INT(hung[2], 1); /* silent now */
    watchdog_disarm_all(&w);
    watchdog_close(&w);
    uv_close((uv_handle_t *)&life, NULL);
    uv_close((uv_handle_t *)&end, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    watchdog_free(&w);
    rundir_remove(&dir, true);
    cfg_free(&c);
}

int main(void)
{
    if (!mkdtemp(tmp))
        return 1;
    loop = uv_default_loop();
    RUN(test_hang);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
    rmdir(tmp);
    return check_result();
}
