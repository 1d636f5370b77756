"""Helpers for the job-store integration tests: run `podrun store` or torch's own TCPStore
servers (Debian's 1.13, the project environment's 2.15), and run torch client code in a
subprocess of either."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap

from conftest import TORCH_PY, VENV_PY
from cluster import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    """A store process listening on 127.0.0.1:port (or on each of a list of ports, then port is
    the first); stderr is kept for assertions."""

    def __init__(self, argv, port):
        ports = port if isinstance(port, list) else [port]
        self.port = ports[0]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        def listening():
            if self.proc.poll() is not None:
                raise RuntimeError("store exited: " + self.proc.stderr.read())
            try:
                for p in ports:
                    socket.create_connection(("127.0.0.1", p), timeout=0.2).close()
                return True
            except OSError:
                return False
        # a bound, not an expected time: torch 2.15's import alone can take a minute on a loaded
        # 2-core machine
        wait_for(listening, 180, f"the store to listen on 127.0.0.1:{ports}", every=0.02)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.stderr = self.proc.stderr.read()
        return rc


def podrun_store(podrun, port, *extra):
    return Server([podrun, "store", "--host", "127.0.0.1", "--port", str(port), *extra], port)


TORCH_STORE = os.path.join(ROOT, "tests", "integration", "workers", "torch_store.py")


def torch_store(port):
    return Server([TORCH_PY, TORCH_STORE, str(port), "30"], port)


def torch2_stores(specs):
    """torch 2.15's own servers in one process: specs is a list of (port, "libuv"|"classic")."""
    args = [f"{p}:{kind}" for p, kind in specs]
    return Server([VENV_PY, TORCH_STORE, args[0], "30", *args[1:]], [p for p, _ in specs])


# For client code: wait_blocked(tid) waits, bounded, until thread tid of this process is blocked
# in the kernel on a socket (it sent its request and waits for the answer), so that another
# client releases a WAIT only once it is in the store; it returns False instead when the event
# `done` is set first (the call ended without waiting). Prepend it to the code.
WAIT_BLOCKED = r"""
def wait_blocked(tid, timeout=20, done=None):
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if done is not None and done.is_set():
            return False
        with open(f"/proc/self/task/{tid}/wchan") as f:
            w = f.read()
        if "wait_woken" in w or "sk_wait" in w or "poll" in w or "select" in w:
            return True
        time.sleep(0.01)   # the poll interval
    raise RuntimeError(f"thread {tid} never blocked on its socket ({w})")
"""


def wait_read_by_peer(sock, timeout=10):
    """Waits until the process at the other end of the loopback TCP socket sock has read
    everything sent to it (its side's receive queue is empty, as ss shows it)."""
    here, there = sock.getsockname()[1], sock.getpeername()[1]

    def read():
        out = subprocess.run(["ss", "-Htn", "state", "established",
                              f"( sport = :{there} and dport = :{here} )"],
                             capture_output=True, text=True).stdout.split()
        return bool(out) and out[0] == "0"
    wait_for(read, timeout, f"the peer of port {here} to read what it was sent", every=0.01)


def run_torch(code, *args, timeout=300, python=TORCH_PY):
    """Runs client code under torch's python (Debian's 1.13 unless python says another);
    returns its JSON output (last stdout line). The timeout is a bound, not an expected time:
    torch's import and the interpreter's exit take tens of seconds on a loaded machine."""
    p = subprocess.run([python, "-c", textwrap.dedent(code), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
