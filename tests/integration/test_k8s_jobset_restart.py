"""JobSet's in-place restart (restartStrategy: InPlaceRestart) with podrun as the container's
command: two agents on 127.0.0.2-3 in the pods of JobSet 'js' find each other through the test
API server (tests/fakes/k8s_api.py), which also plays JobSet's controller for in-place restart
(tests/fakes/k8s_objects.py). Each pod writes its attempt in its annotation, waits at the barrier
until every pod has it, and a failure restarts the job in place: both pods move to attempt 1
together, nothing exits, and the JobSet's status follows."""
import os
import pathlib
import sys

import pytest

from cluster import Agent, wait_for
from conftest import TORCH_PY

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402
import k8s_objects  # noqa: E402

KEY = k8s_objects.ATTEMPT_KEY

# rank 1 fails in the first attempt (restart count 0), then every rank succeeds
FAIL_ONCE = """
import os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([1.0])
dist.all_reduce(t)
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
print("rank=%s restart=%d world=%d" % (os.environ["RANK"], restart, int(t.item())), flush=True)
if os.environ["RANK"] == "1" and restart < int(os.environ["FAILS"]):
    sys.exit(3)
"""


def js_pod(i, **kw):
    d = {"name": f"js-workers-0-{i}", "phase": "Running", "ip": f"127.0.0.{2 + i}",
         "labels": {"jobset.sigs.k8s.io/jobset-name": "js",
                    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                    "jobset.sigs.k8s.io/job-index": "0",
                    "batch.kubernetes.io/job-completion-index": str(i)},
         "annotations": {"jobset.sigs.k8s.io/jobset-name": "js"}}
    d.update(kw)
    return d


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    yield a
    a.stop()


def agent(i, kc, script, extra=(), env=None):
    e = {"KUBECONFIG": str(kc), "POD_NAME": f"js-workers-0-{i}", "JOBSET_NAME": "js",
         "FAILS": "1"}
    e.update(env or {})
    return Agent(["--discovery", "k8s", "--nnodes", "2", "--nproc-per-node", "1",
                  "--rdzv-id", "js", "--python", TORCH_PY, "--max-restarts", "3",
                  "--term-timeout", "5", *extra, script], env=e, name=f"js-{i}")


def attempts(api):
    return [api.pods[("default", f"js-workers-0-{i}")]["metadata"].get("annotations", {})
            .get(KEY) for i in range(2)]


def start(api, tmp_path, fails=1, extra=(), strategy="InPlaceRestart", max_restarts=3,
          controller=True):
    kc = api.kubeconfig(tmp_path / "kc")
    worker = tmp_path / "w.py"
    worker.write_text(FAIL_ONCE)
    objs = k8s_objects.objects(api)
    objs.set_controller(controller)
    objs.put_jobset("js", replicas=1, parallelism=2, strategy=strategy,
                    max_restarts=max_restarts)
    for i in range(2):
        api.put_pod(js_pod(i))
    return objs, [agent(i, kc, str(worker), extra, {"FAILS": str(fails)}) for i in range(2)]


def test_failure_restarts_in_place_behind_the_barrier(api, tmp_path):
    # the controller is held back: each pod writes attempt 0 and waits at the barrier, before
    # any rendezvous
    objs, agents = start(api, tmp_path, controller=False)
    try:
        for a in agents:
            a.wait_err("this pod is at in-place restart attempt 0; waiting", 60)
        assert attempts(api) == ["0", "0"]
        assert not any("is node rank" in a.err_now() for a in agents)
        objs.set_controller(True)
        codes = [a.wait(120) for a in agents]
    finally:
        for a in agents:
            a.kill()
    errs = [a.err for a in agents]
    assert codes == [0, 0], errs
    # one restart, in place: both pods moved to attempt 1 together and never exited
    assert attempts(api) == ["1", "1"], errs
    st = objs.jobset("js")["status"]
    assert st["currentInPlaceRestartAttempt"] == 1 and st["previousInPlaceRestartAttempt"] == 0
    for a in agents:
        assert "every pod is at in-place restart attempt 0; the barrier is down" in a.err
        assert "every pod is at in-place restart attempt 1; the barrier is down" in a.err
        assert "restarting the job in place (restart 1 of 3)" in a.err
    out = "".join(a.out for a in agents)
    assert out.count("restart=1 world=2") == 2, out
    # podrun wrote its annotation with a merge patch on its own pod, nothing else
    patches = [r for r in api.request_log() if r["method"] == "PATCH"]
    assert {r["path"] for r in patches} == {f"/api/v1/namespaces/default/pods/js-workers-0-{i}"
                                            for i in range(2)}
    assert all(r["content_type"] == "application/merge-patch+json" for r in patches)


