/* tests/fuzz/fuzz_frontend_args.c — libFuzzer target: any words as the command line and the
 * environment of any front-end (podrun, torchrun, accelerate launch, paddle). The first byte
 * picks the front-end; the rest is NUL-separated words, those holding '=' before a word "--"
 * being environment entries. Load, finalize and --print-config: nothing may crash, leak or read
 * out of bounds, and an error is one line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/config.h"
#include "launcher/frontends/frontend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    static const struct frontend *const fes[] = {&fe_podrun, &fe_torchrun, &fe_accelerate,
                                                 &fe_paddle};
    const struct frontend *fe = fes[data[0] % 4];
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    char *argv[130], *envp[66];
    int argc = 0, envc = 0;
    argv[argc++] = (char *)(fe->command ? fe->command : fe->name);
    if (fe->verb)
        argv[argc++] = (char *)fe->verb;
    bool in_env = true;
    for (char *p = buf; p < buf + size - 1 && argc < 128; p += strlen(p) + 1) {
        if (in_env && !strcmp(p, "--")) {
            in_env = false;
            continue;
        }
        if (in_env && strchr(p, '=') && p[0] != '-' && envc < 64)
            envp[envc++] = p;
        else
            argv[argc++] = p;
    }
    argv[argc] = NULL;
    envp[envc] = NULL;
    char err[512];
    struct cfg c;
    cfg_init(&c);
    /* no machine: no config file is read, and discovery reads the schedulers' variables alone */
    int r = frontend_load(fe, &c, argc, argv, envp, err, sizeof err);
    if (!r && !c.help && !c.version)
        r = cfg_finalize(&c, 4, data[0] >> 4, err, sizeof err);
    if (r && (!memchr(err, '\0', sizeof err) || strchr(err, '\n')))
        abort();
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        cfg_print(&c, devnull);
        fclose(devnull);
    }
    cfg_free(&c);
    free(buf);
    return 0;
}
