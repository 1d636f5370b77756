"""A worker that hangs on purpose, for the stacks podrun gathers before it kills a hang.

$HOW picks where it hangs: "sleep" (time.sleep in sleep_forever), "collective" (gloo: rank 0
all_reduces, rank 1 never joins and sleeps in never_join), "native" (libc pause() through ctypes
in native_pause), "deaf" (catches podrun's trigger signal, PODRUN_STACKS_SIGNAL, and does
nothing, then sleeps). With $IGNORE_TERM it ignores SIGTERM. Prints "starting RANK" until it is about to hang, then "stuck RANK"; a Python sitecustomize of the
user's own, when $USER_SITE names its marker, is seen to have run ("user-site ran")."""
import ctypes
import os
import signal
import sys
import threading
import time

rank = int(os.environ["RANK"])
started = threading.Event()


def keep_alive():
    """Output until the hang begins: a slow import of torch is not the hang."""
    while not started.wait(0.5):
        print(f"starting {rank}", flush=True)


alive = threading.Thread(target=keep_alive)
alive.start()


def stuck():
    started.set()
    alive.join()
    print(f"stuck {rank}", flush=True)

how = os.environ.get("HOW", "sleep")
if "usersite_marker" in sys.modules:
    print("user-site ran", flush=True)


def sleep_forever():
    time.sleep(100000)   # the behaviour under test: a worker hung here


def never_join():
    time.sleep(100000)   # the behaviour under test: a rank that never joins


def native_pause():
    libc = ctypes.CDLL(None)
    while True:   # a caught signal ends pause(); C code that waits retries, as gloo's does
        libc.pause()


def collective():
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    if rank == 0:
        t = torch.ones(1)
        stuck()
        dist.all_reduce(t)
    else:
        stuck()
        never_join()


if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if how == "collective":
    collective()
elif how == "native":
    stuck()
    native_pause()
else:
    if how == "deaf":
        signal.signal(int(os.environ["PODRUN_STACKS_SIGNAL"]), lambda *a: None)
    stuck()
    sleep_forever()
