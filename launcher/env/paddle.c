/* launcher/env/paddle.c — paddle.distributed.launch's worker environment, computed without I/O
 * (see paddle.h). */
#include "launcher/env/paddle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/config.h"
#include "launcher/env/environ.h"
#include "launcher/env/torch.h"

const char *const env_paddle_vars[] = {
    "PADDLE_MASTER", "PADDLE_GLOBAL_SIZE", "PADDLE_LOCAL_SIZE", "PADDLE_GLOBAL_RANK",
    "PADDLE_LOCAL_RANK", "PADDLE_NNODES", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
    "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_RANK_IN_NODE", "PADDLE_AUTO_CLUSTER",
    "PADDLE_JOB_ID", "PADDLE_LOG_DIR", "POD_NAME", "FLAGS_selected_gpus",
    "PADDLE_LOCAL_DEVICE_IDS", "PADDLE_WORLD_DEVICE_IDS", "PADDLE_DISTRI_BACKEND",
    "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_PORT", "PADDLE_ROLE", "TRAINING_ROLE", "POD_IP",
    "PADDLE_PSERVER_ID", "PADDLE_GLOO_RENDEZVOUS", "PADDLE_GLOO_FS_PATH",
    "PADDLE_GLOO_HTTP_ENDPOINT", "PADDLE_WITH_GLOO", "PODRUN_HEARTBEAT_FILE", NULL};

/* The host part of "ip:port" (IPv6 in brackets kept as they are). */
static void host_of(const char *ep, char *out, size_t cap)
{
    size_t n = strcspn(ep, ",");
    const char *colon = NULL;
    for (const char *p = ep; p < ep + n; p++)
        if (*p == ':')
            colon = p;
    size_t l = colon ? (size_t)(colon - ep) : n;
    snprintf(out, cap, "%.*s", (int)(l < cap ? l : cap - 1), ep);
}

static void collective(struct env_set *s, const struct env_paddle_job *j,
                       const struct env_paddle_worker *w)
{
    if (j->master)
        env_set_add(s, "PADDLE_MASTER", "%s", j->master);
    env_set_add(s, "PADDLE_GLOBAL_SIZE", "%d", j->ntrainers);
    env_set_add(s, "PADDLE_LOCAL_SIZE", "%d", w->local_size);
    env_set_add(s, "PADDLE_GLOBAL_RANK", "%d", w->id);
    env_set_add(s, "PADDLE_LOCAL_RANK", "%d", w->local_rank);
    env_set_add(s, "PADDLE_NNODES", "%d", j->nnodes);
    env_set_add(s, "PADDLE_TRAINER_ENDPOINTS", "%s", j->trainer_endpoints);
    env_set_add(s, "PADDLE_CURRENT_ENDPOINT", "%s", w->endpoint);
    env_set_add(s, "PADDLE_TRAINER_ID", "%d", w->id);
    env_set_add(s, "PADDLE_TRAINERS_NUM", "%d", j->ntrainers);
    env_set_add(s, "PADDLE_RANK_IN_NODE", "%d", w->local_rank);
    env_set_add(s, "PADDLE_AUTO_CLUSTER", "0");
    if (w->devices && *w->devices) {
        env_set_add(s, "FLAGS_selected_gpus", "%s", w->devices);
        env_set_add(s, "PADDLE_LOCAL_DEVICE_IDS", "%s", w->devices);
        if (j->world_device_ids)
            env_set_add(s, "PADDLE_WORLD_DEVICE_IDS", "%s", j->world_device_ids);
    } else {
        env_set_add(s, "PADDLE_DISTRI_BACKEND", "gloo");
    }
}

static void parameter_server(struct env_set *s, const struct env_paddle_job *j,
                             const struct env_paddle_worker *w)
{
    const char *role = w->server ? "PSERVER" : "TRAINER";
    const char *colon = strrchr(w->endpoint, ':');
    char host[256];
    host_of(j->server_endpoints ? j->server_endpoints : "", host, sizeof host);
    if (!j->lists)
        env_set_add(s, "PADDLE_NNODES", "%d", j->nnodes);
    env_set_add(s, "PADDLE_PSERVERS_IP_PORT_LIST", "%s",
                j->server_endpoints ? j->server_endpoints : "");
    env_set_add(s, "PADDLE_TRAINER_ENDPOINTS", "%s",
                j->trainer_endpoints ? j->trainer_endpoints : "");
    env_set_add(s, "PADDLE_PORT", "%s", colon ? colon + 1 : "");
    env_set_add(s, "PADDLE_ROLE", "%s", role);
    env_set_add(s, "TRAINING_ROLE", "%s", role);
    env_set_add(s, w->server ? "PADDLE_PSERVER_ID" : "PADDLE_TRAINER_ID", "%d", w->id);
    env_set_add(s, "PADDLE_TRAINERS_NUM", "%d", j->ntrainers);
    env_set_add(s, "POD_IP", "%s", j->pod_ip);
    env_set_add(s, "PADDLE_GLOO_RENDEZVOUS", "3");
    env_set_add(s, "PADDLE_GLOO_FS_PATH", "%s", j->gloo_fs_path ? j->gloo_fs_path : "");
    env_set_add(s, "PADDLE_GLOO_HTTP_ENDPOINT", "%s:%d", host, j->gloo_port);
    env_set_add(s, "PADDLE_WITH_GLOO", "%s", j->with_gloo ? j->with_gloo : "1");
}

