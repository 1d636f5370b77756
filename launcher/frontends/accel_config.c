/* launcher/frontends/accel_config.c — accelerate's config file into a tree of Python str() texts
 * (see accel_config.h). */
#include "launcher/frontends/accel_config.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "rdzv/base/common.h"

#define fail(err, len, ...) podrun_failf(-EINVAL, err, len, __VA_ARGS__)

/* ---- Python's str() of what the loaders resolve ------------------------------------------ */

void acc_py_float(double v, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, "%sinf", v < 0 ? "-" : "");
        return;
    }
    /* the shortest digits that read back as v, as repr picks them */
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    char digits[24];
    size_t nd = 0;
    const char *q = e;
    bool neg = *q == '-';
    if (neg)
        q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.' && nd + 1 < sizeof digits)
            digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    size_t o = 0;
    char out[64];
    if (neg)
        out[o++] = '-';
    if (exp >= -4 && exp < 16) {   /* repr's fixed notation, always with a fraction */
        if (exp < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int z = 0; z < -exp - 1; z++)
                out[o++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++)
                    out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    }
    snprintf(buf, cap, "%s", out);
}

static bool one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(s, *set))
            return true;
    return false;
}

/* s without '_', into out (cap bytes): false when it does not fit. */
static bool strip_underscores(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s; s++)
        if (*s != '_') {
            if (o + 1 >= cap)
                return false;
            out[o++] = *s;
        }
    out[o] = '\0';
    return true;
}

/* A YAML 1.1 integer (PyYAML's int resolver, without the sexagesimal form) as str(int). */
static bool yaml_int(const char *s, char *out, size_t cap)
{
    char t[80];
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (!*p || *p == '_' || !strip_underscores(p, t, sizeof t) || !t[0])
        return false;
    int base = 10;
    const char *d = t;
    if (t[0] == '0' && t[1] == 'b')
        base = 2, d = t + 2;
    else if (t[0] == '0' && t[1] == 'x')
        base = 16, d = t + 2;
    else if (t[0] == '0' && t[1])
        base = 8, d = t + 1;
    if (!*d)
        return false;
    if (base == 10 && !(p[0] >= '1' && p[0] <= '9') && strcmp(t, "0"))
        return false;
    uint64_t v = 0;
    for (const char *c = d; *c; c++) {
        int x = *c >= '0' && *c <= '9' ? *c - '0'
              : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
              : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10 : 99;
        if (x >= base)
            return false;
        if (v > (UINT64_MAX - (uint64_t)x) / (uint64_t)base)
            return false;   /* past 64 bits: kept as text, as no launching value is that big */
        v = v * (uint64_t)base + (uint64_t)x;
    }
    snprintf(out, cap, "%s%" PRIu64, neg && v ? "-" : "", v);
    return true;
}

/* A YAML 1.1 float (PyYAML's float resolver: a '.' is required, an exponent needs a sign) as
 * Python's repr. */
static bool yaml_float(const char *s, char *out, size_t cap)
{
    static const char *const inf[] = {".inf", ".Inf", ".INF", NULL};
    static const char *const nan[] = {".nan", ".NaN", ".NAN", NULL};
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (one_of(p, inf)) {
        snprintf(out, cap, "%sinf", neg ? "-" : "");
        return true;
    }
    if (one_of(s, nan)) {
        snprintf(out, cap, "nan");
        return true;
    }
    char t[128];
    if (!strip_underscores(p, t, sizeof t))
        return false;
    /* [0-9][0-9_]*.[0-9_]* or .[0-9][0-9_]*, then ([eE][-+][0-9]+)? */
    const char *c = p;
    bool lead = *c >= '0' && *c <= '9';
    while ((*c >= '0' && *c <= '9') || (lead && *c == '_'))
        c++;
    if (*c != '.')
        return false;
    c++;
    if (!lead && !(*c >= '0' && *c <= '9'))
        return false;
    while ((*c >= '0' && *c <= '9') || *c == '_')
        c++;
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c != '-' && *c != '+')
            return false;
        c++;
        if (!(*c >= '0' && *c <= '9'))
            return false;
        while (*c >= '0' && *c <= '9')
            c++;
    }
    if (*c)
        return false;
    double v = strtod(t, NULL);
    acc_py_float(neg ? -v : v, out, cap);
    return true;
}

