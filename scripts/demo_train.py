"""A small real DDP training job on gloo: every worker fits the same tiny linear model on its own
shard of a synthetic regression problem; DistributedDataParallel averages the gradients, so all
ranks end with identical weights. Run it under podrun (or torchrun):

    podrun --nproc-per-node 2 --python /usr/bin/python3 scripts/demo_train.py
"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = int(os.environ.get("DEMO_STEPS", "20"))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    host = os.uname().nodename
    print(f"rank {rank}/{world} on {host}: local_rank={os.environ['LOCAL_RANK']} "
          f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)

    torch.manual_seed(0)                          # the same start on every rank
    true_w = torch.tensor([[2.0, -3.0, 0.5, 1.0]])
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    gen = torch.Generator().manual_seed(1000 + rank)   # each rank its own data shard
    for step in range(STEPS):
        x = torch.randn(64, 4, generator=gen)
        y = x @ true_w.T + 0.7 + 0.01 * torch.randn(64, 1, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()                           # gradients all-reduced across ranks here
        opt.step()
        if step % 5 == 0 or step == STEPS - 1:
            print(f"step {step:3d} loss {loss.item():.4f}", flush=True)

    # every rank must hold the same weights: check with one more all_reduce
    w = model.module.weight.detach().clone()
    total = w.clone()
    dist.all_reduce(total)
    same = torch.allclose(total / world, w)
    print(f"weights {[round(v, 3) for v in w.flatten().tolist()]} "
          f"identical on all {world} ranks: {same}", flush=True)
    dist.destroy_process_group()
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
