"""A real gloo job that reports its progress the way a trainer does (--progress-file), then fails.

Every rank all_reduces; then rank 0 writes $BASE + $ADVANCE x (restart + 1) to
$PODRUN_PROGRESS_FILE (ADVANCE 0: every attempt resumes from the same checkpoint and gets no
further), all ranks pass a barrier, and rank $FAIL_RANK exits 1 while the others wait to be
stopped; with $GATE, in restart 1 it first waits for that file to exist (the test looks at the
job meanwhile). Each rank prints "progress rank=R restart=C attempt=A records=N file=F": A and F are
PODRUN_ATTEMPT and PODRUN_PROGRESS_FILE ("-" when not given), N the lines of
PODRUN_RESTARTS_FILE when the worker started ("-" when not given)."""
import os
import time

import torch
import torch.distributed as dist

records = "-"
if os.environ.get("PODRUN_RESTARTS_FILE"):
    with open(os.environ["PODRUN_RESTARTS_FILE"]) as f:
        records = str(len(f.read().splitlines()))
rank = int(os.environ["RANK"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
dist.init_process_group("gloo")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
if rank == 0:
    value = int(os.environ["BASE"]) + int(os.environ["ADVANCE"]) * (restart + 1)
    with open(os.environ["PODRUN_PROGRESS_FILE"], "w") as f:
        f.write(f"{value}\n")
dist.barrier()
print(f"progress rank={rank} restart={restart} attempt={os.environ.get('PODRUN_ATTEMPT', '-')} "
      f"records={records} file={os.environ.get('PODRUN_PROGRESS_FILE', '-')}", flush=True)
if rank == int(os.environ["FAIL_RANK"]):
    while restart == 1 and os.environ.get("GATE") and not os.path.exists(os.environ["GATE"]):
        time.sleep(0.05)   # poll interval: the test creates the file once it has looked
    # exit 1 without the interpreter's teardown: torch 2.15's gloo process group, destroyed
    # there while its peers still hold their connections, can abort (SIGABRT) instead
    os._exit(1)
time.sleep(300)   # the hold under test: stopped by podrun when the failing rank's news arrives
