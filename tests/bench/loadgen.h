/* tests/bench/loadgen.h — the simulated agents of tests/bench/rdzv_loadgen.c, shared by its
 * two files: rdzv_loadgen.c (the agents' protocol on an epoll loop per thread) and
 * loadgen_phases.c (what a run measures, the report, main). */
#ifndef PODRUN_TESTS_BENCH_LOADGEN_H
#define PODRUN_TESTS_BENCH_LOADGEN_H

#include <netinet/in.h>
#include <stdint.h>

#include "rdzv/store/wire.h"
#include "tests/bench/loadgen_util.h"

/* ---- options ---- */

struct loadgen_opts {
    int k, spares, rounds, sample;
    double steady, interval, progress;
    char host[64];
    int port;
    int host_pid;
    char run_id[64], done_file[512];
    int burst, hold, no_relay, threads;
};
extern struct loadgen_opts O;

/* ---- connections ---- */

/* What the reply at the head of a connection's queue answers. */
enum exp_kind { E_HELLO, E_PING, E_STATUS, E_WAIT, E_GET_ASSIGN, E_GET_END, E_NUMKEYS, E_CANCEL,
                E_POLL, E_GET_GO };
enum { AGENT, PROBE };
#define EXP_MAX 32

struct agent;

typedef struct conn {
    int fd;
    struct agent *a;
    unsigned char which, up;
    unsigned char exp[EXP_MAX];
    unsigned ehead, en;
    char *rbuf;
    size_t rlen, rcap;
    char *obuf;
    size_t olen, ocap;
    uint32_t nonce;
} conn_t;

enum agent_state { A_NEW, A_CONNECTING, A_JOINING, A_RUNNING, A_STOPPED, A_FINISHED, A_OUT };

typedef struct agent {
    int idx;
    char ids[17], name[32], addr[32];
    conn_t c;
    int state, spare;
    int join_k, round, node_rank, rank_base;
    int ping_out;
    uint32_t ping_nonce;
    uint64_t ping_sent, last_heard;
    uint64_t t_join, t_assigned, t_woken, t_decided;
    int assigned_round;  /* round of the latest assignment read, -1 none */
    int woken_round;     /* round whose end woke this agent, -1 none */
    uint64_t sent, recv; /* messages: requests written, replies read */
    /* the relay links of its round (rdzv/relay.h): fed, it takes the end from its parent */
    int fed, nch, ch_cap, relay_round, rejoin_held;
    /* the restart through the tree (relay.h): the joins held for the parent, the last
     * assignment an in-place go moves to the next round */
    int parent_rank, tree_wait, go_get, self_in, children_in, direct, gather_armed, go_round;
    int gather_seq;
    struct sockaddr_in parent_sa;
    char *held, *last;
    size_t held_len, held_cap, last_len;
    struct child {
        int rank;
        struct sockaddr_in sa;
    } *ch;
} agent_t;

extern agent_t *agents;
/* the latest round's restart through the tree: the last gather written, the first go read */
extern _Atomic uint64_t t_last_gather, t_first_go;
extern int n_members;       /* agents [0, n_members) are round 0's members; the rest spares */
extern int n_agents;        /* simulated: K-1 members + spares */
/* --threads T: thread t plays the agents of the relay sockets (addresses) i with i % T == t,
 * on an epoll loop and a timer heap of its own; thread 0 also runs the phases */
extern _Thread_local int epfd, my_thread;
extern char prefix[128];
extern _Atomic int connected;   /* agents whose connection said hello */
extern _Atomic int connect_limit; /* agents [0, connect_limit) may connect */
extern conn_t probe;        /* GETNUMKEYS for the soak (thread 0) */
extern int64_t probe_keys;
extern _Atomic long errors;
extern int *by_rank;        /* node rank -> agent, as the latest assignments say */
extern _Atomic int holding; /* --hold rounds: a decision read holds the rejoin (rejoin_held) */
/* what thread 0 asks of every thread: held rejoins out, then every running agent done */
extern _Atomic int release_gen, done_gen;
extern _Atomic long relayed, polled, relay_sent, relay_lost, relay_bad; /* ends taken and sent on */
/* the restart through the tree: joins sent up, gathers written, gos taken from the parent and
 * from the store, and joins sent to the store after no go came for a heartbeat period */
extern _Atomic long tree_joined, gathers, go_relayed, go_read, tree_fallbacks;
extern char first_error[256];


/* per round below rounds_cap: assignments read and ends taken, counted as they happen, so that
 * waiting for "every agent has it" costs nothing per loop iteration (a scan of 16k agents after
 * every epoll_wait was most of the loop's time during a push) */
extern _Atomic int *assigned_in, *woken_in;
extern int rounds_cap;
extern uint64_t hb_ns; /* the heartbeat period of a job of K agents, as the real agent's */

void error_once(const agent_t *a, const char *what);
/* Whether agent a is played by the calling thread. */
int mine(const agent_t *a);
/* Sets up the calling thread as thread 0 and starts threads 1..T-1. With more than one, thread
 * t is pinned to CPU t % 2 where allowed, and one on CPU 1 (the host's) runs at nice 19. */
void threads_start(void);
void poll_once(int timeout_ms);
/* Runs the loop until pred() holds or `secs` pass; 0 when it held. */
int run_until(int (*pred)(void), double secs);
void run_for(double secs);
/* The host's key count, asked with GETNUMKEYS on a connection of its own. */
long host_keys(void);
void send_join(agent_t *a);
/* After a restart decision: the next join, up the tree where the agent had links, as the real
 * agent sends it (rdzv/backend_store.c). */
void rejoin(agent_t *a);
void send_fail(agent_t *a);
void send_done(agent_t *a);
void start_progress(agent_t *a);

#endif
