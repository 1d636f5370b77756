/* tests/unit/launcher/discover/test_identity.c — this node's name and address, and the machine
 * as discovery reads it (files with a bound, directories, names and addresses). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "launcher/config/config.h"
#include "launcher/discover/identity.h"

static void test_identity(void)
{
    struct cfg c;
    struct identity id;
    char hn[128] = "";
    gethostname(hn, sizeof hn - 1);
    cfg_init(&c);
    identity_resolve(&id, &c);
    CHECK_EQ_STR(id.name, hn[0] ? hn : "localhost"); /* the host name by default */
    CHECK_EQ_STR(id.host, id.name);
    struct cfg_src src = {CFG_SRC_PODRUN, "PODRUN_NODE_NAME"};
    char err[256];
    CHECK_EQ_INT(cfg_set(&c, CFG_NODE_NAME, "worker-3", &src, err, sizeof err), 0);
    CHECK_EQ_INT(cfg_set(&c, CFG_LOCAL_ADDR, "10.1.2.3", &src, err, sizeof err), 0);
    identity_resolve(&id, &c);
    CHECK_EQ_STR(id.name, "worker-3");
    CHECK_EQ_STR(id.host, "10.1.2.3");
    cfg_free(&c);
}

/* Who this pod is, as the downward API says: POD_NAME first, then HOSTNAME, then the host name;
 * an empty variable counts as unset. */
static void test_pod_name(void)
{
    char buf[IDENTITY_NAME_MAX], hn[256] = "";
    gethostname(hn, sizeof hn - 1);
    setenv("POD_NAME", "train-worker-1", 1);
    setenv("HOSTNAME", "train-worker-1-host", 1);
    CHECK_EQ_STR(identity_pod_name(buf, sizeof buf), "train-worker-1");
    setenv("POD_NAME", "", 1);
    CHECK_EQ_STR(identity_pod_name(buf, sizeof buf), "train-worker-1-host");
    unsetenv("POD_NAME");
    CHECK_EQ_STR(identity_pod_name(buf, sizeof buf), "train-worker-1-host");
    setenv("HOSTNAME", "", 1);
    const char *name = identity_pod_name(buf, sizeof buf);
    CHECK(name == buf);
    CHECK_EQ_STR(name, hn);
    unsetenv("HOSTNAME");
    CHECK_EQ_STR(identity_pod_name(buf, sizeof buf), hn);
}

static void test_pod_ip(void)
{
    setenv("POD_IP", "10.4.0.17", 1);
    CHECK_EQ_STR(identity_pod_ip(), "10.4.0.17");
    setenv("POD_IP", "", 1);
    CHECK(identity_pod_ip() == NULL);
    unsetenv("POD_IP");
    CHECK(identity_pod_ip() == NULL);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_machine_files(void)
{
    struct discover_host h;
    struct identity_machine m;
    char dir[] = "/tmp/podrun_identity_XXXXXX", path[256];
    char *text = NULL, **names = NULL;
    size_t len = 0, n = 0;
    identity_host_init(&h, &m);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/worker.host", dir);
    put(path, "a.j\nb.j\n");
    CHECK_EQ_INT(h.read_file(&h, path, 100, &text, &len), 0);
    CHECK_EQ_STR(text, "a.j\nb.j\n");
    CHECK_EQ_INT(len, 8);
    free(text);
    /* bounded: a file longer than asked is refused, not read */
    CHECK_EQ_INT(h.read_file(&h, path, 7, &text, &len), -EFBIG);
    CHECK_EQ_INT(h.read_file(&h, path, 8, &text, &len), 0);
    free(text);
    CHECK_EQ_INT(h.read_file(&h, dir, 100, &text, &len), -EISDIR);
    CHECK_EQ_INT(h.read_file(&h, "/dev/null", 100, &text, &len), -EINVAL);
    snprintf(path, sizeof path, "%s/none", dir);
    CHECK_EQ_INT(h.read_file(&h, path, 100, &text, &len), -ENOENT);
    /* a ConfigMap volume: names sorted, its ..data links left out */
    snprintf(path, sizeof path, "%s/master.host", dir);
    put(path, "m.j\n");
    snprintf(path, sizeof path, "%s/..data", dir);
    mkdir(path, 0700);
    CHECK_EQ_INT(h.list_dir(&h, dir, &names, &n), 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_STR(names[0], "master.host");
        CHECK_EQ_STR(names[1], "worker.host");
    }
    discover_names_free(names, n);
    CHECK_EQ_INT(h.list_dir(&h, "/nonexistent/podrun", &names, &n), -ENOENT);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

static void test_machine_names(void)
{
    struct discover_host h;
    struct identity_machine m;
    struct hostfile_self me;
    char hn[256] = "";
    gethostname(hn, sizeof hn - 1);
    identity_host_init(&h, &m);
    CHECK_EQ_INT(h.self(&h, false, &me), 0);
    CHECK_EQ_STR(me.hostname, hn);
    CHECK(me.fqdn == NULL);       /* only asked for when wanted */
    CHECK(!m.have_fqdn);
    bool loopback = false;
    for (size_t i = 0; i < me.naddrs; i++)
        loopback |= !strcmp(me.addrs[i], "127.0.0.1");
    CHECK(loopback);
    CHECK_EQ_INT(h.self(&h, true, &me), 0);
    CHECK(m.have_fqdn);
    CHECK(me.fqdn == NULL || me.fqdn[0]);
}

int main(void)
{
    RUN(test_identity);
    RUN(test_pod_name);
    RUN(test_pod_ip);
    RUN(test_machine_files);
    RUN(test_machine_names);
    return check_result();
}
