/* rdzv/base/b64.c — base64 both alphabets (rdzv/base/b64.h). */
#include "rdzv/base/b64.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

static const char alphabet[2][65] = {
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
};

size_t b64_encode(const void *in, size_t n, char *out, unsigned flags)
{
    const unsigned char *s = in;
    const char *a = alphabet[(flags & B64_URL) != 0];
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        out[o++] = i + 1 < n ? a[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

/* One digit's value in the alphabet(s) flags allow; -1 for anything else. */
static int digit(unsigned char c, unsigned flags)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    int url = (flags & (B64_URL | B64_ANY)) != 0, std = !(flags & B64_URL) || (flags & B64_ANY);
    if ((c == '+' && std) || (c == '-' && url))
        return 62;
    if ((c == '/' && std) || (c == '_' && url))
        return 63;
    return -1;
}

static int blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int b64_decode(const char *in, size_t n, void *out, size_t cap, unsigned flags)
{
    unsigned char *o = out;
    size_t len = 0, digits = 0, pad = 0;
    unsigned acc = 0;
    int bits = 0;
    if (!(flags & (B64_BLANKS | B64_PAD_OPTIONAL)) && n % 4)
        return -EINVAL; /* not whole groups: say so before any -ENOSPC */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if ((flags & B64_BLANKS) && blank(c))
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int d = digit(c, flags);
        if (d < 0 || pad)
            return -EINVAL; /* not base64, or a digit after the padding */
        digits++;
        acc = (acc << 6 | (unsigned)d) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (len == cap)
                return -ENOSPC;
            o[len++] = (unsigned char)(acc >> bits);
        }
    }
    /* one digit alone cannot hold a byte; padding is at most two '=' (and whole groups when it
     * is required) */
    if (pad > 2 || digits % 4 == 1)
        return -EINVAL;
    if (!(flags & B64_PAD_OPTIONAL) && (digits + pad) % 4)
        return -EINVAL;
    return len > INT_MAX ? -EINVAL : (int)len;
}

int b64_decode_alloc(const char *in, size_t n, unsigned flags, char **out, size_t *len)
{
    size_t cap = B64_DECODED_MAX(n);
    char *buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    int r = b64_decode(in, n, buf, cap, flags);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[r] = '\0';
    *out = buf;
    *len = (size_t)r;
    return 0;
}
