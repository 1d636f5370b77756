"""A gloo job that holds: every rank all_reduces its rank, writes $MARK_DIR/up.<rank>, waits for
$MARK_DIR/release (at most 60 s), meets the others at a barrier and prints
"allreduce rank=R world=W sum=S". Lets a test act on the job store while the round runs."""
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
marks = os.environ["MARK_DIR"]

dist.init_process_group("gloo")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
with open(os.path.join(marks, f"up.{rank}"), "w") as f:
    f.write(os.environ.get("PODRUN_RDZV_TOKEN", "") + "\n")
deadline = time.time() + 60
while not os.path.exists(os.path.join(marks, "release")) and time.time() < deadline:
    time.sleep(0.05)
dist.barrier()
print(f"allreduce rank={rank} world={world} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
