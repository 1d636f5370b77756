#!/usr/bin/python3
"""tests/fakes/k8s_api.py — a small Kubernetes API server for tests: the core v1 pod API over
HTTPS with the JSON the real API server sends, so podrun (and kubectl, which proves the fake
faithful in tests/integration/test_k8s_fake.py) can be tested without a cluster.

Served (namespaced pods, which is what discovery reads; a pod's metadata PATCH, Events and
JobSets are tests/fakes/k8s_objects.py's):
  GET /version, /api, /apis, /api/v1                 version and legacy discovery documents
  GET /api/v1/namespaces/NS/pods                     PodList; labelSelector (=, ==, !=, in,
                                                     notin, exists, !exists), fieldSelector
                                                     (metadata.name/namespace, spec.nodeName,
                                                     status.phase, status.podIP), limit+continue
  GET /api/v1/namespaces/NS/pods?watch=1             a chunked stream of watch events, one JSON
                                                     object per line: ADDED/MODIFIED/DELETED, and
                                                     BOOKMARK with allowWatchBookmarks; from
                                                     resourceVersion (none or "0": the current
                                                     pods first); a resourceVersion older than the
                                                     kept history gets ERROR 410 Expired;
                                                     timeoutSeconds ends the stream
  GET /api/v1/namespaces/NS/pods/NAME                Pod, or 404 NotFound
Authentication: "Authorization: Bearer <token>" where the token is the current content of
DIR/token (re-read on every request, so rotating is rewriting that file), or a client
certificate signed by the test CA (user = CN). Anything else: 401 Unauthorized. Verbs denied to
a user get 403 Forbidden with the API server's message. Every error is a v1 Status object.

In-process: api = FakeAPI(dir); api.start(); api.put_pod({...}); ... api.stop().
As a script: k8s_api.py --dir DIR prints "PORT <https port> CONTROL <http port>" and takes
control requests on 127.0.0.1:<http port>: POST a JSON body to /pod (create or update), /pods (a
list of them), /delete, /compact, /rotate-token, /end-watches, /deny, /restart, /bookmark, /inject; GET
/requests, /token, /watches. Each POST runs the FakeAPI method of the same name.

The pod description accepted by put_pod (everything optional but name):
  {"name", "namespace", "labels", "annotations", "phase": Pending|Running|Succeeded|Failed,
   "ip", "node", "hostname", "subdomain", "ready": bool, "unschedulable": message,
   "waiting": reason (ContainerCreating, ImagePullBackOff, CrashLoopBackOff, ...),
   "waiting_message", "init_waiting": reason, "restarts": n, "reason"/"message" (pod status),
   "exit_code": n (terminated containers), "deleting": bool}
"""
import argparse
import base64
import copy
import datetime
import json
import os
import queue
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_objects  # noqa: E402
import tlsca  # noqa: E402

SERVER_VERSION = {
    "major": "1", "minor": "30", "gitVersion": "v1.30.2",
    "gitCommit": "39683505b630ff2121012f3c5b16215a1449d5ed", "gitTreeState": "clean",
    "buildDate": "2024-06-11T20:21:00Z", "goVersion": "go1.22.4", "compiler": "gc",
    "platform": "linux/amd64",
}
POD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
FIELDS = {
    "metadata.name": lambda p: p["metadata"]["name"],
    "metadata.namespace": lambda p: p["metadata"]["namespace"],
    "spec.nodeName": lambda p: p["spec"].get("nodeName", ""),
    "status.phase": lambda p: p["status"].get("phase", ""),
    "status.podIP": lambda p: p["status"].get("podIP", ""),
}


