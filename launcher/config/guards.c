/* launcher/config/guards.c — the job store's guards from the config (see guards.h). */
#include "launcher/config/guards.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/base/common.h"

/* The token file's bytes: at most AUTH_TOKEN_MAX plus room for line ends and blanks. */
static int read_token(const char *path, auth_key_t *key, char *err, size_t elen)
{
    char buf[AUTH_TOKEN_MAX + 256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        sfmt(err, elen, "--rdzv-token-file %s: %s; mount the job's Secret there or unset it",
             path, strerror(errno));
        return -EINVAL;
    }
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            sfmt(err, elen, "--rdzv-token-file %s: %s", path, strerror(errno));
            close(fd);
            return -EINVAL;
        }
        len += (size_t)n;
    }
    close(fd);
    char what[300];
    sfmt(what, sizeof what, "--rdzv-token-file %s", path);
    int r = auth_key_from_token(buf, len, what, key, err, elen);
    memset(buf, 0, sizeof buf);
    return r;
}

int guards_load(const struct cfg *c, struct guards *g, char *err, size_t elen)
{
    memset(g, 0, sizeof *g);
    int r = 0;
    if (c->rdzv_token_file)
        r = read_token(c->rdzv_token_file, &g->token, err, elen);
    else if (c->rdzv_token)
        r = auth_key_from_token(c->rdzv_token, strlen(c->rdzv_token), c->src[CFG_RDZV_TOKEN].name,
                                &g->token, err, elen);
    if (r)
        return r;
    g->has_token = c->rdzv_token_file || c->rdzv_token;
    unsetenv("PODRUN_RDZV_TOKEN");
    unsetenv("PET_RDZV_TOKEN");
    if (c->store_allow) {
        int job = 0;
        r = acl_add_list(&g->allow, c->store_allow, c->src[CFG_STORE_ALLOW].name, &job, err,
                         elen);
        if (r)
            return r == -ENOMEM ? r : -EINVAL;
        if (job && c->discovery != CFG_DISCOVERY_K8S) {
            sfmt(err, elen, "%s: 'job' (the job's own pods) needs --discovery k8s; name the "
                            "hosts' addresses or CIDR blocks instead",
                 c->src[CFG_STORE_ALLOW].name);
            return -EINVAL;
        }
        g->has_allow = true;
        g->job = job;
        g->nblocks = g->allow.n;
    }
    return 0;
}

int guards_set_job_addrs(struct guards *g, const char *const *ips, size_t n)
{
    if (!g->job)
        return 0;
    size_t keep = g->allow.n;
    g->allow.n = g->nblocks;
    for (size_t i = 0; i < n; i++) {
        int r = acl_add(&g->allow, ips[i]);
        if (r == -ENOMEM) {
            g->allow.n = keep; /* the entries past nblocks may be half new: keep them all */
            return r;
        }
    }
    return 0;
}

void guards_free(struct guards *g)
{
    acl_free(&g->allow);
    memset(&g->token, 0, sizeof g->token);
}
