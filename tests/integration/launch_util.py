"""Helpers for the single-node launcher tests: run podrun, start it and wait for its workers."""
import os
import subprocess
import time

from conftest import TORCH_PY

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "launch_workers")


def worker(name):
    return os.path.join(WORKERS, name)


def run(podrun, *args, env=None, timeout=60, **kw):
    """podrun ARGS to the end; returns the CompletedProcess (text)."""
    e = dict(os.environ)
    e.pop("OMP_NUM_THREADS", None)
    e.update(env or {})
    return subprocess.run([podrun, *args], env=e, capture_output=True, text=True,
                          timeout=timeout, **kw)


def start(podrun, *args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen([podrun, *args], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def wait_lines(proc, marker, count, timeout=30):
    """Reads proc's stdout until `count` lines contain marker; returns the lines read."""
    lines = []
    deadline = time.monotonic() + timeout
    while sum(marker in line for line in lines) < count:
        assert time.monotonic() < deadline, f"waited for {count}x {marker!r}: {lines}"
        line = proc.stdout.readline()
        assert line, f"podrun's stdout closed early: {lines} {proc.stderr.read()}"
        lines.append(line)
    return lines


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


PY = ["--python", TORCH_PY]
