"""Start N podrun or torchrun agents on this machine (one per loopback address) and measure them.
Shared by the rendezvous and failure benchmarks."""
import atexit
import os
import resource
import signal
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PODRUN = os.environ.get("PODRUN", os.path.join(ROOT, "build", "launcher", "podrun"))
TORCH_PY = "/usr/bin/python3"


def build_sigworker():
    out = os.path.join(tempfile.gettempdir(), "podrun-bench-sigworker")
    subprocess.run(["cc", "-O2", "-o", out, os.path.join(ROOT, "tests", "bench", "sigworker.c")],
                   check=True)
    return out


def addr(i):
    """127.0.0.2, 127.0.0.3, … then 127.0.1.2 …: one loopback address per agent."""
    return f"127.0.{i // 250}.{i % 250 + 2}"


def podrun_cmd(n, i, port, run_id, worker, nproc=1, extra=()):
    return [PODRUN, "--nnodes", str(n), "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{addr(0)}:{port}", "--rdzv-id", run_id, "--local-addr", addr(i),
            "--no-python", "--term-timeout", "5", *extra, worker]


def torchrun_cmd(n, i, port, run_id, worker, nproc=1, extra=()):
    # 1.13's torchrun needs -r/-t set to a single-bit value on Python 3.11 (see reference/torch.md)
    return [TORCH_PY, "-m", "torch.distributed.run", "--nnodes", str(n), "--nproc_per_node",
            str(nproc), "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{addr(0)}:{port}",
            "--rdzv_id", run_id, "--no_python", "-r", "1", "-t", "1", "--monitor_interval", "0.1",
            *extra, worker]


TIME = "/usr/bin/time"
_live = []   # every Job not yet waited for: killed if the driver ends early


def _kill_live(*_):
    for job in list(_live):
        job.kill()
    if _:
        raise SystemExit(1)


atexit.register(_kill_live)
signal.signal(signal.SIGTERM, _kill_live)


class Job:
    """N agents started together; wait() returns (wall seconds, [exit codes], [peak RSS KiB]).

    Peak RSS comes from GNU time wrapped around each agent (rss=True): a process forked from
    this Python driver inherits the driver's resident pages, and the kernel keeps that high-water
    mark across exec, so the driver's own wait4 would report ~11 MiB for /bin/true. Forked from
    the small `time` process instead, the figure is the agent's own (and its workers')."""

    def __init__(self, cmds, env=None, log_dir=None, rss=False):
        e = dict(os.environ)
        e.update(env or {})
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="podrun-bench-")
        self.rss_files = []
        if rss and os.access(TIME, os.X_OK):
            self.rss_files = [os.path.join(self.log_dir, f"rss{i}") for i in range(len(cmds))]
            cmds = [[TIME, "-f", "%M", "-o", f, *c] for f, c in zip(self.rss_files, cmds)]
        self.t0 = time.monotonic()
        self.procs = []
        _live.append(self)
        for i, c in enumerate(cmds):
            with open(os.path.join(self.log_dir, f"agent{i}.log"), "wb") as log:
                self.procs.append(subprocess.Popen(c, env=e, stdout=log, stderr=log,
                                                   start_new_session=True))

    def wait(self, timeout=600):
        codes, rss = {}, {}
        deadline = time.monotonic() + timeout
        pending = {p.pid: i for i, p in enumerate(self.procs)}
        while pending:
            if time.monotonic() > deadline:
                self.kill()
                deadline = float("inf")
            pid, status, ru = os.wait4(-1, 0)
            if pid in pending:
                i = pending.pop(pid)
                codes[i] = os.waitstatus_to_exitcode(status)
                rss[i] = ru.ru_maxrss
                self.procs[i].returncode = codes[i]
        wall = time.monotonic() - self.t0
        _live.remove(self)
        n = len(self.procs)
        for i, f in enumerate(self.rss_files):
            try:
                with open(f) as fh:
                    rss[i] = int(fh.read().split()[-1])
            except (OSError, ValueError, IndexError):
                pass
        return wall, [codes[i] for i in range(n)], [rss[i] for i in range(n)]

    def kill(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
