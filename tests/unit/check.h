/* tests/unit/check.h — the few macros podrun's C unit tests share.
 * A test file defines test functions, lists them in main with RUN(), and returns check_result(). */
#ifndef PODRUN_TESTS_CHECK_H
#define PODRUN_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        check_count++;                                                               \
        if (!(cond)) {                                                               \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                \
    do {                                                                                  \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                   \
        check_count++;                                                                    \
        if (check_a_ != check_b_) {                                                       \
            check_failures++;                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__,   \
                    __LINE__, #a, #b, check_a_, check_b_);                                \
        }                                                                                 \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                \
    do {                                                                                  \
        const char *check_a_ = (a), *check_b_ = (b);                                      \
        check_count++;                                                                    \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                  \
            check_failures++;                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n",         \
                    __FILE__, __LINE__, #a, #b, check_a_ ? check_a_ : "(null)",           \
                    check_b_ ? check_b_ : "(null)");                                      \
        }                                                                                 \
    } while (0)

#define RUN(fn)                                                  \
    do {                                                         \
        int check_before_ = check_failures;                      \
        fn();                                                    \
        fprintf(stderr, "%s %s\n", check_failures == check_before_ ? "ok  " : "FAIL", #fn); \
    } while (0)

static inline int check_result(void)
{
    fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
