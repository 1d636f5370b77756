"""The network-fault matrix's etcd side (test_faults_etcd.py): a job of agents on loopback
addresses (etcd_util.etcd_agent) against a real etcd cluster of three members (etcd_util.Etcd),
each agent running workers/ledger.sh, whose ledger directory shows whether a rank ever ran twice
at once, which worker lines were printed (each must be in the agents' output) and which worlds
and attempts started. The faults are put on etcd itself: its raft leader killed or frozen
(SIGSTOP), every member frozen. EtcdJob is a faults.Job (the c10d matrix's) whose agents use
etcd, so the cases of both read alike; record() is faults.record."""
import glob
import json
import os
import signal
import subprocess
import tempfile
import time

import faults
from cluster import WORKERS, Agent, Netns, wait_for
from conftest import PODRUN, free_port
from etcd_util import ETCD, ETCDCTL, Etcd, etcd_agent
from faults import record  # noqa: F401  (the cases' one writer of the fault table)

LEDGER_SH = os.path.join(WORKERS, "ledger.sh")
PEER_LOST, STORE_LOST = 171, 172
TERM = 2   # --term-timeout of every agent


class EtcdJob(faults.Job):
    """Agents `nodes` (default 0..nnodes-1) of one etcd job; agent i is node<i> on 127.0.0.(i+2),
    so in a full round node i is node rank i. More agents join later with start(). What the
    cases wait for and check is faults.Job's: the same ledger, the same assertions."""

    def __init__(self, etcd, nnodes, extra=(), nodes=None, env=None, net=None):
        """net: an EtcdNet's namespaces; agent i then runs in namespace net.first_agent + i."""
        self.etcd, self.net = etcd, net
        self.nnodes = nnodes
        self.extra = ["--no-python", "--term-timeout", str(TERM), *extra]
        self.ledger = tempfile.mkdtemp(prefix="podrun-ledger-")
        self.env = {"LEDGER": self.ledger, **(env or {})}
        self.marker = f"fault.{os.getpid()}.{free_port()}"
        self.rid = f"faults-{os.getpid()}-{free_port()}"
        self.agents, self.pids, self.ended = [], [], {}
        for i in (range(nnodes) if nodes is None else nodes):
            self.start(i)

    def start(self, i):
        if self.net:
            k = self.net.first_agent + i
            a = Agent(["--nnodes", str(self.nnodes), "--nproc-per-node", "1", "--rdzv-backend",
                       "etcd", "--rdzv-endpoint", self.etcd.endpoints(), "--rdzv-id", self.rid,
                       "--local-addr", self.net.addr(k), "--node-name", f"node{i}", *self.extra,
                       LEDGER_SH, self.marker], env={"PODRUN_MASTER_PORT": "", **self.env},
                      prefix=self.net.prefix_cmd(k), name=f"node{i}")
        else:
            a = etcd_agent(i, self.nnodes, self.etcd.endpoints(), self.rid, LEDGER_SH,
                           extra=self.extra, env=self.env, script_args=[self.marker])
        self.agents.append(a)
        self.pids.append(a.proc.pid)
        return a

    def key(self, rest=""):
        return f"podrun/{self.rid}/{rest}"

    def joins(self):
        """How many agents' joins are in etcd."""
        return len([k for k in self.etcd.keys(self.key("n/")) if "/join/" in k])

    def attempts(self):
        """The (world, restart) of every attempt whose workers started."""
        return sorted({tuple(int(x[1:]) for x in os.path.basename(f).split(".")[1:3])
                       for f in glob.glob(os.path.join(self.ledger, "up.*"))})

    def wait_up(self, world, restart=0, count=None, timeout=90):
        super().wait_up(world, restart, count, timeout)

    def view(self):
        """The coordinator's record for `podrun status` (P view) as JSON, or None."""
        prefix = self.net.prefix_cmd(self.net.first_agent) if self.net else []
        r = subprocess.run(prefix + [PODRUN, "status", "--json", "--rdzv-backend", "etcd",
                            "--rdzv-endpoint", self.etcd.endpoints(), "--rdzv-id", self.rid,
                            "--timeout", "2"], capture_output=True, text=True, timeout=30)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def wait_coordinated_after(self, t, timeout=60):
        """Waits until the coordinator wrote the job's view at a time after t (epoch s), with
        every node of the round running: the job is coordinated through etcd again."""
        def fresh():
            v = self.view()
            return v and v["time"] > t and v["phase"] == "running" and \
                len(v["nodes"]) == self.nnodes and \
                all(n["state"] == "running" for n in v["nodes"]) and v
        return wait_for(fresh, timeout, lambda: f"the job's view after {t}: {self.view()}\n"
                        f"{self.errs()}", every=0.2)


