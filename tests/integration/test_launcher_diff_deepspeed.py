"""`podrun deepspeed` against DeepSpeed 0.19's own launcher (.venv/bin/deepspeed, CPU accelerator):
the same command lines through both, each worker's environment, argv, command line, cwd and
process group, and the exit codes compared by launcher_diff. Every difference must be one
doc/frontends.md lists in DeepSpeed's table.

The hosts of a hostfile are 127.0.0.2 and 127.0.0.3 on this machine. DeepSpeed's runner reaches
them with pdsh's ssh module (it sets PDSH_RCMD_TYPE=ssh itself) and checks them with ssh, so a
stand-in `ssh` first on PATH runs the remote command here with sh; podrun's head goes through the
same pdsh and the same stand-in. One run per side per case, each shared by its assertions."""
import os
import pathlib
import re

import pytest

from conftest import PODRUN, VENV_BIN, VENV_PY, free_port
from launcher_diff import CAPTURE, assert_documented, compare, run_side, tree

DEEPSPEED = str(VENV_BIN / "deepspeed")

# Values that differ by nature between the two runs: none beyond the harness's.
EXPECTED = {}
# The interpreter's path: DeepSpeed runs sys.executable (the venv's resolved python3), podrun
# its --python; both are the venv's python.
ARGV_SUBS = [(r"^/\S*/python3?(\.\d+)?$", "PYTHON")]

SSH = """#!/bin/sh
# ssh's stand-in: the remote command runs here, with sh, whatever the host
while [ $# -gt 0 ]; do
  case "$1" in
    -[oplicFEJLRDWbem]) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
exec sh -c "$*"
"""


def have_deepspeed():
    return os.access(DEEPSPEED, os.X_OK)


pytestmark = pytest.mark.skipif(not have_deepspeed(), reason=f"{DEEPSPEED} is missing: "
                                "scripts/deps installs it")


def stand_in(d):
    """A directory holding the ssh stand-in; returns PATH with it in front."""
    d = pathlib.Path(d)
    d.mkdir(exist_ok=True)
    (d / "ssh").write_text(SSH)
    (d / "ssh").chmod(0o755)
    return f"{d}:{os.environ['PATH']}"


