#!/usr/bin/python3
"""podrun against the launchers a user would pick instead, every one in the same run, alternating.

    scripts/deps --bench-peers        # once: ft_launcher and dlrover-run in their own environment
    /usr/bin/python3 tests/bench/peers_bench.py [--n 4,8,32] [--repeat 5] [--peers ...] [--cases ...]

The peers: torchrun 2.15, accelerate and deepspeed from the project's .venv (scripts/peers.txt);
NVIDIA's ft_launcher (nvidia-resiliency-ext) and DLRover's dlrover-run from the bench-only
environment .venv-bench (tests/bench/bench-peers.txt, over .venv's torch); tini for start-up.
Every agent runs on this machine on its own loopback address (127.0.0.2, .3, ...), one worker each,
the C worker of tests/bench/sigworker.c (so no Python start-up in the workers is timed).

Cases, each as median and p90 over --repeat runs:
  startup   one node, 8 workers running `true`: wall time to the launcher's exit, peak RSS
  rdzv      N agents to rendezvous, run a worker that exits at once, and exit: wall time
  fail      one worker of one node (not the store's) exits 1, one restart allowed; two figures:
            push: time until the last worker of every other node has its SIGTERM
            restart: time until every worker of the next attempt runs
  loss      one agent (not the store's) SIGKILLed: time until the survivors act on it (their
            workers stopped or restarted); none within --loss-bound seconds is said so
A peer that cannot do a case (deepspeed restarts nothing) is given as such in the table, and one
that does nothing within the bound says so, once (its other runs are skipped). The driver prints the table and the ratios to podrun."""
import argparse
import glob
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from jobs import ROOT, PODRUN, Job, addr, build_sigworker, raise_nofile

VENV = os.path.join(ROOT, ".venv", "bin")
BENCH = os.path.join(ROOT, ".venv-bench", "bin")
TIME = "/usr/bin/time"


def read_ns(path):
    """The stamp in path; 0 while its writer has not finished writing it."""
    try:
        with open(path) as f:
            return int(f.read())
    except ValueError:
        return 0


def free_port(host):
    """A port nobody listens on now at host (the kernel's pick, released at once)."""
    with socket.socket() as so:
        so.bind((host, 0))
        return so.getsockname()[1]


def wait_files(pattern, n, timeout):
    deadline = time.monotonic() + timeout
    while len(glob.glob(pattern)) < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)   # poll interval
    return True


# ---- the launchers: each says how it starts one node of N, and what it cannot do


class Peer:
    name = ""
    cannot = {}          # case -> why this launcher cannot do it

    def version(self):
        return ""

    def available(self):
        return True

    def startup(self, nproc):
        raise NotImplementedError

    def node(self, n, i, port, rid, worker, restarts):
        raise NotImplementedError

    def side(self, n, port, d):
        """A process the job needs besides its agents (DLRover's master), or None."""
        return None


