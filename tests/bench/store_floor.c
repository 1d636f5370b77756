/* tests/bench/store_floor.c — the floor for store benchmarks: a minimal single-threaded epoll
 * server that parses TCPStore requests (1.13 and 2.x framing) and answers them with the right
 * reply shape, keeping nothing but the set of key names (so WAIT can be answered when a key
 * appears) and one counter. No limits, no values, no error handling beyond closing. What a real
 * store costs above this is the price of actually storing things and being robust. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct fconn {
    int dialect;    /* 0 unknown, 1, 2 */
    int waiting;    /* parked in a WAIT */
    char wkey[96];
    size_t wklen;
    size_t len;
    char buf[16384];
} fconn_t;

#define MAXFD 70000
static fconn_t *conns[MAXFD];
static int parked[MAXFD], nparked;
static int64_t counter;

/* key names seen by SET/ADD, open addressing */
#define TAB (1 << 20)
static uint64_t tab[TAB];

static uint64_t hash(const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h | 1;
}

static void tab_put(uint64_t h)
{
    for (size_t i = h & (TAB - 1);; i = (i + 1) & (TAB - 1)) {
        if (tab[i] == h)
            return;
        if (!tab[i]) {
            tab[i] = h;
            return;
        }
    }
}

static int tab_has(uint64_t h)
{
    for (size_t i = h & (TAB - 1);; i = (i + 1) & (TAB - 1)) {
        if (tab[i] == h)
            return 1;
        if (!tab[i])
            return 0;
    }
}

static uint64_t u64(const char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}

static const char value32[32] = "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv";

static void out_u64(char *o, size_t *n, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        o[(*n)++] = (char)(v >> (8 * i));
}

/* canonical ops: 2.x numbering */
enum { VALIDATE, SET, CSET, GET, ADD, CHECK, WAIT, NUMKEYS, DEL, APPEND, MGET, MSET, CANCEL, PING };
static const int v1map[] = {SET, CSET, GET, ADD, CHECK, WAIT, NUMKEYS, -1, DEL};

static void wake(uint64_t h)
{
    for (int i = 0; i < nparked; i++) {
        int fd = parked[i];
        fconn_t *c = conns[fd];
        if (c && c->waiting && hash(c->wkey, c->wklen) == h) {
            c->waiting = 0;
            if (write(fd, "", 1) < 0) {
            }
            parked[i--] = parked[--nparked];
        }
    }
}

/* Parses one request at p[0..n); returns bytes used, 0 if incomplete, -1 on junk. */
static ssize_t one(int fd, fconn_t *c, const char *p, size_t n, char *o, size_t *on)
{
    if (n < 1)
        return 0;
    int op = c->dialect == 2 ? p[0] : ((unsigned char)p[0] < 9 ? v1map[(int)p[0]] : -1);
    size_t off = 1;
#define NEED(k) do { if (n < off + (k)) return 0; } while (0)
#define STR(ptr, len) do { NEED(8); len = u64(p + off); if (len > (1u << 24)) return -1; \
                           off += 8; NEED(len); ptr = p + off; off += len; } while (0)
    const char *k = NULL, *v;
    size_t kl = 0, vl;
    uint64_t cnt;
    switch (op) {
    case VALIDATE:
    case PING:
        NEED(4);
        if (op == PING)
            memcpy(o + *on, p + off, 4), *on += 4;
        return (ssize_t)(off + 4);
    case SET:
    case APPEND:
        STR(k, kl);
        STR(v, vl);
        (void)v;
        uint64_t h = hash(k, kl);
        tab_put(h);
        if (nparked)
            wake(h);
        return (ssize_t)off;
    case GET:
        STR(k, kl);
        out_u64(o, on, 32);
        memcpy(o + *on, value32, 32);
        *on += 32;
        return (ssize_t)off;
    case ADD:
        STR(k, kl);
        NEED(8);
        off += 8;
        tab_put(hash(k, kl));
        out_u64(o, on, (uint64_t)++counter);
        return (ssize_t)off;
    case NUMKEYS:
        out_u64(o, on, 1);
        return (ssize_t)off;
    case WAIT:
    case CHECK:
        NEED(8);
        cnt = u64(p + off);
        off += 8;
        if (cnt != 1)
            return -1;
        STR(k, kl);
        if (op == CHECK || tab_has(hash(k, kl))) {
            o[(*on)++] = 0;
        } else if (kl < sizeof c->wkey) {
            memcpy(c->wkey, k, kl);
            c->wklen = kl;
            c->waiting = 1;
            parked[nparked++] = fd;
        }
        return (ssize_t)off;
    default:
        return -1;
    }
}

static void drop(int ep, int fd)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    if (conns[fd] && conns[fd]->waiting)
        for (int i = 0; i < nparked; i++)
            if (parked[i] == fd)
                parked[i--] = parked[--nparked];
    free(conns[fd]);
    conns[fd] = NULL;
}

static void serve(int ep, int fd)
{
    fconn_t *c = conns[fd];
    ssize_t r = read(fd, c->buf + c->len, sizeof c->buf - c->len);
    if (r <= 0) {
        if (r < 0 && errno == EAGAIN)
            return;
        drop(ep, fd);
        return;
    }
    c->len += (size_t)r;
    static char out[65536];
    size_t on = 0, off = 0;
    if (!c->dialect) {
        if (c->len < 5 && c->buf[0] == 0)
            return;
        c->dialect = memcmp(c->buf, "\x00\xCE\xF7\x85\x3C", 5) == 0 ? 2 : 1;
    }
    while (off < c->len && on < sizeof out - 128) {
        ssize_t u = one(fd, c, c->buf + off, c->len - off, out, &on);
        if (u < 0) {
            drop(ep, fd);
            return;
        }
        if (u == 0)
            break;
        off += (size_t)u;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    if (on && write(fd, out, on) < 0) {
    }
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 29500;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one1 = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one1, sizeof one1);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 65535) < 0) {
        perror("store_floor: bind");
        return 1;
    }
    fprintf(stderr, "store_floor: listening on 127.0.0.1:%d\n", port);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[1024];
    for (;;) {
        int k = epoll_wait(ep, evs, 1024, -1);
        for (int i = 0; i < k; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAXFD) {
                        close(c);
                        continue;
                    }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one1, sizeof one1);
                    conns[c] = calloc(1, sizeof(fconn_t));
                    struct epoll_event e2 = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &e2);
                }
            } else {
                serve(ep, fd);
            }
        }
    }
}
