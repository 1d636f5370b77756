"""`podrun store` against real torch 1.13 TCPStore clients: every op the 1.13 client has, many
clients at once, waits that time out and then succeed, gloo init_process_group + all_reduce
through it, the shell client, flags, and clean stops on SIGTERM / SIGINT; and as the rendezvous
store of torchrun 2.15 agents, through a restart. (torch 2.15's client: test_store_diff.py.)"""
import os
import re
import signal
import subprocess
import textwrap

import pytest

from cluster import killed_on_failure, wait_for, worker
from conftest import TORCH_PY, VENV_BIN
from store_util import WAIT_BLOCKED, podrun_store, run_torch


def test_every_13_client_op(store):
    out = run_torch("""
        import datetime, json, sys
        import torch.distributed as dist
        s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False,
                          timeout=datetime.timedelta(seconds=10))
        r = {}
        s.set("k", "v1"); r["get"] = s.get("k").decode()
        s.set("k", b"\\x00bin\\xff"); r["bin"] = list(s.get("k"))
        r["add"] = [s.add("c", 5), s.add("c", -2), s.add("c", 0)]
        r["add_text"] = s.get("c").decode()
        r["cs_missing_expected"] = s.compare_set("cs", "x", "y").decode()
        r["cs_create"] = s.compare_set("cs", "", "y").decode()
        r["cs_swap"] = s.compare_set("cs", "y", "z").decode()
        r["cs_mismatch"] = s.compare_set("cs", "nope", "w").decode()
        r["num_keys"] = s.num_keys()
        r["del"] = [s.delete_key("k"), s.delete_key("k")]
        r["num_keys_after"] = s.num_keys()
        s.wait(["c", "cs"])
        s.wait(["c"], datetime.timedelta(seconds=1))
        s.set_timeout(datetime.timedelta(seconds=5))
        big = b"x" * (4 << 20)
        s.set("big", big); r["big"] = s.get("big") == big
        print(json.dumps(r))
    """, store.port)
    assert out == {
        "get": "v1", "bin": [0, 98, 105, 110, 255], "add": [5, 3, 3], "add_text": "3",
        "cs_missing_expected": "x", "cs_create": "y", "cs_swap": "z", "cs_mismatch": "z",
        "num_keys": 3, "del": [True, False], "num_keys_after": 2, "big": True,
    }


def test_world_size_and_many_clients(store):
    """64 TCPStore objects (128 connections) in threads: ADD init/, counters, waits."""
    out = run_torch("""
        import datetime, json, sys, threading
        import torch.distributed as dist
        port, n = int(sys.argv[1]), 64
        t = datetime.timedelta(seconds=20)
        results = [None] * n
        def worker(i):
            s = dist.TCPStore("127.0.0.1", port, world_size=n, is_master=False, timeout=t)
            got = s.add("counter", 1)
            if got == n:
                s.set("go", "now")
            s.wait(["go"])
            s.set(f"rank{i}", str(i))
            s.wait([f"rank{(i + 1) % n}"])
            results[i] = (s.get("go").decode(), int(s.get(f"rank{(i + 1) % n}")))
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        [x.start() for x in ts]; [x.join() for x in ts]
        c = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=t)
        # keys: the unprefixed "init/" every client ADDed to, /counter, /go, /rank0../rank63
        print(json.dumps({"results": results, "keys": c.num_keys(),
                          "counter": c.get("counter").decode()}))
    """, store.port)
    assert out["keys"] == 67 and out["counter"] == "64"
    assert out["results"] == [["now", (i + 1) % 64] for i in range(64)]


def test_wait_times_out_then_succeeds(store):
    out = run_torch(WAIT_BLOCKED + textwrap.dedent("""
        import datetime, json, sys, threading, time
        import torch.distributed as dist
        port = int(sys.argv[1])
        s = dist.TCPStore("127.0.0.1", port, is_master=False,
                          timeout=datetime.timedelta(seconds=10))
        r = {}
        t0 = time.time()
        try:
            s.wait(["late"], datetime.timedelta(milliseconds=300))
            r["first"] = "no timeout"
        except RuntimeError as e:
            r["first"] = "timeout"
        r["waited_s"] = round(time.time() - t0, 1)
        # a second wait on the same connection, satisfied by another client once it waits
        waiter = threading.get_native_id()
        def setter():
            wait_blocked(waiter)
            o = dist.TCPStore("127.0.0.1", port, is_master=False)
            o.set("late", "here")
        threading.Thread(target=setter).start()
        s.wait(["late"], datetime.timedelta(seconds=5))
        r["value"] = s.get("late").decode()
        r["after"] = s.add("n", 1)   # the connection is still in sync
        print(json.dumps(r))
    """), store.port)
    # the wait's own 300 ms ended it, not the connection's 10 s
    assert out["first"] == "timeout" and 0.2 <= out["waited_s"] < 10
    assert out["value"] == "here" and out["after"] == 1


