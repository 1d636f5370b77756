"""The rendezvous contract: one list of scenarios (join, rank assignment, a failure pushed to every
node, restarts, a node leaving an elastic job, a lost node, a lost store host or coordinator, the
finished job), each run against both backends — `store` (c10d: node0, the endpoint, hosts the job
store) and `etcd` (Debian's etcd-server; skipped where it is not installed) — with real podrun
agents on 127.0.0.2… and the same outcome asserted for both: ranks, exit codes, the root cause,
restarts counted. Where the backends differ by design, the scenario's parameters say how.
Every agent is named node<i> and is node rank i; node0 is started first, so with etcd it is the
coordinator, as with the store it is the host."""
import os
import re
import signal
import socket

import pytest

from cluster import (WORKERS, Agent, agent_args, no_leftovers, parse_kv, result_lines,
                     started_dir, wait_all, wait_for, wait_started)
from conftest import free_port
from etcd_util import ETCD, Etcd, etcd_agent

ENV_SH = os.path.join(WORKERS, "env.sh")
FAIL_SH = os.path.join(WORKERS, "fail.sh")
NOPY = ["--no-python", "--term-timeout", "2"]
PEER_FAILURE, PEER_LOST, STORE_LOST, RDZV_TIMEOUT = 170, 171, 172, 173
STOP_BOUND = 30   # seconds for a job to stop; its workers would run for 300

needs_etcd = pytest.mark.skipif(not os.access(ETCD, os.X_OK),
                                reason="etcd-server is not installed")


class StoreBackend:
    """c10d: the agent on 127.0.0.2, the endpoint, hosts the job store and coordinates."""

    def __init__(self):
        self.port = free_port("127.0.0.2")

    def agent(self, i, nnodes, rid, script, nproc, extra, env):
        args = agent_args(nnodes, nproc, f"127.0.0.2:{self.port}", f"127.0.0.{2 + i}", rid,
                          ["--node-name", f"node{i}", *extra], script)
        return Agent(args, env=env, name=f"node{i}")

    def leftovers(self, rid):
        """What the job left of its rendezvous: the store host still listening."""
        try:
            socket.create_connection(("127.0.0.2", self.port), timeout=1).close()
        except OSError:
            return []
        return [f"127.0.0.2:{self.port} still accepts"]

    def close(self):
        pass


class EtcdBackend:
    """etcd: the job's state in one etcd member; the agent holding the leader key coordinates."""

    def __init__(self):
        self.etcd = Etcd(1)

    def agent(self, i, nnodes, rid, script, nproc, extra, env):
        return etcd_agent(i, nnodes, self.etcd.endpoints(), rid, script, nproc, extra, env)

    def leftovers(self, rid):
        """What the job left of its rendezvous: its keys in etcd."""
        return self.etcd.keys(f"podrun/{rid}/")

    def coordinating(self, rid):
        self.etcd.wait_for(f"podrun/{rid}/leader", timeout=30)

    def close(self):
        self.etcd.stop()


BACKENDS = {"store": StoreBackend, "etcd": EtcdBackend}


@pytest.fixture(params=["store", pytest.param("etcd", marks=needs_etcd)])
def backend(request):
    """One backend for the test; the agents it started that still run are killed after it."""
    b = BACKENDS[request.param]()
    b.name, b.agents = request.param, []
    yield b
    for a in b.agents:
        if a.proc.poll() is None:
            a.kill()
    b.close()


