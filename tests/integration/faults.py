"""The network-fault matrix's harness (test_faults*.py): agents in network namespaces joined by a
bridge (cluster.Netns), and faults put on their links with packet filters in the namespaces:

- loss and partitions (two-way, one-way) are nftables rules in a table of the namespace's own
  (`numgen random mod 100 < P drop` for P % loss);
- delay, jitter and the reordering that jitter makes are a userspace delayer (nfq_delay.py) fed
  by an NFQUEUE rule in the namespace: each packet is held for its own random time and then let
  through, so TCP sees real late and out-of-order segments.

`tc netem` would do both, but it is a kernel module (sch_netem) that many kernels, this CI's
included, do not have; nftables and NFQUEUE are in every distribution kernel.

A Job runs workers/ledger.sh on every agent: the ledger directory it shares with the test shows
whether a rank ever ran twice at once (split brain), which worker lines were printed (each must
be in the agents' output: no log line lost), and which worlds and attempts started. Each case
records its outcome and its time to outcome in $PODRUN_FAULT_TABLE when that is set
(scripts/fault-table prints them as the table of doc/failures.md)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from cluster import WORKERS, Agent, Netns, leftovers, pid_alive, wait_for
from conftest import PODRUN

LEDGER_SH = os.path.join(WORKERS, "ledger.sh")
NFQ_DELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nfq_delay.py")
PEER_LOST, STORE_LOST = 171, 172

_NFT_TABLE = """table inet podrun_fault {
  chain in { type filter hook input priority 0; policy accept; }
  chain out { type filter hook output priority 0; policy accept; }
}
"""


class FaultNet(Netns):
    """Netns with a fault table in each host namespace; rules are added per fault and all of a
    namespace's go at once with heal()."""

    _count = 0

    def __init__(self, n):
        FaultNet._count += 1
        super().__init__(f"f{os.getpid() % 100000}{FaultNet._count}n", n)
        self.delayers, self.jobs = [], []
        try:
            for i in range(n):
                self.nft(i, _NFT_TABLE)
        except Exception:
            self.close()
            raise

    def nft(self, i, script):
        r = subprocess.run(self.prefix_cmd(i) + ["nft", "-f", "-"], input=script, text=True,
                           capture_output=True)
        assert r.returncode == 0, f"nft in {self.names[i]}: {r.stderr}\n{script}"

    def rule(self, i, chain, rule):
        self.nft(i, f"add rule inet podrun_fault {chain} {rule}\n")

    def deaf(self, i, j):
        """Namespace i no longer hears j (j's packets to i are dropped as they arrive)."""
        self.rule(i, "in", f"ip saddr {self.addr(j)} drop")

    def cut(self, side_a, side_b):
        """No packet between any node of side_a and any of side_b, either way."""
        for i in side_a:
            for j in side_b:
                self.deaf(i, j)
                self.deaf(j, i)

    def lose(self, i, percent):
        """percent % of the packets that leave namespace i, and of those that reach it, are lost
        (its loopback traffic aside)."""
        for chain, dev in (("in", "iifname"), ("out", "oifname")):
            self.rule(i, chain, f'{dev} != "lo" numgen random mod 100 < {percent} drop')

    def delay(self, i, lo_ms, hi_ms, ways=("INPUT", "OUTPUT")):
        """Every packet in and out (`ways`) of namespace i's link waits lo_ms to hi_ms (uniform,
        each its own: jitter, and with it reordering); returns once the delayer is in place."""
        dev = f"{self.prefix}h{i}"
        d = subprocess.Popen(self.prefix_cmd(i) + [sys.executable, NFQ_DELAY, str(lo_ms),
                                                  str(hi_ms)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.delayers.append(d)
        line = d.stdout.readline()
        assert line.startswith("ready"), f"nfq_delay: {line}{d.stderr.read()}"
        for chain in ways:
            way = "-i" if chain == "INPUT" else "-o"
            subprocess.run(self.prefix_cmd(i) + ["iptables-legacy", "-A", chain, way, dev,
                                                 "-j", "NFQUEUE", "--queue-num", "0",
                                                 "--queue-bypass"],
                           check=True, capture_output=True)
        return d

    def hosts(self, i, text):
        """What namespace i's /etc/hosts says from now on (`ip netns exec` binds
        /etc/netns/<name>/hosts over /etc/hosts for the programs it starts; give it before
        starting them). Written in place: the bind mount keeps the file, not the name."""
        d = f"/etc/netns/{self.names[i]}"
        os.makedirs(d, exist_ok=True)
        with open("/etc/hosts") as f:
            base = f.read()
        with open(os.path.join(d, "hosts"), "r+" if os.path.exists(d + "/hosts") else "w") as f:
            f.seek(0)
            f.write(base + text)
            f.truncate()

    def heal(self, nodes=None):
        for i in (range(self.n) if nodes is None else nodes):
            self.nft(i, "flush table inet podrun_fault\n")

    def close(self):
        """Kills what a failed case left running (each agent's session, by its own pid), then
        takes the network and the ledgers down."""
        for job in self.jobs:
            job.kill()
            shutil.rmtree(job.ledger, ignore_errors=True)
        for d in self.delayers:
            if d.poll() is None:
                d.kill()
            d.wait()
        for ns in self.names:
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        super().close()


class Job:
    """The agents of one c10d job, node i in namespace i named node<i> (so node i has node rank
    i in a full round), the store hosted by node `host`, each running workers/ledger.sh. All of
    the net's nodes start at once, or `nodes` of them (start() starts more later, in order)."""

    def __init__(self, net, port, nnodes, extra=(), host=0, nodes=None, env=None, name=None,
                 host_extra=(), etcd=None):
        """name: the endpoint's host name instead of the host's address; host_extra: flags for
        the host alone; etcd: the etcd backend, at these endpoints (then no agent hosts, and
        each one's own store takes a free port)."""
        self.net = net
        net.jobs.append(self)
        self.ledger = tempfile.mkdtemp(prefix="podrun-ledger-")
        self.marker = f"fault.{os.getpid()}.{port}"
        self.endpoint = etcd or f"{name or net.addr(host)}:{port}"
        self.run_id = f"faults-{os.getpid()}-{port}"
        self.env = {"LEDGER": self.ledger, **({"PODRUN_MASTER_PORT": ""} if etcd else {}),
                    **(env or {})}
        self.args = ["--nnodes", str(nnodes), "--nproc-per-node", "1",
                     "--rdzv-backend", "etcd" if etcd else "c10d",
                     "--rdzv-endpoint", self.endpoint, "--rdzv-id", self.run_id, "--no-python",
                     "--term-timeout", "2", *extra]
        self.host, self.host_extra = host, host_extra
        self.agents, self.pids, self.ended = [], [], {}
        for i in (range(net.n) if nodes is None else nodes):
            self.start(i)

    def start(self, i):
        args = self.args + ["--local-addr", self.net.addr(i), "--node-name", f"node{i}",
                            *(self.host_extra if i == self.host else ()), LEDGER_SH, self.marker]
        a = Agent(args, env=self.env, prefix=self.net.prefix_cmd(i), name=f"node{i}")
        self.agents.append(a)
        self.pids.append(a.proc.pid)
        return a

    def up(self, world, restart=0):
        """The names of the workers of attempt `restart` in a world of `world` that run."""
        return glob.glob(os.path.join(self.ledger, f"up.w{world}.r{restart}.rank*"))

    def wait_up(self, world, restart=0, count=None, timeout=60):
        """Waits until `count` (default: world) workers of that attempt run."""
        want = world if count is None else count

        def ready():
            for i, a in enumerate(self.agents):
                # an agent the case saw end (wait_exit) may have ended as it should
                assert i in self.ended or a.proc.poll() is None or a.proc.returncode == 0, \
                    f"{a.name} exited ({a.proc.returncode}) early:\n{a.err_now()}"
            return len(self.up(world, restart)) >= want
        wait_for(ready, timeout, lambda: f"{want} workers of world {world} attempt {restart}: "
                 f"{os.listdir(self.ledger)}")

    def ticks(self, rank, restart=0):
        """How many ticks the worker of that rank and attempt wrote so far."""
        n = 0
        for f in glob.glob(os.path.join(self.ledger, "lines.*")):
            with open(f) as fh:
                n += sum(f"tick rank={rank} restart={restart} " in l for l in fh)
        return n

    def wait_ticks(self, rank, more, restart=0, timeout=30):
        """Waits until the worker of `rank` ticked `more` more times than now: it runs on."""
        base = self.ticks(rank, restart)
        wait_for(lambda: self.ticks(rank, restart) >= base + more, timeout,
                 f"{more} more ticks of rank {rank}")

    def finish(self):
        open(os.path.join(self.ledger, "done"), "w").close()

    def fail(self, rank, restart=0):
        """The worker of `rank` in attempt `restart` fails (exit code 3) at its next tick."""
        open(os.path.join(self.ledger, f"fail.rank{rank}.r{restart}"), "w").close()

    def wait_exit(self, who=None, timeout=60, t0=None):
        """Waits until the agents `who` (indices into self.agents; default all) exited and
        returns their codes; self.ended[i] is each one's time from t0 (default: now)."""
        t0 = time.monotonic() if t0 is None else t0
        who = range(len(self.agents)) if who is None else who

        def done():
            for i in who:
                if i not in self.ended and self.agents[i].proc.poll() is not None:
                    self.ended[i] = time.monotonic() - t0
            return all(i in self.ended for i in who)
        try:
            wait_for(done, timeout, lambda: "agents " + ", ".join(
                self.agents[i].name for i in who if i not in self.ended) + " to exit:\n" +
                "\n".join(f"--- {a.name}\n{a.err_now()[-3000:]}" for a in self.agents))
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
        return "\n".join(f"--- {a.name} ({a.proc.returncode})\n{a.err_now()[-4000:]}"
                         for a in self.agents)

    def check(self):
        """What every case asserts at its end, once every agent has exited: no agent or worker
        left running, no rank ever held twice at once, every line a worker printed is in its
        agent's output."""
        assert not [p for p in self.pids if pid_alive(p)], "an agent is still running"
        gone = wait_for(lambda: not leftovers(self.marker), 10,
                        lambda: f"the workers to go: {leftovers(self.marker)}")
        assert gone
        twice = glob.glob(os.path.join(self.ledger, "twice.*"))
        assert not twice, f"a rank ran twice at once: {twice}\n{self.errs()}"
        out = "".join(a.out_now() for a in self.agents)
        lost = []
        for f in glob.glob(os.path.join(self.ledger, "lines.*")):
            with open(f) as fh:
                lost += [l.rstrip("\n") for l in fh if l.rstrip("\n") not in out]
        assert not lost, f"{len(lost)} worker lines missing from the output: {lost[:5]}"

    def status(self, i):
        """`podrun status --json` of the job, asked from namespace i (None if it fails)."""
        r = subprocess.run(self.net.prefix_cmd(i) + [PODRUN, "status", "--json", self.endpoint],
                           capture_output=True, text=True, timeout=30)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None


def record(case, outcome, seconds, bound):
    """One row of the fault table: what happened, how long it took from the fault (or from the
    fault's end, as the case says) and the documented bound it was held to."""
    path = os.environ.get("PODRUN_FAULT_TABLE")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"case": case, "outcome": outcome, "seconds": round(seconds, 2),
                            "bound": bound}) + "\n")
