/* launcher/preflight/nccl_child.c — `podrun preflight-nccl`: one GPU's part of the nccl check, in
 * a process of its own that the agent execs (nccl_helpers.h), so CUDA and NCCL are initialised
 * here and never in the agent, whose forked workers must start clean.
 *
 *   podrun preflight-nccl --store=HOST:PORT --key=KEY --rank=R --nranks=N --device=D
 *                         --bytes=B --timeout-ms=T [--nccl-lib=PATH] [--cudart-lib=PATH]
 *                         [--python=PATH]
 *
 * Loads the CUDA runtime and NCCL with dlopen — those named, else the ones the torch of the
 * workers' python (--python) carries in its wheel, which that torch loads before the loader's
 * path (torchlib.h), else the loader's — selects device D, allocates its buffers, gets the
 * communicator's unique id through the job store (rank 0 creates it and SETs KEY once it is ready,
 * the others WAIT for it, each wait and step bounded by T), initialises
 * the communicator non-blocking and polls it against a deadline — a rank that does not arrive, or
 * a node that hangs inside NCCL, ends in ncclCommAbort and a named failure, never in a hung check
 * — then runs an all_reduce of B bytes (sum of floats: each element must come back as
 * N(N+1)/2, every rank having sent rank+1), and times ten more. The bus bandwidth is
 * nccl-tests': B / t x 2(N-1)/N. NCCL's non-blocking API is polled (ncclCommGetAsyncError,
 * cudaStreamQuery), a millisecond apart: it has no completion to wait on.
 *
 * The result is one line on what was stdout when the process started (the agent's pipe); stdout
 * itself is pointed at stderr, so whatever the libraries print cannot be taken for it:
 *   ok busbw=B algbw=B seconds=S version=V          (exit 0)
 *   fail stage=STAGE REASON                         (exit 1)
 * A failure after NCCL is loaded names its version and file at the end of REASON.
 * Stages: usage, load, device, id, memory, init, allreduce, verify. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher/commands/commands.h"
#include "launcher/devices/dl.h"
#include "launcher/devices/torchlib.h"
#include "podrun/store.h"
#include "launcher/preflight/nccl_abi.h"
#include "rdzv/base/common.h"

#define PF_TIMED_ITERS 10
#define PF_FILL_CHUNK (4u << 20)

static int pf_out = 1;   /* the result line's descriptor */
static char pf_nccl_said[PATH_MAX + 32];   /* "NCCL 2.30.7, FILE" once loaded: ends each failure */

extern char **environ;

struct pf_cuda {
    dl_lib_t lib;
    cudaError_t (*setDevice)(int);
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    cudaError_t (*memcpy_)(void *, const void *, size_t, int);
    cudaError_t (*streamCreateWithFlags)(cudaStream_t *, unsigned);
    cudaError_t (*streamQuery)(cudaStream_t);
    cudaError_t (*streamDestroy)(cudaStream_t);
    const char *(*errorString)(cudaError_t);
};

struct pf_nccl {
    dl_lib_t lib;
    ncclResult_t (*getVersion)(int *);
    ncclResult_t (*getUniqueId)(ncclUniqueId *);
    ncclResult_t (*initRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*getAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*abort_)(ncclComm_t);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*finalize)(ncclComm_t);
    ncclResult_t (*allReduce)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
    const char *(*errorString)(ncclResult_t);
    const char *(*lastError)(ncclComm_t);
};

struct pf_opts {
    char host[256];
    uint16_t port;
    const char *key, *nccl_lib, *cudart_lib, *python;
    long rank, nranks, device;
    uint64_t bytes, timeout_ms;
};

