"""TrainJob status: under Kubeflow Trainer (KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT, _TOKEN) the
agent that is node rank 0 reports the job's state to the Trainer's status server — the round, the
nodes and workers, the restarts used and left, the last failure's root cause, the end — as
UpdateTrainJobStatusRequest bodies the fake server (tests/fakes/trainer_api.py) checks against the
Trainer's Go types, over TLS checked against the given CA, with the token file read again as it
rotates. A server that cannot be reached or refuses is one line in the log, and the job goes on."""
import os
import signal
import pathlib
import sys

import pytest

from cluster import PY, Agent, killed_on_failure, run, wait_for

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import trainer_api  # noqa: E402
from trainer_api import metrics  # noqa: E402

# Each attempt waits for the test's word (the file argv[1] + the restart count); then local rank 1
# of the first attempt fails, and the restart succeeds.
FAIL_ONCE = """
import os, sys, time
lr = int(os.environ["LOCAL_RANK"])
restart = os.environ["TORCHELASTIC_RESTART_COUNT"]
while not os.path.exists(sys.argv[1] + restart):
    time.sleep(0.02)   # the poll interval: the test creates the file when it is ready
if restart == "0":
    if lr == 1:
        print("ValueError: bad batch 7", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(60)   # the healthy worker until podrun stops it for the failure
print("done", lr, flush=True)
"""


@pytest.fixture
def fake(tmp_path):
    f = trainer_api.FakeTrainer(tmp_path / "trainer").start()
    yield f
    f.stop()


def trainer_env(fake, tmp_path, token="token-1", ca=None, url=None, interval="0.1"):
    tok = tmp_path / f"token-{token}"
    tok.write_text(token + "\n")
    return {"KUBEFLOW_TRAINER_SERVER_URL": url or fake.url,
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": ca or fake.pki["ca.crt"],
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(tok),
            "PODRUN_TRAINJOB_STATUS_INTERVAL": interval}


def rotate(path, token):
    """As the kubelet rewrites a projected token: a new file put in place at once."""
    tmp = str(path) + ".new"
    with open(tmp, "w") as f:
        f.write(token + "\n")
    os.rename(tmp, path)


def status_lines(stderr):
    return [line for line in stderr.splitlines() if "TrainJob status" in line]


def script(tmp_path, text=FAIL_ONCE):
    p = tmp_path / "w.py"
    p.write_text(text)
    return str(p)


def test_reports_round_failure_restart_and_end(podrun, fake, tmp_path):
    env = trainer_env(fake, tmp_path)
    a = Agent(["--nproc-per-node", "2", "--max-restarts", "1", *PY, script(tmp_path),
               str(tmp_path / "go")], env=env)
    with killed_on_failure([a]):
        first = wait_for(lambda: fake.accepted(), 30, "the first report")[0]
        # the token rotates while the job runs: the old one is refused from now on
        rotate(env["KUBEFLOW_TRAINER_SERVER_TOKEN"], "token-2")
        fake.tokens = {"token-2"}
        (tmp_path / "go0").write_text("")
        # the second round runs: its report says the restart and the failure before it
        second = wait_for(lambda: [metrics(b) for b in fake.accepted()
                                   if metrics(b).get("podrun_round") == "1"], 30, "round 1")[0]
        (tmp_path / "go1").write_text("")
        assert a.wait(60) == 0, a.err
    assert fake.requests[0]["auth"] == "Bearer token-1"
    assert metrics(first) == {"podrun_state": "running", "podrun_round": "0", "podrun_nodes": "1",
                              "podrun_workers": "2", "podrun_restarts": "0",
                              "podrun_restarts_left": "1"}, first
    assert first["trainerStatus"]["lastUpdatedTime"].endswith("Z")
    # every report after the rotation carries the new token; none was refused or invalid
    assert [r["code"] for r in fake.requests] == [200] * len(fake.requests), fake.requests
    assert all(r["auth"] == "Bearer token-2" for r in fake.requests[1:]), fake.requests
    assert fake.invalid == []
    assert status_lines(a.err) == [], a.err
    reports = [metrics(b) for b in fake.accepted()]
    root = {"podrun_failed_node": reports[-1]["podrun_failed_node"], "podrun_failed_rank": "1",
            "podrun_failure": "exit code 3",
            "podrun_failure_message": "ValueError: bad batch 7"}
    # what came between (stopping, restarting) may be folded into the next report, never lost
    assert {m["podrun_state"] for m in reports} <= {"running", "stopping", "restarting",
                                                    "succeeded"}, reports
    assert (second["podrun_state"], second["podrun_restarts"], second["podrun_restarts_left"]) \
        == ("running", "1", "0"), second
    assert root.items() <= second.items(), second
    # the end: the last report says it, with the root cause of the last failure
    last = reports[-1]
    assert last["podrun_state"] == "succeeded" and last["podrun_exit_code"] == "0", last
    assert root.items() <= last.items(), last
    assert metrics({"trainerStatus": fake.status}) == last