GLOO = """
import datetime, json, sys
import torch, torch.distributed as dist
port, rank, world = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=120))
dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120))
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
dist.barrier()
print(json.dumps({"rank": rank, "sum": t.item()}))
"""


def test_gloo_all_reduce_through_store(store):
    world = 3
    procs = [subprocess.Popen([TORCH_PY, "-c", GLOO, str(store.port), str(r), str(world)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    for r, p in enumerate(procs):   # bounds, not expected times: each imports torch
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        assert f'"sum": {float(sum(range(1, world + 1)))}' in out


def test_shell_client(podrun, store):
    addr = f"127.0.0.1:{store.port}"

    def run(*args, rc=0):
        p = subprocess.run([podrun, "store", *args], capture_output=True, text=True, timeout=20)
        assert p.returncode == rc, (args, p.stdout, p.stderr)
        return p.stdout

    run("set", addr, "/k", "hello")
    assert run("get", addr, "/k") == "hello\n"
    assert run("add", addr, "/n", "5") == "5\n"
    assert run("add", addr, "/n") == "6\n"
    assert run("keys", addr) == "2\n"
    assert run("ping", addr) == "ok\n"
    assert run("delete", addr, "/k") == "1\n"
    assert run("delete", addr, "/k") == "0\n"
    run("wait", addr, "/n")
    run("--timeout", "1", "wait", addr, "/never", rc=1)
    # the shell client (2.x dialect) and a 1.13 client see the same keys
    out = run_torch("""
        import json, sys
        import torch.distributed as dist
        s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False)
        s.set("from13", "x")   # wire key "/from13"
        print(json.dumps(s.get("n").decode()))
    """, store.port)
    assert out == "6"
    assert run("get", addr, "/from13") == "x\n"


@pytest.mark.parametrize("args", [
    ["--port", "notaport"], ["--port", "70000"], ["--bogus"], ["--max-key-len", "0"],
    ["--max-value-len", "12Q"], ["--port"], ["frobnicate", "127.0.0.1:1"],
    ["get", "nocolon", "k"], ["get", "127.0.0.1:5"], ["--timeout", "2147484", "ping", "127.0.0.1:1"],
    ["--max-pending-bytes", "0"],
])
def test_bad_flags(podrun, args):
    p = subprocess.run([podrun, "store", *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("podrun store: ")


def test_help(podrun):
    p = subprocess.run([podrun, "store", "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and "--max-total-bytes" in p.stdout and "wait ADDR" in p.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(podrun, port, sig):
    s = podrun_store(podrun, port)
    # with clients connected, one of them in a wait
    waiter = subprocess.Popen([TORCH_PY, "-c", """
import datetime, sys
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False)
s.set("x", "1")
print("waiting", flush=True)
try:
    s.wait(["never"], datetime.timedelta(seconds=30))
except RuntimeError:
    print("lost", flush=True)
""", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert waiter.stdout.readline().strip() == "waiting"
    rc = s.stop(sig)
    assert rc == 0
    assert f"podrun store: listening on 127.0.0.1:{port}" in s.stderr
    out, _ = waiter.communicate(timeout=20)
    assert "lost" in out   # the waiting client learns at once, not after its timeout


def test_port_in_use(podrun, store):
    p = subprocess.run([podrun, "store", "--host", "127.0.0.1", "--port", str(store.port)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and "cannot listen" in p.stderr


def _v2_conn(port, rcvbuf=None):
    import socket
    import struct
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))   # 2.x VALIDATE
    return s


def _v2_str(b):
    import struct
    return struct.pack("<Q", len(b)) + b


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def _closed_by_server(s, timeout=10):
    """True once the server closed s; whatever it sent first is read and dropped."""
    s.settimeout(timeout)
    try:
        while s.recv(1 << 20):
            pass
        return True
    except ConnectionResetError:
        return True
    except OSError:
        return False


def _ping(s, n):
    import struct
    s.sendall(b"\x0d" + struct.pack("<I", n))
    return struct.unpack("<I", s.recv(4))[0] == n


def test_unread_replies_are_bounded(podrun, port):
    """A client that asks for far more than it sends (MULTI_GET of one 8 MiB value many times)
    and does not read is disconnected before the server holds its answer; so is one that would
    pass --max-pending-bytes with replies it leaves unread; everyone else is served on."""
    import struct
    s = podrun_store(podrun, port, "--max-pending-bytes", "64M")
    try:
        a = _v2_conn(port)
        a.sendall(b"\x01" + _v2_str(b"big") + _v2_str(b"x" * (8 << 20)))   # SET
        assert _ping(a, 7)
        base = _rss_kib(s.proc.pid)
        # 120 x 8 MiB asked for in one request: refused while it is built
        for _ in range(2):
            b = _v2_conn(port, rcvbuf=4096)
            b.sendall(b"\x0a" + struct.pack("<Q", 120) + _v2_str(b"big") * 120)
            assert _closed_by_server(b)
            assert _ping(a, 9)
        # 5 x 8 MiB fits one connection; two of them unread do not fit 64 MiB
        c1 = _v2_conn(port, rcvbuf=4096)
        c1.sendall(b"\x0a" + struct.pack("<Q", 5) + _v2_str(b"big") * 5)
        assert _ping(a, 10)
        c2 = _v2_conn(port, rcvbuf=4096)
        c2.sendall(b"\x0a" + struct.pack("<Q", 5) + _v2_str(b"big") * 5)
        assert _closed_by_server(c2)
        assert _ping(a, 11)
        # unbounded, one such request alone costs the server about 2 GiB (the answer built, then
        # queued); the margin leaves room for a sanitizer's quarantine of freed memory
        assert _rss_kib(s.proc.pid) - base < 600 * 1024
        c1.close()
        assert _ping(a, 12)
        a.close()
    finally:
        s.stop()
    assert s.stderr.count("a client must read its replies") == 3


class Torchrun:
    """A torchrun 2.15 agent, its output in files; killed_on_failure stops its session."""

    def __init__(self, args, env, out):
        self.out = out
        with open(out, "w") as f:
            self.proc = subprocess.Popen([str(VENV_BIN / "torchrun"), *args], env=env,
                                         stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def text(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_torchrun_215_c10d_rendezvous_with_a_restart(podrun, port, tmp_path):
    """Three torchrun 2.15 agents (127.0.0.2-4) rendezvous through `podrun store` with torch's
    own c10d handler (its COMPARE_SET state, MULTI_GET/MULTI_SET of role infos, exit barrier);
    rank 2 fails once, its agent restarts and the others follow into the next round."""
    store = podrun_store(podrun, port)
    done = tmp_path / "done"
    env = dict(os.environ, FAIL_RANK="2", FAIL_AFTER="0", FAIL_AFTER_ALL="1",
               STARTED_DIR=str(tmp_path), DONE_FILE=str(done))
    env.pop("OMP_NUM_THREADS", None)
    agents = [Torchrun(["--nnodes", "3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "tr215",
                        "--local-addr", f"127.0.0.{2 + i}", "--max-restarts", "1",
                        "--no-python", worker("fail.sh")], env, tmp_path / f"agent{i}.log")
              for i in range(3)]
    starts = lambda: [m for a in agents
                      for m in re.findall(r"^start rank=(\d) restart=(\d) world=(\d)$",
                                          a.text(), re.M)]
    try:
        with killed_on_failure(agents):
            # bounds, not expected times: each agent imports torch, and a round may take the
            # c10d handler's 1 s syncs a few times over
            wait_for(lambda: len(starts()) >= 6, 240, lambda: f"two rounds of workers: {starts()}")
            done.touch()
            rcs = [a.proc.wait(timeout=120) for a in agents]
    finally:
        store.stop()
    logs = "\n".join(a.text() for a in agents)
    assert rcs == [0, 0, 0], logs[-4000:]
    got = sorted(starts())
    # round 1: ranks 0-2, restart 0; rank 2 fails; round 2: the same ranks, and the restart count
    # is each agent's own (torchrun counts restarts per agent: the others followed a
    # membership change, which costs no restart)
    assert got == sorted([("0", "0", "3"), ("1", "0", "3"), ("2", "0", "3"),
                          ("0", "0", "3"), ("1", "0", "3"), ("2", "1", "3")]), logs[-4000:]
    assert sorted(re.findall(r"^done rank=(\d) restart=(\d) world=3$", logs, re.M)) == \
        [("0", "0"), ("1", "0"), ("2", "1")]
    assert "rank 2 failing on purpose" in logs
    assert "closing connection" not in store.stderr
