"""--health-check-interval: while the workers run, each agent checks its GPUs through NVML (here
the fake libnvidia-ml, whose health answers come from a file the test rewrites mid-run:
tests/fakes/fake_nvml.c) and the links NCCL was told to use through sysfs (a fixture tree,
tests/fixtures/mkmachine, whose port state and operstate files the test rewrites). A bad GPU or
link is that node's failure, pushed to every agent at once; under --nnodes MIN:MAX the node
takes itself out and the job goes on."""
import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from cluster import Agent, killed_on_failure, wait_all, wait_for
from conftest import BUILD, PODRUN
from etcd_util import Etcd

MKMACHINE = str(BUILD / "tests" / "fixtures" / "mkmachine")
FAKES = str(BUILD / "tests" / "fakes")
GPU3 = "GPU-2a3b4c5d..."   # the UUID, cut to what tells GPUs apart
# runs until stopped in the first round of 3 nodes; any later round finishes at once
WORKER = ('echo "up world=$GROUP_WORLD_SIZE"; '
          'if [ "$GROUP_WORLD_SIZE" = "$HOLD_WORLD" ]; then exec sleep 300; fi; echo finished')
INTERVAL = "100ms"


class Node:
    """One agent's machine: a fixture tree, its NVML files and the worker's done flag."""

    def __init__(self, tmp_path, i):
        self.root = tmp_path / f"machine{i}"
        self.root.mkdir()
        subprocess.run([MKMACHINE, str(self.root), "--no-mig", "--dev-infiniband"], check=True)
        (self.root / "sys/class/net/eth1").mkdir(parents=True)
        (self.root / "sys/class/net/eth1/operstate").write_text("up\n")
        self.health = self.root / "health.conf"
        self.health.write_text("")
        self.term = self.root / "termination-log"

    def env(self):
        return {"PODRUN_SYSROOT": str(self.root), "PODRUN_FAKE_NVML": str(self.root / "nvml.conf"),
                "PODRUN_FAKE_NVML_HEALTH": str(self.health),
                "PODRUN_FAKE_IBVERBS": str(self.root / "verbs.conf"), "LD_LIBRARY_PATH": FAKES,
                "NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "=eth1",
                "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}

    def write(self, rel, text):
        """Rewrites a file as the kernel or the driver would: in one go."""
        tmp = self.root / (rel + ".new")
        tmp.write_text(text)
        os.replace(tmp, self.root / rel)


def start(tmp_path, port, n, nnodes=None, hold=None, extra=(), worker=WORKER, env_add=None,
          rdzv=None):
    """n agents on fixture machines; rdzv: the rendezvous flags (c10d at 127.0.0.2:port)."""
    nodes = [Node(tmp_path, i) for i in range(n)]
    agents = []
    rdzv = rdzv or ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.2:{port}",
                    "--rdzv-id", "hc"]
    for i, node in enumerate(nodes):
        env = dict(node.env(), **(env_add or {}))
        env["HOLD_WORLD"] = str(hold or n)
        args = ["--nnodes", str(nnodes or n), "--nproc-per-node", "1", *rdzv,
                "--local-addr", f"127.0.0.{2 + i}", "--health-check-interval", INTERVAL,
                "--termination-log", str(node.term), *extra, "--no-python", "sh", "-c", worker]
        agents.append(Agent(args, env=env, name=f"node{i}"))
    return nodes, agents


def wait_running(agents):
    for a in agents:
        wait_for(lambda a=a: "up world=" in a.out_now() or a.proc.poll() is not None, 60,
                 f"{a.name}'s worker to run")
        assert a.proc.poll() is None, a.err_now()


def check_named_everywhere(nodes, agents, what):
    for node, a in zip(nodes, agents):
        assert what in a.err, (a.name, a.err)
        assert what in node.term.read_text(), (a.name, node.term.read_text())


def test_xid_stops_every_agent_and_names_the_gpu(tmp_path, port):
    nodes, agents = start(tmp_path, port, 3)
    with killed_on_failure(agents):
        wait_running(agents)
        nodes[1].write("health.conf", "xid gpu=3 xid=79\n")
        codes = wait_all(agents, timeout=60)
    assert codes == [171, 175, 171], [a.err for a in agents]
    what = f"GPU 3 ({GPU3}): Xid 79, fallen off the bus"
    check_named_everywhere(nodes, agents, what)
    assert "this node failed its health check: " + what in agents[1].err
    assert "finished" not in "".join(a.out for a in agents)


def test_port_down_stops_every_agent(tmp_path, port):
    nodes, agents = start(tmp_path, port, 2)
    with killed_on_failure(agents):
        wait_running(agents)
        nodes[1].write("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n")
        codes = wait_all(agents, timeout=60)
    assert codes == [171, 175], [a.err for a in agents]
    check_named_everywhere(nodes, agents, "mlx5_0 port 1: DOWN (was ACTIVE)")


