"""A gloo job that checks, from inside a worker, what torch 2.x expects of its launcher: its
ranks (printed for the test to compare with TORCH_ELASTIC_WORKER_IDENTICAL's rule), and the
agent's store under TORCHELASTIC_USE_AGENT_STORE=True: init_process_group("gloo") makes every
rank a client of MASTER_ADDR:MASTER_PORT, without a prefix per attempt, so keys an earlier
attempt set there are still seen unless the launcher's store drops them.

Prints "contract rank=R local_rank=L group_rank=G role_rank=RR world=W role_world=RW restart=C
stale=K sum=S"; K counts this rank's keys of earlier attempts still in the store. On the first
attempt, once every rank has printed, rank $FAIL_RANK exits 1 and the others wait in a barrier
it never reaches, so the job restarts."""
import os
import sys

import torch
import torch.distributed as dist

env = os.environ
rank, restart = int(env["RANK"]), int(env["TORCHELASTIC_RESTART_COUNT"])
assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True", env["TORCHELASTIC_USE_AGENT_STORE"]
dist.init_process_group("gloo")
store = dist.distributed_c10d._get_default_store()
while isinstance(store, dist.PrefixStore):
    store = store.underlying_store
assert isinstance(store, dist.TCPStore), type(store)
assert (store.host, store.port) == (env["MASTER_ADDR"], int(env["MASTER_PORT"])), \
    (store.host, store.port)
stale = sum(store.check([f"contract/{rank}/{a}"]) for a in range(restart))
store.set(f"contract/{rank}/{restart}", "set")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
dist.barrier()
print(f"contract rank={rank} local_rank={env['LOCAL_RANK']} group_rank={env['GROUP_RANK']} "
      f"role_rank={env['ROLE_RANK']} world={env['WORLD_SIZE']} "
      f"role_world={env['ROLE_WORLD_SIZE']} restart={restart} stale={stale} "
      f"sum={int(t.item())}", flush=True)
dist.barrier()   # every rank has said its line: a failure from here on cannot lose one
if rank == int(env.get("FAIL_RANK", "-1")) and restart == 0:
    sys.exit(1)
if restart == 0 and "FAIL_RANK" in env:
    dist.barrier()   # never complete: the failed rank is not there; the agent stops this one
dist.destroy_process_group()
