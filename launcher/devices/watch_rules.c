/* launcher/devices/watch_rules.c — the pure judgements of the checks during a run. */
#include "launcher/devices/watch_rules.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The Xids NVIDIA's DCGM health watches and the resiliency tools (NVRx, the cloud node-problem
 * detectors) treat as the node's, not the application's: the GPU needs a reset or a drain. */
static const struct {
    unsigned xid;
    const char *what;
} critical[] = {
    {48, "double-bit ECC error"},
    {62, "internal micro-controller halt"},
    {63, "ECC page retirement or row remapping recorded"},
    {64, "ECC page retirement or row remapping failed"},
    {74, "NVLink error"},
    {79, "fallen off the bus"},
    {92, "high single-bit ECC error rate"},
    {94, "contained ECC error"},
    {95, "uncontained ECC error"},
    {119, "GSP RPC timeout"},
    {120, "GSP error"},
    {140, "unrecovered ECC error"},
};

const char *watch_xid_critical(unsigned long long xid)
{
    for (size_t i = 0; i < sizeof critical / sizeof *critical; i++)
        if (critical[i].xid == xid)
            return critical[i].what;
    return NULL;
}

int watch_ib_state(const char *text)
{
    char *end;
    if (!text || !isdigit((unsigned char)text[0]))
        return -1;
    long v = strtol(text, &end, 10);
    if (*end != ':' && *end != '\0')
        return -1;
    return v >= 0 && v <= 5 ? (int)v : -1;
}

const char *watch_ib_state_name(const char *text)
{
    const char *c = strchr(text, ':');
    if (!c)
        return text;
    for (c++; *c == ' '; c++)
        ;
    return c;
}

bool watch_if_up(const char *operstate)
{
    return strcmp(operstate, "up") == 0 || strcmp(operstate, "unknown") == 0;
}

/* One entry "name[:port]" (len bytes) against the device. */
static bool entry_selects(const char *e, size_t len, bool exact, const char *name, int port)
{
    const char *colon = memchr(e, ':', len);
    size_t nl = colon ? (size_t)(colon - e) : len;
    if (nl == 0)
        return false;
    if (exact ? strlen(name) != nl || strncmp(name, e, nl) != 0 : strncmp(name, e, nl) != 0)
        return false;
    return !colon || port == 0 || atoi(colon + 1) == port;
}

bool watch_nccl_selects(const char *spec, const char *name, int port)
{
    if (!spec || !*spec)
        return true;
    bool invert = *spec == '^';
    spec += invert;
    bool exact = *spec == '=';
    spec += exact;
    bool hit = false;
    for (const char *e = spec; *e && !hit;) {
        size_t len = strcspn(e, ",");
        hit = entry_selects(e, len, exact, name, port);
        e += len + (e[len] == ',');
    }
    return invert ? !hit : hit;
}
