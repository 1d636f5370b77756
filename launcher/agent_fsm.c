/* launcher/agent_fsm.c — the agent's table (agent_fsm.h): for each event, the states that take
 * it, under which facts, the next state and the actions. An event a state does not take is late
 * (a timer or a callback that fired after the state moved on) and changes nothing. */
#include "launcher/agent_fsm.h"

#include <stddef.h>

#include "rdzv/base/common.h"

/* ---------- the facts a row asks for ---------- */

/* The node is not leaving: no stopping signal, no leave on a check's verdict. */
static bool staying(const struct agent_facts *f)
{
    return !f->signal && !f->quit;
}

/* STARTING goes on: nothing the job or this node decided meanwhile stops the attempt. */
static bool on_track(const struct agent_facts *f)
{
    return staying(f) && !f->decided && !f->lost && !f->finished;
}

static bool step_next(const struct agent_facts *f)
{
    return on_track(f) && f->step + 1 < AGENT_NSTEPS;
}

static bool step_last(const struct agent_facts *f)
{
    return on_track(f) && f->step + 1 >= AGENT_NSTEPS;
}

static bool first_failure(const struct agent_facts *f)
{
    return !f->failed;
}

static bool bad_fails(const struct agent_facts *f)
{
    return !f->failed && !f->health_bad && !f->out;
}

static bool bad_leaves(const struct agent_facts *f)
{
    return !f->failed && !f->health_bad && f->out;
}

static bool no_signal(const struct agent_facts *f)
{
    return !f->signal;
}

/* A stop or a lost store while the check holds a verdict that the others still read: a peer may
 * have acted on it first, so this node acts on it now, then takes the news again. */
static bool verdict_first(const struct agent_facts *f)
{
    return staying(f) && f->check_running && f->verdict_first && !f->again;
}

static bool alive(const struct agent_facts *f)
{
    return !f->workers_down;
}

static bool forwards(const struct agent_facts *f)
{
    return !f->stops;
}

static bool stops_again(const struct agent_facts *f)
{
    return f->stops && f->signal;
}

static bool stops_first(const struct agent_facts *f)
{
    return f->stops && !f->signal;
}

static bool stops_first_alive(const struct agent_facts *f)
{
    return stops_first(f) && alive(f);
}

static bool stops_first_down(const struct agent_facts *f)
{
    return stops_first(f) && !alive(f);
}

static bool leaving(const struct agent_facts *f)
{
    return f->leaving;
}

/* The restart's wait is for a restart only: not once the node stops or lost the job. */
static bool restart_goes_on(const struct agent_facts *f)
{
    return !f->signal && !f->lost && !f->quit;
}

/* JobSet's barrier holds a join: the first one (INIT) or a restart's (STOPPING). */
static bool barrier_waits(const struct agent_facts *f)
{
    return !f->signal && f->barrier;
}

static bool decision_held(const struct agent_facts *f)
{
    return !f->signal && f->decided;
}

/* A pod behind the JobSet is told to the job once, and not once the job decided. */
static bool behind_first(const struct agent_facts *f)
{
    return !f->behind_told && !f->decided;
}

static bool output_done(const struct agent_facts *f)
{
    return f->drained && f->closed;
}

/* ---------- the table ---------- */

#define S(x) (1u << AGENT_##x)
#define BEFORE_EXIT (S(INIT) | S(RENDEZVOUS) | S(STARTING) | S(RUNNING) | S(STOPPING))
#define ANY (BEFORE_EXIT | S(EXITING) | S(DONE))
#define SAME (-1)
#define A(x) AGENT_ACT_##x
#define STEP_FIRST 0   /* the row's STEP runs the first step */
#define STEP_NEXT 1    /* the row's STEP runs the step after the one that reported */

struct agent_row {
    enum agent_ev ev;
    unsigned states;                               /* the states that take it */
    bool (*when)(const struct agent_facts *f);     /* NULL: always */
    int next;                                      /* enum agent_state, or SAME */
    unsigned actions;
    int step;                                      /* with A(STEP): STEP_FIRST, STEP_NEXT */
};

