/* tests/fuzz/fuzz_kubeconfig.c — kubeconfig files (launcher/discover/kubeconfig.c).
 *
 * The input is one kubeconfig, resolved alone and as the first of two files (itself twice,
 * the merge path), for its current context and for a context named "x". No input may crash,
 * leak or hang, however its anchors and aliases are nested. */
#include <stddef.h>
#include <stdint.h>

#include "launcher/discover/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kubeconfig_file *f;
    char err[256];
    if (kubeconfig_file_parse((const char *)data, size, &f, err, sizeof err) != 0)
        return 0;
    struct kubeconfig_file *files[2] = {f, f};
    const char *contexts[] = {NULL, "x"};
    for (size_t n = 1; n <= 2; n++)
        for (size_t c = 0; c < 2; c++) {
            struct kubeconfig kc;
            if (kubeconfig_resolve(files, n, contexts[c], &kc, err, sizeof err) == 0)
                kubeconfig_free(&kc);
        }
    kubeconfig_file_free(f);
    return 0;
}
