"""tests/fakes/k8s_objects.py — what tests/fakes/k8s_api.py serves beyond reading pods: a pod's
metadata PATCH, core/v1 Events, and JobSets (jobset.x-k8s.io/v1alpha2) with their status, with
the status codes, resourceVersions and Status objects the real API server sends.

  PATCH /api/v1/namespaces/NS/pods/NAME        application/merge-patch+json or
                                               strategic-merge-patch+json of metadata.labels and
                                               metadata.annotations (null deletes a key); 200 with
                                               the Pod, a new resourceVersion, a MODIFIED event;
                                               404, 415 (another patch type), 422 (spec), 403
  POST /api/v1/namespaces/NS/events            a core/v1 Event: 201 with it; 409 AlreadyExists,
                                               422 Invalid (no name, a type other than Normal or
                                               Warning, involvedObject.namespace elsewhere), 403
  GET  /api/v1/namespaces/NS/events            EventList; fieldSelector on involvedObject.name,
                                               .kind, .uid, .namespace, reason, type
  GET  /apis/jobset.x-k8s.io/v1alpha2/namespaces/NS/jobsets[/NAME]    JobSetList / JobSet
  GET  ...jobsets?watch=1&fieldSelector=metadata.name=NAME              its watch (ADDED,
                                               MODIFIED, DELETED, BOOKMARK; ERROR 410 for a
                                               resourceVersion older than the kept history)
Denials: FakeAPI.deny(["events:create", "pods:patch", "jobsets:get"]) — resource:verb.

The JobSet controller's part of in-place restart (kubernetes-sigs/jobset
pkg/controllers/in_place_restart.go) runs in reconcile_in_place after every change of a pod of
the JobSet: the pods' attempts (annotation jobset.sigs.k8s.io/in-place-restart-attempt, Failed
pods left out) give currentInPlaceRestartAttempt when every pod of the JobSet has the same one,
else previousInPlaceRestartAttempt = the highest - 1 (never lowered); a highest attempt past
failurePolicy.maxRestarts fails the JobSet. A test pauses it with objects(api).controller = False.
"""
import copy
import json
import queue
import re
import time
import uuid

ATTEMPT_KEY = "jobset.sigs.k8s.io/in-place-restart-attempt"
JOBSET_GROUP = "jobset.x-k8s.io"
# what /apis says of the group, and /apis/jobset.x-k8s.io/v1alpha2 of its resources
JOBSET_API_GROUP = {"name": JOBSET_GROUP, "versions": [
    {"groupVersion": f"{JOBSET_GROUP}/v1alpha2", "version": "v1alpha2"}],
    "preferredVersion": {"groupVersion": f"{JOBSET_GROUP}/v1alpha2", "version": "v1alpha2"}}
JOBSET_RESOURCES = {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": f"{JOBSET_GROUP}/v1alpha2", "resources": [
                        {"name": "jobsets", "singularName": "jobset", "namespaced": True,
                         "kind": "JobSet", "verbs": ["delete", "deletecollection", "get", "list",
                                                     "patch", "create", "update", "watch"]},
                        {"name": "jobsets/status", "singularName": "", "namespaced": True,
                         "kind": "JobSet", "verbs": ["get", "patch", "update"]}]}
JOBSET_PATH = re.compile(r"/apis/jobset\.x-k8s\.io/v1alpha2/namespaces/([^/]+)/jobsets"
                         r"(?:/([^/]+))?")
EVENTS_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/events(?:/([^/]+))?")
POD_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)")
EVENT_FIELDS = {
    "involvedObject.name": lambda e: e["involvedObject"].get("name", ""),
    "involvedObject.namespace": lambda e: e["involvedObject"].get("namespace", ""),
    "involvedObject.kind": lambda e: e["involvedObject"].get("kind", ""),
    "involvedObject.uid": lambda e: e["involvedObject"].get("uid", ""),
    "reason": lambda e: e.get("reason", ""),
    "type": lambda e: e.get("type", ""),
}


