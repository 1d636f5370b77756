"""Helpers for the launcher tests: run podrun, start it, and wait — with a bound — for the
event a test needs (a line, a file, a process state) instead of sleeping for an assumed time.
Every test's waits go through wait_for here."""
import glob
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


def wait_for(pred, timeout=30, what="the condition", every=0.05):
    """Calls pred until it returns something true and returns that; fails the test after
    timeout seconds, naming `what` (a string, or a function giving one)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout}s for {what() if callable(what) else what}")
        time.sleep(every)   # the poll interval, not an assumed duration


def wait_file(path, text="", timeout=30):
    """Waits until the file at path exists and holds text; returns its content."""
    def content():
        try:
            with open(path, errors="replace") as f:
                s = f.read()
        except OSError:
            return None
        return s if text in s else None
    return wait_for(content, timeout, lambda: f"{text!r} in {path}")


def wait_files(d, n, timeout=60, pattern="*", alive=()):
    """Waits until directory d holds at least n entries matching pattern; returns their names.
    Fails at once when one of the processes in `alive` (Popen objects) has exited."""
    def files():
        for p in alive:
            assert p.poll() is None, f"process {p.args} exited early ({p.returncode})"
        names = sorted(os.path.basename(f) for f in glob.glob(os.path.join(str(d), pattern)))
        return names if len(names) >= n else None
    return wait_for(files, timeout, lambda: f"{n} files {pattern} in {d}: {os.listdir(d)}")


def wait_gone(pids, timeout=30):
    """Waits up to timeout s until none of pids is alive (gone, or a zombie); returns those
    still alive then (empty: all gone)."""
    try:
        wait_for(lambda: not any(pid_alive(p) for p in pids), timeout, "the processes to go")
    except AssertionError:
        pass
    return [p for p in pids if pid_alive(p)]


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
