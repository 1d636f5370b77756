"""Real etcd for the etcd backend's tests: Debian's etcd-server, one member or a cluster of
several, on loopback ports, with its data in a temporary directory (in /dev/shm, so fsync is
cheap), optionally with TLS and client certificates. The tests stop exactly the members they
started, by their own PIDs; etcdctl (etcd-client) reads what podrun left in etcd."""
import json
import os
import shutil
import signal
import subprocess
import tempfile

from conftest import TORCH_PY, free_port
from cluster import Agent, wait_for

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


class Etcd:
    def __init__(self, n=1, pki=None, host="127.0.0.1", prefix=()):
        """n members on host; prefix: the command that runs them and etcdctl (e.g. `ip netns
        exec NS`, for a cluster in a network namespace of its own)."""
        self.dir = tempfile.mkdtemp(prefix="podrun-etcd-", dir="/dev/shm")
        self.pki = pki
        self.host, self.prefix = host, list(prefix)
        self.scheme = "https" if pki else "http"
        self.client = [free_port() for _ in range(n)]
        self.peer = [free_port() for _ in range(n)]
        self.procs = [None] * n
        cluster = ",".join(f"m{i}=http://{host}:{self.peer[i]}" for i in range(n))
        self.args = []
        for i in range(n):
            url = f"{self.scheme}://{host}:{self.client[i]}"
            a = [ETCD, "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"m{i}"),
                 "--listen-client-urls", url, "--advertise-client-urls", url,
                 "--listen-peer-urls", f"http://{host}:{self.peer[i]}",
                 "--initial-advertise-peer-urls", f"http://{host}:{self.peer[i]}",
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--initial-cluster-token", os.path.basename(self.dir),
                 "--logger", "zap", "--log-level", "error"]
            if pki:
                a += ["--cert-file", pki["server.crt"], "--key-file", pki["server.key"],
                      "--client-cert-auth", "--trusted-ca-file", pki["ca.crt"]]
            self.args.append(a)
        try:
            for i in range(n):
                self.start(i)
            self.wait_healthy()
        except Exception:
            self.stop()
            raise

    def start(self, i):
        log = open(os.path.join(self.dir, f"m{i}.log"), "ab")
        self.procs[i] = subprocess.Popen(self.prefix + self.args[i], stdout=log, stderr=log,
                                         start_new_session=True)
        log.close()

    def endpoint(self, i):
        return f"{self.host}:{self.client[i]}"

    def endpoints(self, scheme=False):
        pre = f"{self.scheme}://" if scheme else ""
        return ",".join(pre + self.endpoint(i) for i in range(len(self.client)))

    def ctl(self, *args, i=None):
        eps = self.endpoints(scheme=True) if i is None else f"{self.scheme}://{self.endpoint(i)}"
        cmd = self.prefix + [ETCDCTL, "--endpoints", eps, "--dial-timeout", "2s", "--command-timeout", "5s"]
        if self.pki:
            cmd += ["--cacert", self.pki["ca.crt"], "--cert", self.pki["client.crt"],
                    "--key", self.pki["client.key"]]
        return subprocess.run(cmd + list(args), capture_output=True, text=True,
                              env={**os.environ, "ETCDCTL_API": "3"})

    def wait_healthy(self, timeout=20):
        def healthy():
            return (all(p.poll() is None for p in self.procs if p)
                    and self.ctl("endpoint", "health").returncode == 0)

        def logs():
            return "etcd to become healthy:\n" + "".join(
                open(os.path.join(self.dir, f)).read()[-2000:]
                for f in os.listdir(self.dir) if f.endswith(".log"))
        wait_for(healthy, timeout, logs, every=0.2)

    def keys(self, prefix="podrun/"):
        r = self.ctl("get", "--prefix", prefix, "--keys-only")
        assert r.returncode == 0, r.stderr
        return [k for k in r.stdout.splitlines() if k]

    def get(self, key):
        r = self.ctl("get", key, "--print-value-only")
        return r.stdout if r.returncode == 0 else ""

    def wait_for(self, key, text="", timeout=60):
        """Waits until key exists (and holds text); returns its value."""
        return wait_for(lambda: (lambda v: v if v and text in v else None)(self.get(key)),
                        timeout, f"etcd key {key} to hold {text!r}", every=0.1)

    def raft_leader(self):
        """The index of the member that is raft leader now."""
        r = self.ctl("endpoint", "status", "-w", "json")
        for i, st in enumerate(json.loads(r.stdout)):
            if st["Status"]["leader"] == st["Status"]["header"]["member_id"]:
                return [self.endpoint(k) for k in range(len(self.client))].index(
                    st["Endpoint"].split("://")[-1])
        raise AssertionError(f"no raft leader: {r.stdout} {r.stderr}")

    def kill(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(sig)
            if sig == signal.SIGKILL:
                p.wait()

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def etcd_agent(i, nnodes, endpoints, run_id, script, nproc=1, extra=(), env=None, script_args=()):
    """An agent on 127.0.0.(i+2) named node<i> on the etcd backend. Its own store takes a free
    port (the suite's PODRUN_MASTER_PORT is for single-node jobs)."""
    args = ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc), "--rdzv-backend", "etcd",
            "--rdzv-endpoint", endpoints, "--rdzv-id", run_id, "--local-addr", f"127.0.0.{i + 2}",
            "--node-name", f"node{i}", "--python", TORCH_PY, *extra, script, *script_args]
    return Agent(args, env={"PODRUN_MASTER_PORT": "", **(env or {})}, name=f"node{i}")
