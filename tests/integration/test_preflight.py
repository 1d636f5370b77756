"""The preflight check (--preflight tcp|nccl) between real podrun agents: on loopback addresses,
and on four hosts in network namespaces the test creates (a bridge, one host slowed with tc, one
whose advertised address nobody can reach), where every agent must name the same bad nodes."""
import os
import re
import shutil
import subprocess

import pytest

from cluster import WORKERS, Agent, Netns, agent_args, start_agents, wait_all
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


def test_tcp_on_loopback_all_good(port):
    agents = start_agents(3, 1, port, extra=NOPY + ["--preflight", "tcp"], script=ENV_SH)
    assert wait_all(agents) == [0] * 3, [a.err for a in agents]
    for a in agents:
        assert "preflight tcp: 3 nodes, 1 round of pairs" in a.err   # odd: node 0 pairs twice
        assert " 0 bad" in a.err
        assert len(re.findall(r"^podrun:   \S+\s+\d+\s+127\.0\.0\.\d\s.*\sok$", a.err, re.M)) == 3
        assert "env rank=" in a.out


def test_tcp_skipped_on_a_restart_of_the_same_nodes(port, tmp_path):
    """Every node passed: the restart after a worker failure does not check again."""
    flag = tmp_path / "failed-once"
    script = tmp_path / "fail_once.sh"
    script.write_text(f'#!/bin/sh\n[ "$RANK" = 1 ] && [ ! -e {flag} ] && touch {flag} && exit 3\n'
                      'exit 0\n')
    script.chmod(0o755)
    agents = start_agents(2, 1, port, extra=NOPY + ["--preflight", "tcp", "--max-restarts", "1"],
                          script=str(script))
    assert wait_all(agents) == [0, 0], [a.err for a in agents]
    for a in agents:
        assert a.err.count("preflight tcp: 2 nodes") == 1, a.err
        assert "restarting the job in place (restart 1 of 1)" in a.err


def have_netns():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return "needs root, ip and tc to build network namespaces"
    r = subprocess.run(["ip", "netns", "add", "prpfprobe"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", "prpfprobe"], capture_output=True)
    return None


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class BadNet:
    """Four hosts on a bridge. Host 2 is slow both ways (tc netem delay where the kernel has it,
    else a tbf rate limit); host 3 advertises an address on an interface of its own that no other
    host can reach, though it reaches the job store on host 0 itself."""

    def __init__(self):
        self.net = Netns(f"pf{os.getpid() % 1000}n", 4)
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
                                                          "--preflight-timeout", "5"] + extra,
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
