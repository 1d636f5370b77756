#!/bin/sh
# A worker for failure tests. Rank $FAIL_RANK fails as $FAIL_HOW says (exit, segv, kill, hang)
# after $FAIL_AFTER seconds (or once the file $FAIL_FILE exists), on attempts below $FAIL_UNTIL; the others wait and say when SIGTERM
# reaches them, or finish after $DONE_AFTER seconds (or once the file $DONE_FILE exists).
# With $GATE_DIR, attempt r starts only once the file $GATE_DIR/r exists (a test's observer has
# seen that far); with $STARTED_DIR, each worker says it runs (its SIGTERM trap set) by creating
# w<world>.r<restart>.rank<rank> there; with $STARTED_DIR and $FAIL_AFTER_ALL, rank $FAIL_RANK
# counts $FAIL_AFTER from the moment every worker of its attempt says so.
r=$TORCHELASTIC_RESTART_COUNT
started() { [ -z "$STARTED_DIR" ] || : >"$STARTED_DIR/w$WORLD_SIZE.r$r.rank$RANK"; }
if [ -n "$GATE_DIR" ]; then
  while [ ! -e "$GATE_DIR/$r" ]; do sleep 0.05; done
fi
echo "start rank=$RANK restart=$r world=$WORLD_SIZE"
if [ "$RANK" = "${FAIL_RANK:--1}" ] && [ "$r" -lt "${FAIL_UNTIL:-1}" ]; then
  started
  if [ -n "$FAIL_AFTER_ALL" ]; then
    until [ "$(ls "$STARTED_DIR" | grep -c "^w$WORLD_SIZE\.r$r\.")" -ge "$WORLD_SIZE" ]; do
      sleep 0.05
    done
  fi
  if [ -n "$FAIL_FILE" ]; then
    while [ ! -e "$FAIL_FILE" ]; do sleep 0.05; done
  else
    sleep "${FAIL_AFTER:-0.5}"
  fi
  case "${FAIL_HOW:-exit}" in
    segv) kill -SEGV $$ ;;
    kill) kill -KILL $$ ;;
    hang) exec sleep "${SLEEP:-300}" ;;
    *) echo "rank $RANK failing on purpose" >&2; exit "${FAIL_EXIT:-1}" ;;
  esac
fi
if [ -n "$IGNORE_TERM" ]; then trap '' TERM; else trap 'echo "term rank=$RANK"; exit 143' TERM; fi
started
if [ -n "$DONE_FILE" ]; then
  while [ ! -e "$DONE_FILE" ]; do sleep 0.05 & wait $!; done
  echo "done rank=$RANK restart=$r world=$WORLD_SIZE"; exit 0
fi
if [ -n "$DONE_AFTER" ]; then
  sleep "$DONE_AFTER"; echo "done rank=$RANK restart=$r world=$WORLD_SIZE"; exit 0
fi
while :; do
  [ -n "$TICK" ] && echo "tick rank=$RANK"
  sleep "${TICK:-${SLEEP:-300}}" & wait $!
done