def pip_version(py, pkg):
    r = subprocess.run([py, "-c", f"import importlib.metadata as m; print(m.version('{pkg}'))"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "?"


class Podrun(Peer):
    name = "podrun"

    def version(self):
        r = subprocess.run([PODRUN, "--version"], capture_output=True, text=True)
        return (r.stdout or r.stderr).strip().splitlines()[0] if r.returncode == 0 else "?"

    def startup(self, nproc):
        return [PODRUN, "--nproc-per-node", str(nproc), "--no-python", "true"]

    def node(self, n, i, port, rid, worker, restarts):
        return [PODRUN, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"{addr(0)}:{port}", "--rdzv-id", rid, "--local-addr", addr(i),
                "--max-restarts", str(restarts), "--no-python", "--term-timeout", "5", worker]


class Tini(Peer):
    name = "tini"
    cannot = {c: "a single-node init" for c in ("rdzv", "fail", "loss")}

    def version(self):
        r = subprocess.run(["tini", "--version"], capture_output=True, text=True)
        return r.stdout.strip()

    def available(self):
        return shutil.which("tini") is not None

    def startup(self, nproc):
        return ["tini", "-s", "--", "sh", "-c", f"for i in $(seq {nproc}); do /bin/true & done; wait"]


class Torchrun(Peer):
    name = "torchrun"

    def version(self):
        return "torch " + pip_version(VENV + "/python", "torch")

    def available(self):
        return os.access(VENV + "/python", os.X_OK)

    def startup(self, nproc):
        return [VENV + "/python", "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                "--no_python", "true"]

    def node(self, n, i, port, rid, worker, restarts):
        return [VENV + "/python", "-m", "torch.distributed.run", "--nnodes", str(n),
                "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                f"{addr(0)}:{port}", "--rdzv_id", rid, "--local_addr", addr(i), "--max_restarts",
                str(restarts), "--monitor_interval", "0.1", "--no_python", worker]


class FtLauncher(Peer):
    name = "ft_launcher"

    def version(self):
        return "nvidia-resiliency-ext " + pip_version(BENCH + "/python", "nvidia-resiliency-ext")

    def available(self):
        return os.access(BENCH + "/ft_launcher", os.X_OK)

    def startup(self, nproc):
        return [BENCH + "/ft_launcher", "--standalone", "--nproc_per_node", str(nproc),
                "--ignore-missing-fault-tol-cfg", "--no_python", "true"]

    def node(self, n, i, port, rid, worker, restarts):
        return [BENCH + "/ft_launcher", "--nnodes", str(n), "--nproc_per_node", "1",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{addr(0)}:{port}", "--rdzv_id", rid,
                "--local_addr", addr(i), "--max_restarts", str(restarts), "--monitor_interval",
                "0.1", "--ignore-missing-fault-tol-cfg", "--no_python", worker]


class Dlrover(Peer):
    """dlrover-run against a master of its own (`--platform local`), as its multi-node mode on
    hosts without Kubernetes wants; the master's start is not counted in any figure. Its
    --standalone mode fails on torch 2.15 (a changed SubprocessHandler signature)."""
    name = "dlrover-run"
    cannot = {"startup": "--standalone cannot start its local master on torch 2.15"}

    def version(self):
        return "dlrover " + pip_version(BENCH + "/python", "dlrover")

    def available(self):
        return os.access(BENCH + "/dlrover-run", os.X_OK)

    def side(self, n, port, d):
        self.master = free_port("127.0.0.1")
        log = open(os.path.join(d, "master.log"), "wb")
        return subprocess.Popen([BENCH + "/python", "-u", "-m", "dlrover.python.master.main",
                                 "--port", str(self.master), "--node_num", str(n), "--job_name",
                                 f"pb{port}", "--platform", "local"], stdout=log, stderr=log,
                                start_new_session=True)

    def node(self, n, i, port, rid, worker, restarts):
        return ["env", f"DLROVER_MASTER_ADDR=127.0.0.1:{self.master}", f"NODE_RANK={i}",
                BENCH + "/dlrover-run", "--nnodes", str(n), "--nproc_per_node", "1",
                "--max_restarts", str(restarts), "--monitor_interval", "0.1", "--no_python",
                worker]


class Accelerate(Peer):
    name = "accelerate"

    def version(self):
        return "accelerate " + pip_version(VENV + "/python", "accelerate")

    def available(self):
        return os.access(VENV + "/accelerate", os.X_OK)

    def startup(self, nproc):
        return [VENV + "/accelerate", "launch", "--multi_gpu", "--num_processes", str(nproc),
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                "--no_python", "true"]

    def node(self, n, i, port, rid, worker, restarts):
        return [VENV + "/accelerate", "launch", "--multi_gpu", "--num_machines", str(n),
                "--num_processes", str(n), "--machine_rank", str(i), "--main_process_ip",
                addr(0), "--main_process_port", str(port), "--max_restarts", str(restarts), "--monitor_interval", "0.1",
                "--mixed_precision", "no", "--dynamo_backend", "no", "--no_python", worker]


class Deepspeed(Peer):
    """deepspeed --no_ssh: each node starts its own line of the hostfile; the nodes share a
    master for the workers' process group and nothing else."""
    name = "deepspeed"
    cannot = {"restart": "no restart (each node's launch.py stops its own workers and exits)"}

    def version(self):
        return "deepspeed " + pip_version(VENV + "/python", "deepspeed")

    def available(self):
        return os.access(VENV + "/deepspeed", os.X_OK)

    def startup(self, nproc):
        return ["env", "DS_ACCELERATOR=cpu", VENV + "/deepspeed", "--num_gpus", str(nproc),
                "--no_python", "true"]

    def hostfile(self, n, d):
        path = os.path.join(d, "hostfile")
        with open(path, "w") as f:
            f.writelines(f"{addr(i)} slots=1\n" for i in range(n))
        return path

    def node(self, n, i, port, rid, worker, restarts):
        return ["env", "DS_ACCELERATOR=cpu", VENV + "/deepspeed", "-H", self.hf, "--no_ssh",
                "--node_rank", str(i), "--master_addr", addr(0), "--master_port", str(port),
                "--no_python", worker]

    def side(self, n, port, d):
        self.hf = self.hostfile(n, d)
        return None


PEERS = [Podrun(), Tini(), Torchrun(), FtLauncher(), Dlrover(), Accelerate(), Deepspeed()]


# ---- the cases


def peak_run(cmd):
    with tempfile.NamedTemporaryFile("r") as f:
        t0 = time.perf_counter()
        rc = subprocess.call([TIME, "-f", "%M", "-o", f.name, *cmd], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        f.seek(0)
        rss = int(f.read().split()[-1])
    return (wall * 1000, rss / 1024) if rc == 0 else None


def case_startup(peer, n, worker, a):
    r = peak_run(peer.startup(8))
    return None if r is None else {"startup": r[0], "rss_mib": r[1]}


class Run:
    """One job of n agents of `peer` in a fresh directory; its workers' stamps are read from it."""

    def __init__(self, peer, n, worker, restarts, env):
        self.port = free_port(addr(0))
        self.d = tempfile.mkdtemp(prefix="podrun-peers-")
        self.side = peer.side(n, self.port, self.d)
        e = {"BENCH_DIR": self.d, "OMP_NUM_THREADS": "1", **env}
        self.t0 = time.time_ns()
        self.job = Job([peer.node(n, i, self.port, f"pb{self.port}", worker, restarts)
                        for i in range(n)], env=e, log_dir=self.d)

    def stamps(self, what, after=0):
        return sorted(t for t in (read_ns(p) for p in glob.glob(f"{self.d}/{what}.*")) if t > after)

    def wait(self, timeout):
        self.waited = True
        return self.job.wait(timeout)

    def end(self, timeout=120):
        if not getattr(self, "waited", False):
            self.job.kill()
            self.job.wait(timeout)
        if self.side:
            try:
                os.killpg(self.side.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.side.wait()
        self.kill_workers()
        shutil.rmtree(self.d, ignore_errors=True)

    def kill_workers(self):
        """The workers of this run still alive: a launcher SIGKILLed with its process group
        leaves the workers that it started in sessions of their own (torch's elastic agent
        does, under torchrun, ft_launcher and dlrover-run); each is known by its start file and, against a reused pid, by its
        BENCH_DIR."""
        mine = f"\0BENCH_DIR={self.d}\0".encode()
        for path in glob.glob(f"{self.d}/start.*"):
            pid = int(path.rsplit(".", 1)[1])
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mine in b"\0" + f.read():
                        os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass


def case_rdzv(peer, n, worker, a):
    r = Run(peer, n, worker, 0, {"DONE": "1"})
    try:
        wall, codes, _ = r.wait(a.bound)
        return {"rdzv": wall * 1000} if codes == [0] * n else None
    finally:
        r.end()


def case_fail(peer, n, worker, a):
    """One worker fails with one restart allowed: when the last worker of every other node had
    its SIGTERM (push), and when every worker of the next attempt runs (restart)."""
    r = Run(peer, n, worker, 0 if "restart" in peer.cannot else 1,
            {"FAIL_RANK": str(n // 2), "FINISH_AFTER": "2"})
    try:
        if not wait_files(f"{r.d}/start.*", n, a.bound):
            return None
        open(f"{r.d}/go", "w").close()
        if not wait_files(f"{r.d}/fail", 1, 30):
            return None
        wait_files(f"{r.d}/term.*", n - 1, a.loss_bound)
        if "restart" not in peer.cannot:
            wait_files(f"{r.d}/start.*", 2 * n, a.loss_bound)
        t_fail = read_ns(f"{r.d}/fail")
        terms, starts = r.stamps("term", t_fail), r.stamps("start", t_fail)
        res = {}
        res["push"] = ((terms[-1] - t_fail) / 1e6 if len(terms) >= n - 1 else
                       f"{n - 1 - len(terms)} of {n - 1} nodes not stopped in {a.loss_bound:.0f} s")
        if "restart" in peer.cannot:
            res["restart"] = peer.cannot["restart"]
        else:
            res["restart"] = ((starts[n - 1] - t_fail) / 1e6 if len(starts) >= n else
                              f"{len(starts)} of {n} workers ran again in {a.loss_bound:.0f} s")
        return res
    finally:
        r.end()


def case_loss(peer, n, worker, a):
    r = Run(peer, n, worker, 0, {})
    try:
        if not wait_files(f"{r.d}/start.*", n, a.bound):
            return None
        victim = r.job.procs[n // 2]
        t_kill = time.time_ns()
        os.killpg(victim.pid, signal.SIGKILL)   # the agent and its worker, as a node lost
        # the survivors act when one of their workers is stopped (or started again)
        deadline = time.monotonic() + a.loss_bound
        while time.monotonic() < deadline:
            acted = r.stamps("term", t_kill) + r.stamps("start", t_kill)
            if len(acted) >= n - 1:
                return {"loss": (sorted(acted)[n - 2] - t_kill) / 1e6}
            time.sleep(0.01)   # poll interval
        return {"loss": f"the survivors did nothing in {a.loss_bound:.0f} s"}
    finally:
        r.end()


CASES = {"startup": case_startup, "rdzv": case_rdzv, "fail": case_fail, "loss": case_loss}
FIGURES = {"startup": ["startup"], "rdzv": ["rdzv"], "fail": ["push", "restart"],
           "loss": ["loss"]}


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="4,8,32", help="agents per job (rdzv, push, restart, loss)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--peers", default=",".join(p.name for p in PEERS))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--bound", type=float, default=300, help="s for a job to start or end")
    ap.add_argument("--loss-bound", type=float, default=60, help="s to wait for an action")
    a = ap.parse_args()
    raise_nofile()
    worker = build_sigworker()
    os.environ.pop("OMP_NUM_THREADS", None)
    want = a.peers.split(",")
    peers = [p for p in PEERS if p.name in want]
    for p in peers:
        if not p.available():
            sys.exit(f"peers_bench: {p.name} is not installed (scripts/deps, then scripts/deps "
                     "--bench-peers for ft_launcher and dlrover-run)")
    print("peers:", "; ".join(f"{p.name} ({p.version()})" for p in peers))
    ns = [int(x) for x in a.n.split(",")]
    results = {}   # (figure, n, peer) -> [ms or {"ms", "rss_mib"}], or why there is none
    for case in a.cases.split(","):
        for n in [8] if case == "startup" else ns:
            for rep in range(a.repeat):
                order = peers[rep % len(peers):] + peers[:rep % len(peers)]   # alternate
                for p in order:
                    figs = FIGURES[case]
                    if case in p.cannot:
                        for f in figs:
                            results[(f, n, p.name)] = p.cannot[case]
                        continue
                    if all(isinstance(results.get((f, n, p.name)), str) for f in figs):
                        continue   # failed before, or cannot: once is enough
                    res = CASES[case](p, n, worker, a)
                    for f in figs:
                        key = (f, n, p.name)
                        v = "did not run (run --peers with it alone, keep its logs)" \
                            if res is None else res[f]
                        if isinstance(v, str):
                            results[key] = v
                        elif not isinstance(results.get(key), str):
                            results.setdefault(key, []).append(
                                {"ms": v, "rss_mib": res.get("rss_mib")})
            for f in FIGURES[case]:
                report(f, n, peers, results)
    print("load average (1, 5, 15 min): %.2f %.2f %.2f on %d CPUs"
          % (*os.getloadavg(), os.cpu_count()))


def report(fig, n, peers, results):
    print(f"\n{fig}" + ("" if fig == "startup" else f", N = {n}"))
    base = results.get((fig, n, "podrun"))
    base_ms = statistics.median(r["ms"] for r in base) if isinstance(base, list) else None
    for p in peers:
        v = results.get((fig, n, p.name))
        if v is None:
            continue
        if isinstance(v, str):
            print(f"  {p.name:12} {v}")
            continue
        ms = [r["ms"] for r in v]
        line = f"  {p.name:12} median {statistics.median(ms):9.1f} ms  p90 {p90(ms):9.1f} ms"
        if base_ms and p.name != "podrun":
            line += f"  {p.name}/podrun {statistics.median(ms) / base_ms:8.2f}"
        if v[0]["rss_mib"] is not None:
            line += f"  peak RSS {statistics.median(r['rss_mib'] for r in v):7.1f} MiB"
        print(line + f"  ({len(v)} runs)")


if __name__ == "__main__":
    main()
