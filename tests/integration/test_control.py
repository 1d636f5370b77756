"""The trainer can speak (doc/failures.md#the-trainer-can-speak): the Python block of that
section, exactly as the page has it, runs in real torch 1.13 and 2.15 workers of a gloo job.
"stop" stops every node without a restart (93, as --fatal-exit-codes); "exclude" leaves the
node out of the next rounds (175 there), and the job goes on without it."""
import re

import pytest

from cluster import Agent, killed_on_failure, parse_kv, result_lines, wait_all
from conftest import ROOT, TORCH_PY, VENV_PY

FATAL, LEFT_OUT = 93, 175
PYTHONS = [pytest.param(TORCH_PY, id="torch1.13"), pytest.param(VENV_PY, id="torch2.15")]

# the trainer around the page's block: a gloo all_reduce, then, on the rank and in the attempt
# the test names, the error the block is about; the others wait in a barrier until stopped
TRAIN = '''
import os
import torch
import torch.distributed as dist


def train():
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    restart = os.environ["TORCHELASTIC_RESTART_COUNT"]
    print(f"allreduce rank={dist.get_rank()} world={dist.get_world_size()} "
          f"sum={int(t.item())} restart={restart}", flush=True)
    if os.environ.get("BREAK") and restart == "0":
        if os.environ["BREAK"] == "dataset":
            raise FileNotFoundError(2, "No such file or directory", "/data/train.bin")
        raise RuntimeError("GPU 0: 2 uncorrectable ECC errors")
    dist.barrier()

'''


def page_block():
    """The section's one Python block, as the page has it."""
    page = (ROOT / "doc" / "failures.md").read_text()
    section = page.split("### The trainer can speak", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)
    assert len(blocks) == 1, blocks
    return blocks[0]


def job(tmp_path, port, python, n, nnodes, breaking, how):
    script = tmp_path / "train.py"
    script.write_text(TRAIN + page_block())
    agents = []
    for i in range(n):
        env = {"BREAK": how if i == breaking else ""}
        args = ["--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.2:{port}", "--rdzv-id", "ctl",
                "--local-addr", f"127.0.0.{2 + i}", "--node-name", f"n{i}",
                "--rdzv-conf", "last_call_timeout=1", "--max-restarts", "3",
                "--term-timeout", "5", "--termination-log", str(tmp_path / f"term{i}"),
                "--python", python, str(script)]
        agents.append(Agent(args, env=env, name=f"n{i}"))
    return agents



@pytest.mark.parametrize("python", PYTHONS)
def test_stop_is_not_retried_on_any_node(tmp_path, port, python):
    agents = job(tmp_path, port, python, 2, "2", 1, "dataset")
    with killed_on_failure(agents):
        codes = wait_all(agents, timeout=120)
    assert codes == [FATAL, FATAL], [a.err for a in agents]
    res = [parse_kv(l) for l in result_lines(agents)]
    assert sorted(r["restart"] for r in res) == ["0", "0"], res   # no restart was tried
    for a in agents:   # every node: the same reason, and not retried
        assert ("rank 1 on n1 exit code 1; asked not to retry: dataset missing: /data/train.bin"
                " (a worker asked: not retried); exit code 93") in a.err, a.err
    for i in range(2):
        term = (tmp_path / f"term{i}").read_text()
        assert term.startswith("podrun: not to be retried: rank 1 on n1 asked so (exit code 1; "
                               "asked not to retry: dataset missing: /data/train.bin); every "
                               "node exits 93\n"), term


@pytest.mark.parametrize("python", PYTHONS)
def test_exclude_leaves_the_node_out_and_the_job_goes_on(tmp_path, port, python):
    agents = job(tmp_path, port, python, 3, "2:3", 2, "ecc")
    with killed_on_failure(agents):
        codes = wait_all(agents, timeout=120)
    assert codes == [0, 0, LEFT_OUT], [a.err for a in agents]
    assert ("this node is left out of the job as a bad node: n2 (1 failure; a worker asked to "
            "leave it out; left out)") in agents[2].err, agents[2].err
    res = [parse_kv(l) for l in result_lines(agents)]
    later = sorted((r["world"], r["sum"], r["restart"]) for r in res if r["restart"] == "1")
    assert later == [("2", "2", "1")] * 2, res
    assert "asked to leave its node out: GPU 0: 2 uncorrectable ECC errors" in agents[0].err


def test_a_line_that_is_no_request_is_named_and_ignored(tmp_path, port):
    script = tmp_path / "w.sh"
    script.write_text('echo "reboot now" >"$PODRUN_CONTROL_FILE"; exit 4\n')
    a = Agent(["--nproc-per-node", "1", "--max-restarts", "0", "--no-python", "sh",
               str(script)], name="one")
    assert a.wait(60) == 4, a.err
    assert re.search(r"rank 0 asked 'reboot now' in \S+control: not 'stop' or 'exclude'; "
                     r"ignored", a.err), a.err
