"""A trainer that checkpoints on SIGTERM, as preemption-aware trainers do: the handler only sets a
flag, the step in progress finishes (it needs the DataLoader's processes), then the checkpoint is
written to $OUT/ckpt.<RANK> and the trainer exits 0."""
import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Steps(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        time.sleep(0.01)   # a batch takes a while to load, as real ones do
        return torch.tensor([i])


stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
rank = os.environ["RANK"]
for step, batch in enumerate(DataLoader(Steps(), batch_size=1, num_workers=2)):
    if step == 3:
        print(f"ready {rank}", flush=True)
    if stop and step > 3:
        torch.save({"step": step}, os.path.join(os.environ["OUT"], f"ckpt.{rank}"))
        print(f"saved {rank}", flush=True)
        sys.exit(0)
