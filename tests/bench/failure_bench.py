#!/usr/bin/python3
"""Failure benchmarks, podrun against torchrun (c10d, same nodes and workers) in the same run.

propagation: one worker fails on one node → time until the last worker on every other node has
             been signalled (SIGTERM reached it); N = 4, 32, 128 nodes, one worker each.
restart:     failure → every worker on every node running again; N = 4, 32.
Workers exit on SIGTERM at once, so no grace period is included.

    /usr/bin/python3 tests/bench/failure_bench.py [--prop-n 4,32,128] [--restart-n 4,32]
"""
import argparse
import glob
import random
import tempfile
import time

from jobs import Job, build_sigworker, median, podrun_cmd, raise_nofile, torchrun_cmd


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


def one(kind, n, worker, restarts, timeout=120):
    port = random.randint(20000, 60000)
    cmd = podrun_cmd if kind == "podrun" else torchrun_cmd
    flag = ["--max-restarts" if kind == "podrun" else "--max_restarts", str(restarts)]
    fail_rank = n // 2                       # a node that does not host the store
    d = tempfile.mkdtemp(prefix="podrun-bench-")
    job = Job([cmd(n, i, port, f"fb{port}", worker, extra=flag) for i in range(n)],
              env={"FAIL_RANK": str(fail_rank), "FINISH_AFTER": "2", "BENCH_DIR": d}, log_dir=d)
    res = {}
    if not wait_files(f"{d}/start.*", n, timeout):
        job.kill()
        job.wait()
        return None
    open(f"{d}/go", "w").close()
    wait_files(f"{d}/fail", 1, 30)
    want = n - 1 if restarts == 0 else 2 * n
    if not wait_files(f"{d}/term.*" if restarts == 0 else f"{d}/start.*", want, 60):
        res["timeout"] = True
    job.wait(timeout=timeout)
    t_fail = read_ns(f"{d}/fail")
    before = {p.split(".")[-1] for p in glob.glob(f"{d}/start.*") if read_ns(p) < t_fail}
    terms = sorted(read_ns(p) - t_fail for p in glob.glob(f"{d}/term.*")
                   if p.split(".")[-1] in before)
    starts = sorted(read_ns(p) - t_fail for p in glob.glob(f"{d}/start.*")
                    if read_ns(p) > t_fail)
    if terms:
        res["prop_p50"] = terms[len(terms) // 2] / 1e6
        res["prop_p99"] = terms[min(len(terms) - 1, int(len(terms) * 0.99))] / 1e6
        res["prop_max"] = terms[-1] / 1e6
        res["signalled"] = len(terms)
    if len(starts) >= n:
        res["restart"] = starts[n - 1] / 1e6
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prop-n", default="4,32,128")
    ap.add_argument("--restart-n", default="4,32")
    ap.add_argument("--torchrun-n", default="4,32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default="podrun,torchrun")
    a = ap.parse_args()
    tools = a.tools.split(",")
    raise_nofile()
    worker = build_sigworker()
    tn = {int(x) for x in a.torchrun_n.split(",") if x}
    print("propagation (ms from the failure to SIGTERM at the other nodes' workers)")
    for n in [int(x) for x in a.prop_n.split(",") if x]:
        for kind in tools:
            if kind == "torchrun" and n not in tn:
                continue
            # torchrun propagates a failure only through a restart (--max-restarts 0 leaves the
            # other nodes running until their work ends), so it is measured with one restart.
            restarts = 0 if kind == "podrun" else 1
            runs = [r for r in (one(kind, n, worker, restarts)
                                for _ in range(a.repeat if kind == "podrun" else 1)) if r]
            ok = [r for r in runs if "prop_max" in r]
            if not ok:
                print(f"  N={n:<4} {kind:>8}: no worker was signalled ({runs})")
                continue
            print(f"  N={n:<4} {kind:>8}: p50 {median([r['prop_p50'] for r in ok]):8.1f}  "
                  f"p99 {median([r['prop_p99'] for r in ok]):8.1f}  "
                  f"max {median([r['prop_max'] for r in ok]):8.1f}  "
                  f"(signalled {ok[0]['signalled']}/{n - 1}, {len(ok)} runs)", flush=True)
    print("restart (ms from the failure until every worker runs again)")
    for n in [int(x) for x in a.restart_n.split(",") if x]:
        for kind in tools:
            if kind == "torchrun" and n not in tn:
                continue
            runs = [r for r in (one(kind, n, worker, 1)
                                for _ in range(a.repeat if kind == "podrun" else 1)) if r]
            ok = [r["restart"] for r in runs if "restart" in r]
            print(f"  N={n:<4} {kind:>8}: " + (f"{median(ok):8.1f} ms ({len(ok)} runs)" if ok
                                                else f"did not restart ({runs})"), flush=True)


if __name__ == "__main__":
    main()