def test_interface_down_stops_every_agent(tmp_path, port):
    nodes, agents = start(tmp_path, port, 2)
    with killed_on_failure(agents):
        wait_running(agents)
        nodes[0].write("sys/class/net/eth1/operstate", "down\n")
        codes = wait_all(agents, timeout=60)
    assert codes == [175, 171], [a.err for a in agents]
    check_named_everywhere(nodes, agents, "interface eth1 (NCCL_SOCKET_IFNAME): down (was up)")


def metrics(a):
    m = re.search(r"serving /healthz and /metrics on port (\d+)", a.err_now())
    if not m:
        return {}
    with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {k: float(v) for k, v in re.findall(r"^(podrun_health_check\w*) (\S+)$", text, re.M)}


def healthz(a):
    m = re.search(r"serving /healthz and /metrics on port (\d+)", a.err_now())
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/healthz", timeout=5) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:   # 503 while stopping
        return e.read().decode()


def test_healthy_nodes_run_on_and_the_checks_are_metrics(tmp_path, port):
    done = tmp_path / "done"
    worker = f'echo "up world=$GROUP_WORLD_SIZE"; while [ ! -e {done} ]; do sleep 0.05; done'
    nodes, agents = start(tmp_path, port, 2, extra=["--health-port", "0"], worker=worker)
    with killed_on_failure(agents):
        wait_running(agents)
        for a in agents:   # several checks pass on every node
            wait_for(lambda a=a: metrics(a).get("podrun_health_checks_total", 0) >= 5, 30,
                     f"{a.name}'s checks")
            m = metrics(a)
            assert m["podrun_health_check_ok"] == 1 and m["podrun_health_check_failures_total"] == 0
            assert m["podrun_health_check_last_time_seconds"] > 0
        done.write_text("")
        codes = wait_all(agents, timeout=60)
    assert codes == [0, 0], [a.err for a in agents]
    for a in agents:
        assert "health check" not in a.err


def test_a_node_whose_workers_are_done_checks_no_more(tmp_path, port):
    """node-0's worker exits 0 while node-1's runs on: node-0 has nothing left to check, so an Xid
    on it afterwards is neither checked nor counted, and the job finishes."""
    done = tmp_path / "done"
    worker = (f'echo "up world=$GROUP_WORLD_SIZE"; [ "$GROUP_RANK" = 0 ] && exit 0; '
              f'while [ ! -e {done} ]; do sleep 0.05; done')
    nodes, agents = start(tmp_path, port, 2, extra=["--health-port", "0"], worker=worker)
    with killed_on_failure(agents):
        wait_running(agents)
        # node-0's worker is gone: its agent waits for the job to finish
        wait_for(lambda: "waiting for the job" in healthz(agents[0]), 30, "node-0 done")
        before = metrics(agents[0])["podrun_health_checks_total"]
        nodes[0].write("health.conf", "xid gpu=3 xid=79\n")
        ran = metrics(agents[1])["podrun_health_checks_total"]
        # node-1's checks are the clock: ten more of its intervals
        wait_for(lambda: metrics(agents[1])["podrun_health_checks_total"] >= ran + 10, 30,
                 "node-1's checks")
        m = metrics(agents[0])
        assert m["podrun_health_checks_total"] == before, m
        assert m["podrun_health_check_failures_total"] == 0, m
        done.write_text("")
        codes = wait_all(agents, timeout=60)
    assert codes == [0, 0], [a.err for a in agents]
    assert "Xid" not in agents[0].err, agents[0].err


def test_min_max_takes_the_node_out_and_the_job_goes_on(tmp_path, port):
    nodes, agents = start(tmp_path, port, 3, nnodes="2:3", hold=3,
                          extra=["--rdzv-conf", "last_call_timeout=1"])
    with killed_on_failure(agents):
        wait_running(agents)
        nodes[2].write("health.conf", "ecc gpu=5 count=1\n")
        codes = wait_all(agents, timeout=90)
    assert codes == [0, 0, 175], [a.err for a in agents]
    what = "GPU 5 (GPU-4d5e6f70...): 1 new uncorrectable ECC error (1 in all)"
    assert "health check: this node takes itself out of the job" in agents[2].err
    assert what in nodes[2].term.read_text()
    for a in agents[:2]:
        assert what in a.err, a.err
        assert "up world=2" in a.out and "finished" in a.out, a.out


def where(port):
    """podrun status's words for the job: a store's address, or an etcd job's flags."""
    return port if isinstance(port, list) else [f"127.0.0.2:{port}"]


def status_json(port):
    """The job's one object from `podrun status --json`, or None while it has no state yet."""
    r = subprocess.run([PODRUN, "status", "--json", *where(port)], capture_output=True,
                       text=True, timeout=30)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    return json.loads(lines[0]) if r.returncode in (0, 1) and lines else None


