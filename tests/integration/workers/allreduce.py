"""A real gloo job: every rank all_reduces its rank and prints what it saw.

Prints one line per rank: "allreduce rank=R local_rank=L world=W group_rank=G restart=C sum=S".
Exits with $FAIL_EXIT when this rank is $FAIL_RANK and the restart count is below $FAIL_UNTIL
(default: only on the first attempt), so tests can make one rank fail on purpose. Stays $HOLD
seconds before it ends, on attempts below $HOLD_UNTIL (default: every attempt)."""
import os
import sys
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
fail_rank = int(os.environ.get("FAIL_RANK", "-1"))
if rank == fail_rank and restart < int(os.environ.get("FAIL_UNTIL", "1")):
    time.sleep(float(os.environ.get("FAIL_AFTER", "0")))
    sys.exit(int(os.environ.get("FAIL_EXIT", "1")))

dist.init_process_group("gloo")
assert dist.get_rank() == rank and dist.get_world_size() == world, "gloo disagrees with the env"
t = torch.tensor([float(rank)])
dist.all_reduce(t)
dist.barrier()
print(f"allreduce rank={rank} local_rank={os.environ['LOCAL_RANK']} world={world} "
      f"group_rank={os.environ['GROUP_RANK']} restart={restart} sum={int(t.item())}", flush=True)
if restart < int(os.environ.get("HOLD_UNTIL", "1000000")):
    time.sleep(float(os.environ.get("HOLD", "0")))
dist.destroy_process_group()
