/* launcher/devices/cpuset.c — CPU sets in the forms the kernel and NVML write them (pure). */
#include "launcher/devices/cpuset.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>

/* One decimal number at *p (no sign); advances *p. */
static int cpuset_number(const char **p, long *out)
{
    if (!isdigit((unsigned char)**p))
        return -EINVAL;
    long v = 0;
    while (isdigit((unsigned char)**p)) {
        if (v > (long)CPU_SETSIZE)
            return -ERANGE;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    if (v >= CPU_SETSIZE)
        return -ERANGE;
    *out = v;
    return 0;
}

static void cpuset_skip_space(const char **p)
{
    while (isspace((unsigned char)**p))
        (*p)++;
}

int cpuset_parse(const char *text, cpu_set_t *out)
{
    CPU_ZERO(out);
    const char *p = text;
    cpuset_skip_space(&p);
    if (!*p)
        return 0;
    for (;;) {
        long lo, hi;
        int rc = cpuset_number(&p, &lo);
        if (rc < 0)
            return rc;
        hi = lo;
        if (*p == '-') {
            p++;
            if ((rc = cpuset_number(&p, &hi)) < 0)
                return rc;
            if (hi < lo)
                return -EINVAL;
        }
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, out);
        cpuset_skip_space(&p);
        if (!*p)
            return 0;
        if (*p != ',')
            return -EINVAL;
        p++;
        cpuset_skip_space(&p);
    }
}

int cpuset_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return -ENOSPC;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
            end++;
        int n = end == c ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", c)
                         : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, end);
        if (n < 0 || (size_t)n >= len - used) {
            buf[used] = '\0';
            return -ENOSPC;
        }
        used += (size_t)n;
        c = end;
    }
    return 0;
}

void cpuset_from_mask(const unsigned long *mask, size_t words, cpu_set_t *out)
{
    const size_t bits = sizeof(unsigned long) * CHAR_BIT;
    CPU_ZERO(out);
    for (size_t w = 0; w < words; w++)
        for (size_t b = 0; b < bits; b++)
            if ((mask[w] >> b) & 1UL) {
                size_t cpu = w * bits + b;
                if (cpu < CPU_SETSIZE)
                    CPU_SET(cpu, out);
            }
}

int cpuset_first(const cpu_set_t *set)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set))
            return c;
    return -1;
}
