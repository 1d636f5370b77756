/* launcher/operators/paddlejob.c — a PaddleJob's variables (paddlejob.h) and how they discover
 * the job.
 *
 * Mapping. paddle-operator: every pod of the job is a node, trainers first (so a trainer's node
 * rank is its PADDLE_TRAINER_ID), then the parameter servers, then the heter workers;
 *   node-rank    PADDLE_TRAINER_ID + the pods of the roles before its own
 *   nnodes       PADDLE_TRAINERS_NUM + the pservers + the heters
 *   master-addr  trainer 0's host (PADDLE_TRAINER_ENDPOINTS' first entry): node rank 0 hosts the
 *                static store; its port stays --master-port, since PADDLE_PORT and the ports after
 *                it are the trainers' own (paddle's endpoints)
 *   rdzv-id      PADDLE_ELASTIC_JOB_ID (elastic mode, which says nnodes = PADDLE_ELASTIC_NP but
 *                no host: give --master-addr or --rdzv-endpoint)
 * training-operator: no pod is told its index, so the rendezvous orders them by name, which is
 * index order (<job>-master-0 before <job>-worker-0 before <job>-worker-1 ...);
 *   rdzv-backend c10d, rdzv-endpoint PADDLE_MASTER: the pod it names (worker-0, or master-0 in PS
 *                mode) hosts the store on paddle launch's master port; that pod sees its own IP
 *                there, equal to POD_IP_DUMMY, and gets is_host=1
 *   nnodes       PADDLE_NNODES;  rdzv-id PADDLE_JOB_ID */
#include "launcher/operators/paddlejob.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/discover/hostlist.h"
#include "launcher/env/environ.h"
#include "launcher/operators/adapter.h"
#include "rdzv/base/common.h"

#define PO "paddle-operator"
#define TO "PaddleJob"
#define ENDPOINTS_MAX 65536

static const char *get(char *const *envp, const char *name)
{
    const char *v = env_get(envp, name);
    return v && *v ? v : NULL;
}

static int num(char *const *envp, const char *name, const char *label, long min, long max,
               long *out, char *err, size_t errlen)
{
    const char *v = get(envp, name);
    char q[80];
    *out = -1;
    if (!v)
        return 0;
    if (!podrun_parse_int(v, min, max, out))
        return 0;
    hostlist_quote(q, sizeof q, v, strlen(v));
    return podrun_failf(-EINVAL, err, errlen, "%s='%s' (%s): expected a whole number from %ld to "
                        "%ld", name, q, label, min, max);
}

static int dup_var(char *const *envp, const char *name, char **out)
{
    const char *v = get(envp, name);
    *out = NULL;
    if (v && !(*out = strdup(v)))
        return -ENOMEM;
    return 0;
}

static void endpoints_free(struct paddlejob_endpoints *e)
{
    for (size_t i = 0; i < e->count; i++) {
        free(e->items[i]);
        free(e->hosts[i]);
    }
    free(e->items);
    free(e->hosts);
    free(e->ports);
    memset(e, 0, sizeof *e);
}

/* "h:p,h:p": every item HOST:PORT, none empty. */
static int endpoints_parse(struct paddlejob_endpoints *e, char *const *envp, const char *name,
                           char *err, size_t errlen)
{
    const char *v = get(envp, name);
    memset(e, 0, sizeof *e);
    if (!v)
        return 0;
    size_t n = 1;
    for (const char *p = v; *p; p++)
        n += *p == ',';
    if (n > ENDPOINTS_MAX)
        return podrun_failf(-EINVAL, err, errlen, "%s (%s): more than %d endpoints", name, PO,
                            ENDPOINTS_MAX);
    e->items = calloc(n, sizeof *e->items);
    e->hosts = calloc(n, sizeof *e->hosts);
    e->ports = calloc(n, sizeof *e->ports);
    if (!e->items || !e->hosts || !e->ports)
        return podrun_failf(-ENOMEM, err, errlen, "out of memory");
    for (const char *p = v; e->count < n; e->count++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[512], host[256], q[80];
        bool has_port;
        hostlist_quote(q, sizeof q, p, len);
        if (len == 0 || len >= sizeof item)
            return podrun_failf(-EINVAL, err, errlen, "%s (%s): entry %zu '%s' is not HOST:PORT",
                                name, PO, e->count, q);
        memcpy(item, p, len);
        item[len] = '\0';
        if (podrun_hostport_parse(item, host, sizeof host, &e->ports[e->count], &has_port) ||
            !has_port || e->ports[e->count] == 0)
            return podrun_failf(-EINVAL, err, errlen, "%s (%s): entry %zu '%s' is not HOST:PORT",
                                name, PO, e->count, q);
        e->items[e->count] = strdup(item);
        e->hosts[e->count] = strdup(host);
        if (!e->items[e->count] || !e->hosts[e->count]) {
            free(e->items[e->count]);
            free(e->hosts[e->count]);
            return podrun_failf(-ENOMEM, err, errlen, "out of memory");
        }
        p = end ? end + 1 : p + len;
    }
    return 0;
}

