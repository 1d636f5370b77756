"""The test API server (tests/fakes/k8s_api.py) is faithful: the real kubectl, pointed at it
through a kubeconfig, lists, gets and watches pods and reads its errors as it would a real API
server's. Skipped, saying why, where /usr/bin/kubectl is not installed."""
import json
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import threading

import pytest

from cluster import wait_for

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402

KUBECTL = "/usr/bin/kubectl"

if not os.access(KUBECTL, os.X_OK):
    print(f"test_k8s_fake: skipped, {KUBECTL} is not installed", file=sys.stderr)
    pytest.skip(f"{KUBECTL} is not installed", allow_module_level=True)


def worker(i, **kw):
    d = {"name": f"job-worker-{i}", "phase": "Running", "ip": f"10.0.0.{i + 1}",
         "labels": {"training.kubeflow.org/job-name": "job",
                    "training.kubeflow.org/replica-type": "worker",
                    "training.kubeflow.org/replica-index": str(i)}}
    d.update(kw)
    return d


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api").start()
    yield a
    a.stop()


def kubectl(tmp_path, kubeconfig, *args, timeout=60):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def names(items):
    return sorted(p["metadata"]["name"] for p in items)


def test_list_by_label_selector(api, tmp_path):
    for i in range(3):
        api.put_pod(worker(i))
    api.put_pod(worker(3, phase="Pending", ip=None, waiting="ImagePullBackOff"))
    api.put_pod({"name": "job-master-0", "phase": "Running", "ip": "10.0.0.9",
                 "labels": {"training.kubeflow.org/job-name": "job",
                            "training.kubeflow.org/replica-type": "master",
                            "training.kubeflow.org/replica-index": "0"}})
    api.put_pod({"name": "unrelated", "labels": {"app": "web"}, "phase": "Running",
                 "ip": "10.0.1.1"})
    kc = api.kubeconfig(tmp_path / "kc")

    r = kubectl(tmp_path, kc, "get", "pods", "-l", "training.kubeflow.org/job-name=job",
                "-o", "json")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    assert names(items) == ["job-master-0", "job-worker-0", "job-worker-1", "job-worker-2",
                            "job-worker-3"]
    by_name = {p["metadata"]["name"]: p for p in items}
    assert by_name["job-worker-1"]["status"]["podIP"] == "10.0.0.2"
    assert by_name["job-worker-1"]["status"]["phase"] == "Running"
    w3 = by_name["job-worker-3"]["status"]
    assert w3["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert "podIP" not in w3

    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json", "-l",
                "training.kubeflow.org/replica-type in (master),"
                "training.kubeflow.org/job-name==job")
    assert r.returncode == 0, r.stderr
    assert names(json.loads(r.stdout)["items"]) == ["job-master-0"]

    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json", "-l",
                "training.kubeflow.org/replica-type notin (master),!app")
    assert names(json.loads(r.stdout)["items"]) == [f"job-worker-{i}" for i in range(4)]

    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json", "-l", "app!=web")
    assert "unrelated" not in names(json.loads(r.stdout)["items"])

    log = [q for q in api.request_log() if q["path"] == "/api/v1/namespaces/default/pods"]
    assert log[0]["query"]["labelSelector"] == "training.kubeflow.org/job-name=job"
    assert all(q["auth"] == "Bearer" for q in log)


def test_field_selector_and_chunked_list(api, tmp_path):
    for i in range(5):
        api.put_pod(worker(i, phase="Running" if i % 2 == 0 else "Pending"))
    kc = api.kubeconfig(tmp_path / "kc")
    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json",
                "--field-selector", "status.phase=Running")
    assert r.returncode == 0, r.stderr
    assert names(json.loads(r.stdout)["items"]) == ["job-worker-0", "job-worker-2",
                                                    "job-worker-4"]
    # kubectl follows the continue tokens of a list served in pages
    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json", "--chunk-size=2")
    assert names(json.loads(r.stdout)["items"]) == [f"job-worker-{i}" for i in range(5)]
    pages = [q for q in api.request_log() if q["query"].get("limit") == "2"]
    assert len(pages) == 3 and "continue" in pages[1]["query"]

    r = kubectl(tmp_path, kc, "get", "pods", "--field-selector", "spec.priority=0")
    assert r.returncode != 0
    assert "field label not supported: spec.priority" in r.stderr


def test_get_by_name_and_not_found(api, tmp_path):
    api.put_pod(worker(0))
    kc = api.kubeconfig(tmp_path / "kc")
    r = kubectl(tmp_path, kc, "get", "pod", "job-worker-0", "-o", "json")
    assert r.returncode == 0, r.stderr
    pod = json.loads(r.stdout)
    assert pod["kind"] == "Pod" and pod["metadata"]["name"] == "job-worker-0"
    r = kubectl(tmp_path, kc, "get", "pod", "job-worker-7")
    assert r.returncode == 1
    assert r.stderr.strip() == 'Error from server (NotFound): pods "job-worker-7" not found'
    r = kubectl(tmp_path, kc, "version", "-o", "json")
    assert json.loads(r.stdout)["serverVersion"]["gitVersion"] == "v1.30.2"


