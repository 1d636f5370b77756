"""The preflight check (--preflight tcp|nccl) between real podrun agents: on loopback addresses,
and on four hosts in network namespaces the test creates (a bridge, one host slowed with tc, one
whose advertised address nobody can reach), where every agent must name the same bad nodes."""
import os
import re
import shutil
import subprocess

import pytest

from cluster import WORKERS, Agent, Netns, agent_args, killed_on_failure, start_agents, wait_all
from conftest import BUILD, free_port

ENV_SH = os.path.join(WORKERS, "env.sh")
NOPY = ["--no-python"]
FAKES = str(BUILD / "tests" / "fakes")
MKMACHINE = str(BUILD / "tests" / "fixtures" / "mkmachine")


def table(err):
    """{node name: result} from the check's table in one agent's stderr."""
    rows = {}
    for line in err.splitlines():
        m = re.match(r"podrun:   (node-\d)\s+(\d+)\s+.*?\s(ok|BAD: .*)$", line)
        if m:
            rows[m.group(1)] = m.group(3)
    return rows


def named(i):
    return ["--node-name", f"node-{i}"]


# Agents on one loaded machine share its cores: a link's round trip or bandwidth can be off by
# far more than on a network, so the bounds are loosened where every node must pass.
EASY = ["--preflight-max-rtt", "1s", "--preflight-slow-percent", "2"]


def test_tcp_on_loopback_all_good(port):
    agents = start_agents(3, 1, port, extra=NOPY + ["--preflight", "tcp"] + EASY, script=ENV_SH)
    assert wait_all(agents) == [0] * 3, [a.err for a in agents]
    for a in agents:
        assert "preflight tcp: 3 nodes, 1 round of pairs" in a.err   # odd: node 0 pairs twice
        assert " 0 bad" in a.err
        assert len(re.findall(r"^podrun:   \S+\s+\d+\s+127\.0\.0\.\d\s.*\sok$", a.err, re.M)) == 3
        assert "env rank=" in a.out


TOKEN = "preflight-test-token-0123456789abcdef"


def test_tcp_with_the_jobs_token(port):
    """With the job's token the store guards podrun's keys: the check's connection proves the
    token like the agent's own, and the check's keys are ones an agent may write."""
    agents = start_agents(3, 1, port, extra=NOPY + ["--preflight", "tcp"] + EASY, script=ENV_SH,
                          env={"PODRUN_RDZV_TOKEN": TOKEN})
    assert wait_all(agents) == [0] * 3, [a.err for a in agents]
    for a in agents:
        assert "preflight tcp: 3 nodes, 1 round of pairs" in a.err and " 0 bad" in a.err, a.err
        assert "closing" not in a.err, a.err


def test_tcp_skipped_on_a_restart_of_the_same_nodes(port, tmp_path):
    """Every node passed: the restart after a worker failure does not check again."""
    flag = tmp_path / "failed-once"
    script = tmp_path / "fail_once.sh"
    script.write_text(f'#!/bin/sh\n[ "$RANK" = 1 ] && [ ! -e {flag} ] && touch {flag} && exit 3\n'
                      'exit 0\n')
    script.chmod(0o755)
    agents = start_agents(2, 1, port, extra=NOPY + ["--preflight", "tcp", "--max-restarts", "1"]
                          + EASY, script=str(script))
    assert wait_all(agents) == [0, 0], [a.err for a in agents]
    for a in agents:
        assert a.err.count("preflight tcp: 2 nodes") == 1, a.err
        assert "restarting the job in place (restart 1 of 1)" in a.err


def test_tcp_on_the_etcd_backend():
    """With --rdzv-backend etcd the check's records go to node rank 0's own store, the one that
    serves that round's workers, and each agent keeps them when it empties its store."""
    from etcd_util import Etcd, etcd_agent
    e = Etcd(1)
    try:
        rid = f"pf-{os.getpid()}-{free_port()}"
        agents = [etcd_agent(i, 3, e.endpoints(), rid, ENV_SH,
                             extra=NOPY + ["--preflight", "tcp"] + EASY) for i in range(3)]
        assert wait_all(agents, timeout=90) == [0] * 3, [a.err for a in agents]
        for a in agents:
            assert "preflight tcp: 3 nodes" in a.err and " 0 bad" in a.err, a.err
            assert len(re.findall(r"^podrun:   node\d\s+\d+\s+127\.0\.0\.\d\s.*\sok$", a.err,
                                  re.M)) == 3, a.err
            assert "env rank=" in a.out
    finally:
        e.stop()


