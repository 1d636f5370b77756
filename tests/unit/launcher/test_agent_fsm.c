/* tests/unit/launcher/test_agent_fsm.c — the agent's table (launcher/agent_fsm.c) without a
 * loop: every state against every event, the late ones (a timer or a callback after the state
 * moved on) taken by nobody; STARTING's order; what comes next once the workers are gone; and
 * the exit status. A small hub with fake stages (sim_*) plays whole stories through the table
 * as agent.c does, the way tests/unit/rdzv/test_host.c drives the coordinator. */
#include <stdbool.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/agent_fsm.h"
#include "rdzv/base/common.h"

#define NS AGENT_NSTATES
#define NE AGENT_NEVENTS
#define A(x) AGENT_ACT_##x

/* The facts of a node in state s to which nothing unusual happened: workers only while RUNNING
 * or STOPPING, the output drained and the rendezvous closed once EXITING. */
static struct agent_facts plain(enum agent_state s)
{
    struct agent_facts f = {0};
    f.workers_down = !(s == AGENT_RUNNING || s == AGENT_STOPPING);
    f.drained = f.closed = s >= AGENT_EXITING;
    f.stops = true;
    return f;
}

/* ---------- every state x every event ---------- */

/* Under plain facts: which states take which event, and where it leads ('.' refused, '=' same
 * state, else the first letter of the next state). */
static const char *const expect[NE] = {
    /* the columns: INIT RENDEZVOUS STARTING RUNNING STOPPING EXITING DONE */
    [AGENT_EV_DISCOVERED] = "R......",
    [AGENT_EV_CANNOT_START] = "XX.....",
    [AGENT_EV_ASSIGNED] = ".S.....",
    [AGENT_EV_STEP_DONE] = "..=....",
    [AGENT_EV_STEP_FAILED] = "..P....",
    [AGENT_EV_LEAVE] = "=====..",
    [AGENT_EV_HANG] = "...=...",
    [AGENT_EV_LOCAL_FAILURE] = "...P...",
    [AGENT_EV_LEFTOVERS] = "...P...",
    [AGENT_EV_HEALTH_FAILED] = "...P...",
    [AGENT_EV_WORKERS_GONE] = "...P=..",
    [AGENT_EV_ENDING] = "...P...",
    [AGENT_EV_STOPPED] = "===P=..",
    [AGENT_EV_FINISHED] = "=====..",
    [AGENT_EV_LOST] = "===P=..",
    [AGENT_EV_POD_LOST] = "=====..",
    [AGENT_EV_SIGNAL] = "===P=..",
    [AGENT_EV_LEFT] = ".......",
    [AGENT_EV_RECLAIMED] = "....R..",
    [AGENT_EV_OUTPUT_DONE] = ".....D.",
    [AGENT_EV_JOBSET_GO] = "=====..",
    [AGENT_EV_JOBSET_BEHIND] = "=====..",
    [AGENT_EV_JOBSET_ENDED] = "=====..",
};

static char letter(enum agent_state from, struct agent_next n)
{
    static const char first[NS] = {'I', 'R', 'S', 'U', 'P', 'X', 'D'};
    if (!n.accepted)
        return '.';
    return n.next == from ? '=' : first[n.next];
}

static void test_every_state_every_event(void)
{
    for (int e = 0; e < NE; e++) {
        CHECK(expect[e] != NULL);
        if (!expect[e])
            continue;
        for (int s = 0; s < NS; s++) {
            struct agent_facts f = plain((enum agent_state)s);
            char got = letter((enum agent_state)s, agent_fsm_step((enum agent_state)s,
                                                                  (enum agent_ev)e, &f));
            if (got != expect[e][s])
                fprintf(stderr, "  %s in %s: '%c', expected '%c'\n",
                        agent_fsm_event_name((enum agent_ev)e),
                        agent_fsm_state_name((enum agent_state)s), got, expect[e][s]);
            CHECK(got == expect[e][s]);
        }
    }
}

/* Whatever the facts, no event leads back out of EXITING or DONE, and an accepted event's
 * transition carries what its new state needs: the join into RENDEZVOUS, a step into STARTING,
 * the checks into RUNNING, the end into EXITING. */
