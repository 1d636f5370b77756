#!/bin/sh
# A worker for failure tests. Rank $FAIL_RANK fails as $FAIL_HOW says (exit, segv, kill, hang)
# after $FAIL_AFTER seconds, on attempts below $FAIL_UNTIL; the others wait and say when SIGTERM
# reaches them, or finish after $DONE_AFTER seconds.
r=$TORCHELASTIC_RESTART_COUNT
echo "start rank=$RANK restart=$r world=$WORLD_SIZE"
if [ "$RANK" = "${FAIL_RANK:--1}" ] && [ "$r" -lt "${FAIL_UNTIL:-1}" ]; then
  sleep "${FAIL_AFTER:-0.5}"
  case "${FAIL_HOW:-exit}" in
    segv) kill -SEGV $$ ;;
    kill) kill -KILL $$ ;;
    hang) exec sleep "${SLEEP:-300}" ;;
    *) echo "rank $RANK failing on purpose" >&2; exit "${FAIL_EXIT:-1}" ;;
  esac
fi
if [ -n "$IGNORE_TERM" ]; then trap '' TERM; else trap 'echo "term rank=$RANK"; exit 143' TERM; fi
if [ -n "$DONE_AFTER" ]; then
  sleep "$DONE_AFTER"; echo "done rank=$RANK restart=$r world=$WORLD_SIZE"; exit 0
fi
while :; do
  [ -n "$TICK" ] && echo "tick rank=$RANK"
  sleep "${TICK:-${SLEEP:-300}}" & wait $!
done
