/* rdzv/base/curl_dl.c — libcurl loaded at run time, in every build.
 *
 * Only the Kubernetes API and etcd need HTTP, and most agents never talk it: linking libcurl
 * would map it and its TLS, GSS-API and IDN libraries into every agent and make a missing one a
 * loader error at start. The one-file build (meson -Dstatic=true) could not link it anyway:
 * Debian ships static archives of libuv, jansson and libyaml, but not of everything its
 * libcurl.a is built against (MIT Kerberos' GSS-API libraries and p11-kit have no .a). So
 * this file defines the libcurl calls rdzv/base/http.c makes and forwards each to the image's own
 * libcurl.so.4 (any flavour: OpenSSL, GnuTLS, NSS), opened on first use. A job that never talks
 * HTTP never loads it, and one that does in an image without libcurl gets a line saying which
 * package to add (http_library_error) instead of a loader error at start.
 *
 * libcurl's ABI (soname 4) is stable: option numbers encode the argument's type, which is what
 * lets the variadic setopt calls be forwarded without knowing every option. Options a libcurl
 * older than the headers does not know are rejected by it with CURLE_UNKNOWN_OPTION, which
 * http.c handles. */
#define CURL_DISABLE_TYPECHECK /* these definitions are the functions the macros would check */
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "rdzv/base/http.h"

#ifndef CURLOPTTYPE_BLOB
#define CURLOPTTYPE_BLOB 40000
#endif

/* The shared objects tried, in order: Debian/Ubuntu's and RHEL's OpenSSL build, then Debian's
 * GnuTLS and NSS builds (libcurl3-gnutls is often there already: git depends on it). */
static const char *const curl_sonames[] = {"libcurl.so.4", "libcurl-gnutls.so.4",
                                           "libcurl-nss.so.4"};

typedef void (*fnptr_t)(void);

