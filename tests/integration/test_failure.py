"""Job-wide failure propagation, restarts, node loss and exit codes (fault injection).

Every test bounds how long the job may take to stop (far below the workers' own run time) and
checks that nothing is left behind: no orphan and no zombie of the job's workers. The scenarios
both rendezvous backends share (a lost node, the lost store host, restarts used up) are in
test_rdzv_contract.py."""
import os
import re
import signal

import pytest

from cluster import (WORKERS, Agent, Netns, agent_args, killed_on_failure, parse_kv, result_lines,
                     start_agents, started_dir, wait_all, wait_started, no_leftovers)

FAIL_SH = os.path.join(WORKERS, "fail.sh")
NOPY = ["--no-python", "--term-timeout", "2"]
PEER_FAILURE, PEER_LOST, STORE_LOST, HANG = 170, 171, 172, 174
FATAL = 93   # --exit-code-fatal: a --fatal-exit-codes exit, not to be retried
STOP_BOUND = 20   # seconds; the workers themselves would run for 300


def job(n, port, env, extra=(), nproc=1, **kw):
    """n agents of fail.sh workers; agents.up is where the workers say they run."""
    marker = f"300.{os.getpid()}{port}"
    up = started_dir()
    e = {"SLEEP": marker, "STARTED_DIR": up, **env}
    agents = start_agents(n, nproc, port, extra=NOPY + list(extra), env=e, script=FAIL_SH, **kw)
    for a in agents:
        a.up = up
    return agents, marker


def running(agents, n=None):
    """Waits until every worker of the job runs (its SIGTERM trap set)."""
    wait_started(agents[0].up, n or len(agents), agents=agents)


def finish(agents, marker, timeout=STOP_BOUND):
    codes = wait_all(agents, timeout)
    clean, left = no_leftovers(marker)
    assert clean, f"left behind: {left}"
    return codes


def root_cause(text):
    m = re.search(r"Root Cause.*?(?=\n=+|\Z)", text, re.S)
    assert m, text
    return m.group(0)


@pytest.mark.parametrize("how,code", [("exit", 1), ("segv", 128 + 11), ("kill", 128 + 9)])
def test_worker_failure_stops_every_node(port, how, code):
    # every sibling's SIGTERM trap is set before rank 2 fails
    agents, marker = job(4, port, {"FAIL_RANK": "2", "FAIL_HOW": how, "FAIL_AFTER_ALL": "1"})
    codes = finish(agents, marker)
    assert codes == [PEER_FAILURE, PEER_FAILURE, code, PEER_FAILURE], [a.err for a in agents]
    for i in (0, 1, 3):
        assert f"term rank={i}" in agents[i].out          # siblings got SIGTERM, not a timeout
    causes = {root_cause(a.err) for a in agents}
    assert len(causes) == 1, causes                          # identical root cause everywhere
    (cause,) = causes
    assert "rank      : 2" in cause or "rank: 2" in cause
    assert "127.0.0.4" in cause or "node" in cause


def test_worker_ignoring_sigterm_is_killed(port):
    agents, marker = job(3, port, {"FAIL_RANK": "0", "IGNORE_TERM": "1"})
    codes = finish(agents, marker)
    assert codes == [1, PEER_FAILURE, PEER_FAILURE]


def test_agent_alone_kill9_leaves_no_orphans(port):
    agents, marker = job(2, port, {})
    running(agents)
    agents[1].proc.send_signal(signal.SIGKILL)   # only the agent: its workers must not survive it
    codes = finish(agents, marker)
    assert codes == [PEER_LOST, -9]


def test_sigterm_to_one_agent(port):
    agents, marker = job(4, port, {})
    running(agents)
    agents[1].signal(signal.SIGTERM)
    codes = finish(agents, marker, timeout=8)   # well under the 3 s x heartbeat path + grace
    assert codes == [PEER_LOST, 143, PEER_LOST, PEER_LOST], [a.err for a in agents]
    assert all("left" in agents[i].err or "SIGTERM" in agents[i].err for i in (0, 2, 3))


def test_node_cut_off(port):
    net = Netns(f"pf{os.getpid()}n", 3)
    marker = f"300.{os.getpid()}{port}"
    up = started_dir()
    try:
        endpoint = f"{Netns.addr(0)}:{port}"
        agents = [Agent(agent_args(3, 1, endpoint, Netns.addr(i), extra=NOPY, script=FAIL_SH),
                        env={"SLEEP": marker, "STARTED_DIR": up}, prefix=net.prefix_cmd(i))
                  for i in range(3)]
        wait_started(up, 3, agents=agents)
        net.link_down(2)
        codes = finish(agents, marker)
        assert codes == [PEER_LOST, PEER_LOST, STORE_LOST], [a.err for a in agents]
        # the kernels notice: nothing acknowledged for the heartbeat window (1 s x 3)
        assert "unreachable, nothing acknowledged for 3 s" in agents[0].err
        assert "unreachable: nothing this node sent was acknowledged for 3 s" in agents[2].err
    finally:
        net.close()