static int pf_result(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pf_result(int code, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    if (code && pf_nccl_said[0]) {
        int k = snprintf(line + n, sizeof line - 1 - (size_t)n, " (%s)", pf_nccl_said);
        if (k > 0)
            n = (size_t)k < sizeof line - 1 - (size_t)n ? n + k : (int)sizeof line - 2;
    }
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    (void)!write(pf_out, line, (size_t)n);
    return code;
}

static double pf_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void pf_nap(void)
{
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
}

static int pf_load_cuda(struct pf_cuda *c, const char *path, char *err, size_t len)
{
    /* the newest runtime first; "libcudart.so" is the toolkit's development link */
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                        "libcudart.so"};
    int r = -ENOENT;
    if (path)
        r = dl_open(&c->lib, path, err, len);
    for (size_t i = 0; !path && r < 0 && i < sizeof names / sizeof *names; i++)
        r = dl_open(&c->lib, names[i], err, len);
    if (r < 0)
        return r;
    const dl_sym_t syms[] = {
        {"cudaSetDevice", NULL, &c->setDevice, false},
        {"cudaMalloc", NULL, &c->malloc_, false},
        {"cudaFree", NULL, &c->free_, false},
        {"cudaMemcpy", NULL, &c->memcpy_, false},
        {"cudaStreamCreateWithFlags", NULL, &c->streamCreateWithFlags, false},
        {"cudaStreamQuery", NULL, &c->streamQuery, false},
        {"cudaStreamDestroy", NULL, &c->streamDestroy, false},
        {"cudaGetErrorString", NULL, &c->errorString, false},
    };
    return dl_bind(&c->lib, syms, sizeof syms / sizeof *syms, err, len);
}

static int pf_load_nccl(struct pf_nccl *n, const char *path, char *err, size_t len)
{
    int r = dl_open(&n->lib, path ? path : "libnccl.so.2", err, len);
    if (r < 0)
        return r;
    const dl_sym_t syms[] = {
        {"ncclGetVersion", NULL, &n->getVersion, false},
        {"ncclGetUniqueId", NULL, &n->getUniqueId, false},
        {"ncclCommInitRankConfig", NULL, &n->initRankConfig, false},
        {"ncclCommGetAsyncError", NULL, &n->getAsyncError, false},
        {"ncclCommAbort", NULL, &n->abort_, false},
        {"ncclCommDestroy", NULL, &n->destroy, false},
        {"ncclCommFinalize", NULL, &n->finalize, true},
        {"ncclAllReduce", NULL, &n->allReduce, false},
        {"ncclGetErrorString", NULL, &n->errorString, false},
        {"ncclGetLastError", NULL, &n->lastError, true},
    };
    return dl_bind(&n->lib, syms, sizeof syms / sizeof *syms, err, len);
}

static const char *pf_nccl_why(struct pf_nccl *n, ncclComm_t comm, ncclResult_t r, char *buf,
                               size_t len)
{
    const char *last = n->lastError ? n->lastError(comm) : NULL;
    snprintf(buf, len, "%s%s%s", n->errorString(r), last && *last ? ": " : "",
             last ? last : "");
    return buf;
}

/* Polls the communicator until it leaves ncclInProgress or the deadline passes (then 1). */
static int pf_settle(struct pf_nccl *n, ncclComm_t comm, double deadline, ncclResult_t *state)
{
    for (;;) {
        ncclResult_t r = n->getAsyncError(comm, state);
        if (r != ncclSuccess) {
            *state = r;
            return 0;
        }
        if (*state != ncclInProgress)
            return 0;
        if (pf_now() > deadline)
            return 1;
        pf_nap();
    }
}

/* Waits for the stream's work: 0 done, 1 deadline, -1 a CUDA or NCCL error (why filled). */
static int pf_drain(struct pf_cuda *c, struct pf_nccl *n, ncclComm_t comm, cudaStream_t s,
                    double deadline, char *why, size_t len)
{
    for (;;) {
        cudaError_t e = c->streamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            snprintf(why, len, "cudaStreamQuery: %s", c->errorString(e));
            return -1;
        }
        ncclResult_t state;
        if (n->getAsyncError(comm, &state) == ncclSuccess && state != ncclSuccess &&
            state != ncclInProgress) {
            char b[300];
            snprintf(why, len, "%s", pf_nccl_why(n, comm, state, b, sizeof b));
            return -1;
        }
        if (pf_now() > deadline)
            return 1;
        pf_nap();
    }
}