def now_ts(offset=0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def status_obj(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason}
    if details is not None:
        s["details"] = details
    s["code"] = code
    return s


class SelectorError(ValueError):
    pass


# ---- selectors -------------------------------------------------------------------------------

_LABEL_KEY = r"(?:[a-z0-9A-Z.\-]+/)?[a-zA-Z0-9]([a-zA-Z0-9_.\-]*[a-zA-Z0-9])?"


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_label_selector(text):
    """A list of (key, op, values) with op one of =, !=, in, notin, exists, !exists."""
    reqs = []
    if not text or not text.strip():
        return reqs
    for part in _split_top(text):
        part = part.strip()
        if not part:
            raise SelectorError(f"unable to parse requirement: found '', expected: identifier")
        m = re.fullmatch(r"(\S+?)\s+(in|notin)\s*\((.*)\)", part)
        if m:
            key, op, vals = m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",")]
            reqs.append((key, op, set(vals)))
            continue
        m = re.fullmatch(r"(\S+?)\s*(==|=|!=)\s*(\S*)", part)
        if m:
            op = "!=" if m.group(2) == "!=" else "="
            reqs.append((m.group(1), op, {m.group(3)}))
            continue
        m = re.fullmatch(r"!\s*(\S+)", part)
        if m:
            reqs.append((m.group(1), "!exists", set()))
            continue
        if re.fullmatch(_LABEL_KEY, part):
            reqs.append((part, "exists", set()))
            continue
        raise SelectorError(f"unable to parse requirement: <nil>: Invalid value: \"{part}\"")
    for key, _, _ in reqs:
        if not re.fullmatch(_LABEL_KEY, key):
            raise SelectorError(f"unable to parse requirement: <nil>: Invalid value: \"{key}\": "
                                "name part must consist of alphanumeric characters, '-', '_' or "
                                "'.', and must start and end with an alphanumeric character")
    return reqs


def labels_match(reqs, labels):
    for key, op, vals in reqs:
        have = key in labels
        v = labels.get(key)
        if op == "=" and not (have and v in vals):
            return False
        if op == "!=" and have and v in vals:
            return False
        if op == "in" and not (have and v in vals):
            return False
        if op == "notin" and have and v in vals:
            return False
        if op == "exists" and not have:
            return False
        if op == "!exists" and have:
            return False
    return True


