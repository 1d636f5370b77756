/* tests/unit/launcher/devices/test_visible.c — NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES and
 * CUDA_DEVICE_ORDER read as the container runtime and CUDA read them (pure; table tests over
 * GPU lists built here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/visible.h"
#include "tests/fixtures/machine.h"

enum kind { SAME, MIXED, MIG, NOUUID };

/* The fixture machine's 8 GPUs: one model; MIXED: GPUs 4-7 another model; MIG: GPU 7 in MIG
 * mode with two MIG devices; NOUUID: as found from /dev only. */
static void make(enum kind k, struct gpu_list *g)
{
    memset(g, 0, sizeof *g);
    g->n = FX_NGPUS;
    for (int i = 0; i < FX_NGPUS; i++) {
        struct gpu_dev *d = &g->dev[i];
        d->index = i;
        d->minor = FX_GPU_MINOR[i];
        d->numa_node = FX_GPU_NODE[i];
        d->mig = 0;
        if (k != NOUUID) {
            snprintf(d->uuid, sizeof d->uuid, "%s", FX_GPU_UUID[i]);
            snprintf(d->pci, sizeof d->pci, "%s", FX_GPU_PCI[i]);
            snprintf(d->name, sizeof d->name, "%s",
                     k == MIXED && i >= 4 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100 80GB HBM3");
        }
    }
    if (k == MIG) {
        struct gpu_dev *d = &g->dev[7];
        d->mig = 1;
        d->nmig = 2;
        for (int j = 0; j < 2; j++) {
            snprintf(d->migs[j].uuid, sizeof d->migs[j].uuid, "%s", FX_MIG_UUID[j]);
            d->migs[j].gpu_instance = j + 1;
            d->migs[j].compute_instance = 0;
        }
    }
}

/* "0,2,7/1": the slots as GPU index, or GPU/MIG index. */
static void render(const struct gpu_visible *v, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int k = 0; k < v->n; k++) {
        size_t used = strlen(buf);
        if (v->slot[k].mig < 0)
            snprintf(buf + used, len - used, "%s%d", k ? "," : "", v->slot[k].gpu);
        else
            snprintf(buf + used, len - used, "%s%d/%d", k ? "," : "", v->slot[k].gpu, v->slot[k].mig);
    }
}

