#!/bin/sh
# Prints the rendezvous result a worker sees, on one line, then exits with $EXIT (default 0).
# With $GATE_FILE, it first waits for that file (a test's observer has seen what it needs).
[ -z "$GATE_FILE" ] || while [ ! -e "$GATE_FILE" ]; do sleep 0.05; done
echo "env rank=$RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE group_rank=$GROUP_RANK group_world=$GROUP_WORLD_SIZE local_world=$LOCAL_WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT master=$MASTER_ADDR:$MASTER_PORT agent_store=$TORCHELASTIC_USE_AGENT_STORE"
exit "${EXIT:-0}"