static struct {
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    const char *(*multi_strerror)(CURLMcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} fn;

#define SYM(name, field) {name, offsetof(__typeof__(fn), field)}
static const struct {
    const char *name;
    size_t off;
} syms[] = {
    SYM("curl_global_init", global_init),
    SYM("curl_global_cleanup", global_cleanup),
    SYM("curl_easy_init", easy_init),
    SYM("curl_easy_cleanup", easy_cleanup),
    SYM("curl_easy_setopt", easy_setopt),
    SYM("curl_easy_getinfo", easy_getinfo),
    SYM("curl_easy_strerror", easy_strerror),
    SYM("curl_multi_init", multi_init),
    SYM("curl_multi_cleanup", multi_cleanup),
    SYM("curl_multi_add_handle", multi_add_handle),
    SYM("curl_multi_remove_handle", multi_remove_handle),
    SYM("curl_multi_setopt", multi_setopt),
    SYM("curl_multi_socket_action", multi_socket_action),
    SYM("curl_multi_assign", multi_assign),
    SYM("curl_multi_info_read", multi_info_read),
    SYM("curl_multi_strerror", multi_strerror),
    SYM("curl_slist_append", slist_append),
    SYM("curl_slist_free_all", slist_free_all),
};
#undef SYM

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;            /* every symbol is resolved */
static char load_error[512];  /* why not, for http_library_error */

/* Opens the first libcurl that has every call podrun makes; the first failure is kept as the
 * reason, since "not found" under the usual name is what the user needs to hear. */
static void load(void)
{
    char first[256] = "";
    for (size_t i = 0; i < sizeof curl_sonames / sizeof *curl_sonames; i++) {
        void *h = dlopen(curl_sonames[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            if (!first[0])
                snprintf(first, sizeof first, "%s", dlerror());
            continue;
        }
        size_t k = 0;
        for (; k < sizeof syms / sizeof *syms; k++) {
            void *s = dlsym(h, syms[k].name);
            if (!s)
                break;
            *(void **)((char *)&fn + syms[k].off) = s;
        }
        if (k == sizeof syms / sizeof *syms) {
            loaded = 1;
            return;
        }
        if (!first[0])
            snprintf(first, sizeof first, "%s has no %s", curl_sonames[i], syms[k].name);
        dlclose(h);
    }
    snprintf(load_error, sizeof load_error,
             "libcurl is not in this image (%s); this podrun loads it only for the Kubernetes "
             "API and etcd: install it (Debian/Ubuntu: apt-get install libcurl4; RHEL: dnf "
             "install libcurl)", first);
}

static int ready(void)
{
    pthread_once(&load_once, load);
    return loaded;
}

const char *http_library_error(void)
{
    return ready() ? NULL : load_error;
}

CURLcode curl_global_init(long flags)
{
    return ready() ? fn.global_init(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
    if (ready())
        fn.global_cleanup();
}

CURL *curl_easy_init(void)
{
    return ready() ? fn.easy_init() : NULL;
}

void curl_easy_cleanup(CURL *h)
{
    if (ready())
        fn.easy_cleanup(h);
}

/* The argument's type is the option's number range (curl.h's CURLOPTTYPE_*). */
CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
    if (!ready())
        return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, opt);
    CURLcode rc;
    if (opt < CURLOPTTYPE_OBJECTPOINT)
        rc = fn.easy_setopt(h, opt, va_arg(ap, long));
    else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
        rc = fn.easy_setopt(h, opt, va_arg(ap, void *));
    else if (opt < CURLOPTTYPE_OFF_T)
        rc = fn.easy_setopt(h, opt, va_arg(ap, fnptr_t));
    else if (opt < CURLOPTTYPE_BLOB)
        rc = fn.easy_setopt(h, opt, va_arg(ap, curl_off_t));
    else
        rc = fn.easy_setopt(h, opt, va_arg(ap, void *));
    va_end(ap);
    return rc;
}

/* Every CURLINFO takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
    if (!ready())
        return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, info);
    void *p = va_arg(ap, void *);
    va_end(ap);
    return fn.easy_getinfo(h, info, p);
}

const char *curl_easy_strerror(CURLcode code)
{
    return ready() ? fn.easy_strerror(code) : load_error;
}

CURLM *curl_multi_init(void)
{
    return ready() ? fn.multi_init() : NULL;
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
    return ready() ? fn.multi_cleanup(m) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
{
    return ready() ? fn.multi_add_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
{
    return ready() ? fn.multi_remove_handle(m, h) : CURLM_BAD_HANDLE;
}

/* The same numbering as the easy options (curl.h's CURLMOPTTYPE_* alias CURLOPTTYPE_*). */
CURLMcode curl_multi_setopt(CURLM *m, CURLMoption opt, ...)
{
    if (!ready())
        return CURLM_BAD_HANDLE;
    va_list ap;
    va_start(ap, opt);
    CURLMcode rc;
    if (opt < CURLOPTTYPE_OBJECTPOINT)
        rc = fn.multi_setopt(m, opt, va_arg(ap, long));
    else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
        rc = fn.multi_setopt(m, opt, va_arg(ap, void *));
    else if (opt < CURLOPTTYPE_OFF_T)
        rc = fn.multi_setopt(m, opt, va_arg(ap, fnptr_t));
    else
        rc = fn.multi_setopt(m, opt, va_arg(ap, curl_off_t));
    va_end(ap);
    return rc;
}

CURLMcode curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev, int *running)
{
    return ready() ? fn.multi_socket_action(m, s, ev, running) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_assign(CURLM *m, curl_socket_t s, void *p)
{
    return ready() ? fn.multi_assign(m, s, p) : CURLM_BAD_HANDLE;
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
    return ready() ? fn.multi_info_read(m, left) : NULL;
}

const char *curl_multi_strerror(CURLMcode code)
{
    return ready() ? fn.multi_strerror(code) : load_error;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
    return ready() ? fn.slist_append(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
    if (ready())
        fn.slist_free_all(l);
}
