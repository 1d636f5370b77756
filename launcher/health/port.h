/* launcher/health/port.h — what the health port counts (httpd.c keeps it, counters.c serves it). */
#ifndef PODRUN_LAUNCHER_HEALTH_PORT_H
#define PODRUN_LAUNCHER_HEALTH_PORT_H

#include <stddef.h>
#include <stdint.h>

struct httpd_stats {
    uint64_t accepted;      /* connections taken */
    uint64_t answered[6];   /* answers by class: [2] 2xx, [4] 4xx, [5] 5xx */
    uint64_t busy;          /* closed at once: max_conns were open */
    uint64_t bad;           /* not an HTTP request, or over max_request */
    uint64_t timeouts;      /* closed at timeout_ms */
    size_t open;            /* open now */
};

#endif
