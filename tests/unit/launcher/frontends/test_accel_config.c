/* tests/unit/launcher/frontends/test_accel_config.c — accelerate's config file as PyYAML's safe
 * loader and json.load read it, then Python's str(): the texts its workers would get. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/frontends/accel_config.h"

static char err[512];

static const char *scalar(const struct acc_file *f, const char *sec, const char *key)
{
    const struct acc_entry *e = acc_config_get(f->top, f->n, sec ? sec : key);
    if (e && sec)
        e = e->kind == ACC_MAP ? acc_config_get(e->sub, e->nsub, key) : NULL;
    return e && e->kind == ACC_SCALAR ? e->text : e && e->kind == ACC_NULL ? "None" : NULL;
}

static void test_yaml_scalars(void)
{
    static const char text[] =
        "distributed_type: MULTI_GPU\n"
        "a_true: yes\nb_false: Off\nc_true: TRUE\nd_str: 'true'\n"
        "e_int: 1_000\nf_hex: 0x1F\ng_oct: 017\nh_bin: 0b101\ni_neg: -3\n"
        "j_float: 1.0\nk_float: 1.\nl_exp: 1.0e-5\nm_noexp_sign: 1.0e5\nn_plain_e: 1e5\n"
        "o_inf: -.inf\np_nan: .NaN\nq_null: ~\nr_empty:\ns_str: 0,1\nt_quoted: \"0x10\"\n"
        "u_big: 100000000000000000.0\nv_small: 0.0001\nw_tiny: 0.00001\nx_round: 0.1\n"
        "fsdp_config:\n  fsdp_version: 2\n  offload_params: false\n"
        "twice: 1\ntwice: 2\n";
    struct acc_file f;
    CHECK_EQ_INT(acc_config_parse(text, strlen(text), false, &f, err, sizeof err), 0);
    CHECK_EQ_STR(scalar(&f, NULL, "distributed_type"), "MULTI_GPU");
    CHECK_EQ_STR(scalar(&f, NULL, "a_true"), "True");
    CHECK_EQ_STR(scalar(&f, NULL, "b_false"), "False");
    CHECK_EQ_STR(scalar(&f, NULL, "c_true"), "True");
    CHECK_EQ_STR(scalar(&f, NULL, "d_str"), "true");       /* quoted: a string */
    CHECK_EQ_STR(scalar(&f, NULL, "e_int"), "1000");
    CHECK_EQ_STR(scalar(&f, NULL, "f_hex"), "31");
    CHECK_EQ_STR(scalar(&f, NULL, "g_oct"), "15");          /* YAML 1.1: a leading 0 is octal */
    CHECK_EQ_STR(scalar(&f, NULL, "h_bin"), "5");
    CHECK_EQ_STR(scalar(&f, NULL, "i_neg"), "-3");
    CHECK_EQ_STR(scalar(&f, NULL, "j_float"), "1.0");
    CHECK_EQ_STR(scalar(&f, NULL, "k_float"), "1.0");
    CHECK_EQ_STR(scalar(&f, NULL, "l_exp"), "1e-05");
    CHECK_EQ_STR(scalar(&f, NULL, "m_noexp_sign"), "1.0e5");  /* no sign: PyYAML's string */
    CHECK_EQ_STR(scalar(&f, NULL, "n_plain_e"), "1e5");       /* no dot: a string too */
    CHECK_EQ_STR(scalar(&f, NULL, "o_inf"), "-inf");
    CHECK_EQ_STR(scalar(&f, NULL, "p_nan"), "nan");
    CHECK_EQ_STR(scalar(&f, NULL, "q_null"), "None");
    CHECK_EQ_STR(scalar(&f, NULL, "r_empty"), "None");
    CHECK_EQ_STR(scalar(&f, NULL, "s_str"), "0,1");
    CHECK_EQ_STR(scalar(&f, NULL, "t_quoted"), "0x10");
    CHECK_EQ_STR(scalar(&f, NULL, "u_big"), "1e+17");
    CHECK_EQ_STR(scalar(&f, NULL, "v_small"), "0.0001");
    CHECK_EQ_STR(scalar(&f, NULL, "w_tiny"), "1e-05");
    CHECK_EQ_STR(scalar(&f, NULL, "x_round"), "0.1");
    CHECK_EQ_STR(scalar(&f, "fsdp_config", "fsdp_version"), "2");
    CHECK_EQ_STR(scalar(&f, "fsdp_config", "offload_params"), "False");
    CHECK_EQ_STR(scalar(&f, NULL, "twice"), "2");            /* the last one, as a dict's */
    acc_config_free(&f);
}

static void test_json(void)
{
    static const char text[] = "{\"distributed_type\": \"FSDP\", \"num_processes\": 8, "
                               "\"use_cpu\": false, \"x\": null, \"clip\": 1.5, \"one\": 1.0, "
                               "\"fsdp_config\": {\"fsdp_offload_params\": true}, \"l\": [1]}";
    struct acc_file f;
    CHECK_EQ_INT(acc_config_parse(text, strlen(text), true, &f, err, sizeof err), 0);
    CHECK_EQ_STR(scalar(&f, NULL, "num_processes"), "8");
    CHECK_EQ_STR(scalar(&f, NULL, "use_cpu"), "False");
    CHECK_EQ_STR(scalar(&f, NULL, "x"), "None");
    CHECK_EQ_STR(scalar(&f, NULL, "clip"), "1.5");
    CHECK_EQ_STR(scalar(&f, NULL, "one"), "1.0");
    CHECK_EQ_STR(scalar(&f, "fsdp_config", "fsdp_offload_params"), "True");
    CHECK(acc_config_get(f.top, f.n, "l") && acc_config_get(f.top, f.n, "l")->kind == ACC_LIST);
    acc_config_free(&f);
}

static void test_bad_files(void)
{
    struct acc_file f;
    static const char deep[] = "a:\n b:\n  c:\n   d:\n    e:\n     f:\n      g:\n"
                               "       h:\n        i: 1\n";
    static const char *const bad_yaml[] = {"", "- a\n- b\n", "a: [1, 2\n", "just text\n", deep};
    for (size_t i = 0; i < sizeof bad_yaml / sizeof *bad_yaml; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(acc_config_parse(bad_yaml[i], strlen(bad_yaml[i]), false, &f, err,
                                      sizeof err), -EINVAL);
        CHECK(err[0] && !strchr(err, '\n'));
    }
    CHECK_EQ_INT(acc_config_parse("[1]", 3, true, &f, err, sizeof err), -EINVAL);
    CHECK_EQ_INT(acc_config_parse("{\"a\":", 5, true, &f, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "not JSON") != NULL);
}

static void test_py_float(void)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {{1.0, "1.0"}, {0.5, "0.5"}, {123.456, "123.456"}, {1e16, "1e+16"},
                 {1234567890123456.0, "1234567890123456.0"}, {1e-4, "0.0001"}, {1e-5, "1e-05"},
                 {-2.5e-7, "-2.5e-07"}, {1.5e300, "1.5e+300"}, {0.0, "0.0"}, {100.0, "100.0"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[64];
        acc_py_float(cases[i].v, buf, sizeof buf);
        CHECK_EQ_STR(buf, cases[i].want);
    }
}

int main(void)
{
    RUN(test_yaml_scalars);
    RUN(test_json);
    RUN(test_bad_files);
    RUN(test_py_float);
    return check_result();
}