/* The first row that matches the state, the event and the facts decides. A new event is a row
 * here (and its X line in agent_fsm.h). */
static const struct agent_row rows[] = {
    {AGENT_EV_DISCOVERED, S(INIT), no_signal, AGENT_RENDEZVOUS, A(TAKE) | A(RDZV_START), 0},
    {AGENT_EV_CANNOT_START, S(INIT) | S(RENDEZVOUS), NULL, AGENT_EXITING, A(TAKE) | A(EXIT), 0},

    /* STARTING's order: ENV -> PREFLIGHT -> FRONTEND -> SPAWN, then RUNNING and the checks */
    {AGENT_EV_ASSIGNED, S(RENDEZVOUS), staying, AGENT_STARTING, A(TAKE) | A(STEP), STEP_FIRST},
    {AGENT_EV_STEP_DONE, S(STARTING), step_next, SAME, A(STEP), STEP_NEXT},
    {AGENT_EV_STEP_DONE, S(STARTING), step_last, AGENT_RUNNING, A(WATCH), 0},
    {AGENT_EV_STEP_FAILED, S(STARTING), on_track, AGENT_STOPPING, A(TAKE) | A(FAIL) | A(STOP), 0},
    {AGENT_EV_LEAVE, BEFORE_EXIT, staying, SAME, A(LEAVE) | A(SETTLE), 0},

    /* while the workers run */
    {AGENT_EV_HANG, S(RUNNING), first_failure, SAME, A(GATHER), 0},
    {AGENT_EV_LOCAL_FAILURE, S(RUNNING), first_failure, AGENT_STOPPING,
     A(TAKE) | A(FAIL) | A(STOP), 0},
    {AGENT_EV_HEALTH_FAILED, S(RUNNING), bad_fails, AGENT_STOPPING,
     A(TAKE) | A(TELL_FAILURE) | A(STOP), 0},
    {AGENT_EV_HEALTH_FAILED, S(RUNNING), bad_leaves, AGENT_STOPPING,
     A(TAKE) | A(STOP) | A(LEAVE) | A(SETTLE), 0},
    {AGENT_EV_LEFTOVERS, S(RUNNING), NULL, AGENT_STOPPING, A(TAKE) | A(STOP), 0},
    {AGENT_EV_WORKERS_GONE, S(RUNNING), alive, AGENT_STOPPING, A(GONE) | A(SETTLE), 0},
    {AGENT_EV_WORKERS_GONE, BEFORE_EXIT & ~S(RUNNING), alive, SAME, A(GONE) | A(SETTLE), 0},

    /* the job's news */
    {AGENT_EV_ENDING, S(RUNNING), no_signal, AGENT_STOPPING, A(TAKE) | A(STOP), 0},
    {AGENT_EV_STOPPED, S(STARTING), verdict_first, SAME, A(VERDICT_NOW) | A(AGAIN), 0},
    {AGENT_EV_STOPPED, S(RUNNING), staying, AGENT_STOPPING, A(TAKE) | A(STOP) | A(SETTLE), 0},
    {AGENT_EV_STOPPED, BEFORE_EXIT & ~S(RUNNING), staying, SAME, A(TAKE) | A(SAY) | A(SETTLE), 0},
    {AGENT_EV_FINISHED, BEFORE_EXIT, NULL, SAME, A(TAKE) | A(SETTLE), 0},
    {AGENT_EV_LOST, S(STARTING), verdict_first, SAME, A(VERDICT_NOW) | A(AGAIN), 0},
    {AGENT_EV_LOST, S(RUNNING), staying, AGENT_STOPPING, A(TAKE) | A(STOP) | A(SETTLE), 0},
    {AGENT_EV_LOST, BEFORE_EXIT & ~S(RUNNING), staying, SAME, A(TAKE) | A(SAY) | A(SETTLE), 0},
    {AGENT_EV_POD_LOST, S(RUNNING), NULL, SAME, A(TAKE) | A(TELL_PEER_LOST), 0},
    {AGENT_EV_POD_LOST, BEFORE_EXIT & ~S(RUNNING), NULL, SAME, A(TAKE), 0},

    /* signals: a stopping one tells the job this node leaves and stops the workers; a second
     * one kills them now; any other goes to the workers */
    {AGENT_EV_SIGNAL, S(RUNNING) | S(STOPPING), forwards, SAME, A(FORWARD), 0},
    {AGENT_EV_SIGNAL, BEFORE_EXIT, stops_again, SAME, A(KILL), 0},
    {AGENT_EV_SIGNAL, S(RUNNING), stops_first, AGENT_STOPPING,
     A(TAKE) | A(TELL_LEAVE) | A(STOP) | A(SETTLE), 0},
    {AGENT_EV_SIGNAL, S(STOPPING), stops_first_alive, SAME,
     A(TAKE) | A(TELL_LEAVE) | A(RESTOP) | A(SETTLE), 0},
    {AGENT_EV_SIGNAL, S(STOPPING), stops_first_down, SAME,
     A(TAKE) | A(TELL_LEAVE) | A(SETTLE), 0},
    {AGENT_EV_SIGNAL, S(INIT) | S(RENDEZVOUS) | S(STARTING), stops_first, SAME,
     A(TAKE) | A(TELL_LEAVE) | A(SETTLE), 0},
    {AGENT_EV_LEFT, ANY, leaving, SAME, A(TAKE) | A(SETTLE), 0},

    /* a restart: the GPUs' memory, then the next join; the end */
    {AGENT_EV_RECLAIMED, S(STOPPING), restart_goes_on, AGENT_RENDEZVOUS, A(REJOIN), 0},
    {AGENT_EV_OUTPUT_DONE, S(EXITING), output_done, AGENT_DONE, A(CLOSE), 0},

    /* JobSet's in-place restart: its barrier holds the first join and each restart's next one;
     * a pod behind while its workers run is this node's failure, one behind before that follows
     * to the next attempt; a JobSet that ended makes a restart held an exit, else the node is
     * out of the job */
    {AGENT_EV_JOBSET_GO, S(INIT), barrier_waits, SAME, A(TAKE) | A(JOIN), 0},
    {AGENT_EV_JOBSET_GO, S(STOPPING), barrier_waits, SAME, A(TAKE) | A(RECLAIM), 0},
    {AGENT_EV_JOBSET_GO, BEFORE_EXIT, no_signal, SAME, A(TAKE), 0},
    {AGENT_EV_JOBSET_BEHIND, S(RUNNING), behind_first, SAME, A(TAKE) | A(TELL_FAILURE), 0},
    {AGENT_EV_JOBSET_BEHIND, BEFORE_EXIT & ~S(RUNNING), behind_first, SAME, A(CATCH_UP), 0},
    {AGENT_EV_JOBSET_ENDED, BEFORE_EXIT, decision_held, SAME, A(TAKE) | A(EXIT_INSTEAD), 0},
    {AGENT_EV_JOBSET_ENDED, S(STOPPING), barrier_waits, SAME, A(TAKE) | A(EXIT_INSTEAD), 0},
    {AGENT_EV_JOBSET_ENDED, BEFORE_EXIT, no_signal, SAME, A(TAKE) | A(LOSE), 0},
};