static void test_transitions_carry_their_work(void)
{
    for (unsigned bits = 0; bits < 1u << 10; bits++) {
        struct agent_facts f = {0};
        f.workers_down = bits & 1, f.leaving = bits & 2, f.signal = bits & 4, f.quit = bits & 8;
        f.lost = bits & 16, f.decided = bits & 32, f.restart = bits & 64, f.failed = bits & 128;
        f.stops = bits & 256, f.drained = f.closed = bits & 512;
        f.step = (int)(bits % AGENT_NSTEPS);
        for (int s = 0; s < NS; s++)
            for (int e = 0; e < NE; e++) {
                struct agent_next n = agent_fsm_step((enum agent_state)s, (enum agent_ev)e, &f);
                if (!n.accepted) {
                    CHECK(n.actions == 0 && n.next == (enum agent_state)s);
                    continue;
                }
                if (s >= AGENT_EXITING)
                    CHECK(n.next >= (enum agent_state)s);
                if (n.next == (enum agent_state)s)
                    continue;
                if (n.next == AGENT_RENDEZVOUS)
                    CHECK(n.actions & (A(RDZV_START) | A(REJOIN)));
                if (n.next == AGENT_STARTING)
                    CHECK((n.actions & A(STEP)) && n.step == AGENT_STEP_ENV);
                if (n.next == AGENT_RUNNING)
                    CHECK(n.actions & A(WATCH));
                if (n.next == AGENT_EXITING)
                    CHECK(n.actions & A(EXIT));
                if (n.next == AGENT_STOPPING && s == AGENT_RUNNING)
                    CHECK(n.actions & (A(STOP) | A(GONE)));
            }
    }
}

/* ---------- the late ones ---------- */

static bool takes(enum agent_state s, enum agent_ev e, struct agent_facts f)
{
    return agent_fsm_step(s, e, &f).accepted;
}

static void test_late_events_are_ignored(void)
{
    /* after the end, nothing from a stage counts: the rendezvous' news, a check's result, a
     * timer, a step's callback */
    static const enum agent_ev stage_events[] = {
        AGENT_EV_ASSIGNED, AGENT_EV_STOPPED, AGENT_EV_LOST, AGENT_EV_FINISHED, AGENT_EV_ENDING,
        AGENT_EV_STEP_DONE, AGENT_EV_STEP_FAILED, AGENT_EV_LEAVE, AGENT_EV_HEALTH_FAILED,
        AGENT_EV_HANG, AGENT_EV_LOCAL_FAILURE, AGENT_EV_RECLAIMED, AGENT_EV_SIGNAL,
        AGENT_EV_DISCOVERED, AGENT_EV_CANNOT_START, AGENT_EV_POD_LOST, AGENT_EV_JOBSET_GO,
        AGENT_EV_JOBSET_BEHIND, AGENT_EV_JOBSET_ENDED};
    for (size_t i = 0; i < sizeof stage_events / sizeof *stage_events; i++) {
        CHECK(!takes(AGENT_EXITING, stage_events[i], plain(AGENT_EXITING)));
        CHECK(!takes(AGENT_DONE, stage_events[i], plain(AGENT_DONE)));
    }
    struct agent_facts f = plain(AGENT_STOPPING);
    /* a reclaim tick once the node was told to stop, left, or lost the job */
    f.workers_down = true;
    f.signal = true;
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_RECLAIMED, f));
    f.signal = false, f.quit = true;
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_RECLAIMED, f));
    f.quit = false, f.lost = true;
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_RECLAIMED, f));
    CHECK(!takes(AGENT_RENDEZVOUS, AGENT_EV_RECLAIMED, plain(AGENT_RENDEZVOUS)));
    /* a health check, a hang, a timer once the workers are being stopped, or after a failure */
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_HEALTH_FAILED, plain(AGENT_STOPPING)));
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_HANG, plain(AGENT_STOPPING)));
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_LOCAL_FAILURE, plain(AGENT_STOPPING)));
    f = plain(AGENT_RUNNING);
    f.failed = true;
    CHECK(!takes(AGENT_RUNNING, AGENT_EV_HEALTH_FAILED, f));
    CHECK(!takes(AGENT_RUNNING, AGENT_EV_HANG, f));
    f.failed = false, f.health_bad = true;
    CHECK(!takes(AGENT_RUNNING, AGENT_EV_HEALTH_FAILED, f));
    /* a preflight result, a resolved master, the front-end's agreement after the attempt ended */
    for (int s = 0; s < NS; s++)
        if (s != AGENT_STARTING) {
            CHECK(!takes((enum agent_state)s, AGENT_EV_STEP_DONE, plain((enum agent_state)s)));
            CHECK(!takes((enum agent_state)s, AGENT_EV_STEP_FAILED, plain((enum agent_state)s)));
        }
    /* ... or while STARTING once the node stops, leaves, or the job moved on */
    for (int i = 0; i < 5; i++) {
        f = plain(AGENT_STARTING);
        *(i == 0 ? &f.signal : i == 1 ? &f.quit : i == 2 ? &f.decided : i == 3 ? &f.lost
                                                                                : &f.finished) =
            true;
        CHECK(!takes(AGENT_STARTING, AGENT_EV_STEP_DONE, f));
        CHECK(!takes(AGENT_STARTING, AGENT_EV_STEP_FAILED, f));
    }
    /* the rendezvous' news once podrun was told to stop or leaves */
    f = plain(AGENT_RENDEZVOUS);
    f.signal = true;
    CHECK(!takes(AGENT_RENDEZVOUS, AGENT_EV_ASSIGNED, f));
    CHECK(!takes(AGENT_RENDEZVOUS, AGENT_EV_STOPPED, f));
    CHECK(!takes(AGENT_RENDEZVOUS, AGENT_EV_LOST, f));
    f = plain(AGENT_RUNNING);
    f.signal = true;
    CHECK(!takes(AGENT_RUNNING, AGENT_EV_ENDING, f));
    /* a second WORKERS_GONE, a LEFT with no leave on its way */
    CHECK(!takes(AGENT_STOPPING, AGENT_EV_WORKERS_GONE, plain(AGENT_EXITING)));
    for (int s = 0; s < NS; s++)
        CHECK(!takes((enum agent_state)s, AGENT_EV_LEFT, plain((enum agent_state)s)));
    /* the pods ready after a signal; EXITING -> DONE only with the output and the rendezvous */
    f = plain(AGENT_INIT);
    f.signal = true;
    CHECK(!takes(AGENT_INIT, AGENT_EV_DISCOVERED, f));
    f = plain(AGENT_EXITING);
    f.closed = false;
    CHECK(!takes(AGENT_EXITING, AGENT_EV_OUTPUT_DONE, f));
}