/* A plain YAML scalar as safe_load resolves it: *is_null, or str(value) in out. */
static void yaml_resolve(const char *s, bool *is_null, char *out, size_t cap)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const yes[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On",
                                      "ON", NULL};
    static const char *const no[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off",
                                     "OFF", NULL};
    *is_null = false;
    if (one_of(s, nulls))
        *is_null = true;
    else if (one_of(s, yes))
        snprintf(out, cap, "True");
    else if (one_of(s, no))
        snprintf(out, cap, "False");
    else if (!yaml_int(s, out, cap) && !yaml_float(s, out, cap))
        snprintf(out, cap, "%s", s);
}

/* ---- the tree -------------------------------------------------------------------------------- */

struct builder {
    size_t entries;
    char *err;
    size_t errlen;
};

static void entry_free(struct acc_entry *e)
{
    free(e->key);
    free(e->text);
    for (size_t i = 0; i < e->nsub; i++)
        entry_free(&e->sub[i]);
    free(e->sub);
}

void acc_config_free(struct acc_file *f)
{
    for (size_t i = 0; i < f->n; i++)
        entry_free(&f->top[i]);
    free(f->top);
    f->top = NULL;
    f->n = 0;
}

const struct acc_entry *acc_config_get(const struct acc_entry *v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].key, key))
            return &v[i];
    return NULL;
}

/* A new entry `key` in *v (or the one of that key, emptied: the last value wins). */
static struct acc_entry *entry_add(struct builder *b, struct acc_entry **v, size_t *n,
                                   const char *key)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i].key, key)) {
            char *k = (*v)[i].key;
            (*v)[i].key = NULL;
            entry_free(&(*v)[i]);
            memset(&(*v)[i], 0, sizeof **v);
            (*v)[i].key = k;
            return &(*v)[i];
        }
    if (++b->entries > ACC_CONFIG_MAX_ENTRIES) {
        fail(b->err, b->errlen, "more than %d entries", ACC_CONFIG_MAX_ENTRIES);
        return NULL;
    }
    struct acc_entry *nv = realloc(*v, (*n + 1) * sizeof **v);
    if (!nv) {
        fail(b->err, b->errlen, "out of memory");
        return NULL;
    }
    *v = nv;
    struct acc_entry *e = &nv[(*n)++];
    memset(e, 0, sizeof *e);
    if (!(e->key = strdup(key))) {
        (*n)--;
        fail(b->err, b->errlen, "out of memory");
        return NULL;
    }
    return e;
}

static int set_text(struct builder *b, struct acc_entry *e, const char *text)
{
    e->kind = ACC_SCALAR;
    if (!(e->text = strdup(text)))
        return fail(b->err, b->errlen, "out of memory");
    return 0;
}

/* ---- YAML ------------------------------------------------------------------------------------ */

/* str() of a scalar node into out; *is_null for None. Quoted scalars and explicit tags other than
 * the default are taken as strings. */
static void yaml_scalar(yaml_node_t *n, bool *is_null, char *out, size_t cap)
{
    char s[1024];
    size_t len = n->data.scalar.length < sizeof s - 1 ? n->data.scalar.length : sizeof s - 1;
    memcpy(s, n->data.scalar.value, len);
    s[len] = '\0';
    *is_null = false;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        yaml_resolve(s, is_null, out, cap);
    else
        snprintf(out, cap, "%s", s);
}

static int yaml_map(struct builder *b, yaml_document_t *d, yaml_node_t *m, int depth,
                    struct acc_entry **v, size_t *n);

/* One value node into e. */
static int yaml_value(struct builder *b, yaml_document_t *d, yaml_node_t *node, int depth,
                      struct acc_entry *e)
{
    char text[1024];
    bool is_null;
    switch (node->type) {
    case YAML_SCALAR_NODE:
        yaml_scalar(node, &is_null, text, sizeof text);
        if (is_null) {
            e->kind = ACC_NULL;
            return 0;
        }
        return set_text(b, e, text);
    case YAML_SEQUENCE_NODE:
        e->kind = ACC_LIST;
        return 0;
    case YAML_MAPPING_NODE:
        e->kind = ACC_MAP;
        return yaml_map(b, d, node, depth + 1, &e->sub, &e->nsub);
    default:
        e->kind = ACC_NULL;
        return 0;
    }
}