def have_netns():
    probe = f"prpf{os.getpid()}"
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return "needs root, ip and tc to build network namespaces"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class BadNet:
    """Four hosts on a bridge. Host 2 is slow both ways (tc netem delay where the kernel has it,
    else a tbf rate limit); host 3 advertises an address on an interface of its own that no other
    host can reach, though it reaches the job store on host 0 itself."""

    def __init__(self):
        self.net = Netns(f"pf{os.getpid()}n", 4)
        p = self.net.prefix
        try:
            self._slow(f"{p}2", f"{p}h2")
            self._slow(f"{p}sw", f"{p}p2")
            ns3 = f"{p}3"
            sh("ip", "-n", ns3, "link", "add", f"{p}x3", "type", "veth", "peer", "name", f"{p}y3")
            sh("ip", "-n", ns3, "addr", "add", "10.251.0.4/24", "dev", f"{p}x3")
            sh("ip", "-n", ns3, "link", "set", f"{p}x3", "up")
            sh("ip", "-n", ns3, "link", "set", f"{p}y3", "up")
        except Exception:
            self.net.close()
            raise
        self.addrs = [Netns.addr(0), Netns.addr(1), Netns.addr(2), "10.251.0.4"]

    def _slow(self, ns, dev):
        r = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                            "netem", "delay", "100ms"], capture_output=True)
        if r.returncode != 0:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
               "20mbit", "burst", "32kbit", "latency", "400ms")

    def agents(self, port, nnodes, extra, script=ENV_SH, env=None):
        endpoint = f"{Netns.addr(0)}:{port}"
        return [Agent(agent_args(nnodes, 1, endpoint, self.addrs[i],
                                 extra=NOPY + named(i) + ["--preflight", "tcp",
                                                          "--preflight-tcp-bytes", "2M",
                                                          "--preflight-timeout", "5",
                                                          "--preflight-max-rtt", "50ms"] + extra,
                                 script=script),
                      prefix=self.net.prefix_cmd(i), name=f"node{i}", env=env) for i in range(4)]

    def close(self):
        self.net.close()


@pytest.fixture
def badnet():
    why = have_netns()
    if why:
        pytest.skip(why)
    n = BadNet()
    yield n
    n.close()


def check_named(agents, summary=(0, 1, 2, 3)):
    """Every agent printed the same table: node-2 slow, node-3 unreachable, the others ok; the
    agents in `summary` said so in one line."""
    tables = [table(a.err) for a in agents]
    for t in tables:
        assert t == tables[0]
    t = tables[0]
    assert t["node-0"] == "ok" and t["node-1"] == "ok", t
    assert t["node-2"].startswith("BAD") and "slow" in t["node-2"].split("round 2")[1], t
    assert t["node-3"].startswith("BAD") and "connect to 10.251.0.4" in t["node-3"], t
    for i in summary:
        err = agents[i].err
        assert "2 bad nodes" in err and "node-2 (slow), node-3 (unreachable)" in err, err


def test_tcp_names_slow_and_unreachable_nodes_warn(badnet, port):
    agents = badnet.agents(port, 4, [])
    assert wait_all(agents, timeout=120) == [0] * 4, [a.err for a in agents]
    check_named(agents)
    for a in agents:
        assert "--preflight-policy warn: starting anyway" in a.err
        assert "env rank=" in a.out   # the workers ran


def test_tcp_fail_stops_every_node(badnet, port, tmp_path):
    agents = badnet.agents(port, 4, ["--preflight-policy", "fail", "--termination-log",
                                     str(tmp_path / "term")])
    codes = wait_all(agents, timeout=120)
    assert codes == [175] * 4, [a.err for a in agents]
    check_named(agents)
    assert all("env rank=" not in a.out for a in agents)   # no worker started anywhere
    term = (tmp_path / "term").read_text()
    assert "the preflight check stopped this node; exit code 175" in term
    assert "node-3" in term and "BAD" in term


def test_tcp_exclude_drops_the_bad_nodes(badnet, port):
    agents = badnet.agents(port, "2:4", ["--preflight-policy", "exclude", "--rdzv-conf",
                                         "last_call_timeout=1"])
    codes = wait_all(agents, timeout=120)
    assert codes == [0, 0, 175, 175], [a.err for a in agents]
    check_named(agents, summary=(0, 1))
    for a in agents[2:]:
        assert "preflight: this node is excluded from the job" in a.err
        assert "env rank=" not in a.out
    for a in agents[:2]:
        assert "excluding 2 bad nodes" in a.err
        assert "restarting the job in place (the nodes changed; no restart used)" in a.err
        worlds = re.findall(r"env rank=\d+ local_rank=0 world=(\d+)", a.out)
        assert worlds == ["2"], a.out
        assert a.err.count("preflight tcp: 4 nodes") == 1   # the restart of the good two: skipped