const char *paddlejob_role_name(enum paddlejob_role role)
{
    return role == PADDLEJOB_PSERVER ? "PSERVER" : role == PADDLEJOB_HETER ? "HETER" : "TRAINER";
}

const struct paddlejob_endpoints *paddlejob_role_endpoints(const struct paddlejob_env *p,
                                                           enum paddlejob_role role)
{
    return role == PADDLEJOB_PSERVER ? &p->pservers
                                     : role == PADDLEJOB_HETER ? &p->heters : &p->trainers;
}

static int parse_role(const struct paddlejob_env *p, char *const *envp, enum paddlejob_role *role,
                      char *err, size_t errlen)
{
    static const char *const names[] = {"TRAINER", "PSERVER", "HETER"};
    const char *a = get(envp, "TRAINING_ROLE"), *b = get(envp, "PADDLE_TRAINING_ROLE");
    (void)p;
    if (a && b && strcmp(a, b))
        return podrun_failf(-EINVAL, err, errlen, "TRAINING_ROLE=%s and PADDLE_TRAINING_ROLE=%s "
                            "(%s) disagree: the operator writes both from the pod's role", a, b,
                            PO);
    const char *v = a ? a : b;
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) {
            *role = (enum paddlejob_role)i;
            return 0;
        }
    char q[80];
    hostlist_quote(q, sizeof q, v, strlen(v));
    return podrun_failf(-EINVAL, err, errlen, "%s='%s' (%s): expected TRAINER, PSERVER or HETER",
                        a ? "TRAINING_ROLE" : "PADDLE_TRAINING_ROLE", q, PO);
}

/* The paddle-operator's pod against its own lists. */
static int check_operator(const struct paddlejob_env *p, char *err, size_t errlen)
{
    const struct paddlejob_endpoints *mine = paddlejob_role_endpoints(p, p->role);
    const char *lname = p->role == PADDLEJOB_PSERVER ? "PADDLE_PSERVERS_IP_PORT_LIST"
                        : p->role == PADDLEJOB_HETER ? "PADDLE_HETER_ENDPOINTS"
                                                     : "PADDLE_TRAINER_ENDPOINTS";
    if (p->trainers_num >= 0 && p->trainers.count && (size_t)p->trainers_num != p->trainers.count)
        return op_conflict(err, errlen, "PADDLE_TRAINERS_NUM=%ld and PADDLE_TRAINER_ENDPOINTS "
                           "(%zu entries) (%s) disagree: the operator writes both from the "
                           "trainers; fix the pod's environment", p->trainers_num,
                           p->trainers.count, PO);
    if (!mine->count)
        return 0;
    if ((size_t)p->id >= mine->count)
        return op_conflict(err, errlen, "PADDLE_TRAINER_ID=%ld must be below the %zu entries of "
                           "%s (%s, role %s)", p->id, mine->count, lname, PO,
                           paddlejob_role_name(p->role));
    if (p->pod_ip && strcmp(p->pod_ip, mine->hosts[p->id]))
        return op_conflict(err, errlen, "PADDLE_TRAINER_ID=%ld names %s entry %ld (%s) but "
                           "POD_IP=%s (%s): the two disagree; fix the pod's environment", p->id,
                           lname, p->id, mine->items[p->id], p->pod_ip, PO);
    return 0;
}

