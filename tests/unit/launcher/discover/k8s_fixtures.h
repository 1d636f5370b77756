/* tests/unit/launcher/discover/k8s_fixtures.h — the pod lists and streams of tests/fixtures/k8s
 * for the unit tests that read them (discover/test_k8s_pods.c, commands/test_k8s_tools.c): main
 * sets `fixtures` to the directory (argv[1]). */
#ifndef PODRUN_TESTS_K8S_FIXTURES_H
#define PODRUN_TESTS_K8S_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/check.h"
#include "launcher/discover/k8s_pods.h"

static const char *fixtures;

/* The whole file `name` in `fixtures`, NUL-terminated (malloc'd); exits when it cannot be read. */
static char *load(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fixtures, name);
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Adds the pod list `name` to t: k8s_pods_add_list's result, whose error is printed. */
static int load_list(struct k8s_pods *t, const char *name)
{
    size_t len;
    char *json = load(name, &len);
    char cont[64] = "x", err[256] = "";
    int rc = k8s_pods_add_list(t, json, len, cont, sizeof cont, err, sizeof err);
    if (rc)
        fprintf(stderr, "(expected where the test says so) %s\n", err);
    CHECK_EQ_STR(cont, "");
    free(json);
    return rc;
}

#endif
