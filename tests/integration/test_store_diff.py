"""The same client op sequences of torch 1.13 and of torch 2.15 (both use_libuv values) against
torch's own TCPStore servers (1.13's; 2.15's libuv and classic ones) and against `podrun store`
and an agent's store give the same answers, but for the differences doc/store.md lists; and bad
bytes (truncated frames, huge lengths, unknown opcodes, scanner junk, peers vanishing mid-wait)
cost only the connection that sent them."""
import json
import random
import socket
import struct

import pytest

from cluster import run
from conftest import VENV_PY, free_port
from store_util import (WAIT_BLOCKED, podrun_store, run_torch, torch2_stores, torch_store,
                        wait_read_by_peer)

SEQUENCE = WAIT_BLOCKED + """
import datetime, json, sys, threading, time
import torch.distributed as dist
port = int(sys.argv[1])
T = datetime.timedelta
def client():
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=T(seconds=10))
a, b = client(), client()
r = []
def rec(name, f):
    try:
        v = f()
        if isinstance(v, bytes):
            v = list(v)
        r.append([name, v])
    except Exception as e:
        r.append([name, "error:" + type(e).__name__])
rec("nk0", a.num_keys)
for i in range(20):
    a.set(f"k{i}", bytes(range(i)) + b"\\xff" * (i % 3))
rec("gets", lambda: [list(b.get(f"k{i}")) for i in range(20)])
a.set("empty", b""); a.num_keys()
rec("get_empty", lambda: b.get("empty"))
rec("adds", lambda: [a.add("ctr", d) for d in (1, 10, -100, 2**40, 0)])
rec("ctr_text", lambda: b.get("ctr"))
b.set("stoll", "  12abc"); b.num_keys()   # a SET has no reply: sync before using a
rec("add_stoll", lambda: a.add("stoll", 1))
b.set("neg", "-7"); b.num_keys()
rec("add_neg", lambda: a.add("neg", -1))
rec("cs1", lambda: a.compare_set("cs", "want", "new"))
rec("cs_present_after_lie", lambda: b.num_keys())
rec("cs2", lambda: a.compare_set("cs", "", "first"))
rec("cs3", lambda: b.compare_set("cs", "first", "second"))
rec("cs4", lambda: b.compare_set("cs", "first", "third"))
rec("cs5", lambda: a.compare_set("cs", "second", ""))
rec("cs_get", lambda: b.get("cs"))
rec("nk1", a.num_keys)
rec("del1", lambda: a.delete_key("k0"))
rec("del2", lambda: a.delete_key("k0"))
rec("del_missing", lambda: b.delete_key("never-was"))
rec("nk2", b.num_keys)
rec("wait_present", lambda: a.wait(["k1", "k2", "ctr"]))
rec("wait_timeout", lambda: a.wait(["absent-forever"], T(milliseconds=200)))
rec("after_timeout", lambda: a.add("ctr", 1))
# a wait released by another client, once it waits
waiter = threading.get_native_id()
def later():
    wait_blocked(waiter)
    b.set("released", "yes")
threading.Thread(target=later).start()
rec("wait_released", lambda: a.wait(["released", "k3"], T(seconds=5)))
rec("released", lambda: a.get("released"))
# ADD on text closes that connection on both servers; others carry on
c = client()
c.set("text", "abc")
rec("add_text", lambda: c.add("text", 1))
rec("others_fine", lambda: b.add("ctr", 1))
rec("nk3", b.num_keys)
print(json.dumps(r))
"""


def test_same_answers_as_torch_server(podrun):
    results = {}
    for name, start in (("torch", torch_store), ("podrun", lambda p: podrun_store(podrun, p))):
        srv = start(free_port())
        try:
            results[name] = run_torch(SEQUENCE, srv.port)
        finally:
            srv.stop()
    assert len(results["podrun"]) == len(results["torch"]) > 20
    for mine, theirs in zip(results["podrun"], results["torch"]):
        assert mine == theirs
    # and the sequence really exercised the interesting cases
    d = dict(results["podrun"])
    assert d["add_stoll"] == 13 and d["wait_timeout"].startswith("error")
    assert d["add_text"].startswith("error") and d["cs1"] == list(b"want")


