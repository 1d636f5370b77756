"""A worker that uses torch's own file-based timers (torch.distributed.elastic.timer) through the
FIFO its agent names in TORCHELASTIC_TIMER_FILE.

MODE (env), for this worker's RANK:
  overrun  ranks in OVERRUN hold a timer of AFTER seconds (scope SCOPE) and outlive it; the
           others hold one and release it in time
  release  every rank takes and releases a timer 50 times, then runs past when it would expire
  die      ranks in DIE take a timer and exit 3 at once, holding it (attempt 0 only); everyone
           else, and every rank of later attempts, runs past its expiration and exits 0
  garbage  write bad requests into the FIFO (not JSON, too long, a foreign pid), then run past
SIGNAL: the signal the timer asks for (default SIGKILL); SIGUSR2 is caught and said, and with any
signal but SIGKILL, SIGTERM is ignored."""
import json
import os
import signal
import sys
import time

import torch.distributed.elastic.timer as timer
from torch.distributed.elastic.timer import FileTimerClient

rank = int(os.environ["RANK"])
path = os.environ["TORCHELASTIC_TIMER_FILE"]
mode = os.environ["MODE"]
after = float(os.environ.get("AFTER", "1"))
scope = os.environ.get("SCOPE", "step")
sig = getattr(signal, os.environ.get("SIGNAL", "SIGKILL"))


def caught(signo, frame):
    print(f"caught {signal.Signals(signo).name} rank={rank}", flush=True)
    sys.exit(7)


signal.signal(signal.SIGUSR2, caught)
if sig != signal.SIGKILL:
    # podrun's SIGTERM to every worker follows the timer's signal at once; ignored here, so
    # what ends this worker is the signal its timer asked for
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
timer.configure(FileTimerClient(path, signal=sig))
print(f"ready rank={rank} file={path}", flush=True)


def ranks(name):
    return [int(r) for r in os.environ.get(name, "").split(",") if r]


def raw(line):
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, line.encode())
    os.close(fd)


if mode == "overrun":
    with timer.expires(after=after, scope=scope):
        if rank in ranks("OVERRUN"):
            print(f"deadline rank={rank} t={time.time() + after:.6f}", flush=True)
            time.sleep(after + 30)   # far past the timer: the agent must end this
            print(f"survived rank={rank}", flush=True)
    time.sleep(after + 30)   # the other ranks wait for the job's stop, which the agent sends
elif mode == "release":
    for _ in range(50):
        with timer.expires(after=after, scope=scope):
            pass
    time.sleep(after + 1)   # the behaviour under test: past every released timer's expiration
elif mode == "die":
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if attempt == 0 and rank in ranks("DIE"):
        timer.FileTimerClient(path, signal=sig).acquire(scope, time.time() + after)
        os._exit(3)   # at once: the interpreter's own shutdown could outlast the timer
    time.sleep(after + 1)   # the behaviour under test: past the dead worker's timer
elif mode == "garbage":
    raw("this is not json\n")
    raw("x" * 5000 + "\n")
    raw(json.dumps({"pid": "me", "scope_id": "s", "expiration_time": 1, "signal": 9}) + "\n")
    for pid in (1, os.getppid()):   # init, and podrun itself: never a worker's to kill
        raw(json.dumps({"version": 1, "pid": pid, "scope_id": "foreign",
                        "expiration_time": time.time(), "signal": 9}) + "\n")
    with timer.expires(after=after, scope=scope):
        pass
    time.sleep(after + 1)   # the behaviour under test: past the foreign timers' expiration
print(f"done rank={rank}", flush=True)