/* ---------- STARTING's order ---------- */

static void test_starting_runs_its_steps_in_order(void)
{
    struct agent_facts f = plain(AGENT_RENDEZVOUS);
    struct agent_next n = agent_fsm_step(AGENT_RENDEZVOUS, AGENT_EV_ASSIGNED, &f);
    CHECK_EQ_INT(n.next, AGENT_STARTING);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(STEP));
    CHECK_EQ_INT(n.step, AGENT_STEP_ENV);
    static const int order[] = {AGENT_STEP_ENV, AGENT_STEP_PREFLIGHT, AGENT_STEP_FRONTEND,
                                AGENT_STEP_SPAWN};
    for (int k = 0; k + 1 < AGENT_NSTEPS; k++) {
        f = plain(AGENT_STARTING);
        f.step = order[k];
        n = agent_fsm_step(AGENT_STARTING, AGENT_EV_STEP_DONE, &f);
        CHECK_EQ_INT(n.next, AGENT_STARTING);
        CHECK_EQ_INT(n.actions, A(STEP));
        CHECK_EQ_INT(n.step, order[k + 1]);
    }
    f.step = AGENT_STEP_SPAWN;
    n = agent_fsm_step(AGENT_STARTING, AGENT_EV_STEP_DONE, &f);
    CHECK_EQ_INT(n.next, AGENT_RUNNING);
    CHECK_EQ_INT(n.actions, A(WATCH));
    /* a step that fails is this node's failure: the job is told, the workers stopped */
    f.step = AGENT_STEP_FRONTEND;
    n = agent_fsm_step(AGENT_STARTING, AGENT_EV_STEP_FAILED, &f);
    CHECK_EQ_INT(n.next, AGENT_STOPPING);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(FAIL) | A(STOP));
}

/* ---------- what comes next ---------- */

static void test_settle(void)
{
    struct agent_facts f = plain(AGENT_STOPPING);
    struct agent_next n = agent_fsm_settle(AGENT_STOPPING, &f);
    CHECK(n.next == AGENT_STOPPING && n.actions == 0);   /* workers still there: wait */
    f.decided = true;
    n = agent_fsm_settle(AGENT_STOPPING, &f);
    CHECK(n.next == AGENT_STOPPING && n.actions == 0);
    f.workers_down = true;
    n = agent_fsm_settle(AGENT_STOPPING, &f);   /* a decision to exit, the workers gone */
    CHECK(n.next == AGENT_EXITING && n.actions == A(EXIT));
    f.restart = true;
    n = agent_fsm_settle(AGENT_STOPPING, &f);
    CHECK(n.next == AGENT_STOPPING && n.actions == A(RESTART));
    /* a restart decided while STARTING: the attempt is over, STOPPING waits for the GPUs */
    f = plain(AGENT_STARTING);
    f.decided = f.restart = true;
    f.check_running = true;
    n = agent_fsm_settle(AGENT_STARTING, &f);
    CHECK_EQ_INT(n.next, AGENT_STOPPING);
    CHECK_EQ_INT(n.actions, A(CANCEL_CHECK) | A(CANCEL_FRONTEND) | A(RESTART));
    /* a signal or a leave waits for the leave record, then exits */
    f = plain(AGENT_RENDEZVOUS);
    f.signal = f.leaving = true;
    n = agent_fsm_settle(AGENT_RENDEZVOUS, &f);
    CHECK(n.next == AGENT_RENDEZVOUS && n.actions == 0);
    f.leaving = false;
    n = agent_fsm_settle(AGENT_RENDEZVOUS, &f);
    CHECK(n.next == AGENT_EXITING && n.actions == A(EXIT));
    /* ... and stops the GPUs' wait of a restart */
    f = plain(AGENT_STOPPING);
    f.workers_down = f.reclaiming = f.signal = f.leaving = true;
    n = agent_fsm_settle(AGENT_STOPPING, &f);
    CHECK(n.next == AGENT_STOPPING && n.actions == A(CANCEL_RECLAIM));
    /* lost or finished: exit */
    f = plain(AGENT_RENDEZVOUS);
    f.lost = true;
    CHECK_EQ_INT(agent_fsm_settle(AGENT_RENDEZVOUS, &f).next, AGENT_EXITING);
    f.lost = false, f.finished = true;
    CHECK_EQ_INT(agent_fsm_settle(AGENT_RENDEZVOUS, &f).next, AGENT_EXITING);
    /* nothing once exiting */
    for (int s = AGENT_EXITING; s < NS; s++) {
        f = plain((enum agent_state)s);
        f.lost = f.decided = f.signal = true;
        n = agent_fsm_settle((enum agent_state)s, &f);
        CHECK(n.next == (enum agent_state)s && n.actions == 0);
    }
}

