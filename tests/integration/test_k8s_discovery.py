"""Kubernetes discovery in the agent (--discovery k8s): agents on 127.0.0.2-5 find each other only
through the test API server (tests/fakes/k8s_api.py), each knowing nothing but its pod's name and
a kubeconfig; they wait for the pods to be Running and Ready, run a real gloo all_reduce, and a
pod deleted under the running job stops every agent at once with the lost-node code."""
import json
import os
import pathlib
import sys
import threading
import time

import pytest

from cluster import WORKERS, Agent, parse_kv, result_lines, wait_files, wait_for
from conftest import TORCH_PY

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402

JOB_LABELS = {"training.kubeflow.org/job-name": "job",
              "training.kubeflow.org/operator-name": "pytorchjob-controller",
              "training.kubeflow.org/replica-type": "worker"}
ROLE_LINE = ('the service account needs a Role in namespace default with rules [apiGroups: [""], '
             'resources: ["pods"], verbs: ["get", "list", "watch"]] and a RoleBinding to it')

# A worker that holds the job after its all_reduce until it is stopped, and says so in a file.
HOLD_WORKER = """
import os, pathlib, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(os.environ["RANK"])])
dist.all_reduce(t)
print("allreduce rank=%s sum=%d" % (os.environ["RANK"], int(t.item())), flush=True)
pathlib.Path(os.environ["MARK_DIR"], os.environ["RANK"]).touch()
time.sleep(120)  # the worker holds the job until the test stops it (bounded)
"""


def pod(i, **kw):
    """Pod i of a PyTorchJob 'job' (replica index i), at 127.0.0.(2+i) once it has an IP."""
    d = {"name": f"job-worker-{i}", "phase": "Pending",
         "labels": dict(JOB_LABELS, **{"training.kubeflow.org/replica-index": str(i)})}
    d.update(kw)
    return d


def running(i, **kw):
    return pod(i, **dict({"phase": "Running", "ip": f"127.0.0.{2 + i}"}, **kw))


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    yield a
    a.stop()


def k8s_agent(i, n, kubeconfig, script, extra=(), env=None, script_args=()):
    """The agent of pod job-worker-i: its pod name and a kubeconfig, nothing about its peers."""
    e = {"KUBECONFIG": str(kubeconfig), "POD_NAME": f"job-worker-{i}"}
    e.update(env or {})
    args = ["--discovery", "k8s", "--nnodes", str(n), "--nproc-per-node", "1",
            "--rdzv-id", "k8sjob", "--python", TORCH_PY, *extra, script, *script_args]
    return Agent(args, env=e, name=f"job-worker-{i}")


def test_four_agents_find_each_other_through_the_api(api, tmp_path):
    kc = api.kubeconfig(tmp_path / "kc")
    for i in range(4):
        api.put_pod(pod(i))
    agents = [k8s_agent(i, 4, kc, os.path.join(WORKERS, "allreduce.py")) for i in range(4)]
    # the pods come up one by one, one of them after an image pull that backs off; each step
    # once every agent follows the watch, and the waiting lines named the pods held back
    watching(api, 4, agents)
    api.put_pod(running(2, waiting="ImagePullBackOff", ready=False))
    api.put_pod(pod(3, unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))
    said(agents, "job-worker-2 (ImagePullBackOff",
         "job-worker-3 (Pending: Unschedulable: 0/3 nodes are available")
    for i in (1, 3, 0):
        api.put_pod(running(i))
    api.put_pod(running(2))
    codes = [a.wait(120) for a in agents]
    assert codes == [0] * 4, [a.err for a in agents]
    res = [parse_kv(l) for l in result_lines(agents)]
    assert sorted(int(r["rank"]) for r in res) == [0, 1, 2, 3]
    assert all(int(r["sum"]) == 6 and int(r["world"]) == 4 for r in res)
    # node rank = the operator's replica index; the store on the rank-0 pod
    for i, a in enumerate(agents):
        r = parse_kv(result_lines([a])[0])
        assert int(r["group_rank"]) == i
        assert f"job-worker-{i} (127.0.0.{2 + i}) is node rank {i}" in a.err
        assert "the job store is on job-worker-0 (127.0.0.2)" in a.err
    err = "".join(a.err for a in agents)
    # the waiting lines named the pods that were not there and why
    assert "Pods Running and Ready".lower() in err.lower()
    assert "job-worker-2 (ImagePullBackOff" in err
    assert "job-worker-3 (Pending: Unschedulable: 0/3 nodes are available" in err
    assert "(from this pod's Kubeflow labels)" in err
    # they waited on the watch: one list each, no polling
    lists = [q for q in api.request_log()
             if q["path"] == "/api/v1/namespaces/default/pods" and "watch" not in q["query"]]
    assert len(lists) == 4, lists