# Every op of torch 2.15's Python TCPStore API. Arguments: targets NAME:PORT:LIBUV:NS (PORT "env":
# MASTER_PORT; LIBUV 1/0: the client's use_libuv; NS: the keys' prefix); prints
# {NAME: [[step, answer], ...]}, or writes it to the file $SEQUENCE_OUT.
SEQUENCE_2X = WAIT_BLOCKED + r'''
import datetime, json, os, socket, struct, sys, threading
import torch.distributed as dist
T = datetime.timedelta


def raw_get(port, key):
    """The value of a key the Python API cannot name (the unprefixed "init/"), or None when it
    does not exist: a 2.x CHECK, then a GET."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    k = struct.pack("<Q", len(key)) + key.encode()

    def recv(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf
    s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE) + b"\x05" + struct.pack("<Q", 1) + k)
    if recv(1) != b"\x00":
        return None
    s.sendall(b"\x03" + k)
    v = recv(struct.unpack("<Q", recv(8))[0])
    s.close()
    return v


def norm(v):
    if isinstance(v, bytes):
        return "bytes:" + v.hex()
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    return v


def sequence(port, libuv, ns):
    """Every op of the 2.x Python TCPStore API; keys live under ns, key counts are told relative
    to the store's at the start, so that a store that holds other keys gives the same answers."""
    def client(**kw):
        kw.setdefault("timeout", T(seconds=10))
        return dist.TCPStore("127.0.0.1", port, is_master=False, use_libuv=libuv, **kw)
    a, b = client(), client()
    r = []

    def outcome(f):
        """What a caller sees: the answer, or the error's type and first line."""
        try:
            return norm(f())
        except Exception as e:
            msg = str(e).replace(str(port), "PORT").splitlines()[0]
            return f"error:{type(e).__name__}:{msg}"

    def rec(name, f):
        r.append([name, outcome(f)])

    base = a.num_keys()
    base_list = set(a.list_keys())
    had_init = raw_get(port, "init/") is not None
    r.append(["base", base])
    K = lambda k: ns + k

    def nkeys(s):
        """Keys made since the start, but for the shared init/ (a store may have had it)."""
        n = s.num_keys() - base
        return n - 1 if not had_init and raw_get(port, "init/") is not None else n

    def keys(s):
        return sorted(set(s.list_keys()) - base_list)

    def short_timeout(s, ms, f):
        s.set_timeout(T(milliseconds=ms))
        try:
            return f()
        finally:
            s.set_timeout(T(seconds=10))

    def released(op, release):
        """op (a blocking call) and release(), called once op waits in the store: what each
        of them saw (release is not called when op ended at once)."""
        tid, done, got = threading.get_native_id(), threading.Event(), []
        def later():
            if wait_blocked(tid, done=done):
                got.append(outcome(release))
        t = threading.Thread(target=later)
        t.start()
        seen = outcome(op)
        done.set()
        t.join()
        return [seen, *got]

    rec("libuv_client", lambda: a.libuvBackend)
    rec("extended_api", a.has_extended_api)
    for i in range(12):
        a.set(K(f"k{i}"), bytes(range(i * 20, i * 20 + i)) + b"\xff" * (i % 3))
    rec("gets", lambda: [b.get(K(f"k{i}")) for i in range(12)])
    a.set(K("empty"), b"")
    a.set(K("ключ"), "значение")
    rec("get_empty", lambda: [b.get(K("empty")), b.get(K("ключ"))])
    big = bytes(range(256)) * (4 << 12)
    a.set(K("big"), big)
    rec("big", lambda: b.get(K("big")) == big)
    rec("adds", lambda: [a.add(K("ctr"), d) for d in (1, 10, -100, 2**40, 0)])
    rec("ctr_text", lambda: b.get(K("ctr")))
    b.set(K("stoll"), "  12abc")
    b.set(K("neg"), "-7")
    b.num_keys()   # SET has no answer: this makes sure b's SETs arrived before a's ADDs
    rec("add_parsed", lambda: [a.add(K("stoll"), 1), a.add(K("neg"), -1)])
    rec("compare_set", lambda: [a.compare_set(K("cs"), "want", "new"), nkeys(b),
                                a.compare_set(K("cs"), "", "first"),
                                b.compare_set(K("cs"), "first", "second"),
                                b.compare_set(K("cs"), "first", "third"),
                                a.compare_set(K("cs"), "second", ""), b.get(K("cs"))])
    rec("num_keys", lambda: nkeys(a))
    rec("delete", lambda: [a.delete_key(K("k0")), a.delete_key(K("k0")),
                           b.delete_key(K("never-was")), nkeys(b)])
    rec("check", lambda: [a.check([K("k1")]), a.check([K("k1"), K("nope")]), a.check([]),
                          a.check([K("empty")]), a.check([K("k0")])])
    rec("wait_present", lambda: a.wait([K("k1"), K("k2"), K("ctr")]))
    rec("wait_no_keys", lambda: a.wait([]))
    rec("wait_timeout", lambda: a.wait([K("absent")], T(milliseconds=200)))
    rec("wait_store_timeout", lambda: short_timeout(a, 250, lambda: a.wait([K("absent")])))
    rec("get_timeout", lambda: short_timeout(a, 250, lambda: a.get(K("absent"))))
    rec("multi_get_timeout",
        lambda: short_timeout(a, 250, lambda: a.multi_get([K("k1"), K("absent")])))
    rec("after_timeouts", lambda: a.add(K("ctr"), 1))
    rec("wait_set", lambda: released(lambda: a.wait([K("r1"), K("k3")], T(seconds=10)),
                                     lambda: b.set(K("r1"), "x")))
    rec("wait_multi_set", lambda: released(lambda: a.wait([K("r2"), K("r3")], T(seconds=10)),
                                           lambda: b.multi_set([K("r2"), K("r3")], ["y", "z"])))
    rec("wait_add", lambda: released(lambda: a.wait([K("r4")], T(seconds=10)),
                                     lambda: b.add(K("r4"), 5)))
    rec("wait_append", lambda: released(lambda: a.wait([K("r5")], T(seconds=10)),
                                        lambda: b.append(K("r5"), "p")))
    rec("get_set", lambda: released(lambda: a.get(K("r6")), lambda: b.set(K("r6"), "late")))
    rec("multi_get_set", lambda: released(lambda: a.multi_get([K("r6"), K("r7")]),
                                          lambda: b.set(K("r7"), "later")))
    rec("wait_deleted", lambda: (b.delete_key(K("r7")),
                                 a.wait([K("r7")], T(milliseconds=200)))[1])
    rec("wait_compare_set", lambda: released(lambda: a.wait([K("r8")], T(seconds=3)),
                                             lambda: b.compare_set(K("r8"), "", "made")))
    rec("wait_failed_compare_set",
        lambda: released(lambda: a.wait([K("r9")], T(seconds=2)),
                         lambda: b.compare_set(K("r9"), "x", "y")))
    rec("append", lambda: [a.append(K("ap"), "po"), a.append(K("ap"), "tato"), b.get(K("ap"))])
    a.set(K("apn"), "12")
    a.append(K("apn"), "3")
    rec("add_after_append", lambda: a.add(K("apn"), 1))
    rec("multi", lambda: [b.multi_set([K("m1"), K("m2"), K("m1")], ["v1", "v2", "v3"]),
                          a.multi_get([K("m1"), K("m2"), K("k1")]), a.multi_get([])])
    rec("list_keys", lambda: keys(a))
    rec("clone", lambda: [a.clone().get(K("k1")), type(a.clone()).__name__])
    # queues, on connections of their own: a server without them drops those only
    q, q2 = client(), client()
    rec("q_push", lambda: [q.queue_push(K("q"), "one"), q.queue_push(K("q"), b"\x00two"),
                           q.queue_push(K("q"), "three")])
    rec("q_len", lambda: [q.queue_len(K("q")), q.queue_len(K("nq"))])
    rec("q_pop", lambda: [q.queue_pop(K("q")), q.queue_pop(K("q"), block=False)])
    rec("q_in_keys", lambda: [q.check([K("q")]), nkeys(q), K("q") in q.list_keys()])
    rec("q_pop_last", lambda: [q.queue_pop(K("q"), block=False), q.queue_len(K("q")),
                               q.check([K("q")])])
    rec("q_pop_empty", lambda: q.queue_pop(K("q"), block=False))
    rec("q_pop_timeout", lambda: short_timeout(q, 300, lambda: q.queue_pop(K("q"))))
    rec("q_pop_pushed", lambda: released(lambda: q.queue_pop(K("q")),
                                         lambda: q2.queue_push(K("q"), "four")))
    # (a client without queues refuses the push: its wait would only time out)
    rec("q_wait_pushed", lambda: released(lambda: q.wait([K("q3")], T(seconds=10)),
                                          lambda: q2.queue_push(K("q3"), "x"))
        if libuv else "no queues")
    def two_poppers():
        """Two blocking pops, then two pushes: each push releases one pop, the oldest first."""
        got, ts = [None, None], []
        for i in range(2):
            s = client()
            def pop(i=i, s=s):
                got[i] = outcome(lambda: s.queue_pop(K("q4")))
            ts.append(threading.Thread(target=pop, daemon=True))
            ts[i].start()
            wait_blocked(ts[i].native_id)
        seen = []
        for i, item in enumerate(("first", "second")):
            q2.queue_push(K("q4"), item)
            ts[i].join(10)   # a bound: the pop this push releases answers at once
            seen.append(list(got))
        return seen
    served = dict(r)["q_len"] == [3, 0]   # a server without queues dropped q's connection
    rec("q_two_poppers", two_poppers if served else lambda: "no queues")
    rec("q_after", lambda: [q.queue_len(K("q3")), nkeys(q)])
    # barriers
    c = client()
    rec("barrier_one", lambda: a.barrier(K("bar1"), 1))
    rec("barrier_timeout", lambda: a.barrier(K("bar2"), 2, T(milliseconds=300)))
    rec("barrier_after_timeout", lambda: a.add(K("ctr"), 1))
    def three():
        res = [None] * 3
        def one(i, s):
            try:
                s.barrier(K("bar3"), 3, T(seconds=10))
                res[i] = "passed"
            except Exception as e:
                res[i] = type(e).__name__
        ts = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate((a, b, c))]
        [t.start() for t in ts]
        [t.join() for t in ts]
        return res
    rec("barrier_three", three)
    rec("barrier_past", lambda: a.barrier(K("bar3"), 3, T(milliseconds=300)))
    rec("barrier_world_0", lambda: a.barrier(K("bar0"), 0, T(milliseconds=300)))
    rec("barrier_waits_for_key",
        lambda: released(lambda: a.wait([K("bar4")], T(milliseconds=500)),
                         lambda: b.barrier(K("bar4"), 2, T(milliseconds=100))))
    rec("barrier_set", lambda: released(lambda: a.barrier(K("bar5"), 2, T(seconds=10)),
                                        lambda: b.set(K("bar5"), "7")))
    rec("barrier_counts", lambda: a.multi_get([K(f"bar{i}") for i in range(6)]))
    d = client()
    d.set(K("btext"), "abc")
    rec("barrier_text", lambda: d.barrier(K("btext"), 2, T(seconds=2)))
    rec("barrier_text_after", lambda: d.num_keys())
    e = client()
    e.set(K("text"), "abc")
    rec("add_text", lambda: e.add(K("text"), 1))
    rec("add_text_after", lambda: e.num_keys())
    rec("others_fine", lambda: [b.add(K("ctr"), 1), a.get(K("btext")), a.get(K("text"))])
    # world_size: every client ADDs the unprefixed init/; is_master where the port is served
    init0 = int(raw_get(port, "init/") or 0)
    w = [client(world_size=3) for _ in range(2)]
    rec("init_clients", lambda: int(raw_get(port, "init/")) - init0)
    saved = {v: os.environ.pop(v, None) for v in ("TORCHELASTIC_USE_AGENT_STORE", "MASTER_PORT")}
    try:
        rec("master_taken", lambda: dist.TCPStore(
            "127.0.0.1", port, world_size=3, is_master=True, timeout=T(seconds=2),
            use_libuv=libuv).num_keys())
        os.environ.update(TORCHELASTIC_USE_AGENT_STORE="True", MASTER_PORT=str(port))
        rec("master_agent_store", lambda: nkeys(dist.TCPStore(
            "127.0.0.1", port, world_size=3, is_master=True, timeout=T(seconds=10),
            use_libuv=libuv)))
    finally:
        for v, val in saved.items():
            os.environ.pop(v, None)
            if val is not None:
                os.environ[v] = val
    rec("init_master", lambda: int(raw_get(port, "init/")) - init0)
    rec("num_keys_end", lambda: nkeys(a))
    rec("list_keys_end", lambda: keys(b))
    return r


out = {}
for target in sys.argv[1:]:
    name, port, libuv, ns = target.split(":")
    port = int(os.environ["MASTER_PORT"]) if port == "env" else int(port)
    out[name] = sequence(port, libuv == "1", ns)
if os.environ.get("SEQUENCE_OUT"):
    with open(os.environ["SEQUENCE_OUT"], "w") as f:
        json.dump(out, f)
else:
    print(json.dumps(out))
'''

