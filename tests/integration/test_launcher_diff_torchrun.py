"""The worker's world under torchrun 2.15 (the project's .venv) and under podrun's torchrun
front-end, for the same command lines: every difference in the workers' environment, argv,
cwd, process group, the log files and the exit codes is one that doc/frontends.md's torchrun
table lists (launcher_diff.py compares, the doc is the allow-list)."""
import os
import re

import pytest

from conftest import PODRUN, VENV_BIN, VENV_PY, free_port
from launcher_diff import (CAPTURE, DIFFERS, assert_documented, compare, documented, is_fixed,
                           run_side, tree)

TORCHRUN = str(VENV_BIN / "torchrun")
WORKERS = os.path.dirname(CAPTURE)

pytestmark = pytest.mark.skipif(not os.access(TORCHRUN, os.X_OK),
                                reason=f"{TORCHRUN} is missing: scripts/deps installs it")

# By nature: a temporary directory each run holds the error file (its layout is a row of the doc)
EXPECTED = {"TORCHELASTIC_ERROR_FILE": r"/.+/attempt_[0-9]+/[0-9]+[/.]error\.json"}
# The interpreter: torchrun runs its own (sys.executable), podrun the one --python names
PY = [(r"^/.*/bin/python3?(\.[0-9]+)?$", "PYTHON")]
FIELDS = ("argv", "cmdline", "cwd", "pgid_is_pid", "sid_is_pid")


def both(nodes, env=None, cwd=None, unset=()):
    """Each node's torchrun arguments through torchrun 2.15, then through podrun."""
    real = run_side("torchrun", [[TORCHRUN, *a] for a in nodes], env=env, cwd=cwd, unset=unset)
    pod = run_side("podrun", [[PODRUN, "--python", VENV_PY, *a] for a in nodes], env=env, cwd=cwd,
                   unset=unset)
    return real, pod


def diff(real, pod):
    return compare(real, pod, expected=EXPECTED, fields=FIELDS, argv_subs=PY)


@pytest.mark.parametrize("how", [["--nproc-per-node", "2", CAPTURE, "a", "--b"],
                                 ["--nproc_per_node", "2", "-m", "capture", "a"],
                                 ["--nproc-per-node", "2", "--no-python", CAPTURE, "a"],
                                 ["--standalone", "--nproc-per-node", "2", CAPTURE]],
                         ids=["script", "module", "no-python", "standalone"])
def test_one_node(how):
    """One node, no port given: both host the job store on a free port (two such jobs on one
    machine do not meet at 29500)."""
    real, pod = both([how], cwd=WORKERS, unset=["PODRUN_MASTER_PORT"])
    assert real.rcs == [0] and sorted(real.workers) == ["0", "1"], real.err_text()
    found = diff(real, pod)
    keys = assert_documented(found, "torchrun")
    # what the worker runs is the same, word for word but the interpreter's path
    assert not {"argv", "cmdline", "cwd", "pgid_is_pid", "sid_is_pid", "workers",
                "exit code"} & keys, found
    for k, w in pod.workers.items():
        assert w["env"]["LOCAL_RANK"] == w["env"]["RANK"] == k
        assert w["env"]["TORCHELASTIC_SIGNALS_TO_HANDLE"] == "SIGTERM,SIGINT"
    assert "29500" not in {w["env"]["MASTER_PORT"] for s in (real, pod)
                           for w in s.workers.values()}


def test_run_path():
    """--run-path: the script runs in a fresh interpreter's __main__ under both, with the same
    sys.argv; how that interpreter is started is each launcher's own (a row of the table)."""
    real, pod = both([["--nproc-per-node", "2", "--run-path", CAPTURE, "a"]])
    assert real.rcs == [0] and sorted(real.workers) == ["0", "1"], real.err_text()
    keys = assert_documented(diff(real, pod), "torchrun")
    assert "cmdline" in keys and not {"argv", "cwd", "workers"} & keys
    assert pod.workers["1"]["argv"] == [CAPTURE, "a"]