class Objects:
    """The state beside the pods, under the FakeAPI's lock and resourceVersion counter."""

    def __init__(self, api):
        self.api = api
        self.jobsets = {}          # (ns, name) -> JobSet
        self.js_history = []       # (rv, type, jobset)
        self.js_oldest = api.rv
        self.js_watchers = set()
        self.events = {}           # (ns, name) -> Event
        self.controller = True

    # -- JobSets --

    def put_jobset(self, name, replicas=1, parallelism=2, strategy="InPlaceRestart",
                   max_restarts=3, annotations=None, namespace=None):
        api = self.api
        with api.lock:
            ns = namespace or api.namespace
            api.rv += 1
            spec = {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {
                "spec": {"completions": parallelism, "parallelism": parallelism,
                         "backoffLimit": 2147483647, "podReplacementPolicy": "Failed",
                         "completionMode": "Indexed"}}}],
                "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                "successPolicy": {"operator": "All"}, "startupPolicy": {
                    "startupPolicyOrder": "AnyOrder"}}
            if strategy:
                spec["failurePolicy"] = {"maxRestarts": max_restarts,
                                         "restartStrategy": strategy}
            js = {"apiVersion": f"{JOBSET_GROUP}/v1alpha2", "kind": "JobSet",
                  "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()),
                               "resourceVersion": str(api.rv), "generation": 1,
                               "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime())},
                  "spec": spec,
                  "status": {"restarts": 0, "restartsCountTowardsMax": 0,
                             "replicatedJobsStatus": [{"name": "workers", "ready": 0,
                                                       "succeeded": 0, "failed": 0,
                                                       "active": replicas, "suspended": 0}]}}
            if annotations:
                js["metadata"]["annotations"] = dict(annotations)
            old = self.jobsets.get((ns, name))
            self.jobsets[(ns, name)] = js
            self._js_emit("MODIFIED" if old else "ADDED", js)
            return copy.deepcopy(js)

    def jobset(self, name, namespace=None):
        with self.api.lock:
            return copy.deepcopy(self.jobsets.get((namespace or self.api.namespace, name)))

    def _js_emit(self, etype, js):
        self.js_history.append((self.api.rv, etype, copy.deepcopy(js)))
        for q in list(self.js_watchers):
            q.put(("event", etype, copy.deepcopy(js)))
        self.api.lock.notify_all()

    def _js_status(self, js, **changes):
        """A status update: a new resourceVersion and a MODIFIED event."""
        st = js["status"]
        if all(st.get(k) == v for k, v in changes.items()):
            return
        st.update(changes)
        self.api.rv += 1
        js["metadata"]["resourceVersion"] = str(self.api.rv)
        self._js_emit("MODIFIED", js)

    def reconcile_in_place(self):
        """JobSet's controller, its in-place restart step, for every JobSet (under the lock)."""
        if not self.controller:
            return
        for (ns, name), js in self.jobsets.items():
            fp = js["spec"].get("failurePolicy") or {}
            if fp.get("restartStrategy") != "InPlaceRestart":
                continue
            pods = [p for (pns, _), p in self.api.pods.items() if pns == ns and
                    p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == name]
            attempts = [int(p["metadata"]["annotations"][ATTEMPT_KEY]) for p in pods
                        if p["status"].get("phase") != "Failed"
                        and ATTEMPT_KEY in p["metadata"].get("annotations", {})]
            total = sum(r["replicas"] * r["template"]["spec"]["parallelism"]
                        for r in js["spec"]["replicatedJobs"])
            st = js["status"]
            if max(attempts, default=0) - (st["restarts"] - st["restartsCountTowardsMax"]) \
                    > fp.get("maxRestarts", 0):
                self._js_status(js, terminalState="Failed", conditions=[{
                    "type": "Failed", "status": "True", "reason": "ReachedMaxRestarts",
                    "message": "jobset failed due to reaching max number of restarts",
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}])
                continue
            if len(attempts) == total and len(set(attempts)) == 1:
                self._js_status(js, currentInPlaceRestartAttempt=attempts[0])
                continue
            if not attempts or max(attempts) == 0:
                continue
            prev = max(attempts) - 1
            if st.get("previousInPlaceRestartAttempt") is None or \
                    prev > st["previousInPlaceRestartAttempt"]:
                self._js_status(js, previousInPlaceRestartAttempt=prev)

    def end_watches(self, expire=False):
        """Ends the JobSets' watch streams too (under the lock)."""
        for q in list(self.js_watchers):
            q.put(("expire",) if expire else ("end",))

    def compact(self):
        """The JobSets' history goes too (under the lock)."""
        self.js_oldest = self.api.rv
        self.js_history = []

    def set_controller(self, on):
        with self.api.lock:
            self.controller = on
            self.reconcile_in_place()


def objects(api):
    """The Objects of a FakeAPI, made on first use."""
    with api.lock:
        if not hasattr(api, "_objects"):
            api._objects = Objects(api)
        return api._objects


def _forbidden(h, user, verb, resource, group, ns, name=None):
    if f"{resource}:{verb}" not in h.api.denied.get(user, ()):
        return False
    grp = f"\"{group}\"" if group else "\"\""
    head = f"{resource}.{group} \"{name}\"" if group and name else \
        f"{resource} \"{name}\"" if name else f"{resource}.{group}" if group else resource
    h.send_status(403, "Forbidden", f"{head} is forbidden: User \"{user}\" cannot {verb} "
                  f"resource \"{resource}\" in API group {grp} in the namespace \"{ns}\"",
                  dict({"kind": resource, "group": group}, **({"name": name} if name else {})))
    return True


