"""Kubernetes Events on the agent's own pod (--discovery k8s): two agents on 127.0.0.2-3 post,
through the test API server (tests/fakes/k8s_api.py, tests/fakes/k8s_objects.py), core/v1
Events whose involvedObject is their pod: the rendezvous complete, a failure with its root cause,
the restart, the job's end. A service account without the right gets one line and a job that
runs as before; an API server that stops answering never holds the job."""
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from cluster import Agent
from conftest import TORCH_PY

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402
import k8s_objects  # noqa: E402

LABELS = {"training.kubeflow.org/job-name": "ev",
          "training.kubeflow.org/operator-name": "pytorchjob-controller",
          "training.kubeflow.org/replica-type": "worker"}

WORKER = """
import os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if os.environ["RANK"] == "1" and restart < int(os.environ["FAILS"]):
    print("Traceback: ValueError: the dataset shard is empty", file=sys.stderr, flush=True)
    sys.exit(3)
"""


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    yield a
    a.stop()


def run(api, tmp_path, fails=0, extra=()):
    kc = api.kubeconfig(tmp_path / "kc")
    w = tmp_path / "w.py"
    w.write_text(WORKER)
    for i in range(2):
        api.put_pod({"name": f"ev-worker-{i}", "phase": "Running", "ip": f"127.0.0.{2 + i}",
                     "labels": dict(LABELS, **{"training.kubeflow.org/replica-index": str(i)})})
    return [Agent(["--discovery", "k8s", "--nnodes", "2", "--nproc-per-node", "1",
                   "--rdzv-id", "ev", "--python", TORCH_PY, "--max-restarts", "1", *extra,
                   str(w)], env={"KUBECONFIG": str(kc), "POD_NAME": f"ev-worker-{i}",
                                 "FAILS": str(fails)}, name=f"ev-{i}")
            for i in range(2)]


def finish(agents, timeout=120):
    try:
        return [a.wait(timeout) for a in agents]
    finally:
        for a in agents:
            a.kill()


def reasons(api, pod):
    return [e["reason"] for e in k8s_objects.events(api, pod)]


def test_events_of_a_failure_a_restart_and_the_end(api, tmp_path):
    agents = run(api, tmp_path, fails=1)
    codes = finish(agents)
    assert codes == [0, 0], [a.err for a in agents]
    for i in range(2):
        pod = f"ev-worker-{i}"
        assert reasons(api, pod) == ["RendezvousComplete", "WorkerFailed", "RestartingInPlace",
                                     "RendezvousComplete", "JobSucceeded"], \
            k8s_objects.events(api, pod)
        evs = k8s_objects.events(api, pod)
        uid = api.pods[("default", pod)]["metadata"]["uid"]
        for e in evs:
            # what kubectl describe pod asks for: the pod by kind, name, namespace and uid
            assert e["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": pod,
                                           "namespace": "default", "uid": uid}
            assert e["source"]["component"] == "podrun" and e["count"] == 1
            assert e["metadata"]["name"].startswith(pod + ".")
        first, failed, restart, second, end = evs
        assert first["type"] == "Normal"
        assert "round 0, 2 nodes, 2 workers; this pod is node rank %d" % i in first["message"]
        assert failed["type"] == "Warning"
        assert "rank 1 (local rank 0) on ev-worker-1: exit code 3" in failed["message"]
        assert "the dataset shard is empty" in failed["message"]
        assert "restarting the job in place (restart 1 of 1)" in restart["message"]
        assert "round 1" in second["message"] and "restart 1" in second["message"]
        assert end["type"] == "Normal" and "exited 0" in end["message"]
    # what a person sees: the real kubectl's describe of the pod lists them
    if os.access("/usr/bin/kubectl", os.X_OK):
        kc = tmp_path / "kc"
        r = subprocess.run(["/usr/bin/kubectl", "describe", "pod", "ev-worker-0"],
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                "KUBECONFIG": str(kc)},
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        shown = r.stdout.split("Events:", 1)[1]
        for reason in ("RendezvousComplete", "WorkerFailed", "RestartingInPlace",
                       "JobSucceeded"):
            assert reason in shown, r.stdout
        assert "the dataset shard is empty" in shown


def test_the_end_of_a_failed_job_is_a_warning(api, tmp_path):
    agents = run(api, tmp_path, fails=9, extra=["--max-restarts", "0"])
    codes = finish(agents)
    assert codes == [170, 3], [a.err for a in agents]
    end = k8s_objects.events(api, "ev-worker-1")[-1]
    assert end["reason"] == "JobFailed" and end["type"] == "Warning"
    assert end["message"].startswith("podrun exits 3: ")


def test_a_service_account_without_the_right_is_one_line(api, tmp_path):
    api.deny(["events:create"])
    agents = run(api, tmp_path, fails=1)
    codes = finish(agents)
    assert codes == [0, 0], [a.err for a in agents]
    assert k8s_objects.events(api) == []
    for a in agents:
        assert a.err.count("cannot post Events on pod") == 1, a.err
        assert "403 Forbidden: events is forbidden" in a.err
        assert 'resources: [\\"events\\"], verbs: [\\"create\\"]' not in a.err
        assert 'resources: ["events"], verbs: ["create"]' in a.err
    # after the 403 nothing more was tried
    posts = [r for r in api.request_log() if r["method"] == "POST"]
    assert len(posts) == 2, posts


def test_an_api_server_that_stops_answering_never_holds_the_job(api, tmp_path):
    """The API server goes silent once the pods are found: the connection opens and nothing
    answers. Every event is dropped within its bound, said once, and the job ends as it would."""
    agents = run(api, tmp_path, fails=0)
    for a in agents:
        a.wait_err("is node rank", 60)
    port = api.port
    api.stop()
    silent = socket.socket()
    silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    silent.bind(("127.0.0.1", port))
    silent.listen(64)   # accepts into the backlog and never answers
    try:
        codes = finish(agents, timeout=90)
    finally:
        silent.close()
    assert codes == [0, 0], [a.err for a in agents]