def status_text(port):
    r = subprocess.run([PODRUN, "status", *where(port)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode in (0, 1), r.stderr   # 1: the job ended (after a failure)
    return r.stdout


def node_rows(text):
    """{node address: its row} of the text table."""
    return {row.split()[4]: row for row in text.splitlines() if re.match(r"^  \d ", row)}


# holds until the test releases it, also through the SIGTERM of the stop: the agents stay up
# (and the job store with them) while the test reads `podrun status` after the failure
HOLDING = ('echo "up world=$GROUP_WORLD_SIZE"; '
           'trap \'while [ ! -e "$RELEASE" ]; do sleep 0.05; done; exit 0\' TERM; '
           'while [ ! -e "$RELEASE" ]; do sleep 0.05; done')


@pytest.mark.parametrize("backend", ["c10d", "etcd"])
def test_status_shows_each_nodes_last_check_and_then_the_failure(tmp_path, port, backend):
    release = tmp_path / "release"
    etcd = Etcd(1) if backend == "etcd" else None
    if etcd:   # the same, read from etcd (the agents' flags), with the etcd job's own id
        rdzv = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id",
                f"hc-{os.getpid()}-{port}"]
        port = rdzv[:]
    try:
        check_status(tmp_path, port, release, rdzv if etcd else None)
    finally:
        if etcd:
            etcd.stop()


def check_status(tmp_path, port, release, rdzv):
    env = {"RELEASE": str(release), **({"PODRUN_MASTER_PORT": ""} if rdzv else {})}
    nodes, agents = start(tmp_path, port, 2, worker=HOLDING, env_add=env, rdzv=rdzv)
    addrs = ["127.0.0.2", "127.0.0.3"]
    with killed_on_failure(agents):
        wait_running(agents)

        def all_ok():
            j = status_json(port)
            hs = [n["health_check"] for n in j["nodes"]] if j else []
            return len(hs) == 2 and all(h and h["state"] == "ok" for h in hs) and j
        job = wait_for(all_ok, 30, "both nodes' checks ok in podrun status")
        for n in job["nodes"]:
            h = n["health_check"]
            assert h["interval"] == 0.1 and h["why"] == "", h
            assert 0 <= job["time"] - h["last_check"] < 10, (job["time"], h)
        first = {n["addr"]: n["health_check"]["last_check"] for n in job["nodes"]}
        # the time of the last check moves on while nothing changes (heartbeats carry it; on
        # etcd, a put every 10 keep-alive intervals)
        wait_for(lambda: (j := status_json(port)) and all(
            n["health_check"]["last_check"] > first[n["addr"]] for n in j["nodes"]), 45,
            "a later check in podrun status")
        rows = node_rows(status_text(port))
        assert sorted(rows) == addrs
        for row in rows.values():
            assert re.search(r"running .* ago +ok, [\d.]+s ago$", row), row

        nodes[1].write("health.conf", "xid gpu=3 xid=79\n")
        what = f"GPU 3 ({GPU3}): Xid 79, fallen off the bus"

        def failed_named():
            t = status_text(port)
            return "FAILED" in node_rows(t).get(addrs[1], "") and t
        text = wait_for(failed_named, 30, "node1's failed check in podrun status")
        rows = node_rows(text)
        assert re.search(r"FAILED, [\d.]+s ago$", rows[addrs[1]]), text
        assert re.search(r" ok, [\d.]+s ago$", rows[addrs[0]]), text
        assert re.search(r"^      health check on \S+: " + re.escape(what) + "$", text, re.M), text
        job = status_json(port)
        h = {n["addr"]: n["health_check"] for n in job["nodes"]}
        assert h[addrs[1]]["state"] == "failed" and h[addrs[1]]["why"] == what, h
        assert h[addrs[0]]["state"] == "ok", h
        release.write_text("")
        codes = wait_all(agents, timeout=60)
    assert codes == [171, 175], [a.err for a in agents]


def test_status_says_where_checking_is_off(tmp_path, port):
    release = tmp_path / "release"
    nodes = [Node(tmp_path, i) for i in range(2)]
    agents = []
    for i, node in enumerate(nodes):
        env = dict(node.env(), RELEASE=str(release))
        args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.2:{port}", "--rdzv-id", "hc",
                "--local-addr", f"127.0.0.{2 + i}",
                "--health-check-interval", "0" if i == 0 else INTERVAL,
                "--no-python", "sh", "-c", HOLDING]
        agents.append(Agent(args, env=env, name=f"node{i}"))
    with killed_on_failure(agents):
        wait_running(agents)

        def states():
            j = status_json(port)
            got = {n["addr"]: (n["health_check"] or {}).get("state") for n in j["nodes"]} \
                if j else {}
            return got == {"127.0.0.2": "off", "127.0.0.3": "ok"} and j
        job = wait_for(states, 30, "one node off, one ok in podrun status")
        off = [n["health_check"] for n in job["nodes"] if n["addr"] == "127.0.0.2"][0]
        assert off["interval"] == 0 and off["last_check"] is None, off
        rows = node_rows(status_text(port))
        assert rows["127.0.0.2"].endswith(" off"), rows
        release.write_text("")
        codes = wait_all(agents, timeout=60)
    assert codes == [0, 0], [a.err for a in agents]
