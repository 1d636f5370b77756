/* launcher/discover/hostfile.h — every hostfile podrun reads, and finding this node's line.
 * Which slots of those hosts a job uses (DeepSpeed's --include/--exclude/--num_nodes/--num_gpus)
 * is launcher/discover/resources.h.
 *
 * Pure functions, no I/O: the caller reads the file (bounded) and gathers this machine's names;
 * everything here turns text and plain structs into plain structs, or into one error line that
 * names the file, the line and the fix.
 *
 * The files:
 *  - DeepSpeed's hostfile (`deepspeed -H`, default /job/hostfile). runner.py `_parse_hostfile`:
 *    each line is stripped; blank lines and lines starting with '#' are skipped; every other line
 *    must match `^(\S+)\s+slots=(\d+)` (the rest of the line is ignored, so "h slots=4 max_slots=8"
 *    and "h slots=4 # note" parse); a repeated host and a file with no host are errors. The three
 *    error texts are DeepSpeed's, word for word, with the file and line in front and the fix after.
 *  - Every other hostfile (HOSTFILE_ANY), one grammar for all of them:
 *      HOST                              Volcano's /etc/volcano/<task>.host, plain lists
 *      HOST slots=N [KEY=VALUE ...]      OpenMPI (MPIJob's /etc/mpi/hostfile): slots, cpu and
 *                                        count set slots; max_slots (max-slots, slots_max, ...)
 *                                        is kept; username, boards, sockets, cores, cpu_set, rank
 *                                        and slot are read and ignored; '=' may have spaces
 *      HOST:N [KEY=VALUE ...]            MPICH/Intel hydra (MPIJob with Intel MPI or MPICH)
 *    '#' starts a comment anywhere. An IPv6 address is a host, not HOST:N. A repeated host is an
 *    error (OpenMPI would add the slots up; podrun must find each pod's one line).
 * Both dialects: lines end at "\n", "\r\n" or "\r" (Python's universal newlines, as DeepSpeed
 * reads the file); a NUL or control byte, a line over HOSTFILE_LINE_MAX bytes, a host name over
 * HOSTFILE_NAME_MAX bytes, slots over HOSTFILE_SLOTS_MAX and more than HOSTFILE_HOSTS_MAX hosts
 * are errors. `user@host` is kept as written (DeepSpeed does; -i/-e name it that way). */
#ifndef PODRUN_DISCOVER_HOSTFILE_H
#define PODRUN_DISCOVER_HOSTFILE_H

#include <stddef.h>

#define HOSTFILE_HOSTS_MAX 65536 /* host lines in one file */
#define HOSTFILE_LINE_MAX 4096   /* bytes in one line, its line break not counted */
#define HOSTFILE_NAME_MAX 255    /* bytes in one host name */
#define HOSTFILE_SLOTS_MAX 1024  /* largest slots=N, and slot ids are below it */
#define HOSTFILE_SLOTS_UNSET (-1)

enum hostfile_dialect {
    HOSTFILE_DEEPSPEED, /* DeepSpeed's grammar and error texts: every line HOST slots=N */
    HOSTFILE_ANY,       /* HOST, HOST slots=N ..., HOST:N ... (see above) */
};

struct hostfile_entry {
    const char *host;   /* as written */
    int slots;          /* slots=N or HOST:N; HOSTFILE_SLOTS_UNSET if the line has none */
    int max_slots;      /* OpenMPI's max_slots=N, or HOSTFILE_SLOTS_UNSET */
    unsigned line;      /* 1-based line number */
};

struct hostfile {
    char *name;                     /* the file's name, for messages */
    size_t count;                   /* host lines, in file order: that order is node rank */
    struct hostfile_entry *entries;
    char *store;                    /* the host names live here */
};

/* Parses text[0..len) (NUL bytes in it are an error, not an end). `name` is the file's name in
 * messages. The caller frees hf with hostfile_free, also after an error. Returns 0 or a negative
 * errno with one line in err: -EINVAL (a bad line, a repeated host, no host), -E2BIG (more than
 * HOSTFILE_HOSTS_MAX hosts), -ENOMEM. When several things are wrong the first one in file order
 * is reported, as DeepSpeed does. */
int hostfile_parse(struct hostfile *hf, const char *text, size_t len,
                   enum hostfile_dialect dialect, const char *name, char *err, size_t errlen);

void hostfile_free(struct hostfile *hf);

/* "a, b, c" naming `count` hosts for a message, quoted, cut with "... (N in all)" to fit cap. The
 * names are the `host` fields of an array of entries or nodes: host points at the first one and
 * stride is the size of an element. */
void hostfile_hosts_text(char *out, size_t cap, const void *host, size_t stride, size_t count);

struct resources; /* launcher/discover/resources.h */

/* ---- which line is this node ---- */

/* This machine's names, gathered by the caller. */
struct hostfile_self {
    const char *hostname;      /* gethostname(): a pod's name in Kubernetes */
    const char *fqdn;          /* its canonical name, or NULL */
    const char *const *addrs;  /* its interfaces' addresses, IPv4 or IPv6 text */
    size_t naddrs;
};

/* Whether hostfile host `host` (after any "user@") names this machine, by the rule below. */
int hostfile_names_self(const char *host, const struct hostfile_self *me);

/* Finds the one line of hf that names this node, and its node rank: the line's index among the
 * active nodes (active NULL: among all lines). A line names this node when its host (after any
 * "user@") is one of its addresses, or equals its hostname or FQDN ignoring case and a trailing
 * dot, or, where one of the two names has no dot, equals the other's first label (the short name
 * of an FQDN: the MPIJob line "job-worker-0.job.ns.svc" is the pod "job-worker-0").
 * Returns 0 and sets *entry (index in hf->entries) and *node_rank; or one line in err and
 * -ENOENT (no line names this node), -EEXIST (two lines do, both named), -ESRCH (its line is not
 * among the active nodes). */
int hostfile_find_self(const struct hostfile *hf, const struct resources *active,
                       const struct hostfile_self *self, size_t *entry, size_t *node_rank,
                       char *err, size_t errlen);

#endif
