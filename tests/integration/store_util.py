"""Helpers for the job-store integration tests: run `podrun store` or torch 1.13's own
TCPStore server, and run torch client code in /usr/bin/python3 subprocesses."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

from conftest import TORCH_PY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    """A store process listening on 127.0.0.1:port; stderr is kept for assertions."""

    def __init__(self, argv, port):
        self.port = port
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("store exited: " + self.proc.stderr.read())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("store did not start listening")

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


def run_torch(code, *args, timeout=60):
    """Runs client code under torch's python; returns its JSON output (last stdout line)."""
    p = subprocess.run([TORCH_PY, "-c", textwrap.dedent(code), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