def test_tcp_exclude_needs_room_in_nnodes(badnet, port):
    """--nnodes 4 cannot lose two nodes: exclude stops the job like fail."""
    agents = badnet.agents(port, 4, ["--preflight-policy", "exclude"])
    codes = wait_all(agents, timeout=120)
    assert codes == [175] * 4, [a.err for a in agents]
    assert "cannot exclude: --nnodes would drop below its minimum" in agents[0].err


# ---- nccl: helper processes with the fake libnccl.so.2 and CUDA runtime (tests/fakes) ----

def nccl_env(tmp_path, mode=None):
    """A fixture machine with 8 GPUs, the fakes playing them, and a directory their ranks meet
    in; `mode` is this agent's fault (hang_init, fail_init, wrong)."""
    root = tmp_path / "machine"
    if not root.exists():
        root.mkdir()
        subprocess.run([MKMACHINE, str(root), "--no-mig", "--no-hcas"], check=True)
        (tmp_path / "ranks").mkdir()
    env = {"PODRUN_SYSROOT": str(root), "PODRUN_FAKE_NVML": str(root / "nvml.conf"),
           "LD_LIBRARY_PATH": FAKES, "PODRUN_FAKE_CUDA_DEVICES": "8",
           "PODRUN_FAKE_NCCL_DIR": str(tmp_path / "ranks"),
           "PODRUN_FAKE_NCCL_LOG": str(tmp_path / "nccl.log"),
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    if mode:
        env["PODRUN_FAKE_NCCL"] = mode
    return env


NCCL = ["--preflight", "nccl", "--preflight-nccl-lib", os.path.join(FAKES, "libnccl.so.2"),
        "--preflight-cudart-lib", os.path.join(FAKES, "libcudart.so"),
        "--preflight-nccl-bytes", "1M", "--preflight-timeout", "4"]


def nccl_agents(tmp_path, port, n, nproc, modes=(), extra=(), env=None):
    endpoint = f"127.0.0.2:{port}"
    return [Agent(agent_args(n, nproc, endpoint, f"127.0.0.{2 + i}",
                             extra=NOPY + named(i) + NCCL + list(extra), script=ENV_SH),
                  env=dict(nccl_env(tmp_path, modes[i] if i < len(modes) else None),
                           **(env or {})), name=f"node{i}")
            for i in range(n)]


def test_nccl_two_nodes_pass(port, tmp_path):
    agents = nccl_agents(tmp_path, port, 2, 2)
    assert wait_all(agents, timeout=120) == [0, 0], [a.err for a in agents]
    for a in agents:
        assert table(a.err) == {"node-0": "ok", "node-1": "ok"}, a.err
        assert "preflight nccl: 2 nodes, 1 round of pairs" in a.err
        assert len(re.findall(r"env rank=", a.out)) == 2
    log = (tmp_path / "nccl.log").read_text().split("\n")
    # each node's own GPUs (2 ranks), then the pair's four ranks; every communicator destroyed
    assert sorted(l for l in log if l.startswith("init")) == ["init 0/2"] * 2 + ["init 0/4"] + \
        ["init 1/2"] * 2 + ["init 1/4", "init 2/4", "init 3/4"]
    assert sum(l.startswith("destroy") for l in log) == 8 and "abort" not in "".join(log)


def test_nccl_with_the_jobs_token(port, tmp_path):
    """The helpers do not hold the job's token: their unique ids go where the workers' keys are,
    and the check passes under a guarded store."""
    agents = nccl_agents(tmp_path, port, 2, 1, env={"PODRUN_RDZV_TOKEN": TOKEN})
    assert wait_all(agents, timeout=120) == [0, 0], [a.err for a in agents]
    for a in agents:
        assert table(a.err) == {"node-0": "ok", "node-1": "ok"}, a.err


def test_nccl_rank_hanging_in_init_is_aborted_and_named(port, tmp_path):
    """node-1's ranks never finish ncclCommInitRankConfig: each is aborted at the deadline, the
    check names node-1, and node-0 (whose link failed with it) is cleared."""
    agents = nccl_agents(tmp_path, port, 2, 2, modes=(None, "hang_init"))
    assert wait_all(agents, timeout=120) == [0, 0], [a.err for a in agents]
    t = table(agents[0].err)
    assert t == table(agents[1].err)
    assert t["node-0"] == "ok", t
    assert t["node-1"].startswith("BAD: its own GPUs: local rank 0: init: timed out after 4.0s "
                                  "waiting for the 2 ranks to connect; aborted"), t
    log = (tmp_path / "nccl.log").read_text().split("\n")
    assert log.count("abort 0") >= 1 and log.count("abort 1") >= 1
    assert "1 bad node: node-1 (GPUs failed); --preflight-policy warn: starting anyway" in \
        agents[0].err


def test_nccl_fail_policy_and_a_wrong_sum(port, tmp_path):
    agents = nccl_agents(tmp_path, port, 2, 1, modes=("wrong", None),
                         extra=["--preflight-policy", "fail"])
    assert wait_all(agents, timeout=120) == [175, 175], [a.err for a in agents]
    t = table(agents[1].err)
    assert "verify: element 0 is 2, not 1: the sum over 1 ranks is wrong" in t["node-0"], t
    assert all("env rank=" not in a.out for a in agents)


def test_nccl_exclude_on_gpu_nodes_restarts_the_good_ones(port, tmp_path):
    """Under exclude the good nodes get the job's restart while they are still STARTING (no
    worker ran). Their GPUs are NVML's (the fake's), so the restart first waits for the GPUs'
    memory: that wait must lead to the next join from STARTING too, not only from STOPPING."""
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args("2:3", 1, endpoint, f"127.0.0.{2 + i}",
                               extra=NOPY + named(i) + NCCL +
                               ["--preflight-policy", "exclude", "--rdzv-conf",
                                "last_call_timeout=1"], script=ENV_SH),
                    env=nccl_env(tmp_path, "fail_init" if i == 2 else None), name=f"node{i}")
              for i in range(3)]
    with killed_on_failure(agents):
        codes = wait_all(agents, timeout=60)
    assert codes == [0, 0, 175], [a.err for a in agents]
    assert "preflight: this node is excluded from the job" in agents[2].err
    for a in agents[:2]:
        assert "excluding 1 bad node" in a.err, a.err
        assert "restarting the job in place (the nodes changed; no restart used)" in a.err
        assert re.findall(r"env rank=\d+ local_rank=0 world=(\d+)", a.out) == ["2"], a.out