def watching(api, n, agents):
    """Waits until n watches of the pods are open (the agents listed, then follow the watch)."""
    wait_for(lambda: api.open_watches() >= n, 60,
             lambda: f"{n} watches: {api.open_watches()} {[a.proc.poll() for a in agents]}")


def said(agents, *texts, timeout=60):
    """Waits until the agents' stderr, together, holds every text."""
    def all_said():
        err = "".join(a.err_now() for a in agents)
        return all(t in err for t in texts)
    wait_for(all_said, timeout, lambda: f"{texts} in {[a.err_now() for a in agents]}")


@pytest.mark.parametrize("how", ["deleted", "failed"])
def test_pod_lost_mid_job_stops_every_agent(api, tmp_path, how):
    """The lost pod's agent is still alive and heartbeating here (no kubelet stops it), so only
    the watch can tell the job; every agent stops with the peer-lost code."""
    kc = api.kubeconfig(tmp_path / "kc")
    marks = tmp_path / "marks"
    marks.mkdir()
    worker = tmp_path / "hold.py"
    worker.write_text(HOLD_WORKER)
    for i in range(4):
        api.put_pod(running(i))
    agents = [k8s_agent(i, 4, kc, str(worker), env={"MARK_DIR": str(marks)},
                        extra=["--term-timeout", "5"]) for i in range(4)]
    try:
        wait_files(marks, 4, 90, alive=[a.proc for a in agents])
        t0 = time.monotonic()
        if how == "deleted":
            api.delete_pod("job-worker-2")
        else:
            api.put_pod(running(2, phase="Failed", ready=False, reason="Evicted",
                                message="The node was low on resource: memory."))
        done = []
        threads = [threading.Thread(target=lambda a=a: (a.wait(60), done.append(
            time.monotonic() - t0))) for a in agents]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for a in agents:
            a.kill()
    codes = [a.proc.returncode for a in agents]
    assert codes == [171] * 4, [a.err for a in agents]
    why = "pod deleted" if how == "deleted" else "pod Failed: Evicted"
    for a in agents:
        assert f"job-worker-2: agent lost: {why} (seen by job-worker-" in a.err, a.err
    print(f"pod {how}: every agent stopped {max(done):.3f} s after it (median "
          f"{sorted(done)[len(done) // 2]:.3f} s)")


def test_denied_ends_with_the_role_needed(api, tmp_path):
    kc = api.kubeconfig(tmp_path / "kc")
    api.put_pod(running(0))
    api.deny(["get", "list", "watch"])
    a = k8s_agent(0, 2, kc, os.path.join(WORKERS, "allreduce.py"))
    assert a.wait(30) == 1
    assert 'pods "job-worker-0" is forbidden' in a.err
    assert ROLE_LINE in a.err
    # with a selector the pod is not read: the list is what is refused
    a = k8s_agent(0, 2, kc, os.path.join(WORKERS, "allreduce.py"),
                  extra=["--k8s-selector", "training.kubeflow.org/job-name=job"])
    assert a.wait(30) == 1
    assert "403 Forbidden: pods is forbidden" in a.err and ROLE_LINE in a.err
    assert a.err.count("needs a Role") == 1


IN_CLUSTER = ('mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount'
              ' && mount --bind "$0" /run/secrets/kubernetes.io/serviceaccount && exec "$@"')