/* ---------- the events' own rows ---------- */

static void test_signals(void)
{
    struct agent_facts f = plain(AGENT_RUNNING);
    f.stops = false;
    CHECK_EQ_INT(agent_fsm_step(AGENT_RUNNING, AGENT_EV_SIGNAL, &f).actions, A(FORWARD));
    CHECK(!takes(AGENT_RENDEZVOUS, AGENT_EV_SIGNAL, f));   /* no worker to forward it to */
    f.stops = true;
    struct agent_next n = agent_fsm_step(AGENT_RUNNING, AGENT_EV_SIGNAL, &f);
    CHECK_EQ_INT(n.next, AGENT_STOPPING);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(TELL_LEAVE) | A(STOP) | A(SETTLE));
    f.signal = true;   /* the second */
    CHECK_EQ_INT(agent_fsm_step(AGENT_STOPPING, AGENT_EV_SIGNAL, &f).actions, A(KILL));
    f = plain(AGENT_STOPPING);
    n = agent_fsm_step(AGENT_STOPPING, AGENT_EV_SIGNAL, &f);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(TELL_LEAVE) | A(RESTOP) | A(SETTLE));
    f.workers_down = true;
    n = agent_fsm_step(AGENT_STOPPING, AGENT_EV_SIGNAL, &f);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(TELL_LEAVE) | A(SETTLE));
}

static void test_verdict_first(void)
{
    /* a stop while this node holds the check's verdict: act on the verdict, then the stop */
    struct agent_facts f = plain(AGENT_STARTING);
    f.check_running = f.verdict_first = true;
    struct agent_next n = agent_fsm_step(AGENT_STARTING, AGENT_EV_STOPPED, &f);
    CHECK_EQ_INT(n.actions, A(VERDICT_NOW) | A(AGAIN));
    CHECK_EQ_INT(agent_fsm_step(AGENT_STARTING, AGENT_EV_LOST, &f).actions,
                 A(VERDICT_NOW) | A(AGAIN));
    f.again = true;
    n = agent_fsm_step(AGENT_STARTING, AGENT_EV_STOPPED, &f);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(SAY) | A(SETTLE));
    f.again = false, f.verdict_first = false;   /* --preflight-policy warn */
    n = agent_fsm_step(AGENT_STARTING, AGENT_EV_STOPPED, &f);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(SAY) | A(SETTLE));
}

static void test_health_check(void)
{
    struct agent_facts f = plain(AGENT_RUNNING);
    struct agent_next n = agent_fsm_step(AGENT_RUNNING, AGENT_EV_HEALTH_FAILED, &f);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(TELL_FAILURE) | A(STOP));
    f.out = true;   /* the job goes on without this node: it leaves */
    n = agent_fsm_step(AGENT_RUNNING, AGENT_EV_HEALTH_FAILED, &f);
    CHECK_EQ_INT(n.next, AGENT_STOPPING);
    CHECK_EQ_INT(n.actions, A(TAKE) | A(STOP) | A(LEAVE) | A(SETTLE));
}