static int yaml_map(struct builder *b, yaml_document_t *d, yaml_node_t *m, int depth,
                    struct acc_entry **v, size_t *n)
{
    if (depth > ACC_CONFIG_MAX_DEPTH)
        return fail(b->err, b->errlen, "nested deeper than %d levels", ACC_CONFIG_MAX_DEPTH);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        yaml_node_t *val = yaml_document_get_node(d, p->value);
        if (!k || !val)
            continue;
        char key[1024];
        bool is_null;
        if (k->type != YAML_SCALAR_NODE)
            return fail(b->err, b->errlen, "line %zu: a key that is not a plain value",
                        k->start_mark.line + 1);
        yaml_scalar(k, &is_null, key, sizeof key);
        struct acc_entry *e = entry_add(b, v, n, is_null ? "None" : key);
        if (!e)
            return -EINVAL;
        int r = yaml_value(b, d, val, depth, e);
        if (r)
            return r;
    }
    return 0;
}

static int parse_yaml(struct builder *b, const char *text, size_t len, struct acc_file *out)
{
    yaml_parser_t p;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&p))
        return fail(b->err, b->errlen, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, &doc)) {
        int r = fail(b->err, b->errlen, "not YAML: %s at line %zu",
                     p.problem ? p.problem : "parse error", p.problem_mark.line + 1);
        yaml_parser_delete(&p);
        return r;
    }
    yaml_parser_delete(&p);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    int r = 0;
    if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
        r = fail(b->err, b->errlen, "the file is empty; accelerate config writes a mapping such "
                 "as 'distributed_type: MULTI_GPU'");
    else if (root->type != YAML_MAPPING_NODE)
        r = fail(b->err, b->errlen, "not a mapping of keys to values, e.g. "
                 "'distributed_type: MULTI_GPU'");
    else
        r = yaml_map(b, &doc, root, 1, &out->top, &out->n);
    yaml_document_delete(&doc);
    return r;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static int json_map(struct builder *b, json_t *o, int depth, struct acc_entry **v, size_t *n)
{
    const char *key;
    json_t *val;
    if (depth > ACC_CONFIG_MAX_DEPTH)
        return fail(b->err, b->errlen, "nested deeper than %d levels", ACC_CONFIG_MAX_DEPTH);
    json_object_foreach(o, key, val) {
        struct acc_entry *e = entry_add(b, v, n, key);
        char text[64];
        int r = 0;
        if (!e)
            return -EINVAL;
        switch (json_typeof(val)) {
        case JSON_OBJECT:
            e->kind = ACC_MAP;
            r = json_map(b, val, depth + 1, &e->sub, &e->nsub);
            break;
        case JSON_ARRAY: e->kind = ACC_LIST; break;
        case JSON_STRING: r = set_text(b, e, json_string_value(val)); break;
        case JSON_INTEGER:
            snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(val));
            r = set_text(b, e, text);
            break;
        case JSON_REAL:
            acc_py_float(json_real_value(val), text, sizeof text);
            r = set_text(b, e, text);
            break;
        case JSON_TRUE: r = set_text(b, e, "True"); break;
        case JSON_FALSE: r = set_text(b, e, "False"); break;
        default: e->kind = ACC_NULL; break;
        }
        if (r)
            return r;
    }
    return 0;
}

static int parse_json(struct builder *b, const char *text, size_t len, struct acc_file *out)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (!root)
        return fail(b->err, b->errlen, "not JSON: %s at line %d", je.text, je.line);
    int r;
    if (!json_is_object(root))
        r = fail(b->err, b->errlen, "not a JSON object of keys to values, e.g. "
                 "{\"distributed_type\": \"MULTI_GPU\"}");
    else
        r = json_map(b, root, 1, &out->top, &out->n);
    json_decref(root);
    return r;
}

int acc_config_parse(const char *text, size_t len, bool json, struct acc_file *out, char *err,
                     size_t errlen)
{
    struct builder b = {0, err, errlen};
    out->top = NULL;
    out->n = 0;
    if (len > ACC_CONFIG_MAX_BYTES)
        return fail(err, errlen, "larger than %d bytes", ACC_CONFIG_MAX_BYTES);
    int r = json ? parse_json(&b, text, len, out) : parse_yaml(&b, text, len, out);
    if (r)
        acc_config_free(out);
    return r;
}
