/* tests/unit/rdzv/base/test_b64.c — base64 both ways, both alphabets: RFC 4648's test vectors
 * (§10), etcd's strict form, a kubeconfig's loose one, and text that is not base64. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "rdzv/base/b64.h"

static const struct {
    const char *in, *out;
} rfc4648[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
               {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
               {"foobar", "Zm9vYmFy"}, {"podrun/j/n/", "cG9kcnVuL2ovbi8="}};

static void test_vectors(void)
{
    for (size_t i = 0; i < sizeof rfc4648 / sizeof *rfc4648; i++) {
        char enc[64], dec[64];
        size_t n = b64_encode(rfc4648[i].in, strlen(rfc4648[i].in), enc, 0);
        CHECK_EQ_STR(enc, rfc4648[i].out);
        CHECK_EQ_INT(n, strlen(rfc4648[i].out));
        CHECK_EQ_INT(n, B64_ENCODED_LEN(strlen(rfc4648[i].in)));
        int d = b64_decode(enc, n, dec, sizeof dec, 0);
        CHECK_EQ_INT(d, strlen(rfc4648[i].in));
        dec[d > 0 ? d : 0] = '\0';
        CHECK_EQ_STR(dec, rfc4648[i].in);
    }
}

/* The two alphabets differ in digits 62 and 63 only. */
static void test_alphabets(void)
{
    const unsigned char bin[] = {0xfb, 0xff, 0xbf, 0x00, 0xff, 0x0a};
    char std[16], url[16], dec[16];
    b64_encode(bin, sizeof bin, std, 0);
    b64_encode(bin, sizeof bin, url, B64_URL);
    CHECK_EQ_STR(std, "+/+/AP8K");
    CHECK_EQ_STR(url, "-_-_AP8K");
    CHECK_EQ_INT(b64_decode(url, 8, dec, sizeof dec, B64_URL), 6);
    CHECK(memcmp(dec, bin, 6) == 0);
    CHECK_EQ_INT(b64_decode(std, 8, dec, sizeof dec, 0), 6);
    CHECK(memcmp(dec, bin, 6) == 0);
    /* each alphabet alone refuses the other's digits; B64_ANY takes both, even mixed */
    CHECK_EQ_INT(b64_decode(url, 8, dec, sizeof dec, 0), -EINVAL);
    CHECK_EQ_INT(b64_decode(std, 8, dec, sizeof dec, B64_URL), -EINVAL);
    CHECK_EQ_INT(b64_decode("-/+_AP8K", 8, dec, sizeof dec, B64_ANY), 6);
    CHECK(memcmp(dec, bin, 6) == 0);
}

/* etcd's gateway: whole groups with their padding, nothing else. */
static void test_strict(void)
{
    char dec[16];
    CHECK_EQ_INT(b64_decode("Zm9", 3, dec, sizeof dec, 0), -EINVAL);      /* no padding */
    CHECK_EQ_INT(b64_decode("Zm=v", 4, dec, sizeof dec, 0), -EINVAL);     /* '=' inside */
    CHECK_EQ_INT(b64_decode("Zg==Zg==", 8, dec, sizeof dec, 0), -EINVAL); /* padding inside */
    CHECK_EQ_INT(b64_decode("Z!9v", 4, dec, sizeof dec, 0), -EINVAL);     /* not a digit */
    CHECK_EQ_INT(b64_decode("Zm9v\n", 5, dec, sizeof dec, 0), -EINVAL);   /* a blank */
    CHECK_EQ_INT(b64_decode("Z===", 4, dec, sizeof dec, 0), -EINVAL);     /* three '=' */
    CHECK_EQ_INT(b64_decode("Zm9vZ===", 8, dec, sizeof dec, 0), -EINVAL);
    CHECK_EQ_INT(b64_decode("Zm9vZm9v", 8, dec, 5, 0), -ENOSPC);
    CHECK_EQ_INT(b64_decode("Zm9vZm", 6, dec, 3, 0), -EINVAL); /* not base64 before too long */
    CHECK_EQ_INT(b64_decode("Zm9v", 4, dec, 3, 0), 3);                    /* exactly fits */
    CHECK_EQ_INT(b64_decode("Zm8=", 4, NULL, 0, 0), -ENOSPC);
    CHECK_EQ_INT(b64_decode("", 0, NULL, 0, 0), 0);
    /* bytes after a NUL are the text's, not its end */
    CHECK_EQ_INT(b64_decode("Zm\0v", 4, dec, sizeof dec, 0), -EINVAL);
}