struct agent_next agent_fsm_step(enum agent_state s, enum agent_ev ev,
                                 const struct agent_facts *f)
{
    struct agent_next n = {false, s, 0, 0};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct agent_row *r = &rows[i];
        if (r->ev != ev || !(r->states >> s & 1) || (r->when && !r->when(f)))
            continue;
        n.accepted = true;
        n.next = r->next == SAME ? s : (enum agent_state)r->next;
        n.actions = r->actions;
        n.step = r->step == STEP_NEXT ? f->step + 1 : 0;
        break;
    }
    return n;
}

/* Once something happened: what the job no longer wants is cancelled, and once this attempt's
 * workers are gone the node exits (a signal or a leave once the job was told, a lost or finished
 * job, a decision to exit) or restarts (a decision to restart), else it waits. */
struct agent_next agent_fsm_settle(enum agent_state s, const struct agent_facts *f)
{
    struct agent_next n = {true, s, 0, 0};
    if (s >= AGENT_EXITING || !f->workers_down)
        return n;
    bool moved_on = f->signal || f->quit || f->lost || f->finished || f->decided;
    if (f->check_running && moved_on)
        n.actions |= A(CANCEL_CHECK);
    if (s == AGENT_STARTING && moved_on)
        n.actions |= A(CANCEL_FRONTEND);
    if (f->reclaiming && (f->signal || f->quit || f->lost))
        n.actions |= A(CANCEL_RECLAIM);
    bool exit = false;
    if (f->signal || f->quit)
        exit = !f->leaving;
    else if (f->lost || f->finished)
        exit = true;
    else if (f->decided && f->restart) {
        n.next = AGENT_STOPPING;   /* STARTING too: the attempt is over */
        n.actions |= A(RESTART);
    } else if (f->decided)
        exit = true;
    if (exit) {
        n.next = AGENT_EXITING;
        n.actions |= A(EXIT);
    }
    return n;
}

