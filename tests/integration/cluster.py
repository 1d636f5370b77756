"""Several podrun agents on one machine: each on its own loopback address (127.0.0.x) or in its own
network namespace. Used by the multi-node and failure tests."""
import os
import signal
import subprocess
import time

from conftest import PODRUN, TORCH_PY

WORKERS = os.path.join(os.path.dirname(__file__), "workers")


class Agent:
    def __init__(self, args, env=None, prefix=(), name=""):
        self.name = name
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(list(prefix) + [PODRUN] + list(args), env=e,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.out = self.err = None

    def wait(self, timeout=60):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"agent {self.name} still running after {timeout}s\n"
                                 f"stdout:\n{out.decode(errors='replace')}\n"
                                 f"stderr:\n{err.decode(errors='replace')}")
        self.out, self.err = out.decode(errors="replace"), err.decode(errors="replace")
        return self.proc.returncode

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def agent_args(nnodes, nproc, endpoint, local_addr, run_id="job1", extra=(), script=None,
               script_args=()):
    args = ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id,
            "--local-addr", local_addr, "--python", TORCH_PY, *extra]
    args.append(script or os.path.join(WORKERS, "allreduce.py"))
    return args + list(script_args)


def start_agents(n, nproc, port, run_id="job1", extra=(), env=None, script=None,
                 order=None, delays=None):
    """Starts n agents on 127.0.0.2 … 127.0.0.(n+1), in `order`, waiting delays[i] seconds
    before agent i; the agent on 127.0.0.2 (the endpoint) hosts the store."""
    endpoint = f"127.0.0.2:{port}"
    agents = [None] * n
    for i in (order or range(n)):
        if delays and delays.get(i):
            time.sleep(delays[i])
        np = nproc[i] if isinstance(nproc, (list, tuple)) else nproc
        agents[i] = Agent(agent_args(n, np, endpoint,
                                     f"127.0.0.{2 + i}", run_id, extra, script),
                          env=env, name=f"node{i}")
    return agents


def wait_all(agents, timeout=60):
    return [a.wait(timeout) for a in agents]


def result_lines(agents, tag="allreduce "):
    lines = []
    for a in agents:
        for line in (a.out or "").splitlines():
            if tag in line:
                lines.append(line[line.index(tag):])
    return lines


def parse_kv(line):
    return dict(p.split("=", 1) for p in line.split()[1:])


def no_leftovers(marker):
    """True when no process whose command line contains `marker` is alive (no orphan, no zombie)."""
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    left = [l for l in out.splitlines() if marker in l and "ps -eo" not in l]
    return not left, left


class Netns:
    """A tiny switched network: namespace `<prefix>sw` holds a bridge; each host namespace
    `<prefix>N` gets a veth to it and the address 10.250.0.(N+1)/24. Torn down on close()."""

    def __init__(self, prefix, n):
        self.prefix, self.n = prefix, n
        self.names = [f"{prefix}{i}" for i in range(n)]
        sw = f"{prefix}sw"
        self._run("ip", "netns", "add", sw)
        self._run("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        self._run("ip", "-n", sw, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            self._run("ip", "netns", "add", ns)
            self._run("ip", "-n", ns, "link", "set", "lo", "up")
            self._run("ip", "link", "add", f"{prefix}h{i}", "netns", ns, "type", "veth",
                      "peer", "name", f"{prefix}p{i}", "netns", sw)
            self._run("ip", "-n", sw, "link", "set", f"{prefix}p{i}", "master", "br0", "up")
            self._run("ip", "-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", f"{prefix}h{i}")
            self._run("ip", "-n", ns, "link", "set", f"{prefix}h{i}", "up")

    @staticmethod
    def addr(i):
        return f"10.250.0.{i + 1}"

    def prefix_cmd(self, i):
        return ["ip", "netns", "exec", self.names[i]]

    def link_down(self, i):
        self._run("ip", "-n", f"{self.prefix}sw", "link", "set", f"{self.prefix}p{i}", "down")

    def close(self):
        for ns in self.names + [f"{self.prefix}sw"]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    @staticmethod
    def _run(*cmd):
        subprocess.run(cmd, check=True, capture_output=True)