class Watch:
    """kubectl get pods --watch --output-watch-events -o json, read as it prints."""

    def __init__(self, tmp_path, kc, *args):
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kc)}
        self.p = subprocess.Popen([KUBECTL, "get", "pods", "--watch", "--output-watch-events",
                                   "-o", "json", *args], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.events = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        dec = json.JSONDecoder()
        buf = ""
        for line in self.p.stdout:
            buf += line
            while buf.strip():
                try:
                    obj, end = dec.raw_decode(buf.lstrip())
                except ValueError:
                    break
                buf = buf.lstrip()[end:]
                with self.cv:
                    self.events.append(obj)
                    self.cv.notify_all()

    def wait(self, n, timeout=20):
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.events) >= n, timeout), self.events
            return [(e["type"], e["object"].get("metadata", {}).get("name")) for e in self.events]

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def test_watch_sees_adds_modifies_deletes(api, tmp_path):
    api.put_pod(worker(0))
    api.put_pod(worker(1))
    kc = api.kubeconfig(tmp_path / "kc")
    w = Watch(tmp_path, kc, "-l", "training.kubeflow.org/job-name=job")
    try:
        assert w.wait(2) == [("ADDED", "job-worker-0"), ("ADDED", "job-worker-1")]
        # kubectl has listed, then opened its watch
        wait_for(lambda: api.open_watches() > 0, 20, "kubectl's watch")
        api.put_pod(worker(1, ready=False, waiting="CrashLoopBackOff", restarts=2))
        api.put_pod(worker(2))
        api.delete_pod("job-worker-0", graceful=True)
        api.delete_pod("job-worker-0")
        # a pod whose labels stop matching leaves the watcher's view as DELETED
        api.put_pod(dict(worker(2), labels={"app": "moved"}))
        ev = w.wait(7)
        assert ev[2:] == [("MODIFIED", "job-worker-1"), ("ADDED", "job-worker-2"),
                          ("MODIFIED", "job-worker-0"), ("DELETED", "job-worker-0"),
                          ("DELETED", "job-worker-2")]
        crash = w.events[2]["object"]["status"]["containerStatuses"][0]["state"]["waiting"]
        assert crash["reason"] == "CrashLoopBackOff"
        assert "deletionTimestamp" in w.events[4]["object"]["metadata"]
        # the server drops the watch with 410 Gone: kubectl shows the Status
        api.end_watches(expire=True)
        ev = w.wait(8)
        err = w.events[7]
        assert err["type"] == "ERROR"
        assert err["object"]["code"] == 410 and err["object"]["reason"] == "Expired"
        assert err["object"]["message"].startswith("too old resource version: ")
        watches = [q["query"] for q in api.request_log() if q["query"].get("watch")]
        assert watches and watches[0]["resourceVersion"] == "1002"
    finally:
        w.stop()


def test_raw_watch_bookmarks_and_gone(api, tmp_path):
    api.put_pod(worker(0))
    kc = api.kubeconfig(tmp_path / "kc")
    rv = api.rv
    api.put_pod(worker(1))
    path = "/api/v1/namespaces/default/pods"
    r = kubectl(tmp_path, kc, "get", "--raw",
                f"{path}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=2")
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == \
        "job-worker-1"
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    assert marks and marks[0]["object"]["metadata"]["resourceVersion"] == str(api.rv)
    assert marks[0]["object"]["kind"] == "Pod"
    api.compact()
    r = kubectl(tmp_path, kc, "get", "--raw", f"{path}?watch=1&resourceVersion={rv}")
    assert json.loads(r.stdout) == {
        "type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {rv} ({api.oldest_rv - 1})",
            "reason": "Expired", "code": 410}}


def test_unauthorized_and_token_rotation(api, tmp_path):
    api.put_pod(worker(0))
    kc = api.kubeconfig(tmp_path / "kc")
    assert kubectl(tmp_path, kc, "get", "pods", "-o", "json").returncode == 0
    api.rotate_token()
    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json")
    assert r.returncode == 1
    assert "error: You must be logged in to the server (Unauthorized)" in r.stderr
    kc2 = api.kubeconfig(tmp_path / "kc2")
    r = kubectl(tmp_path, kc2, "get", "pods", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert names(json.loads(r.stdout)["items"]) == ["job-worker-0"]


def test_forbidden(api, tmp_path):
    api.put_pod(worker(0))
    kc = api.kubeconfig(tmp_path / "kc")
    api.deny(["list", "get"])
    r = kubectl(tmp_path, kc, "get", "pods", "-l", "training.kubeflow.org/job-name=job")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User '
        '"system:serviceaccount:default:default" cannot list resource "pods" in API group "" '
        'in the namespace "default"')
    r = kubectl(tmp_path, kc, "get", "pod", "job-worker-0")
    assert r.stderr.strip() == (
        'Error from server (Forbidden): pods "job-worker-0" is forbidden: User '
        '"system:serviceaccount:default:default" cannot get resource "pods" in API group "" '
        'in the namespace "default"')


def test_client_certificate(api, tmp_path):
    api.put_pod(worker(0))
    kc = api.kubeconfig(tmp_path / "kc", token=False, client_cert=True)
    r = kubectl(tmp_path, kc, "get", "pods", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert names(json.loads(r.stdout)["items"]) == ["job-worker-0"]
    users = {q["user"] for q in api.request_log()}
    assert users == {"podrun-test-client"}


def test_a_stop_closes_the_open_tls_connections(api, tmp_path):
    """A client's keep-alive connection, idle between two requests, is closed when the server
    stops: its handler would otherwise serve the next request (a watch, say) across a restart,
    with the history the restart forgot."""
    ctx = ssl.create_default_context(cafile=api.pki["ca.crt"])
    raw = socket.create_connection(("127.0.0.1", api.port), timeout=10)
    conn = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    conn.sendall(b"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Authorization: Bearer " + api.token().encode() + b"\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        got += conn.recv(65536)
    assert got.startswith(b"HTTP/1.1 200"), got
    conn.settimeout(5)
    api.stop()
    try:
        rest = conn.recv(65536)   # the rest of the body, then the end
        while rest:
            rest = conn.recv(65536)
    except (ssl.SSLError, ConnectionResetError):
        pass   # closed, as a reset
    except socket.timeout:
        pytest.fail("the connection stayed open after the server stopped")
    finally:
        conn.close()
