/* launcher/devices/torchlib.h — which NCCL (and CUDA runtime) the workers' torch loads.
 *
 * A torch wheel from PyPI carries NCCL and the CUDA runtime in its own site-packages
 * (nvidia/nccl/lib/libnccl.so.2, nvidia/cu13/lib/libcudart.so.13), and its libtorch_cuda.so names
 * those directories in its RPATH ($ORIGIN/../../nvidia/nccl/lib, ...), which the loader searches
 * before LD_LIBRARY_PATH and the system's libraries: that file, not the libnccl.so.2 on the
 * loader's path (/usr/local/cuda, ldconfig), is the NCCL the workers run. Only a torch without
 * such a tree (built from source, a distribution's) takes the loader's.
 *
 * Where torch is, only the interpreter the workers run knows (its sys.path: a venv, PYTHONPATH,
 * the user's site-packages), so it is asked: python -c with importlib's find_spec, which locates
 * the package without importing it (a fraction of a second, no CUDA). */
#ifndef PODRUN_DEVICES_TORCHLIB_H
#define PODRUN_DEVICES_TORCHLIB_H

#include <limits.h>
#include <stddef.h>

struct torchlib {
    char torch[PATH_MAX];   /* torch's package directory; "" when the python has none */
    char nccl[PATH_MAX];    /* the wheel's libnccl.so.2; "": the loader's path decides */
    char cudart[PATH_MAX];  /* the wheel's libcudart.so.N; "": the loader's path decides */
};

/* Asks `python` (a path, or a name looked up in PATH), run with envp, where its torch is, and
 * fills `out` with the libraries that torch carries. 0 when the python answered (out's fields
 * may be ""), or a negative code with err naming the python and why (cannot be run, no answer
 * within a few seconds). */
int torchlib_find(const char *python, char *const envp[], struct torchlib *out, char *err,
                  size_t errlen);

/* ncclGetVersion's code as NCCL writes its version: 23007 -> "2.30.7", 2708 -> "2.7.8". */
void torchlib_nccl_version_text(int code, char *buf, size_t len);

/* Loads NCCL (`path`, or libnccl.so.2 from the loader's path when NULL), in this process, and
 * says which file was loaded and its version ("2.30.7"). 0, or -ENOENT with err saying why (the
 * file cannot be loaded, it has no ncclGetVersion). */
int torchlib_nccl_probe(const char *path, char *file, size_t flen, char *version, size_t vlen,
                        char *err, size_t errlen);

#endif