/* JobSet's in-place restart: what each of its news does in each state, and when it is late. */
static void test_jobset(void)
{
    /* the barrier down: the first join in INIT, the GPUs' wait of a restart in STOPPING; else
     * only "behind" is forgotten */
    for (int s = 0; s < AGENT_EXITING; s++) {
        struct agent_facts f = plain((enum agent_state)s);
        f.barrier = true;
        struct agent_next n = agent_fsm_step((enum agent_state)s, AGENT_EV_JOBSET_GO, &f);
        CHECK(n.accepted && n.next == (enum agent_state)s);
        CHECK_EQ_INT(n.actions, s == AGENT_INIT       ? A(TAKE) | A(JOIN)
                                : s == AGENT_STOPPING ? A(TAKE) | A(RECLAIM)
                                                      : A(TAKE));
        f.barrier = false;
        CHECK_EQ_INT(agent_fsm_step((enum agent_state)s, AGENT_EV_JOBSET_GO, &f).actions, A(TAKE));
        f.barrier = f.signal = true;   /* a stopping signal: the node exits, no join */
        CHECK(!takes((enum agent_state)s, AGENT_EV_JOBSET_GO, f));
    }
    /* behind: while the workers run, this node's failure to the job; before, it follows */
    for (int s = 0; s < AGENT_EXITING; s++) {
        struct agent_facts f = plain((enum agent_state)s);
        struct agent_next n = agent_fsm_step((enum agent_state)s, AGENT_EV_JOBSET_BEHIND, &f);
        CHECK(n.accepted && n.next == (enum agent_state)s);
        CHECK_EQ_INT(n.actions, s == AGENT_RUNNING ? A(TAKE) | A(TELL_FAILURE) : A(CATCH_UP));
        f.behind_told = true;   /* told once per attempt */
        CHECK(!takes((enum agent_state)s, AGENT_EV_JOBSET_BEHIND, f));
        f.behind_told = false, f.decided = true;   /* the job decided already */
        CHECK(!takes((enum agent_state)s, AGENT_EV_JOBSET_BEHIND, f));
    }
    /* ended: a restart held, or waiting at the barrier, becomes an exit; else the node is out */
    for (int s = 0; s < AGENT_EXITING; s++) {
        struct agent_facts f = plain((enum agent_state)s);
        CHECK_EQ_INT(agent_fsm_step((enum agent_state)s, AGENT_EV_JOBSET_ENDED, &f).actions,
                     A(TAKE) | A(LOSE));
        f.decided = true;
        CHECK_EQ_INT(agent_fsm_step((enum agent_state)s, AGENT_EV_JOBSET_ENDED, &f).actions,
                     A(TAKE) | A(EXIT_INSTEAD));
        f.decided = false, f.barrier = true;   /* INIT's barrier is the first join's */
        CHECK_EQ_INT(agent_fsm_step((enum agent_state)s, AGENT_EV_JOBSET_ENDED, &f).actions,
                     s == AGENT_STOPPING ? A(TAKE) | A(EXIT_INSTEAD) : A(TAKE) | A(LOSE));
        f.signal = true;
        CHECK(!takes((enum agent_state)s, AGENT_EV_JOBSET_ENDED, f));
    }
}

static void test_names(void)
{
    CHECK_EQ_STR(agent_fsm_state_name(AGENT_STOPPING), "STOPPING");
    CHECK_EQ_STR(agent_fsm_state_word(AGENT_RENDEZVOUS), "rendezvous");
    CHECK_EQ_STR(agent_fsm_event_name(AGENT_EV_RECLAIMED), "RECLAIMED");
    for (int s = 0; s < NS; s++)
        CHECK(strcmp(agent_fsm_state_name((enum agent_state)s), "?") != 0);
    for (int e = 0; e < NE; e++)
        CHECK(strcmp(agent_fsm_event_name((enum agent_ev)e), "?") != 0);
}

/* ---------- whole stories, with fake stages ---------- */

/* A hub as agent.c is, whose stages only change the facts. */
struct sim {
    enum agent_state s;
    struct agent_facts f;
    bool restart_decision;      /* STOPPED: the decision is a restart */
    bool gpus;                  /* RESTART: a node whose GPUs NVML reads waits for them */
    bool jobset;                /* RESTART: JobSet's barrier holds the next join */
    enum agent_ev verdict;      /* VERDICT_NOW posts this (LEAVE, or STEP_DONE) */
    int steps_run;              /* STEP: how many steps ran */
    int stops, exits, rejoins, kills, leaves, joins, told, catch_ups;
};

static void sim_post(struct sim *m, enum agent_ev e, int step, bool again);

