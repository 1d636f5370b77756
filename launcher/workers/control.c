/* launcher/workers/control.c — what a worker asks of the job (see control.h). */
#include "launcher/workers/control.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/base/common.h"

/* The file's first CONTROL_MAX bytes, NUL-terminated; its length, or -1 when there is none. */
static ssize_t slurp(const char *path, char *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t r;
    while (len < CONTROL_MAX && (r = read(fd, buf + len, CONTROL_MAX - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* "<reason>; <what>: <words>", cut to the record's bound. */
static void add_reason(rdzv_failure_t *f, const char *what, const char *words)
{
    char r[RDZV_REASON_MAX];
    sfmt(r, sizeof r, "%s%s%s%s%s", f->reason, f->reason[0] ? "; " : "", what,
         words[0] ? ": " : "", words);
    memcpy(f->reason, r, sizeof r);
}

int control_apply(const char *path, rdzv_failure_t *f, char *bad, size_t badcap)
{
    char buf[CONTROL_MAX + 1];
    if (badcap)
        bad[0] = '\0';
    if (slurp(path, buf) < 0)
        return 0;
    int asked = 0;
    for (char *line = buf, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        line += strspn(line, " \t\r");
        size_t w = strcspn(line, " \t\r");
        char *words = line + w + strspn(line + w, " \t");
        words[strcspn(words, "\r")] = '\0';
        if (w == 4 && strncmp(line, "stop", 4) == 0 && !(asked & CONTROL_STOP)) {
            asked |= CONTROL_STOP;
            if (!f->fatal)
                f->fatal = RDZV_FATAL_ASKED;
            add_reason(f, "asked not to retry", words);
        } else if (w == 7 && strncmp(line, "exclude", 7) == 0 && !(asked & CONTROL_EXCLUDE)) {
            asked |= CONTROL_EXCLUDE;
            f->exclude = 1;
            add_reason(f, "asked to leave its node out", words);
        } else if (w && badcap && !bad[0]) {
            sfmt(bad, badcap, "%s", line);
        }
    }
    return asked;
}
