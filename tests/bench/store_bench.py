#!/usr/bin/python3
"""Job-store benchmark: `podrun store` against torch 1.13's own TCPStore server and against a
parse-and-answer floor (tests/bench/store_floor.c), driven by tests/bench/store_loadgen.c, in one
run. Prints throughput and p50/p99 latency for SET/GET/ADD at 1, 64 and 1024 connections, the
init storm (N clients connect, ADD a counter, WAIT for a key the last one sets), and the
server's memory per idle connection, with podrun's ratios to both baselines.

usage: /usr/bin/python3 tests/bench/store_bench.py [--build DIR] [--seconds S] [--quick]
       [--dialect 1|2] [--storm 1000,4000,8000,16000] [--skip-torch]
The servers run side by side and each point is run --repeat times, interleaved across
servers, keeping the best (the machine may be shared). The server runs on CPU 1 and the load generator on CPU 0 (taskset), so on a 2-core machine
they do not fight over a core; all three servers get the same treatment."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_PY = "/usr/bin/python3"
TORCH_STORE = os.path.join(ROOT, "tests", "integration", "workers", "torch_store.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(cpu):
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)]
    return []


class Server:
    def __init__(self, kind, build):
        self.kind, self.port = kind, free_port()
        if kind == "podrun":
            argv = [os.path.join(build, "launcher", "podrun"), "store", "--host", "127.0.0.1",
                    "--port", str(self.port)]
        elif kind == "torch":
            argv = [TORCH_PY, TORCH_STORE, str(self.port), "600"]
        else:
            argv = [os.path.join(build, "tests", "bench", "store_floor"), str(self.port)]
        self.proc = subprocess.Popen(pin(1) + argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{kind} server did not start")
                time.sleep(0.05)
        time.sleep(0.2)

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def loadgen(build, port, *args, timeout=300):
    exe = os.path.join(build, "tests", "bench", "store_loadgen")
    p = subprocess.run(pin(0) + [exe, "--port", str(port), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-200:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def idle_memory(build, srv, n, dialect):
    exe = os.path.join(build, "tests", "bench", "store_loadgen")
    before = srv.rss_kb()
    p = subprocess.Popen(pin(0) + [exe, "--port", str(srv.port), "--idle", str(n),
                                   "--dialect", str(dialect)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    after = srv.rss_kb()
    p.stdin.close()
    p.wait()
    return (after - before) * 1024 / n


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("PODRUN_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--dialect", type=int, default=1)
    ap.add_argument("--storm", default="1000,4000,8000,16000")
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per point; the best is kept (the machine may be shared)")
    ap.add_argument("--quick", action="store_true", help="fewer, shorter runs")
    ap.add_argument("--skip-torch", action="store_true")
    a = ap.parse_args()
    kinds = ["podrun", "floor"] + ([] if a.skip_torch else ["torch"])
    conns = [1, 64, 1024]
    storms = [int(x) for x in a.storm.split(",") if x]
    if a.quick:
        a.seconds, storms, a.idle, a.repeat = 1.0, storms[:2], 2000, 1
    if a.dialect == 2:
        kinds = [k for k in kinds if k != "torch"]   # torch 1.13's server speaks 1.13 only
    somaxconn = open("/proc/sys/net/core/somaxconn").read().strip()
    print(f"# store benchmark: dialect {'1.13' if a.dialect == 1 else '2.x'}, {a.seconds:g} s "
          f"per point, {os.cpu_count()} CPUs, somaxconn {somaxconn}, server on CPU 1, "
          f"load generator on CPU 0")

    # all servers up at once, runs interleaved, so a busy moment on a shared machine hits
    # every server alike; the best of --repeat runs per point is kept
    res = {}
    servers = {kind: Server(kind, a.build) for kind in kinds}
    try:
        for op in ("set", "get", "add"):
            for n in conns:
                for _ in range(a.repeat):
                    for kind, srv in servers.items():
                        r = loadgen(a.build, srv.port, "--op", op, "--conns", n,
                                    "--seconds", a.seconds, "--dialect", a.dialect)
                        if r.get("ops_per_s", 0) > res.get((kind, op, n), {}).get("ops_per_s", 0):
                            res[(kind, op, n)] = r
    finally:
        for srv in servers.values():
            srv.stop()
    print("\n## throughput (ops/s) and latency (us), one request in flight per connection")
    print(f"{'op':4} {'conns':>5} | {'podrun ops/s':>12} {'p50':>5} {'p99':>6} | "
          f"{'floor ops/s':>11} {'p50':>5} {'p99':>6} | {'torch ops/s':>11} {'p50':>5} {'p99':>6}"
          f" | {'vs floor':>8} {'vs torch':>8}")
    for op in ("set", "get", "add"):
        for n in conns:
            row = [f"{op:4} {n:>5}"]
            vals = {}
            for kind in ("podrun", "floor", "torch"):
                r = res.get((kind, op, n), {})
                vals[kind] = r.get("ops_per_s", 0)
                w = 12 if kind == "podrun" else 11
                if "ops_per_s" in r:
                    row.append(f"{r['ops_per_s']:>{w}.0f} {r['p50_us']:>5.0f} {r['p99_us']:>6.0f}")
                else:
                    row.append(f"{'-':>{w}} {'-':>5} {'-':>6}")
            row.append(f"{ratio(vals['podrun'], vals['floor']):>8} "
                       f"{ratio(vals['podrun'], vals['torch']):>8}")
            print(" | ".join(row))

    print("\n## init storm: N clients connect, ADD a counter, WAIT for the key the last one sets")
    print(f"{'N':>6} | {'podrun s':>9} | {'floor s':>8} | {'torch s':>8} | {'torch/podrun':>12}")
    for n in storms:
        row = {}
        for kind in kinds:
            best = None
            for _ in range(1 if kind == "torch" and n > 4000 else a.repeat):
                srv = Server(kind, a.build)
                try:
                    r = loadgen(a.build, srv.port, "--storm", n, "--dialect", a.dialect,
                                timeout=600)
                finally:
                    srv.stop()
                if r.get("seconds") and (best is None or r["seconds"] < best):
                    best = r["seconds"]
            row[kind] = best
        f = lambda v: f"{v:.3f}" if v else "-"
        print(f"{n:>6} | {f(row.get('podrun')):>9} | {f(row.get('floor')):>8} | "
              f"{f(row.get('torch')):>8} | {ratio(row.get('torch'), row.get('podrun')):>12}")

    print(f"\n## server memory per idle connection ({a.idle} connections, RSS growth)")
    for kind in ["podrun"] + ([] if a.skip_torch or a.dialect == 2 else ["torch"]):
        srv = Server(kind, a.build)
        try:
            print(f"{kind:7} {idle_memory(a.build, srv, a.idle, a.dialect):8.0f} bytes")
        finally:
            srv.stop()


if __name__ == "__main__":
    sys.exit(main())
