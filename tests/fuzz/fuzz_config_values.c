/* tests/fuzz/fuzz_config_values.c — libFuzzer target: arbitrary text as the value of any setting
 * from any source (the first byte picks the setting, the second the source), then finalize,
 * --print-config and free. Nothing may crash, leak or read out of bounds; a value that was kept
 * must print as text that sets the same value again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/config/config.h"
#include "launcher/config/settings.h"
#include "launcher/config/values.h"

static char err[512];

/* format(set(format(v))) == format(v): what --print-config shows means what it shows. NPROC shows
 * the resolved count and a composite shows its keys, so they are left out, as is a value longer
 * than the buffer and an unset one ("(none)"). */
static void print_parses_back(struct cfg *c, enum cfg_id id, const struct cfg_src *src)
{
    const struct cfg_setting *s = &cfg_settings[id];
    if (s->type == CFG_T_NPROC || s->type == CFG_T_CONF || c->src[id].kind != src->kind)
        return;
    char once[4096], twice[4096];
    cfg_types[s->type].format(c, s, once, sizeof once);
    if (strlen(once) >= sizeof once - 1)
        return; /* cut to the buffer: a longer value prints cut, as --print-config's does */
    if (strcmp(once, "(none)") == 0)
        return; /* an empty value leaves the setting unset, which prints as no value at all */
    if (cfg_set(c, id, once, src, err, sizeof err) != 0)
        abort();
    cfg_types[s->type].format(c, s, twice, sizeof twice);
    if (strcmp(once, twice) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    enum cfg_id id = (enum cfg_id)(data[0] % CFG__COUNT);
    struct cfg_src src = {(enum cfg_src_kind)(data[1] % CFG_SRC_DERIVED), "fuzz"};
    char *text = malloc(size - 1);
    if (!text)
        return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';

    struct cfg c;
    cfg_init(&c);
    if (cfg_set(&c, id, text, &src, err, sizeof err) == 0) {
        if (!memchr(err, '\0', sizeof err))
            abort();
        print_parses_back(&c, id, &src);
    }
    static char prog0[] = "prog";
    char *prog[] = {prog0, NULL};
    cfg_set_program(&c, prog, 1);
    cfg_finalize(&c, 4, (int)(data[1] >> 4), err, sizeof err);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        cfg_print(&c, devnull);
        fclose(devnull);
    }
    cfg_free(&c);
    free(text);
    return 0;
}
