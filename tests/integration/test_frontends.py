"""The drop-in front-ends end to end: `podrun accelerate launch` and `podrun paddle` (and the links
named accelerate, paddle-launch, torchrun) run real jobs on simulated nodes (127.0.0.x), each
worker checking what it was given; a parameter-server job ends when its trainers do, and fails
when a parameter server dies; torch 2.x's newer flags act."""
import os
import re
import signal
import subprocess
import sys

import pytest

from cluster import WORKERS, Agent, parse_kv, result_lines, wait_all, wait_files
from conftest import PODRUN, TORCH_PY, free_port
from etcd_util import Etcd

ACCEL = os.path.join(WORKERS, "accel_allreduce.py")
PADDLE_ENV = os.path.join(WORKERS, "paddle_env.py")
PADDLE_PS = os.path.join(WORKERS, "paddle_ps.py")


def run(args, env=None, timeout=60, argv0=None):
    e = dict(os.environ)
    e.pop("OMP_NUM_THREADS", None)
    e.update(env or {})
    exe = argv0 or PODRUN
    return subprocess.run([exe, *args], env=e, capture_output=True, text=True, timeout=timeout)


def accel_agent(rank, port, extra=(), script=ACCEL, env=None):
    args = ["accelerate", "launch", "--multi_gpu", "--num_processes", "4", "--num_machines", "2",
            "--machine_rank", str(rank), "--main_process_ip", "127.0.0.2",
            "--main_process_port", str(port), "--rdzv_backend", "c10d",
            "--local-addr", f"127.0.0.{2 + rank}", "--python", TORCH_PY, *extra, script]
    return Agent(args, env=env, name=f"machine{rank}")


def test_accelerate_two_machines_gloo_allreduce():
    port = free_port("127.0.0.2")
    agents = [accel_agent(r, port, ["--mixed_precision", "bf16"]) for r in (0, 1)]
    assert wait_all(agents, timeout=120) == [0, 0], [a.err for a in agents]
    res = [parse_kv(l) for l in result_lines(agents, "accel ")]
    assert sorted(int(r["rank"]) for r in res) == [0, 1, 2, 3]
    assert all(int(r["sum"]) == 10 and int(r["world"]) == 4 for r in res)
    # accelerate's multi-GPU launcher: its variables, torchrun's, no ACCELERATE_USE_CPU
    assert all(r["ACCELERATE_MIXED_PRECISION"] == "bf16" and r["ACCELERATE_DYNAMO_BACKEND"] == "NO"
               and r["OMP_NUM_THREADS"] == "1" and r["ACCELERATE_USE_CPU"] == "-" for r in res)
    assert sorted((r["GROUP_RANK"], r["LOCAL_RANK"]) for r in res) == \
        [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]


