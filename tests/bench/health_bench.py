#!/usr/bin/python3
"""The health check's reaction time: 4 agents on 127.0.0.x, each on its own fixture machine
(tests/fixtures/mkmachine) with the fake NVML; a critical Xid is injected into one node's NVML
while the workers run → time until SIGTERM reached the last worker on every node.

The figure is detection (the Xid is seen at the node's next check: 0 to one interval after it
happened) + the push (the node's failure record reaching the other agents, which stop their
workers). Reported: from the injection to the failing node's own worker stopping (detection), from
there to the last other node's worker stopping (push), and the total.

    /usr/bin/python3 tests/bench/health_bench.py [--intervals 100ms,1] [--runs 5] [-n 4]
"""
import argparse
import glob
import os
import random
import subprocess
import tempfile
import time

from jobs import PODRUN, build_sigworker, median, podrun_cmd

BUILD = os.environ.get("PODRUN_BUILD", os.path.join(os.path.dirname(__file__), "..", "..",
                                                    "build"))
MKMACHINE = os.path.join(BUILD, "tests", "fixtures", "mkmachine")
FAKES = os.path.join(BUILD, "tests", "fakes")


def machine(d, i):
    root = os.path.join(d, f"m{i}")
    os.mkdir(root)
    subprocess.run([MKMACHINE, root, "--no-mig"], check=True)
    health = os.path.join(root, "health.conf")
    open(health, "w").close()
    env = dict(os.environ, PODRUN_SYSROOT=root, PODRUN_FAKE_NVML=os.path.join(root, "nvml.conf"),
               PODRUN_FAKE_NVML_HEALTH=health, LD_LIBRARY_PATH=FAKES, FAIL_RANK="-1")
    return env, health


def wait_files(pattern, n, timeout):
    deadline = time.monotonic() + timeout
    while len(glob.glob(pattern)) < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def read_ns(path):
    with open(path) as f:
        return int(f.read())


def one(n, interval, worker, bad=2):
    port = random.randint(20000, 60000)
    d = tempfile.mkdtemp(prefix="podrun-hbench-")
    procs, healths = [], []
    for i in range(n):
        env, health = machine(d, i)
        env["BENCH_DIR"] = os.path.join(d, f"w{i}")
        os.mkdir(env["BENCH_DIR"])
        healths.append(health)
        cmd = podrun_cmd(n, i, port, f"hb{port}", worker,
                         extra=["--health-check-interval", interval])
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(d, f"err{i}"), "w")))
    try:
        if not wait_files(f"{d}/w*/start.*", n, 60):
            return None
        # the Xid happens at a random point of the check's period, as a real one does
        secs = float(interval[:-2]) / 1000 if interval.endswith("ms") else float(interval)
        time.sleep(random.uniform(0, secs))
        tmp = healths[bad] + ".new"
        with open(tmp, "w") as f:
            f.write("xid gpu=3 xid=79\n")
        t0 = time.time_ns()
        os.replace(tmp, healths[bad])
        if not wait_files(f"{d}/w*/term.*", n, 60):
            return None
        for p in procs:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    own = read_ns(glob.glob(f"{d}/w{bad}/term.*")[0]) - t0
    others = [read_ns(p) - t0 for i in range(n) if i != bad for p in glob.glob(f"{d}/w{i}/term.*")]
    return own / 1e6, (max(others) - own) / 1e6, max(others + [own]) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--intervals", default="100ms,1")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("-n", type=int, default=4)
    a = ap.parse_args()
    worker = build_sigworker()
    print(f"{a.n} agents, {a.runs} runs each; ms, median (min-max)")
    for interval in a.intervals.split(","):
        res = [r for r in (one(a.n, interval, worker) for _ in range(a.runs)) if r]
        if not res:
            print(f"interval {interval}: no result")
            continue
        cols = list(zip(*res))
        fmt = [f"{median(c):.1f} ({min(c):.1f}-{max(c):.1f})" for c in cols]
        print(f"interval {interval}: detection {fmt[0]}, push {fmt[1]}, total {fmt[2]} "
              f"[{len(res)} runs]")


if __name__ == "__main__":
    main()
