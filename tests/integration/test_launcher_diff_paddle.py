"""`podrun paddle` against Paddle 3.3's own launcher (`python -m paddle.distributed.launch`, the
CPU build in .venv): the same command lines through both, each worker's environment, argv,
command line, cwd and process group, the exit codes and the log directory compared by
launcher_diff. Every difference must be one doc/frontends.md lists in Paddle's table.

Collective on one node and on two (127.0.0.2 and .3, Paddle's HTTP master and podrun's job store
at the first), --ips, parameter servers on one node by count and by lists. Each side logs into its own --log_dir; one run per
side per case, each shared by its assertions."""
import json
import os
import re

import pytest

from conftest import PODRUN, VENV_PY, free_port
from launcher_diff import (CAPTURE, ONLY_PODRUN, ONLY_REAL, Finding, assert_documented, compare,
                           run_side, tree)

EP = r"127\.0\.0\.\d+:\d+"
# Values that differ by nature between two runs: free ports, the pod's random name, each side's
# log directory and gloo's temporary directory.
EXPECTED = {
    "PADDLE_CURRENT_ENDPOINT": EP,
    "PADDLE_TRAINER_ENDPOINTS": rf"{EP}(,{EP})*",
    "PADDLE_PSERVERS_IP_PORT_LIST": rf"{EP}(,{EP})*",
    "PADDLE_MASTER": EP,
    "PADDLE_PORT": r"\d+",
    "PADDLE_GLOO_HTTP_ENDPOINT": EP,
    "PADDLE_GLOO_FS_PATH": r"/tmp/\S+",
    "PADDLE_LOG_DIR": r"/\S+/log-(real|podrun)(-\d)?",
    "POD_NAME": r"[a-z0-9-]+",
    "PADDLE_BACKUP_ENV_PATH": r"/\S+/log-(real|podrun)(-\d)?/backup_env\.\d+\.json",
}
UNSET = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "http_proxy", "https_proxy")


def have_paddle():
    return os.access(VENV_PY, os.X_OK) and os.path.isdir(
        os.path.join(os.path.dirname(VENV_PY), "..", "lib", "python3.11", "site-packages",
                     "paddle"))


pytestmark = pytest.mark.skipif(not have_paddle(), reason="paddle is not in .venv: scripts/deps "
                                "installs it")


def role_key(rec):
    """A worker's name on both sides: its role and its id among that role's workers."""
    e = rec["env"]
    if e.get("TRAINING_ROLE") == "PSERVER":
        ports = [ep.rsplit(":", 1)[1] for ep in e["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")]
        return f"server{ports.index(e['PADDLE_PORT'])}"
    return e.get("PADDLE_TRAINER_ID", "?")


def sides(tmp_path, args, script_args=(), nodes=None, env=None, key=None):
    """`python -m paddle.distributed.launch ARGS CAPTURE ...` and `podrun paddle ARGS --python
    VENV_PY CAPTURE ...` from tmp_path, each node with its own --log_dir (log_dir) (nodes: per
    node, extra args; default one node)."""
    nodes = nodes or [[]]
    out = []
    for name, head in (("real", [VENV_PY, "-m", "paddle.distributed.launch"]),
                       ("podrun", [PODRUN, "paddle", "--python", VENV_PY])):
        cmds = [head + n + ["--log_dir", log_dir(name, i, len(nodes))] + args +
                [CAPTURE, *script_args] for i, n in enumerate(nodes)]
        kw = {"key": key} if key else {}
        out.append(run_side(name, cmds, env=env, cwd=tmp_path, unset=UNSET, **kw))
    return out


def log_name(name):
    """A log file's name with its numbers and the pod's random name as words: envlog.N,
    JOB.POD.log, ..."""
    name = re.sub(r"^[^.]+\.[a-z0-9]+\.log$", "JOB.POD.log", name)
    return re.sub(r"\d+", "N", name)


