/* rdzv/store/acl.h — which source addresses may connect to the job store: a list of CIDR blocks
 * (--store-allow) and of single addresses (the job's own pods or hosts as discovery sees them).
 * Pure code: no I/O; addresses are parsed with inet_pton and compared as bytes.
 *
 * An IPv4 peer of a dual-stack listener arrives as ::ffff:a.b.c.d and is matched as a.b.c.d, so
 * one list serves both kinds of socket. */
#ifndef PODRUN_RDZV_ACL_H
#define PODRUN_RDZV_ACL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct acl_entry {
    uint8_t family;   /* 4 or 6 */
    uint8_t bits;     /* prefix length */
    uint8_t a[16];    /* the address, masked to `bits` */
} acl_entry_t;

typedef struct acl {
    acl_entry_t *e;
    size_t n, cap;
} acl_t;

/* Adds every entry of "CIDR,ADDR,..." (blanks around entries ignored; an address alone is a
 * /32 or /128). With `job` non-NULL the word "job" may be one of the entries: it adds nothing and
 * sets *job to 1 (the caller adds the job's own addresses). 0, or -EINVAL with one line in err
 * naming the bad entry and what it should look like (nothing is added then), or -ENOMEM. `what`
 * names the input (a flag, a variable). */
int acl_add_list(acl_t *acl, const char *list, const char *what, int *job, char *err,
                 size_t elen);
/* Adds one address or CIDR: 0, -EINVAL or -ENOMEM. */
int acl_add(acl_t *acl, const char *entry);
/* Drops every entry (the memory is kept). */
void acl_clear(acl_t *acl);
void acl_free(acl_t *acl);
/* 1 when the address (AF_INET or AF_INET6 sockaddr) is inside one of the entries. */
int acl_allows(const acl_t *acl, const struct sockaddr *sa);
/* 1 when two socket addresses name the same IP (ports ignored, v4-mapped seen as v4). */
int acl_same_ip(const struct sockaddr *a, const struct sockaddr *b);

#endif
