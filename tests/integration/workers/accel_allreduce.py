"""A gloo all_reduce under `podrun accelerate launch`, and the accelerate variables it was given."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
keys = ["ACCELERATE_MIXED_PRECISION", "ACCELERATE_DYNAMO_BACKEND", "OMP_NUM_THREADS",
        "LOCAL_RANK", "GROUP_RANK", "ACCELERATE_USE_CPU"]
env = " ".join(f"{k}={os.environ.get(k, '-')}" for k in keys)
print(f"accel rank={rank} world={world} sum={int(t.item())} {env}", flush=True)
dist.barrier()
dist.destroy_process_group()
