"""The network-fault matrix's etcd side (test_faults_etcd.py): a job of agents on loopback
addresses (etcd_util.etcd_agent) against a real etcd cluster of three members (etcd_util.Etcd),
each agent running workers/ledger.sh, whose ledger directory shows whether a rank ever ran twice
at once, which worker lines were printed (each must be in the agents' output) and which worlds
and attempts started. The faults are put on etcd itself: its raft leader killed or frozen
(SIGSTOP), every member frozen. EtcdJob has the interface of faults.Job (the c10d matrix's), so
the cases of both read alike; record() writes the same rows to $PODRUN_FAULT_TABLE."""
import glob
import json
import os
import signal
import subprocess
import tempfile
import time

from cluster import WORKERS, Agent, Netns, leftovers, pid_alive, wait_for
from conftest import PODRUN, free_port
from etcd_util import ETCD, ETCDCTL, Etcd, etcd_agent

LEDGER_SH = os.path.join(WORKERS, "ledger.sh")
PEER_LOST, STORE_LOST = 171, 172
TERM = 2   # --term-timeout of every agent


class EtcdJob:
    """Agents `nodes` (default 0..nnodes-1) of one etcd job; agent i is node<i> on 127.0.0.(i+2),
    so in a full round node i is node rank i. More agents join later with add()."""

    def __init__(self, etcd, nnodes, extra=(), nodes=None, env=None, net=None):
        """net: an EtcdNet's namespaces; agent i then runs in namespace net.first_agent + i."""
        self.etcd, self.net = etcd, net
        self.nnodes = nnodes
        self.extra = ["--no-python", "--term-timeout", str(TERM), *extra]
        self.env = env or {}
        self.ledger = tempfile.mkdtemp(prefix="podrun-ledger-")
        self.marker = f"fault.{os.getpid()}.{free_port()}"
        self.rid = f"faults-{os.getpid()}-{free_port()}"
        self.agents, self.pids, self.ended = [], [], {}
        for i in (range(nnodes) if nodes is None else nodes):
            self.add(i)

    def add(self, i):
        env = {"LEDGER": self.ledger, **self.env}
        if self.net:
            k = self.net.first_agent + i
            a = Agent(["--nnodes", str(self.nnodes), "--nproc-per-node", "1", "--rdzv-backend",
                       "etcd", "--rdzv-endpoint", self.etcd.endpoints(), "--rdzv-id", self.rid,
                       "--local-addr", self.net.addr(k), "--node-name", f"node{i}", *self.extra,
                       LEDGER_SH, self.marker], env={"PODRUN_MASTER_PORT": "", **env},
                      prefix=self.net.prefix_cmd(k), name=f"node{i}")
        else:
            a = etcd_agent(i, self.nnodes, self.etcd.endpoints(), self.rid, LEDGER_SH,
                           extra=self.extra, env=env, script_args=[self.marker])
        self.agents.append(a)
        self.pids.append(a.proc.pid)
        return a

    def key(self, rest=""):
        return f"podrun/{self.rid}/{rest}"

    def joins(self):
        """How many agents' joins are in etcd."""
        return len([k for k in self.etcd.keys(self.key("n/")) if "/join/" in k])

    def up(self, world, restart=0):
        return glob.glob(os.path.join(self.ledger, f"up.w{world}.r{restart}.rank*"))

    def attempts(self):
        """The (world, restart) of every attempt whose workers started."""
        return sorted({tuple(int(x[1:]) for x in os.path.basename(f).split(".")[1:3])
                       for f in glob.glob(os.path.join(self.ledger, "up.*"))})

    def wait_up(self, world, restart=0, count=None, timeout=90):
        want = world if count is None else count

        def ready():
            for i, a in enumerate(self.agents):
                assert i in self.ended or a.proc.poll() is None or a.proc.returncode == 0, \
                    f"{a.name} exited ({a.proc.returncode}) early:\n{a.err_now()}"
            return len(self.up(world, restart)) >= want
        wait_for(ready, timeout, lambda: f"{want} workers of world {world} attempt {restart}: "
                 f"{os.listdir(self.ledger)}\n{self.errs()}")

    def ticks(self, rank, restart=0):
        n = 0
        for f in glob.glob(os.path.join(self.ledger, "lines.*")):
            with open(f) as fh:
                n += sum(f"tick rank={rank} restart={restart} " in line for line in fh)
        return n

    def wait_ticks(self, rank, more, restart=0, timeout=30):
        """Waits until the worker of `rank` ticked `more` more times than now: it runs on."""
        base = self.ticks(rank, restart)
        wait_for(lambda: self.ticks(rank, restart) >= base + more, timeout,
                 f"{more} more ticks of rank {rank}")

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

    def finish(self):
        open(os.path.join(self.ledger, "done"), "w").close()

    def wait_exit(self, who=None, timeout=60, t0=None):
        """Waits until the agents `who` (default all) exited; returns their codes. self.ended[i]
        is each one's time from t0 (default: now)."""
        t0 = time.monotonic() if t0 is None else t0
        who = range(len(self.agents)) if who is None else who

        def done():
            for i in who:
                if i not in self.ended and self.agents[i].proc.poll() is not None:
                    self.ended[i] = time.monotonic() - t0
            return all(i in self.ended for i in who)
        try:
            wait_for(done, timeout, lambda: "agents to exit:\n" + self.errs())
        except AssertionError:
            self.kill()
            raise
        for i in who:
            a = self.agents[i]
            a.out, a.err = a.out_now(), a.err_now()
        return [self.agents[i].proc.returncode for i in who]

    def kill(self):
        for a in self.agents:
            a.kill()

    def errs(self):
        return "\n".join(f"--- {a.name} ({a.proc.returncode})\n{a.err_now()[-3000:]}"
                         for a in self.agents)

    def check(self):
        """Once every agent has exited: no agent or worker left running, no rank ever held twice
        at once, every line a worker printed is in its agent's output."""
        assert not [p for p in self.pids if pid_alive(p)], "an agent is still running"
        wait_for(lambda: not leftovers(self.marker), 10,
                 lambda: f"the workers to go: {leftovers(self.marker)}")
        twice = glob.glob(os.path.join(self.ledger, "twice.*"))
        assert not twice, f"a rank ran twice at once: {twice}\n{self.errs()}"
        out = "".join(a.out_now() for a in self.agents)
        lost = []
        for f in glob.glob(os.path.join(self.ledger, "lines.*")):
            with open(f) as fh:
                lost += [line.rstrip("\n") for line in fh if line.rstrip("\n") not in out]
        assert not lost, f"{len(lost)} worker lines missing from the output: {lost[:5]}"


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


def record(case, outcome, seconds, bound):
    """One row of the fault table (scripts/fault-table), as faults.record writes it."""
    path = os.environ.get("PODRUN_FAULT_TABLE")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"case": case, "outcome": outcome, "seconds": round(seconds, 2),
                            "bound": bound}) + "\n")
