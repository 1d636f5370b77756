#!/bin/sh
# A worker for the network-fault matrix (faults.py). Its first argument is the test's marker, so
# that a worker left running is found by its command line. In $LEDGER it
#  - holds an exclusive lock on rank<RANK>.lock while it runs: a second worker of the same rank
#    anywhere in the job (two groups after a partition: split brain) finds the lock taken and
#    records twice.rank<RANK>.<pid>;
#  - creates up.w<world>.r<restart>.rank<rank> once it runs (its SIGTERM trap set);
#  - appends every line it prints, after printing it, to lines.<pid>: each of them must be in the
#    agents' output at the end (no log line lost);
#  - ticks every 0.1 s until the file done exists, then exits 0; fails with exit code 3 once
#    the file fail.rank<RANK>.r<restart> exists.
# The sleeps leave the lock to the worker alone: it is the worker's, not its children's.
r=$TORCHELASTIC_RESTART_COUNT
own="$LEDGER/lines.$$"
say() { echo "$1"; echo "$1" >>"$own"; }
exec 9>>"$LEDGER/rank$RANK.lock"
# a lock held elsewhere is the fault under test: say so, and run on without it
flock -n 9 || { : >"$LEDGER/twice.rank$RANK.$$"; exec 9>&-; }
# on SIGTERM rank $SAVE_RANK saves for $SAVE_S seconds (a checkpoint written in the grace),
# holding its rank
save=0; [ "$RANK" = "${SAVE_RANK:-}" ] && save=${SAVE_S:-0}
trap 'say "term rank=$RANK restart=$r pid=$$"; sleep "$save" 9>&-; say "saved rank=$RANK restart=$r pid=$$"; exit 143' TERM
say "start rank=$RANK restart=$r world=$WORLD_SIZE pid=$$"
: >"$LEDGER/up.w$WORLD_SIZE.r$r.rank$RANK"
n=0
while [ ! -e "$LEDGER/done" ]; do
  n=$((n + 1))
  say "tick rank=$RANK restart=$r n=$n pid=$$"
  if [ -e "$LEDGER/fail.rank$RANK.r$r" ]; then
    say "rank $RANK failing on purpose"
    exit 3
  fi
  # the poll interval
  sleep 0.1 9>&- & wait $!
done
say "done rank=$RANK restart=$r world=$WORLD_SIZE pid=$$"
