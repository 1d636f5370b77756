/* sigworker — the worker the failure benchmarks run under podrun and under torchrun.
 *
 * Writes wall-clock times (ns) into $BENCH_DIR, one file per event and process:
 *   start.<pid>   when it started
 *   term.<pid>    when SIGTERM reached it (then it exits 0 at once)
 *   fail          when rank $FAIL_RANK failed (exit 1). Only one worker ever fails: the first
 *                 whose rank matches, once the driver has created $BENCH_DIR/go.
 * A worker started after the failure ends by itself after $FINISH_AFTER seconds, so a restarted
 * job completes. With $DONE set it exits 0 right after starting (the rendezvous benchmark).
 * (Restart counts are not used: torchrun counts restarts per agent, podrun per job.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[2048] = ".";

static void stamp(const char *what, int with_pid)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char path[4096];
    if (with_pid)
        snprintf(path, sizeof path, "%s/%s.%d", dir, what, (int)getpid());
    else
        snprintf(path, sizeof path, "%s/%s", dir, what);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
        fclose(f);
    }
}

static int exists(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

int main(void)
{
    if (getenv("BENCH_DIR"))
        snprintf(dir, sizeof dir, "%s", getenv("BENCH_DIR"));
    const char *rank = getenv("RANK") ? getenv("RANK") : "0";
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    if (getenv("DONE"))
        return 0;
    stamp("start", 1);
    int after_failure = exists("fail");
    const char *fail = getenv("FAIL_RANK");
    if (!after_failure && fail && strcmp(fail, rank) == 0) {
        struct timespec ms = {0, 1000000};
        while (!exists("go"))
            nanosleep(&ms, NULL);
        stamp("fail", 0);
        return 1;
    }
    siginfo_t si;
    if (after_failure && getenv("FINISH_AFTER")) {
        struct timespec d = {atoi(getenv("FINISH_AFTER")), 0};
        if (sigtimedwait(&set, &si, &d) < 0)
            return 0;
    } else {
        sigwaitinfo(&set, &si);
    }
    stamp("term", 1);
    return 0;
}
