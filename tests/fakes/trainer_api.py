"""tests/fakes/trainer_api.py — Kubeflow Trainer's status server as podrun meets it.

Kubeflow Trainer (2.2+, feature gate TrainJobStatus) serves, on its controller, HTTPS with the
webhook's certificate:

  POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status

with `Authorization: Bearer <projected service-account token>` and a JSON body that is an
UpdateTrainJobStatusRequest (pkg/apis/trainer/v1alpha1/trainjob_types.go). Its handler
(pkg/statusserver/server.go) answers 403 {Status Forbidden} for a token it does not accept, 422
{Status Invalid} for a body that does not decode into the Go types or that the CRD's validation
refuses, 404 {Status NotFound} for any other path, and 200 with the decoded request otherwise; the
body may hold at most 64 KiB. This fake does the same, checking each field against the Go struct
and its kubebuilder markers:

  trainerStatus              object (may be absent: 200, nothing applied)
    progressPercentage       int32, 0-100                     (optional)
    estimatedRemainingSeconds int32, >= 0                     (optional)
    metrics                  list of at most 256 {name, value}: strings of 1-64 characters
    lastUpdatedTime          RFC 3339 time (metav1.Time); required by the CRD's XValidation

It is stricter than Go's decoder in one way: a field the Go types do not have is refused (Go would
drop it silently), so a misspelt name fails a test instead of vanishing.

The real server verifies the token's signature, expiry and audience against the cluster's OIDC
issuer; here the accepted tokens are `tokens` (set them to rotate). Every request is kept in
`requests` as {"path", "auth", "code", "body"}; `status` is the TrainJob's trainerStatus as the
last accepted report left it (server-side apply by one field manager: each report replaces it).

Run as a program (for the C tests), it serves until killed:
  trainer_api.py --dir D --log FILE [--delay S]
prints "PORT <n>" once ready (the CA is D/pki/ca.crt, the accepted token "token-1"), appends one
JSON line per request to FILE once answered — {"code", "auth", "body", "concurrent": requests being
handled at once, this one included} — and with --delay answers each report S seconds late."""
import argparse
import datetime
import json
import os
import re
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlsca  # noqa: E402

MAX_BODY = 1 << 16
INT32_MAX = 2**31 - 1
PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/([^/]+)"
                  r"/status$")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class Invalid(Exception):
    pass


def _int32(v, where, lo=None, hi=None):
    # Go's decoder takes a JSON number without fraction or exponent into an int32
    if type(v) is not int or not -2**31 <= v <= INT32_MAX:
        raise Invalid(f"{where}: expected an int32, got {json.dumps(v)}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise Invalid(f"{where}: {v} is outside [{lo}, {hi}]")


def _string(v, where, lo=1, hi=64):
    if type(v) is not str:
        raise Invalid(f"{where}: expected a string, got {json.dumps(v)}")
    if not lo <= len(v) <= hi:   # the API server counts characters, as Python's len does
        raise Invalid(f"{where}: {len(v)} characters, expected {lo}-{hi}")


def _known(obj, fields, where):
    if type(obj) is not dict:
        raise Invalid(f"{where}: expected an object, got {json.dumps(obj)}")
    extra = set(obj) - set(fields)
    if extra:
        raise Invalid(f"{where}: unknown field(s) {sorted(extra)}; the Go type has {fields}")


def validate(body):
    """Raises Invalid unless body decodes into UpdateTrainJobStatusRequest and passes the CRD."""
    if body is None:
        return
    _known(body, ["trainerStatus"], "request")
    ts = body.get("trainerStatus")
    if ts is None:
        return
    _known(ts, ["progressPercentage", "estimatedRemainingSeconds", "metrics",
                "lastUpdatedTime"], "trainerStatus")
    if ts.get("progressPercentage") is not None:
        _int32(ts["progressPercentage"], "trainerStatus.progressPercentage", 0, 100)
    if ts.get("estimatedRemainingSeconds") is not None:
        _int32(ts["estimatedRemainingSeconds"], "trainerStatus.estimatedRemainingSeconds", 0)
    metrics = ts.get("metrics")
    if metrics is not None:
        if type(metrics) is not list or len(metrics) > 256:
            raise Invalid("trainerStatus.metrics: expected a list of at most 256")
        for i, m in enumerate(metrics):
            _known(m, ["name", "value"], f"trainerStatus.metrics[{i}]")
            _string(m.get("name"), f"trainerStatus.metrics[{i}].name")
            _string(m.get("value"), f"trainerStatus.metrics[{i}].value")
    t = ts.get("lastUpdatedTime")
    if t is None:
        raise Invalid("trainerStatus: lastUpdatedTime is required when trainerStatus is present")
    if type(t) is not str or not RFC3339.match(t):
        raise Invalid(f"trainerStatus.lastUpdatedTime: not an RFC 3339 time: {json.dumps(t)}")
    datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))