@pytest.mark.parametrize("backend,n", [("c10d", 3), ("static", 2)])
def test_several_nodes(backend, n):
    """Nodes on 127.0.0.2, .3, ...: c10d at the first one's endpoint, or torch 1.x's static
    form (--node-rank, --master-addr, --master-port); one worker each."""
    port = free_port("127.0.0.2")
    meet = {"c10d": ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.2:{port}",
                     "--rdzv-id", "diff"],
            "static": ["--master-addr", "127.0.0.2", "--master-port", str(port)]}[backend]
    nodes = [["--nnodes", str(n), "--nproc-per-node", "1", *meet,
              *(["--node-rank", str(i)] if backend == "static" else []),
              "--local-addr", f"127.0.0.{2 + i}", CAPTURE] for i in range(n)]
    real, pod = both(nodes)
    ranks = [str(i) for i in range(n)]
    assert real.rcs == [0] * n and sorted(real.workers) == ranks, real.err_text()
    found = diff(real, pod)
    keys = assert_documented(found, "torchrun")
    assert not {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "GROUP_RANK"} & keys, found
    assert sorted(w["env"]["GROUP_RANK"] for w in pod.workers.values()) == ranks
    if backend == "static":   # the port given, on both (compared by shape otherwise)
        assert {w["env"]["MASTER_PORT"] for s in (real, pod) for w in s.workers.values()} == \
            {str(port)}