def log_findings(real_dir, pod_dir):
    """The log directories against each other: a file on one side only is a finding (by its
    name's shape); a worker's log must hold the same lines; and each side's envlog.N the
    environment its worker N was started with."""
    rl, pl = tree(real_dir), tree(pod_dir)
    out = []
    for name in sorted({log_name(k) for k in rl} ^ {log_name(k) for k in pl}):
        kind = ONLY_REAL if name in {log_name(k) for k in rl} else ONLY_PODRUN
        out.append(Finding(name, kind, name if kind == ONLY_REAL else None,
                           name if kind == ONLY_PODRUN else None, "log directory"))
    for k in sorted(set(rl) & set(pl)):
        if k.startswith(("workerlog.", "serverlog.")):
            assert sorted(rl[k].splitlines()) == sorted(pl[k].splitlines()), (k, rl[k], pl[k])
    return out, rl, pl


def env_of_log(text):
    return dict(line.split("=", 1) for line in text.splitlines())


def check(real, pod, workers, tmp_path, nodes=1):
    assert sorted(real.workers) == workers, real.err_text()
    found = compare(real, pod, expected=EXPECTED)
    files = {}
    for i in range(nodes):
        logs, files["real", i], files["podrun", i] = log_findings(
            tmp_path / log_dir("real", i, nodes), tmp_path / log_dir("podrun", i, nodes))
        found += logs
    assert_documented(found, "paddle")
    # envlog.N holds the environment a worker was built with, sorted by name, and so does
    # backup_env.ID.json for a worker with a trainer id; what it was started with lacks the
    # lists left to that file (PADDLE_ENV_LIMIT_LEN) and adds the file's name
    for side in (real, pod):
        mine = [tree_ for (name, _), tree_ in files.items() if name == side.name]
        logged = [text for t in mine for k, text in t.items() if k.startswith("envlog.")]
        for text in logged:
            names = [line.split("=", 1)[0] for line in text.splitlines()]
            assert names == sorted(names), (side.name, names)
        built = {envkey(env_of_log(text)): env_of_log(text) for text in logged}
        assert len(built) == len(logged) == len(side.workers), (side.name, sorted(built))
        for rec in side.workers.values():
            env = built[envkey(rec["env"])]
            assert started(env) == rec["env"], (side.name, env, rec["env"])
            if "PADDLE_TRAINER_ID" in env:
                backup = [json.loads(text) for t in mine
                          for k, text in t.items()
                          if k == f"backup_env.{env['PADDLE_TRAINER_ID']}.json"]
                assert backup == [env], side.name
    return found


def envkey(env):
    """What tells a node's workers apart: the role, and the trainer id or the server's port."""
    return env.get("TRAINING_ROLE"), env.get("PADDLE_TRAINER_ID", env.get("PADDLE_PORT"))


def started(env):
    """The environment Paddle's launcher starts a worker with, from the one it built."""
    if "PADDLE_TRAINER_ID" not in env:
        return env
    limit = int(env.get("PADDLE_ENV_LIMIT_LEN", "48000"))
    out = {k: v for k, v in env.items()
           if k not in ("TRAINER_IP_PORT_LIST", "PADDLE_TRAINER_ENDPOINTS") or len(v) < limit}
    out["PADDLE_BACKUP_ENV_PATH"] = os.path.join(env["PADDLE_LOG_DIR"],
                                                 f"backup_env.{env['PADDLE_TRAINER_ID']}.json")
    return out


def log_dir(side, node, nodes):
    return f"log-{side}" + (f"-{node}" if nodes > 1 else "")


def test_collective_one_node(tmp_path):
    """--nproc_per_node 2 --job_id: Paddle's per-trainer variables, `python -u SCRIPT ARGS`, one
    workerlog.N per trainer holding its two streams; trainer 1 exits 3 and so does each
    launcher."""
    real, pod = sides(tmp_path, ["--nproc_per_node", "2", "--job_id", "jj"], ["a", "b c"],
                      env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                           "LAUNCHER_DIFF_WAIT_FOR": "2"})
    found = check(real, pod, ["0", "1"], tmp_path)
    assert real.rcs != [0] and "exit code" not in {f.key for f in found}, (real.rcs, pod.rcs)
    assert real.workers["1"]["argv"][1:] == ["a", "b c"]