def parse_field_selector(text):
    reqs = []
    if not text:
        return reqs
    for part in text.split(","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        if m.group(1) not in FIELDS:
            raise SelectorError(f"field label not supported: {m.group(1)}")
        reqs.append((m.group(1), m.group(2) != "!=", m.group(3)))
    return reqs


def fields_match(reqs, pod):
    return all((FIELDS[f](pod) == v) == eq for f, eq, v in reqs)


# ---- pods as the API server serves them ------------------------------------------------------

def build_pod(d, ns, uid, rv, created, old=None):
    """A full core/v1 Pod from a short description (see the module doc)."""
    name = d["name"]
    phase = d.get("phase", "Pending")
    ready = bool(d.get("ready", phase == "Running" and not d.get("waiting")))
    node = d.get("node", "" if d.get("unschedulable") else "node-1")
    labels = dict(d.get("labels", {}))
    annotations = dict(d.get("annotations", {}))
    meta = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": str(rv),
            "creationTimestamp": created}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if d.get("deleting"):
        meta["deletionTimestamp"] = (old or {}).get("metadata", {}).get("deletionTimestamp") \
            or now_ts(30)
        meta["deletionGracePeriodSeconds"] = 30
    if d.get("owner"):
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": d["owner"],
                                    "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, d["owner"])),
                                    "controller": True, "blockOwnerDeletion": True}]
    meta["managedFields"] = [{
        "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": created, "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:containers": {}}}}]
    vol = "kube-api-access-" + uid[:5]
    spec = {
        "volumes": [{"name": vol, "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
            "defaultMode": 420}}],
        "containers": [{
            "name": "trainer", "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            "command": ["podrun", "train.py"], "resources": {},
            "volumeMounts": [{"name": vol, "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "serviceAccount": "default",
        "securityContext": {}, "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}],
        "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
    }
    if node:
        spec["nodeName"] = node
    for k in ("hostname", "subdomain"):
        if d.get(k):
            spec[k] = d[k]
    if d.get("init_waiting"):
        spec["initContainers"] = [dict(spec["containers"][0], name="init", command=["true"])]
    return {"metadata": meta, "spec": spec, "status": build_status(d, phase, ready, node, name,
                                                                     ns, uid, created)}


def _cond(ctype, ok, t, reason=None, message=None):
    c = {"type": ctype, "status": "True" if ok else "False", "lastProbeTime": None,
         "lastTransitionTime": t}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def build_status(d, phase, ready, node, name, ns, uid, t):
    if d.get("unschedulable"):
        return {"phase": "Pending", "conditions": [_cond(
            "PodScheduled", False, t, "Unschedulable", d["unschedulable"])],
            "qosClass": "BestEffort"}
    st = {"phase": phase}
    waiting = d.get("waiting")
    init_waiting = d.get("init_waiting")
    done = phase in ("Succeeded", "Failed")
    cont = {"name": "trainer", "lastState": {}, "ready": ready,
            "restartCount": int(d.get("restarts", 0)),
            "image": "docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            "imageID": "", "started": False}
    if init_waiting:
        cont["state"] = {"waiting": {"reason": "PodInitializing"}}
    elif waiting:
        w = {"reason": waiting}
        msg = d.get("waiting_message") or {
            "ImagePullBackOff": 'Back-off pulling image "pytorch/pytorch:2.3.0"',
            "ErrImagePull": 'failed to pull and unpack image "pytorch/pytorch:2.3.0": not found',
            "CrashLoopBackOff": f"back-off 40s restarting failed container=trainer "
                                f"pod={name}_{ns}({uid})",
        }.get(waiting)
        if msg:
            w["message"] = msg
        cont["state"] = {"waiting": w}
        if waiting == "CrashLoopBackOff":
            cont["lastState"] = {"terminated": {"exitCode": int(d.get("exit_code", 1)),
                                                "reason": "Error", "startedAt": t,
                                                "finishedAt": t,
                                                "containerID": "containerd://" + "e" * 64}}
    elif done:
        code = int(d.get("exit_code", 0 if phase == "Succeeded" else 1))
        cont["state"] = {"terminated": {"exitCode": code,
                                        "reason": "Completed" if code == 0 else "Error",
                                        "startedAt": t, "finishedAt": t,
                                        "containerID": "containerd://" + "d" * 64}}
    else:
        cont["state"] = {"running": {"startedAt": t}}
        cont["started"] = True
        cont["containerID"] = "containerd://" + "c" * 64
        cont["imageID"] = ("docker.io/pytorch/pytorch@sha256:" + "a" * 64)
    unready = None if ready else "containers with unready status: [trainer]"
    ready_reason = None if ready else ("PodCompleted" if done else "ContainersNotReady")
    st["conditions"] = [
        _cond("PodReadyToStartContainers", bool(d.get("ip", True)), t),
        _cond("Initialized", not init_waiting, t,
              "ContainersNotInitialized" if init_waiting else None,
              "containers with incomplete status: [init]" if init_waiting else None),
        _cond("Ready", ready, t, ready_reason, unready),
        _cond("ContainersReady", ready, t, ready_reason, unready),
        _cond("PodScheduled", True, t),
    ]
    st["hostIP"] = "172.18.0.2"
    st["hostIPs"] = [{"ip": "172.18.0.2"}]
    if d.get("ip"):
        st["podIP"] = d["ip"]
        st["podIPs"] = [{"ip": d["ip"]}]
    st["startTime"] = t
    if init_waiting:
        st["initContainerStatuses"] = [{
            "name": "init", "state": {"waiting": {"reason": init_waiting}}, "lastState": {},
            "ready": False, "restartCount": 0, "image": cont["image"], "imageID": "",
            "started": False}]
    st["containerStatuses"] = [cont]
    st["qosClass"] = "BestEffort"
    for k in ("reason", "message"):
        if d.get(k):
            st[k] = d[k]
    return st


# ---- the API ---------------------------------------------------------------------------------

class FakeAPI:
    """The state and both servers. Thread-safe; handlers run in their own threads."""

    def __init__(self, directory, namespace="default", port=0, bookmark_interval=1.0,
                 sa="default"):
        self.dir = str(directory)
        self.pki = tlsca.make_pki(os.path.join(self.dir, "pki"))
        self.token_path = os.path.join(self.dir, "token")
        if not os.path.exists(self.token_path):
            self._write_token("tok-" + uuid.uuid4().hex)
        self.namespace = namespace
        self.sa_user = f"system:serviceaccount:{namespace}:{sa}"
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.lock = threading.Condition()
        self.rv = 1000
        self.oldest_rv = self.rv            # watches may resume from here on
        self.pods = {}                      # (ns, name) -> pod object
        self.history = []                   # (rv, type, pod)
        self.watchers = set()
        self.denied = {}                    # user -> set of verbs
        self.requests = []
        self.server = None
        self.thread = None

    # -- state --

    def _write_token(self, tok):
        tmp = self.token_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(tok + "\n")
        os.replace(tmp, self.token_path)

    def token(self):
        with open(self.token_path) as f:
            return f.read().strip()

    def rotate_token(self, also_write=()):
        """A new token: the old one is refused from now on. The new one is also written to
        each path in also_write (a client's service-account token file)."""
        tok = "tok-" + uuid.uuid4().hex
        for p in also_write:
            tmp = p + ".tmp"
            with open(tmp, "w") as f:
                f.write(tok)
            os.replace(tmp, p)
        self._write_token(tok)
        return tok

    def _emit(self, etype, pod, old):
        self.history.append((self.rv, etype, copy.deepcopy(pod), copy.deepcopy(old)))
        for w in list(self.watchers):
            w.put(("event", etype, pod, old))
        self.lock.notify_all()

    def put_pod(self, d):
        """Creates or updates a pod from a short description; returns the object."""
        with self.lock:
            ns = d.get("namespace", self.namespace)
            key = (ns, d["name"])
            old = self.pods.get(key)
            self.rv += 1
            uid = old["metadata"]["uid"] if old else str(uuid.uuid4())
            created = old["metadata"]["creationTimestamp"] if old else now_ts()
            pod = build_pod(d, ns, uid, self.rv, created, old)
            self.pods[key] = pod
            self._emit("MODIFIED" if old else "ADDED", pod, old)
            return copy.deepcopy(pod)

    def delete_pod(self, name, namespace=None, graceful=False):
        """graceful: sets deletionTimestamp (MODIFIED), as the API server does at first;
        otherwise the pod goes (DELETED, with its last state)."""
        with self.lock:
            key = (namespace or self.namespace, name)
            old = self.pods.get(key)
            if not old:
                return False
            self.rv += 1
            pod = copy.deepcopy(old)
            pod["metadata"]["resourceVersion"] = str(self.rv)
            if graceful:
                pod["metadata"].setdefault("deletionTimestamp", now_ts(30))
                pod["metadata"]["deletionGracePeriodSeconds"] = 30
                self.pods[key] = pod
                self._emit("MODIFIED", pod, old)
            else:
                del self.pods[key]
                self._emit("DELETED", pod, old)
            return True

    def compact(self):
        """Forgets the history: a watch from any earlier resourceVersion gets 410 Gone."""
        with self.lock:
            self.rv += 1
            self.oldest_rv = self.rv
            self.history = []
            k8s_objects.objects(self).compact()

    def end_watches(self, expire=False):
        """Ends every open watch stream (as the API server does at its request timeout);
        expire=True first sends each an ERROR 410, as when it fell out of the history."""
        with self.lock:
            for w in list(self.watchers):
                w.put(("expire",) if expire else ("end",))
            k8s_objects.objects(self).end_watches(expire)

    def inject(self, line):
        """Sends `line` as is, as one more line of every open watch stream (garbage, or an
        ERROR event the server would send on an internal error)."""
        with self.lock:
            for w in list(self.watchers):
                w.put(("raw", line))

    def bookmark(self):
        with self.lock:
            for w in list(self.watchers):
                w.put(("bookmark",))

    def deny(self, verbs, user=None):
        with self.lock:
            self.denied[user or self.sa_user] = set(verbs)

    def request_log(self):
        with self.lock:
            return list(self.requests)

    def open_watches(self):
        with self.lock:
            return len(self.watchers)

    # -- servers --

    def _ssl_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.pki["server.crt"], self.pki["server.key"])
        ctx.load_verify_locations(self.pki["ca.crt"])
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    def start(self):
        srv = _Server(("127.0.0.1", self.port), _Handler)
        srv.api = self
        srv.ssl_ctx = self._ssl_context()
        self.port = srv.server_address[1]
        self.server = srv
        self.thread = threading.Thread(target=srv.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        """Stops listening and drops every connection, watches included (the state stays)."""
        if not self.server:
            return
        self.server.shutdown()
        self.server.server_close()
        self.end_watches()
        self.server.close_all()
        self.server = None

    def restart(self, down_for=0.0, compact=False, pods=()):
        """The API server goes away for down_for seconds. While it is away the pods in `pods`
        are created or updated and, with compact, the history is forgotten: a client must list
        again to learn what it missed."""
        self.stop()
        for d in pods:
            self.put_pod(d)
        if compact:
            self.compact()
        time.sleep(down_for)
        self.start()

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, path, token=True, client_cert=False, namespace=None, server=None):
        """Writes a kubeconfig for this server (CA inline), with the token or the client
        certificate (inline), and returns its path."""
        def b64(p):
            with open(p, "rb") as f:
                return base64.b64encode(f.read()).decode()
        user = {}
        if token:
            user["token"] = self.token()
        if client_cert:
            user["client-certificate-data"] = b64(self.pki["client.crt"])
            user["client-key-data"] = b64(self.pki["client.key"])
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {
                "server": server or self.url,
                "certificate-authority-data": b64(self.pki["ca.crt"])}}],
            "users": [{"name": "fake-user", "user": user}],
            "contexts": [{"name": "fake", "context": {
                "cluster": "fake", "user": "fake-user",
                "namespace": namespace or self.namespace}}],
        }
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path


