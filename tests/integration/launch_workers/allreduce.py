"""A real gloo all_reduce across the workers podrun started: every rank adds rank+1."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"allreduce rank={rank} world={world} sum={int(t.item())}", flush=True)
dist.barrier()
dist.destroy_process_group()