# Where podrun answers a torch 2.15 client otherwise than torch 2.15's own server does, on
# purpose (doc/store.md, "Where torch's servers disagree"), by server kind.
DELIBERATE = {
    # libuv's COMPARE_SET releases a WAIT on a key it did not create (the key still missing)
    "libuv": {"wait_failed_compare_set"},
    # the classic server's COMPARE_SET that creates a key does not release its waiters
    "classic": {"wait_compare_set"},
}


def steps_differing(mine, theirs, skip=()):
    assert [n for n, _ in mine] == [n for n, _ in theirs]
    return {n: (a, b) for (n, a), (_, b) in zip(mine, theirs) if a != b and n not in skip}


def test_same_answers_as_torch_215_servers(podrun):
    specs = [(free_port(), kind) for kind in ("libuv", "libuv", "classic", "classic")]
    theirs = torch2_stores(specs)
    ours = [podrun_store(podrun, free_port()) for _ in range(2)]
    try:
        targets = [f"{kind}{lib}:{p}:{lib}:" for (p, kind), lib in zip(specs, (1, 0, 1, 0))]
        targets += [f"podrun{lib}:{s.port}:{lib}:" for s, lib in zip(ours, (1, 0))]
        out = run_torch(SEQUENCE_2X, *targets, python=VENV_PY)
    finally:
        theirs.stop()
        rcs = [s.stop() for s in ours]
    # a clean exit (and under the sanitizers, nothing they saw); the two connections dropped on
    # purpose (ADD and BARRIER on text) said so, each in its one line
    assert rcs == [0, 0], [s.stderr for s in ours]
    for s in ours:
        assert s.stderr.count("closing connection") == 2, s.stderr
    for lib in (1, 0):
        mine = out[f"podrun{lib}"]
        for kind, deliberate in DELIBERATE.items():
            # queues are an unknown request to the classic server: it drops that connection
            # (and when the client learns it is a race); podrun serves them as libuv does
            skip = {n for n, _ in mine if n.startswith("q_")} if kind == "classic" and lib else ()
            differ = steps_differing(mine, out[f"{kind}{lib}"], skip)
            assert set(differ) == deliberate, (kind, lib, differ)
    assert dict(out["classic1"])["q_len"].startswith("error:DistNetworkError")
    d = dict(out["podrun1"])
    # the sequence reached what it is for, on podrun too
    assert d["barrier_three"] == ["passed"] * 3 and d["barrier_one"] is None
    assert d["barrier_timeout"] == "error:DistStoreError:barrier timeout after 300ms, key: bar2"
    assert d["barrier_counts"] == ["bytes:" + c.encode().hex() for c in "111417"]
    assert d["barrier_waits_for_key"][0].startswith("error:DistStoreError:wait timeout")
    assert d["q_pop_pushed"] == ["bytes:" + b"four".hex(), None]
    first, second = "bytes:" + b"first".hex(), "bytes:" + b"second".hex()
    assert d["q_two_poppers"] == [[first, None], [first, second]]
    assert d["wait_failed_compare_set"][0].startswith("error:DistStoreError:wait timeout")
    assert d["init_clients"] == 2 and d["init_master"] == 3
    assert d["add_text"].startswith("error:DistNetworkError")