/* A kubeconfig's *-data: folded over lines, padding optional, into a NUL-terminated buffer. */
#define LOOSE (B64_BLANKS | B64_PAD_OPTIONAL)

static void test_loose_alloc(void)
{
    char *out;
    size_t len;
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8=", 8, LOOSE, &out, &len), 0);
    CHECK_EQ_STR(out, "hello");
    CHECK_EQ_INT(len, 5);
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("aGVs\nbG8h", 9, LOOSE, &out, &len), 0);
    CHECK_EQ_STR(out, "hello!");
    free(out);
    CHECK_EQ_INT(b64_decode_alloc(" aGVs\r\n\tbG8 ", 12, LOOSE, &out, &len), 0);
    CHECK_EQ_STR(out, "hello");
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("", 0, LOOSE, &out, &len), 0);
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_STR(out, "");
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8=x", 9, LOOSE, &out, &len), -EINVAL);
    CHECK_EQ_INT(b64_decode_alloc("a", 1, LOOSE, &out, &len), -EINVAL);
    CHECK_EQ_INT(b64_decode_alloc("aGVsbA", 6, LOOSE, &out, &len), 0);   /* "hell" */
    CHECK_EQ_INT(len, 4);
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8h=", 9, LOOSE, &out, &len), 0); /* odd padding */
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("a$==", 4, LOOSE, &out, &len), -EINVAL);
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8===", 10, LOOSE, &out, &len), -EINVAL);
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8\n=\nx", 11, LOOSE, &out, &len), -EINVAL);
    /* each flag alone: padding left out but no blanks, blanks but the padding required */
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8", 7, B64_PAD_OPTIONAL, &out, &len), 0);
    CHECK_EQ_STR(out, "hello");
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("aGVs\nbG8", 8, B64_PAD_OPTIONAL, &out, &len), -EINVAL);
    CHECK_EQ_INT(b64_decode_alloc("aGVs\nbG8=", 9, B64_BLANKS, &out, &len), 0);
    CHECK_EQ_STR(out, "hello");
    free(out);
    CHECK_EQ_INT(b64_decode_alloc("aGVs\nbG8", 8, B64_BLANKS, &out, &len), -EINVAL);
    /* the strict form through the same call */
    CHECK_EQ_INT(b64_decode_alloc("aGVsbG8", 7, 0, &out, &len), -EINVAL);
}

/* Every byte value goes through and comes back, in both alphabets. */
static void test_round_trip(void)
{
    unsigned char bin[256];
    for (int i = 0; i < 256; i++)
        bin[i] = (unsigned char)i;
    for (unsigned flags = 0; flags <= B64_URL; flags++)
        for (size_t n = 0; n <= sizeof bin; n += 37) {
            char enc[B64_ENCODED_LEN(256) + 1];
            unsigned char dec[256];
            size_t e = b64_encode(bin, n, enc, flags);
            CHECK_EQ_INT(e, B64_ENCODED_LEN(n));
            CHECK_EQ_INT(b64_decode(enc, e, dec, sizeof dec, flags), n);
            CHECK(memcmp(dec, bin, n) == 0);
        }
}

int main(void)
{
    RUN(test_vectors);
    RUN(test_alphabets);
    RUN(test_strict);
    RUN(test_loose_alloc);
    RUN(test_round_trip);
    return check_result();
}