static int parse_operator(struct paddlejob_env *p, char *const *envp, char *err, size_t errlen)
{
    int r;
    const char *gloo = get(envp, "PADDLE_WITH_GLOO");
    long np;
    p->kind = PADDLEJOB_PADDLE_OPERATOR;
    p->with_gloo = gloo && strcmp(gloo, "0");
    if ((r = parse_role(p, envp, &p->role, err, errlen)) ||
        (r = num(envp, "PADDLE_TRAINER_ID", PO, 0, OP_NODES_MAX - 1, &p->id, err, errlen)) ||
        (r = num(envp, "PADDLE_TRAINERS_NUM", PO, 0, OP_NODES_MAX, &p->trainers_num, err,
                 errlen)) ||
        (r = num(envp, "PADDLE_PORT", PO, 1, 65535, &p->port, err, errlen)) ||
        (r = num(envp, "TRAINER_PORTS_NUM", PO, 1, 65535, &p->ports_num, err, errlen)) ||
        (r = num(envp, "PADDLE_ELASTIC_NP", PO, 1, OP_NODES_MAX, &np, err, errlen)) ||
        (r = endpoints_parse(&p->trainers, envp, "PADDLE_TRAINER_ENDPOINTS", err, errlen)) ||
        (r = endpoints_parse(&p->pservers, envp, "PADDLE_PSERVERS_IP_PORT_LIST", err, errlen)) ||
        (r = endpoints_parse(&p->heters, envp, "PADDLE_HETER_ENDPOINTS", err, errlen)))
        return r;
    if ((r = dup_var(envp, "POD_IP", &p->pod_ip)) ||
        (r = dup_var(envp, "PADDLE_ELASTIC_JOB_ID", &p->job_id)))
        return podrun_failf(r, err, errlen, "out of memory");
    p->elastic = np > 0 || p->job_id != NULL;
    p->nnodes = np;
    if (p->trainers_num < 0 && p->trainers.count)
        p->trainers_num = (long)p->trainers.count;
    return check_operator(p, err, errlen);
}

static int parse_training_operator(struct paddlejob_env *p, char *const *envp, char *err,
                                   size_t errlen)
{
    int r;
    char host[256];
    bool has_port;
    int port;
    p->kind = PADDLEJOB_TRAINING_OPERATOR;
    p->role = get(envp, "PADDLE_SERVER_NUM") ? PADDLEJOB_PSERVER : PADDLEJOB_TRAINER;
    if ((r = num(envp, "PADDLE_NNODES", TO, 1, OP_NODES_MAX, &p->nnodes, err, errlen)))
        return r;
    if ((r = dup_var(envp, "PADDLE_MASTER", &p->master)) ||
        (r = dup_var(envp, "PADDLE_JOB_ID", &p->job_id)) ||
        (r = dup_var(envp, "POD_IP_DUMMY", &p->pod_ip)))
        return podrun_failf(r, err, errlen, "out of memory");
    if (!p->master || podrun_hostport_parse(p->master, host, sizeof host, &port, &has_port) ||
        !has_port) {
        char q[80];
        const char *m = p->master ? p->master : "";
        hostlist_quote(q, sizeof q, m, strlen(m));
        return podrun_failf(-EINVAL, err, errlen, "PADDLE_MASTER='%s' (%s): expected HOST:PORT",
                            q, TO);
    }
    return 0;
}

int paddlejob_env_parse(struct paddlejob_env *p, char *const *envp, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->id = p->trainers_num = p->port = p->ports_num = p->nnodes = -1;
    if (get(envp, "PADDLE_TRAINER_ID") &&
        (get(envp, "TRAINING_ROLE") || get(envp, "PADDLE_TRAINING_ROLE")))
        return parse_operator(p, envp, err, errlen);
    if (get(envp, "PADDLE_MASTER") && get(envp, "PADDLE_NNODES"))
        return parse_training_operator(p, envp, err, errlen);
    return 0;
}

void paddlejob_env_free(struct paddlejob_env *p)
{
    endpoints_free(&p->trainers);
    endpoints_free(&p->pservers);
    endpoints_free(&p->heters);
    free(p->pod_ip);
    free(p->master);
    free(p->job_id);
    memset(p, 0, sizeof *p);
    p->id = p->trainers_num = p->port = p->ports_num = p->nnodes = -1;
}

/* ---- the adapter ---- */

static bool paddlejob_detect(const struct op_ctx *x, struct cfg_src *why)
{
    if (op_get(x, "PADDLE_TRAINER_ID") &&
        (op_get(x, "TRAINING_ROLE") || op_get(x, "PADDLE_TRAINING_ROLE"))) {
        cfg_src_init(why, CFG_SRC_OPERATOR, "PADDLE_TRAINER_ID (%s)", PO);
        return true;
    }
    if (op_get(x, "PADDLE_MASTER") && op_get(x, "PADDLE_NNODES")) {
        cfg_src_init(why, CFG_SRC_OPERATOR, "PADDLE_MASTER (%s)", TO);
        return true;
    }
    return false;
}

