"""Several podrun agents on one machine: each on its own loopback address (127.0.0.x) or in its own
network namespace. Used by the multi-node and failure tests."""
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile

from conftest import PODRUN, TORCH_PY
from launch_util import wait_files, wait_for

WORKERS = os.path.join(os.path.dirname(__file__), "workers")


class Agent:
    """A podrun agent whose stdout and stderr go to files, so that a test can wait for a line
    while it runs (err_now, out_now, wait_err) and read all of it once it ended (out, err)."""

    def __init__(self, args, env=None, prefix=(), name=""):
        self.name = name
        e = dict(os.environ)
        e.update(env or {})
        self._files = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self.proc = subprocess.Popen(list(prefix) + [PODRUN] + list(args), env=e,
                                     stdout=self._files[0], stderr=self._files[1],
                                     start_new_session=True)
        self.out = self.err = None

    def _read(self, i):
        f = self._files[i]
        return os.pread(f.fileno(), os.fstat(f.fileno()).st_size, 0).decode(errors="replace")

    def out_now(self):
        return self._read(0)

    def err_now(self):
        return self._read(1)

    def wait_err(self, text, timeout=60):
        """Waits until the agent's stderr holds text (failing at once if it exited first)."""
        def seen():
            if text in self.err_now():
                return True
            assert self.proc.poll() is None, \
                f"agent {self.name} exited ({self.proc.returncode}) before saying {text!r}:\n" \
                f"{self.err_now()}"
            return False
        wait_for(seen, timeout, lambda: f"{text!r} from agent {self.name}:\n{self.err_now()}")

    def wait(self, timeout=60):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            raise AssertionError(f"agent {self.name} still running after {timeout}s\n"
                                 f"stdout:\n{self.out_now()}\nstderr:\n{self.err_now()}")
        self.out, self.err = self.out_now(), self.err_now()
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
                 order=None, before=None):
    """Starts n agents on 127.0.0.2 … 127.0.0.(n+1), in `order`, calling before[i](agents)
    before agent i (a wait for what the others must have done by then); the agent on
    127.0.0.2 (the endpoint) hosts the store."""
    endpoint = f"127.0.0.2:{port}"
    agents = [None] * n
    for i in (order or range(n)):
        if before and before.get(i):
            before[i]([a for a in agents if a])
        np = nproc[i] if isinstance(nproc, (list, tuple)) else nproc
        agents[i] = Agent(agent_args(n, np, endpoint,
                                     f"127.0.0.{2 + i}", run_id, extra, script),
                          env=env, name=f"node{i}")
    return agents


@contextlib.contextmanager
def killed_on_failure(agents):
    """Kills the agents (their sessions) when the block fails: a job whose workers wait for the
    test's word is not left running by a wait that failed."""
    try:
        yield
    except BaseException:
        for a in agents:
            a.kill()
        raise


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


def leftovers(marker):
    """The processes whose command line contains `marker` (orphans and zombies included)."""
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if marker in l and "ps -eo" not in l]


def no_leftovers(marker, timeout=10):
    """(True, []) once no process whose command line contains `marker` is alive, waiting up to
    timeout s for the last ones to be reaped; (False, those left) after that. The workers
    that carry a marker would run for minutes, so one left behind is still there then."""
    try:
        wait_for(lambda: not leftovers(marker), timeout, "the marked processes to go")
    except AssertionError:
        pass
    left = leftovers(marker)
    return not left, left


def started_dir():
    """A directory in which fail.sh workers say they run (their env: STARTED_DIR); removed when
    the test run ends."""
    d = tempfile.mkdtemp(prefix="podrun-started-")
    atexit.register(shutil.rmtree, d, True)
    return d


def wait_started(d, n, timeout=60, pattern="*", agents=()):
    """Waits until n fail.sh workers (pattern: e.g. "w3.*" for a world of 3) said they run."""
    return wait_files(d, n, timeout, pattern, alive=[a.proc for a in agents])


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
