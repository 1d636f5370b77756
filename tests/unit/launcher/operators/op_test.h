/* tests/unit/launcher/operators/op_test.h — what the adapters' tests share: a fake machine (files,
 * directories and names from tables, counting what was asked), loading a pod's environment and
 * flags the way podrun does (frontend_load_host), and checking a value with its source as
 * `podrun --print-config` shows them. */
#ifndef PODRUN_TESTS_OP_TEST_H
#define PODRUN_TESTS_OP_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/discover/host.h"
#include "launcher/frontends/frontend.h"

static char err[512];

struct fake_file {
    const char *path, *text;
};

struct fake_machine {
    const struct fake_file *files;   /* NULL-path terminated */
    const char *hostname, *fqdn;
    const char *addrs[8];
    size_t naddrs;
    int reads, lists, fqdn_lookups;
};

static int fake_read(const struct discover_host *h, const char *path, size_t max, char **text,
                     size_t *len)
{
    struct fake_machine *m = h->data;
    m->reads++;
    for (const struct fake_file *f = m->files; f && f->path; f++)
        if (!strcmp(f->path, path)) {
            size_t n = strlen(f->text);
            if (n > max)
                return -EFBIG;
            *text = strdup(f->text);
            *len = n;
            return *text ? 0 : -ENOMEM;
        }
    return -ENOENT;
}

/* A directory is every file's path prefix: its names are the next parts. */
static int fake_list(const struct discover_host *h, const char *path, char ***names,
                     size_t *count)
{
    struct fake_machine *m = h->data;
    size_t pl = strlen(path), n = 0;
    char **v = calloc(64, sizeof *v);
    m->lists++;
    if (!v)
        return -ENOMEM;
    for (const struct fake_file *f = m->files; f && f->path && n < 64; f++)
        if (!strncmp(f->path, path, pl) && f->path[pl] == '/' && !strchr(f->path + pl + 1, '/'))
            v[n++] = strdup(f->path + pl + 1);
    if (!n) {
        free(v);
        return -ENOENT;
    }
    *names = v;
    *count = n;
    return 0;
}

static int fake_self(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out)
{
    struct fake_machine *m = h->data;
    if (with_fqdn)
        m->fqdn_lookups++;
    out->hostname = m->hostname;
    out->fqdn = with_fqdn ? m->fqdn : NULL;
    out->addrs = m->addrs;
    out->naddrs = m->naddrs;
    return 0;
}

static void fake_host_init(struct discover_host *h, struct fake_machine *m)
{
    h->read_file = fake_read;
    h->list_dir = fake_list;
    h->self = fake_self;
    h->data = m;
}

/* podrun's layers for a pod with this environment (NULL-terminated) and these flags (NULL-
 * terminated, the program "train.py" added), on machine m (NULL: none). */
static int load_pod(struct cfg *c, char **env, struct fake_machine *m, const char *const *flags)
{
    static char *argv[32]; /* the config keeps pointers to its program */
    argv[0] = "podrun";
    int argc = 1;
    for (size_t i = 0; flags && flags[i] && argc < 30; i++)
        argv[argc++] = (char *)flags[i];
    argv[argc++] = "train.py";
    struct discover_host h;
    if (m)
        fake_host_init(&h, m);
    cfg_init(c);
    err[0] = '\0';
    int r = frontend_load_host(&fe_podrun, c, argc, argv, env, m ? &h : NULL, err, sizeof err);
    if (!r && (r = cfg_finalize(c, 8, 0, err, sizeof err)) != 0)
        return r;
    return r;
}

#define FLAGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The --print-config line of `name`: its value and its source, as podrun prints them. */
static int printed(const struct cfg *c, const char *name, char *value, char *source, size_t cap)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int found = 0;
    if (!f)
        return 0;
    cfg_print(c, f);
    fclose(f);
    size_t nl = strlen(name);
    for (char *line = buf; line && *line && !found;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        if (!strncmp(line, name, nl) && line[nl] == ' ') {
            char *v = line + nl, *open = line + strlen(line) - 1;
            while (*v == ' ')
                v++;
            /* the source is the last "( ... )"; a value or a source may hold parentheses */
            for (int depth = 0; open > v; open--) {
                depth += *open == ')' ? 1 : *open == '(' ? -1 : 0;
                if (depth == 0)
                    break;
            }
            size_t vl = (size_t)(open - v);
            while (vl && v[vl - 1] == ' ')
                vl--;
            snprintf(value, cap, "%.*s", (int)vl, v);
            snprintf(source, cap, "%.*s", (int)(strlen(open) - 2), open + 1);
            found = 1;
        }
        line = end ? end + 1 : NULL;
    }
    free(buf);
    return found;
}

/* value and source of a setting, exactly */
#define CHECK_SETTING(c, name, value, source)                                          \
    do {                                                                               \
        char v_[256] = "", s_[256] = "";                                               \
        CHECK(printed((c), (name), v_, s_, sizeof v_));                                \
        CHECK_EQ_STR(v_, (value));                                                     \
        CHECK_EQ_STR(s_, (source));                                                    \
    } while (0)

/* an error that names every one of the needles */
#define CHECK_ERR(r, ...)                                                              \
    do {                                                                               \
        const char *needles_[] = {__VA_ARGS__, NULL};                                  \
        CHECK((r) < 0);                                                                \
        for (int i_ = 0; needles_[i_]; i_++)                                           \
            if (!strstr(err, needles_[i_])) {                                          \
                fprintf(stderr, "error '%s' lacks '%s'\n", err, needles_[i_]);         \
                CHECK(0);                                                              \
            }                                                                          \
    } while (0)

#endif
