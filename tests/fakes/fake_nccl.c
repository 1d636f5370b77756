/* tests/fakes/fake_nccl.c — a libnccl.so.2 whose ranks meet through files, for the nccl check.
 *
 * The processes of one communicator share the directory $PODRUN_FAKE_NCCL_DIR. A rank that calls
 * ncclCommInitRankConfig writes <dir>/<id>.join.<rank>, where <id> is the unique id's text (so
 * ranks that were given different ids never meet: the id must travel intact); the communicator
 * is ready once all nranks have joined. ncclAllReduce writes the rank's first element to
 * <dir>/<id>.ar<seq>.<rank> and keeps the caller's stream busy (fake_cuda.h) until every rank's
 * file of that call is there and the transfer time at $PODRUN_FAKE_NCCL_GBPS (bus bandwidth in
 * GB/s, default 100) has passed; then every element of the result is the sum of the ranks'
 * first elements. Only non-blocking communicators are accepted, with a config of the layout
 * podrun passes.
 *
 * $PODRUN_FAKE_NCCL picks a fault for this process: hang_init (its communicator never becomes
 * ready), fail_init (ncclSystemError), wrong (the sum comes back off by one). $PODRUN_FAKE_NCCL_LOG
 * names a file that gets "init RANK/NRANKS", "abort RANK" and "destroy RANK" lines. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/fakes/fake_cuda.h"
#include "launcher/preflight/nccl_abi.h"

struct ncclComm {
    char id[64];
    int rank, nranks, seq;
    char mode[32];
    char last[256];
};

struct fake_op {
    struct fake_op *prev;  /* queued before it on the stream, until that one is done */
    struct ncclComm *comm;
    int seq;
    float *recv;
    size_t count;
    double ready_at;   /* the transfer time, counted from when all ranks were in */
    double all_in;     /* when every rank's file was first seen, 0: not yet */
    double seconds;
    int done;
};

static void fake_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fake_log(const char *fmt, ...)
{
    const char *path = getenv("PODRUN_FAKE_NCCL_LOG");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static int fake_op_busy(void *arg);

static double fake_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static const char *fake_dir(void)
{
    const char *d = getenv("PODRUN_FAKE_NCCL_DIR");
    return d && *d ? d : NULL;
}

/* A rank's file appears whole or not at all (written aside, then renamed): another rank that
 * sees it reads its value, never an empty file that fopen has just created. */
static int fake_write(const char *name, const char *text)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", fake_dir(), name);
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fputs(text, f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int fake_read(const char *name, char *buf, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", fake_dir(), name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return (int)n;
}

ncclResult_t ncclGetVersion(int *v)
{
    *v = 22803;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    static const char *const s[] = {"no error", "unhandled cuda error", "unhandled system error",
                                    "internal error", "invalid argument", "invalid usage",
                                    "remote process exited or there was a network error",
                                    "NCCL operation in progress"};
    return r >= 0 && r <= ncclInProgress ? s[r] : "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    return comm ? comm->last : "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    unsigned seed = (unsigned)getpid() ^ (unsigned)(fake_now() * 1e6);
    snprintf(id->internal, sizeof id->internal, "fakeid%08x%08x", rand_r(&seed), rand_r(&seed));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *cfg)
{
    *out = NULL;
    if (!cfg || cfg->magic != 0xcafebeef || cfg->size < sizeof *cfg || cfg->blocking != 0)
        return ncclInvalidArgument;
    if (!fake_dir() || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    if (strncmp(id.internal, "fakeid", 6) != 0)
        return ncclInvalidUsage;   /* not an id this library made: it did not travel intact */
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    snprintf(c->id, sizeof c->id, "%.40s", id.internal);
    c->rank = rank;
    c->nranks = nranks;
    const char *mode = getenv("PODRUN_FAKE_NCCL");
    snprintf(c->mode, sizeof c->mode, "%s", mode ? mode : "ok");
    *out = c;
    fake_log("init %d/%d", rank, nranks);
    if (!strcmp(c->mode, "fail_init")) {
        snprintf(c->last, sizeof c->last, "fake: NET/IB : No device found");
        return ncclSystemError;
    }
    char name[128];
    snprintf(name, sizeof name, "%s.join.%d", c->id, rank);
    fake_write(name, "1");
    return ncclInProgress;
}

/* Whether every rank has written <id>.<what>.<rank>. */
static int fake_all(struct ncclComm *c, const char *what)
{
    for (int r = 0; r < c->nranks; r++) {
        char name[128], buf[8];
        snprintf(name, sizeof name, "%s.%s.%d", c->id, what, r);
        if (fake_read(name, buf, sizeof buf) < 0)
            return 0;
    }
    return 1;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
    if (!c)
        return ncclInvalidArgument;
    if (!strcmp(c->mode, "hang_init") || !fake_all(c, "join"))
        *state = ncclInProgress;
    else
        *state = ncclSuccess;
    return ncclSuccess;
}

/* The stream's hook: busy until every rank's part is in and the transfer time has passed. */
static int fake_op_busy(void *arg)
{
    struct fake_op *op = arg;
    if (op->done)
        return 0;
    if (op->prev) {
        if (fake_op_busy(op->prev))
            return 1;
        free(op->prev);
        op->prev = NULL;
    }
    char what[32];
    snprintf(what, sizeof what, "ar%d", op->seq);
    if (!op->all_in) {
        if (!fake_all(op->comm, what))
            return 1;
        op->all_in = fake_now();
    }
    if (fake_now() < op->all_in + op->seconds)
        return 1;
    float sum = 0;
    for (int r = 0; r < op->comm->nranks; r++) {
        char name[128], buf[64];
        snprintf(name, sizeof name, "%s.%s.%d", op->comm->id, what, r);
        if (fake_read(name, buf, sizeof buf) > 0)
            sum += strtof(buf, NULL);
    }
    if (!strcmp(op->comm->mode, "wrong"))
        sum += 1;
    for (size_t i = 0; i < op->count; i++)
        op->recv[i] = sum;
    op->done = 1;
    return 0;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op,
                           ncclComm_t c, cudaStream_t stream)
{
    struct fake_stream *s = (struct fake_stream *)stream;
    if (!c || dtype != ncclFloat32 || op != ncclSum || !s || s->magic != FAKE_STREAM_MAGIC)
        return ncclInvalidArgument;
    struct fake_op *o = calloc(1, sizeof *o);
    if (!o)
        return ncclSystemError;
    o->comm = c;
    o->seq = ++c->seq;
    o->recv = recv;
    o->count = count;
    const char *gbps = getenv("PODRUN_FAKE_NCCL_GBPS");
    double bus = (gbps ? atof(gbps) : 100) * 1e9;
    double factor = c->nranks > 1 ? 2.0 * (c->nranks - 1) / c->nranks : 1.0;
    o->seconds = bus > 0 ? count * sizeof(float) * factor / bus : 0;
    char name[128], val[64];
    snprintf(name, sizeof name, "%s.ar%d.%d", c->id, o->seq, c->rank);
    snprintf(val, sizeof val, "%.9g", count ? (double)((const float *)send)[0] : 0.0);
    fake_write(name, val);
    /* the previous operation on the stream runs first, as on a real stream */
    o->prev = s->op;
    s->op = o;
    s->busy = fake_op_busy;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    return c ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!c)
        return ncclInvalidArgument;
    fake_log("destroy %d", c->rank);
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c)
        return ncclInvalidArgument;
    fake_log("abort %d", c->rank);
    free(c);
    return ncclSuccess;
}
