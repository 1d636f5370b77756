/* tests/fuzz/fuzz_auth.c — libFuzzer target: a stranger's bytes against the store's guards. The
 * input is split at its first NUL: the first part goes through the server's side of the token
 * handshake as one or two keys (a hello then a proof, separated by a newline) and through the
 * rule for agents' record keys; the second through the client's check of a server's answer and
 * through the allow-list parser. Nothing may crash or read out of bounds; only a proof the token
 * made may authenticate a connection, and a record key must have the record's shape. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/store/acl.h"
#include "rdzv/store/auth.h"
#include "rdzv/records.h"

static const uint8_t NS[AUTH_NONCE_LEN] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

static void server(const auth_key_t *k, const char *d, size_t n)
{
    auth_conn_t st;
    char reply[AUTH_REPLY_MAX];
    size_t rlen;
    memset(&st, 0, sizeof st);
    const char *nl = memchr(d, '\n', n);
    size_t first = nl ? (size_t)(nl - d) : n;
    auth_server_answer(k, &st, NS, d, first, reply, sizeof reply, &rlen);
    if (rlen >= sizeof reply)
        abort();
    if (nl) {
        int r = auth_server_answer(k, &st, NS, nl + 1, n - first - 1, reply, sizeof reply, &rlen);
        /* a proof is accepted only as the one the token makes for this hello */
        if (r == 0 && st.state == AUTH_S_OK) {
            char proof[AUTH_KEY_MAX], r1[AUTH_REPLY_MAX];
            size_t l1;
            auth_conn_t again;
            memset(&again, 0, sizeof again);
            auth_server_answer(k, &again, NS, d, first, r1, sizeof r1, &l1);
            if (auth_client_prove(k, again.nc, r1, l1, proof, sizeof proof) != 0 ||
                strlen(proof) != n - first - 1 || memcmp(proof, nl + 1, n - first - 1) != 0)
                abort();
        }
    }
}

static void records(const char *d, size_t n)
{
    if (!rdzv_agent_record_key(d, n, "podrun/j/"))
        return;
    if (n < 9 + 2 + 17 || memcmp(d, "podrun/j/n/", 11) != 0 || memchr(d, '\0', n))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    const char *z = memchr(d, '\0', size);
    size_t n1 = z ? (size_t)(z - d) : size;
    auth_key_t k;
    char err[300];
    if (auth_key_from_token("a fuzzing token, long enough", 28, "fuzz", &k, err, sizeof err))
        abort();
    server(&k, d, n1);
    records(d, n1);
    if (!z)
        return 0;
    const char *b = z + 1;
    size_t n2 = size - n1 - 1;
    char proof[AUTH_KEY_MAX];
    uint8_t nc[AUTH_NONCE_LEN] = {0};
    auth_client_prove(&k, nc, b, n2, proof, sizeof proof);
    char *list = malloc(n2 + 1);
    if (!list)
        return 0;
    memcpy(list, b, n2);
    list[n2] = '\0';
    acl_t acl = {0};
    int job = 0;
    acl_add_list(&acl, list, "fuzz", &job, err, sizeof err);
    acl_free(&acl);
    free(list);
    return 0;
}