/* Rank 0 creates the unique id and publishes it; the others wait for it, bounded. */
static int pf_unique_id(const struct pf_opts *o, struct pf_nccl *n, ncclUniqueId *id,
                        double deadline)
{
    int ms = (int)((deadline - pf_now()) * 1000);
    podrun_store_t *s = NULL;
    int r = podrun_store_connect(o->host, o->port, ms > 1000 ? ms : 1000, &s);
    if (r < 0)
        return pf_result(1, "fail stage=id cannot reach the job store at %s:%u: %s", o->host,
                         o->port, podrun_store_strerror(r));
    if (o->rank == 0) {
        ncclResult_t nr = n->getUniqueId(id);
        if (nr != ncclSuccess) {
            podrun_store_close(s);
            return pf_result(1, "fail stage=id ncclGetUniqueId: %s", n->errorString(nr));
        }
        r = podrun_store_set(s, o->key, id, sizeof *id);
        if (r == 0)
            r = podrun_store_ping(s);   /* the SET is in before this process goes on */
    } else {
        const char *keys[] = {o->key};
        ms = (int)((deadline - pf_now()) * 1000);
        r = podrun_store_wait(s, keys, 1, ms > 0 ? ms : 1);
        char *val = NULL;
        size_t len = 0;
        if (r == PODRUN_ETIMEDOUT) {
            podrun_store_close(s);
            return pf_result(1, "fail stage=id rank 0 published no NCCL unique id within %.1fs",
                             o->timeout_ms / 1e3);
        }
        if (r == 0)
            r = podrun_store_get(s, o->key, &val, &len);
        if (r == 0 && len != sizeof *id)
            r = -EPROTO;
        if (r == 0)
            memcpy(id, val, sizeof *id);
        free(val);
    }
    podrun_store_close(s);
    if (r < 0)
        return pf_result(1, "fail stage=id the job store at %s:%u: %s", o->host, o->port,
                         podrun_store_strerror(r));
    return 0;
}

/* Every element of the send buffer is rank+1, written through a bounded host buffer. */
static int pf_fill(struct pf_cuda *c, float *dev, uint64_t count, float value)
{
    size_t chunk = count * sizeof(float) < PF_FILL_CHUNK ? (size_t)count * sizeof(float)
                                                           : PF_FILL_CHUNK;
    float *host = malloc(chunk);
    if (!host)
        return -ENOMEM;
    for (size_t i = 0; i < chunk / sizeof(float); i++)
        host[i] = value;
    cudaError_t e = cudaSuccess;
    for (uint64_t off = 0; off < count && e == cudaSuccess;) {
        uint64_t k = count - off < chunk / sizeof(float) ? count - off : chunk / sizeof(float);
        e = c->memcpy_(dev + off, host, (size_t)k * sizeof(float), cudaMemcpyHostToDevice);
        off += k;
    }
    free(host);
    return e == cudaSuccess ? 0 : -EIO;
}

/* One all_reduce enqueued; a non-blocking communicator may say "in progress" first. */
static ncclResult_t pf_enqueue(struct pf_nccl *n, ncclComm_t comm, const float *send,
                               float *recv, uint64_t count, cudaStream_t s, double deadline)
{
    ncclResult_t r = n->allReduce(send, recv, (size_t)count, ncclFloat32, ncclSum, comm, s);
    if (r == ncclInProgress) {
        ncclResult_t state;
        if (pf_settle(n, comm, deadline, &state))
            return ncclInProgress;
        r = state;
    }
    return r;
}

/* The communicator's part of the check, on buffers and a stream pf_run owns: the unique id, the
 * init against the deadline, the checked all_reduce and the timed ones; the communicator is
 * destroyed, or aborted on any failure, before it returns pf_result's code. *busy: an all_reduce
 * timed out, so the stream may still hold work that freeing would wait for. */