def in_cluster(api, tmp_path):
    """A service account directory as the kubelet mounts it, and the command prefix that mounts
    it at its place for one agent (a private mount namespace) and the env that points at the
    API server: the agent's in-cluster credentials, token file included."""
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(api.token())
    (sa / "ca.crt").write_bytes(pathlib.Path(api.pki["ca.crt"]).read_bytes())
    (sa / "namespace").write_text("default")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port),
           "KUBECONFIG": ""}
    return sa, ["unshare", "-m", "sh", "-c", IN_CLUSTER, str(sa)], env


@pytest.mark.parametrize("creds", ["in-cluster", "kubeconfig tokenFile"])
def test_rotated_token_is_read_again(api, tmp_path, creds):
    """The token file is read before every request: a token rotated while the agents wait (the
    old one refused from then on, every watch cut) does not stop them."""
    if creds == "in-cluster":
        sa, prefix, env = in_cluster(api, tmp_path)
        tok, kc = sa / "token", ""
    else:
        tok, prefix, env = tmp_path / "token", [], {}
        tok.write_text(api.token())
        kc = tmp_path / "kc"
        api.kubeconfig(kc)
        cfg = json.loads(kc.read_text())
        cfg["users"][0]["user"] = {"tokenFile": str(tok)}
        kc.write_text(json.dumps(cfg))
    for i in range(2):
        api.put_pod(pod(i))
    agents = []
    for i in range(2):
        e = dict(env, KUBECONFIG=str(kc), POD_NAME=f"job-worker-{i}") if kc else \
            dict(env, POD_NAME=f"job-worker-{i}")
        args = ["--discovery", "k8s", "--nnodes", "2", "--rdzv-id", "k8sjob", "--python",
                TORCH_PY, os.path.join(WORKERS, "allreduce.py")]
        agents.append(Agent(args, env=e, prefix=prefix, name=f"job-worker-{i}"))
    watching(api, 2, agents)   # both wait on the watch
    before = len(api.request_log())
    api.rotate_token(also_write=[str(tok)])
    api.end_watches()
    # both watch again, with the token read again
    wait_for(lambda: len([q for q in api.request_log()[before:] if q["query"].get("watch")]) >= 2,
             60, lambda: f"the agents to watch again: {api.request_log()[before:]}")
    for i in range(2):
        api.put_pod(running(i))
    assert [a.wait(90) for a in agents] == [0, 0], [a.err for a in agents]
    log = api.request_log()
    assert not [q for q in log if q["user"] is None], log
    if creds == "in-cluster":   # the service account's namespace and its CA were used
        assert any(q["path"] == "/api/v1/namespaces/default/pods/job-worker-0" for q in log)
        assert "credentials" not in "".join(a.err for a in agents)


def test_usage_errors(api, tmp_path, podrun):
    kc = api.kubeconfig(tmp_path / "kc")
    api.put_pod(running(0))
    api.put_pod({"name": "web", "phase": "Running", "ip": "127.0.0.9", "labels": {"app": "web"}})
    # a pod without any operator's labels: give a selector
    a = k8s_agent(0, 2, kc, "true", env={"POD_NAME": "web"})
    assert a.wait(30) == 2
    assert "pod web: cannot tell the job's pods from its labels" in a.err
    assert "give --k8s-selector" in a.err
    # a selector that does not match this pod
    a = k8s_agent(0, 2, kc, "true", extra=["--k8s-selector", "app=web"])
    assert a.wait(30) == 2
    assert "this pod (job-worker-0) is not among the pods the selector matches" in a.err
    # a pod that does not exist
    a = k8s_agent(0, 2, kc, "true", env={"POD_NAME": "nope"})
    assert a.wait(30) == 2
    assert "this pod (nope) is not in namespace default" in a.err


def test_wait_times_out_naming_the_pods(api, tmp_path):
    kc = api.kubeconfig(tmp_path / "kc")
    api.put_pod(running(0))
    api.put_pod(pod(1, waiting="CrashLoopBackOff", phase="Running"))
    a = k8s_agent(0, 2, kc, "true", extra=["--rdzv-conf", "join_timeout=2"])
    assert a.wait(30) == 173
    assert "not ready within 2s: 1/2 pods Running and Ready; not yet: job-worker-1 " \
           "(CrashLoopBackOff: back-off 40s restarting failed container" in a.err
