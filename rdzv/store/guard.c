/* rdzv/store/guard.c — who may do what in the job store (guard.h).
 *
 * The guard runs before a request's handler. It answers the token handshake (rdzv/store/auth.h),
 * keeps the keys under "podrun/" from connections that did not pass it, answers LIST and
 * GETNUMKEYS to them as if those keys did not exist, and lets nobody write a key under "podrun/"
 * that the hosting process does not accept from clients (the coordinator's own answers). A
 * refusal closes the connection, as torch's servers do when a handler throws, with one line
 * naming the peer (the server adds it); the key space is untouched. */
#include "rdzv/store/guard.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

void store_guard_set(store_guard_t *g, const auth_key_t *key, store_may_write_cb may_write,
                     void *arg)
{
    g->has_key = key != NULL;
    if (key)
        g->key = *key;
    g->may_write = may_write;
    g->arg = arg;
    g->on = key || may_write;
}

/* A key for a log line: printable ASCII, cut at 80 bytes. */
static void printable(char *out, size_t cap, const char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap && i < 80; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x20 && ch < 0x7f)
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (n > 80 && o + 4 < cap)
        memcpy(out + o, "...", 3), o += 3;
    out[o] = '\0';
}

static int refuse(const wire_req_t *q, wire_str_t k, const char *why, char *line, size_t cap)
{
    char key[400];
    printable(key, sizeof key, k.p, k.len);
    snprintf(line, cap, "%s of '%s' refused: %s", wire_op_name(q->op), key, why);
    return STORE_GUARD_REFUSE;
}

int store_guard_hidden(const char *key, size_t klen)
{
    return auth_under(key, klen, AUTH_PROTECTED_PREFIX, sizeof AUTH_PROTECTED_PREFIX - 1);
}

int store_guard_check(const store_guard_t *g, const auth_conn_t *a, const wire_req_t *q,
                      char *line, size_t cap)
{
    if (!g->on)
        return STORE_GUARD_PASS;
    int authed = !g->has_key || a->state == AUTH_S_OK;
    if (q->op == WIRE_GET && g->has_key && auth_is_handshake_key(q->key.p, q->key.len))
        return STORE_GUARD_HANDSHAKE;
    if (!authed && (q->op == WIRE_LIST || q->op == WIRE_GETNUMKEYS))
        return STORE_GUARD_HIDE;
    int writes = auth_op_writes(q->op);
    auth_keys_t ks;
    wire_str_t k;
    auth_keys_init(&ks, q);
    while (auth_keys_next(&ks, &k)) {
        if (!store_guard_hidden(k.p, k.len))
            continue;
        if (!authed)
            return refuse(q, k, "podrun's keys need the job's token and this connection "
                                "did not authenticate", line, cap);
        char why[300] = "";
        if (writes && g->may_write && !g->may_write(g->arg, k.p, k.len, why, sizeof why))
            return refuse(q, k, why[0] ? why : "no client writes this key (only agents' own "
                                               "records are written over the wire)", line, cap);
    }
    return STORE_GUARD_PASS;
}

/* The challenge or the verdict. A wrong proof is answered with an empty value, which the server
 * writes before the connection closes so the agent can say what happened. */
int store_guard_answer(const store_guard_t *g, auth_conn_t *a, const wire_req_t *q, char *reply,
                       size_t rcap, size_t *len, char *line, size_t cap)
{
    uint8_t ns[AUTH_NONCE_LEN];
    *len = 0;
    if (getrandom(ns, sizeof ns, 0) != (ssize_t)sizeof ns) {
        snprintf(line, cap, "no random bytes for the token handshake");
        return -EIO;
    }
    if (auth_server_answer(&g->key, a, ns, q->key.p, q->key.len, reply, rcap, len) == 0)
        return 0;
    snprintf(line, cap, "its rendezvous token proof is wrong (a replayed handshake, or a node "
                        "started with another token)");
    return -EACCES;
}

int store_guard_admits(const store_guard_t *g, const struct sockaddr *peer,
                       const struct sockaddr *self)
{
    if (!g->acl || acl_allows(g->acl, peer))
        return 1;
    return self && acl_same_ip(peer, self);
}