static int pf_comm_run(const struct pf_opts *o, struct pf_cuda *cu, struct pf_nccl *nc,
                       float *send, float *recv, cudaStream_t stream, uint64_t count, int version,
                       bool *busy)
{
    struct pf_cuda c = *cu;
    struct pf_nccl n = *nc;
    char why[512];
    double deadline;
    cudaError_t e;

    /* the id after the memory: rank 0 publishes it once it is ready itself, so the others,
     * waiting for it, start their init together with rank 0 */
    ncclUniqueId id;
    if (pf_unique_id(o, &n, &id, pf_now() + o->timeout_ms / 1e3))
        return 1;
    deadline = pf_now() + o->timeout_ms / 1e3;

    ncclConfig_t cfg = {sizeof cfg, NCCL_CONFIG_MAGIC, NCCL_CONFIG_VERSION_2_14, 0};
    ncclComm_t comm = NULL;
    ncclResult_t r = n.initRankConfig(&comm, (int)o->nranks, id, (int)o->rank, &cfg), state;
    if (r != ncclSuccess && r != ncclInProgress)
        return pf_result(1, "fail stage=init ncclCommInitRankConfig: %s",
                         pf_nccl_why(&n, comm, r, why, sizeof why));
    if (pf_settle(&n, comm, deadline, &state)) {
        n.abort_(comm);
        return pf_result(1, "fail stage=init timed out after %.1fs waiting for the %ld ranks to "
                         "connect; aborted", o->timeout_ms / 1e3, o->nranks);
    }
    if (state != ncclSuccess) {
        pf_nccl_why(&n, comm, state, why, sizeof why);
        n.abort_(comm);
        return pf_result(1, "fail stage=init %s", why);
    }

    /* once for correctness (and warm-up), then timed */
    double run_deadline = pf_now() + o->timeout_ms / 1e3;
    int d = 0;
    r = pf_enqueue(&n, comm, send, recv, count, stream, run_deadline);
    if (r == ncclSuccess)
        d = pf_drain(&c, &n, comm, stream, run_deadline, why, sizeof why);
    if (r != ncclSuccess || d) {
        if (r != ncclSuccess && r != ncclInProgress)
            pf_nccl_why(&n, comm, r, why, sizeof why);
        n.abort_(comm);
        *busy = r == ncclInProgress || d == 1;
        if (*busy)
            return pf_result(1, "fail stage=allreduce timed out after %.1fs; aborted",
                             o->timeout_ms / 1e3);
        return pf_result(1, "fail stage=allreduce %s", why);
    }
    float got[4] = {0};
    uint64_t check = count < 4 ? count : 4;
    float want = (float)(o->nranks * (o->nranks + 1) / 2);
    if (check && (e = c.memcpy_(got, recv, (size_t)check * sizeof(float),
                                cudaMemcpyDeviceToHost)) != cudaSuccess) {
        n.abort_(comm);
        return pf_result(1, "fail stage=verify cudaMemcpy: %s", c.errorString(e));
    }
    for (uint64_t i = 0; i < check; i++)
        if (got[i] != want) {
            n.abort_(comm);
            return pf_result(1, "fail stage=verify element %llu is %g, not %g: the sum over %ld "
                             "ranks is wrong", (unsigned long long)i, got[i], want, o->nranks);
        }
    double t0 = pf_now();
    for (int i = 0; i < PF_TIMED_ITERS && r == ncclSuccess; i++)
        r = pf_enqueue(&n, comm, send, recv, count, stream, run_deadline);
    d = r == ncclSuccess ? pf_drain(&c, &n, comm, stream, run_deadline, why, sizeof why) : 1;
    double t = (pf_now() - t0) / PF_TIMED_ITERS;
    if (r != ncclSuccess || d) {
        n.abort_(comm);
        *busy = d == 1 || r == ncclInProgress;
        return pf_result(1, "fail stage=allreduce %s", d == 1 || r == ncclInProgress
                         ? "timed out; aborted" : why);
    }
    if (n.finalize && n.finalize(comm) == ncclInProgress)
        pf_settle(&n, comm, pf_now() + o->timeout_ms / 1e3, &state);
    n.destroy(comm);
    double algbw = t > 0 ? (double)count * sizeof(float) / t : 0;
    double factor = o->nranks > 1 ? 2.0 * (o->nranks - 1) / o->nranks : 1.0;
    return pf_result(0, "ok busbw=%.0f algbw=%.0f seconds=%.6f version=%d", algbw * factor,
                     algbw, t, version);
}

/* One GPU's check: the libraries, the device, its buffers and stream, then the communicator's
 * part. The buffers and the stream are freed on every path but one: after an all_reduce that
 * timed out, freeing could wait on the stuck stream, and the process is about to exit, which
 * frees them anyway. The exit code is pf_result's: 0 ok, 1 a failure the result line names. */
