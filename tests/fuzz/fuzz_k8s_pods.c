/* tests/fuzz/fuzz_k8s_pods.c — the Kubernetes pod JSON parser (launcher/discover/k8s_pods.c).
 *
 * The input is read three ways, as the watcher reads what the API server sends: as a PodList
 * page, then line by line as watch events applied to the table that page filled, and as a Status.
 * Every order, every k8s_tools formatter (launcher/commands/k8s_tools.c) and the job plan
 * (launcher/discover/k8s_job.c) then run
 * over the resulting table, and the input is also read as a Pod whose labels give the job's
 * selector. No input may crash, leak, read out of bounds or grow the table past its bound, and a
 * selector is always one line of key=value pairs. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/commands/k8s_tools.h"
#include "launcher/discover/k8s_job.h"
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
        struct k8s_plan pl;
        for (int max = 1; max <= 3; max++) {
            struct k8s_plan_params pp = {v[0]->ns, v[t.n - 1]->name, K8S_ORDER_INDEX, 1, max};
            k8s_plan(&t, &pp, &pl);
            pp.min_nodes = max;
            k8s_plan(&t, &pp, &pl);
            if (strlen(pl.line) >= sizeof pl.line)
                abort();
        }
        char why[64];
        k8s_pod_gone(&t, v[0]->ns, v[0]->name, "uid", why, sizeof why);
    }
    char sel[512];
    int sl = k8s_job_selector((const char *)data, size, sel, sizeof sel, NULL, err, sizeof err);
    if (sl >= 0 && ((size_t)sl != strlen(sel) || strpbrk(sel, " \n!()")))
        abort();
    k8s_pods_free(&t);
    return 0;
}