int env_paddle_build(char *const *base, const struct env_paddle_job *j,
                     const struct env_paddle_worker *w, char ***out)
{
    struct env_set s = ENV_SET_INIT;
    const char *drop[4] = {NULL};
    size_t nd = 0;
    /* fetch_envs: the proxies would reach NCCL's peers; they are kept under another name */
    static const char *const proxies[] = {"http_proxy", "https_proxy"};
    for (int i = 0; i < 2; i++) {
        const char *v = env_get(base, proxies[i]);
        if (v) {
            drop[nd++] = proxies[i];
            env_set_add(&s, i ? "https_proxy_original" : "http_proxy_original", "%s", v);
        }
    }
    drop[nd] = NULL;
    if (j->ps)
        parameter_server(&s, j, w);
    else
        collective(&s, j, w);
    if (j->log_dir)
        env_set_add(&s, "PADDLE_LOG_DIR", "%s", j->log_dir);
    if (j->pod_name)
        env_set_add(&s, "POD_NAME", "%s", j->pod_name);
    if (w->heartbeat_file)
        env_set_add(&s, "PODRUN_HEARTBEAT_FILE", "%s", w->heartbeat_file);
    if (w->cuda_visible_devices)
        env_set_add(&s, "CUDA_VISIBLE_DEVICES", "%s", w->cuda_visible_devices);
    for (char *const *d = w->derived; d && *d; d++) {
        size_t nl = strcspn(*d, "=");
        char name[128];
        if (nl >= sizeof name || !(*d)[nl])
            continue;
        memcpy(name, *d, nl);
        name[nl] = '\0';
        if (!env_get(base, name) && !env_set_has(&s, name))   /* a set value stands */
            env_set_add(&s, name, "%s", *d + nl + 1);
    }
    /* an inherited heartbeat file would name another agent's */
    const char *own[] = {"PODRUN_HEARTBEAT_FILE", drop[0], drop[1], NULL};
    return env_set_finish(&s, base, own, out);
}

