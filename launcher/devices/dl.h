/* launcher/devices/dl.h — optional native libraries, loaded at run time.
 *
 * NVML, libibverbs (and, in the preflight child only, NCCL and the CUDA runtime; `podrun env`
 * loads NCCL for its version, never the agent) are never linked:
 * one podrun binary runs on a CPU-only laptop and on a GPU node. A library is opened with
 * RTLD_NOW | RTLD_LOCAL, so its symbols neither resolve lazily into a crash later nor leak into
 * the global namespace, and its entry points are bound from a table in one call. A missing
 * required symbol fails the bind with a line naming the library and the symbol; a missing
 * optional one leaves its slot NULL, which callers treat as "the installed version cannot". */
#ifndef PODRUN_DEVICES_DL_H
#define PODRUN_DEVICES_DL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct dl_lib {
    void *handle;        /* NULL: not open */
    char name[256];      /* what was asked for: a SONAME or a path */
} dl_lib_t;

/* One entry point to bind. `slot` points at a function-pointer variable; it is written with the
 * symbol's address (or NULL). `version` asks for exactly that symbol version (dlvsym): libibverbs
 * exports some functions at two versions with different structs, and only one is podrun's. */
typedef struct dl_sym {
    const char *name;
    const char *version; /* NULL: the default version */
    void *slot;          /* address of a function pointer */
    bool optional;
} dl_sym_t;

/* Opens `name` (a SONAME looked up the usual way, or a path). On failure returns -ENOENT and
 * leaves "NAME: <dlerror text>" in err. */
int dl_open(dl_lib_t *lib, const char *name, char *err, size_t errlen);

/* Binds every entry of syms (n entries). Returns -ENOENT on the first required symbol that is
 * missing, with "NAME: no symbol SYM" (and the version when one was asked) in err; the slots
 * bound before it keep their values. */
int dl_bind(dl_lib_t *lib, const dl_sym_t *syms, size_t n, char *err, size_t errlen);

/* Closes the library (a no-op when not open). */
void dl_close(dl_lib_t *lib);

#endif