static void sim_run(struct sim *m, enum agent_ev e, unsigned acts, int step)
{
    for (unsigned b = 0; b < AGENT_NACTIONS; b++) {
        unsigned bit = 1u << b;
        if (!(acts & bit))
            continue;
        struct agent_facts *f = &m->f;
        switch (bit) {
        case A(TAKE):
            if (e == AGENT_EV_STOPPED)
                f->decided = true, f->restart = m->restart_decision;
            if (e == AGENT_EV_LOST)
                f->lost = true;
            if (e == AGENT_EV_FINISHED)
                f->finished = true;
            if (e == AGENT_EV_SIGNAL)
                f->signal = true;
            if (e == AGENT_EV_LEFT)
                f->leaving = false;
            if (e == AGENT_EV_HEALTH_FAILED)
                f->health_bad = true;
            if (e == AGENT_EV_STEP_FAILED)
                f->workers_down = false;
            if (e == AGENT_EV_JOBSET_GO)
                f->barrier = f->behind_told = false;
            if (e == AGENT_EV_JOBSET_BEHIND)
                f->behind_told = true;
            if (e == AGENT_EV_JOBSET_ENDED)
                f->barrier = false;
            break;
        case A(TELL_FAILURE): m->told++; break;
        case A(JOIN):
            m->joins++;
            sim_post(m, AGENT_EV_DISCOVERED, 0, false);
            break;
        case A(CATCH_UP): m->catch_ups++; break;
        case A(EXIT_INSTEAD):
            m->restart_decision = false;
            sim_post(m, AGENT_EV_STOPPED, 0, false);
            break;
        case A(LOSE): sim_post(m, AGENT_EV_LOST, 0, false); break;
        case A(FAIL): f->failed = true; break;
        case A(STOP): m->stops++; break;
        case A(KILL): m->kills++; break;
        case A(TELL_LEAVE): f->leaving = true; break;
        case A(LEAVE): f->quit = f->leaving = true, m->leaves++; break;
        case A(GONE): f->workers_down = true; break;
        case A(STEP):
            m->steps_run++;
            if (step == AGENT_STEP_PREFLIGHT) {
                f->check_running = true;   /* the check's verdict comes later */
                break;
            }
            if (step == AGENT_STEP_SPAWN)
                f->workers_down = false;
            sim_post(m, AGENT_EV_STEP_DONE, step, false);
            break;
        case A(VERDICT_NOW):
            f->check_running = false;
            sim_post(m, m->verdict, AGENT_STEP_PREFLIGHT, false);
            break;
        case A(CANCEL_CHECK): f->check_running = false; break;
        case A(CANCEL_RECLAIM): f->reclaiming = false; break;
        case A(RESTART):
            f->decided = f->failed = f->health_bad = false;
            f->barrier = m->jobset;
            if (m->jobset)
                break;   /* JOBSET_GO, then RECLAIM */
            /* fall through */
        case A(RECLAIM):
            f->reclaiming = m->gpus;
            if (!m->gpus)
                sim_post(m, AGENT_EV_RECLAIMED, 0, false);
            break;
        case A(REJOIN): f->reclaiming = false, m->rejoins++; break;
        case A(EXIT): m->exits++; break;
        case A(SETTLE): {
            struct agent_next n = agent_fsm_settle(m->s, f);
            m->s = n.next;
            sim_run(m, e, n.actions, 0);
            break;
        }
        case A(AGAIN): sim_post(m, e, step, true); break;
        default: break;
        }
    }
}

static void sim_post(struct sim *m, enum agent_ev e, int step, bool again)
{
    m->f.step = step;
    m->f.again = again;
    struct agent_next n = agent_fsm_step(m->s, e, &m->f);
    if (!n.accepted)
        return;
    if (n.actions & A(TAKE))
        sim_run(m, e, A(TAKE), n.step);
    m->s = n.next;
    sim_run(m, e, n.actions & ~(unsigned)A(TAKE), n.step);
}

static void sim_init(struct sim *m)
{
    memset(m, 0, sizeof *m);
    m->f = plain(AGENT_INIT);
    m->verdict = AGENT_EV_LEAVE;
}

/* A round, the workers, a failure, a restart, the next round: the whole path of an attempt. */
static void test_story_failure_and_restart(void)
{
    struct sim m;
    sim_init(&m);
    sim_post(&m, AGENT_EV_DISCOVERED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_RENDEZVOUS);
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STARTING);   /* the check runs */
    m.f.check_running = false;
    sim_post(&m, AGENT_EV_STEP_DONE, AGENT_STEP_PREFLIGHT, false);
    CHECK_EQ_INT(m.s, AGENT_RUNNING);
    CHECK_EQ_INT(m.steps_run, AGENT_NSTEPS);
    sim_post(&m, AGENT_EV_LOCAL_FAILURE, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STOPPING);
    sim_post(&m, AGENT_EV_HANG, 0, false);   /* the watchdog, late */
    m.restart_decision = true;
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STOPPING);   /* the workers are still there */
    sim_post(&m, AGENT_EV_WORKERS_GONE, 0, false);
    CHECK_EQ_INT(m.s, AGENT_RENDEZVOUS);
    CHECK_EQ_INT(m.rejoins, 1);
    CHECK(!m.f.failed && !m.f.decided);
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STARTING);
    CHECK_EQ_INT(m.exits, 0);
}

/* A restart decided while STARTING (the good nodes under --preflight-policy exclude) on a node
 * whose GPUs NVML reads: the wait for the GPUs ends in the next join, not in a node that
 * neither rejoins nor exits. */
static void test_story_restart_while_starting_rejoins(void)
{
    struct sim m;
    sim_init(&m);
    m.gpus = true;
    m.s = AGENT_RENDEZVOUS;
    m.f = plain(AGENT_RENDEZVOUS);
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    CHECK(m.s == AGENT_STARTING && m.f.check_running);
    m.f.check_running = false;   /* exclude: the good nodes wait for the job's decision */
    m.restart_decision = true;
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STOPPING);
    CHECK(m.f.reclaiming);
    sim_post(&m, AGENT_EV_RECLAIMED, 0, false);   /* the GPUs' memory is free */
    CHECK_EQ_INT(m.s, AGENT_RENDEZVOUS);
    CHECK_EQ_INT(m.rejoins, 1);
}

/* A signal while the GPUs' wait of a restart runs: the wait stops, the node leaves, and a tick
 * that fires meanwhile changes nothing. */