def test_accelerate_config_file_and_print_config(tmp_path):
    cfg = tmp_path / "default_config.yaml"
    cfg.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                   "num_processes: 2\nmixed_precision: fp16\nsame_network: true\n"
                   "dynamo_config:\n  dynamo_backend: EAGER\n")
    (tmp_path / "accelerate").mkdir()
    os.rename(cfg, tmp_path / "accelerate" / "default_config.yaml")
    env = {"HF_HOME": str(tmp_path)}
    p = run(["accelerate", "launch", "--print-config", "--python", TORCH_PY, ACCEL], env=env)
    assert p.returncode == 0, p.stderr
    lines = {l.split()[0]: l for l in p.stdout.splitlines()}
    assert lines["front-end"].split(None, 1)[1] == "accelerate launch"
    assert "default_config.yaml:num_processes" in lines["nproc-per-node"]
    assert "default_config.yaml:dynamo_config.dynamo_backend" in lines["dynamo-backend"]
    # accelerate's quirk: a file's same_network never applies (its flag's default is False)
    assert lines["same-network"].split()[1] == "False"
    p = run(["accelerate", "launch", "--python", TORCH_PY, ACCEL], env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    res = [parse_kv(l[l.index("accel "):]) for l in p.stdout.splitlines() if "accel " in l]
    assert len(res) == 2
    assert all(r["ACCELERATE_MIXED_PRECISION"] == "fp16" and
               r["ACCELERATE_DYNAMO_BACKEND"] == "EAGER" for r in res)


def test_accelerate_usage_errors_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nmistake: 1\n")
    cases = [
        (["--multi_gpu", "--num_processes", "4", "--num_machines", "2", "t.py"],
         "needs --machine_rank"),
        (["--multi_gpu", "--num_processes", "4", "--num_machines", "2", "--machine_rank", "1",
          "t.py"], "needs --main_process_ip"),
        (["--num_processes", "3", "--num_machines", "2", "--machine_rank", "0",
          "--main_process_ip", "h", "t.py"], "splits evenly"),
        (["--tpu", "t.py"], "does not launch TPU"),
        (["--config_file", str(bad), "t.py"], "had unknown keys (['mistake'])"),
        (["--config_file", str(tmp_path / "none.yaml"), "t.py"], "no such file"),
        (["--mixed_precision", "fp7", "t.py"], "expected one of no, fp16, bf16, fp8"),
    ]
    for args, needle in cases:
        p = run(["accelerate", "launch", *args], env={"HF_HOME": str(tmp_path)})
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and needle in p.stderr, (args, p.stderr)
        assert p.stderr.startswith("podrun: ")


def test_accelerate_taken_port_clear_on_every_machine():
    """The main machine cannot host the store: it says which input gave the port; the other
    machine finds something there that is not a job store and says so while it waits."""
    port = free_port("127.0.0.2")
    squat = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys, time\n"
        f"s = socket.socket(); s.bind(('127.0.0.2', {port})); s.listen(8)\n"
        "print('listening', flush=True)\n"
        "c = []\n"
        "while True: c.append(s.accept()[0])\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert squat.stdout.readline().strip() == "listening"
        extra = ["--rdzv_conf", "join_timeout=16", "--no_python"]
        agents = [accel_agent(r, port, extra, script="true") for r in (0, 1)]
        codes = wait_all(agents, timeout=60)
    finally:
        squat.kill()
        squat.wait()
    assert codes[0] == 1, agents[0].err
    assert f"cannot host the job store on 127.0.0.2:{port}: Address already in use" in \
        agents[0].err and "(flag --main_process_port)" in agents[0].err
    assert codes[1] == 173, agents[1].err
    assert "does not answer as a job store" in agents[1].err and \
        "the port is taken on that machine" in agents[1].err


def paddle_agent(rank, nnodes, port, args, env=None, log_dir=None):
    a = ["paddle", "--master", f"127.0.0.2:{port}", "--nnodes", str(nnodes),
         "--host", f"127.0.0.{2 + rank}", "--python", TORCH_PY]
    if log_dir:
        a += ["--log_dir", str(log_dir)]
    return Agent(a + list(args), env=env, name=f"pod{rank}")


def test_paddle_collective_two_nodes(tmp_path):
    port = free_port("127.0.0.2")
    logs = [tmp_path / "log0", tmp_path / "log1"]
    agents = [paddle_agent(r, 2, port, ["--nproc_per_node", "2", "--job_id", "resnet",
                                        PADDLE_ENV], log_dir=logs[r]) for r in (0, 1)]
    assert wait_all(agents, timeout=120) == [0, 0], [a.err for a in agents]
    res = [parse_kv(l.replace("paddle-env ok", "paddle-env")) for l in result_lines(agents, "paddle-env ")]
    assert len(res) == 4, [a.out for a in agents]
    assert sorted(int(r["id"]) for r in res) == [0, 1, 2, 3]
    assert all(r["num"] == "4" and r["nnodes"] == "2" and r["job"] == "None" for r in res)
    assert len({r["master"] for r in res}) == 1 and res[0]["master"].startswith("127.0.0.2:")
    eps = {int(r["id"]): r["ep"] for r in res}
    assert [eps[i].split(":")[0] for i in range(4)] == ["127.0.0.2"] * 2 + ["127.0.0.3"] * 2
    # Paddle's log layout beside the console: workerlog.N, envlog.N and backup_env.ID.json per
    # trainer, endpoints.log
    for r, d in enumerate(logs):
        ids = [f"backup_env.{2 * r + k}.json" for k in (0, 1)]
        assert sorted(os.listdir(d)) == sorted(ids + ["endpoints.log", "envlog.0", "envlog.1",
                                                      "workerlog.0", "workerlog.1"])
        assert "paddle-env ok" in (d / "workerlog.1").read_text()
        assert (d / "endpoints.log").read_text().splitlines() == \
            ["PADDLE_TRAINER_ENDPOINTS: "] + [eps[i] for i in range(4)]


def ps_agents(port, tmp_path, env=None):
    """Seed 003's CTR job: two pserver pods and two trainer pods (TRAINING_ROLE)."""
    agents = []
    for i in range(4):
        e = dict(env or {})
        e.update({"TRAINING_ROLE": "PSERVER" if i < 2 else "TRAINER",
                  "PADDLE_TRAINER_ID": str(i % 2), "PADDLE_JOB_ID": "fluid-ctr",
                  # what paddle_k8s exports; podrun agrees on the real endpoints itself
                  "PADDLE_PSERVERS": "pserver-0:30236,pserver-1:30237"})
        agents.append(paddle_agent(i, 4, port, [PADDLE_PS], env=e, log_dir=tmp_path / f"l{i}"))
    return agents


def test_paddle_ps_trainers_finish_job_succeeds(tmp_path):
    agents = ps_agents(free_port("127.0.0.2"), tmp_path)
    assert wait_all(agents, timeout=120) == [0] * 4, [a.err for a in agents]
    trainers = result_lines(agents, "trainer ")
    assert sorted(trainers) == ["trainer 0 of 2 reached pserver 0,pserver 1",
                                "trainer 1 of 2 reached pserver 0,pserver 1"]
    # the pservers were stopped when the trainers were done, and that is no failure
    for a in agents[:2]:
        assert "every trainer of the job is done; stopping this node's 1 parameter server" \
            in a.err, a.err
        assert "FAILED" not in a.err
    # (the pserver pod's PADDLE_TRAINER_ID, which its server inherits, names a backup file too,
    # as under Paddle's launcher)
    assert sorted(os.listdir(tmp_path / "l0")) == ["backup_env.0.json", "endpoints.log",
                                                   "envlog.0", "serverlog.0"]
    assert sorted(os.listdir(tmp_path / "l2")) == ["backup_env.0.json", "endpoints.log",
                                                   "envlog.0", "workerlog.0"]


def test_paddle_ps_pserver_dies_job_fails(tmp_path):
    agents = ps_agents(free_port("127.0.0.2"), tmp_path, env={"PS_DIE": "1"})
    codes = wait_all(agents, timeout=120)
    assert sorted(codes) == [3, 170, 170, 170], [a.err for a in agents]
    dead = agents[codes.index(3)]
    assert "]:pserver 1 dies" in dead.err          # its own worker's line, prefixed
    # every node reports the same root cause: the pserver's exit (its rank: the trainers'
    # PADDLE_TRAINER_ID are node ranks 0 and 1, the pservers are placed after them)
    m = re.search(r"the job failed: rank (\d+) on \S+ exit code 3;", dead.err)
    assert m and int(m.group(1)) in (2, 3), dead.err
    assert all(f"the job failed: rank {m.group(1)} on" in a.err and "exit code 3" in a.err
               for a in agents)


def test_paddle_ps_over_etcd(tmp_path):
    """The same job with its state in etcd: the pservers are stopped when the trainers are done."""
    e = Etcd(1)
    job = f"ctr-{os.getpid()}-{free_port()}"   # the job's keys in etcd: its own
    try:
        agents = []
        for i in range(4):
            env = {"TRAINING_ROLE": "PSERVER" if i < 2 else "TRAINER",
                   "PADDLE_TRAINER_ID": str(i % 2), "PADDLE_JOB_ID": job,
                   "PADDLE_PSERVERS": "pserver-0:30236,pserver-1:30237"}
            a = ["paddle", "--rdzv-backend", "etcd", "--rdzv-endpoint", e.endpoints(),
                 "--nnodes", "4", "--host", f"127.0.0.{2 + i}", "--python", TORCH_PY,
                 "--log_dir", str(tmp_path / f"l{i}"), PADDLE_PS]
            agents.append(Agent(a, env=env, name=f"pod{i}"))
        codes = wait_all(agents, timeout=60)
    finally:
        for a in agents:   # (those still running after a failed wait)
            a.kill()
        e.stop()
    assert codes == [0] * 4, [a.err for a in agents]
    assert sorted(result_lines(agents, "trainer ")) == [
        "trainer 0 of 2 reached pserver 0,pserver 1", "trainer 1 of 2 reached pserver 0,pserver 1"]
    for a in agents[:2]:
        assert "stopping this node's 1 parameter server" in a.err, a.err


@pytest.mark.parametrize("args", [["--num_processes", "2"], ["--cpu", "--num_processes", "2"]])
def test_accelerate_simple_launcher_runs_one_process(tmp_path, args):
    """Without a launcher flag on a node without GPUs, or with --cpu, accelerate picks its simple
    launcher: ONE process, with MASTER_ADDR/MASTER_PORT but none of torchrun's ranks."""
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present: accelerate would pick its multi-GPU launcher")
    script = 'echo "w rank=${RANK-unset} ws=${WORLD_SIZE-unset} ma=$MASTER_ADDR mp=$MASTER_PORT"'
    p = run(["accelerate", "launch", *args, "--no_python", "sh", "-c", script],
            env={"HF_HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if "w rank=" in l]
    assert lines == ["[rank 0]:w rank=unset ws=unset ma=127.0.0.1 mp=29500"], p.stdout


def test_program_names_pick_the_front_end(tmp_path):
    for name, args, want in [("accelerate", ["launch", "--multi_gpu", "--num_processes", "2"],
                              "accelerate launch"),
                             ("paddle-launch", ["--nproc_per_node", "2"], "paddle"),
                             ("torchrun", ["--nproc_per_node", "2"], "torchrun")]:
        link = tmp_path / name
        link.symlink_to(PODRUN)
        p = run([*args, "--print-config", "t.py"], argv0=str(link))
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines()[0].split(None, 1)[1] == want
        assert p.stdout.splitlines()[1].split()[1] == "2"


def test_signals_to_handle_stops_with_that_signal(tmp_path):
    """torch 2.x's --signals-to-handle: SIGUSR1 named there stops the job, the workers get it."""
    marks = tmp_path / "up"
    marks.mkdir()
    script = (f"trap 'echo got-usr1; exit 0' USR1; touch {marks}/$LOCAL_RANK; "
              "while :; do sleep 0.1; done")
    e = dict(os.environ)
    p = subprocess.Popen([PODRUN, "--nproc-per-node", "2", "--signals-to-handle", "SIGTERM,SIGUSR1",
                          "--no-python", "sh", "-c", script], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_files(marks, 2, 30, alive=[p])   # both workers trap SIGUSR1
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 128 + signal.SIGUSR1, err
    assert out.count("got-usr1") == 2
    assert "got SIGUSR1" in err


def test_duplicate_filters_and_shutdown_timeout(tmp_path):
    p = run(["--nproc-per-node", "2", "--log-dir", str(tmp_path), "--rdzv-id", "f",
             "--duplicate-stdout-filters", "loss,,x,acc", "--duplicate_stderr_filters", "warn",
             "--shutdown-timeout", "7", "--no-python", "sh", "-c",
             "echo loss,x=1; echo other; echo acc=2; echo warn-me >&2; echo quiet >&2"])
    assert p.returncode == 0, p.stderr
    att = tmp_path / "f" / "attempt_0"
    out = (att / "filtered_stdout.log").read_text().splitlines()
    assert sorted(out) == ["[rank 0]:acc=2", "[rank 0]:loss,x=1", "[rank 1]:acc=2",
                           "[rank 1]:loss,x=1"]
    assert sorted((att / "filtered_stderr.log").read_text().splitlines()) == \
        ["[rank 0]:warn-me", "[rank 1]:warn-me"]
    p = run(["--shutdown_timeout", "7", "--logs-specs", "default", "--event-log-handler", "console",
             "--print-config", "t.py"])
    assert p.returncode == 0
    line = [l for l in p.stdout.splitlines() if l.startswith("term-timeout")][0]
    assert line.split()[1] == "7s" and "--shutdown_timeout" in line
