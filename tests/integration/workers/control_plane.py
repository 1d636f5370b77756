"""torch 2.x's worker control plane: the body runs under control_plane.worker_main(), which
serves torch's handlers (ping, dump_traceback, ...) over HTTP on the Unix socket
TORCH_WORKER_SERVER_SOCKET names, when it names one. Prints "serving rank=R socket=S" (S: the
variable's value, or None), then waits up to 120 s for the file $DONE_FILE."""
import os
import time

from torch.distributed.elastic.control_plane import worker_main

with worker_main():
    print(f"serving rank={os.environ['RANK']} "
          f"socket={os.environ.get('TORCH_WORKER_SERVER_SOCKET')}", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.environ["DONE_FILE"]) and time.monotonic() < deadline:
        time.sleep(0.05)   # the poll interval until the test writes DONE_FILE
