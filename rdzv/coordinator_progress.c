/* rdzv/coordinator_progress.c — restarts that make no progress (rendezvous.h: max_no_progress).
 *
 * Each agent joins with the trainer's progress as it read it once its workers were gone (a step
 * or checkpoint iteration from --progress-file). The coordinator judges an attempt when the round
 * after it closes, which is when every survivor has said what it saw, after the last write of
 * the ended attempt. The job's progress is the largest value a joined node gave, so it does not
 * matter which node's rank writes the file, or whether the nodes share it. As NVIDIA's
 * ft_launcher counts (progress_tracker.py): an attempt that ended in a counted restart without
 * the value rising is one more in a row, one that raised it starts the count again, and a round
 * where no node knows a value leaves everything as it was (before the first checkpoint). A
 * restart that used none (a membership change) is not judged; it only moves the base. */
#include "rdzv/coordinator_int.h"

#include <stdio.h>

/* The open round is about to close: 1 when it must not start because max_no_progress attempts
 * in a row ended without progress (text: why, for every node), else 0. */
int coord_progress_judge(coord_t *c, char *text, size_t cap)
{
    if (c->p.max_no_progress <= 0)
        return 0;
    long long best = -1;
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i]->state == NS_JOINED && c->nodes[i]->d.progress > best)
            best = c->nodes[i]->d.progress;
    int judge = c->prog_judge;
    c->prog_judge = 0;
    if (best < 0)
        return 0;   /* nobody knows (yet): not counted either way */
    long long base = c->prog_base;
    c->prog_base = best;
    if (!judge)
        return 0;
    if (base < 0 || best > base) {
        c->prog_stalled = 0;
        return 0;
    }
    c->prog_stalled++;
    coord_act_log(c, "rendezvous '%s': round %d ended without progress (still %lld); %d in a row "
                  "of --max-no-progress-restarts %d", c->run_id, c->round - 1, best,
                  c->prog_stalled, c->p.max_no_progress);
    if (c->prog_stalled < c->p.max_no_progress)
        return 0;
    snprintf(text, cap, "%d attempt%s in a row ended without progress (the progress stayed at "
             "%lld; --max-no-progress-restarts %d)", c->prog_stalled,
             c->prog_stalled == 1 ? "" : "s", best, c->p.max_no_progress);
    return 1;
}

/* The running round's decision is set: a counted restart is judged at the next close. */
void coord_progress_decided(coord_t *c, int counted_restart)
{
    c->prog_judge = counted_restart;
}
