#!/bin/sh
# A worker for the monitoring test: rank $FAIL_RANK fails on the first attempt once the file
# $FAIL_GATE exists; every worker of a later attempt finishes once $DONE_GATE exists. The test
# creates the files when it has seen (through Prometheus) what it wants to see before them.
r=$TORCHELASTIC_RESTART_COUNT
echo "start rank=$RANK restart=$r"
trap 'exit 143' TERM
if [ "$r" = 0 ]; then
  while [ ! -e "$FAIL_GATE" ]; do sleep 0.1; done
  [ "$RANK" = "$FAIL_RANK" ] && { echo "rank $RANK failing on purpose" >&2; exit 1; }
  while :; do sleep 0.1; done
fi
while [ ! -e "$DONE_GATE" ]; do sleep 0.1; done
echo "done rank=$RANK restart=$r"