def _fields(text):
    reqs = []
    for part in filter(None, (text or "").split(",")):
        k, _, v = part.partition("=")
        reqs.append((k, v.lstrip("=")))
    return reqs


def handle_get(h, path, q, user):
    """A GET this module serves: True when answered."""
    if path == f"/apis/{JOBSET_GROUP}/v1alpha2":
        h.send_json(200, JOBSET_RESOURCES)
        return True
    m = EVENTS_PATH.fullmatch(path)
    if m:
        ns = m.group(1)
        if _forbidden(h, user, "list", "events", "", ns):
            return True
        reqs = _fields(q.get("fieldSelector"))
        for k, _ in reqs:
            if k not in EVENT_FIELDS:
                h.send_status(400, "BadRequest", f"\"{k}\" is not a known field selector: only "
                              f"\"{', '.join(EVENT_FIELDS)}\"")
                return True
        st = objects(h.api)
        with h.api.lock:
            items = [copy.deepcopy(e) for (ens, _), e in sorted(st.events.items())
                     if ens == ns and all(EVENT_FIELDS[k](e) == v for k, v in reqs)]
            rv = h.api.rv
        h.send_json(200, {"kind": "EventList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": str(rv)}, "items": items})
        return True
    m = JOBSET_PATH.fullmatch(path)
    if not m:
        return False
    ns, name = m.group(1), m.group(2)
    watch = q.get("watch") in ("1", "true", "True")
    verb = "get" if name else ("watch" if watch else "list")
    if _forbidden(h, user, verb, "jobsets", JOBSET_GROUP, ns, name):
        return True
    st = objects(h.api)
    if name:
        js = st.jobset(name, ns)
        if not js:
            h.send_status(404, "NotFound", f"jobsets.{JOBSET_GROUP} \"{name}\" not found",
                          {"name": name, "group": JOBSET_GROUP, "kind": "jobsets"})
        else:
            h.send_json(200, js)
        return True
    only = dict(_fields(q.get("fieldSelector"))).get("metadata.name")
    if watch:
        _watch(h, st, ns, only, q)
        return True
    with h.api.lock:
        items = [copy.deepcopy(j) for (jns, jn), j in sorted(st.jobsets.items())
                 if jns == ns and (only is None or jn == only)]
        rv = h.api.rv
    h.send_json(200, {"apiVersion": f"{JOBSET_GROUP}/v1alpha2", "kind": "JobSetList",
                      "metadata": {"resourceVersion": str(rv)}, "items": items})
    return True


def _watch(h, st, ns, only, q):
    api = h.api
    rv_param = q.get("resourceVersion", "")
    timeout = float(q.get("timeoutSeconds") or 0)
    bookmarks = q.get("allowWatchBookmarks") in ("1", "true", "True")
    mine = queue.Queue()

    def matches(js):
        return js["metadata"]["namespace"] == ns and (only is None or
                                                       js["metadata"]["name"] == only)
    with api.lock:
        if rv_param not in ("", "0"):
            since = int(rv_param) if rv_param.isdigit() else -1
            backlog = None if since < st.js_oldest else \
                [(t, j) for (rv, t, j) in st.js_history if rv > since]
        else:
            backlog = [("ADDED", j) for _, j in sorted(st.jobsets.items())]
        st.js_watchers.add(mine)
    try:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        if backlog is None:
            h.chunk({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f"too old resource version: {rv_param}", "reason": "Expired",
                "code": 410}})
            return h.end_stream()
        for t, j in backlog:
            if matches(j):
                h.chunk({"type": t, "object": copy.deepcopy(j)})
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            wait = 1.0 if not deadline else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                return h.end_stream()
            try:
                item = mine.get(timeout=wait)
            except queue.Empty:
                if bookmarks:
                    with api.lock:
                        rv = api.rv
                    h.chunk({"type": "BOOKMARK", "object": {
                        "apiVersion": f"{JOBSET_GROUP}/v1alpha2", "kind": "JobSet",
                        "metadata": {"resourceVersion": str(rv)}}})
                continue
            if item[0] == "end":
                return h.end_stream()
            if item[0] == "expire":
                h.chunk({"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": f"too old resource version: {rv_param}", "reason": "Expired",
                    "code": 410}})
                return h.end_stream()
            if matches(item[2]):
                h.chunk({"type": item[1], "object": item[2]})
    except OSError:
        return None
    finally:
        with api.lock:
            st.js_watchers.discard(mine)


def _read_body(h):
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n else b""