static const struct {
    enum kind kind;
    const char *nvidia, *cuda, *order;
    const char *slots;
    int order_known;
    const char *note;   /* a substring of the note; "" means the note is empty */
} cases[] = {
    /* CUDA_VISIBLE_DEVICES, by index */
    {SAME, NULL, NULL, NULL, "0,1,2,3,4,5,6,7", 1, ""},
    {SAME, NULL, "", NULL, "", 1, "CUDA_VISIBLE_DEVICES is empty"},
    {SAME, NULL, "0,2", NULL, "0,2", 1, ""},
    {SAME, NULL, "2,1", NULL, "2,1", 1, ""},
    {SAME, NULL, "0,2,-1,1", NULL, "0,2", 1, "'-1' is not a device index"},
    {SAME, NULL, "1gpu2,2ampere", NULL, "1,2", 1, ""},
    {SAME, NULL, " 3 , 4", NULL, "3,4", 1, ""},
    {SAME, NULL, "+1", NULL, "1", 1, ""},
    {SAME, NULL, "0,0", NULL, "", 1, "twice"},
    {SAME, NULL, "1,01", NULL, "", 1, "twice"},
    {SAME, NULL, "0,9,1", NULL, "0", 1, "index 9 is past the last of 8 device(s)"},
    {SAME, NULL, "0,,1", NULL, "0", 1, "is not a device index"},
    {SAME, NULL, "abc", NULL, "", 1, "'abc' is not a device index"},
    {SAME, NULL, "0,GPU-1f2e", NULL, "0", 1, "not a device index"},
    /* ... by UUID prefix */
    {SAME, NULL, "GPU-8932f", NULL, "0", 1, ""},
    {SAME, NULL, "GPU-8932", NULL, "", 1, "matches more than one device"},
    {SAME, NULL, "GPU-1f2e,GPU-8932a", NULL, "2,1", 1, ""},
    {SAME, NULL, "GPU-1f2e, GPU-2a3b", NULL, "2", 1, "' GPU-2a3b' is not a GPU- UUID"},
    {SAME, NULL, "GPU-1f2e,3", NULL, "2", 1, "not a GPU- UUID"},
    {SAME, NULL, "GPU-ffff", NULL, "", 1, "GPU-ffff names no device visible here"},
    {SAME, NULL, "GPU-1f2e,GPU-1f2e3d", NULL, "", 1, "twice"},
    {SAME, NULL, "GPU-1f2e,GPU-1f2e", NULL, "", 1, "twice"},
    /* NVIDIA_VISIBLE_DEVICES */
    {SAME, "all", NULL, NULL, "0,1,2,3,4,5,6,7", 1, ""},
    {SAME, "none", NULL, NULL, "", 1, "NVIDIA_VISIBLE_DEVICES=none: this container was given no GPU"},
    {SAME, "void", "0", NULL, "", 1, "NVIDIA_VISIBLE_DEVICES=void"},
    {SAME, "", NULL, NULL, "", 1, "NVIDIA_VISIBLE_DEVICES=:"},
    {SAME, "GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9,GPU-3c4d5e6f-7081-4293-a4b5-c6d7e8f90a1b",
     NULL, NULL, "2,4", 1, ""},
    {SAME, "GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9,GPU-3c4d5e6f-7081-4293-a4b5-c6d7e8f90a1b",
     "1", NULL, "4", 1, ""},   /* CUDA indices count what the runtime left */
    {SAME, "GPU-00000000-0000-0000-0000-000000000000", NULL, NULL, "", 1, "names no GPU on this node"},
    {SAME, "2,3", NULL, NULL, "2,3", 1, ""},        /* more GPUs seen than listed: a host index */
    {SAME, "0,1,2,3,4,5,6,7", NULL, NULL, "0,1,2,3,4,5,6,7", 1, "the container runtime has applied it"},
    {SAME, "3,9", NULL, NULL, "3", 1, "entry 9 names no GPU on this node"},
    {SAME, "/var/run/nvidia-container-devices", NULL, NULL, "0,1,2,3,4,5,6,7", 1, "device-list path"},
    /* CUDA_DEVICE_ORDER */
    {SAME, NULL, NULL, "PCI_BUS_ID", "0,1,2,3,4,5,6,7", 1, ""},
    {SAME, NULL, NULL, "SLOWEST_FIRST", "0,1,2,3,4,5,6,7", 1, "neither FASTEST_FIRST nor PCI_BUS_ID"},
    {MIXED, NULL, NULL, NULL, "0,1,2,3,4,5,6,7", 0, "CUDA device i is CUDA's choice"},
    {MIXED, NULL, NULL, "FASTEST_FIRST", "0,1,2,3,4,5,6,7", 0, "CUDA's choice"},
    {MIXED, NULL, NULL, "PCI_BUS_ID", "0,1,2,3,4,5,6,7", 1, ""},
    {MIXED, NULL, "4,0", NULL, "4,0", 0, "CUDA's choice"},
    {MIXED, NULL, "GPU-3c4d,GPU-8932f", NULL, "4,0", 1, ""},
    {MIXED, NULL, "GPU-3c4d", NULL, "4", 1, ""},
    /* MIG: GPU 7 shows as its MIG devices */
    {MIG, NULL, NULL, NULL, "0,1,2,3,4,5,6,7/0,7/1", 0, "(models or MIG sizes)"},
    {MIG, NULL, "MIG-1b2c", NULL, "7/1", 1, ""},
    {MIG, NULL, "MIG-1b2c,MIG-0a1b", NULL, "7/1,7/0", 1, ""},
    {MIG, NULL, "MIG-GPU-6f708192-a3b4-4c5d-d7e8-f90a1b2c3d4e/2/0", NULL, "7/1", 1, ""},
    {MIG, NULL, "MIG-GPU-6f708192-a3b4-4c5d-d7e8-f90a1b2c3d4e/3/0", NULL, "", 1, "names no device"},
    {MIG, NULL, "GPU-6f70", NULL, "", 1, "names no device visible here"},
    {MIG, NULL, "MIG-0a1b,GPU-8932f", NULL, "7/0", 1, "not a MIG- UUID"},
    {MIG, "MIG-0a1b2c3d-4e5f-5061-8273-94a5b6c7d8e9", NULL, NULL, "7/0", 1, ""},
    {MIG, "7:1", NULL, NULL, "7/1", 1, ""},
    /* GPUs known only from /dev: indices work, UUIDs cannot */
    {NOUUID, NULL, "1,3", NULL, "1,3", 0, "the devices' models are unknown"},
    {NOUUID, NULL, "GPU-8932f", NULL, "", 1, "names no device"},
    {NOUUID, NULL, NULL, "PCI_BUS_ID", "0,1,2,3,4,5,6,7", 0, "PCI addresses are unknown"},
};