_NFT_TABLE = """table inet podrun_fault {
  chain in { type filter hook input priority 0; policy accept; }
}
"""


class EtcdNet(Etcd):
    """An etcd cluster of n members, member i alone in namespace i of a bridged network
    (cluster.Netns), with `agents` namespaces after them for the job's agents; a member can be cut
    from the other members (partition) while the agents still reach it. etcdctl runs from the
    first agent's namespace."""

    def __init__(self, n, agents):
        self.net = Netns(f"pe{os.getpid() % 100000}{free_port() % 100}n", n + agents)
        self.net.first_agent = n
        self.dir = tempfile.mkdtemp(prefix="podrun-etcd-", dir="/dev/shm")
        self.pki, self.scheme = None, "http"
        self.client, self.peer = [2379] * n, [2380] * n   # each member has an address of its own
        self.procs = [None] * n
        addr = self.net.addr
        cluster = ",".join(f"m{i}=http://{addr(i)}:2380" for i in range(n))
        self.args = [[ETCD, "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"m{i}"),
                      "--listen-client-urls", f"http://{addr(i)}:2379",
                      "--advertise-client-urls", f"http://{addr(i)}:2379",
                      "--listen-peer-urls", f"http://{addr(i)}:2380",
                      "--initial-advertise-peer-urls", f"http://{addr(i)}:2380",
                      "--initial-cluster", cluster, "--initial-cluster-state", "new",
                      "--initial-cluster-token", os.path.basename(self.dir),
                      "--logger", "zap", "--log-level", "error"] for i in range(n)]
        try:
            for i in range(n):
                subprocess.run(self.net.prefix_cmd(i) + ["nft", "-f", "-"], check=True,
                               capture_output=True, text=True, input=_NFT_TABLE)
                self.start(i)
            self.wait_healthy()
        except Exception:
            self.stop()
            raise

    def start(self, i):
        log = open(os.path.join(self.dir, f"m{i}.log"), "ab")
        self.procs[i] = subprocess.Popen(self.net.prefix_cmd(i) + self.args[i], stdout=log,
                                         stderr=log, start_new_session=True)
        log.close()

    def endpoint(self, i):
        return f"{self.net.addr(i)}:2379"

    def ctl(self, *args, i=None):
        eps = self.endpoints(scheme=True) if i is None else f"http://{self.endpoint(i)}"
        return subprocess.run(self.net.prefix_cmd(self.net.first_agent) +
                              [ETCDCTL, "--endpoints", eps, "--dial-timeout", "2s",
                               "--command-timeout", "5s", *args], capture_output=True, text=True,
                              env={**os.environ, "ETCDCTL_API": "3"})

    def partition(self, m):
        """Member m hears none of the other members and they none of it; the agents still
        reach every member."""
        others = [i for i in range(len(self.procs)) if i != m]
        for i in others:
            self._drop(i, m)
            self._drop(m, i)

    def _drop(self, i, j):
        subprocess.run(self.net.prefix_cmd(i) + ["nft", "add", "rule", "inet", "podrun_fault",
                                                 "in", "ip", "saddr", self.net.addr(j), "drop"],
                       check=True, capture_output=True)

    def member_of(self, agent, k):
        """1 + the index of a member the agent (in namespace k) has a connection to; None
        when it has none."""
        out = subprocess.run(self.net.prefix_cmd(k) + ["ss", "-Htnp"], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            if f"pid={agent.proc.pid}," in line:
                for i in range(len(self.procs)):
                    if f" {self.endpoint(i)} " in line:
                        return i + 1
        return None

    def stop(self):
        super().stop()
        self.net.close()


def freeze(etcd, members):
    """SIGSTOP to the members: they hold their connections and answer nothing."""
    for i in members:
        etcd.procs[i].send_signal(signal.SIGSTOP)


def thaw(etcd, members):
    for i in members:
        etcd.procs[i].send_signal(signal.SIGCONT)
