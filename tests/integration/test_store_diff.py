"""The same torch 1.13 client op sequences against torch's own TCPStore server and against
`podrun store` give the same answers; and bad bytes (truncated frames, huge lengths, unknown
opcodes, scanner junk, peers vanishing mid-wait) cost only the connection that sent them."""
import random
import socket
import struct

from conftest import free_port
from store_util import WAIT_BLOCKED, podrun_store, run_torch, torch_store, wait_read_by_peer

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