static void test_story_signal_during_reclaim(void)
{
    struct sim m;
    sim_init(&m);
    m.gpus = true;
    m.s = AGENT_STOPPING;
    m.f = plain(AGENT_STOPPING);
    m.f.workers_down = true;
    m.restart_decision = true;
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    CHECK(m.s == AGENT_STOPPING && m.f.reclaiming);
    sim_post(&m, AGENT_EV_SIGNAL, 0, false);
    CHECK(m.s == AGENT_STOPPING && !m.f.reclaiming && m.f.leaving);
    sim_post(&m, AGENT_EV_RECLAIMED, 0, false);
    CHECK_EQ_INT(m.rejoins, 0);
    sim_post(&m, AGENT_EV_LEFT, 0, false);
    CHECK_EQ_INT(m.s, AGENT_EXITING);
    CHECK_EQ_INT(m.exits, 1);
    sim_post(&m, AGENT_EV_SIGNAL, 0, false);   /* after the end there is nobody to tell */
    CHECK_EQ_INT(m.kills, 0);
}

/* A stop that reaches a node holding the check's verdict (policy fail): it leaves on the verdict,
 * as every node does, and the stop itself changes nothing more. */
static void test_story_verdict_first(void)
{
    struct sim m;
    sim_init(&m);
    m.s = AGENT_RENDEZVOUS;
    m.f = plain(AGENT_RENDEZVOUS);
    m.f.verdict_first = true;
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    CHECK(m.f.check_running);
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    CHECK_EQ_INT(m.leaves, 1);
    CHECK(m.f.quit && !m.f.decided);
    sim_post(&m, AGENT_EV_LEFT, 0, false);
    CHECK_EQ_INT(m.s, AGENT_EXITING);
    /* under a verdict to start, the stop that follows it stops the workers just started */
    sim_init(&m);
    m.s = AGENT_RENDEZVOUS;
    m.f = plain(AGENT_RENDEZVOUS);
    m.f.verdict_first = true;
    m.verdict = AGENT_EV_STEP_DONE;
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STOPPING);
    CHECK_EQ_INT(m.stops, 1);
}

/* A health check that fails where the job goes on without the node: the workers stop, the node
 * leaves, and it exits once they are gone and the job was told. */
static void test_story_health_leave(void)
{
    struct sim m;
    sim_init(&m);
    m.s = AGENT_RUNNING;
    m.f = plain(AGENT_RUNNING);
    m.f.out = true;
    sim_post(&m, AGENT_EV_HEALTH_FAILED, 0, false);
    CHECK(m.s == AGENT_STOPPING && m.f.quit && m.stops == 1);
    sim_post(&m, AGENT_EV_HEALTH_FAILED, 0, false);   /* the next look, late */
    CHECK_EQ_INT(m.stops, 1);
    sim_post(&m, AGENT_EV_WORKERS_GONE, 0, false);
    CHECK_EQ_INT(m.s, AGENT_STOPPING);   /* the leave record is on its way */
    sim_post(&m, AGENT_EV_LEFT, 0, false);
    CHECK_EQ_INT(m.s, AGENT_EXITING);
}

/* A job under JobSet's in-place restart: the barrier holds the first join; a pod behind while
 * the workers run is told to the job once; the restart waits at the barrier, then rejoins; a
 * JobSet that ends while a restart waits makes it an exit. */
static void test_story_jobset(void)
{
    struct sim m;
    sim_init(&m);
    m.jobset = true;
    m.f.barrier = true;
    sim_post(&m, AGENT_EV_JOBSET_GO, 0, false);
    CHECK_EQ_INT(m.s, AGENT_RENDEZVOUS);
    CHECK_EQ_INT(m.joins, 1);
    sim_post(&m, AGENT_EV_JOBSET_GO, 0, false);   /* again: no second join */
    CHECK_EQ_INT(m.joins, 1);
    sim_post(&m, AGENT_EV_JOBSET_BEHIND, 0, false);   /* before the round: it follows */
    CHECK_EQ_INT(m.catch_ups, 1);
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    m.f.check_running = false;
    sim_post(&m, AGENT_EV_STEP_DONE, AGENT_STEP_PREFLIGHT, false);
    CHECK_EQ_INT(m.s, AGENT_RUNNING);
    sim_post(&m, AGENT_EV_JOBSET_BEHIND, 0, false);
    sim_post(&m, AGENT_EV_JOBSET_BEHIND, 0, false);   /* told once */
    CHECK(m.s == AGENT_RUNNING && m.told == 1);
    m.restart_decision = true;
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    sim_post(&m, AGENT_EV_JOBSET_BEHIND, 0, false);   /* the job decided: nothing more */
    CHECK(m.told == 1 && m.catch_ups == 1);
    sim_post(&m, AGENT_EV_WORKERS_GONE, 0, false);
    CHECK(m.s == AGENT_STOPPING && m.f.barrier && m.rejoins == 0);   /* at the barrier */
    sim_post(&m, AGENT_EV_JOBSET_GO, 0, false);
    CHECK(m.s == AGENT_RENDEZVOUS && m.rejoins == 1 && !m.f.behind_told);
    /* the next restart waits at the barrier, and the JobSet ends meanwhile */
    sim_post(&m, AGENT_EV_ASSIGNED, 0, false);
    m.f.check_running = false;
    sim_post(&m, AGENT_EV_STEP_DONE, AGENT_STEP_PREFLIGHT, false);
    sim_post(&m, AGENT_EV_STOPPED, 0, false);
    sim_post(&m, AGENT_EV_WORKERS_GONE, 0, false);
    CHECK(m.s == AGENT_STOPPING && m.f.barrier);
    sim_post(&m, AGENT_EV_JOBSET_ENDED, 0, false);
    CHECK_EQ_INT(m.s, AGENT_EXITING);
    CHECK(m.exits == 1 && m.rejoins == 1 && !m.f.barrier);
    sim_post(&m, AGENT_EV_JOBSET_GO, 0, false);   /* late */
    CHECK(m.rejoins == 1 && m.joins == 1);
    /* the JobSet ends before the first round: the node is out of the job */
    sim_init(&m);
    m.f.barrier = true;
    sim_post(&m, AGENT_EV_JOBSET_ENDED, 0, false);
    CHECK(m.s == AGENT_EXITING && m.f.lost && m.joins == 0);
}

