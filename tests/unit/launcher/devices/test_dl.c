/* tests/unit/launcher/devices/test_dl.c — loading optional libraries and binding their entry
 * points, with errors that name the library and the symbol. Uses the fake libibverbs.so.1 (on
 * LD_LIBRARY_PATH), which exports versioned symbols as rdma-core does. */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/dl.h"

static void test_missing_library_named(void)
{
    dl_lib_t lib;
    char err[512] = "";
    CHECK_EQ_INT(dl_open(&lib, "libpodrun-absent.so.7", err, sizeof err), -ENOENT);
    CHECK(lib.handle == NULL);
    CHECK(strstr(err, "libpodrun-absent.so.7") == err);
    CHECK(strstr(err, "libpodrun-absent.so.7:") != NULL);
    /* the name is said once, not twice */
    CHECK(strstr(err + 1, "libpodrun-absent.so.7") == NULL);
    dl_close(&lib);  /* closing a library that is not open is harmless */
}

static void test_bind_versioned_and_optional(void)
{
    dl_lib_t lib;
    char err[512] = "";
    CHECK_EQ_INT(dl_open(&lib, "libibverbs.so.1", err, sizeof err), 0);
    int (*contexts)(void) = NULL;
    void *(*list)(int *) = NULL;
    void (*absent)(void) = (void (*)(void))test_bind_versioned_and_optional;
    const dl_sym_t syms[] = {
        {"ibv_get_device_list", "IBVERBS_1.1", &list, false},
        {"fake_ibverbs_open_contexts", "FAKE_1", &contexts, false},
        {"ibv_no_such_function", NULL, &absent, true},
    };
    CHECK_EQ_INT(dl_bind(&lib, syms, 3, err, sizeof err), 0);
    CHECK(list != NULL);
    CHECK(contexts != NULL && contexts() == 0);
    CHECK(absent == NULL);   /* optional and missing: the slot is cleared */
    dl_close(&lib);
    CHECK(lib.handle == NULL);
}

static void test_missing_symbol_named(void)
{
    dl_lib_t lib;
    char err[512] = "";
    CHECK_EQ_INT(dl_open(&lib, "libibverbs.so.1", err, sizeof err), 0);
    void (*fn)(void) = NULL;
    const dl_sym_t want_version[] = {{"ibv_get_device_list", "IBVERBS_9.9", &fn, false}};
    CHECK_EQ_INT(dl_bind(&lib, want_version, 1, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "libibverbs.so.1: no symbol ibv_get_device_list (version IBVERBS_9.9)");
    const dl_sym_t want_name[] = {{"ibv_create_qp_ex2", NULL, &fn, false}};
    CHECK_EQ_INT(dl_bind(&lib, want_name, 1, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "libibverbs.so.1: no symbol ibv_create_qp_ex2");
    /* a symbol the version script keeps local is not exported at all */
    const dl_sym_t local[] = {{"fake_line", NULL, &fn, false}};
    CHECK_EQ_INT(dl_bind(&lib, local, 1, err, sizeof err), -ENOENT);
    dl_close(&lib);
    CHECK_EQ_INT(dl_bind(&lib, want_name, 1, err, sizeof err), -ENOENT);
    CHECK_EQ_STR(err, "libibverbs.so.1: not loaded");
}

int main(void)
{
    RUN(test_missing_library_named);
    RUN(test_bind_versioned_and_optional);
    RUN(test_missing_symbol_named);
    return check_result();
}