class _Watcher:
    def __init__(self):
        self.q = queue.Queue()

    def put(self, item):
        self.q.put(item)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    ssl_ctx = None
    api = None

    def __init__(self, *a, **kw):
        self.conns = set()
        self.conns_lock = threading.Lock()
        self.closed = False
        super().__init__(*a, **kw)

    def finish_request(self, request, client_address):
        raw = request
        with self.conns_lock:
            # a connection accepted before the stop whose thread runs only after close_all:
            # dropped too, or it would serve (a watch, say) across a restart
            if self.closed:
                raw.close()
                return
            self.conns.add(raw)
        try:
            if self.ssl_ctx:
                request.settimeout(10)
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
                request.settimeout(None)
                # the TLS socket took the descriptor from raw (raw's shutdown would fail): it is
                # the one close_all must shut down, unless the stop came during the handshake
                with self.conns_lock:
                    self.conns.discard(raw)
                    if self.closed:
                        request.close()
                        return
                    self.conns.add(request)
            super().finish_request(request, client_address)
        except (ssl.SSLError, OSError):
            pass
        finally:
            with self.conns_lock:
                self.conns.discard(raw)
                self.conns.discard(request)

    def close_all(self):
        with self.conns_lock:
            self.closed = True
            for c in list(self.conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns.clear()

    def handle_error(self, request, client_address):
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"

    def log_message(self, fmt, *args):
        pass

    @property
    def api(self):
        return self.server.api

    def send_json(self, code, obj, ctype="application/json"):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", ctype)
        self.send_header("X-Kubernetes-Pf-Flowschema-Uid", str(uuid.uuid4()))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_status(self, code, reason, message, details=None):
        self.send_json(code, status_obj(code, reason, message, details))

    def user(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return self.api.sa_user if auth[7:].strip() == self.api.token() else None
        if isinstance(self.connection, ssl.SSLSocket):
            cert = self.connection.getpeercert()
            for rdn in (cert or {}).get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        return v
        return None

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        user = self.user()
        auth = self.headers.get("Authorization", "")
        with self.api.lock:
            self.api.requests.append({"method": "GET", "path": u.path, "query": q, "user": user,
                                      "auth": auth.split(" ")[0] if auth else ""})
        if user is None:
            return self.send_status(401, "Unauthorized", "Unauthorized")
        if u.path == "/version":
            return self.send_json(200, SERVER_VERSION)
        if u.path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [{
                                            "clientCIDR": "0.0.0.0/0",
                                            "serverAddress": f"127.0.0.1:{self.api.port}"}]})
        if u.path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": [k8s_objects.JOBSET_API_GROUP]})
        if u.path == "/api/v1":
            return self.send_json(200, self.resource_list())
        if k8s_objects.handle_get(self, u.path, q, user):
            return None
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?", u.path)
        if not m:
            return self.send_status(404, "NotFound", "the server could not find the requested "
                                    "resource")
        ns, name = m.group(1), m.group(2)
        watch = q.get("watch") in ("1", "true", "True")
        verb = "get" if name else ("watch" if watch else "list")
        if verb in self.api.denied.get(user, ()):
            msg = (f"User \"{user}\" cannot {verb} resource \"pods\" in API group \"\" in the "
                   f"namespace \"{ns}\"")
            details = {"name": name, "kind": "pods"} if name else {"kind": "pods"}
            head = f"pods \"{name}\" is forbidden" if name else "pods is forbidden"
            return self.send_status(403, "Forbidden", f"{head}: {msg}", details)
        if name:
            return self.get_pod(ns, name)
        try:
            lsel = parse_label_selector(q.get("labelSelector", ""))
            fsel = parse_field_selector(q.get("fieldSelector", ""))
        except SelectorError as e:
            return self.send_status(400, "BadRequest", str(e))
        if watch:
            return self.watch(ns, lsel, fsel, q)
        return self.list(ns, lsel, fsel, q)

    def _write_request(self, method):
        """A PATCH or POST (tests/fakes/k8s_objects.py): logged, authenticated, then served."""
        u = urllib.parse.urlsplit(self.path)
        user = self.user()
        with self.api.lock:
            self.api.requests.append({"method": method, "path": u.path, "user": user,
                                      "query": dict(urllib.parse.parse_qsl(u.query)),
                                      "content_type": self.headers.get("Content-Type", "")})
        if user is None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            return self.send_status(401, "Unauthorized", "Unauthorized")
        if method == "PATCH":
            return k8s_objects.handle_patch(self, u.path, user)
        return k8s_objects.handle_post(self, u.path, user)

    def do_PATCH(self):
        self._write_request("PATCH")

    def do_POST(self):
        self._write_request("POST")

    def resource_list(self):
        def res(name, kind, namespaced, verbs, short=None, singular=""):
            r = {"name": name, "singularName": singular, "namespaced": namespaced,
                 "kind": kind, "verbs": verbs}
            if short:
                r["shortNames"] = short
            return r
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            res("namespaces", "Namespace", False, ["create", "delete", "get", "list", "patch",
                                                   "update", "watch"], ["ns"], "namespace"),
            dict(res("pods", "Pod", True, POD_VERBS, ["po"], "pod"), categories=["all"]),
            res("pods/log", "Pod", True, ["get"]),
            res("pods/status", "Pod", True, ["get", "patch", "update"]),
            res("events", "Event", True, POD_VERBS, ["ev"], "event"),
        ]}

    def get_pod(self, ns, name):
        with self.api.lock:
            pod = self.api.pods.get((ns, name))
            pod = copy.deepcopy(pod) if pod else None
        if not pod:
            return self.send_status(404, "NotFound", f"pods \"{name}\" not found",
                                    {"name": name, "kind": "pods"})
        self.send_json(200, dict({"kind": "Pod", "apiVersion": "v1"}, **pod))

    def list(self, ns, lsel, fsel, q):
        limit = int(q.get("limit") or 0)
        start = ""
        with self.api.lock:
            rv = self.api.rv
            if q.get("continue"):
                try:
                    tok = json.loads(base64.b64decode(q["continue"]))
                    start, rv = tok["start"], int(tok["rv"])
                except (ValueError, KeyError):
                    return self.send_status(400, "BadRequest", "continue key is not valid")
                if rv < self.api.oldest_rv:
                    return self.send_status(
                        410, "Expired", "The provided continue parameter is too old to display "
                        "a consistent list result. You can start a new list without the continue "
                        "parameter, or use the continue token in this response to retrieve the "
                        "remainder of the results. Continuing with the provided token results in "
                        "an inconsistent list - objects that were created, modified, or deleted "
                        "between the time the first chunk was returned and now may show up in the "
                        "list.")
            pods = [copy.deepcopy(p) for (pns, pname), p in sorted(self.api.pods.items())
                    if pns == ns and pname > start
                    and labels_match(lsel, p["metadata"].get("labels", {}))
                    and fields_match(fsel, p)]
        meta = {"resourceVersion": str(rv)}
        if limit and len(pods) > limit:
            last = pods[limit - 1]["metadata"]["name"]
            meta["continue"] = base64.b64encode(json.dumps(
                {"v": "meta.k8s.io/v1", "rv": rv, "start": last}).encode()).decode()
            meta["remainingItemCount"] = len(pods) - limit
            pods = pods[:limit]
        self.send_json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                             "items": pods})

    # -- watch --

    def chunk(self, obj):
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, etype, pod):
        self.chunk({"type": etype, "object": dict({"kind": "Pod", "apiVersion": "v1"}, **pod)})

    def watch(self, ns, lsel, fsel, q):
        api = self.api
        w = _Watcher()
        rv_param = q.get("resourceVersion", "")
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true", "True")
        timeout = float(q.get("timeoutSeconds") or 0)

        def matches(p):
            return (p is not None and p["metadata"]["namespace"] == ns
                    and labels_match(lsel, p["metadata"].get("labels", {}))
                    and fields_match(fsel, p))

        with api.lock:
            if rv_param not in ("", "0"):
                try:
                    since = int(rv_param)
                except ValueError:
                    return self.send_status(400, "BadRequest",
                                            f"resourceVersion: Invalid value: \"{rv_param}\"")
                if since < api.oldest_rv:
                    backlog = None
                else:
                    backlog = [(t, p, o) for (rv, t, p, o) in api.history if rv > since]
            else:
                backlog = [("ADDED", p, None) for _, p in sorted(api.pods.items())]
            api.watchers.add(w)
            oldest = api.oldest_rv
        try:
            self.send_response(200)
            self.send_header("Audit-Id", str(uuid.uuid4()))
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            if backlog is None:
                self.chunk({"type": "ERROR", "object": status_obj(
                    410, "Expired", f"too old resource version: {rv_param} ({oldest - 1})")})
                return self.end_stream()
            for etype, pod, old in backlog:
                if not self.send_filtered(etype, pod, old, matches):
                    return None
            deadline = time.monotonic() + timeout if timeout else None
            next_bookmark = time.monotonic() + api.bookmark_interval
            while True:
                now = time.monotonic()
                if deadline and now >= deadline:
                    return self.end_stream()
                wait = next_bookmark - now if bookmarks else 1.0
                if deadline:
                    wait = min(wait, deadline - now)
                try:
                    item = w.q.get(timeout=max(wait, 0.01))
                except queue.Empty:
                    item = ("bookmark",) if bookmarks else ("idle",)
                if item[0] == "end":
                    return self.end_stream()
                if item[0] == "expire":
                    self.chunk({"type": "ERROR", "object": status_obj(
                        410, "Expired", f"too old resource version: {rv_param} ({oldest - 1})")})
                    return self.end_stream()
                if item[0] == "bookmark" and bookmarks:
                    with api.lock:
                        rv = api.rv
                    self.chunk({"type": "BOOKMARK", "object": {
                        "kind": "Pod", "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(rv), "creationTimestamp": None},
                        "spec": {"containers": None}, "status": {}}})
                    next_bookmark = time.monotonic() + api.bookmark_interval
                elif item[0] == "event":
                    self.send_filtered(item[1], item[2], item[3], matches)
                elif item[0] == "raw":
                    data = item[1].encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return None
        finally:
            with api.lock:
                api.watchers.discard(w)

    def send_filtered(self, etype, pod, old, matches):
        """What a watcher with a selector sees: a pod that starts matching is ADDED, one that
        stops matching is DELETED, as the API server's watch cache filters."""
        now, before = matches(pod), matches(old) if etype != "ADDED" else False
        if etype == "DELETED":
            if before or now:
                self.event("DELETED", pod)
        elif now and before:
            self.event("MODIFIED", pod)
        elif now:
            self.event("ADDED", pod)
        elif before:
            self.event("DELETED", pod)
        return True

    def end_stream(self):
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass
        self.close_connection = True


