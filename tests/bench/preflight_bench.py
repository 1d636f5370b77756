#!/usr/bin/python3
"""Preflight benchmark: N agents on loopback addresses (one worker each, which exits at once),
the same job with and without --preflight tcp, in the same run. Reports the check's own time (the
judge's, from its start to the verdict: the pairs of round 1 measuring round trips and 16 MiB
each way at once) and what it adds to the job's wall time (medians).

DLRover's pairwise check, which this one's schedule follows, takes about 20 s a round on healthy
nodes in its own published chaos experiment (reference/resilience.md §1.2); it cannot run here.

    PODRUN=build-bench/launcher/podrun /usr/bin/python3 tests/bench/preflight_bench.py [--n 8,32]
"""
import argparse
import os
import random
import re

from jobs import Job, build_sigworker, median, podrun_cmd, raise_nofile

DLROVER_ROUND_S = 20.0


def run(n, worker, preflight, extra):
    port = random.randint(20000, 60000)
    ext = (["--preflight", "tcp"] if preflight else []) + extra
    job = Job([podrun_cmd(n, i, port, f"pf{port}", worker, extra=ext) for i in range(n)],
              env={"DONE": "1"})
    wall, codes, _ = job.wait(timeout=300)
    check = None
    with open(os.path.join(job.log_dir, "agent0.log"), errors="replace") as f:
        m = re.search(r"preflight tcp: \d+ nodes, (\d) rounds? of pairs, ([\d.]+)s, (\d+) bad",
                      f.read())
        if m:
            check = (int(m.group(1)), float(m.group(2)), int(m.group(3)))
    return wall, sum(c != 0 for c in codes), check, job.log_dir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bytes", default="16M", help="--preflight-tcp-bytes")
    a = ap.parse_args()
    raise_nofile()
    worker = build_sigworker()
    extra = ["--preflight-tcp-bytes", a.bytes]
    print(f"{'agents':>6} {'job without s':>14} {'job with s':>11} {'added s':>8} "
          f"{'check s (judge)':>16} {'rounds':>6} {'bad':>4} {'failed agents':>14}")
    for n in [int(x) for x in a.n.split(",") if x]:
        base, with_pf = [], []
        for _ in range(a.repeat):   # interleaved, so both see the same machine
            base.append(run(n, worker, False, extra))
            with_pf.append(run(n, worker, True, extra))
        wb, wp = median([r[0] for r in base]), median([r[0] for r in with_pf])
        checks = [r[2] for r in with_pf if r[2]]
        cs = median([c[1] for c in checks]) if checks else float("nan")
        failed = max(r[1] for r in base + with_pf)
        print(f"{n:>6} {wb:>14.3f} {wp:>11.3f} {wp - wb:>8.3f} {cs:>16.3f} "
              f"{max((c[0] for c in checks), default=0):>6} "
              f"{max((c[2] for c in checks), default=0):>4} {failed:>14}   "
              f"logs: {with_pf[-1][3]}", flush=True)
        if checks:
            print(f"N={n}: the check takes {cs:.2f} s; DLRover's takes about "
                  f"{DLROVER_ROUND_S:.0f} s a round ({DLROVER_ROUND_S / cs:.0f}x one round of it)")


if __name__ == "__main__":
    main()