static int pf_run(const struct pf_opts *o)
{
    struct pf_cuda c = {0};
    struct pf_nccl n = {0};
    char err[512];
    /* unnamed libraries are the workers' torch's; a python that cannot say leaves the loader's */
    struct torchlib tl = {0};
    if (o->python && (!o->nccl_lib || !o->cudart_lib))
        torchlib_find(o->python, environ, &tl, err, sizeof err);
    const char *nccl_lib = o->nccl_lib ? o->nccl_lib : tl.nccl[0] ? tl.nccl : NULL;
    const char *cudart_lib = o->cudart_lib ? o->cudart_lib : tl.cudart[0] ? tl.cudart : NULL;
    if (pf_load_cuda(&c, cudart_lib, err, sizeof err) < 0)
        return pf_result(1, "fail stage=load %s", err);
    if (pf_load_nccl(&n, nccl_lib, err, sizeof err) < 0)
        return pf_result(1, "fail stage=load %s", err);
    int version = 0;
    n.getVersion(&version);
    char file[PATH_MAX], text[16];
    if (torchlib_nccl_probe(nccl_lib, file, sizeof file, text, sizeof text, err, sizeof err) == 0)
        snprintf(pf_nccl_said, sizeof pf_nccl_said, "NCCL %s, %s", text, file);
    cudaError_t e = c.setDevice((int)o->device);
    if (e != cudaSuccess)
        return pf_result(1, "fail stage=device cudaSetDevice(%ld): %s", o->device,
                         c.errorString(e));
    uint64_t count = o->bytes / sizeof(float);
    float *send = NULL, *recv = NULL;
    cudaStream_t stream = NULL;
    int code;
    bool busy = false;
    if ((e = c.malloc_((void **)&send, (size_t)count * sizeof(float))) != cudaSuccess ||
        (e = c.malloc_((void **)&recv, (size_t)count * sizeof(float))) != cudaSuccess ||
        (e = c.streamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess)
        code = pf_result(1, "fail stage=memory %llu bytes on device %ld: %s",
                         (unsigned long long)o->bytes, o->device, c.errorString(e));
    else if (pf_fill(&c, send, count, (float)(o->rank + 1)) < 0)
        code = pf_result(1, "fail stage=memory cannot fill the send buffer");
    else
        code = pf_comm_run(o, &c, &n, send, recv, stream, count, version, &busy);
    if (busy)
        return code;
    if (stream)
        c.streamDestroy(stream);
    if (recv)
        c.free_(recv);
    if (send)
        c.free_(send);
    return code;
}

static int pf_usage(const char *what)
{
    return pf_result(2, "fail stage=usage %s (podrun preflight-nccl is started by podrun for "
                     "--preflight nccl)", what);
}

int pf_nccl_child_main(int argc, char **argv)
{
    /* the result goes where stdout was; anything the libraries print goes to stderr */
    int res = dup(1);
    if (res >= 0) {
        pf_out = res;
        dup2(2, 1);
    }
    static const struct option longs[] = {
        {"store", required_argument, NULL, 's'},     {"key", required_argument, NULL, 'k'},
        {"rank", required_argument, NULL, 'r'},      {"nranks", required_argument, NULL, 'n'},
        {"device", required_argument, NULL, 'd'},    {"bytes", required_argument, NULL, 'b'},
        {"timeout-ms", required_argument, NULL, 't'},{"nccl-lib", required_argument, NULL, 'N'},
        {"cudart-lib", required_argument, NULL, 'C'},{"python", required_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    struct pf_opts o = {.rank = -1, .nranks = -1, .device = -1};
    long v;
    int ch, port;
    bool given = false;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 's':
            if (podrun_hostport_parse(optarg, o.host, sizeof o.host, &port, &given) || !given ||
                port <= 0)
                return pf_usage("--store: expected HOST:PORT");
            o.port = (uint16_t)port;
            break;
        case 'k': o.key = optarg; break;
        case 'r': if (podrun_parse_int(optarg, 0, 1 << 24, &o.rank)) return pf_usage("--rank"); break;
        case 'n': if (podrun_parse_int(optarg, 1, 1 << 24, &o.nranks)) return pf_usage("--nranks"); break;
        case 'd': if (podrun_parse_int(optarg, 0, 1024, &o.device)) return pf_usage("--device"); break;
        case 'b':
            if (podrun_parse_int(optarg, 4, 1L << 40, &v))
                return pf_usage("--bytes");
            o.bytes = (uint64_t)v;
            break;
        case 't':
            if (podrun_parse_int(optarg, 1, 30L * 24 * 3600 * 1000, &v))
                return pf_usage("--timeout-ms");
            o.timeout_ms = (uint64_t)v;
            break;
        case 'N': o.nccl_lib = optarg; break;
        case 'C': o.cudart_lib = optarg; break;
        case 'P': o.python = optarg; break;
        default: return pf_usage("unknown option");
        }
    }
    if (!o.port || !o.key || o.rank < 0 || o.nranks < 1 || o.rank >= o.nranks || o.device < 0 ||
        !o.bytes || !o.timeout_ms)
        return pf_usage("--store, --key, --rank below --nranks, --device, --bytes and "
                        "--timeout-ms are needed");
    return pf_run(&o);
}
