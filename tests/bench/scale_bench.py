#!/usr/bin/python3
"""Rendezvous at scale: one real hosting podrun agent, K-1 simulated agents
(tests/bench/rdzv_loadgen.c) over real TCP from 127.0.0.2-251, the host on CPU 1 and the load
generator on CPU 0 (--threads 1) or, by default, on CPU 0 and at the lowest priority on CPU 1
(--threads 2: what the host leaves of its core).

Per K: the round (last join -> every agent holding its assignment), the host's CPU share while K
agents heartbeat (every second up to 2048 agents, then every ceil(K / 2048) s, as real agents do)
and its RSS, the failure push (one agent's failure report -> each agent's
WAIT on the round's end woken, p50/p99/max; and -> the decision read, p99), the restart (failure ->
every agent holding its next assignment), messages per agent per round; with --spares M the
host's CPU and RSS with M more agents waiting, and whether the running round noticed them.
Every figure is the median of --repeat runs, with the spread (min-max). --build (default
build-bench) is brought up to date with ninja first, and set up as a release build when missing.

    /usr/bin/python3 tests/bench/scale_bench.py [--k 1024,4096,16384] [--repeat 3] [--rounds 5]
        [--spares 0] [--build build-bench]
    /usr/bin/python3 tests/bench/scale_bench.py --soak --k 64 --rounds 2000 --sample 100
"""
import argparse
import json
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time

WRAP = []  # --host-wrap: a command the host runs under (a profiler)
FLOORS = {}  # (K, udp) -> push_floor's JSON of each run
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["launcher/podrun", "tests/bench/rdzv_loadgen", "tests/bench/push_floor"]


def last_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "no output"