def test_restarts_past_the_jobsets_max_fail_the_jobset(api, tmp_path):
    """A worker that always fails: podrun's own --max-restarts ends it; the attempts moved on
    with every restart, and a JobSet whose maxRestarts is lower is failed by its controller."""
    objs, agents = start(api, tmp_path, fails=99, extra=["--max-restarts", "2"], max_restarts=1)
    try:
        codes = [a.wait(180) for a in agents]
    finally:
        for a in agents:
            a.kill()
    errs = [a.err for a in agents]
    assert codes == [170, 3], errs
    assert attempts(api) == ["2", "2"], errs
    st = objs.jobset("js")["status"]
    assert st["terminalState"] == "Failed", st
    assert st["conditions"][0]["reason"] == "ReachedMaxRestarts"
    for a in agents:
        assert "restarting the job in place (restart 1 of 2)" in a.err
        # the second restart was decided and each pod moved to attempt 2, past maxRestarts:
        # the JobSet failed, and podrun exits with the codes its restarts used up give
        assert "JobSet js: it has ended (Failed) while this pod waited at in-place restart " \
            "attempt 2" in a.err


def test_a_jobset_without_in_place_restart_starts_at_once(api, tmp_path):
    objs, agents = start(api, tmp_path, fails=0, strategy="Recreate")
    try:
        codes = [a.wait(120) for a in agents]
    finally:
        for a in agents:
            a.kill()
    assert codes == [0, 0], [a.err for a in agents]
    assert attempts(api) == [None, None]
    for a in agents:
        assert "its restartStrategy is not InPlaceRestart" in a.err
    assert not [r for r in api.request_log() if r["method"] == "PATCH"]


def test_a_pod_left_behind_restarts_the_job(api, tmp_path):
    """Another pod of the JobSet moved on (it was recreated, or JobSet's own agent restarted
    it): the JobSet's previous attempt passes this pod's, and podrun restarts the job in place
    through its own failure push, both pods moving on together."""
    hold = tmp_path / "hold.py"
    hold.write_text("import os, time, torch.distributed as dist\n"
                    "dist.init_process_group('gloo')\n"
                    "print('up', os.environ['TORCHELASTIC_RESTART_COUNT'], flush=True)\n"
                    "if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0':\n"
                    "    time.sleep(120)  # held until the restart under test stops it\n")
    kc = api.kubeconfig(tmp_path / "kc")
    objs = k8s_objects.objects(api)
    objs.put_jobset("js", replicas=1, parallelism=2)
    for i in range(2):
        api.put_pod(js_pod(i))
    agents = [agent(i, kc, str(hold)) for i in range(2)]
    try:
        wait_for(lambda: sum("up 0" in a.out_now() for a in agents) == 2, 90,
                 lambda: [a.err_now() for a in agents])
        with api.lock:   # what another pod's agent does: move its attempt on
            pod = api.pods[("default", "js-workers-0-1")]
            old = dict(pod["metadata"]["annotations"])
            pod["metadata"]["annotations"][KEY] = "1"
            api.rv += 1
            api._emit("MODIFIED", pod, {"metadata": {"annotations": old}})
            objs.reconcile_in_place()
        codes = [a.wait(120) for a in agents]
    finally:
        for a in agents:
            a.kill()
    errs = [a.err for a in agents]
    assert codes == [0, 0], errs
    assert "the JobSet restarts its pods in place (this pod's attempt 0 is at or below the " \
           "previous attempt 0)" in errs[0]
    assert attempts(api) == ["1", "1"], errs
    assert os.linesep.join(a.out for a in agents).count("up 1") == 2


