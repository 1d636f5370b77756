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

from cluster import WORKERS, run, worker
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