# ---- control channel (script mode) -----------------------------------------------------------

class _ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api = None

    def log_message(self, fmt, *args):
        pass

    def reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        api = self.api
        if self.path == "/requests":
            return self.reply(api.request_log())
        if self.path == "/token":
            return self.reply({"token": api.token()})
        if self.path == "/watches":
            return self.reply({"open": api.open_watches()})
        self.send_error(404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        arg = json.loads(self.rfile.read(n) or b"{}")
        api = self.api
        ops = {
            "/pod": lambda: api.put_pod(arg),
            "/pods": lambda: [api.put_pod(d)["metadata"]["name"] for d in arg],
            "/delete": lambda: api.delete_pod(arg["name"], arg.get("namespace"),
                                              arg.get("graceful", False)),
            "/compact": api.compact,
            "/rotate-token": lambda: api.rotate_token(arg.get("write", [])),
            "/end-watches": lambda: api.end_watches(arg.get("expire", False)),
            "/bookmark": api.bookmark,
            "/inject": lambda: api.inject(arg["line"]),
            "/deny": lambda: api.deny(arg.get("verbs", []), arg.get("user")),
            "/restart": lambda: api.restart(float(arg.get("down_for", 0)),
                                            arg.get("compact", False), arg.get("pods", ())),
        }
        op = ops.get(self.path)
        if not op:
            return self.send_error(404)
        self.reply({"result": op()})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="state: pki/, token")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    a = ap.parse_args()
    api = FakeAPI(a.dir, a.namespace, a.port, a.bookmark_interval).start()
    _ControlHandler.api = api
    ctl = ThreadingHTTPServer(("127.0.0.1", 0), _ControlHandler)
    ctl.daemon_threads = True
    print("PORT", api.port, "CONTROL", ctl.server_address[1], flush=True)
    ctl.serve_forever()


if __name__ == "__main__":
    main()
