"""The restart through the relay tree (doc/performance.md, "The push at scale"): after a restart
decision the fed members send their next join up to their relay, the relay's root writes its
subtree's joins to the store in one record, and when every member keeps its place the host writes
one "go" that comes down the same tree; a member whose go does not come within a heartbeat period
joins the store directly.

Five agents with node ranks given, so the tree is known (fan-out 3: ranks 0-2 are roots, rank 0
relays to ranks 3 and 4); the store host (127.0.0.2) holds rank 2, a root with no children."""
import os
import signal

import pytest

from cluster import (WORKERS, Agent, agent_args, killed_on_failure, started_dir, wait_all,
                     wait_started, no_leftovers)

FAIL_SH = os.path.join(WORKERS, "fail.sh")
RANKS = [2, 1, 0, 3, 4]          # agent i (127.0.0.(2+i)) -> node rank
RELAY, FAILING, FED = 2, 1, (3, 4)
FALLBACK = "did not come through this node's relay"


def start(port, tmp_path, extra=()):
    marker = f"300.{os.getpid()}{port}"
    up = started_dir()
    env = {"SLEEP": marker, "STARTED_DIR": up, "FAIL_RANK": "1",
           "FAIL_FILE": str(tmp_path / "fail"), "DONE_FILE": str(tmp_path / "done")}
    args = ["--no-python", "--term-timeout", "2", "--max-restarts", "1", *extra]
    agents = [Agent(agent_args(5, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}", "job1",
                               args + ["--node-rank", str(RANKS[i])], FAIL_SH),
                    env=env, name=f"node{i}") for i in range(5)]
    return agents, marker, up


@pytest.mark.parametrize("token", [False, True])
def test_restart_comes_through_the_tree(port, tmp_path, token):
    # heartbeats every 60 s: a fed node would join the store itself only a minute after its
    # join went up, so a restart whose every worker runs within the bound came through the tree
    extra = ["--rdzv-conf", "keep_alive_interval=60"]
    if token:
        (tmp_path / "token").write_text("c0ffee" * 8)
        extra += ["--rdzv-token-file", str(tmp_path / "token")]
    agents, marker, up = start(port, tmp_path, extra)
    with killed_on_failure(agents):
        wait_started(up, 5, pattern="w5.r0.*", agents=agents)
        (tmp_path / "fail").write_text("")
        wait_started(up, 5, timeout=30, pattern="w5.r1.*", agents=agents)
        (tmp_path / "done").write_text("")
        codes = wait_all(agents, 30)
    assert codes == [0] * 5, [a.err for a in agents]
    # the host took the fed nodes' joins from their relay's root, and the round went on in place
    assert "2 joined through the relay tree, in place" in agents[0].err, agents[0].err
    for i in FED:
        assert FALLBACK not in agents[i].err, agents[i].err
        assert f"start rank={RANKS[i]} restart=1 world=5" in agents[i].out, agents[i].out
    clean, left = no_leftovers(marker)
    assert clean, f"left behind: {left}"


def test_relay_stopped_mid_rejoin_its_children_join_directly(port, tmp_path):
    # the relay of ranks 3 and 4 is stopped before the failure: they learn the decision from the
    # store with a heartbeat, send their join up to the stopped relay, and one heartbeat period
    # later join the store themselves; once the relay goes on the restart completes
    agents, marker, up = start(port, tmp_path, ["--rdzv-conf", "keep_alive_interval=1"])
    with killed_on_failure(agents):
        wait_started(up, 5, pattern="w5.r0.*", agents=agents)
        relay = agents[RELAY]
        relay.signal(signal.SIGSTOP)
        try:
            (tmp_path / "fail").write_text("")
            for i in FED:
                agents[i].wait_err(FALLBACK, timeout=30)
        finally:
            relay.signal(signal.SIGCONT)
        wait_started(up, 5, timeout=30, pattern="w5.r1.*", agents=agents)
        (tmp_path / "done").write_text("")
        codes = wait_all(agents, 30)
    assert codes == [0] * 5, [a.err for a in agents]
    for i in FED:
        assert f"start rank={RANKS[i]} restart=1 world=5" in agents[i].out, agents[i].out
    clean, left = no_leftovers(marker)
    assert clean, f"left behind: {left}"


def test_membership_change_reads_assignments_from_the_store(port, tmp_path):
    # an elastic job loses a root (it leaves): the fed nodes still join through their relay, but
    # the next round does not keep everyone in place (a smaller world), so the go says so and
    # each reads its assignment from the store; with 60 s heartbeats, at once
    marker = f"300.{os.getpid()}{port}"
    up = started_dir()
    env = {"SLEEP": marker, "STARTED_DIR": up, "DONE_FILE": str(tmp_path / "done")}
    args = ["--no-python", "--term-timeout", "2", "--rdzv-conf", "keep_alive_interval=60"]
    agents = [Agent(agent_args("4:5", 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}", "job1",
                               args + ["--node-rank", str(RANKS[i])], FAIL_SH),
                    env=env, name=f"node{i}") for i in range(5)]
    with killed_on_failure(agents):
        wait_started(up, 5, pattern="w5.*", agents=agents)
        agents[FAILING].signal(signal.SIGTERM)
        wait_started(up, 4, timeout=30, pattern="w4.*", agents=[a for i, a in enumerate(agents)
                                                                if i != FAILING])
        (tmp_path / "done").write_text("")
        codes = wait_all(agents, 30)
    assert [c for i, c in enumerate(codes) if i != FAILING] == [0] * 4, [a.err for a in agents]
    assert "2 joined through the relay tree, each reads its assignment from the store" in \
        agents[0].err, agents[0].err
    for i in FED:
        assert FALLBACK not in agents[i].err, agents[i].err
        assert "world=4" in agents[i].out, agents[i].out
    clean, left = no_leftovers(marker)
    assert clean, f"left behind: {left}"