def ensure_build(build):
    """Brings podrun and the load generator in `build` up to date with ninja, first setting up a
    release build there with meson when the directory has none (doc/performance.md's figures come
    from such a build). A directory without ninja's files but with both programs is used as it
    is. Returns None, or the one line that says what failed and what to do."""
    fix = (f"set one up with 'meson setup {build} -Dbuildtype=release && ninja -C {build}' or "
           "pass --build DIR of a podrun build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        if all(os.access(os.path.join(build, t), os.X_OK) for t in TARGETS):
            return None
        print(f"# setting up a release build in {build}", file=sys.stderr, flush=True)
        r = subprocess.run(["meson", "setup", build, "-Dbuildtype=release"], cwd=ROOT,
                           capture_output=True, text=True)
        if r.returncode != 0:
            return f"scale_bench: cannot set up a build in {build}: " \
                   f"{last_line(r.stdout + r.stderr)}; {fix}"
    r = subprocess.run(["ninja", "-C", build, *TARGETS], capture_output=True, text=True)
    if r.returncode != 0:
        said = [l for l in (r.stdout + r.stderr).splitlines()
                if l.startswith("FAILED: ") or l.startswith("ninja: error")]
        why = said[0] if said else last_line(r.stderr or r.stdout)
        return f"scale_bench: cannot build {' and '.join(TARGETS)} in {build}: {why}; {fix}"
    return None


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def wait_listening(port, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


def floor(build, k, udp, rounds=5):
    """push_floor at K (the same CPUs: writer on 1 as the host, reader on 0 as the load
    generator): its JSON."""
    cmd = [os.path.join(build, "tests", "bench", "push_floor"), "--k", str(k), "--rounds",
           str(rounds)] + (["--udp"] if udp else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {"error": (r.stdout + r.stderr)[-300:]}


def one(build, k, rounds, spares, steady, sample=0, extra=(), hold=0, relay=True, threads=1):
    """One host + one load generator run; the load generator's JSON plus the host's exit."""
    podrun = os.path.join(build, "launcher", "podrun")
    loadgen = os.path.join(build, "tests", "bench", "rdzv_loadgen")
    d = tempfile.mkdtemp(prefix="podrun-scale-")
    port = random.randint(20000, 60000)
    run_id = f"scale{port}"
    done = os.path.join(d, "done")
    host_cmd = ["taskset", "-c", "1", *WRAP, podrun, "--nnodes", str(k), "--nproc-per-node", "1",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                "--rdzv-id", run_id, "--local-addr", "127.0.0.1", "--no-python",
                "--max-restarts", str(rounds + hold + 1), "--term-timeout", "5", *extra,
                loadgen, "--worker", done]
    log = open(os.path.join(d, "host.log"), "wb")
    host = subprocess.Popen(host_cmd, stdout=log, stderr=log)
    try:
        if not wait_listening(port, host):
            log.flush()
            with open(os.path.join(d, "host.log"), errors="replace") as f:
                said = last_line(f.read())
            return {"error": f"host did not listen: {said} (log {d}/host.log)"}
        cpus = "0" if threads == 1 else "0,1"
        lg = subprocess.run(["taskset", "-c", cpus, loadgen, "--threads", str(threads), "--port", str(port), "--run-id",
                             run_id, "--host-pid", str(host.pid), "--k", str(k), "--rounds",
                             str(rounds), "--spares", str(spares), "--steady", str(steady),
                             "--sample", str(sample), "--done-file", done, "--hold", str(hold)]
                            + ([] if relay else ["--no-relay"]),
                            stdout=subprocess.PIPE, stderr=sys.stderr, timeout=1800)
        try:
            r = json.loads(lg.stdout)
        except ValueError:
            return {"error": f"load generator said: {lg.stdout[-500:]!r}"}
        try:
            r["host_exit"] = host.wait(timeout=60)
        except subprocess.TimeoutExpired:
            r["host_exit"] = None
        r["log"] = d
        return r
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        log.close()


def med(xs):
    xs = sorted(x for x in xs if x is not None and x >= 0)
    if not xs:
        return None
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def fmt(runs, key, scale=1.0, digits=1):
    vals = [r[key] * scale for r in runs if r.get(key) is not None and r[key] >= 0]
    if not vals:
        return "-"
    m = med(vals)
    if len(vals) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({min(vals):.{digits}f}-{max(vals):.{digits}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", default="1024,4096,16384")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--spares", type=int, default=0)
    ap.add_argument("--steady", type=float, default=5)
    ap.add_argument("--soak", action="store_true")
    ap.add_argument("--sample", type=int, default=100)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"),
                    help="the build to run (set up as a release build when missing)")
    ap.add_argument("--host-wrap", default="", help="e.g. 'perf record -g -o /tmp/host.perf --'")
    ap.add_argument("--hold", type=int, default=0,
                    help="failure rounds, before the others, whose rejoins wait until the push "
                         "reached everyone: the push alone and the host's CPU for it")
    ap.add_argument("--modes", default="relay",
                    help="relay, direct (the simulated agents offer no relay port: every one "
                         "WAITs on the store, as before the relay tree), or both, alternating")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of the load generator: 1 plays every simulated agent on CPU 0; "
                         "2 splits them between CPU 0 and CPU 1 (the host's), as the floor's "
                         "writer and reader use both")
    ap.add_argument("--floor", action="store_true",
                    help="before each run, push_floor at the same K (TCP, then --udp): the "
                         "floor of delivering K messages, measured in the same run")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    err = ensure_build(a.build)
    if err:
        print(err, file=sys.stderr)
        return 1
    WRAP[:] = a.host_wrap.split()
    hard = raise_nofile()
    where = "CPU 0" if a.threads == 1 else f"{a.threads} threads on CPUs 0 and 1"
    print(f"# scale benchmark: {os.cpu_count()} CPUs, host on CPU 1, load generator on {where}, "
          f"descriptors per process {hard}, load average at start "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if a.soak:
        for k in [int(x) for x in a.k.split(",") if x]:
            r = one(a.build, k, a.rounds, 0, 1, sample=a.sample, threads=a.threads)
            print(json.dumps(r), flush=True)
            print(f"\nK={k}, {r.get('rounds')} restarts: host key count, RSS and descriptors")
            print(f"{'round':>7} {'keys':>6} {'RSS KiB':>8} {'fds':>5}")
            for s in r.get("soak", []):
                print(f"{s['round']:>7} {s['keys']:>6} {s['rss_kib']:>8} {s['fds']:>5}")
        return 0
    rows = []
    for k in [int(x) for x in a.k.split(",") if x]:
        runs = []
        for i in range(a.repeat):
            if a.floor:
                for udp in (0, 1):
                    fl = floor(a.build, k, udp)
                    print(json.dumps(fl), flush=True)
                    FLOORS.setdefault((k, udp), []).append(fl)
            for mode in a.modes.split(","):
                r = one(a.build, k, a.rounds, a.spares, a.steady, hold=a.hold,
                        relay=mode == "relay", threads=a.threads)
                r["loadavg"] = os.getloadavg()[0]
                print(json.dumps(r), flush=True)
                if "error" not in r:
                    runs.append(r)
        for mode in a.modes.split(","):
            rows.append((f"{k} {mode}", [r for r in runs if r.get("relay") == (mode == "relay")]))
    print(f"\n# load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"medians of {a.repeat} runs (min-max)")
    print("| K | round s | push p50 / p99 / max ms | decision p99 ms | restart ms | heartbeat s | "
          "host CPU % | host RSS MiB | msgs/agent/round | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, runs in rows:
        print(f"| {k} | {fmt(runs, 'round_s', digits=3)} | {fmt(runs, 'push_p50_ms')} / "
              f"{fmt(runs, 'push_p99_ms')} / {fmt(runs, 'push_max_ms')} | "
              f"{fmt(runs, 'decision_p99_ms')} | {fmt(runs, 'restart_ms')} | "
              f"{fmt(runs, 'heartbeat_s', digits=0)} | "
              f"{fmt(runs, 'host_cpu', 100)} | {fmt(runs, 'host_rss_kib', 1 / 1024)} | "
              f"{fmt(runs, 'msgs_per_agent_round')} | {sum(r['errors'] for r in runs)} |")
    if a.hold or a.floor:
        print("\n| K | floor TCP / UDP: last read ms | push p50 / p99 ms | held push p50 / p99 ms | "
              "host CPU per push ms (less the heartbeats) | restart ms | p99 / floor TCP, UDP | restart / floor TCP, "
              "UDP | relayed / polled / lost | load avg |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for k, runs in rows:
            kk = int(str(k).split()[0])
            ft = med([f.get("last_read_ms") for f in FLOORS.get((kk, 0), [])])
            fu = med([f.get("last_read_ms") for f in FLOORS.get((kk, 1), [])])
            p99, rs = med([r.get("push_p99_ms") for r in runs]), med([r.get("restart_ms") for r in runs])
            ratio = lambda x, f: f"{x / f:.2f}" if x and f else "-"
            print(f"| {k} | {ft or 0:.1f} / {fu or 0:.1f} | {fmt(runs, 'push_p50_ms')} / "
                  f"{fmt(runs, 'push_p99_ms')} | {fmt(runs, 'held_push_p50_ms')} / "
                  f"{fmt(runs, 'held_push_p99_ms')} | {fmt(runs, 'push_host_cpu_ms', digits=2)} "
                  f"({fmt(runs, 'push_host_cpu_net_ms', digits=2)}) | "
                  f"{fmt(runs, 'restart_ms')} | {ratio(p99, ft)}, {ratio(p99, fu)} | "
                  f"{ratio(rs, ft)}, {ratio(rs, fu)} | "
                  f"{sum(r.get('relayed', 0) for r in runs)} / {sum(r.get('polled', 0) for r in runs)}"
                  f" / {sum(r.get('relay_lost', 0) for r in runs)} | "
                  f"{fmt(runs, 'loadavg')} |")
    if a.spares:
        print(f"\nwith {a.spares} spares waiting: host CPU % and RSS MiB, members disturbed")
        for k, runs in rows:
            print(f"| {k} | {fmt(runs, 'spare_cpu', 100)} | {fmt(runs, 'spare_rss_kib', 1 / 1024)}"
                  f" | {max((r['disturbed'] for r in runs), default='-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
