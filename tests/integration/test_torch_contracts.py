"""torch's contracts with its launcher, each kept with a real worker of torch 2.15 (the project's
.venv) and, where the contract is old, of Debian's torch 1.13 too: @record's error file in the
failure report, the file timer, TORCH_ELASTIC_WORKER_IDENTICAL, the agent's store under
init_process_group("gloo"), the worker control plane's socket, and a job of 2 nodes x 2 workers.
What torchrun 2.15 itself does differently is in doc/frontends.md#torch-215-and-its-workers."""
import json
import os
import re
import time

import pytest

from cluster import (WORKERS, killed_on_failure, parse_kv, result_lines, run, start_agents,
                     wait_all, worker)
from conftest import TORCH_PY, VENV_PY

GENERATIONS = pytest.mark.parametrize("py", [TORCH_PY, VENV_PY], ids=["torch1.13", "torch2.15"])


def local_time(epoch):
    """A time as torchrun prints it (local time, YYYY-MM-DD_HH:MM:SS)."""
    return time.strftime("%Y-%m-%d_%H:%M:%S", time.localtime(epoch))


@GENERATIONS
def test_record_error_file_in_report_and_termination_log(podrun, tmp_path, py):
    term = tmp_path / "termination-log"
    r = run(podrun, "--nproc-per-node", "2", "--term-timeout", "5", "--log-dir",
            str(tmp_path / "logs"), "--termination-log", str(term), "--python", py,
            worker("fail_record.py"), timeout=120)
    assert r.returncode == 1, r.stderr
    # what this generation's @record wrote: torch's nested layout, time in epoch seconds
    data = json.loads((tmp_path / "logs/none/attempt_0/1/error.json").read_text())
    raised = local_time(int(data["message"]["extraInfo"]["timestamp"]))
    assert data["message"]["message"] == "RuntimeError: boom from rank 1", data
    err = r.stderr
    assert "message   : RuntimeError: boom from rank 1" in err, err
    assert f"  time      : {raised} (the error file's timestamp)\n" in err, err
    assert "traceback : Traceback (most recent call last):" in err, err
    assert 'raise RuntimeError("boom from rank 1")' in err, err
    text = term.read_text()
    assert text.startswith("podrun: rank 1 (local_rank 1, pid "), text
    assert (f"\nRuntimeError: boom from rank 1\nraised at {raised} (the error file's "
            "timestamp)\nTraceback (most recent call last):") in text, text


def test_two_nodes_gloo_identical_ranks_and_the_agents_store(port):
    """2 nodes x 2 workers of torch 2.15 under podrun, with TORCH_ELASTIC_WORKER_IDENTICAL=1:
    gloo's all_reduce over the agent's store (TORCHELASTIC_USE_AGENT_STORE=True: every rank a
    client of MASTER_ADDR:MASTER_PORT, no prefix per attempt), a rank that fails once and a
    restart in which no key of the first attempt is left, and the ranks of 2.15's fast path:
    group_rank * local_world_size + local_rank, role rank = rank, role world = world."""
    agents = start_agents(2, 2, port, extra=["--python", VENV_PY, "--max-restarts", "1"],
                          script=os.path.join(WORKERS, "gloo_contract.py"),
                          env={"TORCH_ELASTIC_WORKER_IDENTICAL": "1", "FAIL_RANK": "3"})
    with killed_on_failure(agents):
        codes = wait_all(agents, timeout=240)
    assert codes == [0, 0], [a.err for a in agents]
    res = [parse_kv(line) for line in result_lines(agents, "contract ")]
    assert sorted((int(r["restart"]), int(r["rank"])) for r in res) == \
        [(a, r) for a in (0, 1) for r in range(4)], res
    for r in res:
        g, lr = int(r["group_rank"]), int(r["local_rank"])
        assert int(r["rank"]) == int(r["role_rank"]) == g * 2 + lr, r
        assert r["world"] == r["role_world"] == "4" and r["sum"] == "6", r
        assert r["stale"] == "0", r   # the first attempt's keys are gone in the second
    assert {a.proc.returncode for a in agents} == {0}
