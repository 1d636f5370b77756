"""What the test API server serves beyond reading pods (tests/fakes/k8s_objects.py) is what the
real one serves: the real kubectl, pointed at it, patches a pod's annotation, creates and lists
Events and shows them under `kubectl describe pod`, and reads a JobSet with its in-place restart
status. Skipped, saying why, where /usr/bin/kubectl is not installed."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402
import k8s_objects  # noqa: E402

KUBECTL = "/usr/bin/kubectl"

if not os.access(KUBECTL, os.X_OK):
    print(f"test_k8s_fake_objects: skipped, {KUBECTL} is not installed", file=sys.stderr)
    pytest.skip(f"{KUBECTL} is not installed", allow_module_level=True)

POD = {"name": "js-workers-0-0", "phase": "Running", "ip": "10.0.0.1",
       "labels": {"jobset.sigs.k8s.io/jobset-name": "js"}}


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api").start()
    a.put_pod(POD)
    yield a
    a.stop()


def kubectl(tmp_path, api, *args, stdin=None):
    kc = api.kubeconfig(tmp_path / "kc")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kc)}
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True,
                          timeout=60, input=stdin)


def test_patch_an_annotation_and_the_controller_follows(api, tmp_path):
    objs = k8s_objects.objects(api)
    objs.put_jobset("js", replicas=1, parallelism=1)
    rv = api.pods[("default", "js-workers-0-0")]["metadata"]["resourceVersion"]
    r = kubectl(tmp_path, api, "patch", "pod", "js-workers-0-0", "--type", "merge", "-p",
                json.dumps({"metadata": {"annotations": {k8s_objects.ATTEMPT_KEY: "0"}}}))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pod/js-workers-0-0 patched"
    r = kubectl(tmp_path, api, "get", "pod", "js-workers-0-0", "-o", "json")
    meta = json.loads(r.stdout)["metadata"]
    assert meta["annotations"] == {k8s_objects.ATTEMPT_KEY: "0"}
    assert int(meta["resourceVersion"]) > int(rv)
    # the JobSet's one pod is at attempt 0: the barrier is down
    r = kubectl(tmp_path, api, "get", "jobset", "js", "-o", "yaml")
    assert r.returncode == 0, r.stderr
    js = yaml.safe_load(r.stdout)
    assert js["kind"] == "JobSet" and js["status"]["currentInPlaceRestartAttempt"] == 0
    assert js["spec"]["failurePolicy"]["restartStrategy"] == "InPlaceRestart"
    # a patch of the spec is refused as the API server refuses it
    r = kubectl(tmp_path, api, "patch", "pod", "js-workers-0-0", "--type", "merge", "-p",
                '{"spec": {"nodeName": "elsewhere"}}')
    assert r.returncode == 1 and "is invalid" in r.stderr
    api.deny(["pods:patch"])
    r = kubectl(tmp_path, api, "annotate", "pod", "js-workers-0-0", "x=1")
    assert r.returncode == 1
    assert 'cannot patch resource "pods" in API group ""' in r.stderr, r.stderr


def test_events_in_kubectl_describe_and_get(api, tmp_path):
    uid = api.pods[("default", "js-workers-0-0")]["metadata"]["uid"]
    ev = {"apiVersion": "v1", "kind": "Event",
          "metadata": {"name": "js-workers-0-0.1", "namespace": "default"},
          "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "js-workers-0-0",
                             "namespace": "default", "uid": uid},
          "reason": "WorkerFailed", "message": "rank 1 on js-workers-0-0: exit code 3",
          "type": "Warning", "source": {"component": "podrun", "host": "node-7"},
          "firstTimestamp": "2026-12-07T07:00:00Z", "lastTimestamp": "2026-12-07T07:00:00Z",
          "count": 1}
    r = kubectl(tmp_path, api, "create", "--validate=false", "-f", "-", stdin=json.dumps(ev))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "event/js-workers-0-0.1 created"
    r = kubectl(tmp_path, api, "create", "--validate=false", "-f", "-", stdin=json.dumps(ev))
    assert r.returncode == 1 and "AlreadyExists" in r.stderr, r.stderr
    bad = dict(ev, type="Fatal", metadata={"name": "x", "namespace": "default"})
    r = kubectl(tmp_path, api, "create", "--validate=false", "-f", "-", stdin=json.dumps(bad))
    assert r.returncode == 1 and 'type: Unsupported value: "Fatal"' in r.stderr, r.stderr
    r = kubectl(tmp_path, api, "describe", "pod", "js-workers-0-0")
    assert r.returncode == 0, r.stderr
    events = r.stdout.split("Events:", 1)[1]
    assert "Warning  WorkerFailed" in events and "podrun" in events, r.stdout
    assert "rank 1 on js-workers-0-0: exit code 3" in events
    r = kubectl(tmp_path, api, "get", "events", "--field-selector",
                "involvedObject.name=js-workers-0-0,reason=WorkerFailed", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [e["reason"] for e in json.loads(r.stdout)["items"]] == ["WorkerFailed"]
    api.deny(["events:create"])
    r = kubectl(tmp_path, api, "create", "--validate=false", "-f", "-",
                stdin=json.dumps(dict(ev, metadata={"name": "y", "namespace": "default"})))
    assert r.returncode == 1
    assert 'cannot create resource "events" in API group "" in the namespace "default"' \
        in r.stderr, r.stderr