def test_only_node_rank_0_reports(podrun, fake, tmp_path, port):
    worker = script(tmp_path, "import time\n"
                    "time.sleep(0.3)   # the work: what is under test is around it\n")
    agents = []
    with killed_on_failure(agents):
        for rank, token in ((1, "token-b"), (0, "token-a")):
            env = trainer_env(fake, tmp_path, token=token)
            agents.append(Agent(["--nnodes", "2", "--node-rank", str(rank), "--nproc-per-node",
                                 "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                 f"127.0.0.2:{port}", "--local-addr", f"127.0.0.{3 - rank}",
                                 *PY, worker], env=env, name=f"node{rank}"))
        fake.tokens = {"token-a", "token-b"}
        assert [a.wait(60) for a in agents] == [0, 0], [a.err for a in agents]
    assert fake.requests, "no report"
    assert {r["auth"] for r in fake.requests} == {"Bearer token-a"}, fake.requests
    last = metrics(fake.accepted()[-1])
    assert (last["podrun_state"], last["podrun_nodes"], last["podrun_workers"]) == \
        ("succeeded", "2", "4"), last


@pytest.mark.parametrize("case", ["wrong-ca", "down", "refused", "forbidden"])
def test_a_bad_server_is_one_line(podrun, fake, tmp_path, case):
    """A report that cannot be made is said once, however many follow, and the job is not
    touched: the failing attempt restarts and the job succeeds."""
    kw = {}
    if case == "wrong-ca":
        kw["ca"] = fake.pki["other-ca.crt"]
    elif case == "down":
        fake.stop()
    elif case == "refused":
        fake.answer_code = 500
    else:
        fake.tokens = {"another"}
    go = tmp_path / "go"
    for f in ("go0", "go1"):
        (tmp_path / f).write_text("")
    r = run(podrun, "--nproc-per-node", "2", "--max-restarts", "1", *PY, script(tmp_path),
            str(go), env=trainer_env(fake, tmp_path, **kw))
    assert r.returncode == 0, r.stderr
    lines = status_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    said = {"wrong-ca": "certificate", "down": "cannot report to the server",
            "refused": "the server refused the report: HTTP 500: Internal error / InternalError",
            "forbidden": "the server refused the report: HTTP 403: Forbidden / Forbidden"}[case]
    assert said in lines[0] and fake.url.split("/apis")[0] in lines[0], lines
    if case in ("refused", "forbidden"):   # every update was tried, each failed
        assert len(fake.requests) >= 2, fake.requests
    assert fake.accepted() == [] or case == "refused"


def test_no_report_without_the_trainer_or_when_off(podrun, fake, tmp_path):
    go = tmp_path / "go"
    for f in ("go0", "go1"):
        (tmp_path / f).write_text("")
    w = script(tmp_path)
    env = trainer_env(fake, tmp_path, interval="0")
    r = run(podrun, "--nproc-per-node", "2", "--max-restarts", "1", *PY, w, str(go), env=env)
    assert r.returncode == 0, r.stderr
    env.pop("PODRUN_TRAINJOB_STATUS_INTERVAL")
    env.pop("KUBEFLOW_TRAINER_SERVER_URL")
    r = run(podrun, "--nproc-per-node", "2", "--max-restarts", "1", *PY, w, str(go), env=env)
    assert r.returncode == 0, r.stderr
    assert fake.requests == [] and status_lines(r.stderr) == []


def test_a_stop_by_signal_is_the_last_report(podrun, fake, tmp_path):
    """The pod is deleted: podrun's SIGTERM stops the workers, and the TrainJob says the job was
    stopped, with podrun's exit code, before the agent exits."""
    a = Agent(["--nproc-per-node", "2", *PY, script(tmp_path), str(tmp_path / "go")],
              env=trainer_env(fake, tmp_path))
    with killed_on_failure([a]):
        wait_for(lambda: fake.accepted(), 30, "the first report")
        a.signal(signal.SIGTERM)
        assert a.wait(60) == 143, a.err
    last = metrics(fake.accepted()[-1])
    assert (last["podrun_state"], last["podrun_exit_code"]) == ("stopped", "143"), last
    assert status_lines(a.err) == [], a.err


PROGRESS = """
import os, sys, time
with open(os.environ["PODRUN_PROGRESS_FILE"] + ".tmp", "w") as f:
    f.write("1200\\n")
os.rename(os.environ["PODRUN_PROGRESS_FILE"] + ".tmp", os.environ["PODRUN_PROGRESS_FILE"])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)   # the poll interval: the test creates the file once it saw the step
"""


def test_the_trainers_progress_file_is_the_reported_step(podrun, fake, tmp_path):
    """The step the trainer writes to --progress-file is the report's podrun_step while the
    workers run; with no total known, no percentage is sent."""
    env = trainer_env(fake, tmp_path)
    a = Agent(["--progress-file", str(tmp_path / "step"), *PY, script(tmp_path, PROGRESS),
               str(tmp_path / "go")], env=env)
    with killed_on_failure([a]):
        body = wait_for(lambda: [b for b in fake.accepted()
                                 if metrics(b).get("podrun_step") == "1200"], 30,
                        "a report with the trainer's step")[0]
        (tmp_path / "go").write_text("")
        assert a.wait(60) == 0, a.err
    assert "progressPercentage" not in body["trainerStatus"], body
    assert fake.invalid == []