def status_object(code, reason, message):
    """metav1.Status as the handler's badRequest writes it (no kind/apiVersion set)."""
    return {"metadata": {}, "status": "Failure", "message": message, "reason": reason,
            "code": code}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, code, body):
        fake = self.server.fake
        with fake.lock:
            r = {"path": self.path, "auth": self.headers.get("Authorization"), "code": code,
                 "body": body, "concurrent": fake.active}
            fake.requests.append(r)
            if fake.log:
                with open(fake.log, "a") as f:
                    f.write(json.dumps(r) + "\n")

    def handle_one_request(self):
        """Counts the requests being handled at once: from the first byte of one (an idle
        kept-alive connection is none) to its answer."""
        fake = self.server.fake
        try:
            arrived = self.rfile.peek(1)
        except OSError:
            arrived = b""
        if not arrived:
            return super().handle_one_request()
        with fake.lock:
            fake.active += 1
        try:
            if fake.delay:
                time.sleep(fake.delay)   # the slow server under test
            super().handle_one_request()
        finally:
            with fake.lock:
                fake.active -= 1

    def do_POST(self):
        fake = self.server.fake
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.record(413, None)
            self.close_connection = True
            return self.answer(413, status_object(413, "RequestEntityTooLarge", "Too large"))
        raw = self.rfile.read(n)
        m = PATH.match(self.path)
        if not m:
            self.record(404, None)
            return self.answer(404, status_object(404, "NotFound", "Not found"))
        auth = (self.headers.get("Authorization") or "").split()
        if (len(auth) != 2 or auth[0].lower() != "bearer" or auth[1] not in fake.tokens
                or m.groups() != (fake.namespace, fake.name)):
            self.record(403, None)
            return self.answer(403, status_object(403, "Forbidden", "Forbidden"))
        try:
            body = json.loads(raw)
            validate(body)
        except (ValueError, Invalid) as e:
            self.record(422, raw.decode(errors="replace"))
            fake.invalid.append(str(e))
            return self.answer(422, status_object(422, "Invalid", "Invalid payload"))
        if fake.answer_code:
            self.record(fake.answer_code, body)
            return self.answer(fake.answer_code, status_object(fake.answer_code, "InternalError",
                                                               "Internal error"))
        self.record(200, body)
        with fake.lock:
            if body and body.get("trainerStatus") is not None:
                fake.status = body["trainerStatus"]
        return self.answer(200, body)

    do_GET = do_PUT = do_PATCH = lambda self: (self.record(404, None), self.answer(
        404, status_object(404, "NotFound", "Not found")))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass   # a client that gave up on a slow answer: what the tests make happen

    def get_request(self):
        sock, addr = super().get_request()
        return self.ssl_ctx.wrap_socket(sock, server_side=True), addr


class FakeTrainer:
    """The status server of one TrainJob, on 127.0.0.1 (a free port), HTTPS with a certificate
    from a CA made in `directory` (tlsca: ca.crt signs it, other-ca.crt does not)."""

    def __init__(self, directory, namespace="default", name="podrun-train"):
        self.pki = tlsca.make_pki(os.path.join(str(directory), "pki"))
        self.namespace, self.name = namespace, name
        self.tokens = {"token-1"}
        self.answer_code = 0          # non-zero: every valid report is answered with it
        self.requests, self.invalid = [], []
        self.status = None
        self.log, self.delay, self.active = None, 0.0, 0
        self.lock = threading.Lock()
        self.server = None

    @property
    def url(self):
        return (f"https://127.0.0.1:{self.port}/apis/trainer.kubeflow.org/v1alpha1/namespaces/"
                f"{self.namespace}/trainjobs/{self.name}/status")

    def start(self):
        srv = _Server(("127.0.0.1", 0), _Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.pki["server.crt"], self.pki["server.key"])
        srv.ssl_ctx, srv.fake = ctx, self
        self.port = srv.server_address[1]
        self.server = srv
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def accepted(self):
        """The bodies of the reports answered 200, in order."""
        with self.lock:
            return [r["body"] for r in self.requests if r["code"] == 200]


def metrics(body):
    """A report's metrics as {name: value}."""
    return {m["name"]: m["value"] for m in body["trainerStatus"].get("metrics", [])}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--delay", type=float, default=0.0)
    a = ap.parse_args()
    fake = FakeTrainer(a.dir)
    fake.log, fake.delay = a.log, a.delay
    fake.start()
    print(f"PORT {fake.port}", flush=True)
    threading.Event().wait()
