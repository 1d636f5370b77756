/* rdzv/base/b64.h — base64 (RFC 4648): the standard alphabet (§4: '+' '/') and the URL-safe one
 * (§5: '-' '_'), encode and decode. Pure; no allocation except in b64_decode_alloc.
 *
 * Who reads what: etcd's JSON gateway sends standard base64 with its padding (strict, the
 * default); a kubeconfig's *-data fields are standard base64 that YAML may fold over lines, with
 * or without padding (B64_BLANKS | B64_PAD_OPTIONAL); DeepSpeed's --world_info is URL-safe. */
#ifndef PODRUN_RDZV_B64_H
#define PODRUN_RDZV_B64_H

#include <stddef.h>

#define B64_URL 0x1   /* the URL-safe alphabet instead of the standard one */
#define B64_ANY 0x2   /* decode: either alphabet, even mixed */
#define B64_BLANKS 0x4       /* decode: blanks (space, tab, CR, LF) skipped */
#define B64_PAD_OPTIONAL 0x8 /* decode: the padding may be left out */

/* Characters the base64 of n bytes takes (with padding), its NUL not counted. */
#define B64_ENCODED_LEN(n) (4 * (((size_t)(n) + 2) / 3))
/* Bytes that decoding n characters can give at most. */
#define B64_DECODED_MAX(n) ((size_t)(n) / 4 * 3 + 3)

/* Writes the base64 of in[0..n), padded with '=', and a NUL into out, which holds at least
 * B64_ENCODED_LEN(n) + 1 bytes. flags: 0 or B64_URL. Returns the length. */
size_t b64_encode(const void *in, size_t n, char *out, unsigned flags);

/* Decodes in[0..n) into out (cap bytes). The text is whole groups of four, padding included, with
 * '=' only at its end; B64_PAD_OPTIONAL lets the padding be left out (at most two '=' still, and
 * only at the end), B64_BLANKS skips blanks anywhere. Returns the length, or -EINVAL for text
 * that is not base64 (a byte outside the alphabet, '=' inside, one digit too many), -ENOSPC when
 * out is too small. */
int b64_decode(const char *in, size_t n, void *out, size_t cap, unsigned flags);

/* b64_decode into a malloc'd buffer with a NUL after the bytes (for text such as a PEM block).
 * 0, -EINVAL, or -ENOMEM. */
int b64_decode_alloc(const char *in, size_t n, unsigned flags, char **out, size_t *len);

#endif