def sides(tmp_path, args, nodes=None, env=None, script=CAPTURE,
          unset=("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "PDSH_RCMD_TYPE", "LOCAL_SIZE")):
    """Runs `deepspeed ARGS SCRIPT ...` and `podrun deepspeed ARGS --python VENV_PY SCRIPT ...`
    from tmp_path (nodes: per node, extra args before ARGS; default one node; "{side}" in an
    argument is the side's name, for what each side writes)."""
    nodes = nodes or [[]]
    out = []
    for name, head in (("real", [DEEPSPEED]), ("podrun", [PODRUN, "deepspeed"])):
        e = {"DS_ACCELERATOR": "cpu", "PATH": stand_in(tmp_path / "bin"), **(env or {})}
        py = [] if name == "real" else ["--python", VENV_PY]
        opts = [a.replace("{side}", name) for a in args[0]]
        cmds = [head + n + opts + py + [script] + args[1] for n in nodes]
        out.append(run_side(name, cmds, env=e, cwd=tmp_path, unset=unset))
    return out


def check(real, pod, workers):
    assert sorted(real.workers) == workers, real.err_text()
    found = compare(real, pod, expected=EXPECTED, argv_subs=ARGV_SUBS)
    assert_documented(found, "deepspeed")
    return found


def hostfile(tmp_path, lines):
    hf = tmp_path / "hostfile"
    hf.write_text("".join(line + "\n" for line in lines))
    return str(hf)


def test_one_node(tmp_path):
    """No hostfile, --num_gpus 2: launch.py's environment, `python -u SCRIPT --local_rank=N ARGS`
    in the same cwd; a worker's argument with a space stays one word."""
    real, pod = sides(tmp_path, (["--num_gpus", "2"], ["--flag", "two words"]))
    assert real.rcs == [0] and pod.rcs == [0], real.err_text() + pod.err_text()
    check(real, pod, ["0", "1"])
    assert real.workers["1"]["argv"][1:] == ["--local_rank=1", "--flag", "two words"]


def test_module_rank_logs(tmp_path):
    """--module --no_local_rank --enable_each_rank_log DIR: `python -u -m capture ARGS`, and DIR
    holds one <time>_rank<RANK>.log per worker with both its streams, nothing on the console."""
    real, pod = sides(tmp_path, (["--num_gpus", "2", "--module", "--no_local_rank",
                                  "--enable_each_rank_log", "ranklogs-{side}"], ["x"]),
                      env={"PYTHONPATH": os.path.dirname(CAPTURE)}, script="capture")
    assert real.rcs == [0] and pod.rcs == [0], real.err_text() + pod.err_text()
    check(real, pod, ["0", "1"])
    assert real.workers["1"]["cmdline"][1:] == ["-u", "-m", "capture", "x"]
    stamp = [(r"^\d{14}_", "STAMP_")]
    logs = [tree(tmp_path / f"ranklogs-{side}", stamp) for side in ("real", "podrun")]
    assert sorted(logs[0]) == ["STAMP_rank0.log", "STAMP_rank1.log"], logs
    assert {k: sorted(v.splitlines()) for k, v in logs[0].items()} == \
        {k: sorted(v.splitlines()) for k, v in logs[1].items()}, logs
    for side in (real, pod):
        assert "capture out" not in side.outs[0] + side.errs[0], side.err_text()


def test_hostfile_exclude_and_exit_code(tmp_path):
    """A hostfile of one host with slots=3, -e HOST:1: two workers on slots 0 and 2
    (CUDA_VISIBLE_DEVICES=0,2); rank 1 exits 3 and so does each launcher."""
    hf = hostfile(tmp_path, ["localhost slots=3"])
    real, pod = sides(tmp_path, (["-H", hf, "-e", "localhost:1", "--master_addr", "127.0.0.1"],
                                 []),
                      env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                           "LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs == [3], real.err_text()
    found = check(real, pod, ["0", "1"])
    assert "exit code" not in {f.key for f in found}
    assert real.workers["0"]["env"]["CUDA_VISIBLE_DEVICES"] == "0,2"


def test_pdsh_two_hosts_include(tmp_path):
    """pdsh to two hosts, -i 127.0.0.2@127.0.0.3:1 (all of the first, slot 1 of the second):
    what the head exports (PYTHONPATH with the cwd in front, PYTHON*/NCCL* variables,
    .deepspeed_env) reaches every host's workers, CROSS_RANK is the host's place."""
    hf = hostfile(tmp_path, ["127.0.0.2 slots=1", "127.0.0.3 slots=2"])
    (tmp_path / ".deepspeed_env").write_text("DS_FROM_FILE=file value\n")
    port = free_port("127.0.0.2")
    real, pod = sides(tmp_path, (["-H", hf, "-i", "127.0.0.2@127.0.0.3:1", "--master_addr",
                                  "127.0.0.2", "--master_port", str(port)], ["x"]),
                      env={"NCCL_DEBUG": "WARN", "PYTHONFAULTHANDLER": "1"})
    assert real.rcs == [0] and pod.rcs == [0], real.err_text() + pod.err_text()
    check(real, pod, ["0", "1"])
    w1 = real.workers["1"]["env"]
    assert (w1["CROSS_RANK"], w1["CUDA_VISIBLE_DEVICES"], w1["DS_FROM_FILE"]) == \
        ("1", "1", "file value")


def test_no_ssh_node_rank(tmp_path):
    """--no_ssh --node_rank N on each of two nodes: each runs its own line's workers; the
    second node's worker exits 3, and so does that node under both (the first node's exit code
    is in the table)."""
    hf = hostfile(tmp_path, ["127.0.0.2 slots=1", "127.0.0.3 slots=1"])
    port = free_port("127.0.0.2")
    real, pod = sides(tmp_path, (["-H", hf, "--no_ssh", "--master_addr", "127.0.0.2",
                                  "--master_port", str(port)], []),
                      nodes=[["--node_rank", "0"], ["--node_rank", "1"]],
                      env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                           "LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs[1] == 3 and pod.rcs[1] == 3, real.err_text() + pod.err_text()
    check(real, pod, ["0", "1"])
    assert re.fullmatch(r"1", real.workers["1"]["env"]["CROSS_RANK"])
