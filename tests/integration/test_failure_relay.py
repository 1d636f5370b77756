"""The failure push through the relay tree (doc/performance.md, "The push at scale"): the store
host writes a round's end to the tree's roots only, each relay sends it on to its children, and a
node whose relay is stopped or dead learns the decision from the store with its next heartbeat.

Five agents with node ranks given, so the tree is known (fan-out 3: ranks 0-2 are roots, rank 0
relays to ranks 3 and 4); the store host (127.0.0.2) holds rank 2, a root with no children."""
import os
import signal

import pytest

from cluster import (WORKERS, Agent, agent_args, killed_on_failure, started_dir, wait_all,
                     wait_for, wait_started, no_leftovers)

FAIL_SH = os.path.join(WORKERS, "fail.sh")
PEER_FAILURE = 170
RANKS = [2, 1, 0, 3, 4]          # agent i (127.0.0.(2+i)) -> node rank
RELAY, FAILING, FED = 2, 1, (3, 4)   # agents: rank 0 (relays to ranks 3, 4), rank 1, ranks 3 and 4
BACKSTOP = "the round's end came from the job store with this node's heartbeat"


def start(port, env, extra=()):
    marker = f"300.{os.getpid()}{port}"
    up = started_dir()
    e = {"SLEEP": marker, "STARTED_DIR": up, **env}
    args = ["--no-python", "--term-timeout", "2", *extra]
    agents = [Agent(agent_args(5, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}", "job1",
                               args + ["--node-rank", str(RANKS[i])], FAIL_SH),
                    env=e, name=f"node{i}") for i in range(5)]
    return agents, marker, up


def test_relay_stopped_mid_push_its_children_learn_from_the_heartbeat(port, tmp_path):
    # rank 1's worker fails once the relay of ranks 3 and 4 is stopped: the decision reaches the
    # roots from the store, and ranks 3 and 4 only with their next heartbeat's read of the store
    fail_file = tmp_path / "fail"
    agents, marker, up = start(port, {"FAIL_RANK": "1", "FAIL_FILE": str(fail_file)},
                               ["--rdzv-conf", "keep_alive_interval=1"])
    with killed_on_failure(agents):
        wait_started(up, 5, agents=agents)
        relay = agents[RELAY]
        assert "start rank=0 " in relay.out_now(), relay.out_now()
        relay.signal(signal.SIGSTOP)   # the relay stalls: it reads nothing and sends nothing
        try:
            fail_file.write_text("")
            # each fed child stops its worker on the decision, which it can only have read from
            # the store: its relay is stopped (1 s heartbeats; the bound is the stop bound)
            for i in FED:
                agents[i].wait_err(BACKSTOP, timeout=20)
                wait_for(lambda: f"term rank={RANKS[i]}" in agents[i].out_now(), 20,
                         f"SIGTERM to the worker of node rank {RANKS[i]}")
        finally:
            relay.signal(signal.SIGCONT)
        codes = wait_all(agents, 30)
    assert codes[FAILING] == 1, agents[FAILING].err
    assert all(codes[i] == PEER_FAILURE for i in (0, 3, 4)), [a.err for a in agents]
    # the roots waited on the store and never needed the heartbeat's read
    for i in (0, FAILING):
        assert BACKSTOP not in agents[i].err, agents[i].err
    clean, left = no_leftovers(marker)
    assert clean, f"left behind: {left}"


@pytest.mark.parametrize("token", [False, True])
def test_relay_carries_the_push(port, tmp_path, token):
    # heartbeats every 60 s: a fed node's first read of the store comes a minute after it was
    # assigned, so a push that stops every worker within the stop bound came through the relays
    # (with a token, each datagram signed with the job's key)
    fail_file = tmp_path / "fail"
    extra = ["--rdzv-conf", "keep_alive_interval=60"]
    if token:
        (tmp_path / "token").write_text("c0ffee" * 8)
        extra += ["--rdzv-token-file", str(tmp_path / "token")]
    agents, marker, up = start(port, {"FAIL_RANK": "1", "FAIL_FILE": str(fail_file)}, extra)
    with killed_on_failure(agents):
        wait_started(up, 5, agents=agents)
        fail_file.write_text("")
        codes = wait_all(agents, 20)
    assert codes == [PEER_FAILURE, 1, PEER_FAILURE, PEER_FAILURE, PEER_FAILURE], \
        [a.err for a in agents]
    for i in (0, 2, 3, 4):
        assert f"term rank={RANKS[i]}" in agents[i].out, agents[i].out
        assert BACKSTOP not in agents[i].err, agents[i].err
    clean, left = no_leftovers(marker)
    assert clean, f"left behind: {left}"
