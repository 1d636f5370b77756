#!/usr/bin/python3
"""The etcd rendezvous backend next to the c10d backend, in the same run, on the same nodes and
workers (tests/bench/sigworker.c), against a real etcd (Debian's etcd-server, one member on
loopback, its data in /dev/shm):

rendezvous:  N agents started at once, 1 worker each that exits at once; wall time until every
             agent has exited (the etcd job's keys removed included), peak RSS per agent.
propagation: one worker fails on one node (not node rank 0, not the coordinator) → time until
             SIGTERM has reached the worker of every other node (p50/p99/max over the nodes).
restart:     the failure → every worker of every node running again (--max-restarts 1).

    PODRUN=build-bench/launcher/podrun /usr/bin/python3 tests/bench/etcd_bench.py \\
        [--rdzv-n 8,32,128] [--prop-n 8,32,128] [--restart-n 8,32] [--repeat 3]
"""
import argparse
import glob
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

from jobs import Job, build_sigworker, median, podrun_cmd, raise_nofile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member for the run; stopped by its own PID."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="podrun-bench-etcd-", dir="/dev/shm")
        self.port, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            ["etcd", "--name", "b", "--data-dir", os.path.join(self.dir, "d"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"b=http://127.0.0.1:{peer}", "--logger", "zap",
             "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while subprocess.run(["etcdctl", "--endpoints", url, "endpoint", "health"],
                             capture_output=True, env={**os.environ, "ETCDCTL_API": "3"}
                             ).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit("etcd did not start")
            time.sleep(0.2)

    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def cmd_for(backend, etcd):
    """A command builder for one backend: c10d as the other benchmarks run it, or etcd."""
    if backend == "c10d":
        return podrun_cmd
    extra = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoint()]
    return lambda n, i, port, rid, worker, nproc=1, extra2=(): podrun_cmd(
        n, i, port, rid, worker, nproc, extra=[*extra, *extra2])


def rendezvous(backend, etcd, n, worker):
    port = random.randint(20000, 60000)
    cmd = cmd_for(backend, etcd)
    job = Job([cmd(n, i, port, f"rb{port}", worker) for i in range(n)], env={"DONE": "1"},
              rss=True)
    wall, codes, rss = job.wait(timeout=300)
    return wall, sum(c != 0 for c in codes), max(rss), median(rss)


def read_ns(path):
    with open(path) as f:
        return int(f.read())


def wait_files(pattern, n, timeout):
    deadline = time.monotonic() + timeout
    while len(glob.glob(pattern)) < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def failure(backend, etcd, n, worker, restarts):
    """One run: propagation figures (restarts 0) or the restart time (restarts 1)."""
    port = random.randint(20000, 60000)
    cmd = cmd_for(backend, etcd)
    d = tempfile.mkdtemp(prefix="podrun-bench-")
    fail_rank = n // 2 + 1  # neither node rank 0 nor the first agent started
    job = Job([cmd(n, i, port, f"fb{port}", worker, 1, ["--max-restarts", str(restarts)])
               for i in range(n)],
              env={"FAIL_RANK": str(fail_rank), "FINISH_AFTER": "2", "BENCH_DIR": d}, log_dir=d)
    if not wait_files(f"{d}/start.*", n, 120):
        job.kill()
        job.wait()
        return None
    open(f"{d}/go", "w").close()
    wait_files(f"{d}/fail", 1, 30)
    wait_files(f"{d}/term.*" if restarts == 0 else f"{d}/start.*",
               n - 1 if restarts == 0 else 2 * n, 60)
    job.wait(timeout=120)
    t_fail = read_ns(f"{d}/fail")
    before = {p.split(".")[-1] for p in glob.glob(f"{d}/start.*") if read_ns(p) < t_fail}
    terms = sorted(read_ns(p) - t_fail for p in glob.glob(f"{d}/term.*")
                   if p.split(".")[-1] in before)
    starts = sorted(read_ns(p) - t_fail for p in glob.glob(f"{d}/start.*")
                    if read_ns(p) > t_fail)
    res = {}
    if terms:
        res["p50"] = terms[len(terms) // 2] / 1e6
        res["p99"] = terms[min(len(terms) - 1, int(len(terms) * 0.99))] / 1e6
        res["max"] = terms[-1] / 1e6
        res["signalled"] = len(terms)
    if len(starts) >= n:
        res["restart"] = starts[n - 1] / 1e6
    return res


def ns(text):
    return [int(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdzv-n", default="8,32,128")
    ap.add_argument("--prop-n", default="8,32,128")
    ap.add_argument("--restart-n", default="8,32")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    raise_nofile()
    worker = build_sigworker()
    etcd = Etcd()
    try:
        print("rendezvous (s until every agent exited; peak RSS per agent KiB, max / median)")
        walls = {}
        for n in ns(a.rdzv_n):
            for backend in ("c10d", "etcd"):
                runs = [rendezvous(backend, etcd, n, worker) for _ in range(a.repeat)]
                walls[(backend, n)] = median([r[0] for r in runs])
                print(f"  N={n:<4} {backend:>5}: {walls[(backend, n)]:7.3f} s  "
                      f"failed agents {max(r[1] for r in runs)}  "
                      f"RSS {max(r[2] for r in runs)} / {median([r[3] for r in runs])}",
                      flush=True)
            print(f"  N={n:<4} etcd / c10d: {walls[('etcd', n)] / walls[('c10d', n)]:.2f}",
                  flush=True)
        print("propagation (ms from the failure to SIGTERM at the other nodes' workers)")
        for n in ns(a.prop_n):
            for backend in ("c10d", "etcd"):
                ok = [r for r in (failure(backend, etcd, n, worker, 0)
                                  for _ in range(a.repeat)) if r and "max" in r]
                if not ok:
                    print(f"  N={n:<4} {backend:>5}: no worker was signalled", flush=True)
                    continue
                print(f"  N={n:<4} {backend:>5}: p50 {median([r['p50'] for r in ok]):7.1f}  "
                      f"p99 {median([r['p99'] for r in ok]):7.1f}  "
                      f"max {median([r['max'] for r in ok]):7.1f}  "
                      f"(signalled {ok[0]['signalled']}/{n - 1}, {len(ok)} runs)", flush=True)
        print("restart (ms from the failure until every worker runs again)")
        for n in ns(a.restart_n):
            for backend in ("c10d", "etcd"):
                ok = [r["restart"] for r in (failure(backend, etcd, n, worker, 1)
                                             for _ in range(a.repeat)) if r and "restart" in r]
                print(f"  N={n:<4} {backend:>5}: " + (f"{median(ok):8.1f} ms ({len(ok)} runs)"
                                                      if ok else "did not restart"), flush=True)
    finally:
        etcd.stop()


if __name__ == "__main__":
    main()
