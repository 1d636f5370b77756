"""torch's contracts with its launcher, each kept with a real worker of torch 2.15 (the project's
.venv) and, where the contract is old, of Debian's torch 1.13 too: @record's error file in the
failure report, the file timer, TORCH_ELASTIC_WORKER_IDENTICAL, the agent's store under
init_process_group("gloo"), the worker control plane's socket, a spare's exit, and a job of 2 nodes
x 2 workers.
What torchrun 2.15 itself does differently is in doc/frontends.md#torch-215-and-its-workers."""
import json
import os
import socket
import subprocess
import time
import uuid

import pytest

from cluster import (WORKERS, Agent, agent_args, killed_on_failure, no_leftovers, parse_kv,
                     result_lines, run, start_agents, wait_all, wait_for, worker)
from conftest import TORCH_PY, VENV_BIN, VENV_PY, free_port

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


def test_file_timer_of_torch_215(podrun):
    """torch 2.15's FileTimerClient and expires() against podrun's timer FIFO: the worker that
    outlives its timer is killed, its expiry is the root cause and this node's hang (174), and
    the other worker is stopped with it. (torchrun 2.15's own timer server then kills the
    agent with the same signal: no report, the other workers left running.)"""
    marker = f"timer-{uuid.uuid4().hex}"
    r = run(podrun, "--nproc-per-node", "2", "--term-timeout", "5", "--python", VENV_PY,
            worker("timer_worker.py"), marker, timeout=120,
            env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "MODE": "overrun", "OVERRUN": "1",
                 "AFTER": "1"})
    assert r.returncode == 174, r.stderr
    assert "survived" not in r.stdout
    cause = r.stderr[r.stderr.index("Root Cause"):]
    assert "rank      : 1 (local_rank: 1)" in cause, cause
    assert "reason    : timer 'step' expired after 1 s" in cause, cause
    assert "podrun: the job failed: rank 1 on " in r.stderr, r.stderr
    gone, left = no_leftovers(marker)
    assert gone, left


def unix_post(path, handler):
    """POST /handler/<handler> to torch's WorkerServer on the Unix socket path; (status, body)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(f"POST /handler/{handler} HTTP/1.1\r\nHost: worker\r\nContent-Length: 0\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.decode(errors="replace").partition("\r\n\r\n")
    return int(head.split()[1]), body


def test_worker_main_serves_on_the_socket_the_worker_is_given(podrun, tmp_path):
    """control_plane.worker_main() of torch 2.15 under podrun: torchrun 2.15 never sets
    TORCH_WORKER_SERVER_SOCKET, so a worker serves where the variable the job was started with
    says, and podrun passes it on unchanged; the handlers answer there."""
    sock, done = tmp_path / "worker.sock", tmp_path / "done"
    env = {"TORCH_WORKER_SERVER_SOCKET": str(sock), "DONE_FILE": str(done)}
    a = Agent(["--python", VENV_PY, worker("control_plane.py")], env=env, name="node0")
    with killed_on_failure([a]):
        wait_for(lambda: f"serving rank=0 socket={sock}" in a.out_now() or
                 a.proc.poll() is not None, 120, lambda: a.err_now())
        assert a.proc.poll() is None, a.err_now()
        wait_for(sock.exists, 30, f"{sock} to be made")
        assert unix_post(str(sock), "ping") == (200, "pong")
        status, trace = unix_post(str(sock), "dump_traceback")
        assert status == 200 and "control_plane.py" in trace, trace
        done.touch()
        assert a.wait(120) == 0, a.err
    # without the variable, no worker serves (as under torchrun)
    done.touch()
    r = run(podrun, "--python", VENV_PY, worker("control_plane.py"), timeout=120,
            env={"DONE_FILE": str(done)})
    assert r.returncode == 0 and "serving rank=0 socket=None" in r.stdout, r.stdout + r.stderr


def wait_text(path, text, proc, timeout=120):
    """Waits until the file at path holds text, failing at once if proc ended first."""
    def seen():
        if text in path.read_text(errors="replace"):
            return True
        assert proc.poll() is None, f"{proc.args[:3]} exited first:\n{path.read_text()}"
        return False
    wait_for(seen, timeout, lambda: f"{text!r} in {path}:\n{path.read_text()}")


def test_spare_of_a_full_job_leaves_as_torchrun_215s_does(store, tmp_path):
    """A node that comes once a job of --nnodes 1:1 runs. torchrun 2.15 (c10d, its state in a
    neutral store) puts it on the round's redundancy list and, when the job ends and closes the
    rendezvous, ends it with a "graceful exit" that its launch_agent then fails on: exit 1.
    podrun's latecomer to a job of a fixed size exits 1 too, with one line saying why."""
    done, logs = tmp_path / "done", {}
    hold = ["--no-python", "sh", "-c", f'echo started; while [ ! -e {done} ]; do sleep 0.05; done']
    procs = []

    def torchrun(name, addr):
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        logs[name] = (out, err)
        with open(out, "w") as o, open(err, "w") as e:
            procs.append(subprocess.Popen(
                [str(VENV_BIN / "torchrun"), "--nnodes", "1:1", "--nproc-per-node", "1",
                 "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{store.port}",
                 "--rdzv-id", "spare", "--rdzv-conf", "is_host=0", "--local-addr", addr, *hold],
                stdout=o, stderr=e, env={**os.environ, "TORCH_LOGS": "+distributed", "LOGLEVEL": "INFO"},
                start_new_session=True))
        return procs[-1]

    try:
        host = torchrun("host", "127.0.0.2")
        wait_text(logs["host"][0], "started", host)
        spare = torchrun("spare", "127.0.0.3")
        wait_text(logs["spare"][1], "added itself to the redundancy list", spare)
        done.touch()
        assert host.wait(120) == 0, logs["host"][1].read_text()
        assert spare.wait(120) == 1
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    err = logs["spare"][1].read_text()
    assert "Rendezvous gracefully exited: The rendezvous 'spare' is closed" in err, err
    assert "AttributeError: 'NoneType' object has no attribute 'is_failed'" in err, err
    assert "started" not in logs["spare"][0].read_text()

    port, late = free_port("127.0.0.2"), tmp_path / "late"
    endpoint = f"127.0.0.2:{port}"
    env = {"DONE_FILE": str(late)}
    script = ["sh", "-c", f'echo started; while [ ! -e {late} ]; do sleep 0.05; done']
    # --debug: the store host says when the latecomer has joined
    agents = [Agent(agent_args("1:1", 1, endpoint, "127.0.0.2",
                               extra=["--no-python", "--debug"], script=script[0],
                               script_args=script[1:]), env=env, name="host")]
    with killed_on_failure(agents):
        wait_for(lambda: "started" in agents[0].out_now(), 60, lambda: agents[0].err_now())
        agents.append(Agent(agent_args("1:1", 1, endpoint, "127.0.0.3", extra=["--no-python"],
                                       script=script[0], script_args=script[1:]),
                            env=env, name="spare"))
        agents[0].wait_err("waits for the next round")
        late.touch()
        codes = wait_all(agents, timeout=60)
    assert codes == [0, 1], [a.err for a in agents]
    assert "the job finished without this node, which ran no worker in it" in agents[1].err
    assert "started" not in agents[1].out
