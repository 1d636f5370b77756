"""A small real DDP training job on gloo: every worker fits the same tiny linear model on its own
shard of a synthetic regression problem; DistributedDataParallel averages the gradients, so all
ranks end with identical weights. Run it under podrun (or torchrun):

    podrun --nproc-per-node 2 --python /usr/bin/python3 scripts/demo_train.py

DEMO_STEPS sets the number of steps (20). DEMO_FAIL_RANK=R makes global rank R raise half-way
through the first attempt (TORCHELASTIC_RESTART_COUNT=0), to show a job-wide restart.
"""
import os
import sys
import traceback

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import get_error_handler, record
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = int(os.environ.get("DEMO_STEPS", "20"))
FAIL_RANK = int(os.environ.get("DEMO_FAIL_RANK", "-1"))


def fail(message):
    """Dies the way a crashing trainer does, but at once: error file, traceback, exit 1. The
    process ends before its peers notice the closed gloo connections, so the root cause that podrun
    reports is this rank, not a peer's 'Connection closed by peer'."""
    try:
        raise RuntimeError(message)
    except RuntimeError as e:
        get_error_handler().record_exception(e)
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


@record   # a failure's message and traceback go to TORCHELASTIC_ERROR_FILE for podrun's report
def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    env = os.environ
    attempt = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    print(f"rank {rank}/{world} on node {env.get('GROUP_RANK', '0')}/"
          f"{env.get('GROUP_WORLD_SIZE', '1')} ({os.uname().nodename}): "
          f"local_rank={env['LOCAL_RANK']} attempt={attempt} "
          f"master={env['MASTER_ADDR']}:{env['MASTER_PORT']}", flush=True)

    torch.manual_seed(0)                          # the same start on every rank
    true_w = torch.tensor([[2.0, -3.0, 0.5, 1.0]])
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    gen = torch.Generator().manual_seed(1000 + rank)   # each rank its own data shard
    for step in range(STEPS):
        if rank == FAIL_RANK and attempt == 0 and step == STEPS // 2:
            fail(f"rank {rank} gives up at step {step} (DEMO_FAIL_RANK)")
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