@pytest.mark.parametrize("backend", ["c10d", "static"])
def test_agent_store_answers_as_podrun_store(podrun, tmp_path, backend):
    """A torch 2.15 worker runs the sequence against its agent's store (MASTER_ADDR:MASTER_PORT,
    which also holds podrun's own keys) and against a fresh `podrun store`: the same answers."""
    seq = tmp_path / "sequence.py"
    seq.write_text(SEQUENCE_2X)
    port = free_port()
    rdzv = {"c10d": ["--rdzv-endpoint", f"127.0.0.1:{port}"],
            "static": ["--master-addr", "127.0.0.1", "--master-port", str(port), "--node-rank",
                       "0"]}[backend]
    ref = [podrun_store(podrun, free_port()) for _ in range(2)]
    try:
        r = run(podrun, "--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", backend,
                *rdzv, "--python", VENV_PY, str(seq),
                "agent1:env:1:u1/", "agent0:env:0:u0/",
                f"store1:{ref[0].port}:1:u1/", f"store0:{ref[1].port}:0:u0/",
                env={"SEQUENCE_OUT": str(tmp_path / "out.json")}, timeout=300)
    finally:
        for s in ref:
            s.stop()
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    for lib in (1, 0):
        agent, store = out[f"agent{lib}"], out[f"store{lib}"]
        assert dict(store)["base"] == 0
        differ = steps_differing(agent, store)
        assert differ.keys() == {"base"}, differ


