/* launcher/devices/dl.c — optional native libraries, loaded at run time (see dl.h). */
#include "launcher/devices/dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int dl_open(dl_lib_t *lib, const char *name, char *err, size_t errlen)
{
    snprintf(lib->name, sizeof lib->name, "%s", name);
    dlerror();
    lib->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        const char *why = dlerror();
        /* dlerror already names the file ("libx.so.1: cannot open shared object file: ..."); say
         * the name once either way. */
        if (why && strncmp(why, name, strlen(name)) == 0)
            snprintf(err, errlen, "%s", why);
        else
            snprintf(err, errlen, "%s: %s", name, why ? why : "cannot be loaded");
        return -ENOENT;
    }
    return 0;
}

/* dlsym's result is an object pointer; POSIX guarantees it converts to a function pointer of the
 * same size, and memcpy keeps that conversion out of the compiler's way. */
static void dl_store(void *slot, void *addr)
{
    memcpy(slot, &addr, sizeof addr);
}

int dl_bind(dl_lib_t *lib, const dl_sym_t *syms, size_t n, char *err, size_t errlen)
{
    if (!lib->handle) {
        snprintf(err, errlen, "%s: not loaded", lib->name);
        return -ENOENT;
    }
    for (size_t i = 0; i < n; i++) {
        void *addr = syms[i].version ? dlvsym(lib->handle, syms[i].name, syms[i].version)
                                     : dlsym(lib->handle, syms[i].name);
        dl_store(syms[i].slot, addr);
        if (!addr && !syms[i].optional) {
            if (syms[i].version)
                snprintf(err, errlen, "%s: no symbol %s (version %s)", lib->name, syms[i].name,
                         syms[i].version);
            else
                snprintf(err, errlen, "%s: no symbol %s", lib->name, syms[i].name);
            return -ENOENT;
        }
    }
    return 0;
}

void dl_close(dl_lib_t *lib)
{
    if (lib->handle)
        dlclose(lib->handle);
    lib->handle = NULL;
}