static int apply_operator(struct cfg *c, const struct paddlejob_env *p, char *err, size_t errlen)
{
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    int r = 0;
    if (p->job_id && (r = op_set(c, CFG_RDZV_ID, p->job_id, k, err, errlen,
                                 "PADDLE_ELASTIC_JOB_ID (%s)", PO)))
        return r;
    if (p->elastic) {
        if (p->nnodes > 0 && (r = op_setn(c, CFG_NNODES, p->nnodes, k, err, errlen,
                                          "PADDLE_ELASTIC_NP (%s)", PO)))
            return r;
        return p->role != PADDLEJOB_TRAINER ? 0
               : op_setn(c, CFG_NODE_RANK, p->id, k, err, errlen, "PADDLE_TRAINER_ID (%s)", PO);
    }
    long t = p->trainers_num > 0 ? p->trainers_num : 0, s = (long)p->pservers.count,
         h = (long)p->heters.count;
    long offset = p->role == PADDLEJOB_TRAINER ? 0 : p->role == PADDLEJOB_PSERVER ? t : t + s;
    /* no ConfigMap: only the index is known, and only a trainer's index is its node rank (a
     * pserver's is its index among the pservers, the same numbers again); the rendezvous places
     * the others */
    if (t + s + h == 0)
        return p->role != PADDLEJOB_TRAINER ? 0
               : op_setn(c, CFG_NODE_RANK, p->id, k, err, errlen, "PADDLE_TRAINER_ID (%s)", PO);
    if (t + s + h > OP_NODES_MAX)
        return op_conflict(err, errlen, "a PaddleJob of %ld pods (%s): more than %d nodes",
                           t + s + h, PO, OP_NODES_MAX);
    const struct paddlejob_endpoints *first = t ? &p->trainers : s ? &p->pservers : &p->heters;
    if (p->role == PADDLEJOB_TRAINER)
        r = op_setn(c, CFG_NODE_RANK, p->id, k, err, errlen, "PADDLE_TRAINER_ID (%s)", PO);
    else
        r = op_setn(c, CFG_NODE_RANK, offset + p->id, k, err, errlen,
                    "PADDLE_TRAINER_ID, TRAINING_ROLE=%s (%s)", paddlejob_role_name(p->role), PO);
    if (r)
        return r;
    if (s + h == 0)
        r = op_setn(c, CFG_NNODES, t, k, err, errlen, "PADDLE_TRAINERS_NUM (%s)", PO);
    else
        r = op_setn(c, CFG_NNODES, t + s + h, k, err, errlen,
                    "PADDLE_TRAINERS_NUM and the pserver/heter endpoints (%s)", PO);
    if (r || !first->count)
        return r;
    return op_set(c, CFG_MASTER_ADDR, first->hosts[0], k, err, errlen, "%s (%s)",
                  first == &p->trainers ? "PADDLE_TRAINER_ENDPOINTS"
                  : first == &p->pservers ? "PADDLE_PSERVERS_IP_PORT_LIST"
                                          : "PADDLE_HETER_ENDPOINTS", PO);
}

static int apply_training_operator(struct cfg *c, const struct paddlejob_env *p, char *err,
                                   size_t errlen)
{
    const enum cfg_src_kind k = CFG_SRC_OPERATOR;
    char host[256];
    bool has_port;
    int port, r;
    if ((r = op_setn(c, CFG_NNODES, p->nnodes, k, err, errlen, "PADDLE_NNODES (%s)", TO)) ||
        (r = op_set(c, CFG_RDZV_BACKEND, "c10d", k, err, errlen, "PADDLE_MASTER (%s)", TO)) ||
        (r = op_set(c, CFG_RDZV_ENDPOINT, p->master, k, err, errlen, "PADDLE_MASTER (%s)", TO)))
        return r;
    if (p->job_id && (r = op_set(c, CFG_RDZV_ID, p->job_id, k, err, errlen, "PADDLE_JOB_ID (%s)",
                                 TO)))
        return r;
    /* the store's pod sees its own IP in PADDLE_MASTER, not a name its host name would match */
    podrun_hostport_parse(p->master, host, sizeof host, &port, &has_port);
    if (p->pod_ip && !strcmp(p->pod_ip, host))
        return op_set(c, CFG_IS_HOST, "1", k, err, errlen, "PADDLE_MASTER = POD_IP_DUMMY (%s)",
                      TO);
    return 0;
}

static int paddlejob_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    struct paddlejob_env p;
    int r = paddlejob_env_parse(&p, x->envp, err, errlen);
    if (!r) {
        struct cfg_src why = c->src[CFG_DISCOVERED];
        r = op_discovered(c, p.kind == PADDLEJOB_PADDLE_OPERATOR ? "PaddleJob (paddle-operator)"
                                                                 : "PaddleJob (training-operator)",
                          &why, err, errlen);
    }
    if (!r)
        r = p.kind == PADDLEJOB_PADDLE_OPERATOR ? apply_operator(c, &p, err, errlen)
                                                : apply_training_operator(c, &p, err, errlen);
    paddlejob_env_free(&p);
    return r;
}

const struct op_adapter op_paddlejob = {"PaddleJob", OP_ENV, paddlejob_detect, paddlejob_apply};
