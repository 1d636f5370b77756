"""Restarts that make no progress stop the job, and each restart leaves a record: with real torch
workers (Debian's 1.13 and the venv's 2.15) on two nodes (127.0.0.2, 127.0.0.3) over gloo.

doc/failures.md#restarts-that-make-no-progress, doc/failures.md#one-record-per-restart."""
import json
import os

import pytest

from cluster import (WORKERS, Agent, agent_args, killed_on_failure, parse_kv, result_lines,
                     wait_all, wait_for)
from conftest import TORCH_PY, VENV_PY, free_port
from test_watch import metric as val, scrape

PROGRESS_PY = os.path.join(WORKERS, "progress.py")
FATAL, PEER_FAILURE = 93, 170
PY = [pytest.param(TORCH_PY, id="torch1.13"), pytest.param(VENV_PY, id="torch2.15")]
PHASES = ["detect", "stop", "gpu_wait", "rendezvous", "spawn"]


def two_nodes(port, tmp_path, py, extra, env, extra0=()):
    """Two agents of 2 workers each (ranks 0-1 on node 0, which hosts the store; 2-3 on node
    1), each with its own termination log and --log-dir."""
    endpoint = f"127.0.0.2:{port}"
    agents = []
    for i in range(2):
        own = ["--python", py, "--termination-log", str(tmp_path / f"term{i}"),
               "--log-dir", str(tmp_path / f"logs{i}"), "--gpu-memory-reclaim-timeout", "0",
               "--term-timeout", "5"]
        own += list(extra0) if i == 0 else []
        agents.append(Agent(agent_args(2, 2, endpoint, f"127.0.0.{2 + i}", extra=own + extra,
                                       script=PROGRESS_PY), env=env, name=f"node{i}"))
    return agents


def runs(agents):
    return [parse_kv(l) for l in result_lines(agents, "progress ")]


@pytest.mark.parametrize("py", PY)
def test_no_progress_stops_every_node(port, tmp_path, py):
    # every attempt resumes from iteration 1000 and fails before the next checkpoint
    it = tmp_path / "iteration"
    it.write_text("1000\n")
    agents = two_nodes(port, tmp_path, py,
                       ["--max-restarts", "5", "--progress-file", str(it),
                        "--max-no-progress-restarts", "2"],
                       {"BASE": "1000", "ADVANCE": "0", "FAIL_RANK": "3"})
    with killed_on_failure(agents):
        codes = wait_all(agents, timeout=240)
    errs = [a.err for a in agents]
    assert codes == [FATAL, FATAL], errs
    # two attempts ran (restart 0 and 1) and the third never started, restarts left or not
    seen = runs(agents)
    assert sorted({r["restart"] for r in seen}) == ["0", "1"], seen
    assert {r["file"] for r in seen} == {str(it)}
    why = ("2 attempts in a row ended without progress (the progress stayed at 1000; "
           "--max-no-progress-restarts 2)")
    for i, a in enumerate(agents):
        assert f"the job failed, not to be retried: {why}; exit code 93" in a.err, a.err
        term = (tmp_path / f"term{i}").read_text()
        assert term.startswith(f"podrun: not to be retried: {why}; exit code 93\n"), term
        assert "the last attempt stopped for: rank 3 on " in term, term


@pytest.mark.parametrize("py", PY)
def test_progress_restarts_and_records(port, tmp_path, py):
    # every attempt gets 5 iterations further: never "no progress", restarts are used up
    it, gate = tmp_path / "iteration", tmp_path / "gate"
    it.write_text("1000\n")
    hp = free_port()
    agents = two_nodes(port, tmp_path, py,
                       ["--max-restarts", "2", "--progress-file", str(it),
                        "--max-no-progress-restarts", "1"],
                       {"BASE": "1000", "ADVANCE": "5", "FAIL_RANK": "3", "GATE": str(gate)},
                       extra0=["--health-port", str(hp)])
    with killed_on_failure(agents):
        # restart 1 runs, its failing rank held at the gate: one restart recorded, in /metrics
        wait_for(lambda: "restart=1 attempt=1" in agents[0].out_now(), 180, "restart 1")
        m = scrape(hp)
        assert val(m, "podrun_restart_records_total") == 1, m
        for p in PHASES:
            total = val(m, "podrun_restart_phase_seconds_total", phase=p)
            assert total >= 0 and val(m, "podrun_restart_last_phase_seconds", phase=p) == total
        assert val(m, "podrun_restart_phase_seconds_total", phase="rendezvous") > 0, m
        gate.write_text("")
        codes = wait_all(agents, timeout=240)
    assert codes == [PEER_FAILURE, 1], [a.err for a in agents]
    assert it.read_text() == "1015\n"
    seen = runs(agents)
    assert sorted({r["restart"] for r in seen}) == ["0", "1", "2"], seen
    for r in seen:
        # attempt N's workers get N and the file that already holds N records
        want = ("-", "-") if r["restart"] == "0" else (r["restart"], r["restart"])
        assert (r["attempt"], r["records"]) == want, r
    for i in range(2):
        path = tmp_path / f"logs{i}" / "job1" / "restarts.jsonl"
        recs = [json.loads(l) for l in path.read_text().splitlines()]
        assert [r["attempt"] for r in recs] == [1, 2], recs
        assert [r["restart"] for r in recs] == [1, 2]
        for r in recs:
            assert r["node"] and r["counted"] is True and r["round"] == r["attempt"]
            assert r["why"].startswith("rank 3 on "), r
            f = r["failure"]
            assert (f["rank"], f["local_rank"], f["node_rank"], f["exit_code"]) == (3, 1, 1, 1)
            assert list(r["seconds"]) == PHASES + ["total"], r
            assert all(v >= 0 for v in r["seconds"].values()), r
            assert r["seconds"]["rendezvous"] > 0 and r["seconds"]["spawn"] > 0, r
            assert abs(sum(r["seconds"][p] for p in PHASES) - r["seconds"]["total"]) < 1e-5