def test_collective_two_nodes(tmp_path):
    """--master 127.0.0.2:PORT --nnodes 2 --host 127.0.0.N on each of two nodes: node ranks,
    endpoints on each node's address; the second node's trainer exits 3, and so does that
    node under both (the first node's exit code is in the table)."""
    port = free_port("127.0.0.2")
    real, pod = sides(tmp_path, ["--master", f"127.0.0.2:{port}", "--nnodes", "2",
                                 "--nproc_per_node", "1"],
                      nodes=[["--host", "127.0.0.2"], ["--host", "127.0.0.3"]],
                      env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                           "LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs[1] == 3 and pod.rcs[1] == 3, real.err_text() + pod.err_text()
    check(real, pod, ["0", "1"], tmp_path, nodes=2)
    for side in (real, pod):
        eps = side.workers["1"]["env"]["PADDLE_TRAINER_ENDPOINTS"].split(",")
        assert [e.split(":")[0] for e in eps] == ["127.0.0.2", "127.0.0.3"], side.err_text()


def test_ips_one_node(tmp_path):
    """--ips HOST --host HOST --start_port P (Paddle's fixed endpoints, no master) on a node whose
    address is not 127.0.0.1: the endpoints are P and P+1 on that address under both; with
    PADDLE_ENV_LIMIT_LEN under their length they reach the trainers through the backup file."""
    port = free_port("127.0.0.47")
    real, pod = sides(tmp_path, ["--ips", "127.0.0.47", "--host", "127.0.0.47", "--start_port",
                                 str(port), "--nproc_per_node", "2"],
                      env={"PADDLE_ENV_LIMIT_LEN": "30"})
    assert real.rcs == [0] and pod.rcs == [0], real.err_text() + pod.err_text()
    check(real, pod, ["0", "1"], tmp_path)
    want = f"127.0.0.47:{port},127.0.0.47:{port + 1}"
    for side in (real, pod):
        # a list over PADDLE_ENV_LIMIT_LEN is in the backup file only
        assert "PADDLE_TRAINER_ENDPOINTS" not in side.workers["1"]["env"], side.err_text()
        backup = json.loads(open(side.workers["1"]["env"]["PADDLE_BACKUP_ENV_PATH"]).read())
        assert backup["PADDLE_TRAINER_ENDPOINTS"] == want


def test_parameter_servers_one_node(tmp_path):
    """--server_num 1 --trainer_num 1: a server (serverlog.0) and a trainer (workerlog.0) with
    Paddle's PS variables and gloo's. The trainer ends only once the server has recorded: podrun
    stops a server that is still running when every trainer is done (the table's row)."""
    real, pod = sides(tmp_path, ["--server_num", "1", "--trainer_num", "1"], key=role_key,
                      env={"LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs == [0] and pod.rcs == [0], real.err_text() + pod.err_text()
    check(real, pod, ["0", "server0"], tmp_path)


def test_parameter_server_lists(tmp_path):
    """--servers/--trainers on one node at an address of its own (--host): Paddle's fixed
    endpoints, the lists as given, no PADDLE_NNODES."""
    ports = [free_port("127.0.0.48") for _ in range(2)]
    real, pod = sides(tmp_path, ["--servers", f"127.0.0.48:{ports[0]}", "--trainers",
                                 f"127.0.0.48:{ports[1]}", "--host", "127.0.0.48"], key=role_key,
                      env={"LAUNCHER_DIFF_WAIT_FOR": "2"})
    assert real.rcs == [0] and pod.rcs == [0], real.err_text() + pod.err_text()
    check(real, pod, ["0", "server0"], tmp_path)
    for side in (real, pod):
        e = side.workers["server0"]["env"]
        assert (e["PADDLE_PORT"], "PADDLE_NNODES" in e) == (str(ports[0]), False), side.err_text()