def test_restart_once_then_succeed(port):
    agents = start_agents(4, 2, port, extra=["--max-restarts", "1"],
                          env={"FAIL_RANK": "5", "FAIL_UNTIL": "1"})
    codes = wait_all(agents, timeout=180)
    assert codes == [0] * 4, [a.err for a in agents]
    res = [parse_kv(l) for l in result_lines(agents)]
    assert sorted(int(r["rank"]) for r in res) == list(range(8))
    assert all(r["restart"] == "1" and int(r["sum"]) == 28 for r in res)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_fatal_exit_code_stops_every_node_without_a_restart(port, tmp_path, how):
    # rank 1 (node 1) exits 42, a code not to retry: restarts are left, none is used
    logs = [tmp_path / f"term{i}" for i in range(2)]
    extra = ["--max-restarts", "3"]
    env = {"FAIL_RANK": "1", "FAIL_UNTIL": "9", "FAIL_EXIT": "42", "STARTED_DIR": started_dir(),
           "FAIL_AFTER_ALL": "1"}   # both workers say "start" before rank 1 fails
    if how == "flag":
        extra += ["--fatal-exit-codes", "7,40-45"]
    else:
        env["PODRUN_FATAL_EXIT_CODES"] = "42"
    marker = f"300.{os.getpid()}{port}"
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args(2, 1, endpoint, f"127.0.0.{2 + i}",
                               extra=NOPY + extra + ["--termination-log", str(logs[i])],
                               script=FAIL_SH), env={"SLEEP": marker, **env}) for i in range(2)]
    codes = finish(agents, marker)
    assert codes == [FATAL, FATAL], [a.err for a in agents]
    starts = result_lines(agents, "start ")
    assert [parse_kv(l)["restart"] for l in starts] == ["0", "0"]   # no restart used
    assert all("restarting" not in a.err for a in agents)
    assert all("not retried" in a.err for a in agents)
    for p in logs:
        t = p.read_text()
        assert t.startswith("podrun: not to be retried: rank 1 on ") and "code 42" in t, t


def test_other_exit_codes_still_restart(port):
    agents, marker = job(2, port, {"FAIL_RANK": "1", "FAIL_UNTIL": "1", "FAIL_EXIT": "3",
                                   "DONE_AFTER": "0.5"},
                         extra=["--max-restarts", "1", "--fatal-exit-codes", "42"])
    codes = finish(agents, marker, timeout=40)
    assert codes == [0, 0], [a.err for a in agents]


def test_node_joins_running_elastic_job(port, tmp_path):
    endpoint = f"127.0.0.2:{port}"
    extra = NOPY + ["--rdzv-conf", "last_call_timeout=0.5"]
    up, done = started_dir(), tmp_path / "done"
    env = {"DONE_FILE": str(done), "STARTED_DIR": up}
    agents = [Agent(agent_args("2:3", 1, endpoint, f"127.0.0.{2 + i}", extra=extra,
                               script=FAIL_SH), env=env) for i in range(2)]
    with killed_on_failure(agents):
        wait_started(up, 2, pattern="w2.*", agents=agents)   # the job runs as two
        agents.append(Agent(agent_args("2:3", 1, endpoint, "127.0.0.4", extra=extra,
                                       script=FAIL_SH), env=env))
        wait_started(up, 3, pattern="w3.*", agents=agents)   # ... and then as three
        done.write_text("")
    codes = wait_all(agents, timeout=60)
    assert codes == [0, 0, 0], [a.err for a in agents]
    done = [parse_kv(l) for l in result_lines(agents, "done ")]
    assert sorted(int(d["rank"]) for d in done) == [0, 1, 2]
    assert all(d["world"] == "3" for d in done)
    # a membership change is not a failure: it used up no restart (--max-restarts is 0)
    assert all(d["restart"] == "0" for d in done)


def test_hang_watchdog(port):
    agents, marker = job(3, port, {"FAIL_RANK": "1", "FAIL_HOW": "hang", "FAIL_AFTER": "0",
                                   "TICK": "0.2"}, extra=["--hang-timeout", "2"])
    codes = finish(agents, marker)
    assert codes == [PEER_FAILURE, HANG, PEER_FAILURE], [a.err for a in agents]
    assert all("hang" in root_cause(a.err).lower() or "no output" in root_cause(a.err)
               for a in agents)


def test_termination_log_on_every_node(port, tmp_path):
    logs = [tmp_path / f"term{i}" for i in range(3)]
    marker = f"300.{os.getpid()}{port}"
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args(3, 1, endpoint, f"127.0.0.{2 + i}",
                               extra=NOPY + ["--termination-log", str(logs[i])], script=FAIL_SH),
                    env={"SLEEP": marker, "FAIL_RANK": "2", "FAIL_EXIT": "7"}) for i in range(3)]
    finish(agents, marker)
    texts = [p.read_text() for p in logs]
    for t in texts:
        assert 0 < len(t.encode()) <= 4096
        assert "rank 2" in t and "127.0.0.4" in t and "7" in t
