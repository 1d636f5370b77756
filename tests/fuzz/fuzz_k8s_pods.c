/* tests/fuzz/fuzz_k8s_pods.c — the Kubernetes pod JSON parser (launcher/discover/k8s_pods.c).
 *
 * The input is read three ways, as the watcher reads what the API server sends: as a PodList
 * page, then line by line as watch events applied to the table that page filled, and as a Status.
 * Every order and every k8s_tools formatter then runs over the resulting table. No input may
 * crash, leak, read out of bounds or grow the table past its bound. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/k8s_pods.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct k8s_pods t;
    k8s_pods_init(&t, 64);
    char cont[K8S_CONTINUE_MAX + 1], err[256];
    k8s_pods_add_list(&t, (const char *)data, size, cont, sizeof cont, err, sizeof err);

    struct k8s_event *ev = malloc(sizeof *ev);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (k8s_event_parse(p, n, ev, err, sizeof err) == 0)
            k8s_pods_apply(&t, ev);
        p += n + 1;
    }
    free(ev);
    if (t.n > 64)
        abort();

    struct k8s_status st;
    k8s_status_parse((const char *)data, size, &st);

    const struct k8s_pod *v[64];
    for (int o = K8S_ORDER_INDEX; o <= K8S_ORDER_IP; o++)
        k8s_pods_sorted(&t, (enum k8s_order)o, v);
    char out[4096];
    k8s_tools_fetch_ips(&t, NULL, out, sizeof out);
    k8s_tools_fetch_ips(&t, "Pending", out, sizeof out);
    k8s_tools_fetch_endpoints(&t, "6174", out, sizeof out);
    k8s_tools_fetch_id(&t, "10.0.0.1", out, sizeof out);
    k8s_tools_count_pods_by_phase(&t, "Running", out, sizeof out);
    k8s_tools_containers_all_ready(&t);
    if (t.n > 0) {
        k8s_pods_find(&t, v[0]->ns, v[0]->name);
        k8s_name_cmp(v[0]->name, v[t.n - 1]->name);
    }
    k8s_pods_free(&t);
    return 0;
}