/* ---------- the exit status ---------- */

static const struct agent_codes codes = {.preflight = 75, .fatal = 76, .hang = 124,
                                         .peer_lost = 170, .peer_failure = 171,
                                         .store_lost = 172, .rdzv_timeout = 173};

static int status(struct agent_outcome o)
{
    return agent_fsm_exit_status(&o, &codes);
}

static void test_exit_status(void)
{
    CHECK_EQ_INT(status((struct agent_outcome){.finished = true, .failed_lr = -1}), 0);
    CHECK_EQ_INT(status((struct agent_outcome){.signal = 15, .quit = true}), 143);
    CHECK_EQ_INT(status((struct agent_outcome){.quit = true, .lost = true}), 75);
    /* a decision to exit */
    struct agent_outcome d = {.decided_exit = true, .dn = 1, .own = 0, .root_rank = 3,
                              .failed_lr = 1, .failed_code = 7};
    CHECK_EQ_INT(status(d), 7);   /* the root cause's own code on its node */
    d.failed_hang = true;
    CHECK_EQ_INT(status(d), 124);
    d.failed_lr = -1, d.root_signo = 9;
    CHECK_EQ_INT(status(d), 137);   /* a record of ours we no longer know */
    d.root_signo = 0, d.root_exit_code = 0;
    CHECK_EQ_INT(status(d), 1);
    d.own = 1;
    CHECK_EQ_INT(status(d), 171);   /* a peer's failure */
    d.root_rank = -1;
    CHECK_EQ_INT(status(d), 170);   /* a peer node lost */
    d.own = 0, d.health_bad = true;
    CHECK_EQ_INT(status(d), 75);   /* this node's own health check */
    d.fatal = true;
    CHECK_EQ_INT(status(d), 76);
    CHECK_EQ_INT(status((struct agent_outcome){.decided_exit = true, .dn = 0}), 170);
    d.lost = true;   /* a decision held when the store went: the decision's code */
    CHECK_EQ_INT(status(d), 76);
    /* a lost job */
    CHECK_EQ_INT(status((struct agent_outcome){.lost = true, .lost_err = PODRUN_ESTORELOST}), 172);
    CHECK_EQ_INT(status((struct agent_outcome){.lost = true, .lost_err = PODRUN_ESTORESILENT}),
                 172);
    CHECK_EQ_INT(status((struct agent_outcome){.lost = true, .lost_err = PODRUN_EJOINTIMEOUT}),
                 173);
    CHECK_EQ_INT(status((struct agent_outcome){.lost = true, .lost_err = PODRUN_ERUNID}), 2);
    CHECK_EQ_INT(status((struct agent_outcome){.lost = true, .lost_err = PODRUN_EENDED}), 1);
    /* a job that could not start */
    CHECK_EQ_INT(status((struct agent_outcome){.start_err = -22, .start_usage = true}), 2);
    CHECK_EQ_INT(status((struct agent_outcome){.start_err = -110, .start_timeout = true}), 173);
    CHECK_EQ_INT(status((struct agent_outcome){.start_err = -98}), 1);
}

int main(void)
{
    RUN(test_every_state_every_event);
    RUN(test_transitions_carry_their_work);
    RUN(test_late_events_are_ignored);
    RUN(test_starting_runs_its_steps_in_order);
    RUN(test_settle);
    RUN(test_signals);
    RUN(test_verdict_first);
    RUN(test_health_check);
    RUN(test_jobset);
    RUN(test_names);
    RUN(test_story_failure_and_restart);
    RUN(test_story_restart_while_starting_rejoins);
    RUN(test_story_signal_during_reclaim);
    RUN(test_story_verdict_first);
    RUN(test_story_health_leave);
    RUN(test_story_jobset);
    RUN(test_exit_status);
    return check_result();
}
