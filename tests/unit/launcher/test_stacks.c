/* tests/unit/launcher/test_stacks.c — the one line per rank read from faulthandler's text: the
 * thread in a collective over the main thread, the user's frame over installed code, several
 * processes in one file, and text with no frame. */
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/workers/stacks.h"

static char out[320];

static int sum(const char *t)
{
    out[0] = 0;
    return stacks_summary(t, strlen(t), out, sizeof out);
}

static void test_main_thread_is_the_last(void)
{
    /* faulthandler lists the newest thread first: the main thread comes last */
    CHECK_EQ_INT(sum("Thread 0x00007f01 (most recent call first):\n"
                     "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
                     "  File \"/app/loader.py\", line 12 in fill\n"
                     "\n"
                     "Current thread 0x00007f00 (most recent call first):\n"
                     "  File \"/app/train.py\", line 40 in step\n"
                     "  File \"/app/train.py\", line 77 in <module>\n"), 0);
    CHECK_EQ_STR(out, "step at train.py:40");
}

static void test_collective_thread_wins(void)
{
    CHECK_EQ_INT(sum("Thread 0x1 (most recent call first):\n"
                     "  File \"/v/lib/python3.11/site-packages/torch/distributed/"
                     "distributed_c10d.py\", line 2050 in all_reduce\n"
                     "  File \"/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py\","
                     " line 81 in wrapper\n"
                     "  File \"/app/train.py\", line 88 in step\n"
                     "\n"
                     "Current thread 0x2 (most recent call first):\n"
                     "  File \"/app/train.py\", line 9 in <module>\n"), 0);
    /* the function is the innermost frame; the place is the user's code that called it */
    CHECK_EQ_STR(out, "all_reduce at train.py:88");
}

static void test_installed_only_keeps_the_innermost(void)
{
    CHECK_EQ_INT(sum("Stack (most recent call first):\n"
                     "  File \"/usr/lib/python3/dist-packages/torch/x.py\", line 5 in barrier\n"),
                 0);
    CHECK_EQ_STR(out, "barrier at x.py:5");
}

static void test_no_frame(void)
{
    CHECK_EQ_INT(sum(""), -1);
    CHECK_EQ_INT(sum("Current thread 0x1 (most recent call first):\n  <no Python frame>\n"), -1);
    CHECK_EQ_INT(sum("  File \"/a.py\", line 3 in f\n"), -1);   /* no header: not faulthandler's */
    CHECK_EQ_INT(sum("Stack (most recent call first):\n  File \"/a.py\", line x in f\n"), -1);
}

int main(void)
{
    RUN(test_main_thread_is_the_last);
    RUN(test_collective_thread_wins);
    RUN(test_installed_only_keeps_the_innermost);
    RUN(test_no_frame);
    return check_result();
}