class Job:
    """The agents of one job on one backend, node<i> on 127.0.0.(i+2); their workers are marked so
    that no_leftovers finds any left behind, and say in self.up that they run."""

    def __init__(self, backend, nnodes, script=FAIL_SH, extra=(), env=None):
        self.b, self.nnodes, self.script = backend, nnodes, script
        self.rid = f"contract-{os.getpid()}-{free_port()}"
        self.marker = f"300.{os.getpid()}{free_port()}"
        self.up = started_dir()
        self.extra = NOPY + list(extra)
        self.env = {"SLEEP": self.marker, "STARTED_DIR": self.up, **(env or {})}
        self.agents = {}

    def start(self, i, nproc=1, env=None, extra=()):
        a = self.b.agent(i, self.nnodes, self.rid, self.script, nproc, self.extra + list(extra),
                         {**self.env, **(env or {})})
        self.agents[i] = a
        self.b.agents.append(a)
        if i == 0 and self.b.name == "etcd":
            self.b.coordinating(self.rid)   # node0 coordinates, as the store's host does
        return a

    def all(self):
        return [self.agents[i] for i in sorted(self.agents)]

    def running(self, n, pattern="*", agents=None):
        """Waits until n workers run (their SIGTERM trap set), failing at once when one of the
        agents (default: all) has exited."""
        wait_started(self.up, n, pattern=pattern, agents=agents or self.all())

    def finish(self, agents=None, timeout=STOP_BOUND):
        codes = wait_all(agents or self.all(), timeout)
        clean, left = no_leftovers(self.marker)
        assert clean, f"left behind: {left}"
        return codes


# the root cause every agent prints, less its time line
CAUSE = """Root Cause (first observed failure):
[0]:
  host      : {host}
  node      : {node}
  rank      : {rank}
  exitcode  : {code}
  reason    : {reason}{msg}"""


def errs(agents):
    return [a.err for a in agents]


def root_cause(text):
    m = re.search(r"Root Cause.*?(?=\n=+|\Z)", text, re.S)
    assert m, text
    return re.sub(r"\n\s*time\s*:[^\n]*", "", m.group(0))


def starts(agent):
    return [(s["world"], s["restart"]) for s in map(parse_kv, result_lines([agent], "start "))]


def test_join_and_rank_assignment(backend):
    """Three nodes of 1, 3 and 2 workers, node2 started last once the others said who has joined:
    node ranks follow the node names, not the order of joining; global ranks are contiguous per
    node; every worker uses node rank 0's store; the job ends with 0 everywhere."""
    job = Job(backend, 3, script=ENV_SH)
    nproc = {0: 3, 1: 1, 2: 2}
    job.start(0, nproc[0])
    job.start(1, nproc[1])
    job.agents[0].wait_err("2/3 nodes joined")
    job.start(2, nproc[2])
    agents = job.all()
    assert job.finish() == [0, 0, 0], errs(agents)
    for i, a in enumerate(agents):
        res = [parse_kv(line) for line in result_lines([a], "env ")]
        base = sum(nproc[k] for k in range(i))
        assert sorted(int(r["rank"]) for r in res) == list(range(base, base + nproc[i])), a.out
        assert sorted(int(r["local_rank"]) for r in res) == list(range(nproc[i])), a.out
        assert all(r["group_rank"] == str(i) and r["group_world"] == "3" and r["world"] == "6"
                   and r["local_world"] == str(nproc[i]) and r["restart"] == "0"
                   and r["agent_store"] == "True" for r in res), a.out
    masters = {parse_kv(line)["master"] for line in result_lines(agents, "env ")}
    assert len(masters) == 1 and masters.pop().startswith("127.0.0.2:"), masters


def test_join_timeout_names_the_missing_node(backend):
    """Two of three nodes, each given its --node-rank: the join timeout ends both with the
    rendezvous-timeout code, naming how many joined and which node rank is missing."""
    job = Job(backend, 3, script=ENV_SH, extra=["--rdzv-conf", "join_timeout=2"])
    for i in range(2):
        job.start(i, extra=["--node-rank", str(i)])
    agents = job.all()
    codes = job.finish()
    assert codes == [RDZV_TIMEOUT] * 2, errs(agents)
    for a in agents:
        assert "timed out after 2s: 2/3 nodes joined, still waiting for node rank 2" in a.err, \
            a.err
    assert not result_lines(agents, "env ")


def test_failure_pushed_to_every_node(backend):
    """Rank 2 (node2) exits 1: every other node's workers get SIGTERM, every agent prints the
    same root cause, node2 exits 1 and the others with the peer-failure code."""
    job = Job(backend, 4, env={"FAIL_RANK": "2",
                               "FAIL_AFTER_ALL": "1"})   # every sibling's trap is set first
    for i in range(4):
        job.start(i)
    agents = job.all()
    codes = job.finish()
    assert codes == [PEER_FAILURE, PEER_FAILURE, 1, PEER_FAILURE], errs(agents)
    for i in (0, 1, 3):
        assert f"term rank={i}" in agents[i].out, agents[i].out
    for a, code in zip(agents, codes):
        assert root_cause(a.err) == CAUSE.format(
            host="127.0.0.4", node="node2 (node rank 2)", rank="2 (local_rank: 0)", code="1",
            reason="exit code 1", msg="\n  message   : rank 2 failing on purpose"), a.err
        assert f"the job failed: rank 2 on node2 exit code 1; exit code {code}\n" in a.err, a.err


