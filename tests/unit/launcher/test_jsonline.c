/* tests/unit/launcher/test_jsonline.c — podrun's own lines as JSON (--log-format json): every
 * line one object a JSON parser takes back to the same text, whatever bytes the text held. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/output/jsonline.h"

/* Parses one line (without its newline) and returns the object, or NULL. */
static json_t *parse_line(const struct jsonbuf *b)
{
    CHECK(b->len > 0 && b->buf[b->len - 1] == '\n');
    CHECK(memchr(b->buf, '\n', b->len - 1) == NULL);
    json_error_t e;
    return json_loadb(b->buf, b->len - 1, JSON_ALLOW_NUL, &e);
}

static void test_log_line(void)
{
    struct jsonbuf b;
    jsonline_init(&b);
    const char msg[] = "rank 1 \"failed\"\tC:\\x\n";
    jsonline_log(&b, 1790000000.25, "podrun", "pod-0", "job-1", msg, sizeof msg - 1);
    CHECK(!b.oom);
    json_t *o = parse_line(&b);
    CHECK(o != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "time")), "2026-09-21T14:13:20.250Z");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "source")), "podrun");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "node")), "pod-0");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "run_id")), "job-1");
    /* the text itself, its trailing newline dropped */
    CHECK_EQ_STR(json_string_value(json_object_get(o, "msg")), "rank 1 \"failed\"\tC:\\x");
    json_decref(o);
    jsonline_free(&b);
    /* node and run id left out when not known yet */
    jsonline_log(&b, 0, "report", NULL, "", "a\nb\n\n", 5);
    o = parse_line(&b);
    CHECK(o != NULL);
    CHECK(json_object_get(o, "node") == NULL);
    CHECK(json_object_get(o, "run_id") == NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "msg")), "a\nb");
    json_decref(o);
    jsonline_free(&b);
}

/* Control bytes, broken and overlong UTF-8, surrogates: the line stays valid JSON, valid UTF-8
 * passes as it is and the rest becomes U+FFFD. */
static void test_any_bytes(void)
{
    struct jsonbuf b;
    jsonline_init(&b);
    const char msg[] = "\x01z\x1f|\xc3\xa9|\xe2\x82\xac|\xf0\x9f\x98\x80|\xff|\xc0\xaf|\xed\xa0\x80|"
                       "\xe2\x82|\x00" "end";
    jsonline_log(&b, 1, "podrun", "n", "r", msg, sizeof msg - 1);
    json_t *o = parse_line(&b);
    CHECK(o != NULL);
    const char *m = json_string_value(json_object_get(o, "msg"));
    CHECK(m != NULL);
    const char want[] = "\x01z\x1f|\xc3\xa9|\xe2\x82\xac|\xf0\x9f\x98\x80|\xef\xbf\xbd|"
                        "\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
                        "\xef\xbf\xbd\xef\xbf\xbd|";
    CHECK(m && memcmp(m, want, sizeof want - 1) == 0);
    /* the NUL byte travels as \u0000: jansson keeps the rest with the length */
    CHECK(strstr(b.buf, "\\u0000end") != NULL);
    json_decref(o);
    jsonline_free(&b);
}

static void test_fields(void)
{
    struct jsonbuf b;
    jsonline_init(&b);
    jsonline_field(&b, 1, "a", "x\"y");
    jsonline_field_num(&b, 0, "i", 42);
    jsonline_field_num(&b, 0, "f", 1.5);
    jsonline_field_num(&b, 0, "neg", -1);
    jsonline_field_num(&b, 0, "nan", 0.0 / 0.0);
    jsonline_field(&b, 0, "null", NULL);
    jsonline_raw(&b, "}");
    json_error_t e;
    json_t *o = json_loads(b.buf, 0, &e);
    CHECK(o != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "a")), "x\"y");
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "i")), 42);
    CHECK(json_real_value(json_object_get(o, "f")) == 1.5);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "neg")), -1);
    CHECK(json_is_null(json_object_get(o, "nan")));
    CHECK_EQ_STR(json_string_value(json_object_get(o, "null")), "");
    json_decref(o);
    jsonline_free(&b);
}

int main(void)
{
    RUN(test_log_line);
    RUN(test_any_bytes);
    RUN(test_fields);
    return check_result();
}