int env_paddle_devices(char *const *base, const char *devices, int ngpus, char *out, size_t cap,
                       char *bad, size_t badcap)
{
    const char *cvd = env_get(base, "CUDA_VISIBLE_DEVICES");
    size_t o = 0;
    out[0] = '\0';
    if (!devices) {
        int n = ngpus;
        if (cvd && *cvd) {
            n = 1;
            for (const char *p = cvd; *p; p++)
                n += *p == ',';
        }
        for (int i = 0; i < n && o < cap; i++)
            o += (size_t)snprintf(out + o, cap - o, "%s%d", i ? "," : "", i);
        return 0;
    }
    int k = 0;
    for (const char *p = devices; *p && o < cap; k++) {
        size_t l = strcspn(p, ",");
        int idx = -1;
        if (cvd && *cvd) {   /* labels.index(dev): its place among the visible devices */
            int at = 0;
            for (const char *q = cvd; *q && idx < 0; at++) {
                size_t ql = strcspn(q, ",");
                if (ql == l && !strncmp(q, p, l))
                    idx = at;
                q += ql;
                if (*q == ',')
                    q++;
            }
        } else {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p + l && l && v >= 0 && (ngpus <= 0 || v < ngpus))
                idx = (int)v;
        }
        if (idx < 0) {
            if (bad && badcap)
                snprintf(bad, badcap, "%.*s", (int)(l < 63 ? l : 63), p);
            return -EINVAL;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s%d", k ? "," : "", idx);
        p += l;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* ---- the plan -------------------------------------------------------------------------------- */

/* The line "k=..." of a node's value, into out. */
static void field(const char *v, char k, char *out, size_t cap)
{
    out[0] = '\0';
    for (const char *p = v; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (p[0] == k && p[1] == '=') {
            size_t l = strcspn(p + 2, "\n");
            snprintf(out, cap, "%.*s", (int)(l < cap ? l : cap - 1), p + 2);
            return;
        }
}

static int count_items(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += p == s || p[-1] == ',';
    return n;
}

/* Appends item (a comma list) to the list *acc. */
static int append(char **acc, const char *item)
{
    size_t a = *acc ? strlen(*acc) : 0, b = strlen(item);
    if (!b && *acc)
        return 0;
    char *n = realloc(*acc, a + b + 2);
    if (!n)
        return -ENOMEM;
    if (a && b)
        n[a++] = ',';
    memcpy(n + a, item, b + 1);
    *acc = n;
    return 0;
}

/* The idx-th item of a comma list, malloc'd ("" past the end). */
static char *item_at(const char *list, int idx)
{
    const char *p = list;
    for (int k = 0; k < idx && p; k++)
        p = (p = strchr(p, ',')) ? p + 1 : NULL;
    return p && *p ? strndup(p, strcspn(p, ",")) : strdup("");
}

void env_paddle_plan_free(struct env_paddle_plan *p)
{
    free(p->master);
    free(p->trainers);
    free(p->servers);
    free(p->world_devices);
    for (int i = 0; p->endpoint && i < p->nproc; i++)
        free(p->endpoint[i]);
    free(p->endpoint);
    free(p->id);
    memset(p, 0, sizeof *p);
}

int env_paddle_plan(char *const *values, int nnodes, int node_rank, int nproc, int nservers,
                    bool ips, struct env_paddle_plan *p)
{
    char buf[8192];
    int r = 0, toff = 0, soff = 0;
    memset(p, 0, sizeof *p);
    p->nproc = nproc;
    p->endpoint = calloc((size_t)(nproc > 0 ? nproc : 1), sizeof *p->endpoint);
    p->id = calloc((size_t)(nproc > 0 ? nproc : 1), sizeof *p->id);
    if (!p->endpoint || !p->id || append(&p->trainers, "") || append(&p->servers, ""))
        r = -ENOMEM;
    for (int k = 0; k < nnodes && !r; k++) {
        field(values[k], 't', buf, sizeof buf);
        toff += k < node_rank ? count_items(buf) : 0;
        p->ntrainers += count_items(buf);
        r = append(&p->trainers, buf);
        field(values[k], 's', buf, sizeof buf);
        soff += k < node_rank ? count_items(buf) : 0;
        p->nservers += count_items(buf);
        if (!r)
            r = append(&p->servers, buf);
        field(values[k], 'd', buf, sizeof buf);
        if (!r && buf[0])
            r = append(&p->world_devices, buf);
        field(values[k], 'c', buf, sizeof buf);
        if (!r && k == 0 && buf[0] && !(p->master = strdup(buf)))
            r = -ENOMEM;
    }
    if (!r && ips && p->trainers[0]) {   /* --ips: the first trainer's endpoint */
        free(p->master);
        if (!(p->master = item_at(p->trainers, 0)))
            r = -ENOMEM;
    }
    char s[8192] = "", t[8192] = "";
    if (node_rank >= 0 && node_rank < nnodes) {
        field(values[node_rank], 's', s, sizeof s);
        field(values[node_rank], 't', t, sizeof t);
    }
    for (int lr = 0; lr < nproc && !r; lr++) {
        bool server = lr < nservers;
        p->endpoint[lr] = item_at(server ? s : t, server ? lr : lr - nservers);
        p->id[lr] = server ? soff + lr : toff + lr - nservers;
        if (!p->endpoint[lr])
            r = -ENOMEM;
    }
    if (r)
        env_paddle_plan_free(p);
    return r;
}

int env_paddle_worker_env(char *const *base, const struct cfg *c, const struct env_paddle_plan *p,
                          const struct env_paddle_node *n, int lr, const struct env_worker *ew,
                          char ***out)
{
    bool ps = c->paddle_run_mode == CFG_PADDLE_PS;
    int ns = ps ? c->paddle_server_num : 0, nt = c->nproc_per_node - ns;
    bool server = lr < ns;
    int idx = server ? lr : lr - ns;
    char dev[64] = "";
    const char *d = n->devices && *n->devices ? n->devices : NULL;
    if (d && !server) {
        if (nt == 1) {
            snprintf(dev, sizeof dev, "%s", d);
        } else {
            for (int k = 0; k < idx && d; k++)
                d = (d = strchr(d, ',')) ? d + 1 : NULL;
            if (d)
                snprintf(dev, sizeof dev, "%.*s", (int)strcspn(d, ","), d);
        }
    }
    struct env_paddle_job j = {
        .ps = ps, .lists = ps && c->paddle_servers && c->paddle_trainers, .nnodes = n->nnodes,
        .master = p->master,
        .log_dir = n->log_dir, .pod_name = n->name, .pod_ip = n->ip,
        .trainer_endpoints = p->trainers ? p->trainers : "", .ntrainers = p->ntrainers,
        .server_endpoints = p->servers ? p->servers : "", .nservers = p->nservers,
        .world_device_ids = p->world_devices, .gloo_port = c->paddle_gloo_port,
        .with_gloo = c->paddle_with_gloo, .gloo_fs_path = n->gloo_fs_path,
    };
    struct env_paddle_worker w = {
        .server = server, .local_rank = idx, .local_size = server ? ns : nt,
        .id = p->id && lr < p->nproc ? p->id[lr] : 0,
        .endpoint = p->endpoint && lr < p->nproc && p->endpoint[lr] ? p->endpoint[lr] : "",
        .devices = dev[0] ? dev : NULL, .heartbeat_file = ew ? ew->heartbeat_file : NULL,
        .derived = ew ? ew->derived : NULL,
        .cuda_visible_devices = ew ? ew->cuda_visible_devices : NULL,
    };
    if (w.cuda_visible_devices && w.devices)
        w.devices = "0";   /* its own device is the only one it sees */
    return env_paddle_build(base, &j, &w, out);
}
