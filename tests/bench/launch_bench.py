#!/usr/bin/python3
"""Start-up and teardown cost of a launcher: 8 workers running `true`, podrun against Debian's
torchrun and tini in the same run, interleaved, medians over --runs runs.

    /usr/bin/python3 tests/bench/launch_bench.py [--runs 10] [--podrun build/launcher/podrun]

Wall time is from fork to reaping the launcher, started directly from this script. Peak RSS
comes from a second run of the same command under GNU time (`/usr/bin/time -f %M`): its
ru_maxrss is that of the largest process in the launcher's tree, and a child forked from this
Python process would count Python's own pages until its exec, so the tiny `time` forks it. torchrun 1.13 on
Python 3.11 needs `-r 1 -t 1` (torch.md §5). tini runs a shell that starts 8 /bin/true (exec'd,
like podrun's workers) and waits for them."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd):
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE if cmd[0] == "/usr/bin/time" else
                         subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"{cmd[0]} failed with {rc}: {' '.join(cmd)}")
    return wall


def peak_rss_kib(cmd):
    with tempfile.NamedTemporaryFile("r") as f:
        run(["/usr/bin/time", "-f", "%M", "-o", f.name, *cmd])
        return int(f.read().split()[-1])


def measure(cmd):
    return run(cmd), peak_rss_kib(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--nproc", type=int, default=8)
    ap.add_argument("--podrun", default=os.path.join(ROOT, "build", "launcher", "podrun"))
    ap.add_argument("--no-torchrun", action="store_true", help="skip the slow baseline")
    a = ap.parse_args()
    n = a.nproc
    cmds = {
        "podrun": [a.podrun, "--nproc-per-node", str(n), "--no-python", "true"],
        "tini": [shutil.which("tini") or "/usr/bin/tini", "-s", "--", "sh", "-c",
                 f"for i in $(seq {n}); do /bin/true & done; wait"],
    }
    if not a.no_torchrun:
        cmds["torchrun"] = ["/usr/bin/python3", "-m", "torch.distributed.run",
                            "--nproc_per_node", str(n), "--no_python", "-r", "1", "-t", "1",
                            "true"]
    env_note = os.environ.pop("OMP_NUM_THREADS", None)
    res = {k: [] for k in cmds}
    for k, c in cmds.items():            # warm the page cache once
        measure(c)
    for _ in range(a.runs):
        for k, c in cmds.items():
            res[k].append(measure(c))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(m for _, m in v))
           for k, v in res.items()}
    print(f"{n} workers running `true`, median of {a.runs} runs (same run, interleaved)")
    print(f"{'launcher':10} {'wall ms':>10} {'peak RSS KiB':>14}")
    for k, (w, m) in med.items():
        print(f"{k:10} {w * 1000:10.2f} {m:14.0f}")
    pw, pm = med["podrun"]
    tw, tm = med["tini"]
    print(f"podrun / tini wall: {pw / tw:.2f}x   (target <= 1.5x)")
    if "torchrun" in med:
        print(f"torchrun / podrun wall: {med['torchrun'][0] / pw:.0f}x   (target >= 100x)")
        print(f"torchrun / podrun peak RSS: {med['torchrun'][1] / pm:.0f}x")
    print(f"podrun peak RSS: {pm / 1024:.2f} MiB   (target <= 3 MiB)")
    # wall times on a shared machine follow its load: say what it was
    print("load average (1, 5, 15 min): %.2f %.2f %.2f on %d CPUs"
          % (*os.getloadavg(), os.cpu_count()))
    del env_note


if __name__ == "__main__":
    main()
