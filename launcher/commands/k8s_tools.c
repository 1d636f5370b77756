/* launcher/commands/k8s_tools.c — `podrun k8s`'s output: k8s_tools.py's stdout, byte for byte
 * (launcher/commands/k8s_tools.h). Pure: a pod table in, text out. */
#include "launcher/commands/k8s_tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/text.h"

/* The command's whole stdout, or -ENOSPC (and "" in buf) when it does not fit. */
static int tools_end(textbuf_t *o)
{
    if (o->cut) {
        if (o->cap)
            o->s[0] = '\0';
        return -ENOSPC;
    }
    return (int)o->len;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The IPs of the pods whose k8s_tools status is `phase`, sorted as Python sorts strings (by
 * code point, which for these ASCII strings is strcmp). Missing IPs are "" and sort first, as
 * Python 2 sorts None before any string. Returns the count, or -ENOMEM. */
static long phase_ips(const struct k8s_pods *t, const char *phase, const char ***out)
{
    const char **ips = malloc((t->n ? t->n : 1) * sizeof *ips);
    if (!ips)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(k8s_pod_status(t->pods[i]), phase) == 0)
            ips[n++] = t->pods[i]->ip;
    qsort(ips, n, sizeof *ips, cmp_str);
    *out = ips;
    return (long)n;
}

static int join_ips(const struct k8s_pods *t, const char *phase, const char *port, char *buf,
                    size_t cap)
{
    const char **ips;
    long n = phase_ips(t, phase, &ips);
    if (n < 0)
        return (int)n;
    textbuf_t o = text_start(buf, cap);
    int rc = 0;
    for (long i = 0; i < n && !rc; i++) {
        if (!ips[i][0])
            rc = -ENODATA;
        else if (port)
            text_printf(&o, "%s%s:%s", i ? "," : "", ips[i], port);
        else
            text_printf(&o, "%s%s", i ? "," : "", ips[i]);
    }
    free(ips);
    text_printf(&o, "\n");
    if (rc && cap)
        buf[0] = '\0';
    return rc ? rc : tools_end(&o);
}

int k8s_tools_fetch_ips(const struct k8s_pods *t, const char *phase, char *buf, size_t cap)
{
    return join_ips(t, phase ? phase : "Running", NULL, buf, cap);
}

int k8s_tools_fetch_endpoints(const struct k8s_pods *t, const char *port, char *buf,
                              size_t cap)
{
    return join_ips(t, "Running", port ? port : "", buf, cap);
}

int k8s_tools_fetch_id(const struct k8s_pods *t, const char *local_ip, char *buf, size_t cap)
{
    const char **ips;
    long n = phase_ips(t, "Running", &ips);
    if (n < 0)
        return (int)n;
    long id = -1;
    for (long i = 0; i < n && id < 0 && local_ip && local_ip[0]; i++)
        if (strcmp(ips[i], local_ip) == 0)
            id = i;
    free(ips);
    textbuf_t o = text_start(buf, cap);
    if (id < 0)
        text_printf(&o, "None\n");
    else
        text_printf(&o, "%ld\n", id);
    return tools_end(&o);
}

int k8s_tools_count_pods_by_phase(const struct k8s_pods *t, const char *phase, char *buf,
                                  size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += strcmp(k8s_pod_status(t->pods[i]), phase) == 0;
    textbuf_t o = text_start(buf, cap);
    text_printf(&o, "%zu\n", n);
    return tools_end(&o);
}

int k8s_tools_containers_all_ready(const struct k8s_pods *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (!t->pods[i]->containers_ready)
            return 0;
    return 1;
}

int k8s_tools_wait_running_header(const char *selector, const char *desired, char *buf,
                                  size_t cap)
{
    textbuf_t o = text_start(buf, cap);
    text_printf(&o, "label selector: %s, desired: %s\n", selector, desired);
    return tools_end(&o);
}

int k8s_tools_wait_running_progress(size_t count, char *buf, size_t cap)
{
    textbuf_t o = text_start(buf, cap);
    text_printf(&o, "current cnt: %zu sleep for 5 seconds...\n", count);
    return tools_end(&o);
}

int k8s_tools_wait_ready_header(const char *selector, char *buf, size_t cap)
{
    textbuf_t o = text_start(buf, cap);
    text_printf(&o, "label selector: %s, wait all containers ready\n", selector);
    return tools_end(&o);
}

int k8s_tools_wait_ready_progress(char *buf, size_t cap)
{
    textbuf_t o = text_start(buf, cap);
    text_printf(&o, "not all containers ready, sleep for 5 seconds...\n");
    return tools_end(&o);
}
