#!/usr/bin/python3
"""Rendezvous benchmark: wall time from starting N agents (1 worker each, the worker exits at once)
until all have exited, podrun against Debian's torchrun (c10d) in the same run; peak RSS per agent.

    /usr/bin/python3 tests/bench/rdzv_bench.py [--torchrun-n 8,32] [--podrun-n 8,32,128,1024]

An empty list (--torchrun-n '') leaves that tool out.
"""
import argparse
import random

from jobs import Job, build_sigworker, median, podrun_cmd, raise_nofile, torchrun_cmd


def run(kind, n, worker, port):
    cmd = podrun_cmd if kind == "podrun" else torchrun_cmd
    job = Job([cmd(n, i, port, f"bench{port}", worker) for i in range(n)], env={"DONE": "1"},
              rss=True)
    wall, codes, rss = job.wait(timeout=300)
    bad = sum(c != 0 for c in codes)
    return wall, bad, max(rss), median(rss), job.log_dir


def sizes(text):
    """A comma-separated list of agent counts, each at least 1 (argparse type)."""
    try:
        ns = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ns = [0]
    if any(n < 1 for n in ns):
        raise argparse.ArgumentTypeError(
            f"{text!r}: agent counts are whole numbers of at least 1, comma-separated; "
            "'' leaves the tool out")
    return ns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchrun-n", type=sizes, default="8,32")
    ap.add_argument("--podrun-n", type=sizes, default="8,32,128,1024")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    raise_nofile()
    worker = build_sigworker()
    tn, pn = a.torchrun_n, a.podrun_n
    print(f"{'agents':>6} {'tool':>8} {'wall s (median)':>16} {'failed agents':>14} "
          f"{'peak RSS/agent KiB (max, median)':>34}")
    results = {}
    for n in sorted(set(tn) | set(pn)):
        for kind in ("podrun", "torchrun"):
            if n not in (pn if kind == "podrun" else tn):
                continue
            runs = [run(kind, n, worker, random.randint(20000, 60000))
                    for _ in range(a.repeat if kind == "podrun" or n <= 8 else 1)]
            wall = median([r[0] for r in runs])
            results[(kind, n)] = wall
            print(f"{n:>6} {kind:>8} {wall:>16.3f} {max(r[1] for r in runs):>14} "
                  f"{max(r[2] for r in runs):>20} {median([r[3] for r in runs]):>12}"
                  f"   logs: {runs[-1][4]}", flush=True)
    for n in tn:
        if ("podrun", n) in results and results[("podrun", n)] > 0:
            print(f"N={n}: podrun is {results[('torchrun', n)] / results[('podrun', n)]:.1f}x "
                  f"faster than torchrun")


if __name__ == "__main__":
    main()