/* ---------- names ---------- */

#define STATE_NAME(n, w) #n,
#define STATE_WORD(n, w) w,
#define EVENT_NAME(n) #n,

const char *agent_fsm_state_name(enum agent_state s)
{
    static const char *const names[] = {AGENT_STATES(STATE_NAME)};
    return s < AGENT_NSTATES ? names[s] : "?";
}

const char *agent_fsm_state_word(enum agent_state s)
{
    static const char *const words[] = {AGENT_STATES(STATE_WORD)};
    return s < AGENT_NSTATES ? words[s] : "?";
}

const char *agent_fsm_event_name(enum agent_ev ev)
{
    static const char *const names[] = {AGENT_EVENTS(EVENT_NAME)};
    return ev < AGENT_NEVENTS ? names[ev] : "?";
}

/* ---------- the exit status ---------- */

/* The code for a decision to exit (doc/failures.md#exit-status): every node the same for a
 * failure not to retry; the root cause's own code on its node; the peer codes elsewhere. */
static int decision_status(const struct agent_outcome *o, const struct agent_codes *c)
{
    if (o->fatal)
        return c->fatal;
    if (o->dn == 0)
        return c->peer_lost;
    if (o->own == 0 && o->root_rank < 0 && o->health_bad)
        return c->preflight;   /* this node's own health check: the node is bad */
    if (o->own == 0 && o->root_rank >= 0) {
        if (o->failed_lr < 0)   /* a record of ours we no longer know: trust it */
            return o->root_signo > 0       ? 128 + o->root_signo
                   : o->root_exit_code > 0 ? o->root_exit_code
                                           : 1;
        return o->failed_hang ? c->hang : o->failed_code;
    }
    return o->root_rank < 0 ? c->peer_lost : c->peer_failure;
}

/* The code for losing the job this way. */
static int lost_status(int err, const struct agent_codes *c)
{
    switch (err) {
    case PODRUN_ESTORELOST:
    case PODRUN_ESTORESILENT: return c->store_lost;
    case PODRUN_EJOINTIMEOUT: return c->rdzv_timeout;
    case PODRUN_EEXCLUDED: return c->preflight;   /* a bad node, left out */
    case PODRUN_ENOPROGRESS: return c->fatal;      /* restarts made no progress: do not retry */
    case PODRUN_ERUNID: return 2;   /* the flags disagree: a usage error, no retry mends it */
    default: return 1;
    }
}

int agent_fsm_exit_status(const struct agent_outcome *o, const struct agent_codes *c)
{
    if (o->signal)
        return 128 + o->signal;
    if (o->quit)
        return c->preflight;
    if (o->decided_exit)
        return decision_status(o, c);
    if (o->lost)
        return lost_status(o->lost_err, c);
    if (o->finished)
        return 0;
    if (o->start_usage)
        return 2;
    if (o->start_timeout)
        return c->rdzv_timeout;
    return 1;
}
