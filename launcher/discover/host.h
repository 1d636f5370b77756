/* launcher/discover/host.h — what discovery reads besides the environment: the files a scheduler
 * mounts into the pod (/etc/mpi/hostfile, /etc/volcano/<task>.host, a --hostfile) and this
 * machine's own names (host name, FQDN, every local address).
 *
 * The caller hands this view in: the agent the real machine (identity_host_init in
 * discover/identity.c), tests and fuzz targets a fixture. So the operator adapters and the hostfile
 * source stay pure code that can be run against any "pod" on any machine. */
#ifndef PODRUN_LAUNCHER_DISCOVER_HOST_H
#define PODRUN_LAUNCHER_DISCOVER_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "launcher/discover/hostfile.h"

/* Bytes of one file that discovery reads: a hostfile of HOSTFILE_HOSTS_MAX FQDNs with slots
 * fits. */
#define DISCOVER_FILE_MAX (8u << 20)
/* Names one directory listing returns (Volcano mounts three per task). */
#define DISCOVER_DIR_MAX 4096

struct discover_host {
    /* The whole file at `path` into *text (malloc'd, NUL-terminated; *len without the NUL).
     * 0; -ENOENT when it does not exist; -EFBIG when it is longer than max; else a -errno. */
    int (*read_file)(const struct discover_host *h, const char *path, size_t max, char **text,
                     size_t *len);
    /* The names in directory `path`, sorted, without those starting with '.' (a ConfigMap
     * volume's ..data links); an array of malloc'd strings, freed with discover_names_free.
     * 0; -ENOENT when the directory does not exist; else a -errno. */
    int (*list_dir)(const struct discover_host *h, const char *path, char ***names,
                    size_t *count);
    /* This machine's names: host name, FQDN (only when with_fqdn: it may ask the resolver) and
     * every address of its interfaces. The strings stay valid until the next call. 0 or -errno. */
    int (*self)(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out);
    void *data;
};

static inline void discover_names_free(char **names, size_t count)
{
    for (size_t i = 0; names && i < count; i++)
        free(names[i]);
    free(names);
}

#endif
