/* tests/fuzz/fuzz_accel_config.c — libFuzzer target: any bytes as accelerate's config file (the
 * first byte picks YAML or JSON), parsed on its own and then through `accelerate launch
 * --config_file`, finalize and --print-config. Nothing may crash, leak or read out of bounds; an
 * error is one line. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/config.h"
#include "launcher/discover/host.h"
#include "launcher/frontends/accel_config.h"
#include "launcher/frontends/frontend.h"

static const uint8_t *in;
static size_t in_len;

/* The machine: every file holds the input; no directories, no names. */
static int reader(const struct discover_host *h, const char *path, size_t max, char **text,
                  size_t *len)
{
    (void)h, (void)path;
    if (in_len > max)
        return -EFBIG;
    *text = malloc(in_len + 1);
    if (!*text)
        return -ENOMEM;
    memcpy(*text, in, in_len);
    (*text)[in_len] = '\0';
    *len = in_len;
    return 0;
}

static int no_dir(const struct discover_host *h, const char *path, char ***names, size_t *count)
{
    (void)h, (void)path, (void)names, (void)count;
    return -ENOENT;
}

static int no_self(const struct discover_host *h, bool with_fqdn, struct hostfile_self *out)
{
    (void)h, (void)with_fqdn, (void)out;
    return -ENOENT;
}

static void walk(const struct acc_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind == ACC_SCALAR && !v[i].text)
            abort();
        if (v[i].kind == ACC_MAP)
            walk(v[i].sub, v[i].nsub);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool json = data[0] & 1;
    in = data + 1;
    in_len = size - 1;
    char err[512];
    struct acc_file f;
    if (acc_config_parse((const char *)in, in_len, json, &f, err, sizeof err) == 0) {
        walk(f.top, f.n);
        acc_config_free(&f);
    } else if (strchr(err, '\n')) {
        abort();
    }
    static char a0[] = "accelerate", a1[] = "launch", a2[] = "--config_file", a4[] = "t.py";
    char path[] = "/cfg/c.yaml", jpath[] = "/cfg/c.json";
    char *argv[] = {a0, a1, a2, json ? jpath : path, a4, NULL};
    char *envp[] = {NULL};
    const struct discover_host host = {reader, no_dir, no_self, NULL};
    struct cfg c;
    cfg_init(&c);
    int r = frontend_load_host(&fe_accelerate, &c, 5, argv, envp, &host, err, sizeof err);
    if (!r)
        r = cfg_finalize(&c, 4, data[0] >> 4, err, sizeof err);
    if (r && (!memchr(err, '\0', sizeof err) || strchr(err, '\n')))
        abort();
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        cfg_print(&c, devnull);
        fclose(devnull);
    }
    cfg_free(&c);
    return 0;
}