def test_restart_then_success(backend, tmp_path):
    """--max-restarts 1: rank 1 fails on the first attempt only; every node restarts its workers
    in place once (attempts 0 and 1 everywhere) and the job ends with 0."""
    done = tmp_path / "done"
    job = Job(backend, 3, extra=["--max-restarts", "1"],
              env={"FAIL_RANK": "1", "FAIL_UNTIL": "1", "DONE_FILE": str(done),
                   "FAIL_AFTER_ALL": "1"})   # every node says "start" before rank 1 fails
    for i in range(3):
        job.start(i)
    agents = job.all()
    job.running(3, "w3.r1.*")   # the second attempt runs everywhere
    done.touch()
    assert job.finish() == [0, 0, 0], errs(agents)
    for a in agents:
        assert starts(a) == [("3", "0"), ("3", "1")], a.out
    done = [parse_kv(line) for line in result_lines(agents, "done ")]
    assert sorted((d["rank"], d["restart"]) for d in done) == [("0", "1"), ("1", "1"), ("2", "1")]
    assert "restarting the job in place (restart 1 of 1)" in "".join(errs(agents))


def test_restarts_exhausted(backend):
    """--max-restarts 2 and a rank that fails on every attempt: attempts 0, 1, 2 on every node,
    then the job ends with the worker's code on its node and the peer-failure code elsewhere."""
    job = Job(backend, 3, extra=["--max-restarts", "2"],
              env={"FAIL_RANK": "1", "FAIL_UNTIL": "9", "FAIL_EXIT": "3",
                   "FAIL_AFTER_ALL": "1"})   # every node says "start" before rank 1 fails
    for i in range(3):
        job.start(i)
    agents = job.all()
    codes = job.finish(timeout=60)
    assert codes == [PEER_FAILURE, 3, PEER_FAILURE], errs(agents)
    for a in agents:
        assert starts(a) == [("3", "0"), ("3", "1"), ("3", "2")], a.out
    assert "restarting the job in place (restart 2 of 2)" in "".join(errs(agents))
    for a in agents:
        assert root_cause(a.err) == CAUSE.format(
            host="127.0.0.3", node="node1 (node rank 1)", rank="1 (local_rank: 0)", code="3",
            reason="exit code 3", msg="\n  message   : rank 1 failing on purpose"), a.err


def test_restarts_without_progress(backend, tmp_path):
    """--max-no-progress-restarts 2 and a progress file that never moves: attempts 0 and 1 run,
    then the coordinator starts no round, and every node exits 93 with the same reason, restarts
    left or not (doc/failures.md#restarts-that-make-no-progress)."""
    it = tmp_path / "iteration"
    it.write_text("1000\n")
    job = Job(backend, 3, extra=["--max-restarts", "5", "--progress-file", str(it),
                                 "--max-no-progress-restarts", "2"],
              env={"FAIL_RANK": "1", "FAIL_UNTIL": "9", "FAIL_EXIT": "3",
                   "FAIL_AFTER_ALL": "1"})   # every node says "start" before rank 1 fails
    for i in range(3):
        job.start(i)
    agents = job.all()
    codes = job.finish(timeout=60)
    assert codes == [93, 93, 93], errs(agents)
    for a in agents:
        assert starts(a) == [("3", "0"), ("3", "1")], a.out
        assert ("the job failed, not to be retried: 2 attempts in a row ended without progress "
                "(the progress stayed at 1000; --max-no-progress-restarts 2); exit code 93"
                in a.err), a.err