def recv_exact(s, n, timeout=2.0):
    s.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def closed_by_server(s, timeout=3.0):
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def u64(v):
    return struct.pack("<Q", v)


def vec(b):
    return u64(len(b)) + b


V2 = b"\x00\xce\xf7\x85\x3c"
JUNK = {
    "http": b"GET / HTTP/1.0\r\n\r\n",
    "rtsp": b"OPTIONS / RTSP/1.0\r\n\r\n",
    "tls": bytes.fromhex("16030100c4010000c00303") + bytes(32),
    "ssh": b"SSH-2.0-OpenSSH_8.9\r\n",
    "nulls_then_huge": b"\x00" + u64(2**63) + b"xx",
    "v1_huge_key": b"\x02" + u64(1 << 40),
    "v1_huge_value": b"\x00" + vec(b"/k") + u64(1 << 33),
    "v1_too_many_keys": b"\x05" + u64(10**9),
    "v1_unknown_op": b"\x42" + vec(b"x"),
    "v2_unknown_op": V2 + b"\x7f",
    "v2_bad_magic": b"\x00\xce\xf7\x85\x3c\x00\xde\xad\xbe\xef",
    "v2_huge_multiset": V2 + b"\x0b" + u64(2**62),
}


def test_bad_bytes_cost_only_their_connection(store):
    port = store.port
    # a healthy torch client, mid-wait, and a raw 1.13 waiter, throughout
    good = socket.create_connection(("127.0.0.1", port))
    good.sendall(b"\x05" + u64(1) + vec(b"/release"))          # 1.13 WAIT
    for name, payload in JUNK.items():
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(payload)
        assert closed_by_server(s), name
        s.close()
    # truncated frames, then the peer goes away
    for cut in (1, 5, 9, 12):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall((b"\x00" + vec(b"/trunc") + vec(b"value"))[:cut])
        s.close()
    # a peer that vanishes mid-wait
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"\x05" + u64(1) + vec(b"/release"))
    wait_read_by_peer(s)   # the store has the WAIT
    s.close()
    # random garbage from many connections at once
    rng = random.Random(1234)
    socks = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
        socks.append(s)
    for s in socks:
        s.close()
    # the store still serves: real torch client works, the raw waiter is released exactly once
    out = run_torch("""
        import json, sys
        import torch.distributed as dist
        s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False)
        s.set("release", "now")
        print(json.dumps([s.add("n", 2), s.get("release").decode()]))
    """, port)
    assert out == [2, "now"]
    assert recv_exact(good, 1) == b"\x00"
    good.sendall(b"\x06")                                       # 1.13 GETNUMKEYS
    assert struct.unpack("<q", recv_exact(good, 8))[0] == 2
    good.close()
    rc = store.stop()
    assert rc == 0
    # one line per connection dropped for bad input; peers that just left are not logged
    dropped = [l for l in store.stderr.splitlines() if "closing connection" in l]
    assert len(dropped) >= len(JUNK)
    assert all(l.startswith("podrun store: closing connection") for l in dropped)
    assert not any("/trunc" in l for l in dropped)


def test_limits_flags(podrun, port):
    s = podrun_store(podrun, port, "--max-key-len", "16", "--max-value-len", "1K",
                     "--max-connections", "4")
    try:
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"\x00" + vec(b"/" + b"k" * 20) + vec(b"v"))
        assert closed_by_server(c)
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"\x00" + vec(b"/k") + vec(b"v" * 2000))
        assert closed_by_server(c)
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        extra = socket.create_connection(("127.0.0.1", port))
        assert closed_by_server(extra)
        conns[0].sendall(b"\x00" + vec(b"/k") + vec(b"v" * 1024) + b"\x06")
        assert struct.unpack("<q", recv_exact(conns[0], 8))[0] == 1
    finally:
        assert s.stop() == 0
    assert "refusing more" in s.stderr