def handle_patch(h, path, user):
    m = POD_PATH.fullmatch(path)
    if not m:
        h.send_status(405, "MethodNotAllowed", "the server does not allow this method on the "
                      "requested resource")
        return
    ns, name = m.group(1), m.group(2)
    body = _read_body(h)
    if _forbidden(h, user, "patch", "pods", "", ns, name):
        return
    ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
    if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        h.send_status(415, "UnsupportedMediaType", f"the body of the request was in an unknown "
                      f"format - accepted media types include: application/json-patch+json, "
                      f"application/merge-patch+json, application/apply-patch+yaml")
        return
    try:
        patch = json.loads(body)
        assert isinstance(patch, dict)
    except (ValueError, AssertionError):
        h.send_status(400, "BadRequest", "error decoding patch: invalid character")
        return
    if set(patch) - {"metadata"} or set(patch.get("metadata", {})) - {"labels", "annotations"}:
        h.send_status(422, "Invalid", f"Pod \"{name}\" is invalid: spec: Forbidden: pod updates "
                      f"may not change fields other than metadata here")
        return
    api = h.api
    with api.lock:
        pod = api.pods.get((ns, name))
        if not pod:
            h.send_status(404, "NotFound", f"pods \"{name}\" not found",
                          {"name": name, "kind": "pods"})
            return
        old = copy.deepcopy(pod)
        for field in ("labels", "annotations"):
            for k, v in (patch.get("metadata", {}).get(field) or {}).items():
                cur = pod["metadata"].setdefault(field, {})
                if v is None:
                    cur.pop(k, None)
                elif not isinstance(v, str):
                    h.send_status(400, "BadRequest", f"json: cannot unmarshal number into Go "
                                  f"struct field ObjectMeta.metadata.{field} of type string")
                    api.pods[(ns, name)] = old
                    return
                else:
                    cur[k] = v
        api.rv += 1
        pod["metadata"]["resourceVersion"] = str(api.rv)
        api._emit("MODIFIED", pod, old)
        objects(api).reconcile_in_place()
        out = copy.deepcopy(pod)
    h.send_json(200, dict({"kind": "Pod", "apiVersion": "v1"}, **out))


def handle_post(h, path, user):
    m = EVENTS_PATH.fullmatch(path)
    body = _read_body(h)
    if not m or m.group(2):
        h.send_status(405, "MethodNotAllowed", "the server does not allow this method on the "
                      "requested resource")
        return
    ns = m.group(1)
    if _forbidden(h, user, "create", "events", "", ns):
        return
    try:
        ev = json.loads(body)
        assert isinstance(ev, dict)
    except (ValueError, AssertionError):
        h.send_status(400, "BadRequest", "the object provided is unrecognized")
        return
    meta = ev.get("metadata") or {}
    name = meta.get("name") or ""
    inv = ev.get("involvedObject") or {}
    errs = []   # (cause reason, field, message), as the API server's field errors
    if not name and not meta.get("generateName"):
        errs.append(("FieldValueRequired", "metadata.name",
                     "Required value: name or generateName is required"))
    if meta.get("namespace", ns) != ns:
        errs.append(("FieldValueInvalid", "metadata.namespace", "Invalid value: \"%s\": does "
                     "not match the namespace of the request" % meta.get("namespace")))
    if inv.get("namespace", ns) != ns:
        errs.append(("FieldValueInvalid", "involvedObject.namespace", "Invalid value: \"%s\": "
                     "does not match event.namespace" % inv.get("namespace")))
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(("FieldValueNotSupported", "type", "Unsupported value: \"%s\": supported "
                     "values: \"Normal\", \"Warning\"" % ev.get("type")))
    if errs:
        h.send_status(422, "Invalid", f"Event \"{name}\" is invalid: " +
                      ", ".join(f"{f}: {m}" for _, f, m in errs),
                      {"name": name, "kind": "Event", "causes": [
                          {"reason": r, "message": m, "field": f} for r, f, m in errs]})
        return
    api = h.api
    st = objects(api)
    with api.lock:
        if not name:
            name = meta["generateName"] + uuid.uuid4().hex[:5]
        if (ns, name) in st.events:
            h.send_status(409, "AlreadyExists", f"events \"{name}\" already exists",
                          {"name": name, "kind": "events"})
            return
        api.rv += 1
        ev["metadata"] = dict(meta, name=name, namespace=ns, uid=str(uuid.uuid4()),
                              resourceVersion=str(api.rv),
                              creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                              time.gmtime()))
        ev["apiVersion"], ev["kind"] = "v1", "Event"
        st.events[(ns, name)] = ev
        out = copy.deepcopy(ev)
    h.send_json(201, out)


def events(api, pod=None):
    """The Events stored, oldest first (optionally those of one pod)."""
    st = objects(api)
    with api.lock:
        evs = [copy.deepcopy(e) for e in st.events.values()
               if pod is None or e["involvedObject"].get("name") == pod]
    return sorted(evs, key=lambda e: int(e["metadata"]["resourceVersion"]))