def test_failing_worker_and_newer_flags():
    """Rank 1 exits 3; torch 2.x's --signals-to-handle, --shutdown-timeout, --logs-specs
    default and --local-ranks-filter given: the same workers, the same environment."""
    args = ["--nproc-per-node", "2", "--signals-to-handle", "SIGTERM,SIGUSR1",
            "--shutdown-timeout", "5", "--logs-specs", "default", "--local-ranks-filter", "1",
            CAPTURE]
    real, pod = both([args], env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                                     "LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs == [1] and pod.rcs == [3], real.err_text() + pod.err_text()
    found = diff(real, pod)
    keys = assert_documented(found, "torchrun")
    assert "TORCHELASTIC_SIGNALS_TO_HANDLE" not in keys, found   # the list given, on both
    assert [f for f in found if f.key == "exit code"] and "workers" not in keys
    # --local-ranks-filter 1: rank 1's lines alone on the console (podrun's prefix aside)

    def console(side):
        lines = (re.sub(r"^\[rank \d+\]:", "", l) for l in
                 side.outs[0].splitlines() + side.errs[0].splitlines())
        return sorted(l for l in lines if l.startswith("capture "))
    assert console(real) == console(pod) == ["capture err rank 1", "capture out rank 1"]
    # both name the failed rank and its code
    for side in (real, pod):
        assert re.search(r"rank\s*: 1 \(local_rank: 1\)", side.errs[0]), side.err_text()
        assert re.search(r"exitcode\s*: 3", side.errs[0]), side.err_text()


# the run's directory: torchrun's RUNID_<random> (its run id a fresh uuid on one node), podrun's
# RUNID (--rdzv-id, else none)
def test_restart():
    """--max-restarts 1, rank 1 failing in the first attempt only: both attempts' workers, the
    second with TORCHELASTIC_RESTART_COUNT=1, and the job succeeds."""
    real, pod = both([["--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval",
                       "0.1", CAPTURE]],
                     env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                          "LAUNCHER_DIFF_EXIT_RESTARTS": "0", "LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs == [0] and sorted(real.workers) == ["0", "0@1", "1", "1@1"], real.err_text()
    found = diff(real, pod)
    keys = assert_documented(found, "torchrun")
    assert not {"exit code", "workers", "TORCHELASTIC_RESTART_COUNT",
                "TORCHELASTIC_MAX_RESTARTS"} & keys, found
    assert "/attempt_1/" in pod.workers["1@1"]["env"]["TORCHELASTIC_ERROR_FILE"]


LOGS = [(r"^[0-9a-f-]{36}_[a-z0-9_]{8}/", "RUN/"), (r"^(rid|none)/", "RUN/")]


def test_log_files_and_console():
    """--log-dir with -r/-t, a console prefix template and --local-ranks-filter: the same files,
    the same console lines; --log-dir alone: podrun's extra files (a documented row)."""
    from tempfile import mkdtemp
    sides = {}
    for name, exe in (("torchrun", [TORCHRUN]), ("podrun", [PODRUN, "--python", VENV_PY])):
        d, bare = mkdtemp(), mkdtemp()
        s = run_side(name, [[*exe, "--nproc-per-node", "2", "--rdzv-id", "rid", "--log-dir", d,
                             "--redirects", "1", "--tee", "2", "--local-ranks-filter", "1",
                             "--log-line-prefix-template", "[${role_name}${local_rank}]:",
                             CAPTURE]])
        b = run_side(name, [[*exe, "--nproc-per-node", "2", "--log-dir", bare, CAPTURE]])
        sides[name] = s, tree(d, LOGS), b, tree(bare, LOGS)
    (real, real_files, real_bare, real_bare_files) = sides["torchrun"]
    (pod, pod_files, pod_bare, pod_bare_files) = sides["podrun"]
    assert real.rcs == pod.rcs == [0], real.err_text() + pod.err_text()
    assert real_files == pod_files
    assert set(real_files) == {f"RUN/attempt_0/{r}/{s}.log" for r in "01"
                               for s in ("stdout", "stderr")}
    assert real_files["RUN/attempt_0/1/stdout.log"] == "capture out rank 1\n"
    # stdout went to the files only; stderr to both, rank 1's alone on the console

    def console(side):
        return [l for l in side.outs[0].splitlines() + side.errs[0].splitlines()
                if "capture" in l]
    assert console(real) == console(pod) == ["[default1]:capture err rank 1"]
    # --log-dir alone: torchrun makes the run's directory and writes no stream; podrun writes
    # both streams of every rank (documented below)
    assert not real_bare_files and real_bare.rcs == pod_bare.rcs == [0]
    assert set(pod_bare_files) == set(real_files), pod_bare_files
    assert "--log-dir" in documented("torchrun")
    # the console: torchrun leaves a worker's streams alone without -t, podrun prefixes them
    assert "capture out rank 0" in real_bare.outs[0].splitlines()
    assert "[rank 0]:capture out rank 0" in pod_bare.outs[0].splitlines()
    assert "console prefix" in documented("torchrun")


@pytest.mark.parametrize("flag", [["--virtual-local-rank"], ["--numa-binding", "node"]],
                         ids=["virtual-local-rank", "numa-binding"])
def test_device_flags_without_gpus(flag):
    """Flags that give each worker a GPU of its own, on a node without one: each side's answer
    is its table's row."""
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present")
    real, pod = both([["--nproc-per-node", "2", *flag, CAPTURE]])
    assert pod.rcs == [2] and not pod.workers, pod.err_text()
    assert "no GPU was found on this node" in pod.errs[0]
    assert len(pod.errs[0].strip().splitlines()) == 1, pod.err_text()
    fate = documented("torchrun")[flag[0]]
    assert not is_fixed(fate)
    if flag[0] == "--virtual-local-rank":   # torchrun starts both, LOCAL_RANK 0 for each
        assert real.rcs == [0], real.err_text()
        assert [(w["env"]["LOCAL_RANK"], w["env"]["CUDA_VISIBLE_DEVICES"])
                for _, w in sorted(real.workers.items())] == [("0", "0"), ("0", "1")]
    else:                                   # torch's binding finds no accelerator
        assert real.rcs == [1] and "No accelerator available" in real.errs[0], real.err_text()


def _parser_flags():
    """Every option string of torch 2.15's torchrun, with whether it takes a value."""
    import json
    import subprocess
    code = ("import json; from torch.distributed.run import get_args_parser as g\n"
            "print(json.dumps([[o, a.nargs != 0] for a in g()._actions "
            "for o in a.option_strings]))")
    out = subprocess.run([VENV_PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_torchrun_flag_is_known_or_listed():
    """Each flag of torch 2.15's parser is one podrun's torchrun front-end takes, or a row of
    the doc's table saying why not."""
    import subprocess
    rows = documented("torchrun")
    missing = []
    for opt, takes in _parser_flags():
        if opt in ("-h", "--help"):
            continue
        argv = [PODRUN, opt, *(["1"] if takes else []), "--print-config", "t.py"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if "unknown option" in p.stderr and (opt not in rows or is_fixed(rows[opt])):
            missing.append(opt)
    assert not missing, f"torchrun 2.15 flags podrun neither takes nor lists: {missing}"