def test_leave_shrinks_an_elastic_job(backend, tmp_path):
    """--nnodes 2:3 running as three: node2 gets SIGTERM and leaves (exit 143); the two left go on
    as a job of two — a membership change, no restart used — and finish with 0."""
    done = tmp_path / "done"
    job = Job(backend, "2:3", extra=["--rdzv-conf", "last_call_timeout=0.5"],
              env={"DONE_FILE": str(done)})
    for i in range(3):
        job.start(i)
    agents = job.all()
    job.running(3, "w3.*")
    agents[2].signal(signal.SIGTERM)
    job.running(2, "w2.*", agents[:2])   # the two left run as two
    done.touch()
    codes = job.finish()
    assert codes == [0, 0, 143], errs(agents)
    for a in agents[:2]:
        assert starts(a) == [("3", "0"), ("2", "0")], a.out
    res = [parse_kv(line) for line in result_lines(agents[:2], "done ")]
    assert sorted((d["rank"], d["world"], d["restart"]) for d in res) == [("0", "2", "0"),
                                                                          ("1", "2", "0")]


@pytest.mark.parametrize("backend,how", [
    ("store", "connection closed"),   # its connection to the store host closed
    pytest.param("etcd", "its etcd lease ended", marks=needs_etcd),
], indirect=["backend"])
def test_lost_node(backend, how):
    """node2's agent and workers are SIGKILLed mid-job, no restart left: every other agent stops
    its workers, prints node2's loss as the root cause and exits with the peer-lost code. How the
    loss was noticed, which the reason names, is the backend's own."""
    job = Job(backend, 4)
    for i in range(4):
        job.start(i)
    agents = job.all()
    job.running(4)
    agents[2].kill()
    codes = job.finish()
    assert codes == [PEER_LOST, PEER_LOST, -9, PEER_LOST], errs(agents)
    for i in (0, 1, 3):
        err = agents[i].err
        assert root_cause(err) == CAUSE.format(
            host="127.0.0.4", node="node2 (node rank 2)", rank="<N/A> (the node itself)",
            code="<N/A>", reason=f"agent lost: {how}", msg=""), err
        assert f"the job failed: node2: agent lost: {how}; exit code {PEER_LOST}\n" in err, err


@pytest.mark.parametrize("backend,others,why", [
    # c10d: node0 held the job store; losing it is losing the store (docs: The etcd backend)
    ("store", STORE_LOST, "lost the connection to the job store at 127.0.0.2:"),
    # etcd: another agent takes over from etcd; node0 is a lost node like any other
    pytest.param("etcd", PEER_LOST, "node0: agent lost: its etcd lease ended", marks=needs_etcd),
], indirect=["backend"])
def test_lost_store_host_or_coordinator(backend, others, why):
    """node0 — the store's host, or etcd's coordinator and node rank 0 — is SIGKILLed (the agent
    only: its workers must not outlive it), no restart left. Here the backends differ by design:
    the store's agents lost the store (172), etcd's lost a peer (171)."""
    job = Job(backend, 4)
    for i in range(4):
        job.start(i)
    agents = job.all()
    job.running(4)
    agents[0].proc.send_signal(signal.SIGKILL)
    codes = job.finish()
    assert codes == [-9] + [others] * 3, errs(agents)
    for a in agents[1:]:
        assert why in a.err, a.err


def test_finished_job_leaves_nothing(backend, tmp_path):
    """node0's workers (the store's host, etcd's coordinator) finish first, the others' later: no
    node is taken for lost or failed, every agent exits 0 with no restart, and once they have
    gone nothing of the job's rendezvous is left (no listening store, no keys in etcd)."""
    done = tmp_path / "done"
    job = Job(backend, 3, env={"DONE_FILE": str(done)})
    job.start(0, env={"DONE_FILE": "", "DONE_AFTER": "0"})
    for i in (1, 2):
        job.start(i)
    agents = job.all()
    job.running(3)
    wait_for(lambda: "done rank=0" in agents[0].out_now(), 60, "node0's worker to finish")
    done.touch()
    assert job.finish() == [0, 0, 0], errs(agents)
    res = [parse_kv(line) for line in result_lines(agents, "done ")]
    assert sorted((d["rank"], d["restart"]) for d in res) == [("0", "0"), ("1", "0"), ("2", "0")]
    assert not any("lost" in a.err or "restarting" in a.err for a in agents), errs(agents)
    assert backend.leftovers(job.rid) == []