static void test_table(void)
{
    struct gpu_list *g = malloc(sizeof *g);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make(cases[i].kind, g);
        struct gpu_visible_env env = {cases[i].nvidia, cases[i].cuda, cases[i].order};
        struct gpu_visible v;
        CHECK_EQ_INT(visible_resolve(g, &env, &v), 0);
        char got[128];
        render(&v, got, sizeof got);
        int before = check_failures;
        CHECK_EQ_STR(got, cases[i].slots);
        CHECK_EQ_INT(v.order_known || v.n <= 1, cases[i].order_known || v.n <= 1);
        if (cases[i].note[0])
            CHECK(strstr(v.note, cases[i].note) != NULL);
        else
            CHECK_EQ_STR(v.note, "");
        if (check_failures != before)
            fprintf(stderr, "  case %zu: NVIDIA=%s CUDA=%s ORDER=%s -> [%s] known=%d note: %s\n", i,
                    cases[i].nvidia ? cases[i].nvidia : "(unset)",
                    cases[i].cuda ? cases[i].cuda : "(unset)",
                    cases[i].order ? cases[i].order : "(unset)", got, v.order_known, v.note);
    }
    free(g);
}

/* The per-worker token is the device's UUID, the MIG device's own UUID, or without UUIDs the
 * ordinal that names it with CUDA_VISIBLE_DEVICES unset. */
static void test_tokens(void)
{
    struct gpu_list *g = malloc(sizeof *g);
    struct gpu_visible v;
    struct gpu_visible_env env = {0};
    make(MIG, g);
    visible_resolve(g, &env, &v);
    CHECK_EQ_STR(v.slot[0].token, FX_GPU_UUID[0]);
    CHECK_EQ_STR(v.slot[8].token, FX_MIG_UUID[1]);
    CHECK(v.mig);
    make(NOUUID, g);
    env.cuda_visible_devices = "5,2";
    visible_resolve(g, &env, &v);
    CHECK_EQ_STR(v.slot[0].token, "5");
    CHECK_EQ_STR(v.slot[1].token, "2");
    CHECK(!v.mig);
    /* MIG mode with no MIG device: CUDA has nothing on that GPU */
    make(MIG, g);
    g->dev[7].nmig = 0;
    env.cuda_visible_devices = NULL;
    visible_resolve(g, &env, &v);
    CHECK_EQ_INT(v.n, 7);
    CHECK(strstr(v.note, "GPU 0000:db:00.0 has MIG enabled and no MIG device") != NULL);
    CHECK_EQ_INT(visible_resolve(NULL, &env, &v), -22);
    free(g);
}

int main(void)
{
    RUN(test_table);
    RUN(test_tokens);
    return check_result();
}
