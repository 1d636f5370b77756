#!/usr/bin/python3
"""Joining in random order: N real podrun agents on 127.0.0.2..N+1 started at random moments
over S seconds (the store host, on 127.0.0.2, among them), and the time from the moment the
rendezvous could complete (the store host listening and every agent started, whichever is
later) to the moment each agent's worker starts (assignment in hand). The host's listening
moment is found by connecting to its port every 2 ms from this script.

    /usr/bin/python3 tests/bench/join_bench.py [--n 32] [--spread 3] [--repeat 5] [--build build-bench]

Prints per run p50/max over the agents, and over all runs together.
"""
import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = "#!/bin/sh\ndate +%s.%N > \"$OUT_DIR/$GROUP_RANK\"\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def one(podrun, n, spread):
    d = tempfile.mkdtemp(prefix="podrun-join-")
    worker = os.path.join(d, "w.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    os.chmod(worker, 0o755)
    port = free_port()
    starts = sorted((random.uniform(0, spread), i) for i in range(n))
    env = dict(os.environ, OUT_DIR=d)
    procs, listen_at, last_start = [], None, 0.0
    t0 = time.time()
    pending = list(starts)
    host_started = False
    while pending or listen_at is None:
        now = time.time() - t0
        while pending and pending[0][0] <= now:
            _, i = pending.pop(0)
            args = [podrun, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", f"127.0.0.2:{port}", "--rdzv-id", "joinbench",
                    "--local-addr", f"127.0.0.{2 + i}", "--no-python", worker]
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            host_started = host_started or i == 0
            last_start = time.time()
        if host_started and listen_at is None:
            try:
                socket.create_connection(("127.0.0.2", port), timeout=0.05).close()
                listen_at = time.time()
            except OSError:
                pass
        if time.time() - t0 > spread + 30:
            break
        time.sleep(0.002)
    codes = [p.wait(timeout=60) for p in procs]
    lat = []
    base = max(listen_at or 0, last_start)
    for i in range(n):
        try:
            with open(os.path.join(d, str(i))) as f:
                lat.append(float(f.read()) - base)
        except (OSError, ValueError, TypeError):
            pass
    return lat, codes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--spread", type=float, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"))
    a = ap.parse_args()
    podrun = os.path.join(a.build, "launcher", "podrun")
    print(f"# join bench: {a.n} agents started in random order over {a.spread} s; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    every = []
    for r in range(a.repeat):
        lat, codes = one(podrun, a.n, a.spread)
        bad = sum(1 for c in codes if c != 0)
        every += lat
        print(f"run {r}: {len(lat)} agents, all up -> worker started: "
              f"p50 {pct(lat, 50) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms"
              f"{f', {bad} agents failed' if bad else ''}", flush=True)
    print(f"all runs: p50 {pct(every, 50) * 1000:.0f} ms, p90 {pct(every, 90) * 1000:.0f} ms, "
          f"max {max(every) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