@pytest.mark.parametrize("denied", ["jobsets:get", "pods:patch"])
def test_without_the_rights_the_job_runs_without_in_place_restart(api, tmp_path, denied):
    """A service account that may not read the JobSet or write the annotation: one line naming
    the rule, and the job runs (and restarts in place by podrun's own means) as without it."""
    api.deny([denied])
    objs, agents = start(api, tmp_path)
    codes = [a.wait(120) for a in agents]
    errs = [a.err for a in agents]
    assert codes == [0, 0], errs
    rule = {"jobsets:get": 'resources: ["jobsets"], verbs: ["get", "list", "watch"]',
            "pods:patch": 'resources: ["pods"], verbs: ["patch"]'}[denied]
    for a in agents:
        assert a.err.count("the job starts without in-place restart") == 1, a.err
        assert "403 Forbidden" in a.err and rule in a.err
        assert "restarting the job in place (restart 1 of 3)" in a.err
    assert "currentInPlaceRestartAttempt" not in objs.jobset("js")["status"]


def test_a_pod_that_joins_late_moves_the_waiting_one_on(api, tmp_path):
    """Pod 1's attempt 0 was written (by an earlier run of its container), so pod 0 passed the
    barrier and waits in the rendezvous for it. Pod 1's podrun then starts at the JobSet's next
    attempt: pod 0, whose round has not started, follows it there, and the job runs."""
    objs, agents = start(api, tmp_path, fails=0)
    agents[1].kill()
    agents[1].wait(30)
    with api.lock:   # the earlier run of pod 1's container wrote its attempt
        pod = api.pods[("default", "js-workers-0-1")]
        pod["metadata"]["annotations"][KEY] = "0"
        objs.reconcile_in_place()
    agents[0].wait_err("every pod is at in-place restart attempt 0; the barrier is down", 60)
    kc = tmp_path / "kc"
    late = agent(1, kc, str(tmp_path / "w.py"), env={"FAILS": "0"})
    try:
        codes = [agents[0].wait(120), late.wait(120)]
    finally:
        agents[0].kill()
        late.kill()
    assert codes == [0, 0], [agents[0].err, late.err]
    assert "this pod is at in-place restart attempt 1; waiting" in late.err
    assert "another pod moved on to in-place restart attempt 1 before this round started" \
        in agents[0].err
    assert attempts(api) == ["1", "1"]


def test_the_barrier_outlives_an_api_server_restart(api, tmp_path):
    """The API server goes away while the pods wait at the barrier and forgets its history: the
    JobSet's watch resumes (410 Gone: the JobSet read again), and the barrier comes down."""
    objs, agents = start(api, tmp_path, fails=0, controller=False)
    try:
        for a in agents:
            a.wait_err("this pod is at in-place restart attempt 0; waiting", 60)
        api.restart(down_for=1.0, compact=True)
        objs.set_controller(True)
        codes = [a.wait(120) for a in agents]
    finally:
        for a in agents:
            a.kill()
    assert codes == [0, 0], [a.err for a in agents]
    for a in agents:
        assert "every pod is at in-place restart attempt 0; the barrier is down" in a.err
    # each agent read its JobSet again after the restart, rather than only resuming its watch
    reads = [r for r in api.request_log() if r["method"] == "GET" and
             r["path"] == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/js"]
    assert len(reads) >= 4, ([(r["method"], r["path"], r.get("query")) for r in api.request_log()],
                             [a.err for a in agents])