def test_nccl_node_lost_during_the_check_restarts_the_other(port, tmp_path):
    """A restart decided while the check runs (node-1 is lost before the check's deadline) reaches
    node-0 in STARTING, on GPUs NVML reads: the check is dropped, and after the GPUs' wait node-0
    joins the next round and runs the job alone."""
    endpoint = f"127.0.0.2:{port}"
    # the check's deadline is far: only node-1's loss can end it
    agents = [Agent(agent_args("1:2", 1, endpoint, f"127.0.0.{2 + i}",
                               extra=NOPY + named(i) + NCCL + ["--preflight-timeout", "120",
                                                               "--rdzv-conf",
                                                               "last_call_timeout=1"],
                               script=ENV_SH),
                    env=nccl_env(tmp_path, "hang_init" if i == 1 else None), name=f"node{i}")
              for i in range(2)]
    with killed_on_failure(agents):
        agents[0].wait_err("preflight nccl: checking 2 nodes", timeout=60)
        agents[1].wait_err("preflight nccl: checking 2 nodes", timeout=60)
        agents[1].kill()
        agents[1].wait(10)
        code = agents[0].wait(60)
    assert code == 0, agents[0].err
    err = agents[0].err
    assert "restarting the job in place" in err, err
    assert "preflight nccl: 2 nodes" not in err, err   # the check never finished
    assert re.findall(r"env rank=\d+ local_rank=0 world=(\d+)", agents[0].out) == ["1"], \
        agents[0].out


def test_nccl_one_node(podrun, tmp_path):
    from cluster import run
    env = nccl_env(tmp_path)
    r = run(podrun, "--nproc-per-node", "gpu", *NCCL, "--no-python", ENV_SH, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^podrun:   \S+\s+0\s+\d+(\.\d+)? [GMK]B/s\s+-\s+ok$", r.stderr, re.M), \
        r.stderr
    assert len(re.findall(r"env rank=", r.stdout)) == 8
    log = (tmp_path / "nccl.log").read_text()
    assert log.count("init ") == 8 and log.count("/8") == 8


def test_nccl_with_the_real_libraries_and_no_gpu(podrun, tmp_path):
    """Where NCCL and the CUDA runtime are installed but no GPU is: the check loads the real
    libraries in its helper, fails at the device, and says so; the job starts (warn)."""
    have = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    if "libnccl.so.2" not in have or "libcudart.so" not in have:
        pytest.skip("no NCCL or CUDA runtime installed here")
    from cluster import run
    env = nccl_env(tmp_path)
    env.pop("PODRUN_FAKE_CUDA_DEVICES")
    env["LD_LIBRARY_PATH"] = ""   # the fake NVML is still found: it is preloaded below
    env["LD_PRELOAD"] = os.path.join(FAKES, "libnvidia-ml.so.1")
    r = run(podrun, "--nproc-per-node", "1", "--preflight", "nccl", "--preflight-timeout", "5",
            "--no-python", "true", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"BAD: its own GPUs: local rank 0: device: cudaSetDevice\(0\): .+", r.stderr), \
        r.stderr
