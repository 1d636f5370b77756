"""A DeepSpeed-style worker: records its pid and its agent's, prints what DeepSpeed's launcher
gave it, then all_reduces over gloo.

Prints "ds rank=R local_rank=L world=W local_size=S cross_rank=C cross_size=N cvd=D
arg_local_rank=A args=... extra=X sum=S", then "ds-cpus rank=R cpus=0,1 omp=N" (the CPUs it may
run on and OMP_NUM_THREADS). With $DS_PIDS it writes "<pid> <ppid>" to
$DS_PIDS/<rank>. $DS_FAIL_NODE: local rank 0 of that node exits $DS_FAIL_EXIT (default 3)
before joining the collective; $DS_HOLD: seconds to sleep before it (so tests can stop a
running job)."""
import os
import sys
import time

rank = int(os.environ["RANK"])
pids = os.environ.get("DS_PIDS")
if pids:
    with open(os.path.join(pids, str(rank)), "w") as f:
        f.write(f"{os.getpid()} {os.getppid()}\n")
args = sys.argv[1:]
lr_arg = [a.split("=", 1)[1] for a in args if a.startswith("--local_rank=")]
rest = [a for a in args if not a.startswith("--local_rank=")]
cross = int(os.environ["CROSS_RANK"])
if os.environ.get("DS_FAIL_NODE") == str(cross) and os.environ["LOCAL_RANK"] == "0":
    time.sleep(float(os.environ.get("DS_FAIL_AFTER", "0.5")))
    sys.exit(int(os.environ.get("DS_FAIL_EXIT", "3")))
time.sleep(float(os.environ.get("DS_HOLD", "0")))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"ds rank={rank} local_rank={os.environ['LOCAL_RANK']} world={os.environ['WORLD_SIZE']} "
      f"local_size={os.environ['LOCAL_SIZE']} cross_rank={cross} "
      f"cross_size={os.environ['CROSS_SIZE']} cvd={os.environ.get('CUDA_VISIBLE_DEVICES')} "
      f"arg_local_rank={lr_arg[0] if lr_arg else None} args={'|'.join(rest)} "
      f"extra={os.environ.get('DS_EXTRA')} sum={int(t.item())}", flush=True)
print(f"ds-cpus rank={rank} cpus={','.join(map(str, sorted(os.sched_getaffinity(0))))} "
      f"omp={os.environ.get('OMP_NUM_THREADS')}", flush=True)
dist.destroy_process_group()
