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

from cluster import WORKERS, leftovers, pid_alive, wait_for
from conftest import PODRUN, free_port
from etcd_util import etcd_agent

LEDGER_SH = os.path.join(WORKERS, "ledger.sh")
PEER_LOST, STORE_LOST = 171, 172
TERM = 2   # --term-timeout of every agent


class EtcdJob:
    """Agents `nodes` (default 0..nnodes-1) of one etcd job; agent i is node<i> on 127.0.0.(i+2),
    so in a full round node i is node rank i. More agents join later with add()."""

    def __init__(self, etcd, nnodes, extra=(), nodes=None, env=None):
        self.etcd = etcd
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
        a = etcd_agent(i, self.nnodes, self.etcd.endpoints(), self.rid, LEDGER_SH,
                       extra=self.extra, env={"LEDGER": self.ledger, **self.env},
                       script_args=[self.marker])
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
        r = subprocess.run([PODRUN, "status", "--json", "--rdzv-backend", "etcd",
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
